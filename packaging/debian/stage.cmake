# Run by CPack (CPACK_PRE_BUILD_SCRIPTS) on the staging tree the install wrote, before the .deb is
# packed: what Debian's policy asks of a package beyond the install (cpack.cmake).
set(usr "${CPACK_TEMPORARY_DIRECTORY}${CPACK_PACKAGING_INSTALL_PREFIX}")
set(doc "${usr}/share/doc/${CPACK_PACKAGE_NAME}")
find_program(gzip gzip REQUIRED)

# Bytecode is written by postinst instead, for the interpreter installed then.
file(GLOB_RECURSE pycs LIST_DIRECTORIES true "${usr}/*")
list(FILTER pycs INCLUDE REGEX "/__pycache__$")
if(pycs)
  file(REMOVE_RECURSE ${pycs})
endif()

# file(COPY, not file(INSTALL: CPack has set DESTDIR, which file(INSTALL would prepend again.
file(COPY "${CPACK_SONDE_DEB_DIR}/copyright" "${CPACK_SONDE_DEB_DIR}/changelog"
     DESTINATION "${doc}" FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
# gzip -9n: no name or time stamp in the header, so that the same files pack the same.
file(GLOB_RECURSE pages "${usr}/share/man/*")
list(FILTER pages EXCLUDE REGEX "\\.gz$")
foreach(f IN LISTS pages ITEMS "${doc}/changelog")
  execute_process(COMMAND ${gzip} -9nf "${f}" RESULT_VARIABLE failed)
  if(failed)
    message(FATAL_ERROR "sonde: gzip -9n ${f} failed")
  endif()
endforeach()

# sonde-view-server is `sonde view`'s serving half (run by it, never by hand): its page is sonde's.
file(CREATE_LINK sonde.1.gz "${usr}/share/man/man1/sonde-view-server.1.gz" SYMBOLIC)

set(overrides "${usr}/share/lintian/overrides/${CPACK_PACKAGE_NAME}")
file(READ "${CPACK_SONDE_DEB_DIR}/lintian-overrides" text)
if(CPACK_SONDE_DEB_PORTABLE)
  file(READ "${CPACK_SONDE_DEB_DIR}/lintian-overrides.portable" portable)
  string(APPEND text "${portable}")
endif()
file(WRITE "${overrides}" "${text}")
