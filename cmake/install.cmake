# Installing memwall like a Debian tool (included by the top CMakeLists.txt):
#   cmake --install BUILD [--prefix P]   bin/memwall, bin/memwall-run,
#       share/man/man1/memwall*.1, and the GGUF/verify library for C programs:
#       include/memwall/{core/mw.h,gguf/gguf.h,verify/verify.h},
#       lib/libmw_{verify,quant,gguf,core}.a, lib/pkgconfig/memwall.pc
#   cd BUILD && cpack -G DEB             memwall_VERSION_ARCH.deb (prefix /usr)
# The man pages are made at build time by the programs just built
# (cmake/mkman.cmake, `--help-man`); a cross build cannot run them and
# installs none.
include(GNUInstallDirs)
# `make install` and cpack's preinstall step install what was built instead
# of building every target (tests included) first: build, then install
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

install(TARGETS memwall memwall-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(NOT CMAKE_CROSSCOMPILING)
  set(MW_MAN_DIR ${CMAKE_BINARY_DIR}/man)
  add_custom_command(OUTPUT ${MW_MAN_DIR}/memwall.1
    COMMAND ${CMAKE_COMMAND} -DMEMWALL=$<TARGET_FILE:memwall>
            -DMEMWALL_RUN=$<TARGET_FILE:memwall-run> -DOUT=${MW_MAN_DIR}
            -P ${PROJECT_SOURCE_DIR}/cmake/mkman.cmake
    DEPENDS memwall memwall-run ${PROJECT_SOURCE_DIR}/cmake/mkman.cmake
    COMMENT "man pages from --help (cmake/mkman.cmake)"
    VERBATIM)
  add_custom_target(man ALL DEPENDS ${MW_MAN_DIR}/memwall.1)
  install(DIRECTORY ${MW_MAN_DIR}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
          FILES_MATCHING PATTERN "*.1")
endif()

# the library: what verify/verify.h needs (verify decodes through quant)
install(TARGETS mw_verify mw_quant mw_gguf mw_core ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/core/mw.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/memwall/core)
install(FILES ${PROJECT_SOURCE_DIR}/gguf/gguf.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/memwall/gguf)
install(FILES ${PROJECT_SOURCE_DIR}/verify/verify.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/memwall/verify)
# pkg-config: prefix relative to the .pc file, so one file serves
# `cmake --install --prefix ANY` and the .deb's /usr
file(RELATIVE_PATH MW_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" MW_PC_TO_PREFIX "${MW_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/memwall.pc.in ${CMAKE_BINARY_DIR}/memwall.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/memwall.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# cpack -G DEB: Depends are the Debian 12 packages of the shared libraries
# memwall links (memwall-run links libc and libm only)
set(CPACK_PACKAGE_NAME memwall)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "memwall maintainers <memwall@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "LLM quantization to GGUF (llama.cpp's formats), calibration, verification, runtime")
set(CPACK_PACKAGE_DESCRIPTION
    "memwall converts Hugging Face checkpoints to GGUF, quantizes them as llama-quantize does (and to a size or RAM budget), calibrates (imatrix, AWQ, GPTQ), verifies files and runs them; memwall-run is the device runtime.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
if(MW_MINIMAL)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6 (>= 2.34)")
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "libc6 (>= 2.34), libcjson1 (>= 1.7.10), libopenblas0 | libopenblas0-pthread, zlib1g (>= 1:1.2.0)")
endif()
include(CPack)
