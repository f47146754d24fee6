# OtInstall.cmake — `cmake --install build/PRESET [--prefix DIR]` and what a
# program built on the installed omptensor finds:
#
#   bin/omptensor                           the command (shared-linked)
#   lib/libomptensor.so*, lib/libomptensor.a  the same objects, shared and static
#   include/omptensor/*.h                   the public API, version.h, and the
#                                           directive layer ot_pragmas.h
#   lib/cmake/omptensor/                    find_package(omptensor): omptensor::omptensor
#                                           (shared), omptensor::omptensor_static,
#                                           omptensor::offload (the flags alone)
#   lib/pkgconfig/omptensor.pc              pkg-config omptensor [--static]
#   share/doc/omptensor/LICENSE             the MIT license
#
# The target omptensor_installable builds everything the install copies
# (scripts/demo.sh builds it): the demo used to build the command alone, and
# `cmake --install` right after it stopped at the missing libomptensor.a.
# scripts/check_install.sh checks that it depends on every installed file.
#
# Everything but the rpath to LLVM's OpenMP runtime (OT_LLVM_LIBDIR) and, for
# a GPU build, the device toolchain named in the offload flags, is relative to
# the prefix, so an installed tree can be moved.
include(CMakePackageConfigHelpers)

set(OT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/omptensor)

# the built targets the install copies, in one list for the rules and for
# omptensor_installable
set(OT_INSTALLED_LIBS omptensor omptensor_static)
set(OT_INSTALLED_PROGRAMS omptensor_cli)
install(TARGETS ${OT_INSTALLED_LIBS} ot_usage EXPORT omptensorTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${OT_INSTALLED_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
add_custom_target(omptensor_installable)
add_dependencies(omptensor_installable ${OT_INSTALLED_LIBS} ${OT_INSTALLED_PROGRAMS})
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY include/omptensor DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(FILES ${OT_GEN_INCLUDE}/omptensor/version.h ${OT_GEN_INCLUDE}/omptensor/ot_pragmas.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/omptensor)

install(EXPORT omptensorTargets NAMESPACE omptensor:: DESTINATION ${OT_CMAKE_DIR})
configure_package_config_file(cmake/omptensorConfig.cmake.in
  ${PROJECT_BINARY_DIR}/omptensorConfig.cmake INSTALL_DESTINATION ${OT_CMAKE_DIR})
# 0.x: a new minor version may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/omptensorConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/omptensorConfig.cmake ${PROJECT_BINARY_DIR}/omptensorConfigVersion.cmake
  DESTINATION ${OT_CMAKE_DIR})

# omptensor.pc: the prefix is found from the file's own place (${pcfiledir}),
# so `cmake --install --prefix` anywhere gives a working file.
file(RELATIVE_PATH OT_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" OT_PC_TO_PREFIX "${OT_PC_TO_PREFIX}")
set(_pc_flags)
foreach(f ${OT_OFFLOAD_FLAGS})
  string(REGEX REPLACE "^SHELL:" "" f "${f}")
  string(APPEND _pc_flags " ${f}")
endforeach()
set(OT_PC_CFLAGS "${_pc_flags}")
foreach(d ${OT_OFFLOAD_DEFINES})
  string(APPEND OT_PC_CFLAGS " -D${d}")
endforeach()
set(OT_PC_LIBS "${_pc_flags}")
# a sanitizer build's runtime first: the shared ASan runtime must come before
# libomptensor.so in the program's library list
set(OT_PC_SAN_LIBS)
foreach(f ${OT_SAN_LINK_FLAGS})
  string(APPEND OT_PC_SAN_LIBS "${f} ")
endforeach()
set(OT_PC_LIBS_PRIVATE "-lm")
foreach(l ${OT_CUDA_LIBS} ${MPI_C_LIBRARIES})
  string(APPEND OT_PC_LIBS_PRIVATE " ${l}")
endforeach()
configure_file(cmake/omptensor.pc.in ${PROJECT_BINARY_DIR}/omptensor.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/omptensor.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
