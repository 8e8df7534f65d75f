# Install rules and the exported CMake package: after `cmake --install build --prefix P`, an
# outside project does `find_package(groupcoord CONFIG REQUIRED)` with P on CMAKE_PREFIX_PATH and
# links `groupcoord::groupcoord`.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GROUPCOORD_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/groupcoord")

install(TARGETS groupcoord EXPORT groupcoordTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/groupcoord"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT groupcoordTargets NAMESPACE groupcoord:: DESTINATION ${GROUPCOORD_INSTALL_CMAKEDIR})

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/groupcoordConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/groupcoordConfig.cmake" INSTALL_DESTINATION ${GROUPCOORD_INSTALL_CMAKEDIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/groupcoordConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/groupcoordConfig.cmake"
              "${PROJECT_BINARY_DIR}/groupcoordConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindGloo.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindDLPack.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake"
        DESTINATION ${GROUPCOORD_INSTALL_CMAKEDIR})
