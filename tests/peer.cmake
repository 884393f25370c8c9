# llama.cpp peer (tests/peer): checks that llama-peer reproduces llama.cpp's
# own figures (anchors.md) before other interop tests trust it.
if(NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(peer_selftest peer/selftest.sh)
  set_tests_properties(peer_selftest PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS peer)
endif()
# The runtime's tokenizers against llama.cpp's on a multilingual sample and a
# probe of every code point (tests/e2e/tok_peer.sh).
if(NOT CMAKE_CROSSCOMPILING)
  mw_shell_test(tok_peer e2e/tok_peer.sh)
  set_tests_properties(tok_peer PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS peer)
endif()
