# Install rules, the exported CMake package and a pkg-config file: after
# `cmake --install build --prefix P`, an outside project does `find_package(groupcoord CONFIG
# REQUIRED)` with P on CMAKE_PREFIX_PATH and links `groupcoord::groupcoord`, or asks
# `pkg-config --cflags --libs groupcoord` with P/<libdir>/pkgconfig on PKG_CONFIG_PATH.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GROUPCOORD_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/groupcoord")

install(TARGETS groupcoord EXPORT groupcoordTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/groupcoord"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN "*.in" EXCLUDE)
install(FILES "${GROUPCOORD_GENERATED_INCLUDE_DIR}/groupcoord/version.h"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/groupcoord)
install(EXPORT groupcoordTargets NAMESPACE groupcoord:: DESTINATION ${GROUPCOORD_INSTALL_CMAKEDIR})

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/groupcoordConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/groupcoordConfig.cmake" INSTALL_DESTINATION ${GROUPCOORD_INSTALL_CMAKEDIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/groupcoordConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/groupcoordConfig.cmake"
              "${PROJECT_BINARY_DIR}/groupcoordConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindDLPack.cmake"
        DESTINATION ${GROUPCOORD_INSTALL_CMAKEDIR})

# pkg-config: the prefix relative to the .pc file, so the installed tree can move (an absolute
# library folder: the prefix as configured).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(GROUPCOORD_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _gc_pc_up "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
  string(REGEX REPLACE "/$" "" _gc_pc_up "${_gc_pc_up}")
  set(GROUPCOORD_PC_PREFIX "\${pcfiledir}/${_gc_pc_up}")
endif()
foreach(_gc_kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_gc_kind}}")
    set(GROUPCOORD_PC_${_gc_kind} "${CMAKE_INSTALL_${_gc_kind}}")
  else()
    set(GROUPCOORD_PC_${_gc_kind} "\${prefix}/${CMAKE_INSTALL_${_gc_kind}}")
  endif()
endforeach()
set(GROUPCOORD_PC_CFLAGS "")
if(GROUPCOORD_WITH_CUDA)
  string(APPEND GROUPCOORD_PC_CFLAGS " -DGROUPCOORD_WITH_CUDA=1")
endif()
if(DLPack_INCLUDE_DIR AND NOT DLPack_INCLUDE_DIR STREQUAL "/usr/include")
  string(APPEND GROUPCOORD_PC_CFLAGS " -I${DLPack_INCLUDE_DIR}")
endif()
configure_file("${PROJECT_SOURCE_DIR}/cmake/groupcoord.pc.in" "${PROJECT_BINARY_DIR}/groupcoord.pc"
               @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/groupcoord.pc"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
