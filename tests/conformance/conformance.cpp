// Differential conformance of libcollx_mpi: MPI programs whose every call is legal, run twice in
// one job: once through the MPI_ names (libcollx_mpi's, when it is linked or preloaded) and
// once through the PMPI_ names (the MPI library's own), the outputs compared bitwise, every
// byte of every receive buffer (the gaps of derived datatypes too). A hang ends at a deadline,
// with the seed that replays it.
//
//   conformance --patterns            every collective under the patterns that once hung,
//                                     aborted or computed wrong values through the drop-in:
//                                     derived types at the root only and at the others only, in
//                                     place at the root, zero counts, types freed before the wait
//   conformance --seed S --programs N random programs (collective, root, per-rank datatype forms
//                                     of one type signature, in place, counts including 0,
//                                     blocking and nonblocking on several communicators, every
//                                     completion function), program k of seed S
//   --first K                         start at program K (a replay of one program)
//   --print                           print each random program (rank 0)
//   --deadline SECONDS (default 120)  a rank still running then reports a hang and exits 3
//
// Every rank also checks that all ranks had the same number of calls intercepted (the
// statistics of libcollx_mpi, found with dlsym): a rank that intercepted a call another passed
// through would number collx's operations differently.
//
// Exit 0 and "conformance: OK ..." on rank 0; 1 on a mismatch ("MISMATCH ..."), 3 on a hang.
#include <mpi.h>

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

int world_rank = 0;
int world_size = 1;
unsigned long current_seed = 0;
int current_program = 0;
const char* current_step = "start";
int current_op = -1;
const char* current_pass = "";
// MPICH 4.0's MPI_Reduce with MPI_IN_PLACE at a root other than 0 crashes from about 4 KiB on
// (a segmentation fault inside MPICH, with or without libcollx_mpi: tests/conformance has
// the reproduction in its notes); the reference pass cannot run that call there, so programs
// do not make it. Every rank runs the same library, so every rank draws the same programs.
bool reference_lacks_in_place_reduce = false;

// ---- the two ways of calling MPI: through the MPI_ names or the PMPI_ names ----

// Each collective in both forms, through one of the two names.
struct Calls {
  bool pmpi;
  int bcast(void* b, int c, MPI_Datatype t, int root, MPI_Comm m, MPI_Request* q) const {
    if (q) return pmpi ? PMPI_Ibcast(b, c, t, root, m, q) : MPI_Ibcast(b, c, t, root, m, q);
    return pmpi ? PMPI_Bcast(b, c, t, root, m) : MPI_Bcast(b, c, t, root, m);
  }
  int reduce(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, int root, MPI_Comm m,
             MPI_Request* q) const {
    if (q)
      return pmpi ? PMPI_Ireduce(s, r, c, t, o, root, m, q)
                  : MPI_Ireduce(s, r, c, t, o, root, m, q);
    return pmpi ? PMPI_Reduce(s, r, c, t, o, root, m) : MPI_Reduce(s, r, c, t, o, root, m);
  }
  int allreduce(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m,
                MPI_Request* q) const {
    if (q) return pmpi ? PMPI_Iallreduce(s, r, c, t, o, m, q) : MPI_Iallreduce(s, r, c, t, o, m, q);
    return pmpi ? PMPI_Allreduce(s, r, c, t, o, m) : MPI_Allreduce(s, r, c, t, o, m);
  }
  int gather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root,
             MPI_Comm m, MPI_Request* q) const {
    if (q)
      return pmpi ? PMPI_Igather(s, sc, st, r, rc, rt, root, m, q)
                  : MPI_Igather(s, sc, st, r, rc, rt, root, m, q);
    return pmpi ? PMPI_Gather(s, sc, st, r, rc, rt, root, m)
                : MPI_Gather(s, sc, st, r, rc, rt, root, m);
  }
  int scatter(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root,
              MPI_Comm m, MPI_Request* q) const {
    if (q)
      return pmpi ? PMPI_Iscatter(s, sc, st, r, rc, rt, root, m, q)
                  : MPI_Iscatter(s, sc, st, r, rc, rt, root, m, q);
    return pmpi ? PMPI_Scatter(s, sc, st, r, rc, rt, root, m)
                : MPI_Scatter(s, sc, st, r, rc, rt, root, m);
  }
  int allgather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt,
                MPI_Comm m, MPI_Request* q) const {
    if (q)
      return pmpi ? PMPI_Iallgather(s, sc, st, r, rc, rt, m, q)
                  : MPI_Iallgather(s, sc, st, r, rc, rt, m, q);
    return pmpi ? PMPI_Allgather(s, sc, st, r, rc, rt, m) : MPI_Allgather(s, sc, st, r, rc, rt, m);
  }
  int alltoall(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm m,
               MPI_Request* q) const {
    if (q)
      return pmpi ? PMPI_Ialltoall(s, sc, st, r, rc, rt, m, q)
                  : MPI_Ialltoall(s, sc, st, r, rc, rt, m, q);
    return pmpi ? PMPI_Alltoall(s, sc, st, r, rc, rt, m) : MPI_Alltoall(s, sc, st, r, rc, rt, m);
  }
  int reduce_scatter_block(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m,
                           MPI_Request* q) const {
    if (q)
      return pmpi ? PMPI_Ireduce_scatter_block(s, r, c, t, o, m, q)
                  : MPI_Ireduce_scatter_block(s, r, c, t, o, m, q);
    return pmpi ? PMPI_Reduce_scatter_block(s, r, c, t, o, m)
                : MPI_Reduce_scatter_block(s, r, c, t, o, m);
  }
  int reduce_scatter(const void* s, void* r, const int* counts, MPI_Datatype t, MPI_Op o,
                     MPI_Comm m, MPI_Request* q) const {
    if (q)
      return pmpi ? PMPI_Ireduce_scatter(s, r, counts, t, o, m, q)
                  : MPI_Ireduce_scatter(s, r, counts, t, o, m, q);
    return pmpi ? PMPI_Reduce_scatter(s, r, counts, t, o, m)
                : MPI_Reduce_scatter(s, r, counts, t, o, m);
  }
  int barrier(MPI_Comm m, MPI_Request* q) const {
    if (q) return pmpi ? PMPI_Ibarrier(m, q) : MPI_Ibarrier(m, q);
    return pmpi ? PMPI_Barrier(m) : MPI_Barrier(m);
  }
  // Collectives libcollx_mpi does not intercept, mixed in so that calls pass beside it.
  int allgatherv(const void* s, int sc, MPI_Datatype st, void* r, const int* rc, const int* d,
                 MPI_Datatype rt, MPI_Comm m, MPI_Request* q) const {
    if (q)
      return pmpi ? PMPI_Iallgatherv(s, sc, st, r, rc, d, rt, m, q)
                  : MPI_Iallgatherv(s, sc, st, r, rc, d, rt, m, q);
    return pmpi ? PMPI_Allgatherv(s, sc, st, r, rc, d, rt, m)
                : MPI_Allgatherv(s, sc, st, r, rc, d, rt, m);
  }
  int scan(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m,
           MPI_Request* q) const {
    if (q) return pmpi ? PMPI_Iscan(s, r, c, t, o, m, q) : MPI_Iscan(s, r, c, t, o, m, q);
    return pmpi ? PMPI_Scan(s, r, c, t, o, m) : MPI_Scan(s, r, c, t, o, m);
  }
  // Completion.
  int wait(MPI_Request* q) const {
    return pmpi ? PMPI_Wait(q, MPI_STATUS_IGNORE) : MPI_Wait(q, MPI_STATUS_IGNORE);
  }
  int test(MPI_Request* q, int* f) const {
    return pmpi ? PMPI_Test(q, f, MPI_STATUS_IGNORE) : MPI_Test(q, f, MPI_STATUS_IGNORE);
  }
  int waitall(int n, MPI_Request* q) const {
    return pmpi ? PMPI_Waitall(n, q, MPI_STATUSES_IGNORE) : MPI_Waitall(n, q, MPI_STATUSES_IGNORE);
  }
  int testall(int n, MPI_Request* q, int* f) const {
    return pmpi ? PMPI_Testall(n, q, f, MPI_STATUSES_IGNORE)
                : MPI_Testall(n, q, f, MPI_STATUSES_IGNORE);
  }
  int waitany(int n, MPI_Request* q, int* i) const {
    return pmpi ? PMPI_Waitany(n, q, i, MPI_STATUS_IGNORE)
                : MPI_Waitany(n, q, i, MPI_STATUS_IGNORE);
  }
  int testany(int n, MPI_Request* q, int* i, int* f) const {
    return pmpi ? PMPI_Testany(n, q, i, f, MPI_STATUS_IGNORE)
                : MPI_Testany(n, q, i, f, MPI_STATUS_IGNORE);
  }
  int waitsome(int n, MPI_Request* q, int* out, int* idx) const {
    return pmpi ? PMPI_Waitsome(n, q, out, idx, MPI_STATUSES_IGNORE)
                : MPI_Waitsome(n, q, out, idx, MPI_STATUSES_IGNORE);
  }
  int testsome(int n, MPI_Request* q, int* out, int* idx) const {
    return pmpi ? PMPI_Testsome(n, q, out, idx, MPI_STATUSES_IGNORE)
                : MPI_Testsome(n, q, out, idx, MPI_STATUSES_IGNORE);
  }
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(
      stderr, "MISMATCH rank %d seed %lu program %d: %s (replay: --seed %lu --programs %d)\n",
      world_rank, current_seed, current_program, what.c_str(), current_seed, current_program + 1);
  std::fflush(stderr);
  PMPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

void check(int code, const char* call) {
  if (code != MPI_SUCCESS) fail(std::string(call) + " returned an error");
}

void on_deadline(int) {
  char line[256];
  const int n = std::snprintf(line, sizeof line,
                              "HANG rank %d seed %lu program %d at %s (op %d, %s) (replay: "
                              "--seed %lu --programs %d)\n",
                              world_rank, current_seed, current_program, current_step, current_op,
                              current_pass, current_seed, current_program + 1);
  if (n > 0) (void)!write(2, line, static_cast<std::size_t>(n));
  _exit(3);
}

// ---- element types and datatype forms ----

struct Base {
  MPI_Datatype type;
  int size;
  bool integer;
  const char* name;
};
const Base kBases[] = {
    {MPI_INT, 4, true, "MPI_INT"},
    {MPI_LONG_LONG, 8, true, "MPI_LONG_LONG"},
    {MPI_DOUBLE, 8, false, "MPI_DOUBLE"},
    {MPI_FLOAT, 4, false, "MPI_FLOAT"},
    {MPI_UNSIGNED_CHAR, 1, true, "MPI_UNSIGNED_CHAR"},
    {MPI_SHORT, 2, true, "MPI_SHORT"},
};
constexpr int kBaseCount = sizeof kBases / sizeof kBases[0];

// How `n` elements of a base type are described to MPI: the type signature is n x base in
// every form, the memory layout differs.
enum class Form { predefined, contiguous, vector, reversed, pairs, resized, count_ };
constexpr int kFormCount = static_cast<int>(Form::count_);
const char* form_name(Form f) {
  static const char* names[] = {"predefined", "contiguous", "vector",
                                "reversed",   "pairs",      "resized"};
  return names[static_cast<int>(f)];
}

struct Described {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int count = 0;
  bool derived = false;
};

// A datatype and count for `n` elements of `base` in form `f`; the caller frees derived types.
Described describe(Form f, const Base& base, int n) {
  Described d{base.type, n, false};
  MPI_Datatype t = MPI_DATATYPE_NULL;
  switch (f) {
    case Form::predefined:
      return d;
    case Form::contiguous:  // pairs of elements as one datatype element where n is even
      if (n % 2 == 0) {
        PMPI_Type_contiguous(2, base.type, &t);
        d = {t, n / 2, true};
      } else {
        PMPI_Type_contiguous(std::max(n, 1), base.type, &t);
        d = {t, n > 0 ? 1 : 0, true};
      }
      break;
    case Form::vector:  // every other slot
      PMPI_Type_vector(std::max(n, 1), 1, 2, base.type, &t);
      d = {t, n > 0 ? 1 : 0, true};
      break;
    case Form::reversed: {  // one element per block, the typemap in reverse memory order
      const int m = std::max(n, 1);
      std::vector<int> lengths(static_cast<std::size_t>(m), 1), displacements;
      for (int i = 0; i < m; ++i)
        displacements.push_back(m - 1 - i);
      PMPI_Type_indexed(m, lengths.data(), displacements.data(), base.type, &t);
      d = {t, n > 0 ? 1 : 0, true};
      break;
    }
    case Form::pairs: {  // two elements per datatype element, the second first in memory
      if (n % 2 != 0) return describe(Form::vector, base, n);
      const int lengths[2] = {1, 1};
      const MPI_Aint displacements[2] = {base.size, 0};
      const MPI_Datatype types[2] = {base.type, base.type};
      MPI_Datatype s = MPI_DATATYPE_NULL;
      PMPI_Type_create_struct(2, lengths, displacements, types, &s);
      PMPI_Type_create_resized(s, 0, 2 * base.size, &t);
      PMPI_Type_free(&s);
      d = {t, n / 2, true};
      break;
    }
    case Form::resized:  // elements 3 slots apart, starting one slot in
      PMPI_Type_create_resized(base.type, -base.size, 3 * base.size, &t);
      d = {t, n, true};
      break;
    default:
      return d;
  }
  PMPI_Type_commit(&d.type);
  return d;
}

void release(Described& d) {
  if (d.derived && d.type != MPI_DATATYPE_NULL) PMPI_Type_free(&d.type);
}

// A buffer for `blocks` runs of `d` (each d.count elements, consecutive by extent), with a
// margin either side, filled with a pattern of `fill`.
struct Buffer {
  std::vector<unsigned char> bytes;
  MPI_Aint origin = 0;  // offset of the buffer pointer in bytes
  void* at() { return bytes.data() + origin; }
};
Buffer make_buffer(const Described& d, int blocks, unsigned char fill) {
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  PMPI_Type_get_extent(d.type, &lb, &extent);
  PMPI_Type_get_true_extent(d.type, &true_lb, &true_extent);
  const MPI_Aint elements = static_cast<MPI_Aint>(d.count) * blocks;
  const MPI_Aint span = elements > 0 ? (elements - 1) * extent + true_extent : 0;
  const MPI_Aint margin = 16;
  Buffer b;
  // The elements lie from origin + true_lb on, at least `margin` bytes in.
  b.origin = std::max<MPI_Aint>(margin - true_lb, 0);
  b.bytes.resize(static_cast<std::size_t>(b.origin + true_lb + span + margin));
  for (std::size_t i = 0; i < b.bytes.size(); ++i)
    b.bytes[i] = static_cast<unsigned char>(fill + i * 7);
  return b;
}

// Small values whose sums, products, minima and maxima are exact in every base type and for
// every rank count used.
void fill_values(const Base& base, int n, unsigned long salt, std::vector<unsigned char>& packed,
                 bool for_product) {
  packed.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(base.size), 0);
  std::mt19937_64 rng(salt);
  for (int i = 0; i < n; ++i) {
    long v = for_product ? static_cast<long>(rng() % 3) - 1 : static_cast<long>(rng() % 9);
    if (for_product && v == 0) v = 1;
    if (!base.integer || base.type == MPI_INT || base.type == MPI_LONG_LONG ||
        base.type == MPI_SHORT)
      v -= for_product ? 0 : 4;  // signed types get negative values too
    unsigned char* at = packed.data() + static_cast<std::size_t>(i) * base.size;
    if (base.type == MPI_INT) {
      const int x = static_cast<int>(v);
      std::memcpy(at, &x, 4);
    } else if (base.type == MPI_LONG_LONG) {
      const long long x = v;
      std::memcpy(at, &x, 8);
    } else if (base.type == MPI_DOUBLE) {
      const double x = static_cast<double>(v);
      std::memcpy(at, &x, 8);
    } else if (base.type == MPI_FLOAT) {
      const float x = static_cast<float>(v);
      std::memcpy(at, &x, 4);
    } else if (base.type == MPI_UNSIGNED_CHAR) {
      const unsigned char x = static_cast<unsigned char>(v & 0x7);
      std::memcpy(at, &x, 1);
    } else {
      const short x = static_cast<short>(v);
      std::memcpy(at, &x, 2);
    }
  }
}

// Writes packed values into `blocks` runs of d at the buffer (MPI places them per typemap).
void place(const std::vector<unsigned char>& packed, const Described& d, int blocks, void* at) {
  if (packed.empty() || d.count == 0) return;
  int position = 0;
  PMPI_Unpack(packed.data(), static_cast<int>(packed.size()), &position, at, d.count * blocks,
              d.type, MPI_COMM_SELF);
}

// ---- operations ----

enum class Kind {
  bcast,
  reduce,
  allreduce,
  gather,
  scatter,
  allgather,
  alltoall,
  reduce_scatter_block,
  reduce_scatter,
  barrier,
  allgatherv,
  scan,
  count_
};
constexpr int kKindCount = static_cast<int>(Kind::count_);
const char* kind_name(Kind k) {
  static const char* names[] = {"bcast",          "reduce",    "allreduce",  "gather",
                                "scatter",        "allgather", "alltoall",   "reduce_scatter_block",
                                "reduce_scatter", "barrier",   "allgatherv", "scan"};
  return names[static_cast<int>(k)];
}
bool reduces(Kind k) {
  return k == Kind::reduce || k == Kind::allreduce || k == Kind::reduce_scatter_block ||
         k == Kind::reduce_scatter || k == Kind::scan;
}

// A user-defined op (so the call passes through): a sum.
void user_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  if (*type == MPI_INT) {
    for (int i = 0; i < *len; ++i)
      static_cast<int*>(inout)[i] += static_cast<int*>(in)[i];
  }
}
MPI_Op user_sum_op = MPI_OP_NULL;

enum class OpChoice { sum, prod, min, max, band, user };
MPI_Op mpi_op(OpChoice o) {
  switch (o) {
    case OpChoice::sum:
      return MPI_SUM;
    case OpChoice::prod:
      return MPI_PROD;
    case OpChoice::min:
      return MPI_MIN;
    case OpChoice::max:
      return MPI_MAX;
    case OpChoice::band:
      return MPI_BAND;
    default:
      return user_sum_op;
  }
}

// One collective call of a program, as every rank sees it (the same on all ranks but for the
// datatype forms, which are per rank).
struct Op {
  Kind kind = Kind::barrier;
  int comm = 0;  // index into the program's communicators
  int base = 0;
  int count = 0;  // elements per block
  int root = 0;
  OpChoice op = OpChoice::sum;
  bool in_place = false;
  bool nonblocking = false;
  bool free_types_early = false;
  std::vector<int> block_counts;  // reduce_scatter: per rank; allgatherv: per rank
  // The datatype forms, per rank of the communicator: send side and receive side.
  std::vector<Form> send_form, recv_form;
};

std::string describe_op(const Op& o, int index) {
  char line[320];
  const auto forms = [&](const std::vector<Form>& f) {
    std::string s;
    for (Form x : f)
      s += std::string(s.empty() ? "" : ",") + form_name(x);
    return s;
  };
  std::snprintf(line, sizeof line, "op %d: %s%s comm %d %s x%d root %d op %d%s%s", index,
                o.nonblocking ? "I" : "", kind_name(o.kind), o.comm, kBases[o.base].name, o.count,
                o.root, static_cast<int>(o.op), o.in_place ? " in place" : "",
                o.free_types_early ? " types freed early" : "");
  return std::string(line) + " send forms " + forms(o.send_form) + " receive forms " +
         forms(o.recv_form);
}

// The buffers of one op on this rank in one pass.
struct Run {
  Buffer send, recv;
  Described send_type, recv_type;
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<int> counts, displacements;
  // Bytes of the receive buffer whose content MPI leaves undefined (an in-place
  // reduce_scatter's input past this rank's block): not compared.
  std::size_t undefined_from = 0, undefined_to = 0;
};

struct Communicators {
  std::vector<MPI_Comm> comms;  // world, a duplicate, halves, reversed order
  std::vector<int> smallest;    // each one's smallest size over the ranks (the halves differ)
  void make() {
    comms.push_back(MPI_COMM_WORLD);
    MPI_Comm c;
    PMPI_Comm_dup(MPI_COMM_WORLD, &c);
    comms.push_back(c);
    PMPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &c);
    comms.push_back(c);
    PMPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &c);
    comms.push_back(c);
    for (MPI_Comm comm : comms) {
      int size = 0, least = 0;
      PMPI_Comm_size(comm, &size);
      PMPI_Allreduce(&size, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      smallest.push_back(least);
    }
  }
  void free() {
    for (std::size_t i = 1; i < comms.size(); ++i)
      PMPI_Comm_free(&comms[i]);
    comms.clear();
  }
};

// Whether pass `calls` may use MPI_IN_PLACE as op `o` asks at this rank.
bool in_place_here(const Op& o, int rank) {
  if (!o.in_place) return false;
  if (o.kind == Kind::reduce || o.kind == Kind::gather || o.kind == Kind::scatter)
    return rank == o.root;
  return true;
}

// Starts (or runs) op `o` in one pass. `salt`: the values' seed.
void start(const Calls& calls, const Op& o, MPI_Comm comm, Run& run, unsigned long salt) {
  int rank = 0, size = 1;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  const Base& base = kBases[o.base];
  const bool in_place = in_place_here(o, rank);
  const Form sf = o.send_form[static_cast<std::size_t>(rank)];
  const Form rf = o.recv_form[static_cast<std::size_t>(rank)];
  MPI_Request* q = o.nonblocking ? &run.request : nullptr;
  const bool product = o.op == OpChoice::prod;
  std::vector<unsigned char> packed;
  const unsigned long my_salt = salt * 1000003ul + static_cast<unsigned long>(rank);
  const MPI_Op op = mpi_op(o.op);
  const int n = o.count;
  switch (o.kind) {
    case Kind::bcast: {
      run.recv_type = describe(rf, base, n);
      run.recv = make_buffer(run.recv_type, 1, 0x11);
      if (rank == o.root) {
        fill_values(base, n, salt, packed, false);
        place(packed, run.recv_type, 1, run.recv.at());
      }
      check(calls.bcast(run.recv.at(), run.recv_type.count, run.recv_type.type, o.root, comm, q),
            "bcast");
      break;
    }
    case Kind::reduce:
    case Kind::allreduce:
    case Kind::scan: {
      // A reduction names one datatype for both sides.
      run.send_type = describe(sf, base, n);
      fill_values(base, n, my_salt, packed, product);
      run.send = make_buffer(run.send_type, 1, 0x22);
      run.recv = make_buffer(run.send_type, 1, 0x33);
      const void* s = run.send.at();
      if (in_place) {
        place(packed, run.send_type, 1, run.recv.at());
        s = MPI_IN_PLACE;
      } else {
        place(packed, run.send_type, 1, run.send.at());
      }
      const MPI_Datatype t = run.send_type.type;
      const int c = run.send_type.count;
      if (o.kind == Kind::reduce)
        check(calls.reduce(s, run.recv.at(), c, t, op, o.root, comm, q), "reduce");
      else if (o.kind == Kind::allreduce)
        check(calls.allreduce(s, run.recv.at(), c, t, op, comm, q), "allreduce");
      else
        check(calls.scan(s, run.recv.at(), c, t, op, comm, q), "scan");
      break;
    }
    case Kind::reduce_scatter_block:
    case Kind::reduce_scatter: {
      // One datatype for both sides; per-rank forms differ (the signature is the same).
      int total = 0;
      run.counts.assign(static_cast<std::size_t>(size), n);
      if (o.kind == Kind::reduce_scatter)
        run.counts.assign(o.block_counts.begin(), o.block_counts.begin() + size);
      for (int c : run.counts)
        total += c;
      const int mine = run.counts[static_cast<std::size_t>(rank)];
      run.send_type = describe(sf, base, 1);
      run.recv_type = describe(sf, base, 1);
      fill_values(base, total, my_salt, packed, product);
      run.send = make_buffer(run.send_type, total, 0x44);
      run.recv = make_buffer(run.recv_type, in_place ? total : std::max(mine, 1), 0x55);
      const void* s = run.send.at();
      if (in_place) {
        place(packed, run.recv_type, total, run.recv.at());
        s = MPI_IN_PLACE;
        // Only this rank's block is the result; the rest of the input MPI may overwrite.
        run.undefined_from = static_cast<std::size_t>(run.recv.origin) +
                             static_cast<std::size_t>(mine) * static_cast<std::size_t>(base.size);
        run.undefined_to = static_cast<std::size_t>(run.recv.origin) +
                           static_cast<std::size_t>(total) * static_cast<std::size_t>(base.size);
      } else {
        place(packed, run.send_type, total, run.send.at());
      }
      if (o.kind == Kind::reduce_scatter_block)
        check(calls.reduce_scatter_block(s, run.recv.at(), n, run.send_type.type, op, comm, q),
              "reduce_scatter_block");
      else
        check(calls.reduce_scatter(s, run.recv.at(), run.counts.data(), run.send_type.type, op,
                                   comm, q),
              "reduce_scatter");
      break;
    }
    case Kind::gather: {
      const bool is_root = rank == o.root;
      run.send_type = describe(sf, base, n);
      run.send = make_buffer(run.send_type, 1, 0x66);
      fill_values(base, n, my_salt, packed, false);
      place(packed, run.send_type, 1, run.send.at());
      if (is_root) {
        run.recv_type = describe(rf, base, n);
        run.recv = make_buffer(run.recv_type, size, 0x77);
        if (in_place) {
          MPI_Aint lb, extent;
          PMPI_Type_get_extent(run.recv_type.type, &lb, &extent);
          place(packed, run.recv_type, 1,
                static_cast<char*>(run.recv.at()) + extent * run.recv_type.count * rank);
        }
      }
      check(calls.gather(in_place ? MPI_IN_PLACE : run.send.at(), run.send_type.count,
                         run.send_type.type, is_root ? run.recv.at() : nullptr,
                         is_root ? run.recv_type.count : 0,
                         is_root ? run.recv_type.type : MPI_DATATYPE_NULL, o.root, comm, q),
            "gather");
      break;
    }
    case Kind::scatter: {
      const bool is_root = rank == o.root;
      run.recv_type = describe(rf, base, n);
      run.recv = make_buffer(run.recv_type, 1, 0x88);
      if (is_root) {
        run.send_type = describe(sf, base, n);
        run.send = make_buffer(run.send_type, size, 0x99);
        fill_values(base, n * size, my_salt, packed, false);
        place(packed, run.send_type, size, run.send.at());
      }
      check(calls.scatter(is_root ? run.send.at() : nullptr, is_root ? run.send_type.count : 0,
                          is_root ? run.send_type.type : MPI_DATATYPE_NULL,
                          in_place ? MPI_IN_PLACE : run.recv.at(), run.recv_type.count,
                          run.recv_type.type, o.root, comm, q),
            "scatter");
      break;
    }
    case Kind::allgather:
    case Kind::alltoall: {
      const bool all = o.kind == Kind::alltoall;
      run.send_type = describe(sf, base, n);
      run.recv_type = describe(rf, base, n);
      run.send = make_buffer(run.send_type, all ? size : 1, 0xaa);
      run.recv = make_buffer(run.recv_type, size, 0xbb);
      fill_values(base, all ? n * size : n, my_salt, packed, false);
      if (in_place) {
        MPI_Aint lb, extent;
        PMPI_Type_get_extent(run.recv_type.type, &lb, &extent);
        if (all)
          place(packed, run.recv_type, size, run.recv.at());
        else
          place(packed, run.recv_type, 1,
                static_cast<char*>(run.recv.at()) + extent * run.recv_type.count * rank);
      } else {
        place(packed, run.send_type, all ? size : 1, run.send.at());
      }
      const void* s = in_place ? MPI_IN_PLACE : run.send.at();
      if (all)
        check(calls.alltoall(s, run.send_type.count, run.send_type.type, run.recv.at(),
                             run.recv_type.count, run.recv_type.type, comm, q),
              "alltoall");
      else
        check(calls.allgather(s, run.send_type.count, run.send_type.type, run.recv.at(),
                              run.recv_type.count, run.recv_type.type, comm, q),
              "allgather");
      break;
    }
    case Kind::allgatherv: {
      run.send_type =
          describe(Form::predefined, base, o.block_counts[static_cast<std::size_t>(rank)]);
      run.recv_type = describe(Form::predefined, base, 1);
      int total = 0;
      run.counts.assign(o.block_counts.begin(), o.block_counts.begin() + size);
      for (int c : run.counts) {
        run.displacements.push_back(total);
        total += c;
      }
      run.send = make_buffer(run.send_type, 1, 0xcc);
      run.recv = make_buffer(run.recv_type, total, 0xdd);
      fill_values(base, run.send_type.count, my_salt, packed, false);
      place(packed, run.send_type, 1, run.send.at());
      check(calls.allgatherv(run.send.at(), run.send_type.count, run.send_type.type, run.recv.at(),
                             run.counts.data(), run.displacements.data(), run.recv_type.type, comm,
                             q),
            "allgatherv");
      break;
    }
    case Kind::barrier:
      check(calls.barrier(comm, q), "barrier");
      break;
    default:
      break;
  }
  if (o.free_types_early || !o.nonblocking) {
    release(run.send_type);
    release(run.recv_type);
  }
}

void finish_types(Run& run) {
  release(run.send_type);
  release(run.recv_type);
}

// Completes the requests `requests` (indices into runs) with one of the completion functions.
void complete(const Calls& calls, std::vector<Run*>& runs, int how) {
  std::vector<MPI_Request> q;
  for (Run* r : runs)
    q.push_back(r->request);
  const int n = static_cast<int>(q.size());
  int flag = 0, index = 0, out = 0;
  std::vector<int> indices(q.size() + 1);
  switch (how % 8) {
    case 0:
      for (auto& r : q)
        check(calls.wait(&r), "MPI_Wait");
      break;
    case 1:
      check(calls.waitall(n, q.data()), "MPI_Waitall");
      break;
    case 2:
      for (int k = 0; k < n; ++k)
        check(calls.waitany(n, q.data(), &index), "MPI_Waitany");
      break;
    case 3:
      do {
        check(calls.waitsome(n, q.data(), &out, indices.data()), "MPI_Waitsome");
      } while (out != MPI_UNDEFINED);
      break;
    case 4:
      for (auto& r : q) {
        do {
          check(calls.test(&r, &flag), "MPI_Test");
        } while (!flag);
      }
      break;
    case 5:
      do {
        check(calls.testall(n, q.data(), &flag), "MPI_Testall");
      } while (!flag);
      break;
    case 6:
      for (;;) {
        check(calls.testany(n, q.data(), &index, &flag), "MPI_Testany");
        if (flag && index == MPI_UNDEFINED) break;
      }
      break;
    default:
      do {
        check(calls.testsome(n, q.data(), &out, indices.data()), "MPI_Testsome");
      } while (out != MPI_UNDEFINED);
      break;
  }
  for (Run* r : runs) {
    r->request = MPI_REQUEST_NULL;
    finish_types(*r);
  }
}

// A program: ops in order, nonblocking ones started in batches whose starts interleave
// differently on each rank (per communicator the order holds, as MPI requires), completed
// after a later step.
struct Program {
  std::vector<Op> ops;
  // Steps: a batch of op indices started together, completed after `complete_after` more
  // steps with function `how` (chosen per rank).
  struct Step {
    std::vector<int> ops;
    int complete_after = 0;
  };
  std::vector<Step> steps;
};

// A random legal op on communicator `comm`, the same on every rank: its root below the
// communicator's smallest size over the ranks (`least`), and per-rank lists for as many ranks
// as the world has, so that every rank draws the same numbers.
Op random_op(std::mt19937_64& rng, int comm, int least, int max_count) {
  const int size = world_size;
  Op o;
  o.comm = comm;
  const int roll = static_cast<int>(rng() % 100);
  o.kind = static_cast<Kind>(roll < 92 ? roll % 10 : 10 + roll % 2);
  o.base = static_cast<int>(rng() % kBaseCount);
  static const int counts[] = {0, 1, 2, 3, 4, 7, 16, 64, 100, 1000, 4096};
  o.count = counts[rng() % (sizeof counts / sizeof counts[0])];
  if (rng() % 16 == 0) o.count = std::min(max_count, 50000 + static_cast<int>(rng() % 1000));
  o.count = std::min(o.count, max_count);
  o.root = static_cast<int>(rng() % static_cast<unsigned long>(least));
  const bool integer = kBases[o.base].integer;
  const int op_roll = static_cast<int>(rng() % 12);
  o.op = op_roll < 4                                                           ? OpChoice::sum
         : op_roll < 6                                                         ? OpChoice::min
         : op_roll < 8                                                         ? OpChoice::max
         : op_roll < 9                                                         ? OpChoice::prod
         : op_roll < 10 && integer && kBases[o.base].type != MPI_UNSIGNED_CHAR ? OpChoice::band
                                                                               : OpChoice::sum;
  if (op_roll == 11 && kBases[o.base].type == MPI_INT) o.op = OpChoice::user;
  if (o.kind == Kind::scan && o.op == OpChoice::user) o.op = OpChoice::sum;
  o.in_place = rng() % 4 == 0;
  if (o.kind == Kind::scan || o.kind == Kind::allgatherv || o.kind == Kind::bcast ||
      o.kind == Kind::barrier)
    o.in_place = false;
  if (reference_lacks_in_place_reduce && o.kind == Kind::reduce && o.root != 0) o.in_place = false;
  o.nonblocking = rng() % 2 == 0;
  o.free_types_early = o.nonblocking && rng() % 2 == 0;
  if (o.kind == Kind::reduce_scatter || o.kind == Kind::allgatherv) {
    for (int r = 0; r < size; ++r)
      o.block_counts.push_back(rng() % 4 == 0 ? 0 : static_cast<int>(rng() % 40));
  }
  // Reductions take predefined datatypes (MPI's predefined ops are defined on those only, and
  // Open MPI refuses others); data movement: each rank its own form of the one signature.
  for (int r = 0; r < size; ++r) {
    if (reduces(o.kind)) {
      o.send_form.push_back(Form::predefined);
      o.recv_form.push_back(Form::predefined);
    } else {
      o.send_form.push_back(static_cast<Form>(rng() % kFormCount));
      o.recv_form.push_back(static_cast<Form>(rng() % kFormCount));
    }
  }
  return o;
}

Program random_program(unsigned long seed, int program, const Communicators& c, int max_count) {
  std::mt19937_64 rng(seed * 7919ul + static_cast<unsigned long>(program));
  Program p;
  const int steps = 4 + static_cast<int>(rng() % 10);
  for (int s = 0; s < steps; ++s) {
    Program::Step step;
    const int in_batch = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < in_batch; ++k) {
      const int comm = static_cast<int>(rng() % c.comms.size());
      Op o = random_op(rng, comm, c.smallest[static_cast<std::size_t>(comm)], max_count);
      if (in_batch > 1) o.nonblocking = true;  // several in a step: started together
      step.ops.push_back(static_cast<int>(p.ops.size()));
      p.ops.push_back(o);
    }
    step.complete_after = static_cast<int>(rng() % 3);
    p.steps.push_back(step);
  }
  return p;
}

// The comm indices of a program are the same on every rank, but the split halves hold
// different ranks: an op's forms are indexed by the rank in its communicator.

struct Outcome {
  std::vector<std::unique_ptr<Run>> runs;
};

// Runs program `p` in one pass.
Outcome run_program(const Calls& calls, const Program& p, const Communicators& c,
                    unsigned long salt) {
  Outcome out;
  current_pass = calls.pmpi ? "the MPI's own pass" : "the MPI_ names' pass";
  for (std::size_t i = 0; i < p.ops.size(); ++i)
    out.runs.push_back(std::make_unique<Run>());
  std::mt19937_64 local(salt * 31ul + static_cast<unsigned long>(world_rank) * 131ul +
                        (calls.pmpi ? 1 : 0));
  struct Open {
    std::vector<int> ops;
    int left;
    int how;
  };
  std::vector<Open> open;
  for (const Program::Step& step : p.steps) {
    // Start this step's ops: per communicator in program order, the communicators' turns
    // interleaved at random on each rank.
    std::vector<int> order = step.ops;
    for (std::size_t k = order.size(); k > 1; --k)
      std::swap(order[k - 1], order[local() % k]);
    // Each slot of the shuffled order takes the next op of its communicator.
    std::vector<int> per_comm_next(c.comms.size(), 0);
    std::vector<std::vector<int>> queues(c.comms.size());
    for (int i : step.ops)
      queues[static_cast<std::size_t>(p.ops[static_cast<std::size_t>(i)].comm)].push_back(i);
    std::vector<int> issue;
    for (int i : order) {
      const auto q = static_cast<std::size_t>(p.ops[static_cast<std::size_t>(i)].comm);
      issue.push_back(queues[q][static_cast<std::size_t>(per_comm_next[q]++)]);
    }
    Open batch{{}, step.complete_after, static_cast<int>(local() % 8)};
    for (int i : issue) {
      const Op& o = p.ops[static_cast<std::size_t>(i)];
      current_step = kind_name(o.kind);
      current_op = i;
      start(calls, o, c.comms[static_cast<std::size_t>(o.comm)],
            *out.runs[static_cast<std::size_t>(i)],
            salt * 1315423911ul + static_cast<unsigned long>(i));
      if (o.nonblocking) batch.ops.push_back(i);
    }
    if (!batch.ops.empty()) open.push_back(batch);
    // Complete the batches whose turn has come.
    for (auto it = open.begin(); it != open.end();) {
      if (it->left-- <= 0) {
        std::vector<Run*> runs;
        for (int i : it->ops)
          runs.push_back(out.runs[static_cast<std::size_t>(i)].get());
        current_step = "completion";
        current_op = it->ops.front();
        complete(calls, runs, it->how);
        it = open.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Open& b : open) {
    std::vector<Run*> runs;
    for (int i : b.ops)
      runs.push_back(out.runs[static_cast<std::size_t>(i)].get());
    current_step = "final completion";
    complete(calls, runs, b.how);
  }
  return out;
}

void compare(const Program& p, Outcome& collx, Outcome& mpi) {
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    Run& a = *collx.runs[i];
    Run& b = *mpi.runs[i];
    for (std::size_t k = a.undefined_from; k < a.undefined_to && k < a.recv.bytes.size(); ++k)
      a.recv.bytes[k] = b.recv.bytes[k] = 0;
    if (a.recv.bytes != b.recv.bytes) {
      std::size_t at = 0;
      while (at < a.recv.bytes.size() && at < b.recv.bytes.size() &&
             a.recv.bytes[at] == b.recv.bytes[at])
        ++at;
      fail(describe_op(p.ops[i], static_cast<int>(i)) +
           ": receive buffer differs from MPI's at byte " + std::to_string(at) + " of " +
           std::to_string(a.recv.bytes.size()));
    }
    if (a.send.bytes != b.send.bytes)
      fail(describe_op(p.ops[i], static_cast<int>(i)) + ": send buffer differs from MPI's");
  }
}

// ---- the fixed patterns ----

std::vector<Program> pattern_programs() {
  std::vector<Program> programs;
  const int size = world_size;
  const Kind kinds[] = {
      Kind::bcast,          Kind::reduce,    Kind::allreduce, Kind::gather,
      Kind::scatter,        Kind::allgather, Kind::alltoall,  Kind::reduce_scatter_block,
      Kind::reduce_scatter, Kind::barrier};
  for (Kind kind : kinds) {
    for (int pattern = 0; pattern < 6; ++pattern) {
      for (int blocking = 0; blocking < 2; ++blocking) {
        for (int root : {0, size - 1}) {
          Program p;
          Op o;
          o.kind = kind;
          o.comm = 0;
          o.base = kind == Kind::reduce || kind == Kind::allreduce ||
                           kind == Kind::reduce_scatter || kind == Kind::reduce_scatter_block
                       ? 0
                       : 2;  // MPI_INT for reductions, MPI_DOUBLE for data movement
          o.count = pattern == 3 ? 0 : 5;
          o.root = root;
          o.nonblocking = blocking == 0;
          o.free_types_early = pattern == 4 && o.nonblocking;
          o.in_place = pattern == 2;
          for (int r = 0; r < size; ++r) {
            Form f = Form::predefined;
            if (pattern == 0 && r == root) f = Form::vector;  // derived at the root only
            if (pattern == 1 && r != root) f = Form::vector;  // derived elsewhere only
            if (pattern == 4 || pattern == 5) f = r % 2 ? Form::reversed : Form::pairs;
            if (reduces(kind)) f = Form::predefined;
            o.send_form.push_back(f);
            o.recv_form.push_back(pattern == 5 ? Form::resized : f);
          }
          if (kind == Kind::reduce_scatter) {
            for (int r = 0; r < size; ++r)  // zero counts on some ranks
              o.block_counts.push_back(pattern == 3 ? (r % 2 ? 0 : 3) : r + 1);
          }
          p.ops.push_back(o);
          // A second op on a duplicate: the first one's sequence must not leak into it.
          Op next = o;
          next.comm = 1;
          next.free_types_early = false;
          next.kind = Kind::allreduce;
          next.base = 0;
          next.count = 3;
          next.in_place = false;
          next.send_form.assign(static_cast<std::size_t>(size), Form::predefined);
          next.recv_form = next.send_form;
          next.block_counts.clear();
          p.ops.push_back(next);
          // Nonblocking, both start together (in either order on each rank); blocking, one
          // after the other, as MPI requires of blocking calls on different communicators.
          if (o.nonblocking) {
            p.steps.push_back({{0, 1}, 0});
          } else {
            p.steps.push_back({{0}, 0});
            p.steps.push_back({{1}, 0});
          }
          programs.push_back(std::move(p));
        }
      }
    }
  }
  return programs;
}

// The error path: allreduces whose counts differ by rank (an erroneous program, which collx's
// checking mode, COLLX_CHECK=1, reports on every rank) under MPI_ERRORS_RETURN, many times over:
// every call returns an error code whose string carries collx's reason, none aborts, and the
// communicator stays usable.
void error_path() {
  MPI_Comm comm;
  PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
  PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  for (int i = 0; i < 300; ++i) {
    current_step = "a mismatched allreduce";
    std::vector<int> in(static_cast<std::size_t>(1 + world_rank + i % 5), 1), out(in.size());
    const int code =
        MPI_Allreduce(in.data(), out.data(), static_cast<int>(in.size()), MPI_INT, MPI_SUM, comm);
    if (code == MPI_SUCCESS) fail("a mismatched allreduce returned MPI_SUCCESS");
    char message[MPI_MAX_ERROR_STRING] = {};
    int length = 0, error_class = 0;
    if (PMPI_Error_string(code, message, &length) != MPI_SUCCESS ||
        PMPI_Error_class(code, &error_class) != MPI_SUCCESS)
      fail("MPI_Error_string or MPI_Error_class refused the code " + std::to_string(code));
    if (std::strstr(message, "collx") == nullptr)
      fail(std::string("the error string does not carry collx's reason: ") + message);
    if (i == 0 && world_rank == 0) std::printf("conformance: error string: %s\n", message);
  }
  current_step = "an allreduce after the errors";
  int one = 1, sum = 0;
  check(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm), "MPI_Allreduce after the errors");
  if (sum != world_size) fail("the allreduce after the errors is wrong");
  PMPI_Comm_free(&comm);
}

// A communicator the program frees while nonblocking calls on it are in flight (MPI lets them
// complete): an allreduce and a broadcast on a duplicate, the duplicate freed, then the waits;
// the results against the values they must have (not against the MPI library's own calls:
// Open MPI 4.1's libnbc segfaults in this program at 4 ranks and more).
void freed_communicator(const Calls& calls, std::vector<int>& sums, std::vector<double>& values) {
  MPI_Comm comm;
  PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
  check(calls.barrier(comm, nullptr), "barrier");  // collx's state of the duplicate is made
  std::vector<int> mine(1000);
  for (std::size_t i = 0; i < mine.size(); ++i)
    mine[i] = world_rank * 7 + static_cast<int>(i % 13);
  sums.assign(mine.size(), 0);
  values.assign(500, world_rank == 0 ? 0.0 : -1.0);
  if (world_rank == 0)
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = 0.5 * static_cast<double>(i);
  MPI_Request requests[2];
  check(calls.allreduce(mine.data(), sums.data(), static_cast<int>(mine.size()), MPI_INT, MPI_SUM,
                        comm, &requests[0]),
        "allreduce");
  check(calls.bcast(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, 0, comm,
                    &requests[1]),
        "bcast");
  PMPI_Comm_free(&comm);
  current_step = "the waits on a freed communicator";
  check(calls.waitall(2, requests), "MPI_Waitall");
}

void agree_on_interceptions() {
  using Statistics = void (*)(long*, long*);
  auto* statistics = reinterpret_cast<Statistics>(dlsym(RTLD_DEFAULT, "collx_mpi_statistics"));
  long intercepted = 0, passed = 0;
  if (statistics) statistics(&intercepted, &passed);
  long mine[2] = {intercepted, -intercepted}, extremes[2] = {0, 0};
  PMPI_Allreduce(mine, extremes, 2, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (extremes[0] != -extremes[1])
    fail("ranks intercepted different numbers of calls (" + std::to_string(extremes[0]) + " and " +
         std::to_string(-extremes[1]) + ")");
  if (world_rank == 0)
    std::printf("conformance: %s, %ld calls intercepted, %ld passed through per rank\n",
                statistics ? "libcollx_mpi loaded" : "no libcollx_mpi", intercepted, passed);
}

}  // namespace

int main(int argc, char** argv) {
  bool patterns = false;
  bool errors = false;
  bool print = false;
  unsigned long seed = 1;
  int programs = 10;
  int first_program = 0;
  int deadline = 120;
  int max_count = 60000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--patterns")
      patterns = true;
    else if (a == "--errors")
      errors = true;
    else if (a == "--print")
      print = true;
    else if (a == "--seed")
      seed = std::strtoul(next(), nullptr, 10);
    else if (a == "--programs")
      programs = std::atoi(next());
    else if (a == "--first")
      first_program = std::atoi(next());
    else if (a == "--deadline")
      deadline = std::atoi(next());
    else if (a == "--max-count")
      max_count = std::atoi(next());
  }
  MPI_Init(&argc, &argv);
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
  PMPI_Op_create(user_sum, 1, &user_sum_op);
  {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    PMPI_Get_library_version(version, &length);
    reference_lacks_in_place_reduce = std::strstr(version, "MPICH Version:\t4.0") != nullptr ||
                                      std::strstr(version, "MPICH Version:      4.0") != nullptr;
  }
  signal(SIGALRM, on_deadline);
  alarm(static_cast<unsigned>(deadline));
  current_seed = seed;
  Communicators comms;
  comms.make();
  long ops = 0;
  int count = 0;
  if (errors) {
    error_path();
  } else if (patterns) {
    std::vector<int> sums;
    std::vector<double> values;
    current_step = "a freed communicator";
    freed_communicator(Calls{false}, sums, values);
    for (std::size_t i = 0; i < sums.size(); ++i)
      if (sums[i] != 7 * world_size * (world_size - 1) / 2 + world_size * static_cast<int>(i % 13))
        fail("an allreduce on a communicator freed before its wait: a wrong sum");
    for (std::size_t i = 0; i < values.size(); ++i)
      if (values[i] != 0.5 * static_cast<double>(i))
        fail("a broadcast on a communicator freed before its wait: a wrong value");
    std::vector<Program> list = pattern_programs();
    for (std::size_t k = 0; k < list.size(); ++k) {
      current_program = static_cast<int>(k);
      Outcome a = run_program(Calls{false}, list[k], comms, k + 1);
      Outcome b = run_program(Calls{true}, list[k], comms, k + 1);
      compare(list[k], a, b);
      ops += static_cast<long>(list[k].ops.size());
      ++count;
    }
  } else {
    for (int k = first_program; k < programs; ++k) {
      current_program = k;
      const Program p = random_program(seed, k, comms, max_count);
      if (print && world_rank == 0) {
        for (std::size_t s = 0; s < p.steps.size(); ++s) {
          std::printf("program %d step %zu (completed after %d more):\n", k, s,
                      p.steps[s].complete_after);
          for (int i : p.steps[s].ops)
            std::printf("  %s\n", describe_op(p.ops[static_cast<std::size_t>(i)], i).c_str());
        }
      }
      const unsigned long salt = seed * 100003ul + static_cast<unsigned long>(k);
      Outcome a = run_program(Calls{false}, p, comms, salt);
      Outcome b = run_program(Calls{true}, p, comms, salt);
      compare(p, a, b);
      ops += static_cast<long>(p.ops.size());
      ++count;
    }
  }
  current_step = "the statistics";
  agree_on_interceptions();
  comms.free();
  PMPI_Op_free(&user_sum_op);
  alarm(0);
  if (world_rank == 0)
    std::printf(
        "conformance: OK, %d programs, %ld collective calls compared (seed %lu, %d ranks)\n", count,
        ops, seed, world_size);
  MPI_Finalize();
  return 0;
}
