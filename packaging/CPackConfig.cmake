# CPack configuration of the Debian package libhier: both MPI builds side by side in one .deb.
# Used by tools/build-deb.sh, which first runs `cmake --install <tree> --prefix STAGE/usr` for the
# openmpi and the mpich build trees (the install rules of cmake/HierInstall.cmake, as a user's
# `cmake --install` of both into one prefix would: lib/hier/<mpi>/libhier.so, bin/hier-info-<mpi>,
# bin/hier-tune-<mpi>, the shared bin/hier-run, pkg-config files, the CMake package, docs and
# examples), then
#   HIER_STAGE=STAGE HIER_VERSION=X.Y.Z cpack --config packaging/CPackConfig.cmake -B OUTDIR
# (environment variables: cpack applies its -D options only after reading this file). Staging
# with cmake --install rather than CPACK_INSTALL_CMAKE_PROJECTS: the latter needs
# CPACK_CMAKE_GENERATOR, and then builds each tree's whole 'all' (every test) first.
foreach(_v HIER_STAGE HIER_VERSION)
  if(NOT DEFINED ENV{${_v}})
    message(FATAL_ERROR "packaging/CPackConfig.cmake: set ${_v} in the environment (tools/build-deb.sh does)")
  endif()
  set(${_v} "$ENV{${_v}}")
endforeach()

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "libhier")
set(CPACK_PACKAGE_VERSION "${HIER_VERSION}")
set(CPACK_PACKAGE_VENDOR "libhier")
# What include(CPack) would otherwise set (this file is used on its own, not from a project)
set(CPACK_PACKAGE_FILE_NAME "libhier-${HIER_VERSION}-Linux")
set(CPACK_SYSTEM_NAME "Linux")
set(CPACK_TOPLEVEL_TAG "Linux")
set(CPACK_PACKAGE_INSTALL_DIRECTORY "libhier")
set(CPACK_PACKAGE_CONTACT "libhier maintainers <libhier@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "hierarchical MPI collectives by LD_PRELOAD (Open MPI and MPICH builds)")
set(CPACK_PACKAGE_DESCRIPTION "libhier is preloaded into unmodified MPI programs and rewrites their
 collectives into hierarchical schedules (node, then network). This package holds the
 builds for Debian's Open MPI and MPICH side by side (/usr/lib/hier/<mpi>/libhier.so),
 hier-info-<mpi>, hier-tune-<mpi>, and hier-run, which preloads the build matching
 the application's MPI: hier-run srun ./app.")
set(CPACK_DEBIAN_PACKAGE_SECTION "libs")
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")
# Dependencies from the ELF files (dpkg-shlibdeps): both MPIs' runtime libraries, hwloc, ...
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3")   # hier-run
# the staged tree, paths as they will be on the target system (STAGE/usr/... -> /usr/...)
set(CPACK_INSTALLED_DIRECTORIES "${HIER_STAGE};.")
set(CPACK_PACKAGING_INSTALL_PREFIX "/")
set(CPACK_SET_DESTDIR OFF)
