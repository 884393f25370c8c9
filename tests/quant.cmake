# quant/ tests: the traits table, every block type bit-exact against ggml's
# test vectors (datasets/testvectors, fallback shared/testvectors) and the
# docs/formats.md §4.5 hashes, thread determinism, idempotence; one fork per type.
mw_check_test(check_quant SOURCES check_quant.c LIBS mw_quant)
