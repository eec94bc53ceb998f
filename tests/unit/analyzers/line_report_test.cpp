// `sonde report --by line`: per-line costs merged over threads, percentages of the function's
// total, source lines read from the recorded file, pattern filtering, and the no-data error.
#include "render/line_report.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture.hpp"
#include "sonde/source_fingerprint.hpp"

namespace sonde::analyzers {
namespace {
namespace fs = std::filesystem;

constexpr const char* kSource =
    "import numpy as np\n"                           // 1
    "\n"                                             // 2
    "def update_core_cpu(param, grad, state):\n"     // 3
    "    m = state['m']\n"                           // 4
    "    m += 0.1 * (grad - m)\n"                    // 5
    "    v = state['v']\n"                           // 6
    "\n"                                             // 7
    "    param -= 0.01 * m / (np.sqrt(v) + 1e-8)\n"  // 8
    "    return param\n"                             // 9
    "\n"                                             // 10
    "def helper():\n"                                // 11
    "    return 1\n";                                // 12

// update_core_cpu (train.py:3) on threads 1 and 2, merged: line 4: 4 hits 2 ms, line 5: 4 hits
// 3 ms, line 8: 4 hits 5 ms, line 9: 4 hits 0 ms; total 10 ms. helper (train.py:11): line 12,
// 3 hits 6 ms. update_core_gpu in a file that no longer exists: line 6, 1 hit 1 ms.
class LineReportTest : public test::FixtureTest {
 protected:
  void SetUp() override {
    test::FixtureTest::SetUp();
    source_ = (dir_.path / "train.py").string();
    std::ofstream(source_) << kSource;
    test::exec_sql(path_, R"sql(
INSERT INTO routines (routine_id, name, kind, file, line) VALUES
  (7, 'train.py:3(update_core_cpu)', 'python', ')sql" +
                              source_ + R"sql(', 3),
  (8, 'train.py:11(helper)', 'python', ')sql" +
                              source_ + R"sql(', 11),
  (9, 'gone.py:5(update_core_gpu)', 'python', '/nonexistent/sonde/gone.py', 5);
INSERT INTO line_costs (thread_id, routine_id, line, hits, time_ns) VALUES
  (1, 7, 4, 2, 1000000), (1, 7, 5, 2, 2000000), (1, 7, 8, 2, 4000000), (1, 7, 9, 2, 0),
  (2, 7, 4, 2, 1000000), (2, 7, 5, 2, 1000000), (2, 7, 8, 2, 1000000), (2, 7, 9, 2, 0),
  (2, 8, 12, 3, 6000000),
  (1, 9, 6, 1, 1000000);
)sql");
    // What the Python hook writes for each file whose lines it times.
    test::exec_sql(path_, "INSERT INTO run_info (run_id, process_id, key, value) VALUES (1, 1, '" +
                              std::string(kSourceFingerprintKey) + source_ + "', '" +
                              source_fingerprint(source_) + "');");
  }
  std::string source_;
};

TEST_F(LineReportTest, MergesThreadsAndComputesShares) {
  ProfileFile file = ProfileFile::open(path_);
  LineCosts costs = compute_line_costs(file);
  ASSERT_EQ(costs.functions.size(), 3u);
  EXPECT_EQ(costs.functions[0].function, "update_core_cpu");  // by total time, not by name
  EXPECT_EQ(costs.functions[1].function, "helper");
  EXPECT_EQ(costs.functions[2].function, "update_core_gpu");

  const LineFunction& f = costs.functions[0];
  EXPECT_EQ(f.name, "train.py:3(update_core_cpu)");
  EXPECT_EQ(f.file, source_);
  EXPECT_EQ(f.first_line, 3);
  EXPECT_EQ(f.total_ns, 10'000'000);
  ASSERT_EQ(f.lines.size(), 7u);  // lines 3..9, the unrecorded ones too
  for (std::size_t i = 0; i < f.lines.size(); ++i) EXPECT_EQ(f.lines[i].line, 3 + (int)i);

  EXPECT_FALSE(f.lines[0].recorded);
  EXPECT_EQ(f.lines[0].contents, "def update_core_cpu(param, grad, state):");
  EXPECT_EQ(f.lines[0].hits, 0);

  const LineRow& l4 = f.lines[1];
  EXPECT_TRUE(l4.recorded);
  EXPECT_EQ(l4.hits, 4);
  EXPECT_EQ(l4.time_ns, 2'000'000);
  EXPECT_DOUBLE_EQ(l4.pct, 20.0);
  EXPECT_DOUBLE_EQ(l4.us_per_hit, 500.0);
  EXPECT_EQ(l4.contents, "    m = state['m']");

  EXPECT_EQ(f.lines[2].time_ns, 3'000'000);  // 2 ms on thread 1 + 1 ms on thread 2
  EXPECT_DOUBLE_EQ(f.lines[2].pct, 30.0);
  EXPECT_DOUBLE_EQ(f.lines[2].us_per_hit, 750.0);
  EXPECT_FALSE(f.lines[3].recorded);
  EXPECT_FALSE(f.lines[4].recorded);
  EXPECT_EQ(f.lines[4].contents, "");
  EXPECT_EQ(f.lines[5].hits, 4);
  EXPECT_DOUBLE_EQ(f.lines[5].pct, 50.0);
  EXPECT_DOUBLE_EQ(f.lines[5].us_per_hit, 1250.0);
  EXPECT_EQ(f.lines[5].contents, "    param -= 0.01 * m / (np.sqrt(v) + 1e-8)");
  EXPECT_TRUE(f.lines[6].recorded);
  EXPECT_DOUBLE_EQ(f.lines[6].pct, 0.0);
  EXPECT_EQ(f.lines[6].contents, "    return param");

  // An unreadable source leaves the contents empty but keeps the numbers.
  const LineFunction& gpu = costs.functions[2];
  ASSERT_EQ(gpu.lines.size(), 2u);  // lines 5..6
  EXPECT_EQ(gpu.lines[1].hits, 1);
  EXPECT_DOUBLE_EQ(gpu.lines[1].pct, 100.0);
  EXPECT_EQ(gpu.lines[0].contents, "");
  EXPECT_EQ(gpu.lines[1].contents, "");
}

// A profile names its sources by path: one from elsewhere may name any file of the reader's (a
// credentials file, with rows for its lines). Text is shown only from the file profiled.
TEST_F(LineReportTest, SourceShownOnlyFromTheFileProfiled) {
  ProfileFile file = ProfileFile::open(path_);
  EXPECT_TRUE(compute_line_costs(file).functions[0].source_shown);
  std::ofstream(source_, std::ios::app) << "# edited after the run\n";
  LineCosts edited = compute_line_costs(file);
  EXPECT_FALSE(edited.functions[0].source_shown);
  for (const LineRow& r : edited.functions[0].lines) EXPECT_EQ(r.contents, "");
  EXPECT_NE(render_line_report_text(edited).find("(source not shown"), std::string::npos);
  // A file never fingerprinted (a secret named by a crafted profile) is not read at all.
  std::string secret = (dir_.path / "credentials").string();
  std::ofstream(secret) << "aws_secret_access_key = s3cr3t\n";
  test::exec_sql(path_, "UPDATE routines SET file = '" + secret +
                            "', line = 1 WHERE routine_id = 7;"
                            "DELETE FROM line_costs WHERE routine_id = 7;"
                            "INSERT INTO line_costs VALUES (1, 7, 1, 1, 9000000);");
  std::string text = render_line_report_text(compute_line_costs(file));
  EXPECT_EQ(text.find("s3cr3t"), std::string::npos) << text;
}

TEST_F(LineReportTest, PatternOnFunctionPartOrWholeName) {
  EXPECT_EQ(function_part("train.py:282(update_core_cpu)"), "update_core_cpu");
  EXPECT_EQ(function_part("plain"), "plain");
  EXPECT_TRUE(line_pattern_matches("train.py:282(update_core_cpu)", "update_core*"));
  EXPECT_FALSE(line_pattern_matches("train.py:282(update_core_cpu)", "update"));
  EXPECT_TRUE(line_pattern_matches("train.py:282(update_core_cpu)", "train.py:*"));

  ProfileFile file = ProfileFile::open(path_);
  LineCosts some = compute_line_costs(file, "update_core*");
  ASSERT_EQ(some.functions.size(), 2u);
  EXPECT_EQ(some.functions[0].function, "update_core_cpu");
  EXPECT_EQ(some.functions[1].function, "update_core_gpu");
  LineCosts whole = compute_line_costs(file, "train.py:11(*)");
  ASSERT_EQ(whole.functions.size(), 1u);
  EXPECT_EQ(whole.functions[0].function, "helper");
  try {
    compute_line_costs(file, "nothing*");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 1);
    EXPECT_NE(std::string(e.what()).find("matches 'nothing*' (recorded: update_core_gpu, "
                                         "helper, update_core_cpu)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(LineReportTest, TextLikeLineProfiler) {
  ProfileFile file = ProfileFile::open(path_);
  std::string text = render_line_report_text(compute_line_costs(file, "helper"));
  EXPECT_EQ(text, "Function: helper at " + source_ +
                      ":11  Total time: 0.006 s\n"
                      "\n"
                      "Line  Hits  Time (ms)  Per Hit (us)  % Time  Line Contents\n"
                      "==========================================================\n"
                      "  11                                         def helper():\n"
                      "  12     3      6.000        2000.0   100.0      return 1\n");
  std::string all = render_line_report_text(compute_line_costs(file));
  EXPECT_NE(all.find("Function: update_core_cpu at " + source_ + ":3  Total time: 0.010 s\n"),
            std::string::npos);
  EXPECT_NE(all.find("\n   5     4      3.000         750.0    30.0      m += 0.1 * (grad - m)\n"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("\n   7\n"), std::string::npos) << all;  // blank line, blank numbers
  EXPECT_LT(all.find("update_core_cpu"), all.find("Function: helper"));
}

TEST_F(LineReportTest, CsvAndJsonHaveOneRowPerRecordedLine) {
  ProfileFile file = ProfileFile::open(path_);
  LineCosts costs = compute_line_costs(file, "update_core_cpu");
  EXPECT_EQ(render_csv(line_costs_table(costs)),
            "function,file,line,hits,time_s,pct,contents\n"
            "update_core_cpu," +
                source_ +
                ",4,4,0.002,20,    m = state['m']\n"
                "update_core_cpu," +
                source_ +
                ",5,4,0.003,30,    m += 0.1 * (grad - m)\n"
                "update_core_cpu," +
                source_ +
                ",8,4,0.005,50,    param -= 0.01 * m / (np.sqrt(v) + 1e-8)\n"
                "update_core_cpu," +
                source_ + ",9,4,0,0,    return param\n");
  Json doc = render_line_report_json(path_, costs);
  EXPECT_EQ(doc["file"], path_);
  ASSERT_EQ(doc["functions"].size(), 1u);
  EXPECT_DOUBLE_EQ(doc["functions"][0]["total_s"].get<double>(), 0.01);
  EXPECT_EQ(doc["functions"][0]["line"], 3);
  ASSERT_EQ(doc["rows"].size(), 4u);
  EXPECT_EQ(doc["rows"][2]["line"], 8);
  EXPECT_EQ(doc["rows"][2]["hits"], 4);
  EXPECT_DOUBLE_EQ(doc["rows"][2]["time_s"].get<double>(), 0.005);
  EXPECT_DOUBLE_EQ(doc["rows"][2]["pct"].get<double>(), 50.0);
  EXPECT_EQ(doc["rows"][2]["contents"], "    param -= 0.01 * m / (np.sqrt(v) + 1e-8)");
}

class NoLineCostsTest : public test::FixtureTest {};

TEST_F(NoLineCostsTest, ClearErrorWithExitCodeOne) {
  auto expect_error = [&] {
    ProfileFile file = ProfileFile::open(path_);
    try {
      compute_line_costs(file);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 1);
      EXPECT_EQ(std::string(e.what()).rfind(
                    "no line costs in " + path_ + ": run python3 -m sonde --lines PATTERN", 0),
                0u)
          << e.what();
    }
  };
  expect_error();                                   // the table is there but empty
  test::exec_sql(path_, "DROP TABLE line_costs;");  // a profile from before the table
  expect_error();
}

TEST_F(LineReportTest, Cli) {
  std::string db = "'" + path_ + "'";
  test::CliResult r = test::run_sonde("report " + db + " --by line --lines 'update_core*'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_EQ(r.out.rfind("Function: update_core_cpu at " + source_ + ":3  Total time: 0.010 s\n", 0),
            0u)
      << r.out;
  EXPECT_NE(r.out.find("Function: update_core_gpu at /nonexistent/sonde/gone.py:5"),
            std::string::npos);
  EXPECT_EQ(r.out.find("helper"), std::string::npos);

  test::CliResult j = test::run_sonde("report " + db + " --by line --format json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out)["rows"].size(), 6u);
  test::CliResult c =
      test::run_sonde("report " + db + " --lines helper -f csv");  // implies --by line
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(c.out, "function,file,line,hits,time_s,pct,contents\nhelper," + source_ +
                       ",12,3,0.006,100,    return 1\n");

  EXPECT_EQ(test::run_sonde("report " + db + " --by routine --lines helper").exit_code, 2);
  EXPECT_EQ(test::run_sonde("report " + db + " --by lines").exit_code, 2);
  test::CliResult none = test::run_sonde("report " + db + " --by line --lines 'nope*'");
  EXPECT_EQ(none.exit_code, 1);

  test::exec_sql(path_, "DELETE FROM line_costs;");
  test::CliResult empty = test::run_sonde("report " + db + " --by line");
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_TRUE(empty.out.empty()) << empty.out;
  EXPECT_EQ(
      empty.err.rfind(
          "sonde report: no line costs in " + path_ + ": run python3 -m sonde --lines PATTERN", 0),
      0u)
      << empty.err;
  EXPECT_EQ(std::count(empty.err.begin(), empty.err.end(), '\n'), 1);
  // The flat profile stays the default and is unaffected.
  EXPECT_EQ(test::run_sonde("report " + db).exit_code, 0);
}

}  // namespace
}  // namespace sonde::analyzers
