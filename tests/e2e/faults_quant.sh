#!/usr/bin/env bash
# `memwall quant` under faults, the same guarantees as
# faults_convert.sh: a clear message, exit 3 (1 for bad input), no temp or
# scratch file left (after SIGKILL: only under a temp name), an existing
# output byte-identical, a rerun that gives the reference bytes.
#   (a) RLIMIT_FSIZE at several sizes; a full tmpfs where mounting is allowed;
#   (b) SIGKILL at several points, SIGINT;
#   (c) the source GGUF truncated mid-run (SIGBUS on the mapping, handled),
#       unlinked mid-run (completes, same bytes), a FIFO as source or imatrix
#       (refused, no hang), a truncated imatrix (exit 1); in full builds the
#       HF-directory source with its model.safetensors truncated mid-run.
# The preset is Q8_0 (fast, and the pipeline is the same for every preset);
# tests/e2e/faults_determinism.sh runs the K-quant presets.
# Usage (ctest): faults_quant.sh MW_FAULT
source "$(dirname "${BASH_SOURCE[0]}")/faults_common.sh"

F16_0=$(ref tinyllama-8m.llamacpp-f16.gguf)
IMAT_0=$(ref tinyllama-8m.llamacpp.imatrix.gguf)
[ -n "$F16_0" ] || { skip "no tinyllama-8m.llamacpp-f16.gguf"; }
[ -x "$FAULT" ] || { echo "usage: faults_quant.sh MW_FAULT"; exit 2; }

faults_setup
SRC=$T/src.gguf
restore_src() { rm -f "$SRC"; cp "$F16_0" "$SRC"; }
restore_src
Q=(--preset Q8_0 -t 2 -q)
WRITE=(quant "$SRC" "${Q[@]}")

run 0 "${WRITE[@]}" -o "$T/ref.gguf" || finish
run 0 verify "$T/ref.gguf"
REF=$T/ref.gguf

# --- (a) the disk fills ----------------------------------------------------------
faults_fsize 0 1048593 6000000
rerun_ok "fsize"
faults_tmpfs

# --- (b) SIGKILL, SIGINT ---------------------------------------------------------------
faults_kill 4 "--at-size 0" "--at-size 1048576" "--at-size 3145728" "--at-size 6291456" \
    "--at-ms 5" "--at-ms 25"
rerun_ok "SIGKILL"
faults_signals INT

# --- (c) the source changes while it is read ----------------------------------------
faults_source 1048576 "$SRC"

# FIFOs and bad imatrix files: refused at once (a hang would hit the timeout)
mkfifo "$T/fifo.gguf"
for args in "$T/fifo.gguf -o $O/o.gguf" "$SRC -o $O/o.gguf --imatrix $T/fifo.gguf"; do
    # shellcheck disable=SC2086
    timeout 60 $MW_EMU "$MEMWALL" quant $args "${Q[@]}" > /dev/null 2> "$T/err"
    rc=$?
    err=$(cat "$T/err")
    [ $rc -eq 124 ] && fail "FIFO ($args): quant hung"
    { [ $rc -eq 1 ] || [ $rc -eq 3 ]; } || fail "FIFO ($args): exit $rc, want 1 or 3"
    has "$err" "fifo.gguf: not a regular file" "FIFO ($args)"
    after_failure "FIFO" "$O" "$O/o.gguf" ""
done
timeout 60 $MW_EMU "$MEMWALL" verify "$T/fifo.gguf" > "$T/out" 2>&1
rc=$?
[ $rc -eq 124 ] && fail "FIFO: verify hung"
has "$(cat "$T/out")" "fifo.gguf: not a regular file" "verify FIFO"

# names from the file never reach the terminal raw: a tensor name and a key
# carrying escape sequences (ESC, BEL, C1 CSI) are printed as \xNN
if command -v python3 > /dev/null 2>&1; then
    python3 "$FIX/mk_esc_gguf.py" "$T/esc.gguf"
    for c in verify inspect "quant --preset Q8_0 -o $O/o.gguf"; do
        # shellcheck disable=SC2086
        $MW_EMU "$MEMWALL" $c "$T/esc.gguf" > "$T/out" 2>&1
        rc=$?
        [ $rc -eq 1 ] || fail "escape names ($c): exit $rc, want 1"
        LC_ALL=C grep -q $'[\x1b\x07]' "$T/out" && fail "escape names ($c): raw control bytes printed"
        LC_ALL=C grep -q $'\xc2\x9b' "$T/out" && fail "escape names ($c): raw C1 control printed"
        has "$(cat "$T/out")" '\x1b[2Jt\xc2\x9b31m' "escape names ($c)"
    done
    after_failure "escape names" "$O" "$O/o.gguf" ""
fi

if [ -n "$IMAT_0" ]; then
    head -c 5000 "$IMAT_0" > "$T/cut.imatrix"
    put_keep
    run 1 quant "$SRC" -o "$O/o.gguf" --imatrix "$T/cut.imatrix" "${Q[@]}"
    has "$err" "cut.imatrix" "truncated imatrix"
    after_failure "truncated imatrix" "$O" "$O/o.gguf" "$T/keep"
fi

# the Hugging Face source (full builds): a shard truncated while quant reads it
if $MW_EMU "$MEMWALL" help 2> /dev/null | grep -q '^  convert'; then
    HF0=$(model_dir tinyllama-8m)
    if [ -n "$HF0" ]; then
        cp -r "$HF0" "$T/hf"
        run 0 quant "$T/hf" -o "$T/ref-hf.gguf" "${Q[@]}"
        put_keep
        fault "HF source truncated" --slice-us 50 --watch "$O" --at-size 1048576 \
            --truncate "$T/hf/model.safetensors" 4096 -- quant "$T/hf" -o "$O/o.gguf" "${Q[@]}"
        [ "$triggered" = 1 ] || fail "HF truncate: quant ended before the fault"
        [ "$rc" -eq 3 ] || fail "HF truncate: exit $rc ($status), want 3; stderr: $err"
        has "$err" "model.safetensors: offset " "HF truncate"
        after_failure "HF truncate" "$O" "$O/o.gguf" "$T/keep"
        cp "$HF0/model.safetensors" "$T/hf/model.safetensors"
        rm -f "$O/o.gguf"
        run 0 quant "$T/hf" -o "$O/o.gguf" "${Q[@]}"
        cmp -s "$T/ref-hf.gguf" "$O/o.gguf" || fail "HF rerun differs"
        # SIGKILL mid-write: the scratch KV file is gone already or temp-named
        put_keep
        fault "HF kill" --slice-us 50 --watch "$O" --at-size 1048576 --kill -- \
            quant "$T/hf" -o "$O/o.gguf" "${Q[@]}"
        [ "$triggered" = 1 ] && after_kill "HF kill" "$O" "$O/o.gguf" "$T/keep" "$T/ref-hf.gguf"
        rm -f "$O/o.gguf"
    fi
fi

finish
