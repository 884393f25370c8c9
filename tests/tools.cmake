# tools/ tests: the memwall front end end-to-end (exit codes, text and JSON).
mw_shell_test(tools_cli e2e/cli.sh $<TARGET_FILE:mkgguf>)
mw_shell_test(tools_pipe e2e/pipe_cli.sh)
set_tests_properties(tools_pipe PROPERTIES SKIP_RETURN_CODE 77)
# the module graph (docs/architecture.md) and the lint that checks it: a
# shell script on the sources, no binary of ours, so the release build only
if(NOT MW_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(lint_modules e2e/lint_selftest.sh)
endif()
# the CI quality gate (eval, --junit) and quant's mix line on tinyllama-8m;
# installing (cmake --install, pkg-config, man pages) and the .deb: release
# build only (they run the real model; cpack packs this build)
if(NOT MW_SANITIZE AND NOT CMAKE_CROSSCOMPILING AND NOT MW_MINIMAL)
  mw_shell_test(eval_gate e2e/eval_gate.sh)
  mw_shell_test(install_deb e2e/install_deb.sh)
  set_tests_properties(eval_gate install_deb PROPERTIES SKIP_RETURN_CODE 77)
endif()
