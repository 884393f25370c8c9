# Android (arm64-v8a) toolchain for memwall-run, on top of the NDK's own
# toolchain file. Documented, not tested here: the NDK cannot be installed in
# memwall's CI (runtime/README.md, "Android").
#
#   export ANDROID_NDK_HOME=$HOME/Android/Sdk/ndk/27.2.12479018   # r23 or later
#   cmake -S . -B build-android -DCMAKE_TOOLCHAIN_FILE=cmake/android-arm64.cmake \
#         -DMW_MINIMAL=ON -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release \
#         -DXXHASH_INCLUDE_DIR=/path/to/xxHash      # xxhash.h, header-only
#   cmake --build build-android --target memwall-run
#   adb push build-android/tools/memwall-run model.gguf /data/local/tmp/
#   adb shell /data/local/tmp/memwall-run -m /data/local/tmp/model.gguf -p "Hello" -t 4
#
# The runtime needs only libc, libm and pthreads (Bionic has all three; no
# -lpthread is needed there) and the xxhash.h header. The top-level
# CMakeLists.txt also looks up Check through pkg-config for the unit tests;
# without an Android build of Check, point PKG_CONFIG_LIBDIR at a directory
# holding a check.pc, or guard that lookup with if(BUILD_TESTING).
#
# Options (cache variables, set before the first configure):
#   ANDROID_NDK        NDK root (default: $ANDROID_NDK_HOME, then $ANDROID_NDK_ROOT)
#   ANDROID_PLATFORM   minimum API level (default android-28: getauxval, mlock)
set(ANDROID_ABI arm64-v8a CACHE STRING "Android ABI" FORCE)
set(ANDROID_PLATFORM android-28 CACHE STRING "minimum Android API level")
set(ANDROID_STL none CACHE STRING "no C++ runtime: memwall is C only")
# ARMv8.0 baseline + NEON; the dot-product kernels are compiled with their
# own target attribute and chosen at run time (HWCAP_ASIMDDP).
set(ANDROID_ARM_NEON ON CACHE BOOL "")

if(NOT ANDROID_NDK)
  if(DEFINED ENV{ANDROID_NDK_HOME})
    set(ANDROID_NDK "$ENV{ANDROID_NDK_HOME}")
  elseif(DEFINED ENV{ANDROID_NDK_ROOT})
    set(ANDROID_NDK "$ENV{ANDROID_NDK_ROOT}")
  endif()
endif()
if(NOT ANDROID_NDK OR NOT EXISTS "${ANDROID_NDK}/build/cmake/android.toolchain.cmake")
  message(FATAL_ERROR "cmake/android-arm64.cmake: set ANDROID_NDK (or $ANDROID_NDK_HOME) "
                      "to an Android NDK (r23 or later)")
endif()
set(ANDROID_NDK "${ANDROID_NDK}" CACHE PATH "Android NDK root")
include("${ANDROID_NDK}/build/cmake/android.toolchain.cmake")

# Android executables are position-independent and dynamically linked
# against Bionic (a static binary is possible, -static, but Google advises
# against it); no emulator for tests.
set(CMAKE_CROSSCOMPILING_EMULATOR "")
