# OtAmdgcn.cmake — find and vet the AMD GPU device toolchain, and finish
# each translation unit's device code where it is compiled.
#
# OT_GPU_ARCH is a comma-separated list of gfx targets (the amdgcn preset:
# gfx90a,gfx942); every object then carries one device image per target and
# the runtime loads the one the GPU matches. The pieces (docs/gpu.md, AMD GPUs):
#   - clang-19's OpenMP device runtime, libomptarget-amdgpu-<gfx>.bc in
#     OT_LLVM_LIBDIR (Debian libomp-19-dev);
#   - ROCm's device libraries (ocml, ockl, oclc_*: Debian rocm-device-libs
#     5.2.3) in OT_ROCM_DEVICE_LIBS, the folder scripts/setup.sh --amdgcn makes
#     in toolchain/amdgcn-bitcode: Debian's files plus the one gfx942 lacks;
#   - lld-19's ld.lld, which links the device images.
#
# Why each object is device-linked on its own: clang 19 compiles amdgcn
# OpenMP device code only as far as LLVM bitcode (it has no per-object
# device code for AMD GPUs), so every program's link would run device LTO
# over the whole library: ~300 outlined parallel regions, whose calls
# through __kmpc_parallel_51 OpenMPOpt turns into one if-cascade over all of
# them, which the inliner then never finished (25+ minutes per binary). With
# that optimization off it still took 14 s of optimization and 156 s of code
# generation per binary (docs/gpu.md, AMD GPUs). Instead the compiler
# launcher cmake/ot_device_prelink.sh finishes the device code of each
# object with target regions as it is compiled (clang -r: device LTO of that
# translation unit with the device runtime, wrapped with its registration
# code), the way clang 19 treats nvptx objects (a cubin per object). A
# program's link then device-links only the kernel-less device modules of
# its other objects (its own small image, under a second). The price: an
# object's kernels can call only device functions of their own translation
# unit (a call into another one fails that object's device link, at build
# time), which the kernels keep anyway (static inline helpers and macros).

macro(_ot_check_amdgcn)
  set(OT_ROCM_DEVICE_LIBS "${PROJECT_SOURCE_DIR}/toolchain/amdgcn-bitcode" CACHE PATH
      "Folder with ROCm's device bitcode (ocml.bc, ockl.bc, oclc_*.bc) for every OT_GPU_ARCH (scripts/setup.sh --amdgcn makes toolchain/amdgcn-bitcode)")

  string(REPLACE ";" "," _archs "${OT_GPU_ARCH}")
  string(REPLACE "," ";" _arch_list "${_archs}")
  if(NOT _arch_list)
    message(FATAL_ERROR "OT_GPU_ARCH is empty: give the AMD GPU targets, e.g. -DOT_GPU_ARCH=gfx90a,gfx942 (the amdgcn preset's).")
  endif()
  foreach(_a ${_arch_list})
    if(NOT _a MATCHES "^gfx[0-9a-f]+$")
      message(FATAL_ERROR
        "OT_GPU_ARCH='${OT_GPU_ARCH}': '${_a}' is not an AMD GPU target (gfxNNN). "
        "Fix: -DOT_GPU_ARCH=gfx90a,gfx942 (the amdgcn preset's), or one of them.")
    endif()
    if(NOT EXISTS "${OT_LLVM_LIBDIR}/libomptarget-amdgpu-${_a}.bc")
      message(FATAL_ERROR
        "No OpenMP device runtime for ${_a} (${OT_LLVM_LIBDIR}/libomptarget-amdgpu-${_a}.bc): "
        "clang ${OT_CLANG_MAJOR} does not build it. Fix: apt-get install libomp-${OT_CLANG_MAJOR}-dev, or pick a target it has.")
    endif()
    string(REGEX REPLACE "^gfx" "" _isa "${_a}")
    if(NOT EXISTS "${OT_ROCM_DEVICE_LIBS}/oclc_isa_version_${_isa}.bc")
      message(FATAL_ERROR
        "No ROCm device library for ${_a}: ${OT_ROCM_DEVICE_LIBS}/oclc_isa_version_${_isa}.bc is missing. "
        "Fix: run scripts/setup.sh --amdgcn (installs rocm-device-libs and makes toolchain/amdgcn-bitcode), "
        "or set -DOT_ROCM_DEVICE_LIBS=<folder>.")
    endif()
  endforeach()
  if(NOT EXISTS "${OT_ROCM_DEVICE_LIBS}/ocml.bc" OR NOT EXISTS "${OT_ROCM_DEVICE_LIBS}/ockl.bc")
    message(FATAL_ERROR "${OT_ROCM_DEVICE_LIBS} has no ocml.bc / ockl.bc. Fix: scripts/setup.sh --amdgcn")
  endif()
  # clang runs the ld.lld beside itself first; without lld-19 it would take
  # another one from PATH (Debian's /usr/bin/ld.lld is lld 14).
  if(NOT EXISTS "${OT_LLVM_ROOT}/bin/ld.lld")
    message(FATAL_ERROR "No ${OT_LLVM_ROOT}/bin/ld.lld (it links the device images). Fix: apt-get install lld-${OT_CLANG_MAJOR} (scripts/setup.sh does)")
  endif()
  foreach(_tool llvm-objcopy llvm-readelf)
    if(NOT EXISTS "${OT_LLVM_ROOT}/bin/${_tool}")
      message(FATAL_ERROR "No ${OT_LLVM_ROOT}/bin/${_tool} (cmake/ot_device_prelink.sh uses it). Fix: apt-get install llvm-${OT_CLANG_MAJOR}")
    endif()
  endforeach()
  set(OT_GPU_ARCH "${_archs}") # commas: the list reaches a C string (OT_OFFLOAD_DESC)
  message(STATUS "omptensor: amdgcn ${_archs} with ROCm device libraries from ${OT_ROCM_DEVICE_LIBS}")

  set(_t amdgcn-amd-amdhsa)
  set(_amd_flags -fopenmp --offload-arch=${_archs}
      # Code object version 4, the one checked when this build was written
      # (docs/gpu.md, AMD GPUs: version 5, clang's default, also links with lld-19).
      -Xopenmp-target=${_t} -mcode-object-version=4
      --rocm-device-lib-path=${OT_ROCM_DEVICE_LIBS})
  # SHELL: keeps the -Xopenmp-target pair together: CMake de-duplicates options.
  list(APPEND OT_OFFLOAD_FLAGS --offload-arch=${_archs} "SHELL:-Xopenmp-target=${_t} -mcode-object-version=4"
       --rocm-device-lib-path=${OT_ROCM_DEVICE_LIBS})
  list(APPEND OT_OFFLOAD_DEFINES OT_OFFLOAD=1)

  # Each object's device code finished where it is compiled (above). A
  # launcher set by the user (ccache) runs inside it.
  set(CMAKE_C_COMPILER_LAUNCHER ${PROJECT_SOURCE_DIR}/cmake/ot_device_prelink.sh
      ${CMAKE_C_COMPILER} ${OT_LLVM_ROOT}/bin ${OT_LLVM_LIBDIR} ${_amd_flags} -- ${CMAKE_C_COMPILER_LAUNCHER})
endmacro()
