# Finds Gloo headers and library and defines the imported target Gloo::gloo.
#
# Gloo's own packaged CMake config (Debian's /usr/share/cmake/Gloo) hard-codes absolute paths,
# which break when the package is unpacked into another prefix (the GPU host uses /opt/deps/usr).
# So we search by file instead. Hints: GLOO_ROOT (CMake or environment variable), then
# CMAKE_PREFIX_PATH, then the system.
#
# Result variables: Gloo_FOUND, Gloo_INCLUDE_DIR, Gloo_LIBRARY, Gloo_VERSION.
include(FindPackageHandleStandardArgs)

set(_gloo_hints ${GLOO_ROOT} $ENV{GLOO_ROOT})
find_path(Gloo_INCLUDE_DIR gloo/context.h HINTS ${_gloo_hints} PATH_SUFFIXES include)
find_library(Gloo_LIBRARY NAMES gloo libgloo.so.0 HINTS ${_gloo_hints}
             PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)

if(Gloo_INCLUDE_DIR AND EXISTS "${Gloo_INCLUDE_DIR}/gloo/config.h")
  file(STRINGS "${Gloo_INCLUDE_DIR}/gloo/config.h" _gloo_ver REGEX "define GLOO_VERSION_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3"
         Gloo_VERSION "${_gloo_ver}")
endif()

find_package_handle_standard_args(Gloo REQUIRED_VARS Gloo_LIBRARY Gloo_INCLUDE_DIR
                                  VERSION_VAR Gloo_VERSION)

if(Gloo_FOUND AND NOT TARGET Gloo::gloo)
  add_library(Gloo::gloo SHARED IMPORTED)
  set_target_properties(Gloo::gloo PROPERTIES
    IMPORTED_LOCATION "${Gloo_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Gloo_INCLUDE_DIR}")
  # Debian's libgloo.so has no unversioned link; IMPORTED_NO_SONAME keeps the full path.
endif()
mark_as_advanced(Gloo_INCLUDE_DIR Gloo_LIBRARY)
