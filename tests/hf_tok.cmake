# hf/ tokenizer tests (hf_tok_*.c): SentencePiece protobuf and tokenizer.json
# parsing, side files, the tokenizer.* GGUF keys against llama.cpp's own
# conversion of tinyllama-8m.
if(NOT MW_MINIMAL)
  # SentencePiece (tokenizer.model, tinyllama-8m against llama.cpp) and
  # tokenizer.json: two suites sharing check_hf_tok_common.h
  mw_check_test(check_hf_tok_spm SOURCES check_hf_tok_spm.c LIBS mw_hf)
  mw_check_test(check_hf_tok_json SOURCES check_hf_tok_json.c LIBS mw_hf)
endif()
