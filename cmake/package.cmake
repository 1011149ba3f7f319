# `make deb`: a Debian package of what `cmake --install` installs, with
# the prefix /usr: the drop-in libraries under /usr/lib/softverbs (never
# in the system's library paths, so installing or removing the package
# leaves the system's own libibverbs alone; softverbs-run points the
# dynamic linker there), the tools in /usr/bin and the man pages.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME softverbs)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(SV_DEB_MAINTAINER
    "softverbs maintainers <maintainers@users.noreply.a-seed-c931e89a.example>"
    CACHE STRING "the .deb's Maintainer field")
set(CPACK_PACKAGE_CONTACT "${SV_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "userspace software RDMA device for unmodified verbs programs")
# the long description, below the summary line; CPack indents it
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
"softverbs is an RDMA device in user space, shipped as a drop-in
libibverbs.so.1 and librdmacm.so.1 under /usr/lib/softverbs.  Programs
run on its device softverbs0 through softverbs-run (for example
softverbs-run ibv_rc_pingpong), between processes of one host over
shared memory or between hosts over TCP.  The system's own libibverbs
is not replaced.

This package holds the libraries, softverbs-run, softverbs-stat,
rc_pingpong and their manual pages.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # softverbs_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the ELF files' needs (dpkg-shlibdeps): libc6, libibverbs1
# (rc_pingpong links to the system's), ...
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES OFF)
set(CPACK_OUTPUT_FILE_PREFIX ${CMAKE_BINARY_DIR}/deb)
include(CPack)
