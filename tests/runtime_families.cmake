# memwall-run on the families of issue 12 (qwen3, gemma3, gemma2, phi3)
# against llama.cpp itself (tests/peer): tests/e2e/run_families_peer.sh.
# Perplexity within 0.3% and teacher-forced top-1 agreement >= 99% on each
# fixture of tests/fixtures/mk_family_fixture.py converted by memwall.
if(NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(runtime_families_peer e2e/run_families_peer.sh)
  set_tests_properties(runtime_families_peer PROPERTIES LABELS peer SKIP_RETURN_CODE 77
                       TIMEOUT 1800 COST 600)
endif()
