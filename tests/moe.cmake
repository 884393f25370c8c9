# Mixture-of-experts: tests/tools/moe_upcycle (a Mixtral-layout MoE
# upcycled from tinyllama-8m's dense weights: structured, not noise) and
# `memwall quant --preset` on it against llama.cpp's quantizer (label peer).
add_executable(moe_upcycle tools/moe_upcycle.c)
target_link_libraries(moe_upcycle PRIVATE mw_gguf mw_core m)
if(NOT MW_MINIMAL)
  # two parts side by side (one script run was the release tests' longest
  # pole): presets, plan, calibration and budget | quant --corpus and qwen2moe
  mw_shell_test(quant_moe_peer e2e/quant_moe.sh $<TARGET_FILE:moe_upcycle> presets)
  mw_shell_test(quant_moe_methods_peer e2e/quant_moe.sh $<TARGET_FILE:moe_upcycle> methods)
  # COST: among the longest, started first; TIMEOUT: about 10x a part's run on
  # an idle 2-core box beside another test, for a box loaded with other jobs
  set_tests_properties(quant_moe_peer quant_moe_methods_peer PROPERTIES SKIP_RETURN_CODE 77 LABELS peer
                       TIMEOUT 1200 COST 900 FIXTURES_REQUIRED tokenizers)
endif()
