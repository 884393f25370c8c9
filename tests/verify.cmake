# verify/ tests: Check unit tests with a damage catalogue, plus exhaustive
# truncation and byte-flip sweeps over a small fixture.
# Test tools shared with tests/tools.cmake (and anyone who needs fixtures):
#   mkgguf         deterministic GGUF fixtures (tests/tools/mkgguf.c)
#   corrupt_sweep  every single-byte flip / truncation through verify_mem()
add_library(mw_test_fixtures STATIC tools/fixtures.c)
target_link_libraries(mw_test_fixtures PUBLIC mw_gguf mw_core)
add_executable(mkgguf tools/mkgguf.c)
target_link_libraries(mkgguf PRIVATE mw_test_fixtures)
add_executable(corrupt_sweep tools/corrupt_sweep.c)
target_link_libraries(corrupt_sweep PRIVATE mw_verify)

mw_check_test(check_verify SOURCES check_verify.c LIBS mw_test_fixtures mw_verify)
# ASan: every 5th length through the CLI (odd: all residues mod 4 and 8 in
# turn), every length in-process (corrupt_sweep, verify_corruption_sweep)
if(MW_SANITIZE)
  mw_shell_test(verify_truncation_sweep e2e/truncation_sweep.sh $<TARGET_FILE:mkgguf> 5)
else()
  mw_shell_test(verify_truncation_sweep e2e/truncation_sweep.sh $<TARGET_FILE:mkgguf>)
endif()
mw_shell_test(verify_corruption_sweep e2e/corruption_sweep.sh $<TARGET_FILE:mkgguf>
              $<TARGET_FILE:corrupt_sweep>)

