# Script mode (cmake -P): install BUILD_DIR into WORK_DIR/prefix, then configure, build and run the
# consumer project against it. Fails on the first step that fails.
file(REMOVE_RECURSE "${WORK_DIR}")

include("${CMAKE_CURRENT_LIST_DIR}/run_step.cmake")

run_step("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
# A sanitized library needs a sanitized executable (the ASan runtime must come first).
set(consumer_flags "")
if(SANITIZE)
  set(consumer_flags "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE}"
                     "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()
# The package must need only what the public headers use (DLPack, threads): Gloo, NCCL and the
# CUDA toolkit are made unfindable for the consumer.
run_step("configure consumer" ${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build"
         -G "${GENERATOR}" "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
         -DCMAKE_DISABLE_FIND_PACKAGE_Gloo=ON -DCMAKE_DISABLE_FIND_PACKAGE_NCCL=ON
         -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON ${consumer_flags})
run_step("build consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run_step("run consumer" "${WORK_DIR}/build/consumer")
if(NOT step_output MATCHES "consumer: ok")
  message(FATAL_ERROR "consumer printed:\n${step_output}")
endif()

# The same program built with pkg-config's flags alone.
find_program(PKG_CONFIG_EXECUTABLE pkg-config)
if(PKG_CONFIG_EXECUTABLE AND NOT SANITIZE)
  file(GLOB_RECURSE pc_file "${WORK_DIR}/prefix/*/groupcoord.pc")
  get_filename_component(pc_dir "${pc_file}" DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
  run_step("pkg-config" ${PKG_CONFIG_EXECUTABLE} --cflags --libs groupcoord)
  string(STRIP "${step_output}" pc_flags)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  get_filename_component(lib_dir "${pc_dir}" DIRECTORY)
  run_step("build consumer with pkg-config" c++ -std=c++17 "${CONSUMER_DIR}/main.cc" ${pc_flags}
           "-Wl,-rpath,${lib_dir}" -o "${WORK_DIR}/consumer-pc")
  run_step("run consumer built with pkg-config" "${WORK_DIR}/consumer-pc")
  if(NOT step_output MATCHES "consumer: ok")
    message(FATAL_ERROR "consumer (pkg-config) printed:\n${step_output}")
  endif()
else()
  message(STATUS "pkg-config: not found (Debian package pkgconf), or a sanitized build: skipped")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
