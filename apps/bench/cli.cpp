#include "cli.hpp"

#include "cli_numbers.hpp"

namespace collx::bench {

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
  app.add_option("--smpi-reduce-gbps", s.smpi_reduce_gbps,
                 "SimGrid SMPI builds: the mpi rows reduce with user-defined ops that take b / "
                 "this many GB/s of simulated time for b input bytes, as collx's reductions do "
                 "under COLLX_SMPI_REDUCE_GBPS (SMPI's built-in ops take none; docs/SCALE.md)")
      ->check(collx::apps::integer_in(1, 1000000));
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
  app.add_option(
         "--offset", s.offset,
         "host buffers start this many bytes past a page boundary instead of on it: "
         "16 is where malloc puts a large block (glibc: a page plus its 16-byte header), "
         "which some CPUs' memcpy copies an order of magnitude slower (docs/PERFORMANCE.md, "
         "\"Copies and alignment\")")
      ->capture_default_str()
      ->check(collx::apps::integer_in(0, 4095));
  app.add_option("--llc", s.llc,
                 "--cold: the last-level cache size to assume (K/M/G suffixes) instead of the "
                 "one detected (sysconf, sysfs, else 32M)");
  app.add_option("--overlap", s.overlap_ms,
                 "also measure the nonblocking form with this many ms of computation between "
                 "start and wait; prints the share of the call hidden behind it (allreduce)")
      ->check(collx::apps::number_in(0.0, 10000.0));
}

std::string command_line(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i)
    command += (i ? " " : "") + std::string(argv[i]);
  return command;
}

}  // namespace collx::bench
