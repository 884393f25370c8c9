#!/usr/bin/env bash
# The main job on the bundled default model (datasets/tinyllama-8m):
# install dependencies, build, calibrate on the bundled corpus, quantize to
# Q4_K_M, verify the file, and run a prompt with memwall's own runtime.
# Usage: scripts/demo.sh [PROMPT]
set -euo pipefail
cd "$(dirname "$0")/.."
prompt=${1:-"It was a dark and stormy night, and"}
[ "${MW_SKIP_DEPS:-0}" = 1 ] || bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" >/dev/null
mw=build/release/tools/memwall
run=build/release/tools/memwall-run
model=datasets/tinyllama-8m
out=build/demo
mkdir -p "$out"

echo "== plan: what fits where"
$mw plan "$model" --ctx 512
echo "== calibrate on the bundled corpus (importance matrix, llama.cpp format)"
$mw calib "$model" --corpus datasets/corpora/calib.txt --samples 64 --seq-len 256 \
    -o "$out/tinyllama-8m.imatrix" -t "$(nproc)"
echo "== quantize (HF safetensors -> GGUF Q4_K_M, with that imatrix)"
$mw quant "$model" -o "$out/tinyllama-8m-Q4_K_M.gguf" --preset Q4_K_M \
    --imatrix "$out/tinyllama-8m.imatrix" --threads "$(nproc)"
echo "== verify (structure, checksums, every block decoded)"
$mw verify --deep "$out/tinyllama-8m-Q4_K_M.gguf"
echo "== inspect (header, metadata, tensor table)"
$mw inspect "$out/tinyllama-8m-Q4_K_M.gguf"
echo "== run a prompt (memwall-run, greedy)"
$run -m "$out/tinyllama-8m-Q4_K_M.gguf" --verify -p "$prompt" -n 48 --temp 0 -t "$(nproc)"
