# skip MSG (sourced by every tests/e2e script and tests/peer/selftest.sh):
# this test cannot run here, an input or a helper (python3, the llama.cpp
# peer, a bundled file) is missing. Exit 77, which ctest reports as a skip
# (SKIP_RETURN_CODE 77), never as a pass. Under CI=true every input and
# helper must be there, so a skip of an interop or reference test there is
# a failure (exit 1).
skip() {
    echo "SKIP: $*"
    if [ "${CI:-}" = true ]; then
        echo "FAIL: a skip under CI=true is a failure: $*"
        exit 1
    fi
    exit 77
}
