// Packing and unpacking the program's elements for collx (call_buffers.hpp).
#include "call_buffers.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include <collx/error.hpp>

#include "interpose.hpp"

namespace collx_mpi {

namespace {

// MPI_Pack and MPI_Unpack take an int count and an int position: a large call goes in pieces
// of at most this many bytes.
constexpr std::size_t kPieceBytes = std::size_t{1} << 30;

// A communicator for MPI_Pack and MPI_Unpack (which only need one for heterogeneous
// systems) whose errors return instead of aborting, so a failure becomes collx's error.
MPI_Comm pack_comm = MPI_COMM_NULL;
MPI_Comm pack_communicator() {
  if (pack_comm == MPI_COMM_NULL) {
    PMPI_Comm_dup(MPI_COMM_SELF, &pack_comm);
    PMPI_Comm_set_errhandler(pack_comm, MPI_ERRORS_RETURN);
  }
  return pack_comm;
}

[[noreturn]] void pack_failed(const char* what, int code) {
  char message[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  PMPI_Error_string(code, message, &length);
  throw collx::Error(collx::ErrorCode::internal, "libcollx_mpi", -1,
                     std::string(what) + " failed: " + message);
}

// Runs `step(first element, elements, bytes)` over `count` elements in pieces that MPI_Pack's
// int arguments can hold.
template <class Step>
void in_pieces(std::size_t count, const TypeLayout& layout, Step&& step) {
  if (layout.size == 0) return;
  const std::size_t per_piece = std::max<std::size_t>(
      1, std::min<std::size_t>(kPieceBytes / layout.size, static_cast<std::size_t>(INT_MAX)));
  for (std::size_t first = 0; first < count; first += per_piece) {
    const std::size_t n = std::min(per_piece, count - first);
    step(first, n, n * layout.size);
  }
}

void pack(const void* buffer, std::size_t count, MPI_Datatype type, const TypeLayout& layout,
          std::byte* to) {
  in_pieces(count, layout, [&](std::size_t first, std::size_t n, std::size_t bytes) {
    const auto* from =
        static_cast<const char*>(buffer) + static_cast<MPI_Aint>(first) * layout.extent;
    int position = 0;
    const int code = PMPI_Pack(from, static_cast<int>(n), type, to + first * layout.size,
                               static_cast<int>(bytes), &position, pack_communicator());
    if (code != MPI_SUCCESS) pack_failed("MPI_Pack", code);
  });
}

void unpack(const std::byte* from, std::size_t count, MPI_Datatype type, const TypeLayout& layout,
            void* buffer) {
  in_pieces(count, layout, [&](std::size_t first, std::size_t n, std::size_t bytes) {
    auto* to = static_cast<char*>(buffer) + static_cast<MPI_Aint>(first) * layout.extent;
    int position = 0;
    const int code = PMPI_Unpack(from + first * layout.size, static_cast<int>(bytes), &position, to,
                                 static_cast<int>(n), type, pack_communicator());
    if (code != MPI_SUCCESS) pack_failed("MPI_Unpack", code);
  });
}

}  // namespace

void release_pack_communicator() {
  if (pack_comm != MPI_COMM_NULL) PMPI_Comm_free(&pack_comm);
}

CallBuffers::~CallBuffers() {
  for (MPI_Datatype& type : held_types_)
    PMPI_Type_free(&type);
}

std::byte* CallBuffers::stage(std::size_t bytes) {
  storage_.push_back(std::make_unique_for_overwrite<std::byte[]>(std::max<std::size_t>(bytes, 1)));
  return storage_.back().get();
}

namespace {

// buffer + offset, as an address: the buffer may be MPI_BOTTOM (a null pointer) with the
// elements at absolute addresses.
std::byte* at_offset(const void* buffer, std::size_t count, const TypeLayout& layout) {
  if (count == 0 || layout.size == 0) return static_cast<std::byte*>(const_cast<void*>(buffer));
  return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(buffer) +
                                      static_cast<std::uintptr_t>(layout.offset));
}

}  // namespace

const std::byte* CallBuffers::in(const void* buffer, std::size_t count, MPI_Datatype type,
                                 const TypeLayout& layout) {
  if (layout.lies_packed(count)) return at_offset(buffer, count, layout);
  std::byte* staged = stage(count * layout.size);
  pack(buffer, count, type, layout, staged);
  return staged;
}

std::byte* CallBuffers::out(void* buffer, std::size_t count, MPI_Datatype type,
                            const TypeLayout& layout, std::size_t read_count) {
  if (layout.lies_packed(std::max(count, read_count)))
    return at_offset(buffer, std::max(count, read_count), layout);
  std::byte* staged = stage(std::max(count, read_count) * layout.size);
  if (read_count > 0) pack(buffer, read_count, type, layout, staged);
  MPI_Datatype kept = type;
  if (keep_types_) {
    PMPI_Type_dup(type, &kept);
    held_types_.push_back(kept);
  }
  unpacks_.push_back({buffer, count, kept, layout, staged});
  return staged;
}

void CallBuffers::finish() {
  for (const Unpack& u : unpacks_)
    unpack(u.from, u.count, u.type, u.layout, u.buffer);
  unpacks_.clear();
}

}  // namespace collx_mpi
