# COLLX_MPI=smpi: collx built against SimGrid's SMPI, the MPI of a simulator (Debian 12:
# libsimgrid-dev 3.32, its smpicc, smpicxx and smpirun). Included by mpi_choice.cmake.
#
# SMPI runs every rank of a job as a thread of one process (smpirun starts smpimain, which
# dlopens the program once per rank and calls its main in a simulated actor). What that asks of
# the build:
#  - Programs are shared objects exporting main (what smpicxx makes with -shared): executables
#    here are compiled -fPIC and linked -shared (collx_smpi_program below). smpicxx itself is not
#    the compiler: it force-includes smpi_helpers.h, whose macros (malloc, free, exit, ...) would
#    rename members and std:: functions in C++ code; collx calls MPI_Wtime for simulated time and
#    needs none of them.
#  - libcollx is static, linked into each program: smpirun's privatization (dlopen, the default)
#    loads a private copy of the program per rank, so every global, static and thread_local of
#    the library (the engine, the configuration, caches) is per rank, as in a real MPI job. A
#    shared libcollx would be one copy for all ranks.
#  - No drop-in (PMPI interposition inside one process), no CUDA, no UCX, no torch module: they
#    are about real machines. The shared-memory arena is off in the library itself (COLLX_SMPI,
#    lib/src/shm/shm_arena.cpp): all ranks of a simulated node are threads of one process.
# Results as mpi_choice.cmake's: MPI::MPI_C, MPI::MPI_CXX, MPIEXEC_EXECUTABLE (smpirun),
# COLLX_MPI_FAMILY (smpi), COLLX_MPIEXEC_FLAGS; and COLLX_SMPI (ON), COLLX_SMPI_PLATFORMS.
find_program(MPIEXEC_EXECUTABLE NAMES smpirun)
find_path(COLLX_SMPI_INCLUDE_DIR NAMES smpi/mpi.h)
find_library(COLLX_SIMGRID_LIBRARY NAMES simgrid)
if(NOT MPIEXEC_EXECUTABLE OR NOT COLLX_SMPI_INCLUDE_DIR OR NOT COLLX_SIMGRID_LIBRARY)
  message(FATAL_ERROR "COLLX_MPI=smpi: SimGrid's SMPI was not found (smpirun: ${MPIEXEC_EXECUTABLE}, "
                      "smpi/mpi.h: ${COLLX_SMPI_INCLUDE_DIR}, libsimgrid: ${COLLX_SIMGRID_LIBRARY}); "
                      "install it (Debian: apt-get install libsimgrid-dev) or set those variables")
endif()
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} -version OUTPUT_VARIABLE collx_smpi_version
                ERROR_VARIABLE collx_smpi_version OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX MATCH "[0-9]+\\.[0-9]+(\\.[0-9]+)?" COLLX_SIMGRID_VERSION "${collx_smpi_version}")

foreach(lang C CXX)
  if(NOT TARGET MPI::MPI_${lang})
    add_library(MPI::MPI_${lang} INTERFACE IMPORTED)
    set_target_properties(MPI::MPI_${lang} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES ${COLLX_SMPI_INCLUDE_DIR}/smpi
      INTERFACE_LINK_LIBRARIES ${COLLX_SIMGRID_LIBRARY})
  endif()
endforeach()
set(MPI_C_FOUND TRUE)
set(MPI_CXX_FOUND TRUE)
set(MPIEXEC_NUMPROC_FLAG -np)
set(COLLX_MPI_FAMILY smpi)
set(COLLX_SMPI ON)
set(COLLX_MPI_PKGCONFIG "")
set(COLLX_MPIEXEC_FLAGS "" CACHE STRING "Flags the tests pass to smpirun after the rank count")

# What a simulated job does not have (see above); normal variables, so they shadow the cache.
set(BUILD_SHARED_LIBS OFF)
set(COLLX_BUILD_DROPIN OFF)
set(COLLX_CUDA OFF)
set(COLLX_UCX OFF)
set(COLLX_TORCH OFF)
# Simulated time does not depend on how fast the library's code runs (but for the view that
# counts computation, docs/SCALE.md); the build is quicker without link-time optimisation.
if(NOT DEFINED CACHE{COLLX_LTO})
  set(COLLX_LTO OFF CACHE BOOL "Link-time optimisation of libcollx")
endif()

# The platforms in the repository (smpi/platforms) and the hostfiles the tests use.
set(COLLX_SMPI_PLATFORMS ${PROJECT_SOURCE_DIR}/smpi/platforms)

# collx_smpi_program(target): `target` (an add_executable) becomes what smpirun runs: a shared
# object with main, its code position-independent.
function(collx_smpi_program target)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${target} PRIVATE -fPIC)
  target_link_options(${target} PRIVATE -shared -Wl,-z,defs)
endfunction()

message(STATUS "collx: MPI smpi (SimGrid ${COLLX_SIMGRID_VERSION}: ${MPIEXEC_EXECUTABLE}, "
               "${COLLX_SIMGRID_LIBRARY}); static libcollx, no drop-in, CUDA, UCX or torch")
