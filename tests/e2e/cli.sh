#!/usr/bin/env bash
# memwall front end end-to-end: exit codes (0 ok, 1 bad file, 2 usage,
# 3 I/O), the text and JSON output of `inspect` and `verify`, and a file
# written by llama.cpp itself (no memwall checksums) when shared/ has it.
#
#   cli.sh MKGGUF        (env: MW_BIN, MW_TMP, MW_EMU, MW_SHARED as set by ctest)
MKGGUF=${1:?usage: cli.sh MKGGUF}
. "$(dirname "$0")/common.sh"
have_python=0
command -v python3 > /dev/null 2>&1 && python3 -c 'import json' 2> /dev/null && have_python=1

json_ok() {
    [ $have_python -eq 1 ] || return 0
    python3 -c 'import json,sys; json.load(sys.stdin)' < "$T/out" || fail "$1: --json output does not parse"
}
# json_eq EXPR VALUE: python expression over document d
json_eq() {
    [ $have_python -eq 1 ] || return 0
    local got
    got=$(python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" < "$T/out")
    [ "$got" = "$2" ] || fail "json $1 = '$got', want '$2'"
}

$MW_EMU "$MKGGUF" small "$T/s.gguf" || { echo "mkgguf failed"; exit 1; }
$MW_EMU "$MKGGUF" small "$T/nock.gguf" --no-checksums || exit 1
$MW_EMU "$MKGGUF" small "$T/nan.gguf" --nan || exit 1

# --- usage: exit 2 ---
run 2
has "$err" "usage: memwall" "no command"
run 2 bogus
has "$err" "unknown command 'bogus'" "unknown command"
run 2 verify
has "$err" "memwall verify: missing FILE.gguf" "verify without file"
run 2 verify --bogus "$T/s.gguf"
has "$err" "unknown option '--bogus'" "verify bad option"
run 2 verify "$T/s.gguf" "$T/s.gguf"
run 2 inspect
run 2 inspect --frobnicate "$T/s.gguf"
run 2 help bogus

# --- help and version: exit 0 ---
run 0 --version
has "$out" "memwall " "--version"
run 0 help
has "$out" "inspect" "help"
has "$out" "verify" "help"
run 0 help verify
has "$out" "usage: memwall verify" "help verify"
run 0 inspect --help
has "$out" "usage: memwall inspect" "inspect --help"

# --- I/O errors: exit 3 ---
run 3 verify "$T/missing.gguf"
has "$err" "memwall verify: $T/missing.gguf: cannot open" "verify missing file"
run 3 inspect "$T/missing.gguf"
has "$err" "memwall inspect: $T/missing.gguf" "inspect missing file"
run 3 verify "$T"
if [ -w /dev/full ]; then
    $MW_EMU "$MEMWALL" inspect "$T/s.gguf" > /dev/full 2> "$T/err"
    rc=$?
    [ $rc -eq 3 ] || fail "inspect > /dev/full: exit $rc, want 3"
fi

# --- verify ---
run 0 verify "$T/s.gguf"
has "$out" "OK: 4 tensors, checksums verified" "verify intact"
run 0 verify --quiet "$T/s.gguf"
[ -z "$out" ] || fail "verify --quiet printed: $out"
run 0 verify --deep "$T/s.gguf"
has "$out" "all values finite" "verify --deep"
run 0 verify --json "$T/s.gguf"
json_ok "verify --json"
json_eq 'd["ok"], d["status"], d["checksums"], d["n_tensors"], d["tensors_hashed"]' \
    "True OK ok 4 4"
run 0 verify "$T/nock.gguf"
has "$out" "no checksums" "verify without checksums"
has "$out" "OK: 4 tensors (no checksums: structural checks only)" "verify without checksums"
run 0 verify "$T/nan.gguf"
run 1 verify --deep "$T/nan.gguf"
has "$out" "tensor 't.f16': element 3 (row 0, col 3) is NaN" "verify --deep NaN"
has "$out" "FAILED: 1 problem" "verify --deep NaN"
run 1 verify --deep --json "$T/nan.gguf"
json_ok "verify --deep --json"
json_eq 'd["status"], d["problems"][0]["tensor"], d["problems"][0]["code"]' "E_VALUE t.f16 E_VALUE"

# damaged: one data byte of t.bf16 (offset from inspect --json)
run 0 inspect --json "$T/s.gguf"
json_ok "inspect --json"
json_eq 'd["n_tensors"], [t["name"] for t in d["tensors"]], d["totals"]["params"]' \
    "4 ['t.f32', 't.f16', 't.bf16', 't.q8_0'] 102"
json_eq '[m["key"] for m in d["metadata"] if m["type"] == "array"]' \
    "['mkgguf.u32s', 'mkgguf.f32s', 'mkgguf.strs', 'memwall.checksum.tensors']"
off=$(grep -o '"file_offset": [0-9]*' "$T/out" | sed -n 3p | grep -o '[0-9]*$')
if [ -n "$off" ]; then
    cp "$T/s.gguf" "$T/bad.gguf"
    printf '\x42' | dd of="$T/bad.gguf" bs=1 seek=$((off + 1)) count=1 conv=notrunc status=none
    run 1 verify "$T/bad.gguf"
    has "$out" "offset $off (0x" "verify damaged"
    has "$out" "tensor 't.bf16': checksum mismatch" "verify damaged"
    has "$out" "[E_CHECKSUM]" "verify damaged"
    has "$out" "FAILED: 1 problem" "verify damaged"
    run 1 verify --quiet "$T/bad.gguf"
    has "$out" "checksum mismatch" "verify --quiet damaged"
    run 1 verify --json "$T/bad.gguf"
    json_ok "verify --json damaged"
    json_eq 'd["ok"], d["exit_code"], d["problems"][0]["offset"]' "False 1 $off"
else
    fail "no file_offset in inspect --json output"
fi

# truncated: verify names the first missing tensor; inspect shows and exits 1
head -c $((off + 3)) "$T/s.gguf" > "$T/cut.gguf"
run 1 verify "$T/cut.gguf"
has "$out" "tensor 't.bf16'" "verify truncated"
has "$out" "15 bytes short; 1 further tensor missing" "verify truncated"
run 1 inspect "$T/cut.gguf"
has "$out" "MISSING" "inspect truncated"
has "$err" "2 of 4 tensors are missing" "inspect truncated"

# --- inspect text ---
run 0 inspect "$T/s.gguf"
has "$out" "v3, 10 keys, 4 tensors, alignment 32" "inspect header"
has "$out" 'mkgguf.strs' "inspect metadata"
has "$out" '["a", "bc", "d\"e"]' "inspect string array"
has "$out" "t.q8_0" "inspect tensors"
has "$out" "4 tensors, 102 params, 174 bytes" "inspect totals"

# --- a file written by llama.cpp (no memwall checksums) ---
# (bundled in datasets/: missing is a failure, never a silent pass)
ref="${MW_DATASETS:-}/reference/tinyllama-8m.llamacpp-f16.gguf"
if [ -r "$ref" ]; then
    run 0 verify "$ref"
    has "$out" "no checksums" "verify llama.cpp file"
    has "$out" "OK: 75 tensors" "verify llama.cpp file"
    run 0 verify --deep --json "$ref"
    json_ok "verify llama.cpp --json"
    json_eq 'd["checksums"], d["tensors_decoded"]' "absent 75"
    run 0 inspect "$ref"
    has "$out" "tensors:   75" "inspect llama.cpp file"
    has "$out" "totals:    75 tensors" "inspect llama.cpp file"
    run 0 inspect --json "$ref"
    json_ok "inspect llama.cpp --json"
    json_eq 'len(d["tensors"])' "75"
else
    echo "FAIL: $ref missing (bundled in datasets/)"
    fails=$((fails + 1))
fi

echo "cli: $fails failures"
[ $fails -eq 0 ]
