# Resumable `memwall quant --corpus` runs (--work-dir, --resume):
# the journal's record parser against truncation and corruption, and the
# work dir's refusals (check_journal); end to end on tinyllama-8m, runs
# killed after several layers (and mid-layer, and with the last journal
# record torn) resume to a file byte-identical to an uninterrupted run's,
# a work dir of other options is refused, a full disk (a small tmpfs, when
# this user may mount one) leaves a journal that resumes (quant_resume.sh;
# the kills come from tests/faults/mw_fault, built in hardening.cmake where
# the build is native).
if(NOT MW_MINIMAL)
  mw_check_test(check_journal SOURCES check_journal.c
                LIBS mw_methods mw_calib mw_quant mw_gguf mw_core)
endif()
if(NOT MW_MINIMAL AND NOT MW_SANITIZE AND TARGET mw_fault)
  mw_shell_test(quant_resume e2e/quant_resume.sh $<TARGET_FILE:mw_fault>)
  set_tests_properties(quant_resume PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200 COST 300) # 403 s at load 15
endif()
