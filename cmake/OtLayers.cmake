# OtLayers.cmake — one CMake target per layer of src/, so that the build, not
# a review, keeps the layering:
#
#   core <- memory <- kernels, sched, io <- config, text <- ops <- models, train
#   core <- comm (MPI, optional) <- train
#
# (cli sits on top and links only the public library.) Each layer is an
# OBJECT library. Its headers are spelled "layer/header.h" and are reachable
# only through the layer's own include root, a folder holding one link
# <root>/<layer> -> src/<layer>; a layer sees its own root and, through its
# PUBLIC links, the roots of the layers it uses. An upward include ("sched/"
# from memory, say) therefore fails to compile.

set(OT_LAYER_ROOT ${PROJECT_BINARY_DIR}/layers)

# ot_layer(NAME USES target...): the OBJECT library ot_NAME over src/NAME/*.c.
function(ot_layer name)
  cmake_parse_arguments(L "" "" "USES" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.c)
  set(root ${OT_LAYER_ROOT}/${name})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${name} ${root}/${name} SYMBOLIC)
  add_library(ot_${name} OBJECT ${srcs})
  # one set of objects serves the static and the shared library
  set_target_properties(ot_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_include_directories(ot_${name} PUBLIC $<BUILD_INTERFACE:${root}>)
  target_link_libraries(ot_${name} PUBLIC ${L_USES})
  set_property(GLOBAL APPEND PROPERTY OT_LAYERS ot_${name})
endfunction()
