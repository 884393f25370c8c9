# Fuzz targets. Each tests/fuzz/fuzz_<name>.c defines LLVMFuzzerTestOneInput.
#  - always: replay_<name> (with tests/fuzz/fuzz_main.c) runs the committed
#    corpus tests/fuzz/corpus/<name>/ under ctest (gcc, ASan, qemu builds);
#  - with -DMW_FUZZ=ON (clang): fuzz_<name> is a libFuzzer binary; scripts/fuzz.sh
#    runs each for a bounded time (the test command) or long (bench/fuzz_long.sh).
function(mw_fuzz_target name)
  cmake_parse_arguments(A "" "" "LIBS" ${ARGN})
  set(src "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${name}.c")
  if(NOT EXISTS "${src}")
    return()
  endif()
  add_executable(replay_${name} "${src}" "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_main.c")
  target_link_libraries(replay_${name} PRIVATE ${A_LIBS})
  add_test(NAME fuzz_replay_${name}
           COMMAND replay_${name} "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${name}")
  if(MW_FUZZ)
    add_executable(fuzz_${name} "${src}")
    target_compile_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(fuzz_${name} PRIVATE ${A_LIBS} -fsanitize=fuzzer)
  endif()
endfunction()

mw_fuzz_target(gguf LIBS mw_gguf)
if(TARGET mw_verify)
  mw_fuzz_target(verify LIBS mw_verify mw_quant mw_gguf)
endif()
if(NOT MW_MINIMAL)
  mw_fuzz_target(safetensors LIBS mw_hf)
  mw_fuzz_target(spm LIBS mw_hf)
  mw_fuzz_target(tokjson LIBS mw_hf)
  mw_fuzz_target(config LIBS mw_hf)
endif()
mw_fuzz_target(imatrix LIBS mw_quant mw_gguf)
