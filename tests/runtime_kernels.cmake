# runtime/ kernels: NEON/SDOT vs scalar reference (bit-identical), scalar vs
# quant/'s decoding, allocation-free rt_matvec.
mw_check_test(check_rt_kernels SOURCES check_rt_kernels.c LIBS mw_rt_kernels mw_quant)
# Count allocator calls around rt_matvec (GNU ld --wrap; also fine under ASan).
target_compile_definitions(check_rt_kernels PRIVATE RT_TEST_WRAP_ALLOC=1)
target_link_options(check_rt_kernels PRIVATE
  "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free")
set_tests_properties(check_rt_kernels PROPERTIES TIMEOUT 600)

# In the aarch64 cross build the plain run above uses qemu's default CPU
# ("max": every feature qemu 7.2 implements, SDOT included). Run it again on
# two real cores so both NEON variants are checked by name: Cortex-A53
# (ARMv8.0: NEON, no dot product -> the emulated-dot kernels) and Cortex-A76
# (ARMv8.2 + dotprod -> the SDOT kernels). MW_RT_EXPECT makes the test fail
# if the CPU model does not provide what we expect, instead of skipping.
if(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64" AND CMAKE_CROSSCOMPILING_EMULATOR
   AND NOT MW_FORCE_SCALAR)
  list(GET CMAKE_CROSSCOMPILING_EMULATOR 0 _rt_qemu)
  foreach(_cpu cortex-a53 cortex-a76)
    if(_cpu STREQUAL "cortex-a53")
      set(_expect "neon")
    else()
      set(_expect "neon+dotprod")
    endif()
    add_test(NAME check_rt_kernels_${_cpu}
             COMMAND ${_rt_qemu} -L /usr/aarch64-linux-gnu -cpu ${_cpu} $<TARGET_FILE:check_rt_kernels>)
    set_tests_properties(check_rt_kernels_${_cpu} PROPERTIES TIMEOUT 900
      ENVIRONMENT "CK_TIMEOUT_MULTIPLIER=${MW_CK_TIMEOUT};MW_RT_EXPECT=${_expect}")
  endforeach()
endif()
