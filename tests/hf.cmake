# hf/ tests: the Check unit tests, end-to-end conversions, and the same
# conversions judged by llama.cpp (tests/peer; label "peer"; skipped with 77
# when the peer cannot be built here).
if(NOT MW_MINIMAL)
  mw_check_test(check_hf SOURCES check_hf.c LIBS mw_hf mw_gguf mw_core PkgConfig::CJSON)
  # config.json: the families and the catalogue of errors
  mw_check_test(check_hf_config SOURCES check_hf_config.c LIBS mw_hf mw_core)
  mw_shell_test(hf_convert_cli e2e/convert_cli.sh)
  mw_shell_test(hf_convert_badinput e2e/convert_badinput.sh)
  mw_shell_test(hf_convert_fixtures e2e/convert_fixtures.sh)
  mw_shell_test(hf_convert_tinyllama e2e/convert_tinyllama.sh)
  mw_shell_test(hf_peer_fixtures e2e/convert_fixtures.sh peer)
  mw_shell_test(hf_peer_tinyllama e2e/convert_tinyllama.sh peer)
  set_tests_properties(hf_convert_cli hf_convert_badinput hf_convert_fixtures
                       hf_convert_tinyllama hf_peer_fixtures hf_peer_tinyllama
                       PROPERTIES SKIP_RETURN_CODE 77)
  set_tests_properties(hf_peer_fixtures hf_peer_tinyllama PROPERTIES LABELS peer)
endif()
