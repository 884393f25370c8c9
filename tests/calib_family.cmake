# Calibration and the methods on the Qwen3 / Gemma 2-3 / Phi-3 families (qwen3,
# gemma2, gemma3, phi3): tests/e2e/calib_family.sh makes each fixture
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
    mw_shell_test(calib_family e2e/calib_family.sh $<TARGET_FILE:check_calib_family>)
    set_tests_properties(calib_family PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 COST 600)
  endif()
endif()
