# `memwall quant` (quant/quant_preset.c, quant_imatrix.c, quant_pipeline.c,
# tools/cmd_quant.c): the Check unit tests, the command end to end, and the
# comparison with llama.cpp's own quantizer (label peer: skipped with 77 when
# tests/peer/setup.sh cannot build llama-peer here).
mw_check_test(check_quant_preset SOURCES check_quant_preset.c LIBS mw_quant mw_gguf mw_core)
# importance matrices and the streaming pipeline on a synthetic model
mw_check_test(check_quant_pipeline SOURCES check_quant_pipeline.c LIBS mw_quant mw_gguf mw_core)
# two parts side by side (under qemu the whole script was the step's critical
# path): presets, determinism, dry run, overrides | imatrix, .dat, HF source
mw_shell_test(quant_cli e2e/quant_cli.sh presets)
mw_shell_test(quant_cli_imatrix e2e/quant_cli.sh imatrix)
set_tests_properties(quant_cli quant_cli_imatrix PROPERTIES SKIP_RETURN_CODE 77 COST 700) # long: start first
set_tests_properties(check_quant_preset check_quant_pipeline PROPERTIES COST 500)
if(MW_SANITIZE) # -O0 + ASan: the lighter variant (as under qemu)
  set_property(TEST quant_cli quant_cli_imatrix APPEND PROPERTY ENVIRONMENT "MW_LIGHT=1")
endif()
# Timeouts from the measured worst case, load 4 on 2 cores (two CPU hogs
# beside ctest -j2): under qemu check_quant_preset 173 s, quant_cli 436 s
# (lighter qemu variants, before the split); natively 9 s and 14 s at load 2.
# About 3x margin. The sanitizer build (-O0 + ASan, as slow as qemu: 260 s and
# 320 s seen on a box at load 15) takes qemu's.
if(CMAKE_CROSSCOMPILING OR MW_SANITIZE)
  set_tests_properties(check_quant_preset check_quant_pipeline PROPERTIES TIMEOUT 600)
  set_tests_properties(quant_cli quant_cli_imatrix PROPERTIES TIMEOUT 1500)
else()
  set_tests_properties(check_quant_preset check_quant_pipeline PROPERTIES TIMEOUT 300)
  set_tests_properties(quant_cli quant_cli_imatrix PROPERTIES TIMEOUT 600)
endif()
if(NOT MW_MINIMAL)
  mw_shell_test(quant_peer e2e/quant_peer.sh)
  set_tests_properties(quant_peer PROPERTIES SKIP_RETURN_CODE 77 LABELS peer TIMEOUT 900 COST 300)
  # the i-quant presets (IQ1_S .. IQ4_XS, Q2_K_S): types, files, imatrix refusals
  mw_shell_test(quant_iq_peer e2e/quant_iq_peer.sh $<TARGET_FILE:moe_upcycle>)
  set_tests_properties(quant_iq_peer PROPERTIES SKIP_RETURN_CODE 77 LABELS peer TIMEOUT 600 COST 100)
  # the gated delta net families (qwen35, qwen35moe, qwen3next): type rules on
  # fixtures and on the real Qwen3.5 shapes, files byte for byte, --size / --bpw
  mw_shell_test(quant_qwen35_peer e2e/quant_qwen35.sh)
  set_tests_properties(quant_qwen35_peer PROPERTIES SKIP_RETURN_CODE 77 LABELS peer TIMEOUT 600 COST 60)
  # Gemma 4 (per-layer embeddings, fused expert gate+up, .scale tensors): type
  # rules on fixtures and the real E2B/E4B/26B-A4B/31B shapes, files byte for
  # byte, the converted HF fixture, --size / --bpw
  mw_shell_test(quant_gemma4_peer e2e/quant_gemma4_peer.sh)
  set_tests_properties(quant_gemma4_peer PROPERTIES SKIP_RETURN_CODE 77 LABELS peer TIMEOUT 600 COST 40)
endif()
