// The viewer's bundle holds what the subcommands' --format json say, not figures of its own.
#include <gtest/gtest.h>

#include "export/view_bundle.hpp"
#include "fixture.hpp"
#include "metrics/diff.hpp"
#include "render/report.hpp"
#include "render/shapes.hpp"
#include "render/tree.hpp"

#include <map>

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
  EXPECT_EQ(p["report"], report);
  nlohmann::json shapes = nlohmann::json::parse(dump_json(render_json(shapes_table(compute_shapes(file)))));
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
  for (const auto& c : p["candidates"])
    EXPECT_EQ(c["evidence_keys"].size(), c["evidence"].size());
}

TEST_F(ViewBundleTest, TwoProfilesCarryTheirDiff) {
  std::string after = (dir_.path / "after.db").string();
  test::write_fixture(after);
  nlohmann::json b = make_view_bundle({path_, after});
  ASSERT_EQ(b["profiles"].size(), 2u);
  ProfileDiff d = compute_diff(ProfileFile::open(path_), ProfileFile::open(after));
  EXPECT_EQ(b["diff"], nlohmann::json::parse(dump_json(render_diff_json(path_, after, d))));
}

TEST_F(ViewBundleTest, NamesThatAreNotUtf8AreReplacedSoAnyDumpWorks) {
  test::exec_sql(path_, "UPDATE routines SET name = CAST(X'6C6F6164FF5F64617461' AS TEXT) "
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
                       TreeOptions{kViewFirstTreeMinPct, std::nullopt, false}))));
  EXPECT_FALSE(data.part(1, "tree"));
  EXPECT_FALSE(data.part(0, "nope"));
  EXPECT_TRUE(whole["profiles"][0]["samples"].is_null());  // the fixture was not sampled
  EXPECT_TRUE(whole["profiles"][0]["ranks"].is_null());    // nor a merged MPI run
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

TEST_F(ViewBundleTest, AnUnreadableFileIsAnError) {
  EXPECT_THROW(make_view_bundle({(dir_.path / "missing.db").string()}), Error);
}

}  // namespace
}  // namespace sonde::analyzers
