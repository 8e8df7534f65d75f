# run_step(DESCRIPTION COMMAND...) for the package test scripts (cmake -P): runs COMMAND (in
# RUN_STEP_DIR when that is set), stops the script with COMMAND's output when it fails, and leaves
# its standard output in step_output.
function(run_step description)
  set(where "")
  if(RUN_STEP_DIR)
    set(where WORKING_DIRECTORY "${RUN_STEP_DIR}")
  endif()
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err
                  ${where})
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${description} failed (${result}):\n${out}\n${err}")
  endif()
  message(STATUS "${description}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()
