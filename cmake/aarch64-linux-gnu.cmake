# Cross toolchain for 64-bit ARM Linux: Debian's gcc-aarch64-linux-gnu.
# Tests run under qemu-aarch64 (Debian's qemu-user) via the emulator below.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config must see the arm64 multiarch .pc files (check:arm64), not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu)
# Static executables: the phone binary is static anyway, and Debian 12's
# qemu-aarch64 (7.2) hangs at exit in dynamically linked guests that fork
# (Check's fork mode, our atomicity tests).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
