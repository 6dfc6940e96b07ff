#include "registry.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <vector>

#include "collx/error.hpp"

namespace collx::detail {

namespace {

struct Index {
  std::vector<AlgorithmRow> rows;
  // [collective][algorithm] -> position in rows + 1 (0: none).
  std::array<std::array<unsigned char, kAlgorithmCount>, kCollectiveCount> at{};
  // Each collective's algorithms in row order (algorithms_of), the MPI library's own collective
  // left out: not one of collx's algorithms.
  std::array<std::vector<Algorithm>, kCollectiveCount> algorithms;
};

[[gnu::noinline]] const Index& built_index() {
  static const Index built = [] {
    Index i;
    using Rows = std::span<const AlgorithmRow> (*)();
    for (Rows rows :
         {allreduce_rows, broadcast_rows, reduce_rows, allgather_rows, reduce_scatter_rows,
          gather_scatter_rows, alltoall_rows, barrier_sendrecv_rows, mpi_library_rows}) {
      for (const AlgorithmRow& r : rows()) {
        const auto c = static_cast<std::size_t>(r.collective);
        i.rows.push_back(r);
        i.at[c][static_cast<std::size_t>(r.algorithm)] = static_cast<unsigned char>(i.rows.size());
        if (!r.mpi_library) i.algorithms[c].push_back(r.algorithm);
      }
    }
    return i;
  }();
  return built;
}

// find_row is on the path of every small blocking call: after the first call, one load.
std::atomic<const Index*> built_index_pointer{nullptr};

const Index& index() {
  const Index* i = built_index_pointer.load(std::memory_order_acquire);
  if (i == nullptr) [[unlikely]] {
    i = &built_index();
    built_index_pointer.store(i, std::memory_order_release);
  }
  return *i;
}

}  // namespace

std::span<const AlgorithmRow> registry() {
  return index().rows;
}

Collective schedules_of(Collective collective) {
  return collective == Collective::reduce_scatter_v ? Collective::reduce_scatter : collective;
}

const AlgorithmRow* find_row(Collective collective, Algorithm algorithm) {
  const auto c = static_cast<std::size_t>(schedules_of(collective));
  const auto a = static_cast<std::size_t>(algorithm);
  if (c >= kCollectiveCount || a >= kAlgorithmCount) return nullptr;
  const Index& i = index();
  const unsigned position = i.at[c][a];
  return position == 0 ? nullptr : &i.rows[position - 1];
}

Algorithm library_algorithm(Collective collective) {
  return find_row(collective, Algorithm::mpi) != nullptr ? Algorithm::mpi : Algorithm::automatic;
}

void no_algorithm(Operation& op, Collective collective, Algorithm algorithm) {
  throw Error(ErrorCode::unsupported, std::string(to_string(collective)), op.transport().rank(),
              "no algorithm \"" + std::string(to_string(algorithm)) + "\"");
}

// The dispatchers composite algorithms and the entry points call (collectives.hpp).
#define COLLX_DISPATCHER(name)                                                                 \
  Task name##_task(Operation& op, const ArgsOf<Collective::name>& args, Algorithm algorithm) { \
    return run_schedule<Collective::name>(op, args, algorithm);                                \
  }
COLLX_DISPATCHER(allreduce)
COLLX_DISPATCHER(broadcast)
COLLX_DISPATCHER(reduce)
COLLX_DISPATCHER(allgather)
COLLX_DISPATCHER(reduce_scatter)
COLLX_DISPATCHER(gather)
COLLX_DISPATCHER(scatter)
COLLX_DISPATCHER(alltoall)
COLLX_DISPATCHER(barrier)
#undef COLLX_DISPATCHER

}  // namespace collx::detail

namespace collx {

std::span<const Algorithm> algorithms_of(Collective collective) {
  const auto i = static_cast<std::size_t>(detail::schedules_of(collective));
  if (i >= kCollectiveCount) return {};
  return detail::index().algorithms[i];
}

bool implements(Collective collective, Algorithm algorithm) {
  return detail::find_row(collective, algorithm) != nullptr;
}

bool runs_through_arena(Collective collective, Algorithm algorithm) {
  const detail::AlgorithmRow* row = detail::find_row(collective, algorithm);
  return row != nullptr && row->uses_arena();
}

}  // namespace collx

namespace collx::model {

namespace {

// A flat algorithm's steps wait for their slowest message: one that crosses nodes. The ring's
// neighbours are on one node but for one hop per node; the other patterns send across nodes
// from every rank of a node at once, through the node's one link.
Cost spread_flat(const detail::AlgorithmRow& row, Algorithm algorithm, const Shape& shape, Cost c) {
  if (shape.nodes > 1 && !row.cost_model->node_aware) {
    const double sharing = algorithm == Algorithm::ring ? 1 : shape.per_node;
    c.inter_messages += c.messages;
    c.inter_bytes += c.bytes * sharing;
    c.messages = 0;
    c.bytes = 0;
  }
  return c;
}

}  // namespace

std::optional<Cost> cost(Collective collective, Algorithm algorithm, int p, double bytes,
                         std::size_t segment_bytes, int nodes) {
  const detail::AlgorithmRow* row = detail::find_row(collective, algorithm);
  if (row == nullptr) return std::nullopt;
  if (p <= 1) return Cost{};
  const Shape shape = Shape::of(p, bytes, segment_bytes, nodes);
  return spread_flat(*row, algorithm, shape, row->cost_model->cost(shape));
}

std::optional<double> seconds(Collective collective, Algorithm algorithm, int p, double bytes,
                              const Machine& m) {
  const auto c = cost(collective, algorithm, p, bytes, m.segment_bytes, m.nodes);
  if (!c) return std::nullopt;
  const double one = c->seconds(m);
  const detail::AlgorithmRow* row = detail::find_row(collective, algorithm);
  if (m.calls <= 1 || p <= 1 || row->cost_model->stream == nullptr) return one;
  Shape shape = Shape::of(p, bytes, m.segment_bytes, m.nodes);
  shape.eager = static_cast<double>(m.eager_bytes);
  std::vector<Cost> busiest;
  row->cost_model->stream(shape, busiest);
  if (busiest.empty()) return one;
  double period = 0;
  for (const Cost& b : busiest)
    period = std::max(period, spread_flat(*row, algorithm, shape, b).seconds(m));
  // A call never waits longer for the previous one than that call's whole critical path.
  period = std::min(period, one);
  return (one + (m.calls - 1) * period) / m.calls;
}

bool node_aware(Collective collective, Algorithm algorithm) {
  const detail::AlgorithmRow* row = detail::find_row(collective, algorithm);
  return row != nullptr && row->node_aware();
}

std::string describe(Collective collective, Algorithm algorithm) {
  const detail::AlgorithmRow* row = detail::find_row(collective, algorithm);
  return row == nullptr ? std::string() : std::string(row->cost_model->description);
}

}  // namespace collx::model
