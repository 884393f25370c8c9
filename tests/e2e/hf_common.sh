# Shared helpers of the tests/e2e/convert_*.sh scripts (sourced).
# Environment from ctest (tests/CMakeLists.txt mw_shell_test): MW_BIN, MW_TMP,
# MW_EMU, MW_SHARED, MW_DATASETS, MW_SRC.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
