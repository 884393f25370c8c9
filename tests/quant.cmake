# quant/ tests: the traits table, every block type bit-exact against ggml's
# test vectors (datasets/testvectors, fallback shared/testvectors) and the
# docs/formats.md §4.5 hashes, thread determinism, idempotence; one fork per type.
mw_check_test(check_quant SOURCES check_quant.c LIBS mw_quant)
# The i-quants (IQ1_S..IQ3_S, IQ4_XS) against the bytes of the llama.cpp peer's
# ggml (datasets/testvectors/<t>.*, tests/tools/gen_iq_vectors.sh), one fork per type.
mw_check_test(check_quant_iq SOURCES check_quant_iq.c LIBS mw_quant)
# MXFP4 (gpt-oss experts): hand-worked blocks and the FNV-1a of ggml's bytes.
mw_check_test(check_quant_mxfp4 SOURCES check_quant_mxfp4.c LIBS mw_quant)
