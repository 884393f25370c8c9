# Hardening: faults during convert/quant (disk full, SIGKILL, a
# source that shrinks or vanishes while it is read), files over 4 GiB,
# byte-identical output across thread counts and runs. The fault and huge-
# file tests run natively only: they stop, kill and truncate under a running
# process, which qemu-user does not model faithfully, and hash gigabytes.
# Fuzz targets for config.json and imatrix files are in tests/fuzz.cmake.
if(NOT CMAKE_CROSSCOMPILING)
  # tests/faults/mw_fault: runs a command under RLIMIT_FSIZE, kills it or
  # truncates/unlinks a file when its temp output reaches N bytes.
  add_executable(mw_fault faults/mw_fault.c)

  set(_huge_libs mw_verify mw_quant mw_gguf mw_core)
  if(NOT MW_MINIMAL)
    list(APPEND _huge_libs mw_hf)
  endif()
  mw_check_test(check_huge SOURCES check_huge.c LIBS ${_huge_libs})
  if(NOT MW_MINIMAL)
    target_compile_definitions(check_huge PRIVATE MW_TEST_HF=1)
  endif()
  set_tests_properties(check_huge PROPERTIES TIMEOUT 600)

  # the CLI on the huge file: release builds only (check_huge runs the same
  # library code under the sanitizers; a -O0 sanitizer build hashes the
  # 4.25 GiB 10x slower)
  if(NOT MW_SANITIZE)
    mw_shell_test(faults_huge e2e/faults_huge.sh $<TARGET_FILE:check_huge>)
    set_tests_properties(faults_huge PROPERTIES LABELS hardening RESOURCE_LOCK mw_huge_files
                         SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
  mw_shell_test(faults_quant e2e/faults_quant.sh $<TARGET_FILE:mw_fault>)
  if(MW_SANITIZE)
    mw_shell_test(faults_determinism e2e/faults_determinism.sh quick)
  else()
    mw_shell_test(faults_determinism e2e/faults_determinism.sh)
  endif()
  # the runtime's mapped model truncated mid-run: SIGBUS handled (exit 3)
  mw_shell_test(faults_run e2e/faults_run.sh $<TARGET_FILE:mw_fault>)
  set(_fault_tests faults_quant faults_determinism faults_run)
  if(NOT MW_MINIMAL)
    mw_shell_test(faults_convert e2e/faults_convert.sh $<TARGET_FILE:mw_fault>)
    list(APPEND _fault_tests faults_convert)
  endif()
  set_tests_properties(${_fault_tests} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                       LABELS hardening)
  # check_huge and faults_huge each make a 4.25 GiB sparse file and read it
  # whole: not both at once
  set_tests_properties(check_huge PROPERTIES LABELS hardening RESOURCE_LOCK mw_huge_files)
endif()
