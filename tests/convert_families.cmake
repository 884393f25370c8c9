# The Qwen3 / Gemma 2-3 / Phi-3 families (Qwen3, Gemma 3 incl. Gemma3ForConditionalGeneration's
# text model, Gemma 2, Phi-3 with and without LongRoPE) and the MoE ones
# (Qwen3-MoE, Mixtral, Qwen2-MoE): `memwall convert` of
# each family fixture (tests/fixtures/mk_family_fixture.py) against the
# digests of llama.cpp's converter output (tests/fixtures/llamacpp_ref/,
# bench/llamacpp_ref.sh), calib_hparams_from_hf against the runtime's reading
# of the converted file (tests/tools/hparams_cmp.c), and llama.cpp loading
# each file (with llama-peer, in the plain build). Skips (77) without the
# tokenizer files (tests/fixtures/fetch_tokenizers.sh).
if(NOT MW_MINIMAL)
  add_executable(hparams_cmp tools/hparams_cmp.c)
  target_link_libraries(hparams_cmp PRIVATE mw_calib mw_hf mw_runtime mw_quant mw_gguf mw_core
                        Threads::Threads m)
  # the plain build: llama.cpp's loads of each file (what hf_peer_families
  # ran, making every fixture and conversion again) inside
  # hf_convert_families, as each file is converted (convert_families.sh
  # mw+peer); the sanitizer build: the memwall side only
  if(MW_SANITIZE)
    mw_shell_test(hf_convert_families e2e/convert_families.sh mw $<TARGET_FILE:hparams_cmp>)
  else()
    mw_shell_test(hf_convert_families e2e/convert_families.sh mw+peer $<TARGET_FILE:hparams_cmp>)
  endif()
  set_tests_properties(hf_convert_families PROPERTIES SKIP_RETURN_CODE 77)
  set_tests_properties(hf_convert_families PROPERTIES COST 700) # among the longest: started first
  # gpt-oss (MXFP4 experts): convert against llama.cpp's converter, bad input,
  # the MXFP4_MOE preset and the requantize refusal (mw); llama.cpp loading
  # the file and llama-quantize's presets (peer)
  mw_shell_test(hf_convert_gptoss e2e/convert_gptoss.sh mw)
  mw_shell_test(hf_peer_gptoss e2e/convert_gptoss.sh peer)
  set_tests_properties(hf_convert_gptoss hf_peer_gptoss PROPERTIES SKIP_RETURN_CODE 77)
  set_tests_properties(hf_peer_gptoss PROPERTIES LABELS peer)
  if(MW_SANITIZE) # the per-type paths are the plain build's
    set_property(TEST hf_convert_gptoss APPEND PROPERTY ENVIRONMENT "MW_FAMILIES_TYPES=f16")
  endif()
  if(MW_SANITIZE)
    set_property(TEST hf_convert_families APPEND PROPERTY ENVIRONMENT "MW_FAMILIES_TYPES=f16")
  else()
    # peak RSS of stacking the experts of a ~525 MiB MoE checkpoint
    # stays under 48 MiB (release builds: sanitizers inflate RSS)
    mw_shell_test(hf_convert_moe_memory e2e/convert_families.sh moemem)
    set_tests_properties(hf_convert_moe_memory PROPERTIES SKIP_RETURN_CODE 77 COST 30)
  endif()
endif()
