# FindLAPACKE: LAPACK's C interface (Debian: liblapacke-dev, installed by scripts/install-deps.sh).
# Defines LAPACKE_FOUND and the imported target LAPACKE::LAPACKE (lapacke.h + liblapacke).
find_path(LAPACKE_INCLUDE_DIR lapacke.h PATH_SUFFIXES openblas)
find_library(LAPACKE_LIBRARY NAMES lapacke)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LAPACKE
  REQUIRED_VARS LAPACKE_LIBRARY LAPACKE_INCLUDE_DIR
  FAIL_MESSAGE "LAPACKE (lapacke.h, liblapacke) not found: install liblapacke-dev (scripts/install-deps.sh): the model's fits use LAPACKE_dgels")
if(LAPACKE_FOUND AND NOT TARGET LAPACKE::LAPACKE)
  add_library(LAPACKE::LAPACKE UNKNOWN IMPORTED)
  set_target_properties(LAPACKE::LAPACKE PROPERTIES
    IMPORTED_LOCATION "${LAPACKE_LIBRARY}" INTERFACE_INCLUDE_DIRECTORIES "${LAPACKE_INCLUDE_DIR}")
endif()
mark_as_advanced(LAPACKE_INCLUDE_DIR LAPACKE_LIBRARY)
