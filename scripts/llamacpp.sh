#!/usr/bin/env bash
# Sets up llama.cpp for decodiff's `--engine llama.cpp`: fetches node-llama-cpp's prebuilt Linux x64 libraries and the
# matching llama.cpp sources (headers, the Gemma 4 graph) from the npm registry, pinned by version and sha256, and
# caches them under ${XDG_CACHE_HOME:-$HOME/.cache}/decodiff/llama.cpp-<version>. Prints the library folder on stdout.
#
#   scripts/llamacpp.sh            fetch if needed, print the library folder
#   scripts/llamacpp.sh --cached   print the library folder only if already cached (exit 1 otherwise; never fetches)
#   scripts/llamacpp.sh --with-converter
#                                  also make sure llama.cpp's Python converter is cached beside it (./run-tests: the
#                                  GGUF converter's tests run its Gemma 4 code against decodiff's files)
#
# Nothing else downloads llama.cpp: the launcher and ./run-tests call this script and pass the folder to Java as
# -Ddecodiff.llamacpp.lib=<folder>.
set -euo pipefail

here="$(cd "$(dirname "$(readlink -f "$0")")" && pwd)"
. "$here/llamacpp-pin.sh"
VERSION=$LLAMACPP_PACKAGE_VERSION
BIN_PKG=$LLAMACPP_BIN_PKG BIN_TGZ=$LLAMACPP_BIN_TGZ BIN_SHA256=$LLAMACPP_BIN_SHA256
SRC_PKG=$LLAMACPP_SRC_PKG SRC_TGZ=$LLAMACPP_SRC_TGZ SRC_SHA256=$LLAMACPP_SRC_SHA256

cache="${XDG_CACHE_HOME:-$HOME/.cache}/decodiff/llama.cpp-$VERSION"
lib="$cache/lib"
# llama.cpp's Python converter and gguf-py, beside the cache (the GGUF converter's tests run its Gemma 4 code).
conv="$cache-converter"
need_conv=0
[ "${1:-}" = "--with-converter" ] && need_conv=1

# .complete holds the layout of the cache; an older layout is fetched again. LlamaCppHome.CACHE_LAYOUT (Java) reads
# the same number: change both together.
LAYOUT=2
if [ -f "$cache/.complete" ] && [ "$(cat "$cache/.complete")" = "$LAYOUT" ] && { [ "$need_conv" = 0 ] || [ -f "$conv/.complete" ]; }; then
  echo "$lib"
  exit 0
fi
[ "${1:-}" = "--cached" ] && exit 1

say() { echo "llamacpp.sh: $*" >&2; }

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  say "the bundled llama.cpp build is for Linux x86-64; this machine is $(uname -s)-$(uname -m)"
  exit 2
fi
if ! command -v npm >/dev/null 2>&1; then
  say "npm is needed once to fetch llama.cpp ($BIN_PKG and $SRC_PKG from the npm registry) and was not found."
  say "Install Node.js with npm (Debian/Ubuntu: apt-get install npm), then run scripts/llamacpp.sh again."
  exit 2
fi
for tool in tar git sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || { say "'$tool' is needed to unpack llama.cpp and was not found; install it and run again."; exit 2; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fetch() { # package, file name, sha256
  say "fetching $1 from the npm registry..."
  if ! (cd "$work" && npm pack --silent "$1" >/dev/null 2>"$work/npm.log"); then
    cat "$work/npm.log" >&2
    say "npm pack $1 failed (is the npm registry reachable?)"
    exit 2
  fi
  local got
  got="$(sha256sum "$work/$2" | cut -d' ' -f1)"
  if [ "$got" != "$3" ]; then
    say "$2 has sha256 $got, expected $3: refusing to use it"
    exit 2
  fi
}

fetch "$BIN_PKG" "$BIN_TGZ" "$BIN_SHA256"
fetch "$SRC_PKG" "$SRC_TGZ" "$SRC_SHA256"

stage="$cache.partial"
rm -rf "$stage"
mkdir -p "$stage/lib" "$stage/src"
tar xzf "$work/$BIN_TGZ" -C "$work" package/bins/linux-x64
cp "$work"/package/bins/linux-x64/*.so "$work"/package/bins/linux-x64/_nlcBuildMetadata.json "$stage/lib/"
# The sources: only what the bindings and the capture table are written against (headers, the Gemma 4 graph), and
# one of llama.cpp's vocabulary-only GGUFs (a fixture of the binding tests).
tar xzf "$work/$SRC_TGZ" -C "$work" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
git clone -q --bare "$work/package/llama/gitRelease.bundle" "$work/src.git"
git --git-dir="$work/src.git" archive HEAD include ggml/include src/models/gemma4.cpp src/llama-graph.cpp models/ggml-vocab-llama-spm.gguf LICENSE \
  | tar x -C "$stage/src"
cp "$work/package/llama/llama.cpp.info.json" "$stage/src/"
rm -rf "$conv.partial"
mkdir -p "$conv.partial"
git --git-dir="$work/src.git" archive HEAD conversion gguf-py LICENSE | tar x -C "$conv.partial"
echo 1 > "$conv.partial/.complete"
rm -rf "$conv"
mv "$conv.partial" "$conv"
echo "$LAYOUT" > "$stage/.complete"
rm -rf "$cache"
mv "$stage" "$cache"
say "llama.cpp $VERSION cached in $cache"
echo "$lib"
