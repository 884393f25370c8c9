#!/usr/bin/env bash
# The runtime under faults: the model is mmap'd, and a model file
# truncated while memwall-run (or `memwall perplexity`) computes from it
# raises SIGBUS on the next access to a lost page. The shared handler
# (tools/cmd_signals.c) must name the file and the offset, say it changed or
# was truncated, and exit 3 — not crash (no core, no signal death).
# Truncations: into the header/metadata (4096 bytes) and into the tensor
# data (half the file), each after the run has started (--at-ms).
# Usage (ctest): faults_run.sh MW_FAULT
source "$(dirname "${BASH_SOURCE[0]}")/faults_common.sh"
F16_0=$(ref tinyllama-8m.llamacpp-f16.gguf)
EVAL=$MW_DATASETS/corpora/eval.txt
[ -n "$F16_0" ] && [ -f "$EVAL" ] || { skip "no tinyllama-8m.llamacpp-f16.gguf or eval.txt"; }
[ -x "$FAULT" ] || { echo "usage: faults_run.sh MW_FAULT"; exit 2; }
RUNBIN="$MW_BIN/memwall-run"
[ -x "$RUNBIN" ] || { skip "no memwall-run"; }
SRC=$T/model.gguf
size=$(stat -c %s "$F16_0")

# truncated NAME LEN PREFIX CMD...: the run truncated to LEN bytes after 300 ms
truncated() {
    local name=$1 len=$2 prefix=$3
    shift 3
    rm -f "$SRC" "$T/report"
    cp "$F16_0" "$SRC"
    "$FAULT" --at-ms 300 --truncate "$SRC" "$len" --report "$T/report" -- "$@" \
        > "$T/out" 2> "$T/err"
    rc=$?
    err=$(cat "$T/err")
    local trig st
    trig=$(sed -n 's/^triggered //p' "$T/report" 2> /dev/null)
    st=$(sed -n 's/^status //p' "$T/report" 2> /dev/null)
    echo "  $name: $st (fault fired: $trig)"
    [ "$trig" = 1 ] || { fail "$name: the run ended before the fault"; return; }
    [ "$rc" -eq 3 ] || { fail "$name: exit $rc ($st), want 3; stderr: $err"; return; }
    has "$err" "$prefix: $SRC: offset " "$name"
    has "$err" "the file changed or was truncated while being read (SIGBUS) [E_IO]" "$name"
}

for len in 4096 $((size / 2)); do
    truncated "memwall-run perplexity, truncate $len" $len memwall-run \
        $MW_EMU "$RUNBIN" -m "$SRC" --perplexity "$EVAL" -q
    truncated "memwall-run generate, truncate $len" $len memwall-run \
        $MW_EMU "$RUNBIN" -m "$SRC" -p "Once upon a time" -n 100000 --ignore-eos -c 256 -q
    truncated "memwall perplexity, truncate $len" $len "memwall perplexity" \
        $MW_EMU "$MEMWALL" perplexity -m "$SRC" -f "$EVAL" -q
done
# the handler does not change a normal run
cp "$F16_0" "$SRC"
$MW_EMU "$RUNBIN" -m "$SRC" -p "Once upon a time" -n 8 --temp 0 -q > "$T/out" 2> "$T/err" ||
    fail "memwall-run on the intact model: exit $?: $(cat "$T/err")"
finish
