# Shared helpers of tests/e2e/faults_*.sh (sourced).
# Environment from ctest (tests/CMakeLists.txt mw_shell_test): MW_BIN, MW_TMP,
# MW_EMU, MW_SHARED, MW_DATASETS, MW_SRC. $1 of the sourcing script, when
# given, is tests/faults/mw_fault.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
FAULT=${1:-}
[ -n "${MW_FAULTS_NO_SHM:-}" ] || scratch_on_shm faults

# fault NAME FAULT_OPTS... -- MEMWALL_ARGS...: memwall under mw_fault.
# Sets $rc (mw_fault's exit: memwall's, or 128 + signal), $err (memwall's
# stderr), $triggered (0/1: the fault fired before memwall ended), $status
# ("exit N" / "signal N").
fault() {
    local name=$1
    shift
    local fopts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do fopts+=("$1"); shift; done
    shift
    rm -f "$T/report"
    # stderr through a pipe: RLIMIT_FSIZE would cut a message to a file short
    $MW_EMU "$FAULT" "${fopts[@]}" --report "$T/report" -- $MW_EMU "$MEMWALL" "$@" \
        2>&1 > "$T/out" | cat > "$T/err"
    rc=${PIPESTATUS[0]}
    err=$(cat "$T/err")
    triggered=$(sed -n 's/^triggered //p' "$T/report" 2> /dev/null)
    status=$(sed -n 's/^status //p' "$T/report" 2> /dev/null)
    [ -n "$triggered" ] || { fail "$name: mw_fault wrote no report (exit $rc)"; triggered=0; }
    echo "  $name: $status (fault fired: $triggered; temp bytes at the fault: $(sed -n 's/^temp_bytes //p' "$T/report" 2> /dev/null))"
}

# temps DIR: names of leftover temp files in DIR (one per line)
temps() { (cd "$1" && ls -A | grep '\.tmp\.' || true); }
# others DIR OUT: names in DIR other than basename OUT (DIR holds outputs only)
others() { (cd "$1" && ls -A | grep -vxF "$(basename "$2")" || true); }

# after_failure NAME DIR OUT KEEP: checks that the final name OUT holds what
# it held before (KEEP: a copy of it, or "" if there was no file), and that
# DIR, which holds only outputs, holds nothing else: no temp or scratch file.
after_failure() {
    local name=$1 dir=$2 o=$3 keep=$4
    if [ -n "$keep" ]; then
        cmp -s "$keep" "$o" || fail "$name: the existing $o was changed"
    else
        [ -e "$o" ] && fail "$name: $o appeared although the command failed"
    fi
    local left
    left=$(others "$dir" "$o")
    [ -z "$left" ] || fail "$name: file(s) left behind: $left"
}

# after_kill NAME DIR OUT KEEP [REF]: as after_failure, except that a
# SIGKILLed writer cannot clean up: a temp file may remain, but only under a
# temp name (OUT.tmp.XXXXXX; for quant's scratch KV file OUT.kv-PID[.tmp.XXXXXX]).
# They are removed here, as a user would. A kill that lands after the rename
# (the writer was already past its commit, e.g. freeing memory or in the
# sanitizer's exit-time leak check) leaves the complete new file: with REF
# (the expected output) that is accepted; anything else under OUT is not.
after_kill() {
    local name=$1 dir=$2 o=$3 keep=$4 ref=${5:-} base f
    base=$(basename "$o")
    if [ -n "$ref" ] && [ -e "$o" ] && cmp -s "$ref" "$o"; then
        echo "  $name: killed after the commit; the output is complete"
    elif [ -n "$keep" ]; then
        cmp -s "$keep" "$o" || fail "$name: the existing $o was changed"
    else
        [ -e "$o" ] && fail "$name: $o appeared although the writer was killed"
    fi
    for f in $(others "$dir" "$o"); do
        [[ $f == "$base".tmp.?????? ]] || [[ $f == "$base".kv-* ]] ||
            fail "$name: unexpected file $f"
        rm -f "${dir:?}/$f"
    done
}

# smallfs SIZE DIR SCRIPT: runs `bash -c SCRIPT` with a fresh tmpfs of SIZE
# mounted at DIR, in a private mount namespace that ends with SCRIPT (no
# mount outlives the test, even when it is killed). Exit 77 where mounting
# is not permitted (no root and no user namespaces, or a seccomp profile
# that forbids unshare/mount); otherwise SCRIPT's exit status. Variables the
# script needs must be exported.
smallfs() {
    local size=$1 dir=$2 script=$3 pre
    mkdir -p "$dir" || return 1
    if [ "$(id -u)" = 0 ]; then pre=(unshare -m); else pre=(unshare -Urm); fi
    "${pre[@]}" bash -c 'mount -t tmpfs -o "size=$1" memwall-faults "$2" || exit 77
                         eval "$3"' bash "$size" "$dir" "$script" 2>> "$T/smallfs.log"
    local r=$?
    # unshare itself refused (EPERM): not permitted here either
    if [ $r -ne 0 ] && grep -q 'unshare failed' "$T/smallfs.log" 2> /dev/null; then r=77; fi
    return $r
}

# --- the write-fault cases every output-writing command shares --------------
# (faults_convert.sh, faults_quant.sh). The sourcing script sets:
#   WRITE  array: the memwall arguments that write the output, without -o
#          (e.g. WRITE=(convert "$S" --type q8_0 -q)); the output is -o $O/o.gguf
#   REF    the reference output (what WRITE writes when nothing goes wrong)
# and calls faults_setup first (O, $T/keep, put_keep).

faults_setup() {
    O=$T/outdir
    mkdir -p "$O"
    echo "previous output, must survive" > "$T/keep"
}
put_keep() { cp "$T/keep" "$O/o.gguf"; }

# rerun_ok NAME: a clean rerun now gives the reference bytes
rerun_ok() {
    rm -f "$O/o.gguf"
    run 0 "${WRITE[@]}" -o "$O/o.gguf" &&
        { cmp -s "$REF" "$O/o.gguf" || fail "$1: rerun output differs from the reference"; }
    rm -f "$O/o.gguf"
}

# faults_fsize LIMIT...: the disk fills at each RLIMIT_FSIZE, with and without
# an existing output: exit 3, E_NOSPACE naming the output, nothing left.
faults_fsize() {
    local lim keep
    echo "(a) RLIMIT_FSIZE"
    for lim in "$@"; do
        for keep in yes no; do
            rm -f "$O/o.gguf"
            [ $keep = yes ] && put_keep
            fault "fsize $lim (keep $keep)" --fsize "$lim" -- "${WRITE[@]}" -o "$O/o.gguf"
            [ "$rc" -eq 3 ] || fail "fsize $lim: exit $rc ($status), want 3; stderr: $err"
            has "$err" "memwall ${WRITE[0]}: $O/o.gguf" "fsize $lim"
            has "$err" "File too large [E_NOSPACE]" "fsize $lim"
            after_failure "fsize $lim" "$O" "$O/o.gguf" "$([ $keep = yes ] && echo "$T/keep")"
        done
    done
}

# faults_tmpfs: a 16 MiB tmpfs with 10 MiB of it taken, where the output
# does not fit (ENOSPC): exit 3, the existing output intact, no file left;
# then the filler goes and the same command succeeds on the same filesystem.
faults_tmpfs() {
    echo "(a) full tmpfs"
    local cmd r rep
    cmd=$(printf '%q ' "${WRITE[@]}")
    export MEMWALL MW_EMU REF T
    smallfs 16m "$T/small" '
        D=$T/small
        head -c 10485760 /dev/zero > "$D/filler" || exit 90
        cp "$T/keep" "$D/o.gguf"
        $MW_EMU "$MEMWALL" '"$cmd"' -o "$D/o.gguf" 2> "$T/small.err"
        echo "rc $?" > "$T/small.rep"
        cmp -s "$T/keep" "$D/o.gguf" && echo "keep ok" >> "$T/small.rep"
        ls -A "$D" | grep -v -e "^o.gguf\$" -e "^filler\$" | sed "s/^/left /" >> "$T/small.rep"
        rm -f "$D/filler"
        $MW_EMU "$MEMWALL" '"$cmd"' -o "$D/o.gguf" 2>> "$T/small.err"
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
}

# faults_kill MIN_FIRED POINT...: SIGKILL at each trigger point (mw_fault
# options, e.g. "--at-size 1048576" or "--at-ms 5"), every other time over an
# existing output: killed mid-write, only temp-named files remain (removed
# here) and the existing output is intact; not fired, the output is complete.
# At least MIN_FIRED of the points must fire mid-write.
faults_kill() {
    local min=$1 p keep k=0 fired=0
    shift
    echo "(b) SIGKILL"
    for p in "$@"; do
        k=$((k + 1))
        rm -f "$O/o.gguf"
        keep=""
        if [ $((k % 2)) -eq 0 ]; then put_keep; keep=$T/keep; fi
        # shellcheck disable=SC2086
        fault "kill $p" --slice-us 50 --watch "$O" $p --kill -- "${WRITE[@]}" -o "$O/o.gguf"
        if [ "$triggered" = 1 ]; then
            fired=$((fired + 1))
            [ "$status" = "signal 9" ] || fail "kill $p: status $status, want signal 9"
            after_kill "kill $p" "$O" "$O/o.gguf" "$keep" "$REF"
        else # finished before the point was reached: then it must be complete
            [ "$rc" -eq 0 ] || fail "kill $p (not fired): exit $rc"
            cmp -s "$REF" "$O/o.gguf" || fail "kill $p (not fired): output differs"
        fi
    done
    [ $fired -ge "$min" ] || fail "SIGKILL fired mid-write in only $fired of $# cases"
}

# faults_signals SIG...: each signal (INT, TERM, HUP) once the temp file holds
# 2 MiB, over an existing output: the process dies of that signal, its
# handler having removed the temp file; the existing output is intact.
faults_signals() {
    local sig num
    for sig in "$@"; do
        num=$(kill -l "$sig")
        put_keep
        fault "SIG$sig" --slice-us 50 --watch "$O" --at-size 2097152 --signal "$sig" -- \
            "${WRITE[@]}" -o "$O/o.gguf"
        if [ "$triggered" = 1 ]; then
            [ "$status" = "signal $num" ] || fail "SIG$sig: status $status, want signal $num"
            after_failure "SIG$sig" "$O" "$O/o.gguf" "$T/keep"
        fi
    done
}

# faults_source AT_SIZE FILE: the input FILE that WRITE maps changes while it
# is read, once the temp file holds AT_SIZE bytes (restore_src, set by the
# sourcing script, puts FILE back). Truncated (to 8000000 bytes, then to
# none): SIGBUS on the mapping, handled — exit 3 naming FILE and the offset,
# the unfinished output removed, an existing output intact. Unlinked: the
# open file is still read whole and the output is the reference.
faults_source() {
    local at=$1 file=$2 len
    echo "(c) source faults"
    for len in 8000000 0; do
        restore_src
        put_keep
        fault "truncate source to $len" --slice-us 50 --watch "$O" --at-size "$at" \
            --truncate "$file" $len -- "${WRITE[@]}" -o "$O/o.gguf"
        [ "$triggered" = 1 ] || fail "truncate $len: ${WRITE[0]} ended before the fault"
        [ "$rc" -eq 3 ] || fail "truncate $len: exit $rc ($status), want 3; stderr: $err"
        has "$err" "memwall ${WRITE[0]}: $file: offset " "truncate $len"
        has "$err" "changed or was truncated while being read" "truncate $len"
        has "$err" "unfinished output removed [E_IO]" "truncate $len"
        after_failure "truncate $len" "$O" "$O/o.gguf" "$T/keep"
    done
    restore_src
    rerun_ok "truncated source"
    fault "unlink source" --slice-us 50 --watch "$O" --at-size "$at" --unlink "$file" -- \
        "${WRITE[@]}" -o "$O/o.gguf"
    [ "$rc" -eq 0 ] || fail "unlink source: exit $rc; stderr: $err"
    cmp -s "$REF" "$O/o.gguf" || fail "unlink source: output differs from the reference"
    [ -z "$(temps "$O")" ] || fail "unlink source: temp file left"
    rm -f "$O/o.gguf"
    restore_src
}
