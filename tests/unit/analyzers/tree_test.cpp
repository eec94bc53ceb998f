#include "render/tree.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <sstream>

#include "fixture.hpp"
#include "profile/call_tree.hpp"

namespace sonde::analyzers {
namespace {

class TreeTest : public test::FixtureTest {};

const CallNode& child(const CallNode& node, const std::string& name) {
  for (const auto& c : node.children)
    if (c.name == name) return c;
  throw std::runtime_error("no child " + name + " under " + node.name.str());
}

// The property the profile must keep: inclusive = exclusive + the children's inclusive.
void expect_consistent(const CallNode& node) {
  std::int64_t sum = node.excl_ns;
  for (const auto& c : node.children) {
    sum += c.incl_ns;
    expect_consistent(c);
  }
  EXPECT_EQ(node.incl_ns, sum) << node.name;
}

TEST_F(TreeTest, LoadsOneTreePerThread) {
  ProfileFile file = ProfileFile::open(path_);
  auto trees = load_thread_trees(file);
  ASSERT_EQ(trees.size(), 3u);
  EXPECT_EQ(trees[0].thread_name, "main");
  EXPECT_EQ(trees[0].tid, 1000);
  EXPECT_EQ(trees[0].pid, 1000);
  EXPECT_EQ(trees[0].wall_ns, 10'000'000'000);
  EXPECT_EQ(trees[2].wall_ns, 500'000'000);  // still running: the root's time stands in
  const CallNode& root = trees[0].root;
  EXPECT_EQ(root.name, "<thread>");
  ASSERT_EQ(root.children.size(), 2u);
  const CallNode& fib = child(child(root, "train"), "fib");
  EXPECT_EQ(fib.excl_ns, 400'000'000);
  EXPECT_EQ(child(fib, "fib").calls, 2);
  EXPECT_DOUBLE_EQ(child(child(root, "train"), "cblas_sgemm").flops, 8e9);
  for (const auto& t : trees) expect_consistent(t.root);
}

TEST_F(TreeTest, MergeMatchesChildrenByRoutine) {
  ProfileFile file = ProfileFile::open(path_);
  CallNode merged = load_merged_tree(file);
  EXPECT_EQ(merged.incl_ns, 15'000'000'000);  // the idle thread's 0.5 s is in no total
  EXPECT_EQ(merged.calls, 2);
  EXPECT_EQ(merged.excl_ns, 2'990'000'000);
  ASSERT_EQ(merged.children.size(), 2u);
  const CallNode& train = child(merged, "train");
  EXPECT_EQ(train.calls, 2);
  EXPECT_EQ(train.incl_ns, 9'000'000'000);
  EXPECT_EQ(train.children.size(), 3u);  // sgemm from both threads is one node
  EXPECT_EQ(child(train, "cblas_sgemm").calls, 6);
  EXPECT_EQ(child(merged, "load_data").incl_ns, 3'010'000'000);
  expect_consistent(merged);
}

TEST_F(TreeTest, TextFoldsSmallNodesAndDrawsBoxes) {
  ProfileFile file = ProfileFile::open(path_);
  std::string text = render_tree_text(load_forest(file, false), TreeOptions{});
  const std::string expected =
      "process 1000, thread 0 (tid 1000) \"main\": 10.000 s = 100 % (this thread's time)\n"
      "  incl %     incl s     excl s       calls  name\n"
      "  100.0%     10.000      1.000           1  <thread> [root]\n"
      "   60.0%      6.000      1.000           1  ├─ train [region]\n"
      "   40.0%      4.000      4.000           4  │  ├─ cblas_sgemm [blas]\n"
      "   10.0%      1.000      0.400           1  │  └─ fib [python]\n"
      "    6.0%      0.600      0.600           2  │     └─ fib [python]\n"
      "   30.0%      3.000      3.000           3  └─ load_data [native]\n"
      "\n"
      "process 1000, thread 1 (tid 1001) \"worker\": 5.000 s = 100 % (this thread's time)\n"
      "  incl %     incl s     excl s       calls  name\n"
      "  100.0%      5.000      1.990           1  <thread> [root]\n"
      "   60.0%      3.000      1.000           1  ├─ train [region]\n"
      "   40.0%      2.000      2.000           2  │  ├─ cblas_sgemm [blas]\n"
      "    0.0%      0.000      0.000           1  │  └─ (1 more below 0.5 %)\n"
      "    0.2%      0.010      0.010           1  └─ (1 more below 0.5 %)\n"
      "\n"
      "idle threads (no measured call; in no percentage): thread 2 (pid 1000, tid 1002)\n";
  EXPECT_EQ(text, expected);
}

TEST_F(TreeTest, DepthAndMergedText) {
  ProfileFile file = ProfileFile::open(path_);
  TreeOptions o;
  o.max_depth = 1;
  o.merge_threads = true;
  o.min_pct = 0;
  std::string text = render_tree_text(load_forest(file, true), o);
  EXPECT_NE(text.find("2 threads merged: 15.000 s = 100 % (the busy threads' time)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("├─ train [region]"), std::string::npos) << text;
  EXPECT_NE(text.find("└─ load_data [native]"), std::string::npos) << text;
  EXPECT_EQ(text.find("cblas_sgemm"), std::string::npos) << text;
}

TEST_F(TreeTest, JsonNestsAndReportsFolded) {
  ProfileFile file = ProfileFile::open(path_);
  Json j = render_tree_json(load_forest(file, false), TreeOptions{});
  ASSERT_EQ(j["trees"].size(), 2u);  // the idle thread has no tree to show
  ASSERT_EQ(j["idle_threads"].size(), 1u);
  EXPECT_EQ(j["idle_threads"][0]["tid"], 1002);
  const Json& worker = j["trees"][1]["tree"];
  EXPECT_EQ(worker["folded"]["count"], 1);
  EXPECT_DOUBLE_EQ(worker["folded"]["incl_s"].get<double>(), 0.01);
  EXPECT_EQ(worker["children"][0]["name"], "train");
  EXPECT_DOUBLE_EQ(worker["children"][0]["incl_pct"].get<double>(), 60.0);
  // Each node names its routine by id (the viewer selects by it: two routines may share a name).
  auto trees = load_thread_trees(file);
  std::int64_t train = child(trees[1].root, "train").routine_id;
  EXPECT_NE(train, 0);
  EXPECT_EQ(worker["children"][0]["routine_id"], train);
  EXPECT_EQ(worker["routine_id"], trees[1].root.routine_id);
}

// The viewer loads only the frames above its threshold; what it shows must be what the whole
// tree shows at that threshold (folded counts and sums included), at every threshold.
TEST_F(TreeTest, LoadingOnlyTheShownNodesRendersTheSameJson) {
  ProfileFile file = ProfileFile::open(path_);
  for (double pct : {0.5, 1.0, 5.0, 30.0, 99.0}) {
    TreeOptions o{pct, std::nullopt, false};
    Forest above = load_forest_above(file, pct);
    EXPECT_EQ(render_tree_json(above, o), render_tree_json(load_forest(file, false), o)) << pct;
    std::size_t nodes = 0;
    for (const ThreadTree& t : above.busy) nodes += t.root.children.size();
    if (pct == 99.0) {
      EXPECT_EQ(nodes, 0u);  // nothing below the roots was built
    }
    // and with a depth limit (the viewer's first tree), the levels below it left out too
    for (int depth : {1, 2}) {
      TreeOptions od{pct, depth, false};
      Forest shallow = load_forest_above(file, pct, depth);
      EXPECT_EQ(render_tree_json(shallow, od), render_tree_json(load_forest(file, false), od))
          << pct << " " << depth;
      if (depth == 1) {  // level 2 was not built
        for (const ThreadTree& t : shallow.busy)
          for (const CallNode& c : t.root.children) EXPECT_TRUE(c.children.empty()) << c.name;
      }
    }
  }
  // GPU time is inclusive over the nodes left out: such a file loads every node.
  test::exec_sql(path_,
                 "INSERT INTO gpu_activity (process_id, node_id, kind, name, device, "
                 "stream, start_ns, end_ns) SELECT 1, MAX(node_id), 'kernel', 'k', 0, 0, "
                 "0, 1000 FROM nodes");
  ProfileFile gpu = ProfileFile::open(path_);
  TreeOptions o{30.0, std::nullopt, false};
  EXPECT_EQ(render_tree_json(load_forest_above(gpu, 30.0), o),
            render_tree_json(load_forest(gpu, false), o));
}

TEST_F(TreeTest, CsvHasOneRowPerShownNodeWithItsThreadAndPath) {
  ProfileFile file = ProfileFile::open(path_);
  Forest forest = load_forest(file, false);
  Table t = tree_table(forest, TreeOptions{});
  std::string csv = render_csv(t);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "pid,thread,depth,path,name,kind,where,calls,incl_s,excl_s,incl_pct,gpu_s,graph_s");
  // The worker's fib frame: thread 1, below train, its path as the callpaths view writes it.
  EXPECT_NE(csv.find(",1,1,train,train,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",folded,"), std::string::npos) << csv;  // the worker's folded child
  // As many rows as the text shows lines of nodes (one per node or folded group).
  std::string text = render_tree_text(forest, TreeOptions{});
  std::size_t node_lines = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::size_t first = line.find_first_not_of(' ');
    std::size_t pct = line.find("%  ");
    if (first != std::string::npos && std::isdigit(static_cast<unsigned char>(line[first])) &&
        pct != std::string::npos && pct < 9)
      ++node_lines;
  }
  EXPECT_EQ(t.rows.size(), node_lines) << text;
}

}  // namespace
}  // namespace sonde::analyzers
