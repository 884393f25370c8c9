#!/usr/bin/env bash
# `memwall convert` under faults. Every case ends with a clear
# message and exit 3 (or 1 for bad input), no temp file left (after SIGKILL:
# at most one, and only under the temp name), an existing output byte-
# identical, and a rerun that gives the reference bytes.
#   (a) the disk fills: RLIMIT_FSIZE at several sizes (memwall ignores
#       SIGXFSZ itself, so the write fails with EFBIG), and a small tmpfs
#       (ENOSPC) where this machine lets us mount one;
#   (b) SIGKILL at several points of the write (temp file sizes and times),
#       SIGINT/SIGTERM/SIGHUP (the handler removes the temp file);
#   (c) the source changes while it is read: model.safetensors truncated
#       (half, empty) mid-run -> SIGBUS on the mapping -> handled: exit 3
#       naming the file and offset; unlinked mid-run -> the conversion
#       completes from the open file, same bytes; a shard of a sharded
#       checkpoint truncated mid-run; FIFOs planted as inputs (no hang).
# Usage (ctest): faults_convert.sh MW_FAULT
source "$(dirname "${BASH_SOURCE[0]}")/faults_common.sh"

SRC0=$(model_dir tinyllama-8m)
[ -n "$SRC0" ] || { skip "no tinyllama-8m in datasets/ or shared/"; }
[ -x "$FAULT" ] || { echo "usage: faults_convert.sh MW_FAULT"; exit 2; }

S=$T/src
faults_setup
cp -r "$SRC0" "$S"
restore_src() { rm -f "$S/model.safetensors"; cp "$SRC0/model.safetensors" "$S/model.safetensors"; }
WRITE=(convert "$S" --type q8_0 -q)

# --- references ---------------------------------------------------------------
for t in f16 q8_0; do
    run 0 convert "$S" -o "$T/ref-$t.gguf" --type "$t" -q || { finish; }
    run 0 verify "$T/ref-$t.gguf"
done
REF=$T/ref-q8_0.gguf

# --- (a) the disk fills ---------------------------------------------------------
faults_fsize 0 4096 1048593 4000000 9000000
# the same with SIGXFSZ ignored by the parent (how CI runners often start us)
fault "fsize 1 MiB, SIGXFSZ ignored" --fsize 1048576 --ignore-xfsz -- "${WRITE[@]}" -o "$O/o.gguf"
[ "$rc" -eq 3 ] || fail "fsize/ignored: exit $rc, want 3"
after_failure "fsize/ignored" "$O" "$O/o.gguf" ""
rerun_ok "fsize"
faults_tmpfs # the 9 MB q8_0 output does not fit

# --- (b) SIGKILL at several points, SIGINT/TERM/HUP ------------------------------
faults_kill 5 "--at-size 0" "--at-size 1" "--at-size 2097152" "--at-size 4194304" \
    "--at-size 8388608" "--at-ms 3" "--at-ms 9" "--at-ms 20"
rerun_ok "SIGKILL"
faults_signals INT TERM HUP
rerun_ok "SIGINT/TERM/HUP"

# --- (c) the source changes while it is read -------------------------------------
# truncated (half, empty) -> SIGBUS, handled; unlinked (or replaced) while
# being read: the open file is still read whole
faults_source 2097152 "$S/model.safetensors"

# FIFOs planted as inputs: refused at once, never a hang (timeout guard)
for f in model.safetensors config.json; do
    mv "$S/$f" "$T/$f.saved"
    mkfifo "$S/$f"
    timeout 60 $MW_EMU "$MEMWALL" convert "$S" -o "$O/o.gguf" -q > /dev/null 2> "$T/err"
    rc=$?
    err=$(cat "$T/err")
    [ $rc -eq 124 ] && fail "FIFO $f: convert hung"
    { [ $rc -eq 1 ] || [ $rc -eq 3 ]; } || fail "FIFO $f: exit $rc, want 1 or 3"
    has "$err" "$f: not a regular file" "FIFO $f"
    after_failure "FIFO $f" "$O" "$O/o.gguf" ""
    rm -f "$S/$f"
    mv "$T/$f.saved" "$S/$f"
done

# strings from config.json never reach the terminal raw (escape sequences)
cp "$S/config.json" "$T/config.json.saved"
sed -i 's/"LlamaForCausalLM"/"\\u001b]0;pwned\\u0007\\u001b[31mRED"/' "$S/config.json"
run 1 convert "$S" -o "$O/o.gguf" -q
LC_ALL=C grep -q $'[\x1b\x07]' "$T/err" && fail "config.json escapes: raw control bytes printed"
has "$err" '\x1b]0;pwned\x07\x1b[31mRED' "config.json escapes"
cp "$T/config.json.saved" "$S/config.json"

# a sharded checkpoint (tinyllama-8m split in two by tests/fixtures/hf_shard.py)
if command -v python3 > /dev/null 2>&1; then
    SH=$T/sharded
    mkdir -p "$SH"
    cp "$S"/*.json "$S"/tokenizer.model "$SH"/
    python3 "$FIX/hf_shard.py" "$S/model.safetensors" "$SH" || fail "could not shard the checkpoint"
    run 0 convert "$SH" -o "$T/ref-sharded.gguf" --type q8_0 -q
    cp "$SH/model-00002-of-00002.safetensors" "$T/shard2.saved"
    put_keep
    fault "truncate shard 2" --slice-us 50 --watch "$O" --at-size 1 \
        --truncate "$SH/model-00002-of-00002.safetensors" 4096 -- \
        convert "$SH" -o "$O/o.gguf" --type q8_0 -q
    [ "$triggered" = 1 ] || fail "truncate shard: conversion ended before the fault"
    [ "$rc" -eq 3 ] || fail "truncate shard: exit $rc ($status), want 3; stderr: $err"
    has "$err" "model-00002-of-00002.safetensors: offset" "truncate shard"
    after_failure "truncate shard" "$O" "$O/o.gguf" "$T/keep"
    # a shard missing when the conversion starts: bad input, exit 1
    mv "$T/shard2.saved" "$T/shard2.keep"
    rm -f "$SH/model-00002-of-00002.safetensors"
    run 1 convert "$SH" -o "$O/o.gguf" --type q8_0 -q
    has "$err" "model.safetensors.index.json" "missing shard"
    after_failure "missing shard" "$O" "$O/o.gguf" "$T/keep"
    cp "$T/shard2.keep" "$SH/model-00002-of-00002.safetensors"
    rm -f "$O/o.gguf"
    run 0 convert "$SH" -o "$O/o.gguf" --type q8_0 -q
    cmp -s "$T/ref-sharded.gguf" "$O/o.gguf" || fail "sharded rerun differs"
    rm -f "$O/o.gguf"
else
    echo "  sharded checkpoint: SKIP (no python3 to split the checkpoint)"
fi

finish
