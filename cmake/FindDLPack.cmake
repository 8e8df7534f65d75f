# Finds the header-only DLPack (Debian's libdlpack-dev ships 0.6) and defines DLPack::dlpack.
# Hint: DLPACK_ROOT. Result variables: DLPack_FOUND, DLPack_INCLUDE_DIR, DLPack_VERSION.
include(FindPackageHandleStandardArgs)

find_path(DLPack_INCLUDE_DIR dlpack/dlpack.h HINTS ${DLPACK_ROOT} $ENV{DLPACK_ROOT}
          PATH_SUFFIXES include)
if(DLPack_INCLUDE_DIR)
  file(STRINGS "${DLPack_INCLUDE_DIR}/dlpack/dlpack.h" _dlpack_ver
       REGEX "#define DLPACK_VERSION [0-9]+")
  string(REGEX REPLACE ".*DLPACK_VERSION ([0-9]+).*" "\\1" DLPack_VERSION "${_dlpack_ver}")
endif()
find_package_handle_standard_args(DLPack REQUIRED_VARS DLPack_INCLUDE_DIR VERSION_VAR DLPack_VERSION)

if(DLPack_FOUND AND NOT TARGET DLPack::dlpack)
  add_library(DLPack::dlpack INTERFACE IMPORTED)
  set_target_properties(DLPack::dlpack PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${DLPack_INCLUDE_DIR}")
endif()
mark_as_advanced(DLPack_INCLUDE_DIR)
