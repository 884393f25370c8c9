# memwall-run on the Qwen3 / Gemma 2-3 / Phi-3 families (qwen3, gemma3, gemma2, phi3)
# against llama.cpp itself (tests/peer): tests/e2e/run_families_peer.sh.
# Perplexity within 0.3% and teacher-forced top-1 agreement >= 99% on each
# fixture of tests/fixtures/mk_family_fixture.py converted by memwall.
if(NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(runtime_families_peer e2e/run_families_peer.sh)
  set_tests_properties(runtime_families_peer PROPERTIES LABELS peer SKIP_RETURN_CODE 77
                       TIMEOUT 1800 COST 600)
endif()
# memwall-run on mixture-of-experts models (qwen3moe, qwen2moe with its shared
# expert, Mixtral-layout llama) against llama.cpp itself:
# tests/e2e/run_moe_peer.sh. Perplexity within 0.3% on F16, Q8_0 and Q4_K_M
# (memwall quant --preset) files of rt_mkmodel's MoE fixtures, and of
# tinyllama-8m upcycled into experts by moe_upcycle (tests/moe.cmake) when
# that tool is built; F16 teacher-forced top-1 >= 99%.
if(NOT CMAKE_CROSSCOMPILING)
  if(TARGET moe_upcycle)
    mw_shell_test(runtime_moe_peer e2e/run_moe_peer.sh $<TARGET_FILE:rt_mkmodel>
                  $<TARGET_FILE:moe_upcycle>)
  else()
    mw_shell_test(runtime_moe_peer e2e/run_moe_peer.sh $<TARGET_FILE:rt_mkmodel>)
  endif()
  set_tests_properties(runtime_moe_peer PROPERTIES LABELS peer SKIP_RETURN_CODE 77
                       TIMEOUT 900 COST 200)
endif()
# memwall-run on Gemma 4 (gemma4: the E2B, 26B-A4B and 31B layouts of
# mk_family_fixture.py) against llama.cpp itself: tests/e2e/runtime_gemma4_peer.sh.
# Perplexity within 0.3%, teacher-forced top-1 >= 99%; on E2B's layout the
# per-layer embedding table's resident pages (mincore) are those of the
# tokens seen, the shared-KV layers allocate no cache, the bandwidth line
# counts one row of the table per token.
if(NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(runtime_gemma4_peer e2e/runtime_gemma4_peer.sh)
  set_tests_properties(runtime_gemma4_peer PROPERTIES LABELS peer SKIP_RETURN_CODE 77
                       TIMEOUT 600 COST 60)
endif()
# memwall-run on the gated delta net archs (qwen35, qwen35moe, qwen3next) against
# llama.cpp itself: tests/e2e/run_hybrid_peer.sh on rt_mkmodel's fixtures.
# Perplexity within 0.3% at context 512 in steps of 16 (and the same bits in
# steps of 5), teacher-forced top-1 >= 99%, greedy tokens equal.
if(NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(runtime_hybrid_peer e2e/run_hybrid_peer.sh $<TARGET_FILE:rt_mkmodel>)
  set_tests_properties(runtime_hybrid_peer PROPERTIES LABELS peer SKIP_RETURN_CODE 77
                       TIMEOUT 900 COST 100)
endif()
# memwall-run on gpt-oss (sinks, sliding layers, YaRN, MXFP4 experts with biases,
# top-4-then-softmax routing, clamped SwiGLU) against llama.cpp itself:
# tests/e2e/runtime_gptoss_peer.sh on mk_gptoss_gguf.py's fixture. Perplexity
# within 0.3%, teacher-forced top-1 >= 98%, the same bits across steps,
# threads and kernels, llama.cpp's greedy tokens.
if(NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(runtime_gptoss_peer e2e/runtime_gptoss_peer.sh)
  set_tests_properties(runtime_gptoss_peer PROPERTIES LABELS peer SKIP_RETURN_CODE 77
                       TIMEOUT 300 COST 20)
endif()
# memwall-run when a recurrent model's context fills (no context shift):
# generation stops cleanly at the last position, a chat clears and goes on.
mw_shell_test(runtime_recurrent_ctx e2e/run_recurrent_ctx.sh $<TARGET_FILE:rt_mkmodel>)
