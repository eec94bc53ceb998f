// The viewer's bundle holds what the subcommands' --format json say, not figures of its own.
#include "view/view_bundle.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fixture.hpp"
#include "metrics/diff.hpp"
#include "profile/rank_file.hpp"
#include "render/diff.hpp"
#include "render/report.hpp"
#include "render/samples.hpp"
#include "render/shapes.hpp"
#include "render/tree.hpp"

namespace sonde::analyzers {
namespace {

class ViewBundleTest : public test::FixtureTest {};

TEST_F(ViewBundleTest, OneProfileHoldsTheAnalyzersOwnJson) {
  nlohmann::json b = make_view_bundle({path_});
  EXPECT_EQ(b["format_version"], kViewBundleFormat);
  ASSERT_EQ(b["profiles"].size(), 1u);
  EXPECT_TRUE(b["diff"].is_null());
  const nlohmann::json& p = b["profiles"][0];
  ProfileFile file = ProfileFile::open(path_);
  // the same document `sonde report --format json` prints, member for member
  nlohmann::json report = nlohmann::json::parse(
      dump_json(render_report_json(path_, load_run_summary(file), compute_hotspots(file), 0)));
  report["sampled"] = nlohmann::json::parse(dump_json(render_samples_json(file)));  // as the CLI
  EXPECT_EQ(p["report"], report);
  nlohmann::json shapes =
      nlohmann::json::parse(dump_json(render_json(shapes_table(compute_shapes(file)))));
  nlohmann::json bundle_shapes = p["shapes"];  // `sonde shapes`' rows, plus the routine's id
  for (auto& row : bundle_shapes) row.erase("routine_id");
  EXPECT_EQ(bundle_shapes, shapes);
  // two busy threads: one tree each, and the merged tree; the idle thread listed apart
  EXPECT_EQ(p["tree"]["trees"].size(), 2u);
  EXPECT_EQ(p["tree"]["idle_threads"].size(), 1u);
  ASSERT_FALSE(p["tree_merged"].is_null());
  EXPECT_DOUBLE_EQ(p["tree_merged"]["tree"]["incl_s"].get<double>(), 15.0);
  EXPECT_DOUBLE_EQ(p["tree"]["min_pct"].get<double>(), kViewTreeMinPct);
  for (const char* section : {"roofline", "phases", "breakdown", "counters", "kernels"})
    EXPECT_TRUE(p["metrics"].contains(section)) << section;
  EXPECT_TRUE(p["lines"].is_null());  // the fixture recorded no line costs
  // every candidate's evidence keys, in the rule's order, name its members
  for (const auto& c : p["candidates"]) EXPECT_EQ(c["evidence_keys"].size(), c["evidence"].size());
}

TEST_F(ViewBundleTest, TwoProfilesCarryTheirDiff) {
  std::string after = (dir_.path / "after.db").string();
  test::write_fixture(after);
  nlohmann::json b = make_view_bundle({path_, after});
  ASSERT_EQ(b["profiles"].size(), 2u);
  ProfileDiff d = compute_diff(ProfileFile::open(path_), ProfileFile::open(after));
  EXPECT_EQ(b["diff"], nlohmann::json::parse(dump_json(render_diff_json(path_, after, d))));
}

// Each profile's merged tree coloured against each other profile (tree_diff_<j>): against a
// copy of itself every path holds its share; a routine renamed is a new path, with all below it.
TEST_F(ViewBundleTest, EachProfileIsComparedWithEachOther) {
  std::string same = (dir_.path / "same.db").string(),
              renamed = (dir_.path / "renamed.db").string();
  test::write_fixture(same);
  test::write_fixture(renamed);
  test::exec_sql(renamed, "UPDATE routines SET name = 'renamed' WHERE name = 'load_data'");
  ViewData data({path_, same, renamed});
  nlohmann::json whole = nlohmann::json::parse(data.whole());
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      EXPECT_EQ(whole["profiles"][i].contains(fmt::format("tree_diff_{}", j)), i != j) << i << j;
  EXPECT_FALSE(data.part(0, "tree_diff_0"));  // not against itself
  EXPECT_FALSE(data.part(0, "tree_diff_3"));
  EXPECT_FALSE(data.part(0, "tree_diff_"));
  EXPECT_FALSE(data.part(0, "tree_diff_1x"));
  nlohmann::json held = nlohmann::json::parse(*data.part(1, "tree_diff_0"));
  EXPECT_EQ(held, whole["profiles"][1]["tree_diff_0"]);
  EXPECT_EQ(held["baseline"], path_);
  EXPECT_DOUBLE_EQ(held["total_s"].get<double>(), 15.0);
  EXPECT_EQ(held["legend"].size(), 5u);
  // The same tree as tree_merged's, each node with its shares beside its figures.
  nlohmann::json merged = whole["profiles"][1]["tree_merged"]["tree"];
  int nodes = 0;
  std::vector<std::pair<const nlohmann::json*, const nlohmann::json*>> todo{
      {&held["tree"], &merged}};
  while (!todo.empty()) {
    auto [d, m] = todo.back();
    todo.pop_back();
    ++nodes;
    EXPECT_EQ((*d)["name"], (*m)["name"]);
    EXPECT_DOUBLE_EQ((*d)["incl_s"].get<double>(), (*m)["incl_s"].get<double>());
    EXPECT_NEAR((*d)["after_pct"].get<double>(), (*m)["incl_pct"].get<double>(), 1e-9);
    EXPECT_NEAR((*d)["before_pct"].get<double>(), (*m)["incl_pct"].get<double>(), 1e-9);
    EXPECT_NEAR((*d)["change_pct"].get<double>(), 0.0, 1e-9);
    EXPECT_EQ((*d)["fill"], "hsl(0,80%,96%)");
    ASSERT_EQ((*d)["children"].size(), (*m)["children"].size());
    for (std::size_t k = 0; k < (*d)["children"].size(); ++k)
      todo.emplace_back(&(*d)["children"][k], &(*m)["children"][k]);
  }
  EXPECT_GT(nodes, 3);
  nlohmann::json fresh = nlohmann::json::parse(*data.part(2, "tree_diff_0"));
  int renamed_nodes = 0;
  std::vector<std::pair<const nlohmann::json*, bool>> walk{{&fresh["tree"], false}};
  while (!walk.empty()) {
    auto [n, below] = walk.back();
    walk.pop_back();
    bool is_new = below || (*n)["name"] == "renamed";
    renamed_nodes += is_new;
    EXPECT_EQ((*n)["before_pct"].is_null(), is_new) << (*n)["name"];
    EXPECT_EQ((*n)["change_pct"].is_null(), is_new) << (*n)["name"];
    if (is_new) {
      EXPECT_EQ((*n)["fill"], "hsl(0,80%,50%)");
    }
    for (const auto& c : (*n)["children"]) walk.emplace_back(&c, is_new);
  }
  EXPECT_GE(renamed_nodes, 1);
}

// Past kViewComparedMax profiles the whole bundle carries no comparison; the server makes any.
TEST_F(ViewBundleTest, ManyProfilesCarryNoComparison) {
  std::vector<std::string> paths{path_};
  while (paths.size() <= kViewComparedMax) {
    paths.push_back((dir_.path / fmt::format("p{}.db", paths.size())).string());
    test::write_fixture(paths.back());
  }
  ViewData data(paths);
  nlohmann::json whole = nlohmann::json::parse(data.whole());
  for (const auto& p : whole["profiles"])
    for (const auto& [key, value] : p.items()) EXPECT_FALSE(key.starts_with("tree_diff_")) << key;
  EXPECT_TRUE(data.part(0, fmt::format("tree_diff_{}", kViewComparedMax)));
}

TEST_F(ViewBundleTest, NamesThatAreNotUtf8AreReplacedSoAnyDumpWorks) {
  test::exec_sql(path_,
                 "UPDATE routines SET name = CAST(X'6C6F6164FF5F64617461' AS TEXT) "
                 "WHERE name = 'load_data'");
  nlohmann::json b = make_view_bundle({path_});
  std::string text;
  ASSERT_NO_THROW(text = b.dump());
  EXPECT_NE(text.find("load\xEF\xBF\xBD_data"), std::string::npos);
}

// The server's parts are the whole bundle's members, each made once; the first tree is the
// same tree at the coarser threshold; unknown parts and profiles are refused.
TEST_F(ViewBundleTest, PartsAreTheBundlesMembers) {
  ViewData data({path_});
  nlohmann::json index = nlohmann::json::parse(data.index());
  EXPECT_EQ(index["format_version"], kViewBundleFormat);
  EXPECT_EQ(index["profiles"][0]["path"], path_);
  EXPECT_EQ(index["diff"], false);
  nlohmann::json whole = nlohmann::json::parse(data.whole());
  for (std::string_view name : kViewParts) {
    auto text = data.part(0, name);
    ASSERT_TRUE(text) << name;
    EXPECT_EQ(nlohmann::json::parse(*text), whole["profiles"][0][std::string(name)]) << name;
    EXPECT_EQ(data.part(0, name), text) << name;  // made once
  }
  ProfileFile file = ProfileFile::open(path_);
  nlohmann::json first = nlohmann::json::parse(*data.part(0, "tree_first"));
  EXPECT_EQ(first, nlohmann::json::parse(dump_json(render_tree_json(
                       load_forest(file, false),
                       TreeOptions{kViewFirstTreeMinPct, kViewFirstTreeDepth, false}))));
  EXPECT_FALSE(data.part(1, "tree"));
  EXPECT_FALSE(data.part(0, "nope"));
  EXPECT_TRUE(whole["profiles"][0]["samples"].is_null());  // the fixture was not sampled
  EXPECT_TRUE(whole["profiles"][0]["ranks"].is_null());    // nor a merged MPI run
}

// The whole bundle draws its tree from the thread trees it loads for the metrics; the server,
// asked for the tree first, reads only the frames above the threshold: the same text.
TEST_F(ViewBundleTest, TreeFromTheLoadedTreesIsTheTreeReadAboveTheThreshold) {
  ViewData whole({path_});
  whole.whole([](std::string_view) {});
  ViewData served({path_});
  auto tree = served.part(0, "tree");
  ASSERT_TRUE(tree);
  EXPECT_EQ(*whole.part(0, "tree"), *tree);
  EXPECT_NE(tree->find("\"folded\""), std::string::npos);  // noop (0 s) is below it
}

// Shapes and roofline points carry the routine's id (the page selects by it), as the hot spots do.
TEST_F(ViewBundleTest, ShapesAndRooflineCarryRoutineIds) {
  nlohmann::json p = make_view_bundle({path_})["profiles"][0];
  std::map<std::string, std::int64_t> ids;
  for (const auto& r : p["report"]["rows"]) ids[r["name"].get<std::string>()] = r["routine_id"];
  ASSERT_FALSE(p["shapes"].empty());
  for (const auto& s : p["shapes"]) EXPECT_EQ(s["routine_id"], ids.at(s["routine"])) << s;
  ASSERT_FALSE(p["roofline"]["routines"].empty());
  for (const auto& r : p["roofline"]["routines"]) EXPECT_EQ(r["routine_id"], ids.at(r["routine"]));
  for (const auto& s : p["roofline"]["shapes"]) EXPECT_EQ(s["routine_id"], ids.at(s["routine"]));
}

// The worker thread moved into a second process: with ranks 0 and 1, and with both in rank 0.
constexpr const char* kSecondProcess =
    "INSERT INTO processes (process_id, run_id, pid, ppid, parent_process_id, origin, command, "
    "started_ns, ended_ns, end_reason, rank) VALUES (2, 1, 2000, 1000, 1, 'child', './worker', "
    "1000000000000, 1000000000000 + 6000000000, 'exit', {rank}); "
    "UPDATE processes SET rank = 0 WHERE process_id = 1; "
    "UPDATE threads SET process_id = 2 WHERE thread_id = 2;";

// The fixture with kSecondProcess in rank `rank` ("NULL": no rank), and its bundle's scopes.
nlohmann::json scopes_with_second_process(const std::string& path, const char* rank,
                                          std::optional<ViewData>& data) {
  std::string sql = kSecondProcess;
  test::exec_sql(path, sql.replace(sql.find("{rank}"), 6, rank));
  data.emplace(std::vector<std::string>{path});
  return nlohmann::json::parse(*data->part(0, "tree_scopes"));
}

nlohmann::json merged_tree_of(ProfileFile file) {
  return nlohmann::json::parse(dump_json(
      render_tree_json(load_forest(file, true), TreeOptions{kViewTreeMinPct, std::nullopt, true})));
}

// Each rank's tree is `sonde tree --rank R --threads merge`'s; a process alone in its rank
// shares the rank's part.
TEST_F(ViewBundleTest, EachRankHasItsMergedTree) {
  std::optional<ViewData> loaded;
  nlohmann::json scopes = scopes_with_second_process(path_, "1", loaded);
  ViewData& data = *loaded;
  EXPECT_EQ(scopes["ranks"], 2);
  EXPECT_EQ(scopes["processes"], 2);
  std::vector<std::string> parts;
  for (const auto& s : scopes["scopes"])
    parts.push_back(s["kind"].get<std::string>() + " " + s["part"].get<std::string>());
  EXPECT_EQ(parts, (std::vector<std::string>{"rank tree_rank_0", "rank tree_rank_1",
                                             "process tree_rank_0", "process tree_rank_1"}));
  EXPECT_EQ(scopes["scopes"][3]["pid"], 2000);
  EXPECT_DOUBLE_EQ(scopes["scopes"][1]["busy_s"].get<double>(), 5.0);
  nlohmann::json whole = nlohmann::json::parse(data.whole())["profiles"][0];
  for (int rank : {0, 1}) {
    std::string part = "tree_rank_" + std::to_string(rank);
    nlohmann::json tree = merged_tree_of(ProfileFile::open_rank(path_, rank));
    EXPECT_EQ(nlohmann::json::parse(*data.part(0, part)), tree) << part;
    EXPECT_EQ(whole[part], tree) << part;
  }
  EXPECT_DOUBLE_EQ(whole["tree_rank_1"]["tree"]["incl_s"].get<double>(), 5.0);   // the worker
  EXPECT_DOUBLE_EQ(whole["tree_rank_0"]["tree"]["incl_s"].get<double>(), 10.0);  // main alone
  EXPECT_FALSE(data.part(0, "tree_rank_2"));                                     // no such rank
  EXPECT_FALSE(data.part(0, "tree_process_2"));  // its rank's part has it
}

// One rank, two processes: each process has a part of its own, its threads alone.
TEST_F(ViewBundleTest, EachProcessHasItsMergedTree) {
  std::optional<ViewData> loaded;
  nlohmann::json scopes = scopes_with_second_process(path_, "NULL", loaded);
  ViewData& data = *loaded;
  EXPECT_EQ(scopes["ranks"], 1);
  ASSERT_EQ(scopes["scopes"].size(), 2u);
  ProfileFile file = ProfileFile::open(path_);
  for (const auto& [id, pid] : {std::pair{1, 1000}, std::pair{2, 2000}}) {
    const auto& s = scopes["scopes"][id - 1];
    EXPECT_EQ(s["kind"], "process");
    EXPECT_EQ(s["pid"], pid);
    EXPECT_TRUE(s["rank"].is_null());
    ASSERT_EQ(s["part"], "tree_process_" + std::to_string(id));
    EXPECT_EQ(nlohmann::json::parse(*data.part(0, s["part"].get<std::string>())),
              merged_tree_of(open_pid(file, pid)));
  }
  nlohmann::json whole = nlohmann::json::parse(data.whole())["profiles"][0];
  EXPECT_DOUBLE_EQ(whole["tree_process_2"]["tree"]["incl_s"].get<double>(), 5.0);
  EXPECT_EQ(whole["tree_process_1"]["idle_threads"].size(), 1u);  // thread 2 of process 1
}

// One process: nothing beyond the threads and their merged tree.
TEST_F(ViewBundleTest, OneProcessHasNoScopes) {
  nlohmann::json scopes = make_view_bundle({path_})["profiles"][0]["tree_scopes"];
  EXPECT_EQ(scopes["processes"], 1);
  EXPECT_TRUE(scopes["scopes"].empty());
}

// Each point carries the thread count and peaks it is held against; the ceilings are those of
// the counts the points ran with (here 4 threads for the f32 shape, 1 for the f64 one, and the
// routine with both: several counts, no line).
TEST_F(ViewBundleTest, RooflineCeilingsForEachThreadCountThePointsRanWith) {
  test::exec_sql(path_,
                 "UPDATE shapes SET threads = 1 WHERE dtype = 'f64'; "
                 "INSERT INTO peaks (run_id, resource, threads, value, source) "
                 "VALUES (1, 'gemm.f64', 1, 50.0, 'calibrate'), "
                 "(1, 'mem.bw', 1, 10.0, 'calibrate'), (1, 'mem.bw', 4, 20.0, 'calibrate');");
  nlohmann::json r = make_view_bundle({path_})["profiles"][0]["roofline"];
  EXPECT_EQ(r["blas_threads"], 4);
  EXPECT_EQ(r["ceilings"], nlohmann::json::parse(R"([
      {"threads": 1, "compute": [{"dtype": "f64", "gflops": 50.0}], "memory_gbs": 10.0},
      {"threads": 4, "compute": [{"dtype": "f32", "gflops": 100.0}], "memory_gbs": 20.0}])"));
  std::map<std::string, nlohmann::json> shapes;
  for (const auto& s : r["shapes"]) shapes[s["dtype"]] = s;
  EXPECT_EQ(shapes["f32"]["threads"], 4);
  EXPECT_DOUBLE_EQ(shapes["f32"]["peak_gflops"].get<double>(), 100.0);
  EXPECT_EQ(shapes["f64"]["threads"], 1);
  EXPECT_DOUBLE_EQ(shapes["f64"]["peak_gflops"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(shapes["f64"]["mem_bw_gbs"].get<double>(), 10.0);
  ASSERT_EQ(r["routines"].size(), 1u);  // cblas_sgemm, both shapes
  EXPECT_TRUE(r["routines"][0]["threads"].is_null());
}

TEST_F(ViewBundleTest, AnUnreadableFileIsAnError) {
  EXPECT_THROW(make_view_bundle({(dir_.path / "missing.db").string()}), Error);
}

}  // namespace
}  // namespace sonde::analyzers
