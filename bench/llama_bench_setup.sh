#!/usr/bin/env bash
# bench/llama_bench_setup.sh — build llama.cpp's own `llama-bench` (and
# `llama-quantize`) from the source bundled in the pinned node-llama-cpp
# package (node_modules/node-llama-cpp/llama/gitRelease.bundle), at the same
# commit as tests/peer's prebuilt libllama (80fb11a).
#
#   bash bench/llama_bench_setup.sh      # prints the path of llama-bench (last line)
#
# Source: .peer/llama-src (a clone of the bundle), build: .peer/llama-src/build
# (-DGGML_NATIVE=ON, static, no curl).  Only the llama-bench and
# llama-quantize targets are built; on 2 cores that takes 10-20 minutes the
# first time, seconds afterwards.  Run it under `nice` when the box is shared.
#
# Environment:
#   MW_PEER_DIR      install location (default: <repo>/.peer, gitignored)
#   MW_BENCH_JOBS    parallel build jobs (default: 2)
#   MW_LLAMA_ISA     native (default) or avx2: -DGGML_NATIVE=OFF with AVX,
#                    AVX2, FMA, F16C and BMI2 on and AVX-512 / AVX-VNNI off
#                    (an AVX2-only CPU's build, on any x86-64), in build-avx2;
#                    or avx512: the same plus AVX-512 F/VBMI/VNNI/BF16 and
#                    AVX-VNNI, AMX off, in build-avx512 (for CPUs with AMX,
#                    where the native build's AMX path crashes llama-bench
#                    at 80fb11a in ggml_backend_amx_mul_mat)
# Exit status: 0 ready, 77 cannot be built here (no git/cmake/c++/bundle).
set -euo pipefail
LLAMA_COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
PEER_DIR=${MW_PEER_DIR:-$repo/.peer}
JOBS=${MW_BENCH_JOBS:-2}
say()  { printf 'llama-bench-setup: %s\n' "$*" >&2; }
skip() { say "SKIP: $*"; exit 77; }
die()  { say "ERROR: $*"; exit 1; }

for t in git cmake c++ cc; do
    command -v "$t" >/dev/null 2>&1 || skip "$t not found"
done
BUNDLE=$PEER_DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle
if [[ ! -f $BUNDLE ]]; then
    bash "$repo/tests/peer/setup.sh" >/dev/null || skip "tests/peer/setup.sh failed (no bundle)"
fi
[[ -f $BUNDLE ]] || skip "no $BUNDLE"

SRC=$PEER_DIR/llama-src
ISA=${MW_LLAMA_ISA:-native}
case $ISA in
native) BUILD=$SRC/build ISA_FLAGS=(-DGGML_NATIVE=ON) ;;
avx2) BUILD=$SRC/build-avx2
      ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                 -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF) ;;
avx512) BUILD=$SRC/build-avx512
      ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                 -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON
                 -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
                 -DGGML_AMX_BF16=OFF) ;;
*) die "MW_LLAMA_ISA: native, avx2 or avx512" ;;
esac
BIN=$BUILD/bin/llama-bench
QUANT=$BUILD/bin/llama-quantize

if command -v flock >/dev/null 2>&1; then
    mkdir -p "$PEER_DIR"
    exec 9>"$PEER_DIR/.lock-llama-src"
    flock 9
fi

if [[ ! -d $SRC/.git ]]; then
    say "cloning $BUNDLE into $SRC"
    rm -rf "$SRC.tmp"
    git clone --quiet --no-checkout "$BUNDLE" "$SRC.tmp" || die "git clone of the bundle failed"
    mv "$SRC.tmp" "$SRC"
fi
if [[ $(git -C "$SRC" rev-parse HEAD 2>/dev/null || true) != "$LLAMA_COMMIT" ||
      -n $(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null | head -n1) ]]; then
    git -C "$SRC" -c advice.detachedHead=false checkout --quiet --force "$LLAMA_COMMIT" ||
        die "checkout $LLAMA_COMMIT failed"
fi

if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    say "configuring $BUILD"
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "${ISA_FLAGS[@]}" \
        -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >"$BUILD.configure.log" 2>&1 ||
        { tail -n 30 "$BUILD.configure.log" >&2; die "cmake configure failed (log: $BUILD.configure.log)"; }
fi
say "building llama-bench and llama-quantize (-j$JOBS)"
cmake --build "$BUILD" -j"$JOBS" --target llama-bench llama-quantize >"$BUILD.build.log" 2>&1 ||
    { tail -n 30 "$BUILD.build.log" >&2; die "build failed (log: $BUILD.build.log)"; }
[[ -x $BIN && -x $QUANT ]] || die "no $BIN or $QUANT after the build"
"$BIN" --help >/dev/null 2>&1 || die "$BIN does not run"
echo "$BIN"
