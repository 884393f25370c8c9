#!/usr/bin/env bash
# memwall calib end to end: usage and input errors (exit codes, messages that
# name the file, line and offset; no output left behind), thread-count
# independence (byte-identical files), gzip'd and JSONL corpora, legacy
# .dat, and the same statistics from an HF dir and from its GGUF conversion
# (tinyllama-8m and the qwen2 / llama3 / odd fixtures: biases, NEOX RoPE,
# llama3 rope_freqs, linear scaling, head_dim 12).
. "$(dirname "$0")/calib_common.sh"
[ -d "$TINY" ] || { skip "no $TINY"; }
OUT=$T/o.imatrix
small=(--samples 4 --seq-len 64)

# usage
run 2 calib && has "$err" "missing MODEL" "no args"
run 2 calib "$TINY" -o "$OUT" && has "$err" "missing --corpus" "no corpus"
run 2 calib "$TINY" --corpus "$CALIB" && has "$err" "missing -o" "no output"
run 2 calib "$TINY" --corpus "$CALIB" -o "$OUT" --samples 0 && has "$err" "--samples" "samples 0"
run 2 calib "$TINY" --corpus "$CALIB" -o "$OUT" --threads x
run 2 calib "$TINY" --corpus "$CALIB" -o "$OUT" --format xml
run 2 calib "$TINY" --corpus "$CALIB" -o "$OUT" --bogus
run 0 calib --help && has "$out" "usage: memwall calib" "help"

# bad input: exit 1 (3 for I/O), the place named, nothing written
run 1 calib "$T/nope" --corpus "$CALIB" -o "$OUT" && has "$err" "does not exist" "missing model"
run 3 calib "$TINY" --corpus "$T/nope.txt" -o "$OUT"
: > "$T/empty.txt"
run 1 calib "$TINY" --corpus "$T/empty.txt" -o "$OUT" && has "$err" "empty corpus" "empty"
printf 'fine line\nbad \xff byte\n' > "$T/bad.txt"
run 1 calib "$TINY" --corpus "$T/bad.txt" -o "$OUT" &&
    has "$err" "offset 14" "bad utf8 offset" && has "$err" "line 2" "bad utf8 line"
printf '{"text": "ok"}\n{"text": 3}\n' > "$T/bad.jsonl"
run 1 calib "$TINY" --corpus "$T/bad.jsonl" -o "$OUT" && has "$err" "line 2" "bad jsonl"
printf 'Too short.' > "$T/short.txt"
run 1 calib "$TINY" --corpus "$T/short.txt" -o "$OUT" && has "$err" "corpus too short" "short"
printf 'not gzip after all' | gzip -n | head -c 25 > "$T/trunc.txt.gz"
run 1 calib "$TINY" --corpus "$T/trunc.txt.gz" -o "$OUT"
[ -e "$OUT" ] && fail "output left behind after errors"
ls "$T" | grep -q '\.tmp\.' && fail "temp file left behind"

# thread-count independence, byte for byte
run 0 calib "$TINY" --corpus "$CALIB" -o "$T/t1.imatrix" "${small[@]}" -t 1 &&
    has "$err" "read back ok" "read back" && has "$err" "peak RSS" "rss"
run 0 calib "$TINY" --corpus "$CALIB" -o "$T/t3.imatrix" "${small[@]}" -t 3 -q
cmp -s "$T/t1.imatrix" "$T/t3.imatrix" || fail "imatrix differs between 1 and 3 threads"
# gzip'd corpus = the same text
gzip -nc "$CALIB" > "$T/calib.txt.gz"
run 0 calib "$TINY" --corpus "$T/calib.txt.gz" -o "$T/gz.imatrix" "${small[@]}" -q
have_python && { mwgguf imatrix-cmp "$T/gz.imatrix" "$T/t1.imatrix" --max-rel 0 > /dev/null ||
    fail "gzip'd corpus gives other statistics"; }
# legacy .dat, read back by the command itself
run 0 calib "$TINY" --corpus "$CALIB" -o "$T/t.dat" --legacy "${small[@]}" &&
    has "$err" "legacy .dat" "legacy"
have_python && { mwgguf imatrix-cmp "$T/t.dat" "$T/t1.imatrix" --max-rel 1e-6 > /dev/null ||
    fail "legacy .dat values differ from the GGUF imatrix"; }
# JSONL (one paragraph per line), gzip'd
if have_python; then
    python3 "$FIX/mk_jsonl_corpus.py" "$CALIB" "$T/c.jsonl"
    gzip -nf "$T/c.jsonl"
    run 0 calib "$TINY" --corpus "$T/c.jsonl.gz" -o "$T/j.imatrix" "${small[@]}" &&
        has "$err" "jsonl, gzip" "jsonl corpus"
fi
# llama.cpp's F16 GGUF of tinyllama = the HF dir, bit for bit
run 0 calib "$TINY_GGUF" --corpus "$CALIB" -o "$T/g.imatrix" "${small[@]}" -q
cmp -s "$T/g.imatrix" "$T/t1.imatrix" || fail "GGUF source gives other statistics than the HF dir"
# fixtures: HF dir vs memwall convert --type f32
if have_python; then
    for kind in qwen2 llama3 odd; do
        python3 "$FIX/mk_hf_fixture.py" "$kind" "$T/$kind" > /dev/null || { fail "fixture $kind"; continue; }
        run 0 convert "$T/$kind" -o "$T/$kind.gguf" --type f32 -q || continue
        run 0 calib "$T/$kind" --corpus "$CALIB" -o "$T/$kind-hf.imatrix" --samples 3 --seq-len 40 -q || continue
        run 0 calib "$T/$kind.gguf" --corpus "$CALIB" -o "$T/$kind-gg.imatrix" --samples 3 --seq-len 40 -q || continue
        cmp -s "$T/$kind-hf.imatrix" "$T/$kind-gg.imatrix" || fail "$kind: HF dir and GGUF differ"
    done
fi
finish
