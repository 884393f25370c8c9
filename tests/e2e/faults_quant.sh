#!/usr/bin/env bash
# `memwall quant` under faults (issue 7), the same guarantees as
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

ref() {
    if [ -f "$MW_DATASETS/reference/$1" ]; then echo "$MW_DATASETS/reference/$1"
    elif [ -f "$MW_SHARED/models/reference/$1" ]; then echo "$MW_SHARED/models/reference/$1"
    else echo ""; fi
}
F16_0=$(ref tinyllama-8m.llamacpp-f16.gguf)
IMAT_0=$(ref tinyllama-8m.llamacpp.imatrix.gguf)
[ -n "$F16_0" ] || { skip "no tinyllama-8m.llamacpp-f16.gguf"; }
[ -x "$FAULT" ] || { echo "usage: faults_quant.sh MW_FAULT"; exit 2; }

O=$T/outdir
mkdir -p "$O"
SRC=$T/src.gguf
restore_src() { rm -f "$SRC"; cp "$F16_0" "$SRC"; }
restore_src
echo "previous output, must survive" > "$T/keep"
put_keep() { cp "$T/keep" "$O/o.gguf"; }
Q=(--preset Q8_0 -t 2 -q)

run 0 quant "$SRC" -o "$T/ref.gguf" "${Q[@]}" || finish
run 0 verify "$T/ref.gguf"
REF=$T/ref.gguf
rerun_ok() {
    rm -f "$O/o.gguf"
    run 0 quant "$SRC" -o "$O/o.gguf" "${Q[@]}" &&
        { cmp -s "$REF" "$O/o.gguf" || fail "$1: rerun output differs from the reference"; }
    rm -f "$O/o.gguf"
}

# --- (a) the disk fills ----------------------------------------------------------
echo "(a) RLIMIT_FSIZE"
for lim in 0 1048593 6000000; do
    for keep in yes no; do
        rm -f "$O/o.gguf"
        [ $keep = yes ] && put_keep
        fault "fsize $lim (keep $keep)" --fsize $lim -- quant "$SRC" -o "$O/o.gguf" "${Q[@]}"
        [ "$rc" -eq 3 ] || fail "fsize $lim: exit $rc ($status), want 3; stderr: $err"
        has "$err" "memwall quant: $O/o.gguf" "fsize $lim"
        has "$err" "File too large [E_NOSPACE]" "fsize $lim"
        after_failure "fsize $lim" "$O" "$O/o.gguf" "$([ $keep = yes ] && echo "$T/keep")"
    done
done
rerun_ok "fsize"

echo "(a) full tmpfs"
export MEMWALL MW_EMU SRC REF T
smallfs 16m "$T/small" '
    D=$T/small
    head -c 10485760 /dev/zero > "$D/filler" || exit 90
    cp "$T/keep" "$D/o.gguf"
    $MW_EMU "$MEMWALL" quant "$SRC" -o "$D/o.gguf" --preset Q8_0 -t 2 -q 2> "$T/small.err"
    echo "rc $?" > "$T/small.rep"
    cmp -s "$T/keep" "$D/o.gguf" && echo "keep ok" >> "$T/small.rep"
    ls -A "$D" | grep -v -e "^o.gguf\$" -e "^filler\$" | sed "s/^/left /" >> "$T/small.rep"
    rm -f "$D/filler"
    $MW_EMU "$MEMWALL" quant "$SRC" -o "$D/o.gguf" --preset Q8_0 -t 2 -q 2>> "$T/small.err"
    echo "rerun $?" >> "$T/small.rep"
    cmp -s "$REF" "$D/o.gguf" && echo "rerun same" >> "$T/small.rep"
    exit 0'
r=$?
if [ $r -eq 77 ]; then
    echo "  small tmpfs: SKIP (mounting not permitted here: $(tail -n 1 "$T/smallfs.log" 2> /dev/null))"
elif [ $r -ne 0 ]; then
    fail "small tmpfs: setup failed ($r): $(cat "$T/smallfs.log" 2> /dev/null)"
else
    rep=$(cat "$T/small.rep")
    echo "  small tmpfs: $(echo "$rep" | tr '\n' ';')"
    has "$rep" "rc 3" "tmpfs full: exit status"
    has "$(cat "$T/small.err")" "No space left on device [E_NOSPACE]" "tmpfs full: message"
    has "$rep" "keep ok" "tmpfs full: existing output"
    [[ $rep == *"left "* ]] && fail "tmpfs full: file(s) left behind: $rep"
    has "$rep" "rerun 0" "tmpfs full: rerun after freeing space"
    has "$rep" "rerun same" "tmpfs full: rerun output"
fi

# --- (b) SIGKILL ---------------------------------------------------------------------
echo "(b) SIGKILL"
fired=0
points=("--at-size 0" "--at-size 1048576" "--at-size 3145728" "--at-size 6291456" "--at-ms 5"
        "--at-ms 25")
k=0
for p in "${points[@]}"; do
    k=$((k + 1))
    rm -f "$O/o.gguf"
    keep=""
    if [ $((k % 2)) -eq 0 ]; then put_keep; keep=$T/keep; fi
    # shellcheck disable=SC2086
    fault "kill $p" --slice-us 50 --watch "$O" $p --kill -- quant "$SRC" -o "$O/o.gguf" "${Q[@]}"
    if [ "$triggered" = 1 ]; then
        fired=$((fired + 1))
        [ "$status" = "signal 9" ] || fail "kill $p: status $status, want signal 9"
        after_kill "kill $p" "$O" "$O/o.gguf" "$keep" "$REF"
    else
        [ "$rc" -eq 0 ] || fail "kill $p (not fired): exit $rc"
        cmp -s "$REF" "$O/o.gguf" || fail "kill $p (not fired): output differs"
    fi
done
[ $fired -ge 4 ] || fail "SIGKILL fired mid-write in only $fired of ${#points[@]} cases"
rerun_ok "SIGKILL"
put_keep
fault "SIGINT" --slice-us 50 --watch "$O" --at-size 2097152 --signal INT -- \
    quant "$SRC" -o "$O/o.gguf" "${Q[@]}"
if [ "$triggered" = 1 ]; then
    [ "$status" = "signal 2" ] || fail "SIGINT: status $status, want signal 2"
    after_failure "SIGINT" "$O" "$O/o.gguf" "$T/keep"
fi

# --- (c) the source changes while it is read ----------------------------------------
echo "(c) source faults"
for len in 8000000 0; do
    restore_src
    put_keep
    fault "truncate source to $len" --slice-us 50 --watch "$O" --at-size 1048576 \
        --truncate "$SRC" $len -- quant "$SRC" -o "$O/o.gguf" "${Q[@]}"
    [ "$triggered" = 1 ] || fail "truncate $len: quant ended before the fault"
    [ "$rc" -eq 3 ] || fail "truncate $len: exit $rc ($status), want 3; stderr: $err"
    has "$err" "memwall quant: $SRC: offset " "truncate $len"
    has "$err" "unfinished output removed [E_IO]" "truncate $len"
    after_failure "truncate $len" "$O" "$O/o.gguf" "$T/keep"
done
restore_src
rerun_ok "truncated source"

fault "unlink source" --slice-us 50 --watch "$O" --at-size 1048576 --unlink "$SRC" -- \
    quant "$SRC" -o "$O/o.gguf" "${Q[@]}"
[ "$rc" -eq 0 ] || fail "unlink source: exit $rc; stderr: $err"
cmp -s "$REF" "$O/o.gguf" || fail "unlink source: output differs from the reference"
rm -f "$O/o.gguf"
restore_src

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
    python3 - "$T/esc.gguf" << 'EOF2'
import struct, sys
def s(b): return struct.pack("<Q", len(b)) + b
out = b"GGUF" + struct.pack("<IQQ", 3, 1, 2)
out += s(b"\x1b]0;pwned\x07key") + struct.pack("<II", 4, 1)
out += s(b"general.architecture") + struct.pack("<I", 8) + s(b"llama")
out += s(b"\x1b[2Jt\xc2\x9b31m") + struct.pack("<IQIQ", 1, 32, 99, 0)  # type 99: bad
out += b"\0" * (-len(out) % 32) + b"\0" * 64
open(sys.argv[1], "wb").write(out)
EOF2
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
    HF0=""
    for d in "$MW_DATASETS/tinyllama-8m" "$MW_SHARED/models/tinyllama-8m"; do
        [ -f "$d/config.json" ] && { HF0=$d; break; }
    done
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
