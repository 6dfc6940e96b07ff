// Tuning files (save, load, merge, errors) and the cost model's predictions.
#include <gtest/gtest.h>
#include <mpi.h>  // MPICH_VERSION, OPEN_MPI: the rows for one library

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "collx/error.hpp"
#include "config.hpp"
#include "cost_model.hpp"
#include "selector.hpp"
#include "tuning.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::kAnyBytes;
using collx::TuningRule;
using namespace collx::detail;

std::string temp_path(const char* name) {
  return (testing::TempDir() + name);
}

// A table's rows for `collective` on exactly `nranks` ranks, replaced as collx-bench does.
void replace_rules(TuningTable& table, Collective collective, int nranks,
                   const std::vector<TuningRule>& rules) {
  collx::replace_tuning_rules(table, collective, nranks, rules);
}

// Files written before the pipeline's unit was called a segment name it "chunk_bytes".
TEST(Tuning, OldSegmentKeyIsStillRead) {
  const std::string path = temp_path("tuning_old_key.json");
  {
    std::ofstream f(path);
    f << R"({"machine": "old", "chunk_bytes": 65536, "pipeline_depth": 2, "rules": []})";
  }
  EXPECT_EQ(load_tuning_file(path).segment_bytes, 64u << 10);
  {
    std::ofstream f(path);
    f << R"({"segment_bytes": 4096, "chunk_bytes": 65536, "rules": []})";
  }
  EXPECT_EQ(load_tuning_file(path).segment_bytes, 4096u) << "the new key wins";
  std::remove(path.c_str());
}

TEST(Tuning, SaveLoadRoundTripAndMerge) {
  const std::string path = temp_path("tuning_roundtrip.json");
  TuningTable t;
  t.machine = "test";
  t.segment_bytes = 128 << 10;
  t.pipeline_depth = 3;
  replace_rules(t, Collective::allreduce, 2,
                {{Collective::allreduce, 2, 2, 4096, Algorithm::recursive_doubling},
                 {Collective::allreduce, 2, 2, kAnyBytes, Algorithm::ring}});
  replace_rules(t, Collective::broadcast, 4,
                {{Collective::broadcast, 4, 4, kAnyBytes, Algorithm::pipelined_chain}});
  collx::save_tuning_file(path, t);
  TuningTable back = load_tuning_file(path);
  EXPECT_EQ(back.machine, "test");
  EXPECT_EQ(back.segment_bytes, 128u << 10);
  EXPECT_EQ(back.pipeline_depth, 3);
  ASSERT_EQ(back.rules.size(), 3u);
  EXPECT_EQ(back.rules[1].max_bytes, kAnyBytes);
  EXPECT_EQ(select_from(back.rules, Collective::allreduce, 4096, 2), Algorithm::recursive_doubling);
  EXPECT_EQ(select_from(back.rules, Collective::allreduce, 4097, 2), Algorithm::ring);
  // Measuring allreduce on 2 ranks again replaces only those rows.
  replace_rules(back, Collective::allreduce, 2,
                {{Collective::allreduce, 2, 2, kAnyBytes, Algorithm::rabenseifner}});
  ASSERT_EQ(back.rules.size(), 2u);
  EXPECT_EQ(select_from(back.rules, Collective::broadcast, 1, 4), Algorithm::pipelined_chain);
  std::remove(path.c_str());
}

TEST(Tuning, BadFilesAreConfigErrorsNamingTheFile) {
  const std::string path = temp_path("tuning_bad.json");
  for (const char* text : {"not json", R"({"rules": [{"collective": "allreduce"}]})",
                           R"({"rules": [{"collective": "allreduce", "algorithm": "bruck",
                                 "min_ranks": 1, "max_ranks": 2, "max_bytes": 8}]})",
                           R"({"rules": [{"collective": "allreduce", "algorithm": "ring",
                                 "min_ranks": 3, "max_ranks": 2, "max_bytes": 8}]})"}) {
    std::ofstream(path) << text;
    try {
      load_tuning_file(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const collx::Error& e) {
      EXPECT_EQ(e.code(), collx::ErrorCode::config);
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    }
  }
  EXPECT_THROW(load_tuning_file(temp_path("does_not_exist.json")), collx::Error);
  std::remove(path.c_str());
}

TEST(Tuning, AutoReadsTheFileNamedByTheEnvironment) {
  const std::string path = temp_path("tuning_active.json");
  TuningTable t;
  replace_rules(t, Collective::allreduce, 3,
                {{Collective::allreduce, 3, 3, kAnyBytes, Algorithm::double_binary_tree}});
  collx::save_tuning_file(path, t);
  Config c;
  c.tuning_file = path;
  set_config(c);
  EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::automatic, 1 << 20, 3, 0),
            Algorithm::double_binary_tree);
  // Rank counts the file does not cover fall through to the built-in table.
  EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::automatic, 1 << 20, 2, 0),
            select_from(builtin_rules(), Collective::allreduce, 1 << 20, 2));
  set_config(Config{});
  EXPECT_EQ(active_tuning(), nullptr);
  std::remove(path.c_str());
}

TEST(CostModel, ClassicFormulas) {
  using collx::model::cost;
  const double n = 1 << 20;
  const auto ring = cost(Collective::allreduce, Algorithm::ring, 8, n, 256 << 10);
  ASSERT_TRUE(ring);
  EXPECT_DOUBLE_EQ(ring->messages, 14);
  EXPECT_DOUBLE_EQ(ring->bytes, 2.0 * 7 / 8 * n);
  const auto rd = cost(Collective::allreduce, Algorithm::recursive_doubling, 8, n, 256 << 10);
  EXPECT_DOUBLE_EQ(rd->messages, 3);
  EXPECT_DOUBLE_EQ(rd->bytes, 3 * n);
  // A non-power of two pays the fold: two more messages of the whole buffer.
  const auto rd6 = cost(Collective::allreduce, Algorithm::recursive_doubling, 6, n, 256 << 10);
  EXPECT_DOUBLE_EQ(rd6->messages, 2 + 2);
  EXPECT_FALSE(cost(Collective::allreduce, Algorithm::bruck, 8, n, 256 << 10));
  EXPECT_DOUBLE_EQ(cost(Collective::barrier, Algorithm::dissemination, 1000, 0, 1)->messages, 10);
}

// The hierarchical barrier crosses between nodes in ceil(log2 nodes) rounds and climbs the
// node's tree (radix 8: one level for 8 ranks) up and down inside; on one node, or one rank per
// node, it is dissemination.
TEST(CostModel, HierarchicalBarrierCrossesOncePerRoundOfNodes) {
  using collx::model::cost;
  const auto h = cost(Collective::barrier, Algorithm::hierarchical, 1000, 0, 1, 125);
  const auto d = cost(Collective::barrier, Algorithm::dissemination, 1000, 0, 1, 125);
  ASSERT_TRUE(h && d);
  EXPECT_DOUBLE_EQ(h->inter_messages, 7);
  EXPECT_DOUBLE_EQ(h->messages, 2);
  EXPECT_DOUBLE_EQ(cost(Collective::barrier, Algorithm::hierarchical, 1024, 0, 1, 16)->messages, 4);
  EXPECT_DOUBLE_EQ(d->inter_messages + d->local_messages, 10);
  EXPECT_GT(d->inter_messages, h->inter_messages);
  EXPECT_DOUBLE_EQ(cost(Collective::barrier, Algorithm::hierarchical, 64, 0, 1)->messages, 6);
  EXPECT_DOUBLE_EQ(cost(Collective::barrier, Algorithm::hierarchical, 64, 0, 1, 64)->inter_messages,
                   6);
}

TEST(CostModel, LatencyFavoursFewStepsAndBandwidthFavoursFewBytes) {
  collx::model::Machine m;
  m.alpha = 2e-6;
  m.beta = 1.0 / 12.5e9;
  m.gamma = 1.0 / 10e9;
  for (int p : {4, 64, 1024, 4096}) {
    EXPECT_EQ(collx::model::best(Collective::allreduce, p, 8, m), Algorithm::recursive_doubling)
        << p;
    const Algorithm big = collx::model::best(Collective::allreduce, p, 1 << 30, m);
    EXPECT_TRUE(big == Algorithm::ring || big == Algorithm::rabenseifner ||
                big == Algorithm::double_binary_tree)
        << p << " " << collx::to_string(big);
    const auto points = collx::model::crossovers(Collective::allreduce, p, m, 1 << 30);
    ASSERT_GE(points.size(), 2u) << "small and large messages want different algorithms";
    for (std::size_t i = 1; i < points.size(); ++i)
      EXPECT_GT(points[i].bytes, points[i - 1].bytes);
  }
}

// Rows naming shared_memory apply only where the ranks share a segment; elsewhere the next
// matching row decides, and that row is a point-to-point algorithm.
TEST(Selection, SharedMemoryRowsOnlyWithASharedSegment) {
  using collx::detail::builtin_rules;
  using collx::detail::select_from;
  for (Collective c : {Collective::broadcast, Collective::allgather, Collective::reduce}) {
    for (int p : {2, 4, 64}) {
      for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 20, std::size_t{1} << 30}) {
        const Algorithm without = select_from(builtin_rules(), c, bytes, p, false);
        EXPECT_NE(without, Algorithm::shared_memory) << collx::to_string(c) << " " << p;
        EXPECT_TRUE(collx::implements(c, without));
      }
    }
    EXPECT_EQ(select_from(builtin_rules(), c, std::size_t{16} << 20, 4, true),
              Algorithm::shared_memory)
        << collx::to_string(c);
  }
}

// Calls back to back (Machine::calls): one call's cost where calls do not overlap; the tree
// reduce and broadcast, whose consecutive calls overlap, cost less per call, never more, and a
// period that is one level's message where sends are eager, not the ceil(log2 p) levels.
TEST(CostModel, CallsBackToBackOverlapOnlyWhereTheScheduleAllows) {
  using collx::model::seconds;
  collx::model::Machine one;
  one.alpha = 1e-6;
  one.beta = 1e-12;
  one.gamma = 1e-15;
  collx::model::Machine two = one;
  two.calls = 2;
  for (int p : {5, 16, 64}) {
    for (double n : {8.0, 4096.0, double(1 << 20)}) {
      for (int c = 0; c < collx::kCollectiveCount; ++c) {
        const auto collective = static_cast<Collective>(c);
        for (Algorithm a : collx::algorithms_of(collective)) {
          const auto single = collx::model::cost(collective, a, p, n, one.segment_bytes);
          EXPECT_DOUBLE_EQ(*seconds(collective, a, p, n, one), single->seconds(one));
          EXPECT_LE(*seconds(collective, a, p, n, two), single->seconds(one) * (1 + 1e-12));
          const bool overlaps =
              (collective == Collective::reduce || collective == Collective::broadcast) &&
              (a == Algorithm::binomial_tree || a == Algorithm::hierarchical);
          if (!overlaps && a != Algorithm::pipelined_chain && a != Algorithm::linear) {
            EXPECT_DOUBLE_EQ(*seconds(collective, a, p, n, two), single->seconds(one))
                << collx::to_string(collective) << " " << collx::to_string(a);
          }
        }
      }
    }
  }
  // 16 ranks, 8 B: four levels of one latency each for one call; two calls: the first call's
  // four, then one more (the root's farthest child's message), 2.5 latencies a call.
  const double reduce_two = *seconds(Collective::reduce, Algorithm::binomial_tree, 16, 8, two);
  EXPECT_NEAR(reduce_two, (4 + 1) * 1e-6 / 2, 1e-9);
  // From the eager size on a rank also waits for its send up: two levels a period.
  two.eager_bytes = 0;
  EXPECT_NEAR(*seconds(Collective::reduce, Algorithm::binomial_tree, 16, 8, two),
              (4 + 2) * 1e-6 / 2, 1e-9);
}

TEST(CostModel, EveryAlgorithmHasACostAndADescription) {
  for (int c = 0; c < collx::kCollectiveCount; ++c) {
    const auto collective = static_cast<Collective>(c);
    for (Algorithm a : collx::algorithms_of(collective)) {
      EXPECT_TRUE(collx::model::cost(collective, a, 5, 4096, 1024)) << collx::to_string(collective);
      EXPECT_FALSE(collx::model::describe(collective, a).empty()) << collx::to_string(a);
    }
  }
}

}  // namespace

// A row may be for one MPI library only ("mpi"), and null stands for any rank count as for any
// size: the built-in table (lib/data/builtin-rules.json) uses both.
TEST(Tuning, RowsForOneMpiLibraryAndAnyRankCount) {
  const TuningTable t = parse_tuning_table(
      R"({"rules": [
           {"collective": "allreduce", "min_ranks": 2, "max_ranks": null, "max_bytes": 64,
            "algorithm": "ring", "mpi": "mpich", "provenance": "a test"},
           {"collective": "allreduce", "min_ranks": 2, "max_ranks": null, "max_bytes": 64,
            "algorithm": "rabenseifner", "mpi": "openmpi"},
           {"collective": "allreduce", "min_ranks": 2, "max_ranks": null, "max_bytes": null,
            "algorithm": "recursive_doubling"}]})",
      "a test table");
  ASSERT_EQ(t.rules.size(), 2u) << "one of the two libraries' rows is left out";
#if defined(MPICH_VERSION)
  EXPECT_EQ(t.rules[0].algorithm, Algorithm::ring);
#elif defined(OPEN_MPI)
  EXPECT_EQ(t.rules[0].algorithm, Algorithm::rabenseifner);
#endif
  EXPECT_EQ(t.rules[1].max_ranks, kAnyRanks);
  EXPECT_EQ(t.rules[1].max_bytes, kAnyBytes);
  try {
    parse_tuning_table(R"({"rules": [{"collective": "allreduce", "min_ranks": 1, "max_ranks": 2,
                           "max_bytes": 8, "algorithm": "ring", "mpi": "lam"}]})",
                       "a test table");
    ADD_FAILURE() << "accepted an unknown MPI library";
  } catch (const collx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("a test table"), std::string::npos) << e.what();
  }
}

// The node rules are the built-in table's: a tuning file's would be overridden by auto's trials
// (they consult the layout-free rows only), so a file that has some is an error, not ignored.
TEST(Tuning, NodeRulesAreTheBuiltInTablesOnly) {
  const std::string path = temp_path("tuning_node_rules.json");
  std::ofstream(path) << R"({"rules": [], "node_rules": [{"collective": "allreduce",
      "min_bytes": 0, "max_bytes": null, "uniform_only": true, "algorithm": "hierarchical"}]})";
  EXPECT_THROW(load_tuning_file(path), collx::Error);
  std::remove(path.c_str());
  EXPECT_FALSE(node_rules().empty());
  bool many_nodes = false;
  for (const NodeRule& rule : node_rules())
    many_nodes = many_nodes || rule.min_nodes >= 8;
  EXPECT_TRUE(many_nodes) << "the rules from SimGrid's runs at 8 nodes and more";
}
