# Script mode (cmake -P): `cmake --install` of BUILD_DIR into a fresh venv (WORK_DIR/venv, made by
# PYTHON with --system-site-packages and without pip: no PyPI needed), then, from another
# directory, that venv's python imports groupcoord from its site-packages and runs collectives on
# a world of one. Registered by python/CMakeLists.txt as ctest package_python_venv.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/elsewhere")

include("${CMAKE_CURRENT_LIST_DIR}/run_step.cmake")
set(RUN_STEP_DIR "${WORK_DIR}/elsewhere")  # every step runs away from the checkout and the build

run_step("venv" "${PYTHON}" -m venv --without-pip --system-site-packages "${WORK_DIR}/venv")
run_step("install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK_DIR}/venv")
set(check [=[
import os, sys
import numpy as np
import groupcoord as gc
venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(gc.__file__).startswith(venv + os.sep), gc.__file__
gc.init_distributed_environment(world_size=1, rank=0, distributed_init_method="env://")
gc.initialize_model_parallel(1)
tp = gc.get_tp_group()
x = np.arange(6, dtype=np.float32)
assert tp.all_reduce(x) is x
assert tp.broadcast_object({"a": 1}, src=0) == {"a": 1}
gc.destroy_model_parallel()
gc.destroy_distributed_environment()
print("venv import: ok", gc.__version__, gc.__file__)
]=])
run_step("import from the venv" "${WORK_DIR}/venv/bin/python" -c "${check}" "${WORK_DIR}/venv")
if(NOT step_output MATCHES "venv import: ok")
  message(FATAL_ERROR "the venv's python printed:\n${step_output}")
endif()
message(STATUS "${step_output}")
file(REMOVE_RECURSE "${WORK_DIR}")
