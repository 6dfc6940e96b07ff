# What a user of the collx target needs, in the build tree and installed: its public headers
# are C++20 (std::span, std::bit_cast, defaulted operator==), and they include mpi.h from C++,
# so its users link MPI's C++-usable target (MPI::MPI_CXX: the C library, seen from a C++
# project, which `project(app CXX)` can find without enabling C).
target_compile_features(collx PUBLIC cxx_std_20)
get_target_property(collx_interface collx INTERFACE_LINK_LIBRARIES)
list(TRANSFORM collx_interface REPLACE "^MPI::MPI_C$" "MPI::MPI_CXX")
set_target_properties(collx PROPERTIES INTERFACE_LINK_LIBRARIES "${collx_interface}")

if(NOT BUILD_SHARED_LIBS)
  # An installed archive of LTO bytecode only would tie its users to this very GCC: keep
  # machine code beside it.
  get_target_property(collx_ipo collx INTERPROCEDURAL_OPTIMIZATION)
  if(collx_ipo AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(collx PRIVATE -ffat-lto-objects)
  endif()
endif()
