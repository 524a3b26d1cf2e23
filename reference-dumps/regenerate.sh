#!/usr/bin/env bash
# Regenerates everything under checkpoints/ and reference-dumps/ plus the tokenizer expectations in
# tests/src/test/resources/. Needs python3 with torch (2.11 was used), transformers 5.17.0, tokenizers 0.23.2,
# safetensors. DEVICE=cuda trains the checkpoints on a GPU (default); DEVICE=cpu works too, only slower.
# The dumps themselves are always computed on the CPU, in one thread.
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE=${DEVICE:-cuda}
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1
python3 -c 'import torch, transformers, tokenizers, safetensors; print("torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "safetensors", safetensors.__version__)'
python3 checkpoints/make_checkpoints.py models --device "$DEVICE"
python3 reference-dumps/make_dumps.py all
python3 checkpoints/make_checkpoints.py qwen35
python3 reference-dumps/make_dumps.py qwen35
python3 reference-dumps/make_tokenizer_expected.py gemma3 tests/src/test/resources
for c in gemma4-tiny gemma4-tiny-ple gemma4-tiny-moe gemma4-tiny-ple-e2b qwen35-tiny qwen35-tiny-moe qwen35-tiny-llamacpp qwen35-tiny-moe-llamacpp; do
  python3 reference-dumps/make_tokenizer_expected.py checkpoint "checkpoints/$c" "tests/src/test/resources/$c-tokenizer-expected.json"
done
