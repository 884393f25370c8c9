# --progress=auto|none|json of quant --corpus, calib and convert:
# the JSON event stream, none, no escape codes in a file, the terminal line
# under a pty (util-linux script). Full builds only (calib); a few seconds.
if(NOT MW_MINIMAL)
  mw_shell_test(progress_cli e2e/progress_cli.sh)
  set_tests_properties(progress_cli PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 COST 60)
endif()
