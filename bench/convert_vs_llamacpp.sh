#!/usr/bin/env bash
# bench/convert_vs_llamacpp.sh — `memwall convert` side by side with
# llama.cpp's own converter (convert_hf_to_gguf.py from the llama.cpp source
# bundled with node-llama-cpp 3.21.1) on the same checkpoints: wall time,
# CPU time and peak RSS (/usr/bin/time), and whether the tensor data of the
# two outputs is byte-identical (tests/lib/mwgguf.py tensors-cmp: same names,
# types, shapes, bytes; metadata differs by design).
#
#   1. datasets/tinyllama-8m (and ../shared/models/tinyllama-8m-bf16 if
#      present) to f16, bf16 and q8_0: a quick correctness check.
#   2. a synthetic >= 2 GB checkpoint (bench/synth_ckpt.py, TinyLlama-1.1B
#      shapes, F16, two shards) to F16, with `cp` and `cp`+fsync of the same
#      bytes as the yardstick. Page cache warm (the shards are read once
#      first); one run per tool (disk-heavy; run it rarely on a shared box).
#
#   bench/convert_vs_llamacpp.sh [BUILD_DIR]      (default: build)
#   env: MW_BENCH_DIR (work dir, default bench/out; ~7 GB free needed),
#        MW_BENCH_LAYERS (default 22), MW_BENCH_KEEP=1 (keep the checkpoint),
#        MW_BENCH_SKIP_BIG=1 (part 1 only), LLAMA_SRC (a llama.cpp checkout;
#        default: cloned from node-llama-cpp's gitRelease.bundle into the work dir)
#
# Extra packages, for this bench only (not needed by the build or the tests):
#   apt-get install -y python3-torch python3-numpy python3-sentencepiece python3-tqdm
# Debian 12's torch is 1.13 and it has no `transformers`; the converter needs
# torch >= 2.1 dtype names and transformers.AutoConfig, so the bench puts
# bench/llamacpp_shim (stand-ins for exactly those names) on PYTHONPATH.
# The table is printed and kept in $MW_BENCH_DIR/convert_vs_llamacpp.txt.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
BUILD=${1:-$repo/build}
MEMWALL=$BUILD/tools/memwall
[ -x "$MEMWALL" ] || { echo "no $MEMWALL (build first)"; exit 2; }
W=${MW_BENCH_DIR:-$repo/bench/out}
L=${MW_BENCH_LAYERS:-22}
PY=${MW_BENCH_PYTHON:-/usr/bin/python3}
mkdir -p "$W"
W=$(cd "$W" && pwd)
REPORT=$W/convert_vs_llamacpp.txt

"$PY" -c 'import torch, numpy, sentencepiece, tqdm' 2> /dev/null || {
    echo "needs (Debian): apt-get install -y python3-torch python3-numpy python3-sentencepiece python3-tqdm"
    exit 2
}
LLAMA=${LLAMA_SRC:-$W/llama-src}
if [ ! -f "$LLAMA/convert_hf_to_gguf.py" ]; then
    bundle=$(find "$repo/.peer" -name gitRelease.bundle 2> /dev/null | head -n 1)
    [ -n "$bundle" ] || { echo "no llama.cpp source: set LLAMA_SRC or run tests/peer/setup.sh"; exit 2; }
    rm -rf "$LLAMA"
    git clone -q "$bundle" "$LLAMA"
fi
export PYTHONPATH=$here/llamacpp_shim

: > "$REPORT"
say() { echo "$@" | tee -a "$REPORT"; }
say "memwall convert vs llama.cpp convert_hf_to_gguf.py ($(git -C "$LLAMA" log -1 --format=%h 2> /dev/null || echo '?'))," \
    "$(date -u +%Y-%m-%d), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# timed LABEL BYTES CMD...: one run; prints a table row; sets T_WALL, T_RSS
timed() {
    local label=$1 bytes=$2
    shift 2
    /usr/bin/time -f '%e %U %S %M' -o "$W/time" "$@" > "$W/cmd.out" 2>&1 ||
        { tail -n 20 "$W/cmd.out"; echo "FAILED: $label"; exit 1; }
    read -r T_WALL T_USR T_SYS T_RSS < <(tail -n 1 "$W/time")
    say "$(printf '%-38s %8.2f %8.2f %8.2f %9.1f %9.0f' "$label" "$T_WALL" "$T_USR" "$T_SYS" \
        "$(awk -v k="$T_RSS" 'BEGIN{print k/1024}')" \
        "$(awk -v b="$bytes" -v s="$T_WALL" 'BEGIN{print (s > 0) ? b/1e6/s : 0}')")"
}
header() { say "$(printf '%-38s %8s %8s %8s %9s %9s' "$1" "wall s" "user s" "sys s" "RSS MB" "MB/s")"; }
compare() { say "  tensor data, $1: $("$PY" "$repo/tests/lib/mwgguf.py" tensors-cmp "$2" "$3" 2>&1 | head -n 4 | tr "\n" " ")"; }

# --- 1. the bundled model -----------------------------------------------------
for src in "$repo/datasets/tinyllama-8m" "$repo/../shared/models/tinyllama-8m-bf16"; do
    [ -f "$src/config.json" ] || continue
    name=$(basename "$src")
    bytes=$(cat "$src"/*.safetensors | wc -c)
    say ""
    header "$name ($bytes bytes)"
    for t in f16 bf16 q8_0; do
        rm -f "$W/mw.gguf" "$W/ll.gguf"
        timed "memwall convert --type $t" "$bytes" "$MEMWALL" convert "$src" -o "$W/mw.gguf" --type "$t" -q
        timed "convert_hf_to_gguf.py --outtype $t" "$bytes" \
            "$PY" "$LLAMA/convert_hf_to_gguf.py" "$src" --outtype "$t" --outfile "$W/ll.gguf"
        compare "$t" "$W/ll.gguf" "$W/mw.gguf"
    done
done
rm -f "$W/mw.gguf" "$W/ll.gguf"
[ "${MW_BENCH_SKIP_BIG:-0}" = 1 ] && exit 0

# --- 2. the synthetic >= 2 GB checkpoint ---------------------------------------
CK="$W/synth-ckpt"
if [ ! -f "$CK/.complete-$L" ]; then
    rm -rf "$CK" && mkdir -p "$CK"
    echo "generating the synthetic checkpoint ($L layers) in $CK ..."
    python3 "$here/synth_ckpt.py" "$CK" "$L"
    for f in tokenizer.model tokenizer_config.json special_tokens_map.json; do
        cp "$repo/datasets/tinyllama-8m/$f" "$CK/"
    done
    touch "$CK/.complete-$L"
fi
bytes=$(cat "$CK"/*.safetensors | wc -c)
say ""
header "synthetic, $L layers ($bytes bytes)"
warm() { cat "$CK"/*.safetensors > /dev/null; sync; }
warm
timed "cp (cat of the shards)" "$bytes" sh -c "cat \"$CK\"/*.safetensors > \"$W/cp.bin\""
rm -f "$W/cp.bin"; warm
timed "cp + fsync" "$bytes" sh -c "cat \"$CK\"/*.safetensors > \"$W/cp.bin\" && sync \"$W/cp.bin\""
cpsync=$T_WALL
rm -f "$W/cp.bin"; warm
timed "memwall convert --type f16" "$bytes" "$MEMWALL" convert "$CK" -o "$W/mw.gguf" --type f16 -q
mw_wall=$T_WALL mw_rss=$T_RSS
warm
timed "convert_hf_to_gguf.py --outtype f16" "$bytes" \
    "$PY" "$LLAMA/convert_hf_to_gguf.py" "$CK" --outtype f16 --outfile "$W/ll.gguf"
ll_wall=$T_WALL ll_rss=$T_RSS
sync
compare f16 "$W/ll.gguf" "$W/mw.gguf"
say "  output bytes: memwall $(stat -c %s "$W/mw.gguf"), llama.cpp $(stat -c %s "$W/ll.gguf")"
say "  memwall: $(awk -v a="$mw_wall" -v b="$cpsync" 'BEGIN{printf "%.2f", a/b}')x cp+fsync (target <= 2)," \
    "peak RSS $((mw_rss / 1024)) MB (target < 300);" \
    "llama.cpp: $(awk -v a="$ll_wall" -v b="$mw_wall" 'BEGIN{printf "%.2f", a/b}')x memwall's time," \
    "$(awk -v a="$ll_rss" -v b="$mw_rss" 'BEGIN{printf "%.1f", a/b}')x its peak RSS"
say "  (memwall fsyncs its output before the rename; llama.cpp's writer does not fsync)"
rm -f "$W/mw.gguf" "$W/ll.gguf"
[ "${MW_BENCH_KEEP:-0}" = 1 ] || rm -rf "$CK"
