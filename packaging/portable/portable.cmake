# Portable binaries: what the wheel ships runs on glibc 2.31 and later with no libstdc++ of the
# machine's (docs/install.md, "What a wheel needs from the machine").
#
# SONDE_PORTABLE_KIT names the folder scripts/portable-kit.sh makes: glibc 2.31's libraries
# (Debian 11's) to link against, and cpp-httplib's single header. Compiling stays with the build
# machine's headers: glibc keeps every older symbol version, so a binary bound to 2.31's versions
# runs on every later glibc, and the few functions younger than 2.31 that sonde uses are looked up
# at run time (find_object.hpp, writer_child.cpp) or not used (launcher.cpp's signal names). A
# function younger than 2.31 used by mistake fails the link (the sysroot does not define it).
set(SONDE_PORTABLE_KIT "" CACHE PATH
    "Folder from scripts/portable-kit.sh: link the shipped binaries against glibc 2.31 (empty: the build machine's glibc)")

if(SONDE_PORTABLE_KIT)
  if(NOT EXISTS ${SONDE_PORTABLE_KIT}/complete)
    message(FATAL_ERROR "SONDE_PORTABLE_KIT=${SONDE_PORTABLE_KIT} is not a kit that "
                        "scripts/portable-kit.sh finished making")
  endif()
  message(STATUS "sonde: shipped binaries link against glibc 2.31 from ${SONDE_PORTABLE_KIT}")
endif()

# For the binaries a wheel or package ships (libsonde.so, the Python extensions, sonde,
# sonde-view-server). libstdc++ goes in, its symbols hidden in a shared library: a
# program sonde is preloaded into has its own libstdc++ (often older: RHEL 8's is GCC 8's,
# GLIBCXX_3.4.25, where 3.4.29 was needed), and libsonde's copy must not take its calls. The unwinder
# stays the machine's libgcc_s.so.1 (on the manylinux list, its interface unchanged since GCC 4):
# GCC 12's static one calls glibc 2.35's _dl_find_object and finds no frame without it. A build
# without a kit keeps the machine's libstdc++ and glibc (a source build, the .deb).
function(sonde_portable_binary target)
  if(NOT SONDE_PORTABLE_KIT)
    return()
  endif()
  set(sysroot ${SONDE_PORTABLE_KIT}/sysroot)
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/packaging/portable/younger_glibc.c)
  # -B: the start files too (Scrt1.o, crti.o), which GCC otherwise takes from the build machine:
  # 2.34's Scrt1.o leaves a program's constructors to the new __libc_start_main, and 2.31's
  # never ran them (std::cout unmade: `sonde --version` died of SIGSEGV on Debian 11).
  target_link_options(${target} PRIVATE --sysroot=${sysroot} -B${sysroot}/usr/lib/x86_64-linux-gnu/
                      -L${sysroot}/usr/lib/x86_64-linux-gnu -static-libstdc++)
  # glibc 2.31 keeps threads, the dynamic loader's API and timers in libraries of their own
  # (2.34 folded them into libc): named last, after every object that calls them.
  target_link_libraries(${target} PRIVATE pthread dl rt)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    # The build machine's libgcc_s.so.1 (GCC 12's) asks for 2.35's _dl_find_object, which the
    # sysroot lacks; at run time the machine's own libgcc_s is loaded, built for its glibc.
    target_link_options(${target} PRIVATE -Wl,--allow-shlib-undefined)
  else()
    target_link_options(${target} PRIVATE -Wl,--exclude-libs,libstdc++.a:libgcc.a)
  endif()
endfunction()
