# runtime/ kernels: NEON/SDOT vs scalar reference (bit-identical), scalar vs
# quant/'s decoding, allocation-free rt_matvec.
mw_check_test(check_rt_kernels SOURCES check_rt_kernels.c LIBS mw_rt_kernels mw_quant)
# Count allocator calls around rt_matvec (GNU ld --wrap; also fine under ASan).
target_compile_definitions(check_rt_kernels PRIVATE RT_TEST_WRAP_ALLOC=1)
target_link_options(check_rt_kernels PRIVATE
  "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free")
set_tests_properties(check_rt_kernels PROPERTIES TIMEOUT 600)

# In the aarch64 cross build the NEON variants are checked by name, on two
# real cores: Cortex-A53 (ARMv8.0: NEON, no dot product -> the emulated-dot
# kernels) and Cortex-A76 (ARMv8.2 + dotprod -> the SDOT kernels), and on
# qemu's "max" CPU, which has FEAT_I8MM (SMMLA: the neon+i8mm table, whose
# batched products differ from the SDOT table's). The plain run above is the
# A76 one (QEMU_CPU). MW_RT_EXPECT makes the test fail if the CPU model does
# not provide what we expect, instead of skipping.
if(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64" AND CMAKE_CROSSCOMPILING_EMULATOR
   AND NOT MW_FORCE_SCALAR)
  list(GET CMAKE_CROSSCOMPILING_EMULATOR 0 _rt_qemu)
  set_tests_properties(check_rt_kernels PROPERTIES
    ENVIRONMENT "CK_TIMEOUT_MULTIPLIER=${MW_CK_TIMEOUT};QEMU_CPU=cortex-a76;MW_RT_EXPECT=neon+dotprod")
  add_test(NAME check_rt_kernels_cortex-a53
           COMMAND ${_rt_qemu} -L /usr/aarch64-linux-gnu -cpu cortex-a53 $<TARGET_FILE:check_rt_kernels>)
  set_tests_properties(check_rt_kernels_cortex-a53 PROPERTIES TIMEOUT 900
    ENVIRONMENT "CK_TIMEOUT_MULTIPLIER=${MW_CK_TIMEOUT};MW_RT_EXPECT=neon")
  add_test(NAME check_rt_kernels_max
           COMMAND ${_rt_qemu} -L /usr/aarch64-linux-gnu -cpu max $<TARGET_FILE:check_rt_kernels>)
  set_tests_properties(check_rt_kernels_max PROPERTIES TIMEOUT 900
    ENVIRONMENT "CK_TIMEOUT_MULTIPLIER=${MW_CK_TIMEOUT};MW_RT_EXPECT=neon+i8mm")
endif()

# The batched (prompt) products: every variant's rt_gemm against the scalar
# mat-vec, bit for bit, per type and tile shape.
mw_check_test(check_rt_gemm SOURCES check_rt_gemm.c LIBS mw_rt_kernels mw_quant)
set_tests_properties(check_rt_gemm PROPERTIES TIMEOUT 600)
# aarch64 cross build: the SDOT gemm (Cortex-A76) and the SMMLA one (qemu
# "max", FEAT_I8MM), each required by name (MW_RT_EXPECT).
if(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64" AND CMAKE_CROSSCOMPILING_EMULATOR
   AND NOT MW_FORCE_SCALAR)
  set_tests_properties(check_rt_gemm PROPERTIES
    ENVIRONMENT "CK_TIMEOUT_MULTIPLIER=${MW_CK_TIMEOUT};QEMU_CPU=cortex-a76;MW_RT_EXPECT=neon+dotprod")
  add_test(NAME check_rt_gemm_max
           COMMAND ${_rt_qemu} -L /usr/aarch64-linux-gnu -cpu max $<TARGET_FILE:check_rt_gemm>)
  set_tests_properties(check_rt_gemm_max PROPERTIES TIMEOUT 600
    ENVIRONMENT "CK_TIMEOUT_MULTIPLIER=${MW_CK_TIMEOUT};MW_RT_EXPECT=neon+i8mm")
endif()

# The x86 tiled (prefill) and decoding attention against their plain twin:
# the same logits, byte for byte, on head_dim 32 to 768 and gemma2 (~10 s).
if(NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(runtime_x86_tiled e2e/runtime_x86_tiled.sh $<TARGET_FILE:rt_mkmodel>)
  set_tests_properties(runtime_x86_tiled PROPERTIES SKIP_RETURN_CODE 77)
  if(MW_SANITIZE) # -O0 + ASan: a lighter set of models
    set_property(TEST runtime_x86_tiled APPEND PROPERTY ENVIRONMENT "MW_LIGHT=1")
  endif()
endif()
