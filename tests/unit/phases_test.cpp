// Tag phases: shares handed to the parts of composite algorithms never overlap, and a phase
// outside a share is an error instead of a message on another part's tag.
#include <gtest/gtest.h>

#include <set>

#include "collx/error.hpp"
#include "operation.hpp"
#include "registry.hpp"

namespace {

using collx::detail::kCheckPhase;
using collx::detail::Phases;

std::set<int> tags_of(const Phases& p) {
  std::set<int> out;
  for (int i = 0; i < p.count(); ++i)
    out.insert(p[i]);
  return out;
}

bool disjoint(const std::set<int>& a, const std::set<int>& b) {
  for (int t : a) {
    if (b.count(t)) return false;
  }
  return true;
}

TEST(Phases, TheWholeBudgetLeavesTheCheckPhaseOut) {
  const Phases all;
  EXPECT_EQ(all.count(), collx::detail::kPhasesPerOp - 1);
  EXPECT_EQ(tags_of(all).count(kCheckPhase), 0u);
  EXPECT_EQ(Phases::check()[0], kCheckPhase);
  EXPECT_THROW(Phases::check()[1], collx::Error);
}

// Two composites nested as the library nests them: reduce:hierarchical (a reduce inside each
// node, then the flat reduce across nodes) whose across-nodes part runs reduce:rabenseifner
// (reduce_scatter then gather), with the shares each schedule asks of its own.
TEST(Phases, NestedCompositesGetDisjointTags) {
  const Phases all;
  const auto [node_reduce, across_nodes] = all.split({{"node reduce", 1}, {"across nodes", 3}});
  const auto [scatter, gather] = across_nodes.split({{"reduce_scatter", 2}, {"gather", 1}});
  const std::set<int> parts[] = {
      tags_of(node_reduce), tags_of(scatter), tags_of(gather), {kCheckPhase}};
  for (std::size_t i = 0; i < std::size(parts); ++i) {
    for (std::size_t j = i + 1; j < std::size(parts); ++j)
      EXPECT_TRUE(disjoint(parts[i], parts[j])) << i << " and " << j;
  }
  EXPECT_EQ(scatter.count(), 2);
  EXPECT_EQ(gather[0], across_nodes[2]);
}

// Shares come out consecutive and in order; asking more than the share holds names the part.
TEST(Phases, SplitHandsOutConsecutiveShares) {
  const Phases all;
  const auto [a, b, c] = all.split({{"a", 2}, {"b", 2}, {"c", 2}});
  EXPECT_EQ(a[0], all[0]);
  EXPECT_EQ(b[0], all[2]);
  EXPECT_EQ(c[1], all[5]);
  const auto [reduce] = all.split({{"reduce", 2}});
  EXPECT_THROW(reduce.split({{"reduce_scatter", 2}, {"gather", 1}}), collx::Error);
  EXPECT_THROW(all.split({{"too many", 5}, {"more", 3}}), collx::Error);
  EXPECT_THROW(reduce[2], collx::Error);
  EXPECT_THROW(reduce[-1], collx::Error);
  try {
    (void)reduce.split({{"scatter", 1}, {"gather", 2}});
    FAIL() << "no error";
  } catch (const collx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gather"), std::string::npos) << e.what();
  }
}

// Every row declares the tag phases its schedule uses, within a schedule's budget; run_schedule
// hands it a share of exactly that many (the simulated-rank suites, which run every row, then
// prove none uses more), and a share asked beyond what it is cut from fails.
TEST(Phases, EveryRowDeclaresPhasesWithinTheBudget) {
  const Phases all;
  for (const collx::detail::AlgorithmRow& row : collx::detail::registry()) {
    EXPECT_GE(row.tag_phases, 0) << to_string(row.algorithm);
    EXPECT_LE(row.tag_phases, all.count())
        << to_string(row.collective) << ":" << to_string(row.algorithm);
    const Phases share = all.part("row", 0, row.tag_phases);
    EXPECT_EQ(share.count(), row.tag_phases);
    EXPECT_THROW(share.part("more", 0, row.tag_phases + 1), collx::Error);
    EXPECT_THROW(share[row.tag_phases], collx::Error);
  }
  EXPECT_LT(all.count(), collx::detail::kPhasesPerOp);
}

}  // namespace
