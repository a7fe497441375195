# Install rules (cmake --install build/<mpi> --prefix P). The openmpi and mpich builds install
# side by side into one prefix, so everything tied to one MPI carries the MPI's name:
#   P/<libdir>/hier/<mpi>/libhier.so            the library to preload (or link)
#   P/bin/hier-info-<mpi>, P/bin/hier-tune-<mpi>  MPI programs of that build (suffixed, not a
#                                               dispatcher: with no application to look at, a
#                                               dispatcher could only guess the MPI)
#   P/bin/hier-run                              shared: picks <mpi> from the application
#   P/bin/hier-report                           shared: summary of a run's reports (HIER_REPORT)
#   P/<libdir>/pkgconfig/hier-<mpi>.pc          pkg-config, per MPI
#   P/<libdir>/cmake/hier/                      find_package(hier COMPONENTS <mpi>) -> hier::<mpi>
#   P/share/doc/libhier/, P/share/libhier/examples/   shared
# Shared files are identical in both builds; the uninstall target removes them only with the
# last MPI build left in the prefix (cmake/hier_uninstall.cmake).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HIER_INSTALL_LIBDIR ${CMAKE_INSTALL_LIBDIR}/hier/${HIER_MPI})
set(HIER_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/hier)

# The library, exported as hier::<mpi> (no usage requirements: the program brings its own MPI).
set_target_properties(hier PROPERTIES EXPORT_NAME ${HIER_MPI})
install(TARGETS hier EXPORT hier-${HIER_MPI} LIBRARY DESTINATION ${HIER_INSTALL_LIBDIR})
# The GPU modules go beside libhier.so: device/module.cpp looks for them in libhier.so's own
# directory. The simulated device (libhier-sim.so) is for the tests and is not installed.
if(TARGET hier_gpu_cuda)
  install(TARGETS hier_gpu_cuda LIBRARY DESTINATION ${HIER_INSTALL_LIBDIR})
endif()
if(TARGET hier_gpu_hip)
  install(FILES ${HIER_GPU_HIP_MODULE} DESTINATION ${HIER_INSTALL_LIBDIR})
endif()
install(EXPORT hier-${HIER_MPI} NAMESPACE hier:: FILE hier-${HIER_MPI}-targets.cmake
        DESTINATION ${HIER_INSTALL_CMAKEDIR})

install(PROGRAMS $<TARGET_FILE:hier-info> DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME hier-info-${HIER_MPI})
install(PROGRAMS $<TARGET_FILE:hier-tune> DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME hier-tune-${HIER_MPI})

# hier-run finds libhier relative to itself; tell the installed copy where libdir is from bindir
# (the source-tree copy looks in build/<mpi>/ instead).
set(_src ${PROJECT_SOURCE_DIR}/tools/hier-run)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_src})
file(RELATIVE_PATH _bin_to_lib /p/${CMAKE_INSTALL_BINDIR} /p/${CMAKE_INSTALL_LIBDIR})
file(READ ${_src} _text)
string(REPLACE "\nINSTALL_LIBDIR = None\n" "\nINSTALL_LIBDIR = \"${_bin_to_lib}\"\n" _installed "${_text}")
if(_installed STREQUAL _text)
  message(FATAL_ERROR "tools/hier-run has no line 'INSTALL_LIBDIR = None' for the install rule to set")
endif()
file(WRITE ${CMAKE_BINARY_DIR}/install/hier-run "${_installed}")
install(PROGRAMS ${CMAKE_BINARY_DIR}/install/hier-run DESTINATION ${CMAKE_INSTALL_BINDIR})
# hier-report (python3, stdlib; matplotlib optional): merges a run's per-rank reports. Shared.
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/hier-report DESTINATION ${CMAKE_INSTALL_BINDIR})

# Docs keep README's relative links (docs/x.md) working; examples are sources to read or copy.
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
file(GLOB _docs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
file(GLOB _doc_images CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/img/*.png)  # README's example plot
install(FILES ${_doc_images} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs/img)
file(GLOB _examples CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/*.cpp ${PROJECT_SOURCE_DIR}/examples/*.c)
install(FILES ${_examples} DESTINATION ${CMAKE_INSTALL_DATADIR}/libhier/examples)

# pkg-config, relocatable: paths relative to the .pc file, since --prefix is chosen at install.
file(RELATIVE_PATH HIER_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
set(HIER_MPI_NAME "Open MPI")
if(HIER_MPI STREQUAL "mpich")
  set(HIER_MPI_NAME "MPICH")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/hier.pc.in ${CMAKE_BINARY_DIR}/install/hier-${HIER_MPI}.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/install/hier-${HIER_MPI}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# CMake package: one config for both MPIs, a targets file per MPI.
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/hier-config.cmake.in
  ${CMAKE_BINARY_DIR}/install/hier-config.cmake INSTALL_DESTINATION ${HIER_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/install/hier-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/install/hier-config.cmake ${CMAKE_BINARY_DIR}/install/hier-config-version.cmake
        DESTINATION ${HIER_INSTALL_CMAKEDIR})

# cmake --build build/<mpi> --target uninstall: removes what install_manifest.txt lists.
add_custom_target(uninstall
  COMMAND ${CMAKE_COMMAND} -DMANIFEST=${CMAKE_BINARY_DIR}/install_manifest.txt -DMPI=${HIER_MPI} -DLIBDIR=${CMAKE_INSTALL_LIBDIR}
          -P ${CMAKE_CURRENT_LIST_DIR}/hier_uninstall.cmake
  COMMENT "Removing the files of the last cmake --install of this build" VERBATIM)
