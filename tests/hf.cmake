# hf/ tests: the Check unit tests, end-to-end conversions, and the same
# conversions judged by llama.cpp (tests/peer; label "peer"; skipped with 77
# when the peer cannot be built here).
if(NOT MW_MINIMAL)
  mw_check_test(check_hf SOURCES check_hf.c LIBS mw_hf mw_gguf mw_core PkgConfig::CJSON)
  # the conversion's numerics, whole conversions of tinyllama-8m (check_hf_common.h)
  mw_check_test(check_hf_convert SOURCES check_hf_convert.c LIBS mw_hf mw_gguf mw_core)
  # config.json: the families and the catalogue of errors
  mw_check_test(check_hf_config SOURCES check_hf_config.c LIBS mw_hf mw_core)
  mw_shell_test(hf_convert_cli e2e/convert_cli.sh)
  mw_shell_test(hf_convert_badinput e2e/convert_badinput.sh)
  mw_shell_test(hf_convert_fixtures e2e/convert_fixtures.sh)
  mw_shell_test(hf_convert_tinyllama e2e/convert_tinyllama.sh)
  # FP8 (E4M3) sources: every scale layout against NumPy's dequantization,
  # quant/calib, bad input; and the peak RSS of a large FP8 matrix
  mw_shell_test(hf_convert_fp8 e2e/convert_fp8.sh)
  mw_shell_test(hf_convert_fp8_families e2e/convert_fp8.sh families)
  set_tests_properties(hf_convert_fp8 hf_convert_fp8_families PROPERTIES SKIP_RETURN_CODE 77)
  if(NOT MW_SANITIZE)
    mw_shell_test(hf_convert_fp8_memory e2e/convert_fp8.sh mem)
    set_tests_properties(hf_convert_fp8_memory PROPERTIES SKIP_RETURN_CODE 77)
  endif()
  mw_shell_test(hf_peer_fixtures e2e/convert_fixtures.sh peer)
  mw_shell_test(hf_peer_tinyllama e2e/convert_tinyllama.sh peer)
  set_tests_properties(hf_convert_cli hf_convert_badinput hf_convert_fixtures
                       hf_convert_tinyllama hf_peer_fixtures hf_peer_tinyllama
                       PROPERTIES SKIP_RETURN_CODE 77)
  set_tests_properties(hf_peer_fixtures hf_peer_tinyllama PROPERTIES LABELS peer)
endif()
