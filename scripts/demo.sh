#!/usr/bin/env bash
# The main job on the bundled default model (datasets/tinyllama-8m):
# install dependencies, build, convert/quantize, verify, inspect, and run a
# prompt. Usage: scripts/demo.sh [PROMPT]
set -euo pipefail
cd "$(dirname "$0")/.."
prompt=${1:-"It was a dark and stormy night, and"}
[ "${MW_SKIP_DEPS:-0}" = 1 ] || bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" >/dev/null
mw=build/release/tools/memwall
out=build/demo
mkdir -p "$out"

echo "== convert (HF safetensors -> GGUF, Q8_0)"
$mw convert datasets/tinyllama-8m -o "$out/tinyllama-8m-q8_0.gguf" --type q8_0
echo "== verify"
$mw verify --deep "$out/tinyllama-8m-q8_0.gguf"
echo "== inspect (header and first tensors)"
$mw inspect "$out/tinyllama-8m-q8_0.gguf" | head -40

echo "== run a prompt"
# memwall's own runtime (memwall-run) is not built yet; the file runs in
# llama.cpp unchanged, so the demo generates with llama.cpp's library.
if peer=$(bash tests/peer/setup.sh 2>/dev/null | tail -n 1) && [ -x "$peer" ]; then
  "$peer" generate "$out/tinyllama-8m-q8_0.gguf" "$prompt" 32 --text
else
  echo "(llama.cpp peer unavailable: skipped)"
fi
