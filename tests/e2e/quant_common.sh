# Shared helpers of tests/e2e/quant_*.sh (sourced).
# Environment from ctest (tests/CMakeLists.txt mw_shell_test): MW_BIN, MW_TMP,
# MW_EMU, MW_SHARED, MW_DATASETS, MW_SRC.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -n "${MW_QUANT_NO_SHM:-}" ] || scratch_on_shm quant
F16=$(ref tinyllama-8m.llamacpp-f16.gguf)
IMAT=$(ref tinyllama-8m.llamacpp.imatrix.gguf)
PRESETS="Q8_0 Q6_K Q5_K_M Q5_K_S Q4_K_M Q4_K_S Q4_0 Q3_K_L Q3_K_M Q3_K_S Q2_K"
EXTRA_PRESETS="Q5_1 Q5_0 Q4_1 IQ4_NL"

# dry_types SRC PRESET [args]: "name type" per tensor from memwall quant --dry-run
dry_types() {
    local src=$1 preset=$2
    shift 2
    $MW_EMU "$MEMWALL" quant "$src" --preset "$preset" --dry-run -q "$@" |
        awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $2, $5 }'
}

# every preset llama-quantize and memwall share, and llama_ftype's number of each
ALL_PRESETS="Q8_0 Q6_K Q5_K_M Q5_K_S Q4_K_M Q4_K_S Q4_0 Q4_1 Q5_0 Q5_1 Q3_K_L Q3_K_M Q3_K_S Q2_K
     Q2_K_S IQ4_NL IQ4_XS IQ3_M IQ3_S IQ3_XS IQ3_XXS IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S"
ftype_of() {
    case $1 in
    Q4_0) echo 2 ;; Q4_1) echo 3 ;; Q8_0) echo 7 ;; Q5_0) echo 8 ;; Q5_1) echo 9 ;;
    Q2_K) echo 10 ;; Q3_K_S) echo 11 ;; Q3_K_M) echo 12 ;; Q3_K_L) echo 13 ;;
    Q4_K_S) echo 14 ;; Q4_K_M) echo 15 ;; Q5_K_S) echo 16 ;; Q5_K_M) echo 17 ;;
    Q6_K) echo 18 ;; IQ2_XXS) echo 19 ;; IQ2_XS) echo 20 ;; Q2_K_S) echo 21 ;;
    IQ3_XS) echo 22 ;; IQ3_XXS) echo 23 ;; IQ1_S) echo 24 ;; IQ4_NL) echo 25 ;;
    IQ3_S) echo 26 ;; IQ3_M) echo 27 ;; IQ2_S) echo 28 ;; IQ2_M) echo 29 ;;
    IQ4_XS) echo 30 ;; IQ1_M) echo 31 ;;
    esac
}

# build_quant_types: $LQT, tests/peer/llama_quant_types.c linked against the
# peer's libllama (llama.cpp's own llama_quant_compute_types); fails the test
# when it cannot be built
build_quant_types() {
    local libdir
    libdir=$(cd "$(dirname "$(ls "$(dirname "$PEER")"/../node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama*.so | head -n 1)")" && pwd)
    LQT="$T/llama_quant_types"
    if ! cc -std=c11 -O1 -w -I"$(dirname "$PEER")/../include" "$MW_SRC/tests/peer/llama_quant_types.c" \
            "$libdir"/libllama*.so "$libdir"/libggml-base.so "$libdir"/libggml.v*.so \
            -Wl,-rpath,"$libdir" -ldl -o "$LQT" 2> "$T/lqt.err"; then
        fail "cannot build llama_quant_types: $(head -n 3 "$T/lqt.err")"
        finish
    fi
}

# types_vs_llama MODEL PRESET [memwall flags] [-- llama_quant_types flags]:
# memwall's --dry-run types of the file MODEL equal llama_quant_compute_types'
# ($LQT, from build_quant_types); a case that agrees adds 1 to N_RULES;
# returns 77 when llama_quant_types' helpers are missing
types_vs_llama() {
    local model=$1 p=$2 lrc what
    shift 2
    local mw=() ll=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do mw+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    ll=("$@")
    what="$(basename "$model" .gguf) $p${mw[*]:+ ${mw[*]}}"
    dry_types "$model" "$p" "${mw[@]}" > "$T/t-mw" 2> "$T/t-mw.err" ||
        { fail "$what: memwall --dry-run failed: $(head -n 2 "$T/t-mw.err")"; return 0; }
    [ -s "$T/t-mw" ] || { fail "$what: memwall --dry-run listed no tensor"; return 0; }
    "$LQT" "$model" "$(ftype_of "$p")" "${ll[@]}" > "$T/t-ll" 2> "$T/t-ll.err"
    lrc=$?
    [ $lrc -eq 77 ] && return 77
    [ $lrc -eq 0 ] || { fail "llama_quant_types $what: exit $lrc: $(head -n 2 "$T/t-ll.err")"; return 0; }
    if ! cmp -s "$T/t-mw" "$T/t-ll"; then
        fail "$what: types differ from llama.cpp's:"
        diff "$T/t-mw" "$T/t-ll" | head -n 6
        head -n 2 "$T/t-mw.err"
        return 0
    fi
    N_RULES=$((N_RULES + 1))
}

# rules_vs_llama MODEL...: for each model ($T/MODEL.gguf, or MODEL itself
# where it holds a '/') and every preset of RULES_PRESETS (default
# ALL_PRESETS), types_vs_llama without an imatrix (memwall only warns where
# llama-quantize would refuse); prints the number of cases in N_RULES;
# returns 77 when llama_quant_types' helpers are missing
rules_vs_llama() {
    build_quant_types
    local m p
    N_RULES=0
    for m in "$@"; do
        case $m in */*) ;; *) m="$T/$m.gguf" ;; esac
        for p in ${RULES_PRESETS:-$ALL_PRESETS}; do
            types_vs_llama "$m" "$p" ||
                { echo "llama_quant_types: helpers missing, rules not compared"; return 77; }
        done
    done
    echo "type rules: $N_RULES model x preset cases equal llama.cpp's llama_quant_compute_types"
}
