// The buffers of one intercepted call as collx sees them: the packed bytes of the program's
// elements, in typemap order. Where a datatype's bytes lie in memory as they would be packed
// (any predefined type without holes, and derived types that are one run), collx reads and
// writes the program's buffer itself; otherwise the elements are packed into a staging area
// before the call (inputs) and unpacked from it after the call (outputs), by the MPI library's
// own MPI_Pack and MPI_Unpack. Which of the two happens is this rank's business only: every
// rank moves the same bytes (the type signatures match, as MPI requires), so the collective is
// the same call everywhere.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "type_layout.hpp"

namespace collx_mpi {

class CallBuffers {
 public:
  // `keep_types`: a nonblocking call, whose output datatypes the program may free before the
  // call completes (MPI keeps them alive, so we hold duplicates until the unpack).
  explicit CallBuffers(bool keep_types) : keep_types_(keep_types) {}
  ~CallBuffers();
  CallBuffers(const CallBuffers&) = delete;
  CallBuffers& operator=(const CallBuffers&) = delete;

  // The packed bytes of `count` elements of `type` at `buffer`, for collx to read.
  const std::byte* in(const void* buffer, std::size_t count, MPI_Datatype type,
                      const TypeLayout& layout);
  // Where collx writes the packed bytes of `count` elements of `type` bound for `buffer`.
  // `read_count` elements are collx's input there first (an in-place call: they are packed
  // now); finish() unpacks the `count` elements.
  std::byte* out(void* buffer, std::size_t count, MPI_Datatype type, const TypeLayout& layout,
                 std::size_t read_count = 0);
  // Unpacks the outputs into the program's buffers (after collx completed the call).
  void finish();

 private:
  struct Unpack {
    void* buffer;
    std::size_t count;
    MPI_Datatype type;
    TypeLayout layout;
    const std::byte* from;
  };
  std::byte* stage(std::size_t bytes);
  bool keep_types_;
  std::vector<std::unique_ptr<std::byte[]>> storage_;
  std::vector<Unpack> unpacks_;
  std::vector<MPI_Datatype> held_types_;
};

}  // namespace collx_mpi
