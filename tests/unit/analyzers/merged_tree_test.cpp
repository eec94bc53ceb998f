// load_merged_tree against the `callpaths` view it stands for: one node per row, with the row's
// figures, on a profile with the awkward cases (recursion, a routine under several parents,
// paths shared by threads of two processes, a split root, a routine the file does not list, an
// orphan, sibling ids whose text order is not their numeric one, GPU and graph time).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fixture.hpp"
#include "profile/call_tree.hpp"

namespace sonde::analyzers {
namespace {

// The fixture's two threads of process 1, and a forked process 2 whose thread shares their
// paths. Node_id, thread, parent, routine, depth, recursive, calls, subrs, incl, excl, flops.
constexpr const char* kAwkward = R"sql(
INSERT INTO processes (process_id, run_id, pid, ppid, origin, command, started_ns, ended_ns,
                       end_reason)
  VALUES (2, 1, 2000, 1000, 'fork', './train --steps 3', 1000000000000, 1000000000000 + 4000000000,
          'exit');
INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns) VALUES
  (20, 2, 0, 2000, 'main', 1000000000000, 1000000000000 + 4000000000);
INSERT INTO routines (routine_id, name, kind) VALUES (9, 'nine', 'region'), (10, 'ten', 'region'),
  (100, 'hundred', 'region');
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns, flops) VALUES
  (20, 20, NULL, 1,   0, 0, 1, 9, 4000000000, 100000000, 0),
  (21, 20, 20,   2,   1, 0, 1, 9, 2000000000, 100000000, 0),
  (22, 20, 21,   3,   2, 0, 1, 0,  500000000, 500000000, 2000000000),
  (23, 20, 21,   4,   2, 0, 1, 1,  600000000, 200000000, 0),
  (24, 20, 23,   4,   3, 1, 1, 1,  400000000, 100000000, 0),
  (25, 20, 24,   4,   4, 1, 1, 0,  300000000, 300000000, 0),
  (26, 20, 21,   9,   2, 0, 2, 0,  300000000, 300000000, 0),
  (27, 20, 21,  10,   2, 0, 3, 0,  200000000, 200000000, 0),
  (28, 20, 21, 100,   2, 0, 4, 0,  100000000, 100000000, 0),
  (29, 20, 20,   3,   1, 0, 5, 0, 1000000000, 1000000000, 1.5),
  (30, 20, 20, 999,   1, 0, 1, 1,  700000000, 600000000, 0),
  (31, 20, 30,   3,   2, 0, 1, 0,  100000000, 100000000, 0),
  (32, 20, NULL, 1,   0, 0, 1, 1,  200000000, 100000000, 0),
  (33, 20, 32,   5,   1, 0, 7, 0,  100000000, 100000000, 0),
  (34, 20, 777,  6,   5, 0, 1, 0,   50000000,  50000000, 0),
  (35, 2,  9,    4,   3, 0, 2, 0,   80000000,  80000000, 0);
INSERT INTO gpu_activity (activity_id, process_id, node_id, kind, name, start_ns, end_ns,
                          origin_node_id) VALUES
  (1, 2, 22, 'kernel', 'k1', 1000, 4000, 25),
  (2, 2, 22, 'kernel', 'k1', 5000, 5500, 25),
  (3, 1, 3,  'kernel', 'k2', 100, 1100, 23),
  (4, 1, 9,  'memcpy', 'memcpy HtoD', 0, 70, NULL),
  (5, 2, NULL, 'kernel', 'k3', 0, 900, NULL),
  (6, 2, 31, 'kernel', 'k4', 0, 40, 31),
  (7, 2, 29, 'kernel', 'k5', NULL, NULL, NULL);
)sql";

struct Row {
  std::int64_t routine_id, calls, subrs, incl_ns, excl_ns, gpu_ns, graph_ns = 0;
  double flops;
};

// The view's rows by path_ids, with graph time by path as gpu_graph_origins and node_paths say.
std::map<std::string, Row> view_rows(const ProfileFile& file) {
  std::map<std::string, Row> rows;
  for (auto st = file.prepare("SELECT path_ids, routine_id, calls, subrs, incl_s, excl_s, "
                              "flops, gpu_s FROM callpaths");
       st.step();)
    rows[st.text(0)] = {st.int64(1),
                        st.int64(2),
                        st.int64(3),
                        std::llround(st.real(4) * 1e9),
                        std::llround(st.real(5) * 1e9),
                        std::llround(st.real(7) * 1e9),
                        0,
                        st.real(6)};
  for (auto st = file.prepare("SELECT p.path_ids, SUM(o.ns) FROM gpu_graph_origins o "
                              "JOIN node_paths p USING (node_id) GROUP BY p.path_ids");
       st.step();)
    rows.at(st.text(0)).graph_ns = st.int64(1);
  return rows;
}

// The loaded tree's nodes by path of routine ids, their own GPU and graph time (the tree's are
// inclusive), with every sibling list checked to be in path_ids order.
std::map<std::string, Row> tree_rows(const CallNode& root) {
  std::map<std::string, Row> rows;
  std::vector<std::pair<const CallNode*, std::string>> todo;
  for (const CallNode& c : root.children) todo.emplace_back(&c, std::to_string(c.routine_id));
  while (!todo.empty()) {
    auto [node, path] = todo.back();
    todo.pop_back();
    Row r{node->routine_id, node->calls,  node->subrs,    node->incl_ns,
          node->excl_ns,    node->gpu_ns, node->graph_ns, node->flops};
    std::string previous;
    for (const CallNode& c : node->children) {
      r.gpu_ns -= c.gpu_ns;
      r.graph_ns -= c.graph_ns;
      std::string id = std::to_string(c.routine_id);
      EXPECT_LT(previous, id) << "children of " << path << " out of path_ids order";
      previous = id;
      todo.emplace_back(&c, path + "/" + id);
    }
    EXPECT_TRUE(rows.emplace(path, r).second) << "two nodes of path " << path;
  }
  return rows;
}

class MergedTreeTest : public test::FixtureTest {
 protected:
  void SetUp() override {
    FixtureTest::SetUp();
    test::exec_sql(path_, kAwkward);
  }
};

TEST_F(MergedTreeTest, HasOneNodePerCallpathsRowWithItsFigures) {
  ProfileFile file = ProfileFile::open(path_);
  std::map<std::string, Row> view = view_rows(file);
  CallNode root = load_merged_tree(file);
  std::map<std::string, Row> tree = tree_rows(root);
  ASSERT_EQ(tree.size(), view.size());
  for (const auto& [path, want] : view) {
    auto got = tree.find(path);
    ASSERT_NE(got, tree.end()) << path;
    EXPECT_EQ(got->second.routine_id, want.routine_id) << path;
    EXPECT_EQ(got->second.calls, want.calls) << path;
    EXPECT_EQ(got->second.subrs, want.subrs) << path;
    EXPECT_EQ(got->second.incl_ns, want.incl_ns) << path;
    EXPECT_EQ(got->second.excl_ns, want.excl_ns) << path;
    EXPECT_EQ(got->second.flops, want.flops) << path;
    EXPECT_EQ(got->second.gpu_ns, want.gpu_ns) << path;
    EXPECT_EQ(got->second.graph_ns, want.graph_ns) << path;
  }
  // The root: the busy threads' time (thread_times), its children's calls and GPU time.
  EXPECT_EQ(root.calls, 3);
  EXPECT_EQ(root.incl_ns, 15'000'000'000 + 4'200'000'000);
  EXPECT_EQ(root.excl_ns, 2'990'000'000 + 200'000'000);
  std::int64_t calls = 0, gpu = 0, graph = 0;
  for (const CallNode& c : root.children) {
    calls += c.calls;
    gpu += c.gpu_ns;
    graph += c.graph_ns;
  }
  EXPECT_EQ(root.subrs, calls);
  EXPECT_EQ(root.gpu_ns, gpu);
  EXPECT_EQ(root.graph_ns, graph);
}

TEST_F(MergedTreeTest, MergesTheAwkwardCasesAsTheViewDoes) {
  ProfileFile file = ProfileFile::open(path_);
  std::map<std::string, Row> tree = tree_rows(load_merged_tree(file));
  // train/cblas_sgemm of three threads in two processes: one path.
  EXPECT_EQ(tree.at("2/3").calls, 4 + 2 + 1);
  EXPECT_EQ(tree.at("2/3").flops, 8e9 + 67108864 + 2e9);
  EXPECT_EQ(tree.at("2/3").gpu_ns, 1000 + 70 + 3000 + 500);
  // cblas_sgemm straight under the root is a path of its own; so is each level of recursion.
  EXPECT_EQ(tree.at("3").calls, 5);
  EXPECT_EQ(tree.at("3").flops, 1.5);
  EXPECT_EQ(tree.at("2/4/4").calls, 2 + 1);
  EXPECT_EQ(tree.at("2/4/4/4").calls, 1);
  EXPECT_EQ(tree.at("2/4/4/4").graph_ns, 3500);  // replays whose graph nodes it created
  EXPECT_EQ(tree.at("2/4").graph_ns, 1000);
  // The second root of thread 20 adds its load_data to the other threads'.
  EXPECT_EQ(tree.at("5").calls, 3 + 1 + 7);
  // Below a routine the file does not list, and below a parent never written: no path.
  for (const auto& [path, row] : tree) EXPECT_NE(row.routine_id, 999) << path;
  EXPECT_FALSE(tree.count("999/3"));
  EXPECT_EQ(tree.at("2/6").calls, 1);  // noop's node 12; its orphan node 34 is in no path
  EXPECT_FALSE(tree.count("6"));
  // A path one thread alone goes on to: fib under thread 2's cblas_sgemm.
  EXPECT_EQ(tree.at("2/3/4").calls, 2);
}

TEST_F(MergedTreeTest, OrdersSiblingsByTheirIdsAsText) {
  ProfileFile file = ProfileFile::open(path_);
  CallNode root = load_merged_tree(file);
  const CallNode* train = nullptr;
  for (const CallNode& c : root.children)
    if (c.name == "train") train = &c;
  ASSERT_NE(train, nullptr);
  std::vector<std::int64_t> ids;
  for (const CallNode& c : train->children) ids.push_back(c.routine_id);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{10, 100, 3, 4, 6, 9}));
  EXPECT_EQ(train->children.front().name, "ten");
  EXPECT_EQ(train->children.front().kind, "region");
}

}  // namespace
}  // namespace sonde::analyzers
