# Tokenizer tests: the pre-tokenizer's Unicode classes (check_tok);
# calibration's token ids are the runtime tokenizer's (check_tok_calib).
# The comparison with llama.cpp's tokenizer is tests/e2e/tok_peer.sh,
# registered in peer.cmake (label peer).
mw_check_test(check_tok SOURCES check_tok.c LIBS mw_runtime)
if(NOT MW_MINIMAL)
  mw_check_test(check_tok_calib SOURCES check_tok_calib.c LIBS mw_calib mw_hf mw_runtime mw_quant mw_gguf mw_core)
endif()
# Unicode normalization (NFC/NFD/NFKC/NFKD) and chat-turn trimming
# (check_tok_norm); the real Qwen3 / Gemma 3 tokenizers through hf_tok and
# the runtime: llama.cpp's control / end-of-generation rules, NFC, the
# SentencePiece-style BPE of Gemma 3 (check_tok_real; skipped without
# .peer/tokenizers).
mw_check_test(check_tok_norm SOURCES check_tok_norm.c LIBS mw_runtime)
if(NOT MW_MINIMAL)
  mw_check_test(check_tok_real SOURCES check_tok_real.c LIBS mw_hf mw_runtime mw_gguf mw_core)
  set_tests_properties(check_tok_real PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
# memwall-run --tokenize against llama.cpp's tokenizer on the real Qwen3,
# Gemma 3 and Gemma 2 tokenizers (tests/e2e/tok_family_peer.sh; label peer).
if(NOT CMAKE_CROSSCOMPILING AND NOT MW_MINIMAL)
  mw_shell_test(tok_family_peer e2e/tok_family_peer.sh)
  set_tests_properties(tok_family_peer PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800 LABELS peer COST 300)
  # the qwen35 and gpt-4o (o200k) pre-tokenizers against llama.cpp, and the
  # o200k one against Hugging Face's (node, @lenml/tokenizers)
  # (tests/e2e/tok_pre_peer.sh; label peer)
  mw_shell_test(tok_pre_peer e2e/tok_pre_peer.sh)
  set_tests_properties(tok_pre_peer PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS peer COST 200
                                               FIXTURES_REQUIRED tokenizers)
  # Gemma 4's gemma4 tokenizer model and gpt-oss's o200k_harmony against
  # llama.cpp: ids, end-of-generation stops, chat format detection
  # (tests/e2e/tok_chat_peer.sh; label peer)
  mw_shell_test(tok_chat_peer e2e/tok_chat_peer.sh)
  set_tests_properties(tok_chat_peer PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS peer COST 60
                                                FIXTURES_REQUIRED tokenizers)
endif()
