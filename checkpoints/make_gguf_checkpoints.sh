#!/usr/bin/env bash
# The bundled Q4_K_M GGUFs of checkpoints/gguf/: llama.cpp's own quantizer (llama_model_quantize of the pinned
# prebuilt library, as its llama-quantize tool calls it) on decodiff's f32 conversion of each checkpoint that
# llama.cpp runs. Written outside the repository first (decodiff refuses to write into its bundled data), then copied.
# The files are committed: a native build of llama.cpp may round differently, so CI never re-quantizes.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p checkpoints/gguf
for m in gemma4-tiny gemma4-tiny-moe gemma4-tiny-ple-e2b; do
  ./decodiff gguf --model "checkpoints/$m" --type q4_k_m --out "$tmp/$m-Q4_K_M.gguf"
  cp "$tmp/$m-Q4_K_M.gguf" "checkpoints/gguf/$m-Q4_K_M.gguf"
done
sha256sum checkpoints/gguf/*.gguf
