// The differential flame graph's figure: each path's share of the busy time against its share
// in a baseline, paths matched by names (metrics/share_change.hpp), and its colour.
#include "metrics/share_change.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace sonde::analyzers;

namespace {

CallNode node(const std::string& name, std::int64_t incl_ns, std::vector<CallNode> children = {}) {
  CallNode n;
  n.name = SharedText(name);
  n.incl_ns = incl_ns;
  n.children = std::move(children);
  return n;
}

const CallNode& child(const CallNode& n, const std::string& name) {
  for (const CallNode& c : n.children)
    if (c.name == name) return c;
  throw std::runtime_error("no child " + name);
}

}  // namespace

TEST(PathShares, EachPathAgainstTheBaselinesNodesOfTheSameNames) {
  // Before: 200 ns; b twice under the root (two routines of one display name): 0.7 together.
  CallNode before =
      node("<thread>", 200,
           {node("a", 60, {node("x", 60)}), node("b", 100), node("b", 40), node("gone", 0)});
  // After: 100 ns; a doubled, a;x held, b shrank, n and n;y are new.
  CallNode after = node("all", 100,
                        {node("a", 60, {node("x", 30)}), node("b", 30),
                         node("n", 10, {node("y", 5)}), node("gone", 0)});
  PathShares shares(after, before);
  EXPECT_DOUBLE_EQ(shares.after_total_ns(), 100);
  EXPECT_DOUBLE_EQ(shares.before_total_ns(), 200);

  PathShare root = shares.of(after);  // the roots match whatever their names
  EXPECT_DOUBLE_EQ(root.before, 1);
  EXPECT_DOUBLE_EQ(root.after, 1);
  EXPECT_EQ(share_change_fill(root), "hsl(0,80%,96%)");

  PathShare a = shares.of(child(after, "a"));
  EXPECT_DOUBLE_EQ(a.before, 0.3);
  EXPECT_DOUBLE_EQ(a.after, 0.6);
  EXPECT_DOUBLE_EQ(*a.change(), 1.0);
  EXPECT_EQ(share_change_fill(a), "hsl(0,80%,50%)");  // twice: full red

  PathShare x = shares.of(child(child(after, "a"), "x"));
  EXPECT_DOUBLE_EQ(x.before, 0.3);
  EXPECT_DOUBLE_EQ(x.after, 0.3);
  EXPECT_DOUBLE_EQ(*x.change(), 0.0);

  PathShare b = shares.of(child(after, "b"));
  EXPECT_DOUBLE_EQ(b.before, 0.7);
  EXPECT_DOUBLE_EQ(b.after, 0.3);
  EXPECT_EQ(share_change_fill(b), "hsl(220,80%,50%)");  // under half: full blue

  const CallNode& n = child(after, "n");
  for (const CallNode* fresh : {&n, &child(n, "y")}) {
    PathShare s = shares.of(*fresh);
    EXPECT_TRUE(s.is_new());
    EXPECT_FALSE(s.change().has_value());
    EXPECT_EQ(share_change_fill(s), "hsl(0,80%,50%)");
  }
  EXPECT_DOUBLE_EQ(shares.of(child(after, "n")).after, 0.1);
  // A path the baseline has, with no time there, compares as new (no share to divide by).
  EXPECT_TRUE(shares.of(child(after, "gone")).is_new());
  // A node of another tree is in no path of this one.
  CallNode stranger = node("a", 50);
  EXPECT_TRUE(shares.of(stranger).is_new());
}

TEST(PathShares, ColourDepthIsTheRatioOnALogScale) {
  auto fill = [](double before, double after) { return share_change_fill({before, after}); };
  EXPECT_EQ(fill(0.2, 0.2), "hsl(0,80%,96%)");
  EXPECT_EQ(fill(0.2, 0.2 * std::sqrt(2.0)), "hsl(0,80%,73%)");  // half-way to full
  EXPECT_EQ(fill(0.2, 0.2 / std::sqrt(2.0)), "hsl(220,80%,73%)");
  EXPECT_EQ(fill(0.2, 0.1), "hsl(220,80%,50%)");  // half: as deep as twice
  EXPECT_EQ(fill(0.2, 0.9), "hsl(0,80%,50%)");
  EXPECT_EQ(fill(0.2, 0.0), "hsl(220,80%,50%)");
  std::vector<ShareChangeKey> legend = share_change_legend();
  ASSERT_EQ(legend.size(), 5u);
  EXPECT_EQ(legend.front().fill, fill(0, 0.1));  // new is drawn as twice
  EXPECT_EQ(legend[2].fill, "hsl(0,80%,96%)");
  EXPECT_EQ(legend.back().fill, "hsl(220,80%,50%)");
}

TEST(PathShares, WideLevelsAndDeepChainsCostTheirNodes) {
  // A level wider than the names compared one by one goes through a map; a chain deeper than
  // any call stack is walked without recursion.
  CallNode before = node("<thread>", 1000);
  CallNode after = node("<thread>", 1000);
  for (int i = 0; i < 40; ++i) {
    before.children.push_back(node("f" + std::to_string(i), 10));
    after.children.push_back(node("f" + std::to_string(39 - i), 5 + i));
  }
  constexpr int kDepth = 70000;
  CallNode* b = &before.children[7];
  CallNode* a = &after.children[39 - 7];  // f7 in both
  for (int d = 0; d < kDepth; ++d) {
    b->children.push_back(node("deep", 10));
    a->children.push_back(node("deep", 5));
    b = &b->children.back();
    a = &a->children.back();
  }
  PathShares shares(after, before);
  EXPECT_DOUBLE_EQ(shares.of(after.children[39 - 7]).before, 0.01);
  EXPECT_DOUBLE_EQ(shares.of(after.children[39 - 7]).after, 0.037);
  EXPECT_DOUBLE_EQ(shares.of(*a).before, 0.01);
  EXPECT_DOUBLE_EQ(shares.of(*a).after, 0.005);
}

// A Python function whose line moved (an edit above it) is the same path, where it alone lost
// its exact match on each side; every frame below an edit was drawn "not in the baseline".
TEST(PathShares, AFunctionWhoseLineMovedKeepsItsBaseline) {
  CallNode before =
      node("<thread>", 100,
           {node("train.py:42(main)", 90,
                 {node("train.py:16(normalize)", 60), node("train.py:27(forward)", 30)})});
  CallNode after = node("<thread>", 100,
                        {node("train.py:46(main)", 90,
                              {node("train.py:30(normalize)", 10), node("train.py:27(forward)", 30),
                               node("train.py:12(added)", 50)})});
  PathShares shares(after, before);
  const CallNode& main_after = child(after, "train.py:46(main)");
  EXPECT_DOUBLE_EQ(shares.of(main_after).before, 0.9);
  PathShare normalize = shares.of(child(main_after, "train.py:30(normalize)"));
  EXPECT_FALSE(normalize.is_new());
  EXPECT_DOUBLE_EQ(normalize.before, 0.6);
  EXPECT_DOUBLE_EQ(shares.of(child(main_after, "train.py:27(forward)")).before, 0.3);
  EXPECT_TRUE(shares.of(child(main_after, "train.py:12(added)")).is_new());
}
