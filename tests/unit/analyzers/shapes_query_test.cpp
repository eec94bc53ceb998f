#include <gtest/gtest.h>

#include "base/table_format.hpp"
#include "fixture.hpp"
#include "profile/query.hpp"
#include "render/shapes.hpp"

namespace sonde::analyzers {
namespace {

class ShapesQueryTest : public test::FixtureTest {};

TEST_F(ShapesQueryTest, ShapesGflopsIsFlopsOverNanoseconds) {
  ProfileFile file = ProfileFile::open(path_);
  auto rows = compute_shapes(file);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].routine, "cblas_sgemm");
  EXPECT_EQ(rows[0].call_site, "model.py:42");
  EXPECT_EQ(rows[0].m, 1000);
  EXPECT_EQ(rows[0].calls, 4);
  EXPECT_DOUBLE_EQ(rows[0].time_s, 4.0);
  EXPECT_DOUBLE_EQ(rows[0].gflops.value_or(-1), 8e9 / 4e9);
  EXPECT_DOUBLE_EQ(rows[0].pct_peak.value_or(-1), 2.0);  // 2 of a 100 GFLOP/s peak
  EXPECT_EQ(rows[1].dtype, "f64");
  EXPECT_DOUBLE_EQ(rows[1].gflops.value_or(-1), 67108864.0 / 2e9);
  EXPECT_FALSE(rows[1].pct_peak);  // no f64 peak calibrated
  EXPECT_EQ(compute_shapes(file, 1).size(), 1u);
  std::string text = render_text(shapes_table(rows));
  EXPECT_NE(text.find("worker.py:7"), std::string::npos);
  EXPECT_EQ(text.back(), '\n');
  EXPECT_NE(text.find("  0.034         -\n"), std::string::npos) << text;
}

TEST_F(ShapesQueryTest, QueryReturnsTypedCells) {
  ProfileFile file = ProfileFile::open(path_);
  Table t = run_query(file, "SELECT routine, calls, excl_s FROM hotspots ORDER BY excl_s DESC");
  ASSERT_EQ(t.columns.size(), 3u);
  EXPECT_EQ(t.columns[2].key, "excl_s");
  ASSERT_EQ(t.rows.size(), 6u);
  EXPECT_EQ(std::get<std::string>(t.rows[0][0]), "cblas_sgemm");
  EXPECT_EQ(std::get<std::int64_t>(t.rows[0][1]), 6);
  EXPECT_DOUBLE_EQ(std::get<double>(t.rows[0][2]), 6.0);
}

// A join's two `name` columns: JSON's rows are objects keyed by name, and kept the last alone.
TEST_F(ShapesQueryTest, QueryColumnsOfOneNameGetKeysOfTheirOwn) {
  ProfileFile file = ProfileFile::open(path_);
  Table t =
      run_query(file,
                "SELECT r.name, t.name, 1 AS 'name:1', 2 AS name FROM nodes n JOIN routines r "
                "USING (routine_id) JOIN threads t USING (thread_id) LIMIT 1");
  ASSERT_EQ(t.columns.size(), 4u);
  std::vector<std::string> keys, titles;
  for (const Column& c : t.columns) keys.push_back(c.key), titles.push_back(c.title);
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "name:1", "name:1:1", "name:2"}));
  EXPECT_EQ(titles, (std::vector<std::string>{"name", "name", "name:1", "name"}));
  Json rows = render_json(t);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].size(), 4u) << rows.dump();
}

// The text output prints a query's numbers as stored: a nanosecond in seconds is not 0.000000.
TEST_F(ShapesQueryTest, QueryTextKeepsEveryNumbersValue) {
  ProfileFile file = ProfileFile::open(path_);
  std::string text =
      render_text(run_query(file, "SELECT 1e-9 AS tiny, 147.19596318 AS rate, 6.0 AS six, 7 AS n"));
  EXPECT_NE(text.find("1e-09"), std::string::npos) << text;
  EXPECT_NE(text.find("147.19596318"), std::string::npos) << text;
  EXPECT_EQ(text.find("0.000000"), std::string::npos) << text;
  EXPECT_NE(text.find(" 7\n"), std::string::npos) << text;
}

TEST_F(ShapesQueryTest, QueryRefusesWritesAndReportsSqlErrors) {
  ProfileFile file = ProfileFile::open(path_);
  EXPECT_THROW(run_query(file, "DELETE FROM nodes"), Error);
  EXPECT_THROW(run_query(file, "CREATE TEMP TABLE x (a)"), Error);
  try {
    run_query(file, "SELECT nope FROM nodes");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no such column: nope"), std::string::npos) << e.what();
  }
  // Nothing was deleted.
  Table t = run_query(file, "SELECT COUNT(*) FROM nodes");
  EXPECT_EQ(std::get<std::int64_t>(t.rows[0][0]), 12);
}

}  // namespace
}  // namespace sonde::analyzers
