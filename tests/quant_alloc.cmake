# mixed precision to a budget (quant/quant_alloc.c, memwall quant --bpw/--size/
# --fit-ram): allocation vs brute force, monotonicity, losses, size parsing;
# end to end on tinyllama-8m (real files, verify, exact predicted sizes).
# The sanitizer build runs the small variant (one --size run, usage errors).
mw_check_test(check_quant_alloc SOURCES check_quant_alloc.c LIBS mw_quant mw_gguf mw_core)
set_tests_properties(check_quant_alloc PROPERTIES TIMEOUT 600)
if(NOT MW_MINIMAL)
  if(MW_SANITIZE)
    mw_shell_test(quant_alloc_cli e2e/quant_alloc_cli.sh small)
  else()
    mw_shell_test(quant_alloc_cli e2e/quant_alloc_cli.sh)
  endif()
  set_tests_properties(quant_alloc_cli PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800 COST 700) # long: start first
endif()
if(NOT MW_MINIMAL)
  # the memory plan of the gated delta net families (plan, --fit-ram): the real
  # Qwen3.5 configs (tests/fixtures/configs) against an independent count, the
  # rt_fixture models against the runtime's own allocation
  mw_check_test(check_quant_plan SOURCES check_quant_plan.c
                LIBS mw_calib mw_hf mw_runtime mw_rt_fixture mw_quant mw_gguf mw_core)
  target_compile_definitions(check_quant_plan PRIVATE MW_SRC_DIR="${CMAKE_SOURCE_DIR}")
endif()
