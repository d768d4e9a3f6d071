# parla builds against either LibTorch (lib/runtime/torch_compat.h wraps their C++ differences):
#   Debian's libtorch-dev 1.13 (CPU only), the default; or
#   the LibTorch inside the PyTorch wheel (2.x, CUDA), installed by tools/setup-libtorch2.sh into .venv-torch2 and
#   chosen with -DCMAKE_PREFIX_PATH="<site-packages>/torch/share/cmake;<site-packages>/torch".
# Sets PARLA_TORCH_MAJOR and PARLA_TORCH_CUDA, and keeps the two from mixing.
string(REGEX MATCH "^[0-9]+" PARLA_TORCH_MAJOR "${Torch_VERSION}")
if(NOT PARLA_TORCH_MAJOR)
  set(PARLA_TORCH_MAJOR 1)
endif()
get_filename_component(parla_torch_prefix "${Torch_DIR}/../../.." ABSOLUTE)
get_filename_component(parla_torch_lib_dir "${TORCH_LIBRARY}" DIRECTORY)
# With both installed, TorchConfig's find_library may find Debian's libtorch.so for the wheel's headers; a
# process that mixed them would crash far from the cause.
if(NOT parla_torch_lib_dir MATCHES "^${parla_torch_prefix}" AND NOT parla_torch_prefix STREQUAL "/usr")
  message(FATAL_ERROR "LibTorch config at ${Torch_DIR} but its library at ${TORCH_LIBRARY}: add "
                      "${parla_torch_prefix} to CMAKE_PREFIX_PATH (tools/test.sh --libtorch2 does)")
endif()
set(PARLA_TORCH_CUDA OFF)
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(PARLA_TORCH_CUDA ON)
endif()
message(STATUS "parla: LibTorch ${Torch_VERSION} at ${parla_torch_prefix} (CUDA: ${PARLA_TORCH_CUDA})")

# The wheel bundles fmt 12 headers in its include directory, ahead of /usr/include on the compiler's path, while
# Debian's spdlog is compiled against Debian's fmt 9: a folder holding only a link to Debian's fmt, searched first,
# keeps every parla translation unit on the fmt that spdlog was built with.
set(PARLA_FMT_OVERRIDE_DIR "")
if(EXISTS "${parla_torch_prefix}/include/fmt" AND NOT parla_torch_prefix STREQUAL "/usr")
  # The fmt that spdlog's package config found (Debian's; under a prefix on machines without apt).
  get_target_property(parla_fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  find_path(PARLA_DEBIAN_FMT_INCLUDE fmt/core.h PATHS ${parla_fmt_includes} /usr/include NO_DEFAULT_PATH REQUIRED)
  set(PARLA_FMT_OVERRIDE_DIR "${CMAKE_BINARY_DIR}/debian-fmt")
  file(MAKE_DIRECTORY "${PARLA_FMT_OVERRIDE_DIR}")
  file(CREATE_LINK "${PARLA_DEBIAN_FMT_INCLUDE}/fmt" "${PARLA_FMT_OVERRIDE_DIR}/fmt" SYMBOLIC)
endif()

# NCCL (data parallel between GPUs): lib/train/distributed.cpp compiles its NCCL path when the LibTorch defines
# USE_C10D_NCCL and <nccl.h> is found: in the CUDA toolkit, or in the wheel's nvidia-nccl package (the GPU
# machine's PyTorch has the latter only).
set(PARLA_NCCL_INCLUDE "")
if(PARLA_TORCH_CUDA AND parla_wheel_cuda)
  # cmake/TorchWheelCudaRuntime.cmake stood in for a toolkit: ProcessGroupNCCL.hpp includes cuda_runtime.h, which
  # needs the toolkit's crt/ headers that the wheel's runtime package lacks.
  message(STATUS "parla: no CUDA toolkit, so data parallel over NCCL is not compiled (Gloo is)")
elseif(PARLA_TORCH_CUDA)
  find_path(PARLA_NCCL_HEADER_DIR nccl.h
    PATHS ${CUDAToolkit_INCLUDE_DIRS} ${CUDA_INCLUDE_DIRS} /usr/local/cuda/include
          "${parla_torch_prefix}/../nvidia/nccl/include" NO_DEFAULT_PATH)
  if(PARLA_NCCL_HEADER_DIR)
    set(PARLA_NCCL_INCLUDE "${PARLA_NCCL_HEADER_DIR}")
    message(STATUS "parla: NCCL data parallel compiled (nccl.h in ${PARLA_NCCL_HEADER_DIR})")
  else()
    message(WARNING "parla: this LibTorch has CUDA but no nccl.h was found: data parallel on GPUs is not compiled")
  endif()
endif()
