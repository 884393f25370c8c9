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

# rules_vs_llama MODEL...: for each $T/MODEL.gguf and every preset, memwall's
# --dry-run types equal llama_quant_compute_types' (no imatrix: memwall only
# warns where llama-quantize would refuse); prints the number of cases
rules_vs_llama() {
    build_quant_types
    local m p lrc n_cmp=0
    for m in "$@"; do
        for p in $ALL_PRESETS; do
            dry_types "$T/$m.gguf" "$p" > "$T/t-mw" 2> /dev/null ||
                { fail "$m $p: memwall --dry-run failed"; continue; }
            [ -s "$T/t-mw" ] || { fail "$m $p: memwall --dry-run listed no tensor"; continue; }
            "$LQT" "$T/$m.gguf" "$(ftype_of "$p")" > "$T/t-ll" 2> /dev/null
            lrc=$?
            [ $lrc -eq 77 ] && { echo "llama_quant_types: helpers missing, rules not compared"; return; }
            [ $lrc -eq 0 ] || { fail "llama_quant_types $m $p: exit $lrc"; continue; }
            cmp -s "$T/t-mw" "$T/t-ll" ||
                { fail "$m $p: types differ from llama.cpp's:"; diff "$T/t-mw" "$T/t-ll" | head -n 6; }
            n_cmp=$((n_cmp + 1))
        done
    done
    echo "type rules: $n_cmp model x preset cases equal llama.cpp's llama_quant_compute_types"
}
