# tools/ tests: the memwall front end end-to-end (exit codes, text and JSON).
mw_shell_test(tools_cli e2e/cli.sh $<TARGET_FILE:mkgguf>)
mw_shell_test(tools_pipe e2e/pipe_cli.sh)
set_tests_properties(tools_pipe PROPERTIES SKIP_RETURN_CODE 77)
# the module graph (docs/architecture.md) and the lint that checks it: a
# shell script on the sources, no binary of ours, so the release build only
if(NOT MW_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(lint_modules e2e/lint_selftest.sh)
endif()
