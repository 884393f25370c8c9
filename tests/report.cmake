# memwall report and quant --report/--card (tools/report*.c): the page's
# cells, sizes, plan, calibration and quality on tinyllama-8m, the model
# card; then the page in headless Chromium (DOM, screenshots at 390 px and
# desktop width). Full builds only (the report reads the plan through calib).
if(NOT MW_MINIMAL AND NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(report_cli e2e/report_cli.sh)
  mw_shell_test(report_browser e2e/report_browser.sh)
  set_tests_properties(report_cli report_browser PROPERTIES SKIP_RETURN_CODE 77)
endif()
