// collx-model: the alpha-beta-gamma cost model. Calibrates its parameters on the running
// machine (under mpirun, 2 ranks), predicts every algorithm's time for any rank count and size
// (on one node, or with --nodes N --ranks-per-node K on N nodes joined by a network of its own
// alpha and bandwidth), finds the crossover points, and writes docs/ALGORITHMS.md's tables.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_numbers.hpp"
#include "collx/collx.hpp"
#include "cost_model.hpp"
#include "host_reduce.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::model::Machine;

std::string human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, bytes == std::floor(bytes) ? "%.0f %s" : "%.1f %s", bytes,
                units[u]);
  return text;
}

std::string time_text(double seconds) {
  char text[32];
  if (seconds < 1e-3) {
    std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  } else if (seconds < 1) {
    std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.2f s", seconds);
  }
  return text;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// alpha: one exchange step of 8 bytes; beta: the extra time per byte of a 16 MiB exchange;
// gamma: the host kernel's time per input byte of a 64 MiB float32 sum; copy: memcpy per byte.
Machine calibrate(collx::Communicator& comm) {
  Machine m;
  const int peer = comm.rank() ^ 1;
  auto exchange = [&](std::size_t bytes, int reps) {
    std::vector<std::byte> out(bytes), in(bytes);
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(comm.mpi_comm());
      const double t0 = MPI_Wtime();
      comm.sendrecv(out.data(), bytes, peer, in.data(), bytes, peer, collx::DataType::uint8, 1);
      t.push_back(MPI_Wtime() - t0);
    }
    double mid = median(t);
    MPI_Allreduce(MPI_IN_PLACE, &mid, 1, MPI_DOUBLE, MPI_MAX, comm.mpi_comm());
    return mid;
  };
  exchange(8, 100);  // warm-up
  m.alpha = exchange(8, 2001);
  const std::size_t big = 16u << 20;
  m.beta = (exchange(big, 21) - m.alpha) / static_cast<double>(big);
  const std::size_t n = 64u << 20;
  std::vector<float> a(n / 4, 1.0f), b(n / 4, 2.0f), c(n / 4);
  const auto fn = collx::kernels::reduce_fn(collx::DataType::float32, collx::ReduceOp::sum);
  std::vector<double> tk, tc;
  for (int r = 0; r < 11; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn(c.data(), a.data(), b.data(), n / 4, 0.0);
    auto t1 = std::chrono::steady_clock::now();
    std::memcpy(c.data(), a.data(), n);
    auto t2 = std::chrono::steady_clock::now();
    tk.push_back(std::chrono::duration<double>(t1 - t0).count());
    tc.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  m.gamma = median(tk) / static_cast<double>(n);
  m.copy = median(tc) / static_cast<double>(n);
  return m;
}

void print_machine(const Machine& m) {
  std::printf(
      "--alpha-us %.3f --bandwidth-gbps %.2f --gamma-gbps %.2f --copy-gbps %.2f --overhead-us %.3f",
      m.alpha * 1e6, 1e-9 / m.beta, 1e-9 / m.gamma, 1e-9 / m.copy, m.overhead * 1e6);
  if (m.nodes > 1) {
    std::printf(" --nodes %d --inter-alpha-us %.3f --inter-gbps %.2f", m.nodes, m.alpha_inter * 1e6,
                1e-9 / m.beta_inter);
    if (m.switch_nodes > 0) {
      std::printf(" --switch-nodes %d --switch-alpha-us %.3f", m.switch_nodes,
                  m.alpha_switch * 1e6);
    }
  }
  if (m.calls > 1) std::printf(" --calls %d", m.calls);
  if (m.start == collx::model::Start::dissemination) std::printf(" --start dissemination");
  std::printf("\n");
}

// The algorithms predicted for `c` on `m`: the shared-memory ones only where every rank is on
// one node (--one-node).
std::vector<Algorithm> predicted_algorithms(Collective c, const Machine& m) {
  std::vector<Algorithm> algos;
  for (Algorithm a : collx::algorithms_of(c)) {
    if (!collx::runs_through_arena(c, a) || m.one_node) algos.push_back(a);
  }
  return algos;
}

// An algorithm's predicted seconds per call as the measurement times it: seconds() from a common
// start, plus what the ranks' start adds (--start).
std::optional<double> predicted_seconds(Collective c, Algorithm a, int p, double bytes,
                                        const Machine& m) {
  auto t = collx::model::seconds(c, a, p, bytes, m);
  if (t) *t += collx::model::start_delay(c, a, p, bytes, m);
  return t;
}

// One markdown table: rows = sizes, columns = algorithms' predicted times, best marked.
void prediction_table(Collective c, int p, const Machine& m, const std::vector<double>& sizes) {
  const std::vector<Algorithm> algos = predicted_algorithms(c, m);
  std::printf("| size |");
  for (Algorithm a : algos)
    std::printf(" %s |", std::string(collx::to_string(a)).c_str());
  std::printf(" best |\n|---|");
  for (std::size_t i = 0; i <= algos.size(); ++i)
    std::printf("---|");
  std::printf("\n");
  for (double bytes : sizes) {
    std::printf("| %s |", human(bytes).c_str());
    const Algorithm winner = collx::model::best(c, p, bytes, m);
    for (Algorithm a : algos) {
      const std::string t = time_text(*predicted_seconds(c, a, p, bytes, m));
      std::printf(a == winner ? " **%s** |" : " %s |", t.c_str());
    }
    std::printf(" %s |\n", std::string(collx::to_string(winner)).c_str());
  }
}

// Every algorithm's predicted seconds at every size, for scripts (scripts/model-vs-bench.py
// ranks them against collx-bench's measurements).
nlohmann::json prediction_json(Collective c, int p, const Machine& m,
                               const std::vector<double>& sizes) {
  nlohmann::json rows = nlohmann::json::array();
  for (double bytes : sizes) {
    nlohmann::json predicted = nlohmann::json::object();
    for (Algorithm a : predicted_algorithms(c, m)) {
      if (const auto t = predicted_seconds(c, a, p, bytes, m))
        predicted[std::string(collx::to_string(a))] = *t;
    }
    rows.push_back({{"size_bytes", bytes},
                    {"best", std::string(collx::to_string(collx::model::best(c, p, bytes, m)))},
                    {"seconds", predicted}});
  }
  return {{"collective", std::string(collx::to_string(c))},
          {"ranks", p},
          {"nodes", m.nodes},
          {"rows", rows}};
}

void crossover_line(Collective c, int p, const Machine& m) {
  if (m.nodes > 1) {
    std::printf("- p = %d (%d nodes x %d ranks):", p, m.nodes, p / m.nodes);
  } else {
    std::printf("- p = %d:", p);
  }
  for (const auto& x : collx::model::crossovers(c, p, m, double(1ull << 34))) {
    std::printf(" from %s %s;", human(x.bytes).c_str(),
                std::string(collx::to_string(x.algorithm)).c_str());
  }
  std::printf("\n");
}

// A hand-written part of docs/ALGORITHMS.md (--algorithms-doc), after a blank line where
// `blank_line_first`: false where the file cannot be read.
bool print_prose(const std::string& path, bool blank_line_first) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "collx-model: cannot read %s\n", path.c_str());
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (blank_line_first) std::printf("\n");
  std::fputs(text.str().c_str(), stdout);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"collx-model: the alpha-beta-gamma cost model of collx's algorithms"};
  Machine m;
  double alpha_us = 2.0, bandwidth = 12.5, gamma = 10.0, copy = 20.0;
  std::string segment = "256K";
  bool calibrate_here = false;
  bool doc = false;
  std::string collective_name = "allreduce";
  std::vector<int> ranks = {2, 8, 64, 512, 4096};
  int nodes = 0;
  int ranks_per_node = 0;
  double inter_alpha_us = m.alpha_inter * 1e6, inter_bandwidth = 1e-9 / m.beta_inter;
  double overhead_us = m.overhead * 1e6;
  double switch_alpha_us = m.alpha_switch * 1e6;
  app.add_flag("--calibrate", calibrate_here,
               "measure alpha, beta, gamma and copy on this machine (run under mpirun -np 2)");
  app.add_option("--alpha-us", alpha_us, "message latency (us)")->capture_default_str();
  app.add_option("--bandwidth-gbps", bandwidth, "link bandwidth (GB/s)")->capture_default_str();
  app.add_option("--gamma-gbps", gamma, "reduction speed (GB/s of input)")->capture_default_str();
  app.add_option("--copy-gbps", copy, "local copy speed (GB/s)")->capture_default_str();
  app.add_option("--segment", segment, "pipeline segment size")
      ->capture_default_str()
      ->check([](const std::string& text) {
        if (const auto bytes = collx::apps::parse_size(text); bytes && *bytes == 0)
          return std::string("--segment 0: a segment holds at least one byte");
        return collx::apps::size_error("--segment", text);
      });
  app.add_option("-c,--collective", collective_name, "collective, or 'all'")->capture_default_str();
  auto* ranks_option =
      app.add_option("-p,--ranks", ranks, "rank counts")->delimiter(',')->capture_default_str();
  auto* nodes_option =
      app.add_option("--nodes", nodes,
                     "ranks on this many nodes (with --ranks-per-node; instead of -p): --alpha-us "
                     "and --bandwidth-gbps are then the links inside a node")
          ->check(CLI::Range(1, 1 << 20));
  auto* per_node_option = app.add_option("--ranks-per-node", ranks_per_node, "ranks on each node")
                              ->check(CLI::Range(1, 1 << 16));
  nodes_option->needs(per_node_option)->excludes(ranks_option);
  per_node_option->needs(nodes_option);
  app.add_option("--inter-alpha-us", inter_alpha_us, "message latency between nodes (us)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--inter-gbps,--inter-bandwidth-gbps", inter_bandwidth,
                 "network bandwidth between nodes (GB/s, one link per node)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--overhead-us", overhead_us,
                 "seconds (us) between two messages one rank sends back to back (LogP's gap: "
                 "software and injection per message); a rank posting many sends at once pays it "
                 "per message while their latencies overlap (SimGrid's SMPI: 0)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--switch-nodes", m.switch_nodes,
                 "consecutive nodes under one switch (a fat tree's leaf; 0: one tier): a step "
                 "whose partners are all under one switch pays --switch-alpha-us instead of "
                 "--inter-alpha-us")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--switch-alpha-us", switch_alpha_us,
                 "message latency between two nodes under one switch (us)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option(
         "--calls", m.calls,
         "calls timed back to back, a prediction being their mean per call (collx-bench's "
         "-n): an algorithm whose consecutive calls overlap (the tree reduce's receives all "
         "posted at once, the tree broadcast's eager sends) costs its stream period from "
         "the second call on; 1: one call from a common start")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  std::string start = "together";
  app.add_option("--start", start,
                 "how the ranks start the calls timed (the measurement's barrier): together, or "
                 "as they leave a dissemination barrier (Bruck's; Open MPI's selection takes it "
                 "for some communicator sizes), which releases them apart where some of its "
                 "rounds cross nodes and others do not; a rank that starts early waits for the "
                 "late ones, and its time counts the wait")
      ->check(CLI::IsMember({"together", "dissemination"}))
      ->capture_default_str();
  std::string eager = "64K";
  app.add_option("--eager", eager,
                 "sends of fewer bytes complete at their sender once taken (eager protocol; "
                 "SMPI's detached sends): with --calls above 1, whether a rank's sends hold back "
                 "its next call")
      ->capture_default_str()
      ->check([](const std::string& text) { return collx::apps::size_error("--eager", text); });
  std::vector<std::string> size_texts;
  app.add_option("--sizes", size_texts,
                 "sizes of the tables, comma-separated (8,4K,1M; default 8,1K,64K,1M,64M,1G)")
      ->delimiter(',')
      ->check([](const std::string& text) { return collx::apps::size_error("--sizes", text); });
  std::string json_path;
  app.add_option("--json", json_path,
                 "also write every algorithm's predicted seconds at every size and rank count to "
                 "this file");
  app.add_flag("--markdown", doc, "print markdown tables (docs/ALGORITHMS.md)");
  std::string prose_dir;
  app.add_option("--algorithms-doc", prose_dir,
                 "print docs/ALGORITHMS.md: every collective's algorithms (the registry's "
                 "descriptions) and markdown tables, between the hand-written parts in this "
                 "folder: header.md, COLLECTIVE.md after a collective's algorithms, footer.md");
  app.add_flag("--one-node", m.one_node,
               "every rank on one node: include the shared_memory algorithms");
  CLI11_PARSE(app, argc, argv);

  m.alpha = alpha_us * 1e-6;
  m.beta = 1e-9 / bandwidth;
  m.gamma = 1e-9 / gamma;
  m.copy = 1e-9 / copy;
  m.alpha_inter = inter_alpha_us * 1e-6;
  m.beta_inter = 1e-9 / inter_bandwidth;
  m.overhead = overhead_us * 1e-6;
  m.alpha_switch = switch_alpha_us * 1e-6;
  if (nodes > 0) {
    if (static_cast<long long>(nodes) * ranks_per_node > (1 << 24)) {
      std::fprintf(stderr, "collx-model: --nodes x --ranks-per-node is above 2^24 ranks\n");
      return 2;
    }
    if (m.one_node && nodes > 1) {
      std::fprintf(stderr, "collx-model: --one-node with --nodes above 1\n");
      return 2;
    }
    m.nodes = nodes;
    ranks = {nodes * ranks_per_node};
  }
  m.segment_bytes = *collx::apps::parse_size(segment);
  m.eager_bytes = *collx::apps::parse_size(eager);
  m.start =
      start == "dissemination" ? collx::model::Start::dissemination : collx::model::Start::together;

  if (calibrate_here) {
    collx::Environment environment(argc, argv);
    collx::Communicator comm(MPI_COMM_WORLD);
    if (comm.size() != 2) {
      if (comm.rank() == 0) std::fprintf(stderr, "collx-model --calibrate: run on 2 ranks\n");
      return 2;
    }
    const Machine measured = calibrate(comm);
    if (comm.rank() == 0) {
      std::printf("# calibrated on this machine (2 ranks):\n");
      print_machine(measured);
    }
    return 0;
  }

  std::vector<Collective> collectives;
  if (!prose_dir.empty()) {
    doc = true;
    collective_name = "all";
  }
  if (collective_name == "all") {
    for (int c = 0; c < collx::kCollectiveCount; ++c) {
      const auto coll = static_cast<Collective>(c);
      if (coll != Collective::reduce_scatter_v && coll != Collective::sendrecv)
        collectives.push_back(coll);
    }
  } else if (const auto c = collx::parse_collective(collective_name)) {
    collectives.push_back(*c);
  } else {
    std::fprintf(stderr, "collx-model: unknown collective %s\n", collective_name.c_str());
    return 2;
  }
  std::vector<double> sizes = {8, 1024, 64 * 1024, 1 << 20, 64 << 20, double(1 << 30)};
  if (!size_texts.empty()) {
    sizes.clear();
    for (const std::string& text : size_texts)
      sizes.push_back(static_cast<double>(*collx::apps::parse_size(text)));
  }

  if (!prose_dir.empty()) {
    if (!print_prose(prose_dir + "/header.md", false)) return 1;
    std::printf("Parameters: ");
  } else {
    std::printf("# machine: ");
  }
  print_machine(m);
  for (Collective c : collectives) {
    const std::string name(collx::to_string(c));
    std::printf("\n## %s\n\n", name.c_str());
    if (doc) {
      for (Algorithm a : collx::algorithms_of(c)) {
        std::printf("- **%s**: %s\n", std::string(collx::to_string(a)).c_str(),
                    collx::model::describe(c, a).c_str());
      }
      // A collective's own notes, where it has any.
      const std::string notes = prose_dir + "/" + name + ".md";
      if (!prose_dir.empty() && std::ifstream(notes) && !print_prose(notes, true)) return 1;
      std::printf("\nCrossovers (smallest size from which an algorithm is predicted fastest):\n\n");
      for (int p : ranks)
        crossover_line(c, p, m);
      std::vector<int> tables = {ranks.front()};
      if (ranks.back() != ranks.front()) tables.push_back(ranks.back());
      for (int p : tables) {
        std::printf("\nPredicted time, p = %d:\n\n", p);
        prediction_table(c, p, m, sizes);
      }
    } else {
      for (int p : ranks) {
        if (m.nodes > 1) {
          std::printf("p = %d (%d nodes x %d ranks)\n", p, m.nodes, p / m.nodes);
        } else {
          std::printf("p = %d\n", p);
        }
        prediction_table(c, p, m, sizes);
        crossover_line(c, p, m);
      }
    }
  }
  if (!json_path.empty()) {
    nlohmann::json predictions = nlohmann::json::array();
    for (Collective c : collectives)
      for (int p : ranks)
        predictions.push_back(prediction_json(c, p, m, sizes));
    std::ofstream out(json_path);
    const nlohmann::json document{{"machine",
                                   {{"alpha_us", m.alpha * 1e6},
                                    {"bandwidth_gbps", 1e-9 / m.beta},
                                    {"gamma_gbps", 1e-9 / m.gamma},
                                    {"copy_gbps", 1e-9 / m.copy},
                                    {"nodes", m.nodes},
                                    {"inter_alpha_us", m.alpha_inter * 1e6},
                                    {"inter_gbps", 1e-9 / m.beta_inter},
                                    {"overhead_us", m.overhead * 1e6},
                                    {"switch_nodes", m.switch_nodes},
                                    {"switch_alpha_us", m.alpha_switch * 1e6},
                                    {"segment_bytes", m.segment_bytes},
                                    {"calls", m.calls},
                                    {"start", start}}},
                                  {"predictions", predictions}};
    out << document.dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "collx-model: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  if (!prose_dir.empty() && !print_prose(prose_dir + "/footer.md", true)) return 1;
  return 0;
}
