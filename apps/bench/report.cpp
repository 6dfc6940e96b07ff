#include "report.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench_device.hpp"

namespace collx::bench {

namespace {

std::string mib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// The header's memory line: with -m device, the device and how collx and the mpi row move
// device buffers.
// collx's part says, per transport of the rows, whether it takes the device buffers (direct) or
// they are staged through pinned host memory.
std::string memory_line(const Run& run) {
  if (!run.plan.device) {
    return run.s.offset > 0 ? run.s.memory + " (buffers " + std::to_string(run.s.offset) +
                                  " B past a page boundary)"
                            : run.s.memory;
  }
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

}  // namespace

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

void print_header(const Run& run) {
  const Settings& s = run.s;
  std::printf("# collx-bench %s  nranks %d  collx %s (kernels %s)\n# MPI: %s\n# %s\n",
              s.collective_name.c_str(), run.nranks, collx::build_info().version.c_str(),
              collx::build_info().host_kernels.c_str(), run.mpi_library.c_str(),
              run.command.c_str());
  std::printf("# memory: %s  transport: %s\n", memory_line(run).c_str(),
              run.transport_line.c_str());
  if (run.round_trip_start_ns) {
    // Where two virtual CPUs can be near or far, this says which the run met (core_probe.hpp).
    std::printf("# cache line round trip between ranks 0 and 1 (one node): %.0f ns\n",
                *run.round_trip_start_ns);
  }
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
                        {"offset_bytes", s.offset},
                        {"rows", rows}};
  if (run.round_trip_start_ns) doc["round_trip_start_ns"] = *run.round_trip_start_ns;
  if (run.round_trip_end_ns) doc["round_trip_end_ns"] = *run.round_trip_end_ns;
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

}  // namespace collx::bench
