// The viewer's bundle holds what the subcommands' --format json say, not figures of its own.
#include <gtest/gtest.h>

#include "export/view_bundle.hpp"
#include "fixture.hpp"
#include "metrics/diff.hpp"
#include "render/report.hpp"
#include "render/shapes.hpp"

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
  EXPECT_EQ(p["shapes"], shapes);
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

TEST_F(ViewBundleTest, AnUnreadableFileIsAnError) {
  EXPECT_THROW(make_view_bundle({(dir_.path / "missing.db").string()}), Error);
}

}  // namespace
}  // namespace sonde::analyzers
