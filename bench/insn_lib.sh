# bench/insn_lib.sh — sourced by bench/insn_bench.sh and bench/insn_prompt.sh.
#
# count FUNC ARG: guest instructions retired by `FUNC ARG -d in_asm,exec,nochain
# -D FIFO` (FUNC runs the program under qemu-aarch64 and passes its extra
# arguments to qemu), counted by $OUT/insn_count (bench/insn_count.c, built by
# the caller) from qemu's log streamed through a FIFO. Needs OUT; NM (an
# unstripped binary) adds a symbol profile to $OUT/profile.txt. Exits the
# script when the run fails or the counter meets a block it cannot size.
# shellcheck shell=bash
count() {
    local fifo=$OUT/qemu.fifo res
    rm -f "$fifo" && mkfifo "$fifo"
    "$OUT/insn_count" "$fifo" ${NM:+--nm "$NM"} >"$OUT/count.txt" 2>"$OUT/profile.txt" &
    local pid=$!
    "$1" "$2" -d in_asm,exec,nochain -D "$fifo" >/dev/null 2>"$OUT/run.err" </dev/null ||
        { kill "$pid" 2>/dev/null; cat "$OUT/run.err" >&2; echo "run failed: $1 $2" >&2; exit 1; }
    wait "$pid"
    rm -f "$fifo"
    res=$(awk '$1=="unknown"{u=$2} $1=="insns"{n=$2} END{if(u!=0)exit 1; print n}' "$OUT/count.txt") ||
        { echo "counter saw blocks it could not size: $(cat "$OUT/count.txt")" >&2; exit 1; }
    echo "$res"
}
