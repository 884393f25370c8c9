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
