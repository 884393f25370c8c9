#!/usr/bin/env bash
# Every command that prints a lot survives a reader that closes early
# (`memwall inspect F | head -1` under `set -o pipefail`): exit 0 and no
# error message, not death by SIGPIPE (exit 141). Also: a write error that
# is not a closed pipe (stdout on /dev/full) is still exit 3 with a message.
. "$(dirname "$0")/common.sh"
set -o pipefail
F16=$(ref tinyllama-8m.llamacpp-f16.gguf)
[ -n "$F16" ] || skip "no tinyllama-8m.llamacpp-f16.gguf"
RUNBIN="$MW_BIN/memwall-run"
big=$T/big.txt
for _ in $(seq 20); do echo "It was a dark and stormy night, and the rain fell in torrents."; done > "$big"

# closed_early NAME CMD...: CMD's stdout is a pipe whose reader closes it at
# once (and lingers a moment, so that every write of CMD meets a closed pipe
# whatever the timing: the worst case of `| head`)
closed_early() {
    local name=$1
    shift
    "$@" 2> "$T/err" | { exec 0<&-; sleep 0.2; }
    local rcs=("${PIPESTATUS[@]}")
    if [ "${rcs[0]}" -ne 0 ]; then
        fail "$name: exit ${rcs[0]} with its reader gone (want 0)"
        head -5 "$T/err"
    elif grep -qi "error writing\|broken pipe" "$T/err"; then
        fail "$name: complained about the closed pipe: $(head -2 "$T/err")"
    fi
}

closed_early "inspect" $MW_EMU "$MEMWALL" inspect "$F16"
closed_early "inspect --json" $MW_EMU "$MEMWALL" inspect --json "$F16"
closed_early "verify --json" $MW_EMU "$MEMWALL" verify --json --deep "$F16"
closed_early "help" $MW_EMU "$MEMWALL" --help
closed_early "quant --dry-run" $MW_EMU "$MEMWALL" quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --dry-run
closed_early "memwall-run --tokenize" $MW_EMU "$RUNBIN" -m "$F16" --tokenize "$big" -q
closed_early "memwall-run -p" $MW_EMU "$RUNBIN" -m "$F16" -p "Once upon a time" -n 8 --temp 0 -q
if "$MEMWALL" --help 2>&1 | grep -q "^  plan"; then
    closed_early "plan" $MW_EMU "$MEMWALL" plan "$F16" --ctx 512
fi
[ -e "$T/x.gguf" ] && fail "quant --dry-run wrote a file"

# a full disk is an error, not a closed pipe
if [ -w /dev/full ]; then
    $MW_EMU "$MEMWALL" inspect "$F16" > /dev/full 2> "$T/err"; rc=$?
    [ $rc -eq 3 ] || fail "inspect > /dev/full: exit $rc (want 3)"
    grep -q "error writing output" "$T/err" || fail "inspect > /dev/full: no message"
fi
finish
