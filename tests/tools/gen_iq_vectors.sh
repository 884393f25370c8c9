#!/usr/bin/env bash
# tests/tools/gen_iq_vectors.sh — regenerate the i-quant test vectors in
# datasets/testvectors/ from the llama.cpp peer's ggml (tests/peer/setup.sh).
# A maintainer's tool, not a test: the vectors are committed.
#   bash tests/tools/gen_iq_vectors.sh [DIR]   (default datasets/testvectors)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-datasets/testvectors}
bash tests/peer/setup.sh >/dev/null
lib=.peer/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -std=c11 -O2 -ffp-contract=off -I.peer/include -o "$tmp/gen" tests/tools/gen_iq_vectors.c \
    "$lib/libggml-base.so" -Wl,-rpath,"$PWD/$lib" -lm
"$tmp/gen" "$dir"
