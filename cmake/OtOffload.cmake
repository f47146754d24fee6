# OtOffload.cmake — the offload flags for each target, and the checks that
# refuse a toolchain which would silently run GPU code on the host.
#
# Sets OT_OFFLOAD_FLAGS (compile + link; an entry may be a "SHELL:a b" group)
# and OT_OFFLOAD_DEFINES.

set(OT_OFFLOAD_FLAGS -fopenmp)
set(OT_OFFLOAD_DEFINES)

if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang" OR CMAKE_C_COMPILER_VERSION VERSION_LESS 19)
  message(FATAL_ERROR
    "omptensor needs clang >= 19 with OpenMP offload; CMAKE_C_COMPILER is "
    "${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER_VERSION}. "
    "Fix: run scripts/setup.sh, then configure with a preset (cmake --preset host) "
    "or -DCMAKE_C_COMPILER=clang-19.")
endif()

string(REGEX MATCH "^[0-9]+" OT_CLANG_MAJOR "${CMAKE_C_COMPILER_VERSION}")
get_filename_component(_cc_real "${CMAKE_C_COMPILER}" REALPATH)
get_filename_component(_cc_bin "${_cc_real}" DIRECTORY)
get_filename_component(OT_LLVM_ROOT "${_cc_bin}" DIRECTORY)
set(OT_LLVM_LIBDIR "${OT_LLVM_ROOT}/lib" CACHE PATH "LLVM lib folder (libomp, libomptarget, device bitcode)")

# The OpenMP runtime of this clang lives off the default library path on
# Debian: every binary carries an rpath to it, installed ones too, and the
# exported targets (omptensor::offload) and omptensor.pc hand it to consumers.
set(CMAKE_BUILD_RPATH "${OT_LLVM_LIBDIR}")
set(CMAKE_INSTALL_RPATH "${OT_LLVM_LIBDIR}")

if(OT_OFFLOAD STREQUAL "none")
  # Plain -fopenmp: target regions run on the host; no libomptarget device.
elseif(OT_OFFLOAD STREQUAL "host")
  list(APPEND OT_OFFLOAD_FLAGS -fopenmp-targets=x86_64-pc-linux-gnu)
  list(APPEND OT_OFFLOAD_DEFINES OT_OFFLOAD=1)
elseif(OT_OFFLOAD STREQUAL "nvptx")
  _ot_check_nvptx()
elseif(OT_OFFLOAD STREQUAL "amdgcn")
  _ot_check_amdgcn()
else()
  message(FATAL_ERROR "OT_OFFLOAD='${OT_OFFLOAD}': use none, host, nvptx or amdgcn")
endif()

if(OT_USM)
  if(NOT OT_OFFLOAD MATCHES "nvptx|amdgcn")
    message(FATAL_ERROR "OT_USM=ON needs a GPU build (OT_OFFLOAD=nvptx or amdgcn)")
  endif()
  list(APPEND OT_OFFLOAD_DEFINES OT_USM=1)
endif()
