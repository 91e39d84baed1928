# Detects what the C++ torch.distributed process group (tilecomm._torch_pg) needs and sets
# TILECOMM_TORCH_FOUND:
#  - ${TILECOMM_PYTHON} imports torch (Debian's python3-torch), and says which C++ ABI torch was
#    built with (torch._C._GLIBCXX_USE_CXX11_ABI);
#  - Torch's CMake config (Debian's libtorch-dev: /usr/lib/x86_64-linux-gnu/cmake/Torch) and
#    libtorch_python;
#  - that ABI is this compiler's default, the one libtilecomm.so is built with (a different one
#    would break std::string and std::vector across the two).
# Otherwise the module is skipped with the reason, and tilecomm.torch uses its Python process group.
set(TILECOMM_TORCH_FOUND OFF)
option(TILECOMM_BUILD_TORCH_PG "Build the C++ torch.distributed process group when torch is present" ON)
if(NOT TILECOMM_BUILD_TORCH_PG)
  return()
endif()
execute_process(
  COMMAND ${TILECOMM_PYTHON} -c "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI), end='')"
  RESULT_VARIABLE _tilecomm_no_torch OUTPUT_VARIABLE _tilecomm_torch_abi ERROR_QUIET)
if(_tilecomm_no_torch)
  message(STATUS "tilecomm C++ torch process group: skipped (${TILECOMM_PYTHON} cannot import "
                 "torch; apt-get install python3-torch libtorch-dev)")
  return()
endif()
find_package(Torch CONFIG QUIET)
if(NOT Torch_FOUND)
  message(STATUS "tilecomm C++ torch process group: skipped (no Torch CMake config; apt-get "
                 "install libtorch-dev)")
  return()
endif()
find_library(TILECOMM_TORCH_PYTHON_LIBRARY torch_python HINTS ${TORCH_INSTALL_PREFIX}/lib)
if(NOT TILECOMM_TORCH_PYTHON_LIBRARY)
  message(STATUS "tilecomm C++ torch process group: skipped (no libtorch_python)")
  return()
endif()
include(CheckCXXSourceCompiles)
check_cxx_source_compiles("
#include <string>
#if _GLIBCXX_USE_CXX11_ABI != ${_tilecomm_torch_abi}
#error ABI differs
#endif
int main() { return 0; }" TILECOMM_TORCH_ABI_MATCHES_${_tilecomm_torch_abi})
if(NOT TILECOMM_TORCH_ABI_MATCHES_${_tilecomm_torch_abi})
  message(STATUS "tilecomm C++ torch process group: skipped (torch uses _GLIBCXX_USE_CXX11_ABI="
                 "${_tilecomm_torch_abi}, this compiler's default differs)")
  return()
endif()
# Torch's exported flags (-D_GLIBCXX_USE_CXX11_ABI=...), as a list.
separate_arguments(TILECOMM_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")
set(TILECOMM_TORCH_FOUND ON)
message(STATUS "tilecomm C++ torch process group: building for torch ${Torch_VERSION} "
               "(_GLIBCXX_USE_CXX11_ABI=${_tilecomm_torch_abi})")
