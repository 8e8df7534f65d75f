# Script mode (cmake -P): install BUILD_DIR into WORK_DIR/prefix, then configure, build and run the
# consumer project against it. Fails on the first step that fails.
file(REMOVE_RECURSE "${WORK_DIR}")

function(run_step description)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${description} failed (${result}):\n${out}\n${err}")
  endif()
  message(STATUS "${description}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
# A sanitized library needs a sanitized executable (the ASan runtime must come first).
set(consumer_flags "")
if(SANITIZE)
  set(consumer_flags "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE}"
                     "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()
run_step("configure consumer" ${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build"
         -G "${GENERATOR}" "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
         "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}" ${consumer_flags})
run_step("build consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run_step("run consumer" "${WORK_DIR}/build/consumer")
if(NOT step_output MATCHES "consumer: ok")
  message(FATAL_ERROR "consumer printed:\n${step_output}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
