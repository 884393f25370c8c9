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
