// auto's built-in choices over a grid of calls, against a committed list: the list was written
// from the table as it stood in code (before it became lib/data/builtin-rules.json), so any
// change to what the built-in rules decide shows here as a line of difference. The rules depend
// on the collective, the buffer's bytes, the rank count, whether the ranks share an arena and the
// node layout; never on the datatype or the op (the bytes carry them), so the grid has none.
//
// A deliberate change of the rules: rerun with COLLX_SELECTOR_GRID_WRITE=1 and commit the list
// it writes (tests/unit/data/selector-grid-<mpi>.txt), with the measurements behind the change.
#include <gtest/gtest.h>
#include <mpi.h>  // MPICH_VERSION: the MPICH-only rows

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "selector.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::kAnyBytes;
using namespace collx::detail;

#if defined(MPICH_VERSION)
constexpr const char* kGridFile = "selector-grid-mpich.txt";
#else
constexpr const char* kGridFile = "selector-grid-openmpi.txt";
#endif

std::vector<std::size_t> grid_sizes() {
  std::set<std::size_t> sizes{0, kAnyBytes};
  for (int k = 0; k <= 34; ++k) {
    const std::size_t p = std::size_t{1} << k;
    sizes.insert({p - 1, p, p + 1});
  }
  return {sizes.begin(), sizes.end()};
}

// One line per (what the sizes' choices depend on besides the size): each run of equal choices
// over the grid's sizes as "algorithm..last size of the run".
std::string runs(const std::vector<std::size_t>& sizes, auto&& choose) {
  std::string out;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const Algorithm a = choose(sizes[i]);
    if (i + 1 < sizes.size() && choose(sizes[i + 1]) == a) continue;
    out.append(" ").append(collx::to_string(a)).append("..");
    out.append(sizes[i] == kAnyBytes ? std::string("any") : std::to_string(sizes[i]));
  }
  return out;
}

std::string grid() {
  const std::vector<std::size_t> sizes = grid_sizes();
  const int ranks[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10,  11,   12,  15,
                       16, 17, 24, 31, 32, 33, 63, 64, 65, 128, 1000, 1024};
  std::ostringstream out;
  for (int c = 0; c < collx::kCollectiveCount; ++c) {
    const auto collective = static_cast<Collective>(c);
    for (const int p : ranks) {
      for (const bool shm : {false, true}) {
        out << "table " << collx::to_string(collective) << " ranks " << p << " shm " << shm << ":"
            << runs(sizes,
                    [&](std::size_t bytes) {
                      const Algorithm a =
                          select_from(builtin_rules_of(collective), collective, bytes, p, shm);
                      EXPECT_EQ(a, select_from(builtin_rules(), collective, bytes, p, shm));
                      return a;
                    })
            << "\n";
      }
    }
    for (const int nodes : {1, 2, 3, 4, 5, 7, 8, 9, 16, 64, 128}) {
      for (const int per_node : {1, 2, 3, 4, 8}) {
        for (const bool uniform : {true, false}) {
          const NodeShape shape{nodes, per_node, uniform};
          out << "nodes " << collx::to_string(collective) << " " << nodes << "x" << per_node
              << " uniform " << uniform << ":"
              << runs(sizes,
                      [&](std::size_t bytes) { return select_for_nodes(collective, bytes, shape); })
              << "\n";
        }
      }
    }
  }
  return out.str();
}

TEST(SelectorGrid, BuiltinChoicesAreTheCommittedOnes) {
  const std::string path = std::string(COLLX_TEST_DATA_DIR) + "/" + kGridFile;
  const std::string now = grid();
  if (std::getenv("COLLX_SELECTOR_GRID_WRITE") != nullptr) {
    std::ofstream(path) << now;
    GTEST_SKIP() << "wrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " cannot be read";
  std::stringstream expected;
  expected << in.rdbuf();
  std::istringstream want(expected.str());
  std::istringstream got(now);
  std::string w;
  std::string g;
  int line = 0;
  int differences = 0;
  while (std::getline(want, w) && std::getline(got, g)) {
    ++line;
    if (w != g && ++differences <= 20) {
      ADD_FAILURE() << path << ":" << line << "\n  committed:" << w << "\n  now:      " << g;
    }
  }
  EXPECT_EQ(expected.str().size(), now.size()) << "the grid's length differs";
  EXPECT_EQ(differences, 0);
}

// Every row of the built-in table says what it rests on (or that nothing was recorded).
TEST(SelectorGrid, EveryBuiltinRowHasItsProvenance) {
  std::ifstream in(COLLX_BUILTIN_RULES_FILE);
  ASSERT_TRUE(in) << COLLX_BUILTIN_RULES_FILE;
  const nlohmann::json table = nlohmann::json::parse(in);
  std::size_t rows = 0;
  for (const char* key : {"rules", "node_rules"}) {
    for (const auto& row : table.at(key)) {
      ++rows;
      ASSERT_TRUE(row.contains("provenance")) << row.dump();
      EXPECT_GE(row.at("provenance").get<std::string>().size(), 20u) << row.dump();
    }
  }
  EXPECT_EQ(rows, builtin_rules().size() + node_rules().size() +
#if defined(MPICH_VERSION)
                      0
#else
                      2  // the two MPICH-only rows
#endif
  );
}

}  // namespace
