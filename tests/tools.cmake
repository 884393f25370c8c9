# tools/ tests: the memwall front end end-to-end (exit codes, text and JSON).
mw_shell_test(tools_cli e2e/cli.sh $<TARGET_FILE:mkgguf>)
