# Mixture-of-experts: tests/tools/moe_upcycle (a Mixtral-layout MoE
# upcycled from tinyllama-8m's dense weights: structured, not noise) and
# `memwall quant --preset` on it against llama.cpp's quantizer (label peer).
add_executable(moe_upcycle tools/moe_upcycle.c)
target_link_libraries(moe_upcycle PRIVATE mw_gguf mw_core m)
if(NOT MW_MINIMAL)
  mw_shell_test(quant_moe_peer e2e/quant_moe.sh $<TARGET_FILE:moe_upcycle>)
  set_tests_properties(quant_moe_peer PROPERTIES SKIP_RETURN_CODE 77 LABELS peer TIMEOUT 900 COST 200)
endif()
