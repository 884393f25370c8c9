mw_check_test(check_core SOURCES check_core.c LIBS mw_core)
