#!/usr/bin/env bash
# `memwall convert` under faults (issue 7). Every case ends with a clear
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

SRC0=""
for d in "$MW_DATASETS/tinyllama-8m" "$MW_SHARED/models/tinyllama-8m"; do
    [ -f "$d/config.json" ] && { SRC0=$d; break; }
done
[ -n "$SRC0" ] || { skip "no tinyllama-8m in datasets/ or shared/"; }
[ -x "$FAULT" ] || { echo "usage: faults_convert.sh MW_FAULT"; exit 2; }

S=$T/src
O=$T/outdir
mkdir -p "$O"
cp -r "$SRC0" "$S"
restore_src() { rm -f "$S/model.safetensors"; cp "$SRC0/model.safetensors" "$S/model.safetensors"; }
echo "previous output, must survive" > "$T/keep"
put_keep() { cp "$T/keep" "$O/o.gguf"; }

# --- references ---------------------------------------------------------------
for t in f16 q8_0; do
    run 0 convert "$S" -o "$T/ref-$t.gguf" --type "$t" -q || { finish; }
    run 0 verify "$T/ref-$t.gguf"
done
REF=$T/ref-q8_0.gguf
rerun_ok() { # NAME: a clean rerun now gives the reference bytes
    rm -f "$O/o.gguf"
    run 0 convert "$S" -o "$O/o.gguf" --type q8_0 -q &&
        { cmp -s "$REF" "$O/o.gguf" || fail "$1: rerun output differs from the reference"; }
    rm -f "$O/o.gguf"
}

# --- (a) the disk fills: RLIMIT_FSIZE ------------------------------------------
echo "(a) RLIMIT_FSIZE"
for lim in 0 4096 1048593 4000000 9000000; do
    for keep in yes no; do
        rm -f "$O/o.gguf"
        [ $keep = yes ] && put_keep
        fault "fsize $lim (keep $keep)" --fsize $lim -- convert "$S" -o "$O/o.gguf" --type q8_0 -q
        [ "$rc" -eq 3 ] || fail "fsize $lim: exit $rc ($status), want 3; stderr: $err"
        has "$err" "memwall convert: $O/o.gguf" "fsize $lim"
        has "$err" "File too large [E_NOSPACE]" "fsize $lim"
        after_failure "fsize $lim" "$O" "$O/o.gguf" "$([ $keep = yes ] && echo "$T/keep")"
    done
done
# the same with SIGXFSZ ignored by the parent (how CI runners often start us)
fault "fsize 1 MiB, SIGXFSZ ignored" --fsize 1048576 --ignore-xfsz -- \
    convert "$S" -o "$O/o.gguf" --type q8_0 -q
[ "$rc" -eq 3 ] || fail "fsize/ignored: exit $rc, want 3"
after_failure "fsize/ignored" "$O" "$O/o.gguf" ""
rerun_ok "fsize"

# --- (a) the disk fills: a small tmpfs -----------------------------------------
echo "(a) full tmpfs"
export MEMWALL MW_EMU S REF T
# 16 MiB tmpfs, 10 MiB of it taken: the 9 MB q8_0 output does not fit. Then
# the filler goes and the same command succeeds on the same filesystem.
smallfs 16m "$T/small" '
    D=$T/small
    head -c 10485760 /dev/zero > "$D/filler" || exit 90
    cp "$T/keep" "$D/o.gguf"
    $MW_EMU "$MEMWALL" convert "$S" -o "$D/o.gguf" --type q8_0 -q 2> "$T/small.err"
    echo "rc $?" > "$T/small.rep"
    cmp -s "$T/keep" "$D/o.gguf" && echo "keep ok" >> "$T/small.rep"
    ls -A "$D" | grep "\.tmp\." >> "$T/small.rep"
    rm -f "$D/filler"
    $MW_EMU "$MEMWALL" convert "$S" -o "$D/o.gguf" --type q8_0 -q 2>> "$T/small.err"
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
    [[ $rep == *.tmp.* ]] && fail "tmpfs full: temp file left behind"
    has "$rep" "rerun 0" "tmpfs full: rerun after freeing space"
    has "$rep" "rerun same" "tmpfs full: rerun output"
fi

# --- (b) SIGKILL at several points ---------------------------------------------
echo "(b) SIGKILL"
fired=0
points=("--at-size 0" "--at-size 1" "--at-size 2097152" "--at-size 4194304" "--at-size 8388608"
        "--at-ms 3" "--at-ms 9" "--at-ms 20")
k=0
for p in "${points[@]}"; do
    k=$((k + 1))
    rm -f "$O/o.gguf"
    keep=""
    if [ $((k % 2)) -eq 0 ]; then put_keep; keep=$T/keep; fi
    # shellcheck disable=SC2086
    fault "kill $p" --slice-us 50 --watch "$O" $p --kill -- convert "$S" -o "$O/o.gguf" --type q8_0 -q
    if [ "$triggered" = 1 ]; then
        fired=$((fired + 1))
        [ "$status" = "signal 9" ] || fail "kill $p: status $status, want signal 9"
        after_kill "kill $p" "$O" "$O/o.gguf" "$keep" "$REF"
    else # finished before the point was reached: then it must be complete
        [ "$rc" -eq 0 ] || fail "kill $p (not fired): exit $rc"
        cmp -s "$REF" "$O/o.gguf" || fail "kill $p (not fired): output differs"
    fi
done
[ $fired -ge 5 ] || fail "SIGKILL fired mid-write in only $fired of ${#points[@]} cases"
rerun_ok "SIGKILL"
for sig in INT TERM HUP; do
    put_keep
    fault "SIG$sig" --slice-us 50 --watch "$O" --at-size 2097152 --signal $sig -- \
        convert "$S" -o "$O/o.gguf" --type q8_0 -q
    if [ "$triggered" = 1 ]; then
        [[ $status == "signal "* ]] || fail "SIG$sig: status $status, want death by the signal"
        after_failure "SIG$sig" "$O" "$O/o.gguf" "$T/keep"
    fi
done
rerun_ok "SIGINT/TERM/HUP"

# --- (c) the source changes while it is read -------------------------------------
echo "(c) source faults"
for len in 8000000 0; do
    restore_src
    put_keep
    fault "truncate source to $len" --slice-us 50 --watch "$O" --at-size 2097152 \
        --truncate "$S/model.safetensors" $len -- convert "$S" -o "$O/o.gguf" --type q8_0 -q
    [ "$triggered" = 1 ] || fail "truncate $len: conversion ended before the fault"
    [ "$rc" -eq 3 ] || fail "truncate $len: exit $rc ($status), want 3; stderr: $err"
    has "$err" "memwall convert: $S/model.safetensors: offset " "truncate $len"
    has "$err" "changed or was truncated while being read" "truncate $len"
    has "$err" "unfinished output removed [E_IO]" "truncate $len"
    after_failure "truncate $len" "$O" "$O/o.gguf" "$T/keep"
done
restore_src
rerun_ok "truncated source"

# unlinked (or replaced) while being read: the open file is still read whole
fault "unlink source" --slice-us 50 --watch "$O" --at-size 2097152 \
    --unlink "$S/model.safetensors" -- convert "$S" -o "$O/o.gguf" --type q8_0 -q
[ "$rc" -eq 0 ] || fail "unlink source: exit $rc; stderr: $err"
cmp -s "$REF" "$O/o.gguf" || fail "unlink source: output differs from the reference"
[ -z "$(temps "$O")" ] || fail "unlink source: temp file left"
rm -f "$O/o.gguf"
restore_src

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

# a sharded checkpoint (tinyllama-8m split in two by a few lines of Python)
if command -v python3 > /dev/null 2>&1; then
    SH=$T/sharded
    mkdir -p "$SH"
    cp "$S"/*.json "$S"/tokenizer.model "$SH"/
    python3 - "$S/model.safetensors" "$SH" << 'EOF' || fail "could not shard the checkpoint"
import json, struct, sys
src, out = sys.argv[1], sys.argv[2]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
hdr = json.loads(b[8:8 + n])
meta = hdr.pop("__metadata__", None)
names = sorted(hdr)
groups = [names[: len(names) // 2], names[len(names) // 2:]]
wm = {}
for k, g in enumerate(groups):
    fn = "model-%05d-of-00002.safetensors" % (k + 1)
    h, data, off = {}, [], 0
    for nm in g:
        e = dict(hdr[nm]); a, z = e["data_offsets"]
        e["data_offsets"] = [off, off + z - a]; off += z - a
        h[nm] = e; data.append(b[8 + n + a: 8 + n + z]); wm[nm] = fn
    if meta is not None: h["__metadata__"] = meta
    j = json.dumps(h, separators=(",", ":")).encode()
    j += b" " * (-len(j) % 8)
    with open(out + "/" + fn, "wb") as f:
        f.write(struct.pack("<Q", len(j)) + j + b"".join(data))
json.dump({"metadata": {}, "weight_map": wm}, open(out + "/model.safetensors.index.json", "w"))
EOF
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
