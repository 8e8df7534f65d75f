# Resolves GROUPCOORD_WITH_CUDA (AUTO/ON/OFF) to ON or OFF.
# AUTO turns CUDA on when both nvcc and NCCL are found; ON fails loudly when either is missing.
# We link only cudart and NCCL (never libcuda), so the library loads on machines with no driver.
string(TOUPPER "${GROUPCOORD_WITH_CUDA}" _gc_cuda_mode)
if(_gc_cuda_mode STREQUAL "OFF")
  set(GROUPCOORD_WITH_CUDA OFF)
  return()
endif()

if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  find_package(CUDAToolkit QUIET)
  find_package(NCCL QUIET)
endif()

if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND NCCL_FOUND)
  enable_language(CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper (H100/H200); override on the command line
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  set(GROUPCOORD_WITH_CUDA ON)
  message(STATUS "groupcoord: CUDA ${CUDAToolkit_VERSION}, NCCL ${NCCL_VERSION} (${NCCL_LIBRARY})")
elseif(_gc_cuda_mode STREQUAL "ON")
  message(FATAL_ERROR "GROUPCOORD_WITH_CUDA=ON but nvcc (${CMAKE_CUDA_COMPILER}), the CUDA "
                      "toolkit or NCCL was not found; set GROUPCOORD_NCCL_ROOT or CMAKE_CUDA_COMPILER")
else()
  set(GROUPCOORD_WITH_CUDA OFF)
  message(STATUS "groupcoord: CUDA communicator disabled (nvcc or NCCL not found)")
endif()
unset(_gc_cuda_mode)
