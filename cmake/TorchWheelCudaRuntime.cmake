# The PyTorch wheel's LibTorch is built with CUDA, and its TorchConfig hands the CUDA runtime to its targets through
# `torch::cudart`, which it defines from a CUDA toolkit found with nvcc. Without a toolkit, configuring fails
# ("Your installed Caffe2 version uses CUDA but I cannot find the CUDA libraries") although parla compiles no CUDA
# code, so `tools/test.sh --libtorch2` failed on a fresh Debian machine (tools/bare-debian-test.sh). The wheel's
# own nvidia-* packages hold the runtime (headers and libcudart): with no nvcc to be found, torch::cudart is defined
# from them before find_package(Torch), and TorchConfig's cuda.cmake takes it as found (it returns when the
# target exists). A machine with a toolkit keeps TorchConfig's own path.
find_program(PARLA_NVCC nvcc PATHS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES bin)
if(NOT PARLA_NVCC AND NOT TARGET torch::cudart)
  foreach(prefix ${CMAKE_PREFIX_PATH})
    # CMAKE_PREFIX_PATH holds <site-packages>/torch/share/cmake and <site-packages>/torch (tools/test.sh).
    foreach(up "../nvidia" "../../../nvidia")
      file(GLOB cudart "${prefix}/${up}/cu[0-9]*/lib/libcudart.so.*")
      if(cudart)
        list(GET cudart 0 cudart)
        get_filename_component(parla_wheel_cuda "${cudart}/../.." ABSOLUTE)
        break()
      endif()
    endforeach()
    if(parla_wheel_cuda)
      break()
    endif()
  endforeach()
  if(parla_wheel_cuda)
    add_library(torch::cudart INTERFACE IMPORTED)
    set_target_properties(torch::cudart PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${parla_wheel_cuda}/include"
                                                   INTERFACE_LINK_LIBRARIES "${cudart}")
    message(STATUS "parla: no CUDA toolkit (nvcc); the CUDA runtime of the wheel at ${parla_wheel_cuda}")
  endif()
endif()
