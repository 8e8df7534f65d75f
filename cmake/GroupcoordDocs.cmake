# The `docs` target: the API reference of include/groupcoord from its /// comments (doxygen from
# Debian; docs/Doxyfile.in), HTML into <build>/docs/api/. Doxygen's warnings are errors, and ctest
# builds it as check_docs (label tree), so a malformed comment fails the test command.
find_program(GROUPCOORD_DOXYGEN NAMES doxygen)
if(NOT GROUPCOORD_DOXYGEN)
  message(STATUS "doxygen not found: no docs target (Debian package doxygen)")
  return()
endif()
set(GROUPCOORD_DOCS_OUTPUT ${PROJECT_BINARY_DIR}/docs)
file(MAKE_DIRECTORY ${GROUPCOORD_DOCS_OUTPUT})
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${GROUPCOORD_DOCS_OUTPUT}/Doxyfile @ONLY)
add_custom_target(docs
  COMMAND ${GROUPCOORD_DOXYGEN} ${GROUPCOORD_DOCS_OUTPUT}/Doxyfile
  WORKING_DIRECTORY ${GROUPCOORD_DOCS_OUTPUT}
  COMMENT "API reference (doxygen) into ${GROUPCOORD_DOCS_OUTPUT}/api"
  VERBATIM)
if(GROUPCOORD_BUILD_TESTS)
  add_test(NAME check_docs COMMAND ${GROUPCOORD_DOXYGEN} ${GROUPCOORD_DOCS_OUTPUT}/Doxyfile
           WORKING_DIRECTORY ${GROUPCOORD_DOCS_OUTPUT})
  set_tests_properties(check_docs PROPERTIES LABELS "tree" TIMEOUT 300)
endif()
