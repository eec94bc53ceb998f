# CPack's Debian package: `cpack -G DEB` in the build directory (or cpack --config
# <build>/CPackConfig.cmake -B DIR) makes a .deb that installs under /usr and that lintian passes
# without errors (tests/e2e/test_deb_lintian.py). What only the package holds (copyright,
# changelog, maintainer scripts) is kept in this folder, so that `cmake --install` is unchanged.
set(SONDE_DEB_DIR ${CMAKE_CURRENT_SOURCE_DIR}/debian)
set(SONDE_DEB_MAINTAINER "sonde maintainers <maintainers@users.noreply.a-seed-af088bb8.example>")

set(CPACK_PACKAGE_NAME sonde)
set(CPACK_PACKAGE_VENDOR "sonde")
set(CPACK_PACKAGE_CONTACT "${SONDE_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "profiler for deep-learning workloads: Python, BLAS, CUDA and MPI in one tree")
set(CPACK_PACKAGE_DESCRIPTION_FILE ${SONDE_DEB_DIR}/description.txt)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Installed through DESTDIR with the real prefix, so that what is written at install time (the
# Python .pth file) names /usr, not the staging directory.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
# The libraries the programs link (libc, libstdc++, cpp-httplib, and SQLite, fmt and zlib without
# SONDE_PORTABLE) come from dpkg-shlibdeps; Python is run, not linked.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3 (>= 3.11)")

# What libsonde dlopens when a run asks for it (SONDE_COUNTERS: PAPI; SONDE_SAMPLE_HZ: libunwind)
# is recommended, named by the package that holds the soname the build found (libprof/).
function(sonde_deb_package_of out soname fallback)
  set(package ${fallback})
  execute_process(COMMAND dpkg-query -S "*/${soname}" OUTPUT_VARIABLE owners ERROR_QUIET
                  RESULT_VARIABLE failed)
  if(NOT failed AND owners MATCHES "^([^:, ]+)")
    set(package ${CMAKE_MATCH_1})
  endif()
  set(${out} ${package} PARENT_SCOPE)
endfunction()
sonde_deb_package_of(papi ${SONDE_PAPI_SONAME} libpapi7.0)
set(recommends ${papi})
if(SONDE_UNWIND_SONAME)
  sonde_deb_package_of(unwind ${SONDE_UNWIND_SONAME} libunwind8)
  list(PREPEND recommends ${unwind})
endif()
list(JOIN recommends ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
# `sonde calibrate` opens the system BLAS (libblas.so.3) to measure this machine's peaks.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libblas3 | libblas.so.3")

# libsonde.so lies in /usr/lib: an ldconfig trigger (no ldconfig call in the scripts, which
# CPack writes unless the package brings its own postinst and postrm), and the Python package's
# bytecode compiled after installation and removed before removal.
set(SONDE_DEB_PYTHON_DIR ${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/sonde/python)
configure_file(${SONDE_DEB_DIR}/postinst.in ${CMAKE_CURRENT_BINARY_DIR}/debian/postinst @ONLY)
configure_file(${SONDE_DEB_DIR}/prerm.in ${CMAKE_CURRENT_BINARY_DIR}/debian/prerm @ONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_CURRENT_BINARY_DIR}/debian/postinst ${CMAKE_CURRENT_BINARY_DIR}/debian/prerm
    ${SONDE_DEB_DIR}/postrm ${SONDE_DEB_DIR}/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# The staging tree is finished by debian/stage.cmake before it is packed: copyright and
# changelog in /usr/share/doc/sonde, manual pages and changelog compressed, no __pycache__.
set(CPACK_PRE_BUILD_SCRIPTS ${SONDE_DEB_DIR}/stage.cmake)
set(CPACK_SONDE_DEB_DIR ${SONDE_DEB_DIR})
set(CPACK_SONDE_DEB_PORTABLE ${SONDE_PORTABLE})
include(CPack)
