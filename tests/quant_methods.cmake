# quant methods (GPTQ, AWQ): synthetic-layer unit tests (error vs RTN,
# decode consistency, thread determinism, argument errors).
if(NOT MW_MINIMAL)
  mw_check_test(check_quant_methods SOURCES check_quant_methods.c
                LIBS mw_methods mw_calib mw_quant mw_gguf mw_core)
endif()
if(NOT MW_MINIMAL AND NOT MW_SANITIZE)
  mw_shell_test(quant_methods_cli e2e/quant_methods_cli.sh)
  # peer scores the CLI run's gptq and awq+gptq+round files (same command, same
  # input) instead of making them again: the CLI test is its fixture
  mw_shell_test(quant_methods_peer e2e/quant_methods_cli.sh peer
                ${CMAKE_CURRENT_BINARY_DIR}/tmp-quant_methods_cli)
  set_tests_properties(quant_methods_cli quant_methods_peer PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200
                       COST 300)
  set_tests_properties(quant_methods_cli PROPERTIES FIXTURES_SETUP quant_methods_files)
  set_tests_properties(quant_methods_peer PROPERTIES LABELS peer FIXTURES_REQUIRED quant_methods_files
                       COST 150)
endif()
# thread-count determinism of calib and every method, under several OpenBLAS
# kernels (OPENBLAS_CORETYPE); release builds only (the sanitizer build runs
# the same code through check_calib's mw_blas tests on small shapes)
if(NOT MW_MINIMAL AND NOT MW_SANITIZE)
  # the default kernel's pass and the other kernels' passes side by side (one
  # script run was one of the release tests' longest poles)
  mw_shell_test(determinism_blas e2e/determinism_blas.sh $<TARGET_FILE:check_calib> default)
  mw_shell_test(determinism_blas_kernels e2e/determinism_blas.sh $<TARGET_FILE:check_calib> kernels)
  # COST: the longest tests start first, so -j2 does not end on a long tail;
  # TIMEOUT: about 10x a run on an idle 2-core box beside another test
  set_tests_properties(determinism_blas determinism_blas_kernels PROPERTIES SKIP_RETURN_CODE 77
                       TIMEOUT 1200 LABELS determinism COST 500)
  set_tests_properties(determinism_blas PROPERTIES COST 300)
endif()
