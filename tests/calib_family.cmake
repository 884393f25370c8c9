# Calibration and the methods on the Qwen3 / Gemma 2-3 / Phi-3 families (qwen3,
# gemma2, gemma3, phi3; Qwen3.5's qwen35, qwen35moe, qwen3next in
# tests/e2e/calib_qwen35.sh): tests/e2e/calib_family.sh makes each fixture
# (mk_family_fixture.py), converts it (memwall convert, F32) and runs
# check_calib_family on it (forward = runtime, AWQ folds exact, fold
# legality, imatrix entries), then quant with every method and --size from
# the HF directory and from a GGUF, verify --deep, the AWQ log, and (with
# llama-peer built) llama.cpp's load and perplexity. Skips (77) when the
# tokenizer files or python3 are missing.
if(NOT MW_MINIMAL)
  # a Check binary that takes arguments: built here, run by calib_family.sh
  add_executable(check_calib_family check_calib_family.c ck_mark.c check_common.c)
  target_link_options(check_calib_family PRIVATE "LINKER:--wrap=_mark_point") # tests/ck_mark.c
  target_link_libraries(check_calib_family PRIVATE mw_methods mw_calib mw_hf mw_runtime mw_quant
                        mw_gguf mw_core mw_check Threads::Threads m)
  target_compile_definitions(check_calib_family PRIVATE MW_DATASETS_DIR="${MW_DATASETS_DIR}"
                             MW_TEST_TMPDIR="${CMAKE_CURRENT_BINARY_DIR}")
  if(NOT MW_SANITIZE)
    # three tests side by side under ctest -j (one script run was the release
    # tests' longest pole): the gemmas, whose 256k-262k vocabularies make their
    # --bpw output-KL probes most of the CPU, one each; the others together
    mw_shell_test(calib_family e2e/calib_family.sh $<TARGET_FILE:check_calib_family>)
    mw_shell_test(calib_family_gemma3 e2e/calib_family.sh $<TARGET_FILE:check_calib_family>)
    mw_shell_test(calib_family_gemma2 e2e/calib_family.sh $<TARGET_FILE:check_calib_family>)
    set_property(TEST calib_family APPEND PROPERTY ENVIRONMENT "MW_FAMILY_KINDS=qwen3 phi3 phi3long")
    set_property(TEST calib_family_gemma3 APPEND PROPERTY ENVIRONMENT "MW_FAMILY_KINDS=gemma3")
    set_property(TEST calib_family_gemma2 APPEND PROPERTY ENVIRONMENT "MW_FAMILY_KINDS=gemma2")
    # TIMEOUT: about 10x a run on an idle 2-core box beside another test, for a
    # box loaded with other jobs; a hang still ends inside CI's time
    set_tests_properties(calib_family calib_family_gemma3 calib_family_gemma2 PROPERTIES
                         SKIP_RETURN_CODE 77 TIMEOUT 1200 COST 500 FIXTURES_REQUIRED tokenizers)
    # Qwen3.5's gated delta net (qwen35, qwen35moe, qwen3next): forward = the
    # runtime's, folds, entries, determinism; calib, awq+gptq+round and --size
    # with the corpus, verify --deep; llama.cpp's load and perplexity with the peer
    mw_shell_test(calib_qwen35 e2e/calib_qwen35.sh $<TARGET_FILE:check_calib_family>)
    set_tests_properties(calib_qwen35 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 COST 120
                         FIXTURES_REQUIRED tokenizers)
    # Gemma 4 (E2B, 31B and 26B-A4B layouts from their F32 GGUF and HF
    # directories): forward = the runtime's, determinism, entries, folds;
    # calib against llama.cpp's imatrix, quant --corpus gptq+round / awq /
    # --size, verify --deep, llama.cpp's load; gpt-oss refused by name
    add_executable(check_calib_gemma4 check_calib_gemma4.c ck_mark.c check_common.c)
    target_link_options(check_calib_gemma4 PRIVATE "LINKER:--wrap=_mark_point") # tests/ck_mark.c
    target_link_libraries(check_calib_gemma4 PRIVATE mw_methods mw_calib mw_hf mw_runtime mw_quant
                          mw_gguf mw_core mw_check Threads::Threads m)
    target_compile_definitions(check_calib_gemma4 PRIVATE MW_DATASETS_DIR="${MW_DATASETS_DIR}"
                               MW_TEST_TMPDIR="${CMAKE_CURRENT_BINARY_DIR}")
    mw_shell_test(calib_gemma4 e2e/calib_gemma4.sh $<TARGET_FILE:check_calib_gemma4>)
    set_tests_properties(calib_gemma4 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 COST 20
                         FIXTURES_REQUIRED tokenizers)
  endif()
endif()
