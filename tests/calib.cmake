# calib/ tests: the Check unit tests, the memwall calib / plan CLI end to end
# (exit codes, agreement with the reference imatrix and with llama.cpp's, the
# file accepted by llama.cpp's quantizer through tests/peer), and the corpus
# fuzz target's replay.
if(NOT MW_MINIMAL)
  mw_check_test(check_calib SOURCES check_calib.c LIBS mw_calib mw_hf mw_runtime mw_quant mw_gguf mw_core)
  # the memory formula, --max-memory, the lean mode, resume (check_calib_common.h)
  mw_check_test(check_calib_mem SOURCES check_calib_mem.c LIBS mw_calib mw_runtime mw_quant mw_gguf
                mw_core)
  # the corpus (text, JSONL, gzip) and the samples drawn from it
  mw_check_test(check_calib_corpus SOURCES check_calib_corpus.c LIBS mw_calib mw_hf mw_runtime
                mw_quant mw_gguf mw_core ZLIB::ZLIB)
  # mixture of experts: tiny synthetic MoE GGUFs (tests/tools/rt_fixture)
  mw_check_test(check_calib_moe SOURCES check_calib_moe.c LIBS mw_calib mw_runtime mw_rt_fixture
                mw_quant mw_gguf mw_core)
  target_include_directories(check_calib_moe PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tools)
  mw_shell_test(calib_cli e2e/calib_cli.sh)
  mw_shell_test(calib_plan e2e/calib_plan.sh)
  # --max-memory: adaptation, the clean failure, peak RSS (release: the RSS checks)
  if(MW_SANITIZE)
    mw_shell_test(calib_memory e2e/calib_memory.sh quick)
  else()
    mw_shell_test(calib_memory e2e/calib_memory.sh)
  endif()
  set_tests_properties(calib_cli calib_plan calib_memory PROPERTIES SKIP_RETURN_CODE 77)
  set_tests_properties(calib_memory PROPERTIES COST 100) # among the longer ones: started early
  set_tests_properties(check_calib check_calib_mem PROPERTIES COST 300) # ~60 s under ASan together
  # all 345 reference chunks: ~1 min of CPU in a release build; far longer
  # under the sanitizers, where the unit tests cover the same code on a few samples
  if(NOT MW_SANITIZE)
    mw_shell_test(calib_reference e2e/calib_reference.sh)
    mw_shell_test(calib_peer e2e/calib_reference.sh peer)
    set_tests_properties(calib_reference calib_peer PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200) # 376 s at load 15
    set_tests_properties(calib_reference PROPERTIES COST 300)
    set_tests_properties(calib_peer PROPERTIES LABELS peer)
  endif()
  mw_fuzz_target(corpus LIBS mw_calib)
endif()
