# The library's layers: runtime -> collectives -> ops, each an OBJECT library (tilecomm_<layer>)
# whose sources its folder adds; the top level combines their objects into the one library
# `tilecomm`.
#
# A layer includes its own private headers and those of the layers below it as "<layer>/...": the
# repository root is on no include path. Instead each layer has a staged include directory holding
# one symbolic link, <build>/layers/<layer>/<layer> -> <source>/<layer>, and a layer's include path
# lists its own staged directory and those of the layers below. So runtime/ cannot include a
# collectives/ or ops/ header, and collectives/ cannot include an ops/ header (the #include fails).
#
# tilecomm_private_<layer> (INTERFACE) carries a layer's private include path, lower layers
# included: tests and benchmarks that use a layer's internals link it (it adds no code).

# Settings every layer compiles with (not exported: `tilecomm` states its own usage requirements).
add_library(tilecomm_layer_settings INTERFACE)
target_compile_features(tilecomm_layer_settings INTERFACE cxx_std_20)
target_compile_definitions(tilecomm_layer_settings INTERFACE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
target_include_directories(tilecomm_layer_settings INTERFACE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(tilecomm_layer_settings INTERFACE
  MPI::MPI_C Threads::Threads fmt::fmt nlohmann_json::nlohmann_json BLAS::BLAS LAPACKE::LAPACKE)
target_compile_options(tilecomm_layer_settings INTERFACE -Wall -Wextra -Wno-unused-parameter)

# tilecomm_add_layer(<layer> [ABOVE <lower layer>])
function(tilecomm_add_layer layer)
  cmake_parse_arguments(L "" "ABOVE" "" ${ARGN})
  set(stage ${PROJECT_BINARY_DIR}/layers/${layer})
  file(MAKE_DIRECTORY ${stage})
  file(REMOVE ${stage}/${layer})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${layer} ${stage}/${layer} SYMBOLIC)

  add_library(tilecomm_private_${layer} INTERFACE)
  target_include_directories(tilecomm_private_${layer} INTERFACE ${stage})
  if(L_ABOVE)
    target_link_libraries(tilecomm_private_${layer} INTERFACE tilecomm_private_${L_ABOVE})
  endif()

  add_library(tilecomm_${layer} OBJECT)
  target_link_libraries(tilecomm_${layer} PRIVATE tilecomm_layer_settings tilecomm_private_${layer})
endfunction()
