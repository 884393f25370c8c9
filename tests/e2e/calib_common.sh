# Shared helpers of the tests/e2e/calib_*.sh scripts (sourced).
# Environment from ctest (mw_shell_test): MW_BIN, MW_TMP, MW_EMU, MW_SHARED,
# MW_DATASETS, MW_SRC.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
TINY="$MW_DATASETS/tinyllama-8m"
TINY_GGUF="$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf"
LC_IMATRIX="$MW_DATASETS/reference/tinyllama-8m.llamacpp.imatrix.gguf"
CALIB="$MW_DATASETS/corpora/calib.txt"
