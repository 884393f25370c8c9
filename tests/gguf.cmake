mw_check_test(check_gguf SOURCES check_gguf.c LIBS mw_gguf)
