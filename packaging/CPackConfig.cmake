# CPack configuration of the Debian package libhier: both MPI builds side by side in one .deb.
# Used by tools/build-deb.sh:
#   cpack --config packaging/CPackConfig.cmake -D HIER_BUILD_OPENMPI=DIR -D HIER_BUILD_MPICH=DIR
#         -D HIER_VERSION=X.Y.Z -B OUTDIR
# CPack runs the install rules (cmake/HierInstall.cmake) of both build trees into one staging
# root, as `cmake --install` would into one prefix: lib/hier/<mpi>/libhier.so, bin/hier-info-<mpi>,
# bin/hier-tune-<mpi>, the shared bin/hier-run, pkg-config files, the CMake package, docs and
# examples. The build trees must already be built: CPACK_CMAKE_GENERATOR is left unset, so CPack
# builds nothing (it would otherwise build the trees' whole 'all', tests included).
foreach(_v HIER_BUILD_OPENMPI HIER_BUILD_MPICH HIER_VERSION)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "packaging/CPackConfig.cmake: pass -D ${_v}=... (tools/build-deb.sh does)")
  endif()
endforeach()

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "libhier")
set(CPACK_PACKAGE_VERSION "${HIER_VERSION}")
set(CPACK_PACKAGE_VENDOR "libhier")
set(CPACK_PACKAGE_CONTACT "libhier maintainers <libhier@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "hierarchical MPI collectives by LD_PRELOAD (Open MPI and MPICH builds)")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "libhier is preloaded into unmodified MPI programs and rewrites their
 collectives into hierarchical schedules (node, then network). This package holds the
 builds for Debian's Open MPI and MPICH side by side (/usr/lib/hier/<mpi>/libhier.so),
 hier-info-<mpi>, hier-tune-<mpi>, and hier-run, which preloads the build matching
 the application's MPI: hier-run srun ./app.")
set(CPACK_DEBIAN_PACKAGE_SECTION "libs")
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")
# Dependencies from the ELF files (dpkg-shlibdeps): both MPIs' runtime libraries, hwloc, ...
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3")   # hier-run
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_SET_DESTDIR OFF)
set(CPACK_INSTALL_CMAKE_PROJECTS
    "${HIER_BUILD_OPENMPI};libhier-openmpi;ALL;/"
    "${HIER_BUILD_MPICH};libhier-mpich;ALL;/")
