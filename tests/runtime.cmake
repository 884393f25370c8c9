# runtime/ tests (the kernels have tests/runtime_kernels.cmake):
#   check_runtime       Check unit tests: forward invariance (threads, batch),
#                       no allocation in rt_eval, KV q8_0 and shift, the
#                       families, mixture of experts
#   check_runtime_ssm   Check unit tests: qwen35 / qwen35moe / qwen3next: the
#                       recurrent state across calls, steps and threads, its
#                       memory, rewinds, the delta-net row ops
#   check_runtime_model Check unit tests: hostile-model catalogue, tokenizers,
#                       sampling, chat formats, perplexity
#   runtime_cli         memwall-run end to end: exit codes, messages naming the
#                       key/tensor for every hostile model and the gguf fuzz
#                       corpus, --verify, memory accounting, chat window
#   runtime_tinyllama   tinyllama-8m: greedy tokens and perplexity equal to
#                       llama.cpp's (recorded), the same figure natively and
#                       under qemu-aarch64 (cross build)
#   runtime_peer        (label peer) against llama.cpp itself (tests/peer):
#                       perplexity within 0.3% and the first 32 greedy tokens,
#                       per file (reference F16, memwall convert F16/Q8_0,
#                       memwall quant Q4_K_M/Q3_K_M), tokenization of eval.txt
#   fuzz_replay_runtime the graph builder on the committed corpus
add_library(mw_rt_fixture STATIC tools/rt_fixture.c)
target_link_libraries(mw_rt_fixture PUBLIC mw_quant mw_gguf mw_core)
add_executable(rt_mkmodel tools/rt_mkmodel.c)
target_link_libraries(rt_mkmodel PRIVATE mw_rt_fixture)

mw_check_test(check_runtime SOURCES check_runtime.c LIBS mw_runtime mw_rt_fixture)
# count allocator calls inside rt_eval (GNU ld --wrap; fine under ASan)
target_link_options(check_runtime PRIVATE "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc")
set_tests_properties(check_runtime PROPERTIES TIMEOUT 600 COST 400) # ~90 s under ASan and qemu
mw_check_test(check_runtime_ssm SOURCES check_runtime_ssm.c LIBS mw_runtime mw_rt_fixture)
target_link_options(check_runtime_ssm PRIVATE "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc")
mw_check_test(check_runtime_model SOURCES check_runtime_model.c LIBS mw_runtime mw_rt_fixture)
set_tests_properties(check_runtime_model PROPERTIES TIMEOUT 600)

mw_shell_test(runtime_cli e2e/run_cli.sh $<TARGET_FILE:rt_mkmodel>)
if(MW_SANITIZE)
  set(_rt_quick quick) # fewer tokens: the sanitized forward pass is ~20x slower
else()
  set(_rt_quick "")
endif()
mw_shell_test(runtime_tinyllama e2e/run_tinyllama.sh $<TARGET_FILE:rt_mkmodel> ${_rt_quick})
set_tests_properties(runtime_cli runtime_tinyllama PROPERTIES TIMEOUT 900)
set_tests_properties(runtime_tinyllama PROPERTIES COST 300) # ~70 s under qemu
if(NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(runtime_peer e2e/run_peer.sh $<TARGET_FILE:rt_mkmodel>)
  set_tests_properties(runtime_peer PROPERTIES LABELS peer SKIP_RETURN_CODE 77 TIMEOUT 1800 COST 900)
endif()

mw_fuzz_target(runtime LIBS mw_runtime)
