// What libcollx_mpi knows of an MPI datatype (datatypes.cpp): read once from its envelope and
// contents and cached on it.
#pragma once

#include <mpi.h>

#include <collx/types.hpp>

#include <cstddef>
#include <optional>

namespace collx_mpi {

struct TypeLayout {
  std::size_t size = 0;  // MPI_Type_size: the bytes of one element's typemap
  MPI_Aint extent = 0;   // MPI_Type_get_extent: from one element to the next
  // The typemap's bytes are one run, in typemap order, at `offset` from the buffer: one
  // element lies in memory as MPI_Pack would pack it.
  bool run = false;
  MPI_Aint offset = 0;
  // The one predefined type collx reduces that every basic element of the typemap is, and how
  // many of them one element holds; nothing for a mix or a type collx does not reduce.
  std::optional<collx::DataType> element;
  std::size_t elements = 0;
  // A predefined (named) type: its handle lives as long as MPI and never stands for another.
  bool predefined = false;

  // Whether `count` elements lie at buffer + offset as their packed bytes.
  bool lies_packed(std::size_t count) const {
    return count == 0 || size == 0 ||
           (run && (count == 1 || extent == static_cast<MPI_Aint>(size)));
  }
};

// The layout of `type` (null for MPI_DATATYPE_NULL or what is not a datatype).
const TypeLayout* layout_of(MPI_Datatype type);
// At MPI_Finalize: the cache's keyval and the predefined types' layouts.
void release_type_layouts();
// At MPI_Finalize: the communicator MPI_Pack and MPI_Unpack are given.
void release_pack_communicator();

}  // namespace collx_mpi
