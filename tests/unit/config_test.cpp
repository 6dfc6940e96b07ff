// COLLX_* parsing and algorithm selection.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "node_layout.hpp"

#include "collx/error.hpp"
#include "config.hpp"
#include "cost_model.hpp"
#include "selector.hpp"
#include "transport.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::kAnyBytes;
using collx::TuningRule;
using namespace collx::detail;

TEST(Config, ByteSizes) {
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("256K"), 256u << 10);
  EXPECT_EQ(parse_byte_size("4M"), 4u << 20);
  EXPECT_EQ(parse_byte_size("1G"), 1u << 30);
  EXPECT_EQ(parse_byte_size(" 64 KiB "), 64u << 10);
  EXPECT_FALSE(parse_byte_size("4X"));
  EXPECT_FALSE(parse_byte_size("M"));
  EXPECT_FALSE(parse_byte_size(""));
}

TEST(Config, AlgorithmOverrides) {
  std::array<std::optional<Algorithm>, collx::kCollectiveCount> forced{};
  EXPECT_FALSE(parse_algorithm_overrides("allreduce:ring", forced));
  EXPECT_EQ(forced[static_cast<int>(Collective::allreduce)], Algorithm::ring);
  EXPECT_FALSE(parse_algorithm_overrides("allreduce:auto", forced));
  EXPECT_FALSE(forced[static_cast<int>(Collective::allreduce)].has_value());
  EXPECT_FALSE(parse_algorithm_overrides(" allreduce : rabenseifner ; ", forced));
  EXPECT_EQ(forced[static_cast<int>(Collective::allreduce)], Algorithm::rabenseifner);

  auto err = parse_algorithm_overrides("allreduce", forced);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("collective:algorithm"), std::string::npos);
  err = parse_algorithm_overrides("allreduce:bubble", forced);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("bubble"), std::string::npos);
  // An algorithm that exists but not for this collective is the selector's to refuse (the
  // configuration is below the registry): see Selector.ForcedAlgorithmMustExist.
  EXPECT_FALSE(parse_algorithm_overrides("allreduce:bruck", forced));
  EXPECT_TRUE(parse_algorithm_overrides("teleport:ring", forced));
}

TEST(Config, EnvironmentIsParsedAndRejectedWithTheVariableName) {
  setenv("COLLX_ALGO", "allreduce:recursive_doubling", 1);
  setenv("COLLX_CHUNK_BYTES", "128K", 1);
  setenv("COLLX_PIPELINE_DEPTH", "3", 1);
  setenv("COLLX_TIMEOUT", "2.5", 1);
  setenv("COLLX_DEBUG", "INFO", 1);
  setenv("COLLX_CHECK", "1", 1);
  setenv("COLLX_PROGRESS_THREAD", "1", 1);
  setenv("COLLX_PROGRESS_INTERVAL_US", "25", 1);
  const Config c = config_from_environment();
  EXPECT_TRUE(c.progress_thread);
  EXPECT_EQ(c.progress_interval_us, 25);
  EXPECT_EQ(c.algorithm[static_cast<int>(Collective::allreduce)], Algorithm::recursive_doubling);
  EXPECT_EQ(c.segment_bytes, 128u << 10);
  EXPECT_EQ(c.pipeline_depth, 3);
  EXPECT_DOUBLE_EQ(c.timeout_seconds, 2.5);
  EXPECT_EQ(c.debug, DebugLevel::info);
  EXPECT_TRUE(c.check);
  // TRIALS: auto's results without the per-call lines, which would put calls on collx's path.
  setenv("COLLX_DEBUG", "TRIALS", 1);
  EXPECT_EQ(config_from_environment().debug, DebugLevel::trials);
  EXPECT_LT(DebugLevel::trials, DebugLevel::info);
  EXPECT_GT(DebugLevel::trials, DebugLevel::warn);
  setenv("COLLX_DEBUG", "INFO", 1);

  setenv("COLLX_PIPELINE_DEPTH", "0", 1);
  try {
    config_from_environment();
    FAIL() << "COLLX_PIPELINE_DEPTH=0 accepted";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::config);
    EXPECT_NE(std::string(e.what()).find("COLLX_PIPELINE_DEPTH"), std::string::npos);
  }
  unsetenv("COLLX_PIPELINE_DEPTH");
  setenv("COLLX_TIMEOUT", "soon", 1);
  EXPECT_THROW(config_from_environment(), collx::Error);
  setenv("COLLX_PROGRESS_THREAD", "yes", 1);
  EXPECT_THROW(config_from_environment(), collx::Error);
  unsetenv("COLLX_PROGRESS_THREAD");
  for (const char* v : {"COLLX_ALGO", "COLLX_CHUNK_BYTES", "COLLX_TIMEOUT", "COLLX_DEBUG",
                        "COLLX_CHECK", "COLLX_PROGRESS_THREAD", "COLLX_PROGRESS_INTERVAL_US"}) {
    unsetenv(v);
  }
  const Config defaults = config_from_environment();
  EXPECT_EQ(defaults.segment_bytes, 0u);
  EXPECT_FALSE(defaults.check);
  EXPECT_FALSE(defaults.progress_thread);
}

// COLLX_AUTOTUNE: 0 off, 1 (the default) where the algorithm cannot change the result's bits,
// all for floating-point sums too (empty: unset, like every COLLX_ variable); anything else is
// an error naming the variable.
TEST(Config, AutotuneModes) {
  unsetenv("COLLX_AUTOTUNE");
  EXPECT_EQ(config_from_environment().autotune, AutotuneMode::exact);
  setenv("COLLX_AUTOTUNE", "0", 1);
  EXPECT_EQ(config_from_environment().autotune, AutotuneMode::off);
  setenv("COLLX_AUTOTUNE", " 1 ", 1);
  EXPECT_EQ(config_from_environment().autotune, AutotuneMode::exact);
  setenv("COLLX_AUTOTUNE", "all", 1);
  EXPECT_EQ(config_from_environment().autotune, AutotuneMode::all);
  for (const char* bad : {"yes", "2", "ALL"}) {
    setenv("COLLX_AUTOTUNE", bad, 1);
    try {
      (void)config_from_environment();
      ADD_FAILURE() << "COLLX_AUTOTUNE=\"" << bad << "\" accepted";
    } catch (const collx::Error& e) {
      EXPECT_NE(std::string(e.what()).find("COLLX_AUTOTUNE"), std::string::npos) << e.what();
    }
  }
  unsetenv("COLLX_AUTOTUNE");
}

// The sizes have one name each (segment: the pipeline's; slot: the shared ring's); the old names
// are still read where the new one is unset, and an error names the variable that was read.
TEST(Config, SizeVariablesTakeTheirOldNamesAsAliases) {
  for (const char* v : {"COLLX_SEGMENT_BYTES", "COLLX_CHUNK_BYTES", "COLLX_SHM_SLOT_BYTES",
                        "COLLX_SHM_CHUNK_BYTES"}) {
    unsetenv(v);
  }
  setenv("COLLX_SEGMENT_BYTES", "64K", 1);
  setenv("COLLX_CHUNK_BYTES", "1M", 1);
  setenv("COLLX_SHM_SLOT_BYTES", "128K", 1);
  setenv("COLLX_SHM_CHUNK_BYTES", "2M", 1);
  Config c = config_from_environment();
  EXPECT_EQ(c.segment_bytes, 64u << 10) << "the new name wins over the old";
  EXPECT_EQ(c.shm_slot_bytes, 128u << 10);
  unsetenv("COLLX_SEGMENT_BYTES");
  unsetenv("COLLX_SHM_SLOT_BYTES");
  c = config_from_environment();
  EXPECT_EQ(c.segment_bytes, 1u << 20);
  EXPECT_EQ(c.shm_slot_bytes, 2u << 20);
  setenv("COLLX_SHM_CHUNK_BYTES", "1K", 1);
  try {
    config_from_environment();
    FAIL() << "a 1 KiB slot accepted";
  } catch (const collx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("COLLX_SHM_CHUNK_BYTES"), std::string::npos) << e.what();
  }
  unsetenv("COLLX_CHUNK_BYTES");
  unsetenv("COLLX_SHM_CHUNK_BYTES");
}

TEST(Config, TransportIsMpiByDefaultAndUcxOnRequest) {
  unsetenv("COLLX_TRANSPORT");
  EXPECT_EQ(config_from_environment().transport, collx::TransportChoice::mpi);
  setenv("COLLX_TRANSPORT", "ucx", 1);
  EXPECT_EQ(config_from_environment().transport, collx::TransportChoice::ucx);
  setenv("COLLX_TRANSPORT", " mpi ", 1);
  EXPECT_EQ(config_from_environment().transport, collx::TransportChoice::mpi);
  setenv("COLLX_TRANSPORT", "verbs", 1);
  try {
    config_from_environment();
    FAIL() << "COLLX_TRANSPORT=verbs accepted";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::config);
    EXPECT_NE(std::string(e.what()).find("COLLX_TRANSPORT"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mpi or ucx"), std::string::npos) << e.what();
  }
  unsetenv("COLLX_TRANSPORT");
  EXPECT_EQ(to_string(collx::TransportChoice::ucx), "ucx");
}

TEST(Config, CudaAwareIsDetectedUnlessOverridden) {
  unsetenv("COLLX_CUDA_AWARE");
  EXPECT_FALSE(config_from_environment().cuda_aware.has_value());
  setenv("COLLX_CUDA_AWARE", "1", 1);
  EXPECT_EQ(config_from_environment().cuda_aware, std::optional<bool>(true));
  setenv("COLLX_CUDA_AWARE", " 0", 1);
  EXPECT_EQ(config_from_environment().cuda_aware, std::optional<bool>(false));
  setenv("COLLX_CUDA_AWARE", "yes", 1);
  try {
    config_from_environment();
    FAIL() << "COLLX_CUDA_AWARE=yes accepted";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::config);
    EXPECT_NE(std::string(e.what()).find("COLLX_CUDA_AWARE"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0 or 1"), std::string::npos) << e.what();
  }
  unsetenv("COLLX_CUDA_AWARE");
}

// COLLX_SHM_DIRECT and COLLX_SHM_BOUNCE: unset (the library decides), 1, 0, nothing else.
TEST(Config, DirectReadsAndTheirBounceAreAutomaticUnlessForcedOnOrOff) {
  const auto check = [](const char* name, std::optional<bool> Config::*field) {
    unsetenv(name);
    EXPECT_FALSE((config_from_environment().*field).has_value()) << name;
    setenv(name, "1", 1);
    EXPECT_EQ(config_from_environment().*field, std::optional<bool>(true)) << name;
    setenv(name, "0", 1);
    EXPECT_EQ(config_from_environment().*field, std::optional<bool>(false)) << name;
    setenv(name, "auto", 1);
    EXPECT_THROW(config_from_environment(), collx::Error) << name;
    unsetenv(name);
  };
  check("COLLX_SHM_DIRECT", &Config::shm_direct);
  check("COLLX_SHM_BOUNCE", &Config::shm_bounce);
}

TEST(Config, RingStoresAreChosenAutomaticallyUnlessNamed) {
  unsetenv("COLLX_SHM_STORES");
  EXPECT_EQ(config_from_environment().shm_stores, RingStorePolicy::automatic);
  setenv("COLLX_SHM_STORES", "streaming", 1);
  EXPECT_EQ(config_from_environment().shm_stores, RingStorePolicy::streaming);
  setenv("COLLX_SHM_STORES", " plain ", 1);
  EXPECT_EQ(config_from_environment().shm_stores, RingStorePolicy::plain);
  setenv("COLLX_SHM_STORES", "auto", 1);
  EXPECT_EQ(config_from_environment().shm_stores, RingStorePolicy::automatic);
  setenv("COLLX_SHM_STORES", "nt", 1);
  try {
    config_from_environment();
    FAIL() << "COLLX_SHM_STORES=nt accepted";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::config);
    EXPECT_NE(std::string(e.what()).find("COLLX_SHM_STORES"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("auto, plain or streaming"), std::string::npos)
        << e.what();
  }
  unsetenv("COLLX_SHM_STORES");
}

TEST(Selector, FirstMatchingRuleWins) {
  const TuningRule rules[] = {
      {Collective::allreduce, 1, 2, 100, Algorithm::recursive_doubling},
      {Collective::allreduce, 1, kAnyRanks, kAnyBytes, Algorithm::ring},
  };
  EXPECT_EQ(select_from(rules, Collective::allreduce, 100, 2), Algorithm::recursive_doubling);
  EXPECT_EQ(select_from(rules, Collective::allreduce, 101, 2), Algorithm::ring);
  EXPECT_EQ(select_from(rules, Collective::allreduce, 8, 3), Algorithm::ring);
}

TEST(Selector, BuiltinTableCoversEverySizeAndRankCount) {
  for (int p : {1, 2, 3, 4, 5, 8, 64, 4096}) {
    for (std::size_t bytes : {std::size_t{0}, std::size_t{8}, std::size_t{4096},
                              std::size_t{1} << 20, std::size_t{1} << 40}) {
      const Algorithm a = select_from(builtin_rules(), Collective::allreduce, bytes, p);
      EXPECT_TRUE(collx::implements(Collective::allreduce, a));
    }
  }
}

TEST(Selector, ExplicitRequestMustExist) {
  EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::ring, 8, 2, 0), Algorithm::ring);
  try {
    resolve_algorithm(Collective::allreduce, Algorithm::bruck, 8, 2, 0);
    FAIL() << "bruck accepted for allreduce";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::unsupported);
    EXPECT_EQ(e.collective(), "allreduce");
  }
}

// COLLX_ALGO naming an algorithm the collective does not have: a configuration error at the
// first call that the table would decide, naming the collective and the algorithm.
TEST(Selector, ForcedAlgorithmMustExist) {
  Config c;
  c.algorithm[static_cast<int>(Collective::allreduce)] = Algorithm::bruck;
  set_config(c);
  try {
    resolve_algorithm(Collective::allreduce, Algorithm::automatic, 8, 2, 0);
    ADD_FAILURE() << "bruck accepted for allreduce";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::config);
    EXPECT_NE(std::string(e.what()).find("has no algorithm \"bruck\""), std::string::npos)
        << e.what();
  }
  // An explicit choice still overrides it.
  EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::ring, 8, 2, 0), Algorithm::ring);
  set_config(Config{});
}

TEST(Selector, EnvironmentOverridesTheTableButNotAnExplicitChoice) {
  Config c;
  c.algorithm[static_cast<int>(Collective::allreduce)] = Algorithm::rabenseifner;
  set_config(c);
  EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::automatic, 8, 2, 0),
            Algorithm::rabenseifner);
  EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::ring, 8, 2, 0), Algorithm::ring);
  set_config(Config{});
  EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::automatic, 8, 2, 0),
            select_from(builtin_rules(), Collective::allreduce, 8, 2));
}

}  // namespace

// The per-collective index of the built-in table selects exactly what the whole table does
// (it relies on each collective's rows being contiguous).
TEST(Selector, PerCollectiveIndexAgreesWithTheWholeTable) {
  using namespace collx::detail;
  for (int c = 0; c < collx::kCollectiveCount; ++c) {
    const auto collective = static_cast<collx::Collective>(c);
    for (int p : {1, 2, 3, 4, 5, 8, 9, 64, 4096}) {
      for (std::size_t bytes = 0; bytes <= (std::size_t{1} << 30); bytes = bytes * 2 + 1) {
        ASSERT_EQ(select_from(builtin_rules_of(collective), collective, bytes, p),
                  select_from(builtin_rules(), collective, bytes, p))
            << to_string(collective) << " p=" << p << " bytes=" << bytes;
      }
    }
  }
}

// COLLX_NODE_LAYOUT: "NxK" or a list of node sizes; anything else is an error that names it.
TEST(Config, NodeLayoutIsParsedStrictly) {
  using namespace collx::detail;
  std::vector<int> sizes;
  EXPECT_EQ(parse_node_layout("2x2", sizes), std::nullopt);
  EXPECT_EQ(sizes, (std::vector<int>{2, 2}));
  EXPECT_EQ(parse_node_layout(" 1x3 ", sizes), std::nullopt);
  EXPECT_EQ(sizes, (std::vector<int>{3}));
  EXPECT_EQ(parse_node_layout("3,1", sizes), std::nullopt);
  EXPECT_EQ(sizes, (std::vector<int>{3, 1}));
  EXPECT_EQ(parse_node_layout("4", sizes), std::nullopt);
  EXPECT_EQ(sizes, (std::vector<int>{4}));
  EXPECT_EQ(parse_node_layout("2 x 3", sizes), std::nullopt);
  EXPECT_EQ(sizes, (std::vector<int>{3, 3}));
  for (const char* bad : {"", "x", "2x", "x2", "0x2", "2x0", "2x2x2", "-1,3", "3,", ",3", "3,,1",
                          "3;1", "two", "2x2 nodes", "1.5,2", "99999999999", "2048x1024"}) {
    sizes = {7};
    EXPECT_NE(parse_node_layout(bad, sizes), std::nullopt) << "\"" << bad << "\"";
    EXPECT_EQ(sizes, (std::vector<int>{7})) << "\"" << bad << "\"";
  }
  setenv("COLLX_NODE_LAYOUT", "2x", 1);
  try {
    (void)config_from_environment();
    ADD_FAILURE() << "COLLX_NODE_LAYOUT=2x accepted";
  } catch (const collx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("COLLX_NODE_LAYOUT"), std::string::npos) << e.what();
  }
  setenv("COLLX_NODE_LAYOUT", "3,1", 1);
  EXPECT_EQ(config_from_environment().node_layout, (std::vector<int>{3, 1}));
  unsetenv("COLLX_NODE_LAYOUT");
  EXPECT_TRUE(config_from_environment().node_layout.empty());
}

// The layout's groups: nodes by their lowest rank, leaders, the multi-leader form's peers.
TEST(NodeLayout, GroupsFromKeysAndSizes) {
  using collx::patterns::NodeLayout;
  const int keys[] = {5, 9, 5, 9, 7};
  const NodeLayout l = NodeLayout::from_keys(keys);
  EXPECT_EQ(l.size(), 5);
  EXPECT_EQ(l.nodes(), 3);
  EXPECT_FALSE(l.uniform());
  EXPECT_TRUE(l.hierarchical());
  EXPECT_EQ(l.node_of(3), 1);
  EXPECT_EQ(l.local_rank(2), 1);
  EXPECT_EQ(std::vector<int>(l.members(0).begin(), l.members(0).end()), (std::vector<int>{0, 2}));
  EXPECT_EQ(std::vector<int>(l.leaders().begin(), l.leaders().end()), (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(std::vector<int>(l.peers(1).begin(), l.peers(1).end()), (std::vector<int>{2, 3}));
  EXPECT_EQ(l.describe(), "3 nodes, 2+2+1 ranks (not uniform)");
  const int sizes[] = {2, 2};
  EXPECT_EQ(NodeLayout::from_sizes(sizes).describe(), "2 nodes x 2 ranks (uniform)");
  EXPECT_FALSE(NodeLayout(4).hierarchical());
  const int singles[] = {1, 1, 1};
  EXPECT_FALSE(NodeLayout::from_sizes(singles).hierarchical());
}

// auto across nodes: multi_leader for large allreduces where every node holds as many ranks;
// the flat table on one node, with one rank per node, for small sizes and uneven layouts.
TEST(Selector, NodeRulesKnowTheLayout) {
  using namespace collx::detail;
  const std::size_t big = std::size_t{1} << 20;
  const NodeShape one_node{1, 4, true};
  const NodeShape two_by_two{2, 2, true};
  const NodeShape singles{4, 1, true};
  const NodeShape uneven{2, 3, false};
  EXPECT_EQ(
      resolve_algorithm(Collective::allreduce, Algorithm::automatic, big, 4, 0, false, two_by_two),
      Algorithm::multi_leader);
  for (const NodeShape& flat : {one_node, singles, uneven}) {
    EXPECT_EQ(
        resolve_algorithm(Collective::allreduce, Algorithm::automatic, big, 4, 0, false, flat),
        select_from(builtin_rules(), Collective::allreduce, big, 4));
  }
  EXPECT_EQ(
      resolve_algorithm(Collective::allreduce, Algorithm::automatic, 8, 4, 0, false, two_by_two),
      select_from(builtin_rules(), Collective::allreduce, 8, 4));
  // From 2 KiB to 64 KiB on uniform nodes: multi_leader on two nodes, hierarchical on more
  // (measured on the emulated cluster).
  const NodeShape four_by_two{4, 2, true};
  for (std::size_t bytes : {std::size_t{2049}, std::size_t{4096}, std::size_t{64} << 10}) {
    EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::automatic, bytes, 4, 0, false,
                                two_by_two),
              Algorithm::multi_leader)
        << bytes;
    EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::automatic, bytes, 8, 0, false,
                                four_by_two),
              Algorithm::hierarchical)
        << bytes;
    for (const NodeShape& flat : {one_node, uneven}) {
      EXPECT_EQ(
          resolve_algorithm(Collective::allreduce, Algorithm::automatic, bytes, 4, 0, false, flat),
          select_from(builtin_rules(), Collective::allreduce, bytes, 4))
          << bytes;
    }
  }
  // One rank per node: recursive doubling to 32 KiB (every hop crosses the network),
  // Rabenseifner to 256 KiB, then the flat table.
  for (std::size_t bytes : {std::size_t{8}, std::size_t{4096}, std::size_t{32} << 10}) {
    EXPECT_EQ(
        resolve_algorithm(Collective::allreduce, Algorithm::automatic, bytes, 4, 0, false, singles),
        Algorithm::recursive_doubling)
        << bytes;
  }
  EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::automatic, std::size_t{64} << 10, 4,
                              0, false, singles),
            Algorithm::rabenseifner);
  EXPECT_EQ(resolve_algorithm(Collective::allreduce, Algorithm::automatic, std::size_t{1} << 20, 4,
                              0, false, singles),
            select_from(builtin_rules(), Collective::allreduce, std::size_t{1} << 20, 4));
  EXPECT_EQ(
      resolve_algorithm(Collective::allreduce, Algorithm::automatic, 2048, 4, 0, false, two_by_two),
      select_from(builtin_rules(), Collective::allreduce, 2048, 4));
  // Broadcast (257 B to 1 MiB) and reduce (to 16 KiB): hierarchical for any layout across nodes;
  // below and above, and allgather and reduce_scatter: the flat table.
  for (Collective c : {Collective::broadcast, Collective::reduce}) {
    const std::size_t edge = c == Collective::broadcast ? big : 16 << 10;
    const std::size_t low = c == Collective::broadcast ? 257 : 8;
    EXPECT_EQ(resolve_algorithm(c, Algorithm::automatic, edge + 1, 4, 0, false, two_by_two),
              select_from(builtin_rules(), c, edge + 1, 4));
    if (c == Collective::broadcast) {
      for (std::size_t bytes : {std::size_t{8}, std::size_t{256}}) {
        for (const NodeShape& across : {two_by_two, uneven}) {
          EXPECT_EQ(resolve_algorithm(c, Algorithm::automatic, bytes, 4, 0, false, across),
                    select_from(builtin_rules(), c, bytes, 4))
              << bytes;
        }
      }
    }
    for (std::size_t bytes : {low, edge}) {
      for (const NodeShape& across : {two_by_two, uneven}) {
        EXPECT_EQ(resolve_algorithm(c, Algorithm::automatic, bytes, 4, 0, false, across),
                  Algorithm::hierarchical);
      }
      for (const NodeShape& flat : {one_node, singles}) {
        // One rank per node, broadcast to 32 KiB: linear (below).
        if (c == Collective::broadcast && flat.max_per_node == 1 && bytes <= (32 << 10)) continue;
        EXPECT_EQ(resolve_algorithm(c, Algorithm::automatic, bytes, 4, 0, false, flat),
                  select_from(builtin_rules(), c, bytes, 4));
      }
    }
  }
  // Broadcast with one rank on each of up to 4 nodes, to 32 KiB: linear; on more nodes, and
  // above, the flat table, but on 8 nodes and more the k-nomial tree to 4 KiB and scatter +
  // allgather from 16 KiB (the rules for many nodes, Selector.NodeRulesForManyNodes).
  const NodeShape eight_singles{8, 1, true};
  for (std::size_t bytes : {std::size_t{0}, std::size_t{8}, std::size_t{4096},
                            std::size_t{16} << 10, std::size_t{32} << 10}) {
    EXPECT_EQ(
        resolve_algorithm(Collective::broadcast, Algorithm::automatic, bytes, 4, 0, false, singles),
        Algorithm::linear)
        << bytes;
    EXPECT_EQ(resolve_algorithm(Collective::broadcast, Algorithm::automatic, bytes, 8, 0, false,
                                eight_singles),
              bytes >= (std::size_t{16} << 10) ? Algorithm::scatter_allgather
              : bytes <= 4096                  ? Algorithm::knomial_tree
                              : select_from(builtin_rules(), Collective::broadcast, bytes, 8))
        << bytes;
    EXPECT_EQ(resolve_algorithm(Collective::broadcast, Algorithm::automatic, bytes, 4, 0, false,
                                two_by_two),
              bytes > 256 ? Algorithm::hierarchical
                          : select_from(builtin_rules(), Collective::broadcast, bytes, 4))
        << bytes;
  }
  for (std::size_t bytes : {(std::size_t{32} << 10) + 1, std::size_t{1} << 20}) {
    EXPECT_EQ(
        resolve_algorithm(Collective::broadcast, Algorithm::automatic, bytes, 4, 0, false, singles),
        select_from(builtin_rules(), Collective::broadcast, bytes, 4))
        << bytes;
  }
  EXPECT_EQ(
      resolve_algorithm(Collective::allgather, Algorithm::automatic, big, 4, 0, false, two_by_two),
      select_from(builtin_rules(), Collective::allgather, big, 4));
  // Reduce-scatter from 4 KiB to 512 KiB on two uniform nodes of several ranks: hierarchical
  // (measured on the emulated cluster); below, above, on more nodes, on uneven ones or with one
  // rank per node: the flat table.
  const std::size_t half = std::size_t{512} << 10;
  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{64} << 10, half}) {
    EXPECT_EQ(resolve_algorithm(Collective::reduce_scatter, Algorithm::automatic, bytes, 4, 0,
                                false, two_by_two),
              Algorithm::hierarchical)
        << bytes;
    for (const NodeShape& other : {four_by_two, uneven, singles, one_node}) {
      const int p = other.nodes * other.max_per_node;
      EXPECT_EQ(resolve_algorithm(Collective::reduce_scatter, Algorithm::automatic, bytes, p, 0,
                                  false, other),
                select_from(builtin_rules(), Collective::reduce_scatter, bytes, p))
          << bytes;
    }
  }
  for (std::size_t bytes : {std::size_t{2} << 10, half + 1}) {
    EXPECT_EQ(resolve_algorithm(Collective::reduce_scatter, Algorithm::automatic, bytes, 4, 0,
                                false, two_by_two),
              select_from(builtin_rules(), Collective::reduce_scatter, bytes, 4))
        << bytes;
  }
}

// The table's choice for a call of `bytes` on every rank of `shape`.
collx::Algorithm pick(collx::Collective c, std::size_t bytes,
                      const collx::detail::NodeShape& shape) {
  return collx::detail::resolve_algorithm(c, collx::Algorithm::automatic, bytes,
                                          shape.nodes * shape.max_per_node, 0, false, shape);
}

// Many nodes (8 and more; docs/SCALE.md): allreduce on nodes of several ranks takes hierarchical
// above 2 KiB to 8 KiB (on nodes of 8 ranks from 513 B), Rabenseifner from 8 KiB to 128 KiB and
// multi_leader above (on 8 nodes of 8 ranks the ring above 4 MiB); with one rank per node,
// Rabenseifner above 256 KiB; reduce Rabenseifner from 64 KiB (below it, on nodes of 8 ranks, the
// binomial tree); reduce_scatter the butterfly from 8 KiB to 128 KiB (from 1 KiB on 8 nodes of 8)
// and hierarchical above (one rank per node: the butterfly from 4 KiB); broadcast with one rank per
// node scatter + allgather from 16 KiB to 512 KiB, and the k-nomial tree to 4 KiB (also on two
// nodes of 8 ranks or more). Fewer nodes keep the rows measured on the emulated cluster.
TEST(Selector, NodeRulesForManyNodes) {
  using namespace collx::detail;
  const NodeShape eight_by_eight{8, 8, true};
  const NodeShape four_by_eight{4, 8, true};
  const NodeShape many_by_eight{128, 8, true};
  const NodeShape eight_singles{8, 1, true};
  const NodeShape many_singles{1024, 1, true};
  const NodeShape four_singles{4, 1, true};
  const std::size_t KiB = 1024, MiB = KiB * KiB;
  for (const NodeShape& shape : {eight_by_eight, many_by_eight}) {
    EXPECT_EQ(pick(Collective::allreduce, 4 * KiB, shape), Algorithm::hierarchical);
    // Above 512 B to 2 KiB on nodes of 8 ranks hierarchical too (scale-12); up to 512 B the
    // table's recursive doubling.
    for (std::size_t bytes : {std::size_t{513}, 1 * KiB, 2 * KiB})
      EXPECT_EQ(pick(Collective::allreduce, bytes, shape), Algorithm::hierarchical) << bytes;
    for (std::size_t bytes : {std::size_t{16}, std::size_t{512}})
      EXPECT_EQ(pick(Collective::allreduce, bytes, shape),
                select_from(builtin_rules(), Collective::allreduce, bytes,
                            shape.nodes * shape.max_per_node))
          << bytes;
    for (std::size_t bytes : {8 * KiB + 1, 64 * KiB, 128 * KiB})
      EXPECT_EQ(pick(Collective::allreduce, bytes, shape), Algorithm::rabenseifner) << bytes;
    for (std::size_t bytes : {128 * KiB + 1, 1 * MiB, 4 * MiB})
      EXPECT_EQ(pick(Collective::allreduce, bytes, shape), Algorithm::multi_leader) << bytes;
    // Above 4 MiB on 8 nodes exactly the ring (the torus and the dragonfly: "The ring on 8 nodes
    // of 8 ranks"); multi_leader on more nodes.
    for (std::size_t bytes : {4 * MiB + 1, 64 * MiB})
      EXPECT_EQ(pick(Collective::allreduce, bytes, shape),
                shape.nodes == 8 ? Algorithm::ring : Algorithm::multi_leader)
          << shape.nodes << " nodes, " << bytes;
    for (std::size_t bytes : {64 * KiB, 1 * MiB, 64 * MiB})
      EXPECT_EQ(pick(Collective::reduce, bytes, shape), Algorithm::rabenseifner) << bytes;
    // Below 64 KiB on nodes of 8 ranks the binomial tree (Selector.ReduceBinomialOnNodesOfEight).
    for (std::size_t bytes : {std::size_t{16}, 4 * KiB, 16 * KiB, 64 * KiB - 1})
      EXPECT_EQ(pick(Collective::reduce, bytes, shape), Algorithm::binomial_tree) << bytes;
    for (std::size_t bytes : {8 * KiB + 1, 128 * KiB})
      EXPECT_EQ(pick(Collective::reduce_scatter, bytes, shape), Algorithm::butterfly) << bytes;
    for (std::size_t bytes : {128 * KiB + 1, 2 * MiB, 64 * MiB})
      EXPECT_EQ(pick(Collective::reduce_scatter, bytes, shape), Algorithm::hierarchical) << bytes;
    // From 1 KiB on 8 nodes exactly (the simulated layout), from 8 KiB + 1 on more.
    const std::size_t butterfly_from = shape.nodes == 8 ? 1 * KiB : 8 * KiB + 1;
    for (std::size_t bytes : {std::size_t{512}, 1 * KiB, 4 * KiB, 8 * KiB}) {
      EXPECT_EQ(pick(Collective::reduce_scatter, bytes, shape),
                bytes >= butterfly_from ? Algorithm::butterfly
                                        : select_from(builtin_rules(), Collective::reduce_scatter,
                                                      bytes, shape.nodes * shape.max_per_node))
          << shape.nodes << " nodes, " << bytes;
    }
  }
  EXPECT_EQ(pick(Collective::allreduce, 64 * KiB, four_by_eight), Algorithm::hierarchical);
  // 1 KiB on fewer than 8 nodes, or on 8 nodes of fewer than 8 ranks: the table's.
  EXPECT_EQ(pick(Collective::allreduce, 1 * KiB, four_by_eight),
            select_from(builtin_rules(), Collective::allreduce, 1 * KiB, 32));
  EXPECT_EQ(pick(Collective::allreduce, 1 * KiB, NodeShape{8, 4, true}),
            select_from(builtin_rules(), Collective::allreduce, 1 * KiB, 32));
  EXPECT_EQ(pick(Collective::allreduce, 1 * MiB, four_by_eight), Algorithm::multi_leader);
  EXPECT_EQ(pick(Collective::reduce, 1 * MiB, four_by_eight),
            select_from(builtin_rules(), Collective::reduce, 1 * MiB, 32));
  for (const NodeShape& shape : {eight_singles, many_singles}) {
    const int p = shape.nodes;
    for (std::size_t bytes : {256 * KiB + 1, 1 * MiB, 64 * MiB}) {
      EXPECT_EQ(pick(Collective::allreduce, bytes, shape), Algorithm::rabenseifner) << bytes;
      EXPECT_EQ(pick(Collective::reduce, bytes, shape), Algorithm::rabenseifner) << bytes;
      // On 16 nodes or fewer the ring from 512 KiB (Selector.NodeRulesForSixteenSingles).
      EXPECT_EQ(pick(Collective::reduce_scatter, bytes, shape),
                shape.nodes <= 16 && bytes > 512 * KiB ? Algorithm::ring : Algorithm::butterfly)
          << bytes;
    }
    EXPECT_EQ(pick(Collective::reduce, 64 * KiB, shape), Algorithm::rabenseifner);
    EXPECT_EQ(pick(Collective::reduce, 64 * KiB - 1, shape),
              select_from(builtin_rules(), Collective::reduce, 64 * KiB - 1, p));
    for (std::size_t bytes : {16 * KiB, 64 * KiB, 512 * KiB})
      EXPECT_EQ(pick(Collective::broadcast, bytes, shape), Algorithm::scatter_allgather) << bytes;
    for (std::size_t bytes : {16 * KiB - 1, 512 * KiB + 1})
      EXPECT_NE(pick(Collective::broadcast, bytes, shape), Algorithm::scatter_allgather) << bytes;
  }
  EXPECT_EQ(pick(Collective::broadcast, 64 * KiB, four_singles),
            select_from(builtin_rules(), Collective::broadcast, 64 * KiB, 4));
  EXPECT_NE(pick(Collective::broadcast, 64 * KiB, eight_by_eight), Algorithm::scatter_allgather);
  // Broadcast to 4 KiB: the k-nomial tree on nodes of 8 ranks or more (two nodes included) and
  // with one rank on each of 8 nodes or more; nodes of fewer ranks and up to 4 single nodes keep
  // the emulated cluster's rows (hierarchical from 257 B, linear).
  const NodeShape two_by_eight{2, 8, true};
  const NodeShape two_by_two{2, 2, true};
  for (std::size_t bytes : {std::size_t{0}, std::size_t{8}, 1 * KiB, 4 * KiB}) {
    for (const NodeShape& shape :
         {two_by_eight, eight_by_eight, many_by_eight, eight_singles, many_singles}) {
      EXPECT_EQ(pick(Collective::broadcast, bytes, shape), Algorithm::knomial_tree) << bytes;
    }
    EXPECT_NE(pick(Collective::broadcast, bytes, four_singles), Algorithm::knomial_tree);
    EXPECT_NE(pick(Collective::broadcast, bytes, two_by_two), Algorithm::knomial_tree);
  }
  EXPECT_NE(pick(Collective::broadcast, 4 * KiB + 1, eight_by_eight), Algorithm::knomial_tree);
  EXPECT_EQ(pick(Collective::allreduce, 1 * MiB, four_singles),
            select_from(builtin_rules(), Collective::allreduce, 1 * MiB, 4));
}

// Two nodes of 8 ranks (simulated on SMPI's fat tree, torus and dragonfly: docs/SCALE.md, "Two
// nodes of 8 ranks"): allreduce Rabenseifner from 2 KiB to 256 KiB and the ring to 1 MiB;
// reduce_scatter the butterfly from 1 KiB to 128 KiB, the ring to 1 MiB, hierarchical above;
// reduce Rabenseifner from 128 KiB to 512 KiB. Two nodes of fewer ranks (the emulated cluster's
// 2 x 2, where the rows of two nodes were measured) and one node keep their choices.
TEST(Selector, NodeRulesForTwoNodesOfEight) {
  using namespace collx::detail;
  const NodeShape two_by_eight{2, 8, true};
  const NodeShape two_by_two{2, 2, true};
  const NodeShape two_by_four{2, 4, true};
  const NodeShape one_node{1, 8, true};
  const std::size_t KiB = 1024, MiB = KiB * KiB;
  for (std::size_t bytes : {2 * KiB + 1, 4 * KiB, 64 * KiB, 256 * KiB})
    EXPECT_EQ(pick(Collective::allreduce, bytes, two_by_eight), Algorithm::rabenseifner) << bytes;
  for (std::size_t bytes : {256 * KiB + 1, 1 * MiB})
    EXPECT_EQ(pick(Collective::allreduce, bytes, two_by_eight), Algorithm::ring) << bytes;
  for (std::size_t bytes : {1 * MiB + 1, 2 * MiB, 4 * MiB})
    EXPECT_EQ(pick(Collective::allreduce, bytes, two_by_eight), Algorithm::hierarchical) << bytes;
  EXPECT_EQ(pick(Collective::allreduce, 4 * MiB + 1, two_by_eight), Algorithm::multi_leader);
  for (std::size_t bytes : {1 * KiB, 4 * KiB, 4 * KiB + 1, 128 * KiB})
    EXPECT_EQ(pick(Collective::reduce_scatter, bytes, two_by_eight), Algorithm::butterfly) << bytes;
  EXPECT_NE(pick(Collective::reduce_scatter, 1 * KiB - 1, two_by_eight), Algorithm::butterfly);
  for (std::size_t bytes : {1 * MiB + 1, 64 * MiB})
    EXPECT_EQ(pick(Collective::reduce_scatter, bytes, two_by_eight), Algorithm::hierarchical)
        << bytes;
  for (std::size_t bytes : {128 * KiB + 1, 1 * MiB})
    EXPECT_EQ(pick(Collective::reduce_scatter, bytes, two_by_eight), Algorithm::ring) << bytes;
  for (std::size_t bytes : {128 * KiB + 1, 512 * KiB})
    EXPECT_EQ(pick(Collective::reduce, bytes, two_by_eight), Algorithm::rabenseifner) << bytes;
  for (std::size_t bytes : {128 * KiB, 512 * KiB + 1})
    EXPECT_NE(pick(Collective::reduce, bytes, two_by_eight), Algorithm::rabenseifner) << bytes;
  for (const NodeShape& shape : {two_by_two, two_by_four, one_node}) {
    for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::reduce}) {
      for (std::size_t bytes : {4 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB}) {
        const Algorithm before = shape.nodes == 1
                                     ? select_from(builtin_rules(), c, bytes, 8)
                                     : select_for_nodes(c, bytes, NodeShape{2, 3, true});
        if (before == Algorithm::automatic) continue;
        EXPECT_EQ(pick(c, bytes, shape), before) << collx::to_string(c) << " " << shape.nodes << "x"
                                                 << shape.max_per_node << " " << bytes;
      }
    }
  }
}

// One rank on each of 8 to 16 nodes: reduce_scatter the ring from 512 KiB (it ties the
// butterfly's best on the fat tree and leads it on the torus and the dragonfly, whose links
// between groups the butterfly's far exchanges share); more nodes keep the butterfly.
TEST(Selector, NodeRulesForSixteenSingles) {
  using namespace collx::detail;
  const std::size_t KiB = 1024, MiB = KiB * KiB;
  for (int nodes : {8, 16, 32, 64}) {
    const NodeShape singles{nodes, 1, true};
    for (std::size_t bytes : {512 * KiB + 1, 1 * MiB, 64 * MiB}) {
      EXPECT_EQ(resolve_algorithm(Collective::reduce_scatter, Algorithm::automatic, bytes, nodes, 0,
                                  false, singles),
                nodes <= 16 ? Algorithm::ring : Algorithm::butterfly)
          << nodes << " " << bytes;
    }
    EXPECT_EQ(resolve_algorithm(Collective::reduce_scatter, Algorithm::automatic, 512 * KiB, nodes,
                                0, false, singles),
              Algorithm::butterfly);
  }
}

// Reduce on nodes of 8 ranks or more, below 64 KiB: the binomial tree, whose receives from all
// its children are posted at once, on any number of nodes (simulated on SMPI's fat tree at 2, 8
// and 32 nodes of 8: ahead of hierarchical from 16 B to 16 KiB and of Rabenseifner at 16 KiB;
// docs/SCALE.md, "Small reduce"). Nodes of fewer ranks (the emulated cluster's 2 x 2, where
// hierarchical was measured) keep their rules; one node keeps the flat table.
TEST(Selector, ReduceBinomialOnNodesOfEight) {
  using namespace collx::detail;
  const std::size_t KiB = 1024;
  for (int nodes : {2, 4, 8, 32, 128}) {
    const NodeShape shape{nodes, 8, true};
    for (std::size_t bytes : {std::size_t{0}, std::size_t{16}, std::size_t{256}, 4 * KiB, 16 * KiB,
                              32 * KiB, 64 * KiB - 1})
      EXPECT_EQ(pick(Collective::reduce, bytes, shape), Algorithm::binomial_tree)
          << nodes << " " << bytes;
    // From 64 KiB: Rabenseifner on 8 nodes and more; on fewer, the flat table (and the rule of
    // two nodes of 8 from 128 KiB).
    if (nodes >= 8) {
      EXPECT_EQ(pick(Collective::reduce, 64 * KiB, shape), Algorithm::rabenseifner) << nodes;
    }
    // Uneven nodes keep the rule of any layout.
    const NodeShape uneven{nodes, 8, false};
    EXPECT_EQ(pick(Collective::reduce, 4 * KiB, uneven), Algorithm::hierarchical) << nodes;
  }
  // Nodes of fewer ranks: hierarchical up to 16 KiB; on 8 nodes and more Rabenseifner from 16 KiB.
  for (const NodeShape& fewer : {NodeShape{2, 2, true}, NodeShape{8, 4, true}}) {
    EXPECT_EQ(pick(Collective::reduce, 4 * KiB, fewer), Algorithm::hierarchical);
    EXPECT_EQ(pick(Collective::reduce, 16 * KiB - 1, fewer), Algorithm::hierarchical);
  }
  EXPECT_EQ(pick(Collective::reduce, 16 * KiB, NodeShape{8, 4, true}), Algorithm::rabenseifner);
  EXPECT_EQ(pick(Collective::reduce, 4 * KiB, NodeShape{1, 8, true}),
            select_from(builtin_rules(), Collective::reduce, 4 * KiB, 8));
}

// The node rules for broadcast and reduce against the model. Reduce: up to its edge (16 KiB)
// hierarchical is predicted fastest on several nodes, on a fast network and on a slow one; on
// model::kManyNodes nodes and more below 16 KiB, where the rule for many nodes takes Rabenseifner
// (its reduce-scatter half the butterfly there).
// Broadcast: with ranks placed in blocks the binomial tree's crossing levels are hierarchical's
// (a level inside a node costs what a leader's phase inside it costs), so up to 1 KiB on the fast
// network hierarchical is predicted within 5 % of the fastest; on the slow network linear's one
// overlapped latency can lead (simulated on SMPI's fat tree too: docs/SCALE.md). On one node
// neither is hierarchical (it runs a flat algorithm there, and ties go to the flat row).
TEST(CostModel, NodeAwareBroadcastAndReduce) {
  using collx::model::Machine;
  const auto seconds = [](Collective c, Algorithm a, int p, double bytes, const Machine& m) {
    const auto cost = collx::model::cost(c, a, p, bytes, m.segment_bytes, m.nodes);
    return cost ? cost->seconds(m) : 1e30;
  };
  for (auto [nodes, per_node] :
       {std::pair{2, 2}, std::pair{4, 4}, std::pair{8, 8}, std::pair{8, 2}, std::pair{64, 8}}) {
    for (bool slow : {false, true}) {
      Machine m;
      m.nodes = nodes;
      if (slow) {
        m.alpha_inter = 250e-6;
        m.beta_inter = 1 / 0.5e9;
      }
      const int p = nodes * per_node;
      const double edge = nodes >= collx::model::kManyNodes ? double(8 << 10) : double(16 << 10);
      for (double bytes = 8; bytes <= edge; bytes *= 2) {
        EXPECT_EQ(collx::model::best(Collective::reduce, p, bytes, m), Algorithm::hierarchical)
            << "reduce " << nodes << "x" << per_node << " " << bytes;
      }
      for (double bytes = 8; !slow && bytes <= 1024; bytes *= 2) {
        const Algorithm best = collx::model::best(Collective::broadcast, p, bytes, m);
        EXPECT_LE(seconds(Collective::broadcast, Algorithm::hierarchical, p, bytes, m),
                  1.05 * seconds(Collective::broadcast, best, p, bytes, m))
            << "broadcast " << nodes << "x" << per_node << " " << bytes;
      }
    }
    Machine one;
    for (Collective c : {Collective::broadcast, Collective::reduce}) {
      for (double bytes = 8; bytes <= double(1 << 30); bytes *= 8)
        EXPECT_NE(collx::model::best(c, per_node, bytes, one), Algorithm::hierarchical);
    }
  }
}

// The cost model across nodes: the node-aware allreduces cost their flat fallback on one node;
// across nodes multi_leader's k ranks move the bytes hierarchical's leader moves, side by side.
TEST(CostModel, NodeAwareAllreduceAcrossNodes) {
  using collx::model::cost;
  const double n = 16 << 20;
  const auto flat = cost(Collective::allreduce, Algorithm::rabenseifner, 8, n, 1 << 18);
  const auto one_node = cost(Collective::allreduce, Algorithm::multi_leader, 8, n, 1 << 18);
  ASSERT_TRUE(flat && one_node);
  EXPECT_EQ(one_node->bytes, flat->bytes);
  const auto across = cost(Collective::allreduce, Algorithm::rabenseifner, 8, n, 1 << 18, 2);
  const auto multi = cost(Collective::allreduce, Algorithm::multi_leader, 8, n, 1 << 18, 2);
  const auto hier = cost(Collective::allreduce, Algorithm::hierarchical, 8, n, 1 << 18, 2);
  ASSERT_TRUE(across && multi && hier);
  EXPECT_EQ(across->bytes, 0);
  EXPECT_GT(across->inter_bytes, 0);
  EXPECT_NEAR(multi->inter_bytes, hier->inter_bytes, 1);
  EXPECT_LT(multi->bytes, hier->bytes);
  collx::model::Machine m;
  m.nodes = 512;
  EXPECT_EQ(collx::model::best(Collective::allreduce, 4096, 64 << 20, m), Algorithm::multi_leader);
}

// Whether the transports' waits and the arena's yield the processor: the node's count against
// its processors, unless Open MPI's mpi_yield_when_idle says otherwise.
TEST(Config, ProcessorsOversubscribed) {
  ASSERT_EQ(std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"), nullptr) << "run without a launcher";
  const long processors = sysconf(_SC_NPROCESSORS_ONLN);
  ASSERT_GT(processors, 0);
  const int many = static_cast<int>(processors) + 1;
  unsetenv("OMPI_MCA_mpi_yield_when_idle");
  EXPECT_TRUE(Transport::processors_oversubscribed(many));
  EXPECT_FALSE(Transport::processors_oversubscribed(1));
  EXPECT_FALSE(Transport::processors_oversubscribed(static_cast<int>(processors)));
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
  EXPECT_TRUE(Transport::processors_oversubscribed(1));
  setenv("OMPI_MCA_mpi_yield_when_idle", "0", 1);
  EXPECT_FALSE(Transport::processors_oversubscribed(many));
  setenv("OMPI_MCA_mpi_yield_when_idle", "maybe", 1);  // not a boolean: the count decides
  EXPECT_TRUE(Transport::processors_oversubscribed(many));
  unsetenv("OMPI_MCA_mpi_yield_when_idle");
}
