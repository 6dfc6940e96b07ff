# Which MPI collx is built, tested and installed against, chosen once.
#   COLLX_MPI=AUTO     what FindMPI finds first (mpicc on PATH; Debian: the `mpi` alternative)
#   COLLX_MPI=openmpi  Open MPI's wrappers and mpiexec (Debian: mpicc.openmpi, mpiexec.openmpi)
#   COLLX_MPI=mpich    MPICH's (Debian: mpicc.mpich, mpiexec.mpich); also Cray MPICH, Intel MPI
#                      and MVAPICH, which share its ABI, with MPI_C_COMPILER set to their mpicc
#   COLLX_MPI=smpi     SimGrid's SMPI: the ranks simulated on a platform of many hosts, run by
#                      smpirun (cmake/smpi.cmake; docs/SCALE.md)
# MPI_C_COMPILER, MPI_CXX_COMPILER and MPIEXEC_EXECUTABLE given on the command line win.
# Results: MPI::MPI_C, MPI::MPI_CXX, MPIEXEC_EXECUTABLE, COLLX_MPI_FAMILY (openmpi, mpich or
# other), COLLX_MPIEXEC_FLAGS (what the tests pass to mpiexec), COLLX_MPI_PKGCONFIG (the MPI's
# pkg-config module, for collx.pc).
set(COLLX_MPI AUTO CACHE STRING "MPI library: AUTO, openmpi, mpich or smpi")
set_property(CACHE COLLX_MPI PROPERTY STRINGS AUTO openmpi mpich smpi)

set(COLLX_SMPI OFF)
if(COLLX_MPI STREQUAL "smpi")
  include(${CMAKE_CURRENT_LIST_DIR}/smpi.cmake)
  return()
endif()

if(COLLX_MPI STREQUAL "openmpi" OR COLLX_MPI STREQUAL "mpich")
  foreach(tool mpicc:MPI_C_COMPILER mpicxx:MPI_CXX_COMPILER mpiexec:MPIEXEC_EXECUTABLE)
    string(REPLACE ":" ";" tool ${tool})
    list(GET tool 0 program)
    list(GET tool 1 variable)
    if(NOT ${variable})
      find_program(${variable} NAMES ${program}.${COLLX_MPI} NO_CACHE)
      if(NOT ${variable})
        message(FATAL_ERROR "COLLX_MPI=${COLLX_MPI}: ${program}.${COLLX_MPI} is not on PATH; "
                            "install the MPI (Debian: scripts/common.sh) or set ${variable}")
      endif()
      set(${variable} ${${variable}} CACHE FILEPATH "${program} of ${COLLX_MPI}")
    endif()
  endforeach()
  # The Fortran wrapper, for the drop-in's Fortran tests, where there is one.
  if(NOT MPI_Fortran_COMPILER)
    find_program(MPI_Fortran_COMPILER NAMES mpif90.${COLLX_MPI} mpifort.${COLLX_MPI})
  endif()
elseif(NOT COLLX_MPI STREQUAL "AUTO")
  message(FATAL_ERROR "COLLX_MPI=${COLLX_MPI}: use AUTO, openmpi, mpich or smpi")
endif()

# The C++ component without the deprecated MPI C++ bindings: collx's headers use the C API.
set(MPI_CXX_SKIP_MPICXX ON CACHE BOOL "MPI C++ bindings are not used")
find_package(MPI REQUIRED COMPONENTS C CXX)

# The family from the library itself (a COLLX_MPI=AUTO build, or wrappers given by hand).
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE collx_mpiexec_version
                ERROR_VARIABLE collx_mpiexec_version)
if(MPI_C_LIBRARY_VERSION_STRING MATCHES "Open MPI" OR collx_mpiexec_version MATCHES "Open MPI|OpenRTE")
  set(COLLX_MPI_FAMILY openmpi)
elseif(MPI_C_LIBRARY_VERSION_STRING MATCHES "MPICH" OR collx_mpiexec_version MATCHES "HYDRA")
  set(COLLX_MPI_FAMILY mpich)
else()
  set(COLLX_MPI_FAMILY other)
endif()
if(NOT COLLX_MPI STREQUAL "AUTO" AND NOT COLLX_MPI_FAMILY STREQUAL COLLX_MPI)
  message(FATAL_ERROR "COLLX_MPI=${COLLX_MPI} but ${MPI_C_COMPILER} and ${MPIEXEC_EXECUTABLE} "
                      "are ${COLLX_MPI_FAMILY}: start from an empty build folder")
endif()

# Flags every test's mpiexec gets. Open MPI refuses root and more ranks than cores unless told
# (CI runs as root on two cores); MPICH's hydra accepts both as they are.
if(COLLX_MPI_FAMILY STREQUAL "openmpi")
  set(collx_default_mpiexec_flags --oversubscribe --allow-run-as-root)
  set(COLLX_MPI_PKGCONFIG ompi-c)
elseif(COLLX_MPI_FAMILY STREQUAL "mpich")
  set(collx_default_mpiexec_flags "")
  set(COLLX_MPI_PKGCONFIG mpich)
else()
  set(collx_default_mpiexec_flags "")
  set(COLLX_MPI_PKGCONFIG mpi)
endif()
set(COLLX_MPIEXEC_FLAGS "${collx_default_mpiexec_flags}" CACHE STRING
    "Flags the tests pass to mpiexec after the rank count")
list(JOIN COLLX_MPIEXEC_FLAGS " " collx_flags_text)
message(STATUS "collx: MPI ${COLLX_MPI_FAMILY} (${MPI_C_COMPILER}, ${MPIEXEC_EXECUTABLE} "
               "${collx_flags_text})")
