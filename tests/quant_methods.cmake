# quant methods (GPTQ, AWQ): synthetic-layer unit tests (error vs RTN,
# decode consistency, thread determinism, argument errors).
if(NOT MW_MINIMAL)
  mw_check_test(check_quant_methods SOURCES check_quant_methods.c
                LIBS mw_quant_methods mw_calib mw_quant mw_gguf mw_core)
endif()
if(NOT MW_MINIMAL AND NOT MW_SANITIZE)
  mw_shell_test(quant_methods_cli e2e/quant_methods_cli.sh)
  mw_shell_test(quant_methods_peer e2e/quant_methods_cli.sh peer)
  set_tests_properties(quant_methods_cli quant_methods_peer PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  set_tests_properties(quant_methods_peer PROPERTIES LABELS peer)
endif()
