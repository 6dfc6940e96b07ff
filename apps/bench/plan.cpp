#include "plan.hpp"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>

#include "bench_buffers.hpp"
#include "bench_device.hpp"
#include "cli_numbers.hpp"
#include "mpi_reference.hpp"

namespace collx::bench {

using collx::apps::parse_size;
using collx::apps::size_error;

namespace {

// The MPI library's own call timed a second time, as a row of its own (interleaved with the
// others like any row): its vs_mpi is what the bench reads between two identical calls on this
// machine, the noise every other row's vs_mpi carries.
constexpr const char* kMpiAgain = "mpi_again";

std::vector<Column> parse_columns(const std::string& list, Collective collective) {
  std::vector<Column> columns;
  std::stringstream stream(list);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.empty()) continue;
    if (item == "all") {
      for (Algorithm a : collx::algorithms_of(collective)) {
        columns.push_back({std::string(collx::to_string(a)), false, a});
      }
      columns.push_back({"auto", false, Algorithm::automatic});
      columns.push_back({"mpi", true, Algorithm::automatic});
      columns.push_back({"memcpy", false, Algorithm::automatic, true});
      continue;
    }
    if (item == "mpi") {
      columns.push_back({"mpi", true, Algorithm::automatic});
      continue;
    }
    if (item == kMpiAgain) {
      columns.push_back({kMpiAgain, true, Algorithm::automatic});
      continue;
    }
    if (item == "memcpy") {
      columns.push_back({"memcpy", false, Algorithm::automatic, true});
      continue;
    }
    const auto algorithm = collx::parse_algorithm(item);
    if (!algorithm ||
        (*algorithm != Algorithm::automatic && !collx::implements(collective, *algorithm))) {
      throw CLI::ValidationError("-a", "\"" + item + "\" is not an algorithm of " +
                                           std::string(collx::to_string(collective)));
    }
    columns.push_back(
        {std::string(*algorithm == Algorithm::automatic ? "auto" : collx::to_string(*algorithm)),
         false, *algorithm});
  }
  // Each column once, in the order given.
  std::vector<Column> unique;
  for (const auto& c : columns) {
    if (std::none_of(unique.begin(), unique.end(),
                     [&](const Column& u) { return u.name == c.name; })) {
      unique.push_back(c);
    }
  }
  if (unique.empty()) throw CLI::ValidationError("-a", "no algorithm given");
  return unique;
}

constexpr std::size_t kMaxLlc = std::size_t{2} << 30;  // --llc

// --transport's list, each once, into `transports`; "" or why not.
std::string parse_transports(const std::string& list_text, std::vector<std::string>& transports) {
  std::stringstream list(list_text);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item.empty()) continue;
    const auto& offered = collx::build_info().transports;
    if (item != "mpi" && item != "ucx") return "unknown transport \"" + item + "\"";
    if (std::find(offered.begin(), offered.end(), item) == offered.end()) {
      return "--transport " + item + ": this build of collx has no " + item +
             " transport (configure with -DCOLLX_UCX=ON where libucx-dev is installed)";
    }
    if (std::find(transports.begin(), transports.end(), item) == transports.end()) {
      transports.push_back(item);
    }
  }
  return "";
}

}  // namespace

std::string make_plan(const Settings& s, Plan& plan) {
  const auto collective = collx::parse_collective(s.collective_name);
  const auto type = collx::parse_datatype(s.type);
  const auto op = collx::parse_reduce_op(s.op);
  const auto min_bytes = parse_size(s.min_bytes);
  const auto max_bytes = parse_size(s.max_bytes);
  if (!collective) return "unknown collective \"" + s.collective_name + "\"";
  if (!type) return "unknown datatype \"" + s.type + "\"";
  if (!op) return "unknown op \"" + s.op + "\"";
  if (!min_bytes) return size_error("-b", s.min_bytes);
  if (!max_bytes) return size_error("-e", s.max_bytes);
  if (*min_bytes > *max_bytes) {
    return "bad size range -b " + s.min_bytes + " -e " + s.max_bytes +
           ": the smallest size is larger than the largest";
  }
  plan.collective = *collective;
  plan.type = *type;
  plan.op = *op;
  plan.min_bytes = *min_bytes;
  plan.max_bytes = *max_bytes;
  try {
    plan.columns = parse_columns(s.algos, *collective);
  } catch (const CLI::ValidationError& e) {
    return e.what();
  }
  plan.device = s.memory == "device";
  if (plan.device && s.overlap_ms > 0) {
    return "--overlap measures host buffers only (not with -m device)";
  }
  if (plan.device && s.cold) return "--cold takes host buffers only (not with -m device)";
  if (plan.device && s.offset > 0) return "--offset takes host buffers only (not with -m device)";
  collx::bench::Buffer::offset_by(static_cast<std::size_t>(s.offset));
  if (std::string why = parse_transports(s.transports, plan.transports); !why.empty()) return why;
  if (plan.transports.size() > 1 && !s.tune_path.empty()) {
    return "--save-tuning takes one transport";
  }
  if (!s.smpi_shared.empty()) {
    const auto parsed = parse_size(s.smpi_shared);
    if (!parsed) return size_error("--smpi-shared", s.smpi_shared);
    if (!COLLX_SMPI) return "--smpi-shared is for builds against SimGrid's SMPI (COLLX_MPI=smpi)";
    if (s.cold) return "--smpi-shared and --cold do not go together";
    // Sizes from here up are timed, not checked: a size's largest buffer is the size column's
    // bytes (nccl-tests' convention), so no buffer of a smaller size is shared.
    collx::bench::Buffer::share_from(*parsed);
  }
  if (s.smpi_reduce_gbps > 0 && !charge_mpi_reductions(s.smpi_reduce_gbps)) {
    return "--smpi-reduce-gbps is for builds against SimGrid's SMPI (COLLX_MPI=smpi)";
  }
  if (!s.segment.empty()) {
    const auto parsed = parse_size(s.segment);
    if (!parsed) return size_error("--segment", s.segment);
    if (*parsed == 0) return "--segment 0: a segment needs at least one byte";
    plan.segment_bytes = *parsed;
  }
  if (s.cold) {
    plan.llc = last_level_cache();
    if (!s.llc.empty()) {
      const auto given = parse_size(s.llc);
      if (!given) return size_error("--llc", s.llc);
      if (*given == 0) return "--llc 0: a cache of no bytes";
      // The pool is twice the cache, every byte touched before the first call: a mistyped size
      // takes minutes (or the node's memory) to set up. No core has a last-level cache near it.
      if (*given > kMaxLlc)
        return "--llc " + s.llc + ": larger than any last-level cache (at most 2G)";
      plan.llc = {*given, "--llc"};
    }
  }
  return "";
}

std::string memory_error(const Settings& s, const Plan& plan) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local_ranks = 1;
  MPI_Comm_size(node, &local_ranks);
  MPI_Comm_free(&node);
  const double memory = static_cast<double>(collx::apps::node_memory_bytes());
  // Per rank: send, receive and the expected result (each at most the size column's bytes),
  // the memcpy row's copy; --cold: a pool of more than twice the cache, at least two sets.
  const double largest = static_cast<double>(plan.max_bytes);
  const double per_set = largest * (plan.memcpy_row() ? 3 : 2);
  const double buffers = largest * (plan.memcpy_row() ? 4 : 3);
  const double pool =
      s.cold ? std::max(2.0 * static_cast<double>(plan.llc.bytes) + per_set, 2 * per_set) : 0.0;
  const double need = (buffers + pool) * local_ranks;
  double ratio = memory > 0 ? need / memory : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ratio, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (ratio <= 1) return "";
  using collx::apps::describe_bytes;
  const bool cache = s.cold && pool > buffers;
  std::string why = cache ? "--cold --llc " + s.llc +
                                ": a pool of buffer sets larger than twice "
                                "the cache, about " +
                                describe_bytes(pool) + " per rank"
                          : "-e " + s.max_bytes + ": the buffers of the largest size need about " +
                                describe_bytes(buffers + pool) +
                                " per rank (send, receive, expected result" +
                                (plan.memcpy_row() ? ", memcpy copy" : "") +
                                (s.cold ? ", --cold's pool" : "") + ")";
  why += "; " + describe_bytes(need) + " in all for the " + std::to_string(local_ranks) + " rank" +
         (local_ranks == 1 ? "" : "s") + " on a node";
  why += memory > 0 ? ": more than its memory (" + describe_bytes(memory) + ")"
                    : ": more than a node's memory";
  return why;
}

bool device_on_every_rank(int rank, int nranks) {
  const std::string why = collx::bench::device_memory_unavailable();
  int first_failing = why.empty() ? nranks : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_failing, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first_failing == rank) {
    std::fprintf(stderr, "collx-bench (rank %d): -m device: %s\n", rank, why.c_str());
  }
  return first_failing == nranks;
}

}  // namespace collx::bench
