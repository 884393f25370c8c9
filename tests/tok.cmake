# Tokenizer tests: the pre-tokenizer's Unicode classes (check_tok);
# calibration's token ids are the runtime tokenizer's (check_tok_calib).
# The comparison with llama.cpp's tokenizer is tests/e2e/tok_peer.sh,
# registered in peer.cmake (label peer).
mw_check_test(check_tok SOURCES check_tok.c LIBS mw_runtime)
if(NOT MW_MINIMAL)
  mw_check_test(check_tok_calib SOURCES check_tok_calib.c LIBS mw_calib mw_hf mw_runtime mw_quant mw_gguf mw_core)
endif()
