# Sourced by ./decodiff: the JVM's startup cache (JDK 25's AOT cache: classes loaded and linked ahead of time, with
# the method profiles of a training run), made by one training run and kept beside the jars.
#
# startup_cache_option CACHE CLASSPATH JAVA-ARGUMENT... prints "-XX:AOTCache=CACHE" when CACHE holds a cache this JDK
# made from these jars. It (re)makes the cache first when there is none yet, or the jars, the JDK or the JVM options changed since:
# `java -XX:AOTCacheOutput=CACHE -cp CLASSPATH JAVA-ARGUMENT...` is the training run (the JVM options, the main
# class and the workload), its output goes to CACHE.log. If that fails (a JDK without the option, a read-only folder)
# it prints nothing and the run starts without a cache; it does not try again until the jars or the JDK change. In a
# folder the user cannot write to it makes nothing and says nothing.
# A cache the JVM cannot use (stale, corrupt, unreadable) only costs the speed-up: the JVM falls back to loading
# classes as usual, and the launcher's -Xlog:aot=off keeps it from saying so on stdout.
startup_cache_option() {
  local cache="$1" cp="$2"; shift 2
  local stamp="$cache.jdk" jdk jars=() parts part
  # the JDK and the JVM options: a cache made under other options (the launcher's changed) is made again
  jdk="$JAVA_HOME $(grep -s '^JAVA_RUNTIME_VERSION=' "$JAVA_HOME/release" || true) $*"
  IFS=: read -ra parts <<<"$cp"
  for part in "${parts[@]}"; do
    case "$part" in
      *'*') jars+=("${part%\*}"*.jar) ;;
      *) jars+=("$part") ;;
    esac
  done
  if [ -w "$(dirname "$cache")" ] && { [ ! -f "$stamp" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$jdk" ] ||
      [ -n "$(find "${jars[@]}" -newer "$stamp" -print -quit 2>/dev/null)" ]; }; then
    echo "decodiff: making the JVM's startup cache (once per build)..." >&2
    local tmp="$cache.$$.tmp"
    rm -f "$cache"
    if "$JAVA_HOME/bin/java" -XX:AOTCacheOutput="$tmp" -Xlog:aot=off -Xlog:cds=off -cp "$cp" "$@" >"$cache.log" 2>&1 && [ -s "$tmp" ]; then
      mv -f "$tmp" "$cache"
    else
      rm -f "$tmp" "$tmp.config"
    fi
    # written whether or not the training run succeeded, so that a JDK without the option is not asked again each run
    printf '%s\n' "$jdk" >"$stamp" 2>/dev/null || true
  fi
  if [ -f "$cache" ]; then printf -- '-XX:AOTCache=%s\n' "$cache"; fi
}
