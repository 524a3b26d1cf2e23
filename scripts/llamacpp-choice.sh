# The launcher's choice of llama.cpp, sourced by ./decodiff (and its test):
#   llamacpp_choice ROOT ARGS...   prints the -Ddecodiff.llamacpp.lib=DIR option to pass to the JVM, or nothing.
# An explicit choice ($DECODIFF_LLAMACPP_LIB, or -Ddecodiff.llamacpp.lib=DIR in $DECODIFF_JAVA_OPTS) is the JVM's to
# read and wins: nothing is printed. Otherwise a command that asks for llama.cpp gets, for `bench`, the native build of
# scripts/llamacpp-native.sh when it is made (never started from here), else the pinned prebuilt release, fetched once
# by npm (a failure to fetch returns 2); any other command gets the prebuilt only if it is cached already.
llamacpp_choice() {
  local root="$1" lib
  shift
  if [ -n "${DECODIFF_LLAMACPP_LIB:-}" ] || [[ " ${DECODIFF_JAVA_OPTS:-} " == *" -Ddecodiff.llamacpp.lib="* ]]; then
    return 0
  fi
  case " $* " in
    *" llama.cpp "*|*"=llama.cpp "*)
      if [ "${1:-}" = bench ] && lib="$("$root/scripts/llamacpp-native.sh" --cached)"; then :
      else lib="$("$root/scripts/llamacpp.sh")" || return 2; fi
      echo "-Ddecodiff.llamacpp.lib=$lib" ;;
    *) if lib="$("$root/scripts/llamacpp.sh" --cached)"; then echo "-Ddecodiff.llamacpp.lib=$lib"; fi ;;
  esac
}
