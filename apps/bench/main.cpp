// collx-bench: collx's algorithms against each other and against the MPI library's own
// collective, in one run, with nccl-tests' conventions (sizes, algbw, busbw, #wrong).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench_buffers.hpp"
#include "bench_collective.hpp"
#include "bench_device.hpp"
#include "cli_numbers.hpp"
#include "collx/collx.hpp"
#include "mpi_reference.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::apps::parse_size;
using collx::apps::size_error;

// An algorithm column: a collx algorithm (automatic for auto), the MPI library's call, or the
// memcpy reference (one local copy of the result buffer: the memory-bandwidth limit).
struct Column {
  std::string name;
  bool mpi = false;
  Algorithm algorithm = Algorithm::automatic;
  bool memcpy = false;
  bool collx() const { return !mpi && !memcpy; }
};

// A communicator the collx rows run on: the default one, or one per --transport.
struct Runner {
  std::string transport;  // "" without --transport
  std::unique_ptr<collx::Communicator> comm;
  std::unique_ptr<collx::bench::CollectiveBench> bench;
};

// One row per size: a column on a runner (the mpi column on the first runner only).
struct Row {
  std::string key;  // "ring", "ring@ucx", "mpi"
  Column column;
  Runner* runner = nullptr;
};

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Settings {
  std::string collective_name;
  std::string min_bytes = "8";
  std::string max_bytes = "64M";
  std::size_t factor = 2;
  std::string type = "float32";
  std::string op = "sum";
  std::string algos = "auto,mpi";
  int iters = 20;
  int warmup = 5;
  int rounds = 5;
  int check = 1;
  int root = 0;
  bool in_place = false;
  std::string json_path;
  double overlap_ms = 0;
  std::string segment;
  int depth = 0;
  std::string tune_path;
  std::string memory = "host";
  std::string transports;
  bool cold = false;
  std::string llc;
  std::string smpi_shared;
};

constexpr std::size_t kMaxLlc = std::size_t{2} << 30;  // --llc

// The last-level cache of this rank's core, for --cold: sysconf's figure, else the highest
// level sysfs lists for cpu0, else 32 MiB; with where the figure came from.
struct CacheSize {
  std::size_t bytes = 0;
  std::string source;
};
CacheSize last_level_cache() {
  const long reported = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (reported > 0) return {static_cast<std::size_t>(reported), "sysconf"};
  CacheSize best;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level");
    std::ifstream size_file(dir + "size");
    std::ifstream type_file(dir + "type");
    int level = 0;
    std::string size_text;
    std::string type;
    if (!(level_file >> level) || !(size_file >> size_text)) continue;
    type_file >> type;
    if (type == "Instruction" || level < best_level) continue;
    const auto bytes = parse_size(size_text);
    if (!bytes || *bytes == 0) continue;
    best = {*bytes, "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i)};
    best_level = level;
  }
  if (best.bytes > 0) return best;
  return {std::size_t{32} << 20, "not reported; assumed"};
}

std::string mib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// Fixed work (a dot product over a cache-resident array) calibrated to take about `ms`
// milliseconds on an idle core. Fixed work, not fixed time: a progress thread that steals
// the core makes it take longer, and that cost counts.
class Computation {
 public:
  explicit Computation(double ms) : data_(64 * 1024, 1.0f) {
    if (ms <= 0) return;
    const int trial = 200;
    const double t0 = MPI_Wtime();
    run(trial);
    const double per = (MPI_Wtime() - t0) / trial;
    passes_ = std::max(1, static_cast<int>(ms * 1e-3 / per));
  }
  void operator()() { run(passes_); }

 private:
  void run(int passes) {
    float acc = 0;
    for (int p = 0; p < passes; ++p) {
      for (float v : data_)
        acc += v * 0.5f;
    }
    sink_ = acc;
  }
  std::vector<float> data_;
  int passes_ = 0;
  volatile float sink_ = 0;
};

// Turns the fastest algorithm per measured size into table rows for this rank count (a row per
// run of sizes with the same winner, its bound the run's last size; the last row open-ended)
// and merges them into the tuning file.
void write_tuning(const std::string& path, Collective collective, int nranks,
                  const std::vector<std::pair<std::size_t, Algorithm>>& fastest,
                  std::size_t segment_bytes, int depth, const std::string& mpi_library) {
  collx::TuningFile file;
  if (std::ifstream(path).good()) file = collx::load_tuning_file(path);
  std::vector<collx::TuningRule> rules;
  for (std::size_t i = 0; i < fastest.size(); ++i) {
    const bool last = i + 1 == fastest.size();
    if (!last && fastest[i + 1].second == fastest[i].second) continue;
    rules.push_back({collective, nranks, nranks, last ? collx::kAnyBytes : fastest[i].first,
                     fastest[i].second});
  }
  collx::replace_tuning_rules(file, collective, nranks, rules);
  if (segment_bytes) file.segment_bytes = segment_bytes;
  if (depth) file.pipeline_depth = depth;
  if (file.machine.empty()) file.machine = "measured by collx-bench --save-tuning; " + mpi_library;
  collx::save_tuning_file(path, file);
}

// collx-bench's command line.
void add_options(CLI::App& app, Settings& s) {
  app.add_option("collective", s.collective_name,
                 "allreduce broadcast reduce allgather reduce_scatter gather scatter alltoall "
                 "sendrecv barrier")
      ->required();
  app.add_option("-b,--minbytes", s.min_bytes, "smallest size in bytes (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", s.max_bytes, "largest size in bytes")->capture_default_str();
  app.add_option("-f,--stepfactor", s.factor, "size multiplication factor")
      ->capture_default_str()
      ->check(collx::apps::integer_in(std::size_t{2}, std::size_t{1024}));
  app.add_option("-d,--datatype", s.type,
                 "int8 uint8 int32 uint32 int64 uint64 float16 "
                 "bfloat16 float32 float64")
      ->capture_default_str();
  app.add_option("-o,--op", s.op, "sum prod min max avg")->capture_default_str();
  app.add_option("-a,--algos", s.algos,
                 "comma-separated algorithms, auto, mpi (the MPI library's own call), mpi_again "
                 "(that call again as a row of its own: its vs_mpi is the noise between two "
                 "identical calls), memcpy "
                 "(one local copy of the result buffer: the memory-bandwidth limit; x_memcpy is "
                 "each row's time over its time) or all (every algorithm, auto, mpi, memcpy)")
      ->capture_default_str();
  app.add_option("-n,--iters", s.iters, "timed iterations per size and algorithm")
      ->capture_default_str()
      ->check(collx::apps::integer_in(1, 1000000));
  app.add_option("-w,--warmup_iters", s.warmup, "untimed iterations first")
      ->capture_default_str()
      ->check(collx::apps::integer_in(0, 1000000));
  app.add_option("--rounds", s.rounds,
                 "the timed iterations are split into this many rounds, interleaved across the "
                 "algorithms; the median round counts")
      ->capture_default_str()
      ->check(collx::apps::integer_in(1, 1000));
  app.add_option("-c,--check", s.check, "1: check every algorithm's result exactly")
      ->capture_default_str()
      ->check(collx::apps::integer_in(0, 1));
  app.add_option("-r,--root", s.root, "root of rooted collectives (ignored by the others)")
      ->capture_default_str()
      ->check(collx::apps::whole_number<int>());
  app.add_flag("--in-place", s.in_place,
               "in-place form (allreduce, allgather, reduce_scatter, alltoall; broadcast always "
               "is; ignored by the others)");
  app.add_option("--json", s.json_path, "write the results as JSON to this file");
  app.add_option("--smpi-shared", s.smpi_shared,
                 "SimGrid SMPI builds: buffers of at least this size (K/M/G suffixes) are one "
                 "block all simulated ranks share (SMPI_SHARED_MALLOC), for sizes that would not "
                 "fit in memory otherwise; those sizes are timed, not checked (docs/SCALE.md)");
  app.add_option("--segment,--chunk", s.segment,
                 "segment size of the pipelined algorithms (K/M suffixes; --chunk: old name)");
  app.add_option("--depth", s.depth, "segments in flight")->check(collx::apps::integer_in(1, 64));
  // Not "--tune": mpirun scans its whole command line for its own --tune option.
  app.add_option("--save-tuning", s.tune_path,
                 "write the fastest collx algorithm per size for this collective and rank count "
                 "into this tuning file (merged with what it holds; read back with "
                 "COLLX_TUNING_FILE); --segment/--depth given here are recorded too");
  app.add_option("-m,--memory", s.memory,
                 "host, or device: the buffers are CUDA device memory (cudaMalloc), every rank on "
                 "one of its node's GPUs")
      ->capture_default_str()
      ->check(CLI::IsMember({"host", "device"}));
  app.add_option("--transport", s.transports,
                 "mpi, ucx or a list (mpi,ucx): the collx rows once per transport, each on a "
                 "communicator of its own (default: COLLX_TRANSPORT's)");
  app.add_flag("--cold", s.cold,
               "every call on another set of buffers, from a pool of sets larger than twice the "
               "last-level cache, so no call finds its data in cache (host memory only). Memory "
               "per rank: about 2 x LLC + one set, at least two sets (e.g. 2 x 192 MiB for a "
               "64 MiB allreduce with the memcpy row); with one set (without --cold) the "
               "buffers of the largest size");
  app.add_option("--llc", s.llc,
                 "--cold: the last-level cache size to assume (K/M/G suffixes) instead of the "
                 "one detected (sysconf, sysfs, else 32M)");
  app.add_option("--overlap", s.overlap_ms,
                 "also measure the nonblocking form with this many ms of computation between "
                 "start and wait; prints the share of the call hidden behind it (allreduce)")
      ->check(collx::apps::number_in(0.0, 10000.0));
}

// One call of a row. Every call first moves to the next set of buffers (--cold; a no-op with
// one set).
void call_once(const Row& row) {
  auto& b = *row.runner->bench;
  b.next_buffers();
  if (row.column.memcpy) {
    b.run_memcpy();
  } else if (row.column.mpi) {
    b.run_mpi();
  } else {
    b.run(row.column.algorithm);
  }
}

// The most calls a row's warm-up adds for the autotuner's trials (4 candidates, 8 trials each,
// and a second round where timings drift).
constexpr int kMaxTrialCalls = 64;

// A row's first calls at a size: the warm-up and, for auto, the autotuner's trials (what a new
// user's first calls cost before the timed ones).
struct FirstCalls {
  int calls = 0;
  double seconds = 0;  // the slowest rank's, all of them together
};

struct RowTimes {
  std::map<std::string, std::vector<double>> samples;  // by row key: per round
  std::map<std::string, FirstCalls> first;             // by row key
};

// Warm-up calls, then `rounds` rounds of `per_round` timed calls of every row: a round's time per
// row (the slowest rank's mean per call), by row key.
RowTimes time_rows(const std::vector<Row>& table, int warmup, int rounds, int per_round,
                   const std::function<bool(const Row&)>& trying) {
  RowTimes times;
  for (const auto& row : table) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    FirstCalls& first = times.first[row.key];
    for (int i = 0; i < warmup; ++i, ++first.calls)
      call_once(row);
    // auto's rows: the autotuner's trials (COLLX_AUTOTUNE) belong to the warm-up, not to the
    // timed calls. Every rank leaves this loop at the same call (the trials end together).
    for (int i = 0; i < kMaxTrialCalls && trying(row); ++i, ++first.calls)
      call_once(row);
    first.seconds = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &first.seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
  std::map<std::string, std::vector<double>>& samples = times.samples;
  for (int round = 0; round < rounds; ++round) {
    // Each round runs the rows in another order (the same on every rank: a fixed seed per
    // round), so no row always follows the same one: a slow row leaves the caches cold for
    // whichever row comes next.
    std::vector<std::size_t> order(table.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (round > 0) std::shuffle(order.begin(), order.end(), std::mt19937(round));
    for (std::size_t k : order) {
      const auto& row = table[k];
      // One untimed call first: the previous row left the caches and MPI's queues in its own
      // state, and that switch is not part of this row's time.
      call_once(row);
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < per_round; ++i)
        call_once(row);
      double seconds = (MPI_Wtime() - t0) / per_round;
      // The slowest rank's time is the collective's time.
      MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      samples[row.key].push_back(seconds);
    }
  }
  return times;
}

// --overlap: start, compute, wait, `rounds` times per row; the computation alone too.
struct Overlap {
  std::map<std::string, std::vector<double>> samples;  // start to wait, by row key
  double compute_seconds = 0;
};
Overlap time_overlap(const std::vector<Row>& table, int rounds, Computation& compute) {
  Overlap result;
  std::vector<double> alone;
  for (int round = 0; round < rounds; ++round) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    compute();
    alone.push_back(MPI_Wtime() - t0);
    for (const auto& row : table) {
      if (row.column.memcpy) continue;  // no nonblocking form
      row.runner->bench->next_buffers();
      MPI_Barrier(MPI_COMM_WORLD);
      const double t1 = MPI_Wtime();
      if (row.column.mpi) {
        MPI_Request request;
        row.runner->bench->start_mpi(&request);
        compute();
        MPI_Wait(&request, MPI_STATUS_IGNORE);
      } else {
        collx::Request request = row.runner->bench->start(row.column.algorithm);
        compute();
        request.wait();
      }
      double seconds = MPI_Wtime() - t1;
      MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      result.samples[row.key].push_back(seconds);
    }
  }
  result.compute_seconds = median(alone);
  MPI_Allreduce(MPI_IN_PLACE, &result.compute_seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return result;
}

// One row's figures at one size, for the table and the JSON.
struct Measured {
  std::size_t bytes = 0;  // nccl-tests' size column
  std::size_t count = 0;
  std::string label;     // "auto(ring)@ucx"
  std::string selected;  // auto's choice, "" for the other rows
  double seconds = 0;
  double algbw = 0;
  double busbw = 0;
  long long wrong = -1;
  bool checked = false;
  bool memcpy = false;  // the memcpy row
  double vs_mpi = 0;
  bool has_vs_mpi = false;
  double x_memcpy = 0;
  bool has_x_memcpy = false;
  bool overlap = false;  // --overlap figures
  double total = 0;
  double hidden = 0;
  double compute_seconds = 0;
  FirstCalls first;  // the warm-up's calls (auto: and its trials)
};

void print_row(const Measured& m, const Settings& s, const collx::bench::CollectiveBench& bench,
               int algo_width) {
  char x_text[32] = "";
  if (m.has_x_memcpy) std::snprintf(x_text, sizeof x_text, "%.2f", m.x_memcpy);
  std::printf("  %12zu %12zu %9s %6s %5d %*s %11.2f %11.3f %11.3f %7s %7s %8s", m.bytes, m.count,
              s.type.c_str(), bench.reduces() ? s.op.c_str() : "none", bench.rooted() ? s.root : -1,
              algo_width, m.label.c_str(), m.seconds * 1e6, m.algbw, m.busbw,
              m.checked ? std::to_string(m.wrong).c_str() : "n/a",
              m.has_vs_mpi ? (std::to_string(m.vs_mpi).substr(0, 5)).c_str() : "", x_text);
  if (m.overlap) std::printf("  %6.1f%% %10.1f", m.hidden * 100, m.total * 1e6);
  std::printf("\n");
  // What the autotuner's trials cost this row: its first calls against as many at the timed
  // calls' speed.
  if (!m.selected.empty() && m.first.calls > s.warmup && m.seconds > 0) {
    std::printf(
        "# %12zu %s: first %d calls (warm-up and trials) %.2f us a call, %.2fx the timed"
        " calls'\n",
        m.bytes, m.label.c_str(), m.first.calls, m.first.seconds / m.first.calls * 1e6,
        m.first.seconds / m.first.calls / m.seconds);
  }
}

nlohmann::json to_json(const Measured& m, const std::string& key, const Settings& s,
                       const collx::bench::CollectiveBench& bench) {
  nlohmann::json row = {{"size_bytes", m.bytes},
                        {"count", m.count},
                        {"type", s.type},
                        {"op", bench.reduces() ? s.op : "none"},
                        {"root", bench.rooted() ? s.root : -1},
                        {"algo", key},
                        {"time_us", m.seconds * 1e6},
                        {"algbw_gbps", m.algbw},
                        {"busbw_gbps", m.busbw},
                        {"wrong", m.wrong}};
  if (!m.selected.empty()) row["selected"] = m.selected;
  row["first_calls"] = m.first.calls;
  row["first_calls_us"] = m.first.calls > 0 ? m.first.seconds / m.first.calls * 1e6 : 0.0;
  if (m.has_vs_mpi) row["vs_mpi"] = m.vs_mpi;
  if (m.has_x_memcpy) row["x_memcpy"] = m.x_memcpy;
  if (m.memcpy) row["memcpy_bytes"] = bench.memcpy_bytes();
  if (m.overlap) {
    row["overlap_compute_us"] = m.compute_seconds * 1e6;
    row["overlap_total_us"] = m.total * 1e6;
    row["hidden_fraction"] = m.hidden;
  }
  return row;
}

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

// The rows: every collx column on every runner; the MPI library's own call and the memcpy
// reference once (on the first runner's buffers).
std::vector<Row> make_table(const std::vector<Column>& columns, std::vector<Runner>& runners) {
  std::vector<Row> table;
  for (const auto& c : columns) {
    if (!c.collx()) {
      table.push_back({c.name, c, &runners.front()});
      continue;
    }
    for (auto& r : runners) {
      table.push_back({r.transport.empty() ? c.name : c.name + "@" + r.transport, c, &r});
    }
  }
  return table;
}

// What a run measures: the command line's values, parsed and checked.
struct Plan {
  Collective collective = Collective::allreduce;
  collx::DataType type = collx::DataType::float32;
  collx::ReduceOp op = collx::ReduceOp::sum;
  std::size_t min_bytes = 0;
  std::size_t max_bytes = 0;
  std::vector<Column> columns;
  bool device = false;                  // -m device
  std::vector<std::string> transports;  // --transport's, each once; empty: the default one
  std::size_t segment_bytes = 0;        // --segment; 0: the library's choice
  CacheSize llc;                        // --cold: the last-level cache assumed
  bool memcpy_row() const {
    return std::any_of(columns.begin(), columns.end(), [](const Column& c) { return c.memcpy; });
  }
};

// The checks that need no communicator, in `plan`; "" or why not (the same on every rank).
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

// Whether the buffers of the largest size (and --cold's pool) fit in the nodes' memory, with the
// ranks of a node together (collective: every rank gets the same answer); "" or why not, in
// rank 0's figures. Without it a mistyped -e or --llc allocates until the node runs out of
// memory (the kernel kills a rank) or takes hours growing towards it.
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

// -m device: whether every rank has a device (collective); the lowest rank without one says why.
bool device_on_every_rank(int rank, int nranks) {
  const std::string why = collx::bench::device_memory_unavailable();
  int first_failing = why.empty() ? nranks : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_failing, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first_failing == rank) {
    std::fprintf(stderr, "collx-bench (rank %d): -m device: %s\n", rank, why.c_str());
  }
  return first_failing == nranks;
}

// A runner per --transport, each on a duplicate of `comm` moving its bytes that way; without
// --transport one runner on `comm` itself.
std::vector<Runner> make_runners(collx::Communicator& comm, const Plan& plan) {
  std::vector<Runner> runners;
  if (plan.transports.empty()) {
    runners.push_back({"", nullptr, collx::bench::make_bench(plan.collective, comm)});
    return runners;
  }
  for (const std::string& t : plan.transports) {
    auto c = std::make_unique<collx::Communicator>(
        comm.dup(t == "ucx" ? collx::TransportChoice::ucx : collx::TransportChoice::mpi));
    auto b = collx::bench::make_bench(plan.collective, *c);
    runners.push_back({t, std::move(c), std::move(b)});
  }
  return runners;
}

// The command line as given, for the header and the JSON.
std::string command_line(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i)
    command += (i ? " " : "") + std::string(argv[i]);
  return command;
}

// The transports of the collx rows, "mpi" or "mpi,ucx".
std::string describe_transports(const collx::Communicator& comm,
                                const std::vector<Runner>& runners) {
  std::string line;
  for (const auto& r : runners) {
    line += (line.empty() ? "" : ",") +
            std::string(r.transport.empty() ? comm.transport_name() : r.transport);
  }
  return line;
}

// One run, for the functions below: what it measures, on which communicators, and the rows.
struct Run {
  const Settings& s;
  const Plan& plan;
  int rank;
  int nranks;
  collx::Communicator& comm;
  std::vector<Runner>& runners;
  std::vector<Row> table;
  collx::bench::Params params;
  Computation compute;
  std::string command;
  std::string mpi_library;
  std::string transport_line;  // the transports of the rows ("mpi", "mpi,ucx")
  int algo_width;
  int per_round;  // timed calls per round, and rounds
  int rounds;
  std::size_t current_bytes = 0;  // the size being measured (the size column's bytes)

  const collx::bench::CollectiveBench& bench() const { return *runners.front().bench; }
};

// The header's memory line: with -m device, the device and how collx and the mpi row move
// device buffers.
// collx's part says, per transport of the rows, whether it takes the device buffers (direct) or
// they are staged through pinned host memory.
std::string memory_line(const Run& run) {
  if (!run.plan.device) return run.s.memory;
  const bool direct = collx::mpi_takes_device_memory();
  const auto paths = collx::device_memory_info().device_paths;
  std::string collx_part;
  std::stringstream transports(run.transport_line);
  for (std::string t; std::getline(transports, t, ',');) {
    std::string how = "?";
    for (const auto& [name, path] : paths)
      if (name == t)
        how = path == "direct" ? "takes device buffers" : "staged through pinned host memory";
    collx_part += (collx_part.empty() ? "" : ", ") + t + " " + how;
  }
  return run.s.memory + " (" + collx::bench::device_name() + "; collx: " + collx_part +
         "; mpi row: " +
         (direct ? "device buffers" : "host buffers with the copies to and from the device") + ")";
}

void print_header(const Run& run) {
  const Settings& s = run.s;
  std::printf("# collx-bench %s  nranks %d  collx %s (kernels %s)\n# MPI: %s\n# %s\n",
              s.collective_name.c_str(), run.nranks, collx::build_info().version.c_str(),
              collx::build_info().host_kernels.c_str(), run.mpi_library.c_str(),
              run.command.c_str());
  std::printf("# memory: %s  transport: %s\n", memory_line(run).c_str(),
              run.transport_line.c_str());
  if (s.cold) {
    std::printf(
        "# cold: last-level cache %s (%s); every call on the next of a pool of buffer "
        "sets > %s per rank\n",
        mib(run.plan.llc.bytes).c_str(), run.plan.llc.source.c_str(),
        mib(2 * run.plan.llc.bytes).c_str());
  }
  std::printf("#\n# %12s %12s %9s %6s %5s %*s %11s %11s %11s %7s %7s %8s%s\n", "size(B)", "count",
              "type", "redop", "root", run.algo_width, "algo", "time(us)", "algbw(GB/s)",
              "busbw(GB/s)", "#wrong", "vs_mpi", "x_memcpy",
              s.overlap_ms > 0 ? "  hidden  total(us)" : "");
}

// One size's medians: every row's, the mpi and memcpy rows' (0 without them), the fastest collx
// algorithm's (automatic when no algorithm row ran), and --overlap's.
struct SizeTimes {
  std::map<std::string, double> seconds;    // by row key
  std::map<std::string, FirstCalls> first;  // by row key
  double mpi = 0;
  double memcpy = 0;
  Algorithm fastest = Algorithm::automatic;
  bool overlap = false;
  Overlap overlapped;
};

SizeTimes time_size(Run& run) {
  SizeTimes t;
  const std::size_t bytes = run.current_bytes;
  const RowTimes times =
      time_rows(run.table, run.s.warmup, run.rounds, run.per_round, [&](const Row& row) {
        if (!row.column.collx() || row.column.algorithm != Algorithm::automatic) {
          return false;
        }
        collx::Communicator& comm = row.runner->comm ? *row.runner->comm : run.comm;
        bool trying = false;
        (void)comm.auto_choice(run.plan.collective, bytes, run.plan.type, run.plan.op, &trying);
        return trying;
      });
  t.first = times.first;
  double fastest_seconds = 0;
  for (const auto& row : run.table) {
    const double seconds = median(times.samples.at(row.key));
    t.seconds[row.key] = seconds;
    if (row.column.mpi && row.column.name == "mpi") t.mpi = seconds;
    if (row.column.memcpy) t.memcpy = seconds;
    if (row.column.collx() && row.column.algorithm != Algorithm::automatic &&
        (fastest_seconds == 0 || seconds < fastest_seconds)) {
      fastest_seconds = seconds;
      t.fastest = row.column.algorithm;
    }
  }
  // --overlap: start, compute, wait; the share of the call's own time that the computation hid
  // = (call + compute - total) / call.
  t.overlap = run.s.overlap_ms > 0 && run.bench().supports_overlap();
  if (t.overlap) t.overlapped = time_overlap(run.table, run.rounds, run.compute);
  return t;
}

// Whether this size is checked: -c 1, and its buffers are the rank's own (--smpi-shared).
bool checked(const Run& run) {
  return run.s.check != 0 && !collx::bench::Buffer::shared_at(run.current_bytes);
}

// A row's wrong elements over all ranks (its check's call, like the timed ones, on the next set
// of buffers), -1 without -c.
long long check_row(const Run& run, const Row& row) {
  if (!checked(run)) return -1;
  auto& bench = *row.runner->bench;
  bench.next_buffers();
  unsigned long long mine =
      row.column.memcpy ? bench.check_memcpy() : bench.check(row.column.mpi, row.column.algorithm);
  unsigned long long all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return static_cast<long long>(all);
}

Measured measure_row(const Run& run, const Row& row, const SizeTimes& t, std::size_t bytes,
                     std::size_t count) {
  const Column& c = row.column;
  const auto& bench = run.bench();
  Measured m;
  m.bytes = bytes;
  m.count = count;
  m.seconds = t.seconds.at(row.key);
  m.first = t.first.at(row.key);
  m.wrong = check_row(run, row);
  m.checked = checked(run);
  m.memcpy = c.memcpy;
  // The memcpy row's bandwidth is its copy's: the bytes it copies per second (both columns).
  const double moved = static_cast<double>(c.memcpy ? bench.memcpy_bytes() : bytes);
  m.algbw = m.seconds > 0 ? moved / m.seconds / 1e9 : 0;
  m.busbw = m.algbw * (c.memcpy ? 1.0 : bench.bus_factor(run.nranks));
  m.has_vs_mpi = t.mpi > 0;
  m.vs_mpi = t.mpi > 0 && m.seconds > 0 ? t.mpi / m.seconds : 0;
  // Time over the memcpy row's: how far from touching the result once (none without bytes).
  m.has_x_memcpy = t.memcpy > 0 && bench.memcpy_bytes() > 0;
  m.x_memcpy = m.has_x_memcpy ? m.seconds / t.memcpy : 0;
  m.label = c.name;
  if (c.collx() && c.algorithm == Algorithm::automatic) {
    // The shared-memory rows count for host buffers on a communicator with a segment.
    // What the timed calls ran: the autotuner's choice where it tried candidates (the warm-up
    // ran its trials), else the table's.
    collx::Communicator& comm = row.runner->comm ? *row.runner->comm : run.comm;
    const bool shared = !run.plan.device && comm.shared_memory();
    m.selected = std::string(collx::to_string(
        run.plan.device
            ? collx::auto_algorithm(run.plan.collective, bytes, run.nranks, shared,
                                    comm.node_layout())
            : comm.auto_choice(run.plan.collective, bytes, run.plan.type, run.plan.op)));
    m.label += "(" + m.selected + ")";
  }
  if (c.collx() && !row.runner->transport.empty()) m.label += "@" + row.runner->transport;
  if (t.overlap && !c.memcpy) {
    m.overlap = true;
    m.compute_seconds = t.overlapped.compute_seconds;
    m.total = median(t.overlapped.samples.at(row.key));
    m.hidden = std::clamp((m.seconds + m.compute_seconds - m.total) / m.seconds, 0.0, 1.0);
  }
  return m;
}

// The rows of one size, measured, printed (rank 0) and added to `json_rows`; the fastest collx
// algorithm (not auto, not mpi) added to `fastest` for --save-tuning. Wrong elements found.
unsigned long long measure_size(Run& run, std::size_t size, nlohmann::json& json_rows,
                                std::vector<std::pair<std::size_t, Algorithm>>& fastest) {
  const auto& bench = run.bench();
  const std::size_t count = bench.count_for(size, collx::size_of(run.plan.type), run.nranks);
  for (auto& r : run.runners)
    r.bench->prepare(run.params, count);
  const std::size_t bytes = bench.bytes_for(count, run.nranks);  // nccl-tests' size column
  run.current_bytes = bytes;
  const SizeTimes t = time_size(run);
  if (t.fastest != Algorithm::automatic) fastest.emplace_back(bytes, t.fastest);
  unsigned long long wrong = 0;
  for (const auto& row : run.table) {
    const Measured m = measure_row(run, row, t, bytes, count);
    if (m.wrong > 0) wrong += static_cast<unsigned long long>(m.wrong);
    if (run.rank == 0) print_row(m, run.s, bench, run.algo_width);
    nlohmann::json json_row = to_json(m, row.key, run.s, bench);
    if (run.s.cold) json_row["buffer_sets"] = row.runner->bench->buffer_sets();
    if (row.column.collx() && !row.runner->transport.empty()) {
      json_row["transport"] = row.runner->transport;
    }
    json_rows.push_back(json_row);
  }
  return wrong;
}

// --json's document; false where it cannot be written.
bool write_json(const Run& run, const nlohmann::json& rows) {
  const Settings& s = run.s;
  nlohmann::json doc = {{"collective", s.collective_name},
                        {"nranks", run.nranks},
                        {"mpi_library", run.mpi_library},
                        {"collx_version", collx::build_info().version},
                        {"memory", s.memory},
                        {"transport", run.transport_line},
                        {"command", run.command},
                        {"cold", s.cold},
                        {"rows", rows}};
  if (s.cold) {
    doc["llc_bytes"] = run.plan.llc.bytes;
    doc["llc_source"] = run.plan.llc.source;
  }
  std::ofstream out(s.json_path);
  out << doc.dump(2) << "\n";
  if (!out) {
    std::fprintf(stderr, "collx-bench: cannot write %s\n", s.json_path.c_str());
    return false;
  }
  return true;
}

int run(int argc, char** argv, int rank, int nranks) {
  CLI::App app{"collx-bench: collx collectives against each other and the MPI library's own"};
  Settings s;
  add_options(app, s);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank != 0) return e.get_exit_code();
    return app.exit(e);
  }
  auto fail = [&](const std::string& message) {
    if (rank == 0) std::fprintf(stderr, "collx-bench: %s\n", message.c_str());
    return 2;
  };
  Plan plan;
  if (const std::string why = make_plan(s, plan); !why.empty()) return fail(why);
  // -m device: a device on every rank, or a clear error on all of them.
  if (plan.device) {
    if (!device_on_every_rank(rank, nranks)) return 2;
    collx::bench::Buffer::use_device_memory(true);
  }

  collx::Communicator comm(MPI_COMM_WORLD);
  std::vector<Runner> runners = make_runners(comm, plan);
  const auto* bench = runners.front().bench.get();
  if (!bench) return fail("collx-bench has no benchmark for " + s.collective_name + " yet");
  if (bench->rooted() && (s.root < 0 || s.root >= nranks)) {
    return fail("-r " + std::to_string(s.root) + ": the root must be a rank, 0 to " +
                std::to_string(nranks - 1));
  }
  if (bench->reduces() && !collx::is_supported(plan.type, plan.op)) {
    return fail(s.op + " is not defined for " + s.type);
  }
  if (const std::string why = memory_error(s, plan); !why.empty()) return fail(why);

  Run r{.s = s,
        .plan = plan,
        .rank = rank,
        .nranks = nranks,
        .comm = comm,
        .runners = runners,
        .table = make_table(plan.columns, runners),
        .params = {plan.type, plan.op, s.root, s.in_place, plan.segment_bytes, s.depth,
                   plan.memcpy_row(), 2 * plan.llc.bytes},
        .compute = Computation(s.overlap_ms),
        .command = command_line(argc, argv),
        .mpi_library = collx::mpi_library_version(),
        .transport_line = describe_transports(comm, runners),
        // Wide enough for "auto(recursive_doubling)@ucx".
        .algo_width = plan.transports.empty() ? 24 : 28,
        .per_round = std::max(1, s.iters / s.rounds),
        .rounds = std::min(s.rounds, s.iters)};
  if (rank == 0) print_header(r);

  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::pair<std::size_t, Algorithm>> fastest;  // for --save-tuning
  unsigned long long total_wrong = 0;
  for (std::size_t size = plan.min_bytes;; size *= s.factor) {
    total_wrong += measure_size(r, size, rows, fastest);
    if (size == 0 || plan.collective == Collective::barrier) break;  // barrier: one row
    if (size > plan.max_bytes / s.factor) break;  // the next size would pass -e (or 2^64)
  }
  if (!s.tune_path.empty() && fastest.empty()) {
    return fail("--save-tuning needs at least one collx algorithm in -a");
  }
  if (rank == 0 && !s.tune_path.empty()) {
    write_tuning(s.tune_path, plan.collective, nranks, fastest, plan.segment_bytes, s.depth,
                 r.mpi_library);
    std::printf("# tuning: %zu sizes written to %s for %s on %d ranks\n", fastest.size(),
                s.tune_path.c_str(), s.collective_name.c_str(), nranks);
  }
  if (rank == 0) {
    std::printf("# Out of bounds values : %llu %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    if (!s.json_path.empty() && !write_json(r, rows)) return 1;
  }
  return total_wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  // MPI at the thread level collx needs (MPI_THREAD_MULTIPLE with COLLX_PROGRESS_THREAD=1).
  std::optional<collx::Environment> environment;
  try {
    environment.emplace(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collx-bench: %s\n", e.what());
    return 1;
  }
  int rank = 0;
  int nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int status = 0;
  try {
    status = run(argc, argv, rank, nranks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collx-bench (rank %d): %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  collx::bench::free_mpi_reference();
  environment.reset();
  return status;
}
