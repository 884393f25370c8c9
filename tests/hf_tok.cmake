# hf/ tokenizer tests (hf_tok_*.c): SentencePiece protobuf and tokenizer.json
# parsing, side files, the tokenizer.* GGUF keys against llama.cpp's own
# conversion of tinyllama-8m.
if(NOT MW_MINIMAL)
  mw_check_test(check_hf_tok SOURCES check_hf_tok.c LIBS mw_hf)
endif()
