#!/usr/bin/env bash
# bench/run_bench.sh — x86 host: prompt-processing and decode tokens/s of
# memwall-run vs llama.cpp (tests/peer's llama-peer `bench`), same file, same
# thread count, same prompt, same run; best of 3 for each; peak RSS.
#
#   bench/run_bench.sh [BUILD_DIR]        (default: build; built if needed)
#
# Environment: MW_BENCH_THREADS (1), MW_BENCH_GEN (128 generated tokens),
# MW_BENCH_PROMPT_BYTES (600 bytes of datasets/corpora/eval.txt as the prompt),
# MW_BENCH_REPS (3). Files (bench/out/run/): F16, Q8_0 (memwall convert),
# Q4_K_M, Q3_K_M (memwall quant) of datasets/tinyllama-8m.
#
# Both sides time the same work: the whole prompt in one call (memwall's
# rt_eval splits it into --batch steps; --batch is set to the prompt length),
# then N greedy tokens, each sampled and all but the last decoded alone;
# decode t/s = N / that time. Peak RSS is the process's (GNU time %M).
# Wall-clock figures on a shared machine are noisy: compare ratios of one run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
BUILD=${1:-$repo/build}
T=${MW_BENCH_THREADS:-1}
NGEN=${MW_BENCH_GEN:-128}
PBYTES=${MW_BENCH_PROMPT_BYTES:-600}
REPS=${MW_BENCH_REPS:-3}
OUT=$repo/bench/out/run
mkdir -p "$OUT"

if [[ ! -x $BUILD/tools/memwall || ! -x $BUILD/tools/memwall-run ]]; then
    [[ -f $BUILD/CMakeCache.txt ]] || cmake -S "$repo" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" -j2 --target memwall memwall-run >/dev/null
fi
MW=$BUILD/tools/memwall
MWRUN=$BUILD/tools/memwall-run
PEER=$(bash "$repo/tests/peer/setup.sh" | tail -n 1)
[[ -x /usr/bin/time ]] || { echo "needs GNU time (/usr/bin/time, Debian package 'time')" >&2; exit 2; }

# the prompt: whole words from the start of eval.txt, one line
PROMPT=$(head -c "$PBYTES" "$repo/datasets/corpora/eval.txt" | tr '\n' ' ' | sed 's/ [^ ]*$//')

"$MW" convert "$repo/datasets/tinyllama-8m" -o "$OUT/F16.gguf" --type f16 >/dev/null
"$MW" convert "$repo/datasets/tinyllama-8m" -o "$OUT/Q8_0.gguf" --type q8_0 >/dev/null
"$MW" quant "$OUT/F16.gguf" -o "$OUT/Q4_K_M.gguf" --preset Q4_K_M >/dev/null
"$MW" quant "$OUT/F16.gguf" -o "$OUT/Q3_K_M.gguf" --preset Q3_K_M >/dev/null

max() { awk -v a="$1" -v b="$2" 'BEGIN{print (a+0 > b+0) ? a : b}'; }

echo "memwall-run (kernels: $(
    "$MWRUN" -m "$OUT/Q4_K_M.gguf" -p x -n 1 2>&1 >/dev/null | sed -n 's/.*kernels \([^,]*\),.*/\1/p'
)) vs llama.cpp $("$PEER" version 2>/dev/null | awk '$1=="llama_commit"{print substr($2,1,8)} $1=="cpu_backend"{print "(" $2 ")"}' | tr '\n' ' ')"
echo "threads $T, prompt $PBYTES bytes of eval.txt, $NGEN generated tokens, best of $REPS"
printf '| %-6s | %6s | %9s | %9s | %6s | %9s | %9s | %6s | %8s | %8s |\n' file prompt \
    "pp mw" "pp llama" ratio "tg mw" "tg llama" ratio "RSS mw" "RSS llama"
printf '|%s|\n' "--------|--------|-----------|-----------|--------|-----------|-----------|--------|----------|----------"
for f in F16 Q8_0 Q4_K_M Q3_K_M; do
    m="$OUT/$f.gguf"
    mpp=0 mtg=0 mrss=0 lpp=0 ltg=0 lrss=0 np=0 lnp=0
    for ((r = 0; r < REPS; r++)); do
        /usr/bin/time -f 'maxrss_kib %M' -o "$OUT/time.txt" \
            "$MWRUN" -m "$m" -t "$T" -p "$PROMPT" -n "$NGEN" --temp 0 --ignore-eos --batch 512 \
            >/dev/null 2>"$OUT/mw.err" || { cat "$OUT/mw.err" >&2; exit 1; }
        # "memwall-run: prompt P tokens in S s (R tok/s); generated N tokens in S s (R tok/s)"
        read -r p pr gr < <(sed -n 's/.*: prompt \([0-9]*\) tokens in [0-9.]* s (\([0-9.]*\) tok\/s); generated [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1 \2 \3/p' "$OUT/mw.err")
        [[ -n ${gr:-} ]] || { cat "$OUT/mw.err" >&2; echo "no timing line from memwall-run" >&2; exit 1; }
        np=$p mpp=$(max "$mpp" "$pr") mtg=$(max "$mtg" "$gr")
        mrss=$(max "$mrss" "$(awk '$1=="maxrss_kib"{print $2}' "$OUT/time.txt")")

        "$PEER" -t "$T" bench "$m" "$PROMPT" "$NGEN" >"$OUT/lc.out" 2>"$OUT/lc.err" ||
            { cat "$OUT/lc.err" >&2; exit 1; }
        lnp=$(awk '$1=="prompt_tokens"{print $2}' "$OUT/lc.out")
        lpp=$(max "$lpp" "$(awk '$1=="prompt_tokens"{print $6}' "$OUT/lc.out")")
        ltg=$(max "$ltg" "$(awk '$1=="gen_tokens"{print $6}' "$OUT/lc.out")")
        lrss=$(max "$lrss" "$(awk '$1=="maxrss_kib"{print $2}' "$OUT/lc.out")")
    done
    [[ $np == "$lnp" ]] || echo "warning: prompt tokens differ: memwall $np, llama.cpp $lnp" >&2
    awk -v f="$f" -v np="$np" -v a="$mpp" -v b="$lpp" -v c="$mtg" -v d="$ltg" -v e="$mrss" -v g="$lrss" 'BEGIN{
        printf "| %-6s | %6d | %9.1f | %9.1f | %5.2fx | %9.1f | %9.1f | %5.2fx | %5.1f MiB | %5.1f MiB |\n",
               f, np, a, b, a / b, c, d, c / d, e / 1024, g / 1024}'
done
echo "pp/tg: prompt-processing / decode tokens per second; ratio = memwall / llama.cpp (below 1: slower)"

# Memory-bandwidth bound: every weight matrix is read once per generated token
# (token_embd: one row, unless it is also the output matrix); f32 norms count
# too. tokens/s at 60 GB/s (LPDDR5X class) = 60e9 / bytes. The KV cache read
# per token grows with the position (f16: 2 x n_layer x pos x n_kv_head x
# head_dim x 2 bytes) and is shown separately at position 256.
echo
echo "| file | weight bytes read per token | tokens/s at 60 GB/s | + f16 KV read at pos 256 | tokens/s at 60 GB/s incl. KV |"
echo "|---|---|---|---|---|"
for f in F16 Q8_0 Q4_K_M Q3_K_M; do
    "$MW" inspect --json "$OUT/$f.gguf" | python3 -c '
import json, sys
d = json.load(sys.stdin)
kv = {m["key"]: m.get("value") for m in d["metadata"]}
arch = kv["general.architecture"]
t = {x["name"]: x for x in d["tensors"]}
n_vocab = t["token_embd.weight"]["shape"][1]
b = sum(x["bytes"] for n, x in t.items() if n != "token_embd.weight")
b += t["token_embd.weight"]["bytes"] // n_vocab if "output.weight" in t else t["token_embd.weight"]["bytes"]
L = kv[arch + ".block_count"]; nkv = kv[arch + ".attention.head_count_kv"]
hd = kv[arch + ".embedding_length"] // kv[arch + ".attention.head_count"]
k = 2 * L * 256 * nkv * hd * 2
print("| %s | %d (%.2f MiB) | %.0f | %d | %.0f |" % (sys.argv[1], b, b / 2**20, 60e9 / b, k, 60e9 / (b + k)))
' "$f"
done
