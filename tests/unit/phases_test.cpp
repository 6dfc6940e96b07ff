// Tag phases: shares handed to the parts of composite algorithms never overlap, and a phase
// outside a share is an error instead of a message on another part's tag.
#include <gtest/gtest.h>

#include <set>

#include "collx/error.hpp"
#include "operation.hpp"

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

// Two composites nested as the library nests them: reduce:rabenseifner (reduce_scatter then
// gather) inside allreduce:binomial_tree's reduce half, beside its broadcast half.
TEST(Phases, NestedCompositesGetDisjointTags) {
  const Phases all;
  const Phases reduce = all.part("reduce", 0, 3);
  const Phases broadcast = all.part("broadcast", 3, 2);
  const Phases scatter = reduce.part("reduce_scatter", 0, 2);
  const Phases gather = reduce.part("gather", 2, 1);
  const std::set<int> parts[] = {tags_of(scatter), tags_of(gather), tags_of(broadcast),
                                 {kCheckPhase}};
  for (std::size_t i = 0; i < std::size(parts); ++i) {
    for (std::size_t j = i + 1; j < std::size(parts); ++j)
      EXPECT_TRUE(disjoint(parts[i], parts[j])) << i << " and " << j;
  }
  EXPECT_EQ(gather[0], reduce[2]);
}

TEST(Phases, APartBeyondItsBudgetIsAnError) {
  const Phases all;
  const Phases reduce = all.part("reduce", 0, 2);
  EXPECT_THROW(reduce.part("gather", 2, 1), collx::Error);
  EXPECT_THROW(all.part("too many", 5, 3), collx::Error);
  EXPECT_THROW(reduce[2], collx::Error);
  EXPECT_THROW(reduce[-1], collx::Error);
  try {
    (void)reduce.part("gather", 1, 2);
    FAIL() << "no error";
  } catch (const collx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gather"), std::string::npos) << e.what();
  }
}

}  // namespace
