# Shared helpers of the runtime's tests/e2e/run_*.sh scripts (sourced).
# Environment from ctest (tests/CMakeLists.txt mw_shell_test): MW_BIN, MW_TMP,
# MW_EMU, MW_SHARED, MW_DATASETS, MW_SRC.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
RUNBIN="$MW_BIN/memwall-run"
EVAL="$MW_DATASETS/corpora/eval.txt"
REF_F16="$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf"
PROMPT="It was a dark and stormy night, and"

# mr WANT_RC ARGS...: memwall-run (common.sh run_bin), stdin empty
mr() { run_bin memwall-run "$RUNBIN" "$@" < /dev/null; }

# ppl_of OUTPUT: the perplexity figure of a "ppl X chunks ..." line
ppl_of() { awk '$1 == "ppl" { print $2; exit }' <<< "$1"; }
# close A B REL: |A-B| <= REL*|B|
close() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(a != "" && d <= r * m) }'; }
# reldiff A B: |A-B|/|B| in percent
reldiff() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.4f%%", 100 * d / (b < 0 ? -b : b) }'; }
