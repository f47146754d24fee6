# OtNvptx.cmake — find and vet the NVIDIA device toolchain.
#
# LLVM's libomptarget before 21.1 cannot read the ELF flags that CUDA 13's
# ptxas writes (llvm-project #159088): it reports 0 devices and runs every
# target region on the host. We refuse that combination here, at configure
# time, instead of producing binaries that silently do not use the GPU.

function(_ot_ptxas_version ptxas out)
  execute_process(COMMAND "${ptxas}" --version OUTPUT_VARIABLE _v ERROR_QUIET RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  string(REGEX MATCH "release ([0-9]+\\.[0-9]+)" _m "${_v}")
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

macro(_ot_check_nvptx)
  set(OT_CUDA_TOOLS_DIR "${PROJECT_SOURCE_DIR}/toolchain/cuda-11.8" CACHE PATH
      "Folder with bin/ptxas, bin/nvlink, nvvm/libdevice/libdevice.10.bc and include/cuda.h of a CUDA <= 12.x (scripts/setup.sh --gpu fetches CUDA 11.8)")
  set(OT_NVPTX_BC_PATH "${OT_LLVM_LIBDIR}" CACHE PATH "Folder with libomptarget-nvptx*.bc")

  file(GLOB _bc "${OT_NVPTX_BC_PATH}/libomptarget-nvptx*.bc")
  if(NOT _bc)
    message(FATAL_ERROR
      "No OpenMP nvptx device bitcode (libomptarget-nvptx*.bc) in OT_NVPTX_BC_PATH=${OT_NVPTX_BC_PATH}. "
      "Fix: apt-get install libomp-${OT_CLANG_MAJOR}-dev, or set -DOT_NVPTX_BC_PATH=<folder>.")
  endif()

  if(NOT EXISTS "${OT_CUDA_TOOLS_DIR}/bin/ptxas")
    # Fall back to a full CUDA toolkit, but only one old enough (checked below).
    find_program(_ptxas ptxas HINTS /usr/local/cuda/bin)
    if(NOT _ptxas)
      message(FATAL_ERROR
        "No ptxas: OT_CUDA_TOOLS_DIR=${OT_CUDA_TOOLS_DIR} has no bin/ptxas and none is on PATH. "
        "Fix: run scripts/setup.sh --gpu (fetches CUDA 11.8's ptxas/nvlink/libdevice into toolchain/cuda-11.8).")
    endif()
    get_filename_component(_d "${_ptxas}" DIRECTORY)
    get_filename_component(OT_CUDA_TOOLS_DIR "${_d}" DIRECTORY)
  endif()
  _ot_ptxas_version("${OT_CUDA_TOOLS_DIR}/bin/ptxas" OT_PTXAS_VERSION)
  if(NOT OT_PTXAS_VERSION)
    message(FATAL_ERROR "${OT_CUDA_TOOLS_DIR}/bin/ptxas does not run (--version failed).")
  endif()

  # libomptarget's version is clang's: Debian ships them together.
  if(OT_CLANG_MAJOR LESS 21 AND OT_PTXAS_VERSION VERSION_GREATER_EQUAL 13)
    message(FATAL_ERROR
      "Refusing a toolchain that silently runs GPU code on the host: "
      "ptxas ${OT_PTXAS_VERSION} (from ${OT_CUDA_TOOLS_DIR}) writes CUDA 13 cubins, which "
      "libomptarget ${OT_CLANG_MAJOR} cannot load (llvm-project #159088, fixed in LLVM 21.1): "
      "it would report 0 devices and run every kernel on the CPU. "
      "Fix: run scripts/setup.sh --gpu and configure with -DOT_CUDA_TOOLS_DIR=${PROJECT_SOURCE_DIR}/toolchain/cuda-11.8 "
      "(the nvptx preset does), or use clang >= 21.")
  endif()
  if(NOT EXISTS "${OT_CUDA_TOOLS_DIR}/nvvm/libdevice/libdevice.10.bc")
    message(FATAL_ERROR "${OT_CUDA_TOOLS_DIR}/nvvm/libdevice/libdevice.10.bc is missing. Fix: scripts/setup.sh --gpu")
  endif()
  if(NOT EXISTS "${OT_CUDA_TOOLS_DIR}/include/cuda.h")
    # clang reads CUDA_VERSION from include/cuda.h; without it it emits a PTX
    # version ptxas 11.8 rejects (docs/gpu.md, Toolchain).
    message(FATAL_ERROR "${OT_CUDA_TOOLS_DIR}/include/cuda.h is missing (clang learns the CUDA version from it). Fix: scripts/setup.sh --gpu")
  endif()
  message(STATUS "omptensor: nvptx ${OT_GPU_ARCH} with ptxas ${OT_PTXAS_VERSION} from ${OT_CUDA_TOOLS_DIR}")

  set(_t nvptx64-nvidia-cuda)
  list(APPEND OT_OFFLOAD_FLAGS -fopenmp-targets=${_t} -Xopenmp-target=${_t} -march=${OT_GPU_ARCH}
       --cuda-path=${OT_CUDA_TOOLS_DIR} --libomptarget-nvptx-bc-path=${OT_NVPTX_BC_PATH})
  list(APPEND OT_OFFLOAD_DEFINES OT_OFFLOAD=1)
endmacro()
