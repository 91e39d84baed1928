# Detects what the Python module needs and sets TILECOMM_PYTHON_FOUND:
#  - Debian's interpreter (TILECOMM_PYTHON, default /usr/bin/python3 -- not a pyenv python3 on PATH),
#  - pybind11 (find_package(pybind11 CONFIG), Debian's pybind11-dev),
#  - numpy and mpi4py importable by that interpreter (python3-numpy, python3-mpi4py); sets
#    TILECOMM_MPI4PY_INCLUDE to mpi4py.get_include().
# Missing pieces only print why; the rest of the build is unaffected.
set(TILECOMM_PYTHON /usr/bin/python3 CACHE FILEPATH "Python interpreter the tilecomm module is built for")
set(TILECOMM_PYTHON_FOUND OFF)
if(NOT EXISTS ${TILECOMM_PYTHON})
  message(STATUS "tilecomm Python module: skipped (no ${TILECOMM_PYTHON})")
  return()
endif()
execute_process(
  COMMAND ${TILECOMM_PYTHON} -c "import numpy, mpi4py; print(mpi4py.get_include(), end='')"
  OUTPUT_VARIABLE _tilecomm_mpi4py_include RESULT_VARIABLE _tilecomm_py_rc ERROR_QUIET)
if(NOT _tilecomm_py_rc EQUAL 0)
  message(STATUS "tilecomm Python module: skipped (${TILECOMM_PYTHON} cannot import numpy and mpi4py;"
                 " apt-get install python3-numpy python3-mpi4py)")
  return()
endif()
# pybind11's classic mode reads PYTHON_EXECUTABLE, its FindPython mode Python_EXECUTABLE.
set(PYTHON_EXECUTABLE ${TILECOMM_PYTHON} CACHE FILEPATH "" FORCE)
set(Python_EXECUTABLE ${TILECOMM_PYTHON} CACHE FILEPATH "" FORCE)
find_package(pybind11 CONFIG QUIET)
if(NOT pybind11_FOUND)
  message(STATUS "tilecomm Python module: skipped (no pybind11; apt-get install pybind11-dev python3-dev)")
  return()
endif()
set(TILECOMM_MPI4PY_INCLUDE ${_tilecomm_mpi4py_include})
set(TILECOMM_PYTHON_FOUND ON)
message(STATUS "tilecomm Python module: building for ${TILECOMM_PYTHON} (pybind11 ${pybind11_VERSION}, mpi4py ${TILECOMM_MPI4PY_INCLUDE})")
