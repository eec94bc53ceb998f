// One truth per figure: every consumer prints what a plain SELECT on its view returns, routines
// are told apart by identity (not display name), idle threads are in no denominator, and the
// text of `report` and `tree` on known profiles is checked against golden files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "export/export.hpp"
#include "fixture.hpp"
#include "metrics/diff.hpp"
#include "metrics/metrics.hpp"
#include "profile/call_tree.hpp"
#include "profile/run_summary.hpp"
#include "render/diff.hpp"
#include "render/report.hpp"
#include "render/shapes.hpp"
#include "render/tree.hpp"

namespace sonde::analyzers {
namespace {

// A Python import chain: three different `__init__.py:1(<module>)` routines nested in each
// other, and two `cblas_sgemm` from two libraries. Summed by name, the modules made 7.6 s of
// a 4 s thread (190 %).
//   thread 0 "main" (4 s): <thread> excl 0.2
//     train.py:1(<module>) 3.8, excl 0.3
//       numpy/__init__ 3.0, excl 0.4
//         numpy/core/__init__ 2.6, excl 0.6
//           numpy/linalg/__init__ 2.0, excl 1.5
//             cblas_sgemm (openblas) 0.5
//       cblas_sgemm (mkl) 0.5
//   thread 1: root only (an idle worker), 3.9 s
// Both sgemms ran one shape (64x64x64 f32) from one call site: by name, one shape row.
void write_modules_fixture(const std::filesystem::path& path) {
  std::string sql = test::read_file(SONDE_SCHEMA_SQL);
  sql += "INSERT INTO meta VALUES ('schema_version', '" + std::to_string(kSchemaVersion) + "');";
  sql += R"sql(
INSERT INTO runs VALUES (1, 'uuid-m', 1000000000000, 'python3 train.py', 'testhost', 'Test CPU',
                         2, 2, 'profile');
INSERT INTO processes (process_id, run_id, pid, ppid, origin, command, started_ns, ended_ns,
                       end_reason)
  VALUES (1, 1, 500, 1, 'root', 'python3 train.py', 1000000000000, 1000000000000 + 4200000000,
          'exit');
INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns) VALUES
  (1, 1, 0, 500, 'main', 1000100000000, 1000100000000 + 4000000000),
  (2, 1, 1, 501, 'worker', 1000100000000, 1000100000000 + 3900000000);
INSERT INTO routines (routine_id, name, kind, library, file, line) VALUES
  (1, '<thread>', 'root', '', '', 0),
  (2, 'train.py:1(<module>)', 'python', '', '/w/train.py', 1),
  (3, '__init__.py:1(<module>)', 'python', '', '/site/numpy/__init__.py', 1),
  (4, '__init__.py:1(<module>)', 'python', '', '/site/numpy/core/__init__.py', 1),
  (5, '__init__.py:1(<module>)', 'python', '', '/site/numpy/linalg/__init__.py', 1),
  (6, 'cblas_sgemm', 'blas', 'libopenblas.so.0', '', 0),
  (7, 'cblas_sgemm', 'blas', 'libmkl_rt.so.2', '', 0);
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES
  (1, 1, NULL, 1, 0, 0, 1, 1, 4000000000, 200000000),
  (2, 1, 1,    2, 1, 0, 1, 2, 3800000000, 300000000),
  (3, 1, 2,    3, 2, 0, 1, 1, 3000000000, 400000000),
  (4, 1, 3,    4, 3, 0, 1, 1, 2600000000, 600000000),
  (5, 1, 4,    5, 4, 0, 1, 3, 2000000000, 1500000000),
  (6, 1, 5,    6, 5, 0, 3, 0,  500000000,  500000000),
  (7, 1, 2,    7, 2, 0, 2, 0,  500000000,  500000000),
  (8, 2, NULL, 1, 0, 0, 1, 0, 3900000000, 3900000000);
INSERT INTO shapes (node_id, call_site, m, n, k, trans_a, trans_b, dtype, calls, time_ns, flops,
                    bytes, threads) VALUES
  (6, 'model.py:9', 64, 64, 64, 'N', 'N', 'f32', 3, 500000000, 1572864, 147456, 1),
  (7, 'model.py:9', 64, 64, 64, 'N', 'N', 'f32', 2, 500000000, 1048576, 98304, 1);
)sql";
  test::exec_sql(path, sql);
}

// The modules fixture and a third thread that waited for work most of its life: thread 2 (seq
// 2) of 3.5 s, 3.3 s of it in threading's Condition.wait under queue.get (a DataLoader's queue
// feeder), and one cblas_sgemm (openblas), a routine the main thread calls too, so a reader that
// merges the wait in, or the sgemm out, shows it in a row the other threads have.
//   thread 3 "feeder" (3.5 s, CPU 0.01 s): <thread> excl 0.001
//     queue.py:154(get) 3.499, excl 0.001
//       threading.py:288(wait) 3.3, excl 3.3        <- left out, with its subtree
//         threading.py:90(_helper) 0.1 (excl 0.1)
//       cblas_sgemm (openblas) 0.198
// And a pool's worker, thread 3 (seq 3) of 2 s: its loop's own time, 1.8 s, is its wait for
// tasks (in C: no frame), the task under it work.
//   thread 4 "pool" (2 s): <thread> excl 0
//     concurrent/futures/thread.py:_worker 2.0, excl 1.8  <- its own time left out
//       cblas_sgemm (openblas) 0.2
// And a node of no call that holds time (a fork child's inherited frame): thread 5 (seq 4).
//   thread 5 (0.5 s): <thread> excl 0
//     train.py:1(<module>) 0 calls, 0.5, excl 0.5
void write_waits_fixture(const std::filesystem::path& path) {
  write_modules_fixture(path);
  test::exec_sql(path, R"sql(
INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns, cpu_ns) VALUES
  (3, 1, 2, 502, 'feeder', 1000100000000, 1000100000000 + 3500000000, 10000000),
  (4, 1, 3, 503, 'pool', 1000100000000, 1000100000000 + 2000000000, 300000000),
  (5, 1, 4, 504, 'child', 1000100000000, 1000100000000 + 500000000, 500000000);
INSERT INTO routines (routine_id, name, kind, library, file, line) VALUES
  (8, 'queue.py:154(get)', 'python', '', '/usr/lib/python3.11/queue.py', 154),
  (9, 'threading.py:288(wait)', 'python', '', '/usr/lib/python3.11/threading.py', 288),
  (10, 'threading.py:90(_helper)', 'python', '', '/usr/lib/python3.11/threading.py', 90),
  (11, 'thread.py:69(_worker)', 'python', '', '/usr/lib/python3.11/concurrent/futures/thread.py',
   69);
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES
  (9,  3, NULL, 1, 0, 0, 1, 1, 3500000000,    1000000),
  (10, 3, 9,    8, 1, 0, 1, 2, 3499000000,    1000000),
  (11, 3, 10,   9, 2, 0, 1, 1, 3300000000, 3200000000),
  (13, 3, 11,  10, 3, 0, 1, 0,  100000000,  100000000),
  (12, 3, 10,   6, 2, 0, 1, 0,  198000000,  198000000),
  (14, 4, NULL, 1, 0, 0, 1, 1, 2000000000,          0),
  (15, 4, 14,  11, 1, 0, 1, 1, 2000000000, 1800000000),
  (16, 4, 15,   6, 2, 0, 1, 0,  200000000,  200000000),
  (17, 5, NULL, 1, 0, 0, 1, 1,  500000000,          0),
  (18, 5, 17,   2, 1, 0, 0, 0,  500000000,  500000000);
)sql");
}

class OneTruthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = (dir_.path / "prof.db").string();
    modules_ = (dir_.path / "modules.db").string();
    test::write_fixture(fixture_);
    write_modules_fixture(modules_);
    waits_ = (dir_.path / "waits.db").string();
    write_waits_fixture(waits_);
  }
  test::TempDir dir_;
  std::string fixture_, modules_, waits_;
};

// Runs `sonde ARGS` and parses its JSON output.
Json cli_json(const std::string& args) {
  test::CliResult r = test::run_sonde(args + " --format json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return Json::parse(r.out);
}

double one_real(const ProfileFile& file, const std::string& sql) {
  auto st = file.prepare(sql);
  EXPECT_TRUE(st.step()) << sql;
  return st.real(0);
}

// ---- golden output --------------------------------------------------------------------------

// The expected text is checked in; SONDE_UPDATE_GOLDEN=1 rewrites it (then review the diff).
void expect_golden(const std::string& name, const std::string& text) {
  std::filesystem::path path = std::filesystem::path(SONDE_GOLDEN_DIR) / name;
  if (std::getenv("SONDE_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  std::string expected = test::read_file(path);
  ASSERT_FALSE(expected.empty()) << "no golden file " << path;
  EXPECT_EQ(text, expected) << "golden file " << path << " differs";
}

TEST_F(OneTruthTest, GoldenReportAndTree) {
  for (const auto& [db, tag] : {std::pair{fixture_, "fixture"}, std::pair{modules_, "modules"}}) {
    ProfileFile file = ProfileFile::open(db);
    expect_golden(std::string("report_") + tag + ".txt",
                  render_report_text(load_run_summary(file), compute_hotspots(file), 0));
    TreeOptions each;
    each.min_pct = 0;
    expect_golden(std::string("tree_") + tag + ".txt",
                  render_tree_text(load_forest(file, false), each));
    TreeOptions merged = each;
    merged.merge_threads = true;
    expect_golden(std::string("tree_merged_") + tag + ".txt",
                  render_tree_text(load_forest(file, true), merged));
  }
}

// ---- routine identity and denominators ------------------------------------------------------

TEST_F(OneTruthTest, RoutinesOfOneNameStayApartAndNoRowPassesItsDenominator) {
  ProfileFile file = ProfileFile::open(modules_);
  Hotspots h = compute_hotspots(file);
  EXPECT_EQ(h.wall_ns, 4'200'000'000);
  EXPECT_EQ(h.total_ns, 4'000'000'000);  // the idle worker's 3.9 s is in no denominator
  EXPECT_EQ(h.busy_threads, 1);
  EXPECT_EQ(h.idle_threads, 1);
  int modules = 0, sgemms = 0;
  for (const HotspotRow& r : h.rows) {
    EXPECT_LE(r.pct_time, 100.0) << r.name << " " << r.file;
    modules += r.name == "__init__.py:1(<module>)";
    sgemms += r.name == "cblas_sgemm";
  }
  EXPECT_EQ(modules, 3);
  EXPECT_EQ(sgemms, 2);
  std::string text = render_report_text(load_run_summary(file), h, 0);
  EXPECT_NE(text.find("__init__.py:1(<module>) [python] /site/numpy/core/__init__.py:1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cblas_sgemm [blas] (libmkl_rt.so.2)"), std::string::npos) << text;
  EXPECT_NE(text.find("train.py:1(<module>) [python]\n"), std::string::npos) << text;

  // Merged over threads, the tree keeps them apart too, and its root is the busy time.
  CallNode merged = load_merged_tree(file);
  EXPECT_EQ(merged.incl_ns, 4'000'000'000);
  ASSERT_EQ(merged.children.size(), 1u);
  EXPECT_EQ(merged.children[0].children.size(), 2u);  // numpy/__init__ and mkl's sgemm
}

// A helper thread's wait for work is in no sum over threads: every view and reader that merges
// threads leaves out the wait and what is under it, and keeps the rest of the thread (its
// sgemm, queue.get's own time); its own tree still shows the wait, said to be left out.
TEST_F(OneTruthTest, AHelperThreadsWaitForWorkIsInNoSumOverThreads) {
  ProfileFile file = ProfileFile::open(waits_);
  auto reals = [&](const std::string& sql) {
    auto st = file.prepare(sql);
    std::vector<double> row;
    if (st.step())
      for (int i = 0; i < st.column_count(); ++i) row.push_back(st.real(i));
    return row;
  };
  EXPECT_EQ(reals("SELECT busy, waiting, counted, waited_s, counted_s FROM thread_times "
                  "WHERE thread_id = 3"),
            (std::vector<double>{1, 0, 1, 3.3, 0.2}));
  EXPECT_EQ(reals("SELECT waited_s * 10, counted_s * 10 FROM thread_times WHERE thread_id = 4"),
            (std::vector<double>{18, 2}));
  EXPECT_EQ(reals("SELECT busy_threads, idle_threads, thread_s * 10, waited_s * 10 "
                  "FROM run_totals"),
            (std::vector<double>{4, 1, 49, 51}));
  Hotspots h = compute_hotspots(file);
  EXPECT_EQ(h.total_ns, 4'900'000'000);
  EXPECT_EQ(h.waited_ns, 5'100'000'000);
  double excl_pct = 0;
  bool get = false;
  for (const HotspotRow& r : h.rows) {
    EXPECT_NE(r.file, "/usr/lib/python3.11/threading.py") << r.name;
    if (r.name == "cblas_sgemm" && r.library == "libopenblas.so.0") {
      EXPECT_EQ(r.calls, 5);  // the main thread's 3, the feeder's and the pool's
      EXPECT_EQ(r.incl_ns, 898'000'000);
    }
    if (r.name == "queue.py:154(get)") {
      get = true;
      EXPECT_EQ(std::make_tuple(r.calls, r.subrs, r.incl_ns, r.excl_ns),
                std::make_tuple(std::int64_t{1}, std::int64_t{1}, std::int64_t{199'000'000},
                                std::int64_t{1'000'000}));
    }
    if (r.name == "thread.py:69(_worker)")  // its task alone
      EXPECT_EQ(std::make_tuple(r.calls, r.incl_ns, r.excl_ns),
                std::make_tuple(std::int64_t{1}, std::int64_t{200'000'000}, std::int64_t{0}));
    if (r.kind == "root") EXPECT_EQ(r.excl_ns, 200'000'000 + 1'000'000);
    excl_pct += r.excl_pct;
  }
  EXPECT_TRUE(get);
  EXPECT_NEAR(excl_pct, 100.0, 1e-9);
  for (const char* sql :
       {"SELECT COUNT(*) FROM callpaths WHERE path LIKE '%threading%'",
        "SELECT COUNT(*) FROM routine_edges WHERE routine_id IN (9, 10) OR caller_id IN (9, 10)",
        "SELECT COUNT(*) FROM rank_hotspots WHERE routine_id IN (9, 10)"})
    EXPECT_EQ(reals(sql), std::vector<double>{0}) << sql;
  EXPECT_EQ(reals("SELECT calls, incl_s, subrs FROM callpaths WHERE path = 'queue.py:154(get)'"),
            (std::vector<double>{1, 0.199, 1}));
  EXPECT_EQ(reals("SELECT calls, incl_s FROM routine_edges WHERE caller_id = 8"),
            (std::vector<double>{1, 0.198}));
  for (const char* format : {"folded", "csv", "callgrind", "pstats"}) {
    test::CliResult r = test::run_sonde("export '" + waits_ + "' --format " + format + " -o '" +
                                        waits_ + "." + format + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string text = test::read_file(waits_ + "." + format);
    EXPECT_EQ(text.find("threading.py"), std::string::npos) << format;
    EXPECT_NE(text.find("queue.py"), std::string::npos) << format;
  }
  EXPECT_EQ(load_merged_tree(file).incl_ns, 4'900'000'000);
  test::CliResult callers =
      test::run_sonde("tree '" + waits_ + "' --callers 'threading.py:288(wait)'");
  EXPECT_EQ(callers.exit_code, 2) << callers.out;

  // Its own tree shows the wait, and says it is left out.
  Json each = cli_json("tree '" + waits_ + "' --min-pct 0");
  ASSERT_EQ(each["trees"].size(), 4u);
  EXPECT_DOUBLE_EQ(each["trees"][1]["waited_s"].get<double>(), 3.3);
  EXPECT_EQ(each["trees"][1]["tree"]["children"][0]["children"][0]["name"],
            "threading.py:288(wait)");
  test::CliResult text = test::run_sonde("tree '" + waits_ + "' --min-pct 0");
  EXPECT_NE(text.out.find("process 500, thread 2 (tid 502) \"feeder\": 3.500 s = 100 % (this "
                          "thread's time; 3.300 s of it waits for work (threading, selectors, "
                          "socket, thread and process joins): not in the run's total)"),
            std::string::npos)
      << text.out;
  test::CliResult merged = test::run_sonde("tree '" + waits_ + "' --threads merge");
  EXPECT_NE(merged.out.find("4 threads merged: 4.900 s = 100 %"), std::string::npos) << merged.out;
  test::CliResult report = test::run_sonde("report '" + waits_ + "'");
  EXPECT_NE(report.out.find("left out: 5.100 s of waits for work (helper threads'"),
            std::string::npos)
      << report.out;
}

// The waits' views, which one statement of hotspots read five times, are made once a
// connection: temp tables of the views' own SELECTs, holding the rows the views (the file's
// stored ones, the same text) return. A file naming no wait routine, or whose parent links
// form a cycle (wait_cuts' walk up them would not end), keeps the views.
TEST_F(OneTruthTest, TheWaitsViewsAreMadeOnceAndHoldTheViewsRows) {
  auto kinds = [](const ProfileFile& f) {
    std::string out;
    for (auto st = f.prepare("SELECT name || ' ' || type FROM sqlite_temp_master WHERE name IN "
                             "('waits', 'waited_nodes', 'wait_cuts') ORDER BY name");
         st.step();)
      out += st.text(0) + ";";
    return out;
  };
  auto rows = [](const ProfileFile& f, const std::string& table) {
    std::vector<std::string> out;
    for (auto st = f.prepare("SELECT quote(node_id) || ' ' || quote(ns) FROM " + table +
                             " ORDER BY node_id");
         st.step();)
      out.push_back(st.text(0));
    return out;
  };
  {
    ProfileFile file = ProfileFile::open(waits_);
    EXPECT_EQ(kinds(file), "wait_cuts table;waited_nodes table;waits table;");
    for (const char* view : {"waits", "wait_cuts"}) {
      std::vector<std::string> made = rows(file, std::string("temp.") + view);
      EXPECT_FALSE(made.empty()) << view;
      EXPECT_EQ(made, rows(file, std::string("main.") + view)) << view;
    }
    std::vector<std::string> inside;
    for (auto st = file.prepare("SELECT node_id FROM temp.waited_nodes ORDER BY 1"); st.step();)
      inside.push_back(st.text(0));
    EXPECT_EQ(inside, (std::vector<std::string>{"11", "13"}));
  }
  EXPECT_EQ(kinds(ProfileFile::open(fixture_)),
            "wait_cuts view;waited_nodes view;waits view;");  // no wait routine
  test::exec_sql(waits_, "UPDATE nodes SET parent_id = 13 WHERE node_id = 10");
  EXPECT_EQ(kinds(ProfileFile::open(waits_)), "wait_cuts view;waited_nodes view;waits view;");
}

TEST_F(OneTruthTest, ShapesOfTwoRoutinesOfOneNameStayApart) {
  ProfileFile file = ProfileFile::open(modules_);
  std::vector<ShapeRow> rows = compute_shapes(file);
  ASSERT_EQ(rows.size(), 2u);  // by name: one row of 5 calls
  std::map<std::int64_t, std::int64_t> calls_of;
  for (const ShapeRow& r : rows) calls_of[r.routine_id] = r.calls;
  EXPECT_EQ(calls_of, (std::map<std::int64_t, std::int64_t>{{6, 3}, {7, 2}}));

  // metrics (and the roofline and candidates built on it) and diff keep the two rows.
  Metrics m = compute_metrics(file);
  ASSERT_EQ(m.shapes.size(), 2u);
  EXPECT_NE(m.shapes[0].routine_id, m.shapes[1].routine_id);
  ProfileDiff d = compute_diff(file, ProfileFile::open(modules_));
  ASSERT_EQ(d.shapes.size(), 2u);
  for (const ShapeDiffRow& r : d.shapes) EXPECT_DOUBLE_EQ(r.ratio.value_or(0), 1.0);
}

TEST_F(OneTruthTest, DiffOfAFileWithItselfIsOneAndMatchesByIdentity) {
  ProfileDiff d = compute_diff(ProfileFile::open(modules_), ProfileFile::open(modules_));
  ASSERT_TRUE(d.total_speedup);
  EXPECT_DOUBLE_EQ(*d.total_speedup, 1.0);
  EXPECT_EQ(d.total_before_ns, 4'200'000'000);
  EXPECT_EQ(d.phases.size(), 4u);    // train.py and three modules, never summed
  EXPECT_EQ(d.routines.size(), 2u);  // two sgemms
  for (const auto& rows : {d.phases, d.routines})
    for (const DiffRow& r : rows) {
      EXPECT_EQ(r.status, "both") << r.name;
      EXPECT_DOUBLE_EQ(r.speedup.value_or(0), 1.0) << r.name;
    }
  std::string text = render_diff_text(d);
  EXPECT_NE(text.find("speedup 1.00x (busy threads' time 4.000 s -> 4.000 s)"), std::string::npos)
      << text;
}

// ---- each consumer against its view ---------------------------------------------------------

TEST_F(OneTruthTest, ReportPrintsTheHotspotsView) {
  for (const std::string& db : {fixture_, modules_, waits_}) {
    ProfileFile file = ProfileFile::open(db);
    Json j = cli_json("report '" + db + "' --top 0");
    std::map<std::tuple<std::string, std::string, std::string, std::int64_t>,
             std::tuple<std::int64_t, double, double, double>>
        view;
    auto st = file.prepare(
        "SELECT routine, library, file, line, calls, incl_s, excl_s, incl_pct "
        "FROM hotspots");
    while (st.step())
      view[{st.text(0), st.text(1), st.text(2), st.int64(3)}] = {st.int64(4), st.real(5),
                                                                 st.real(6), st.real(7)};
    ASSERT_EQ(j["rows"].size(), view.size()) << db;
    for (const auto& row : j["rows"]) {
      auto it = view.find({row["name"], row["library"], row["file"], row["line"]});
      ASSERT_NE(it, view.end()) << row.dump();
      auto [calls, incl_s, excl_s, pct] = it->second;
      EXPECT_EQ(row["calls"].get<std::int64_t>(), calls);
      EXPECT_NEAR(row["incl_ms"].get<double>(), incl_s * 1e3, 1e-6);
      EXPECT_NEAR(row["excl_ms"].get<double>(), excl_s * 1e3, 1e-6);
      EXPECT_NEAR(row["pct_time"].get<double>(), pct, 1e-9);
    }
    EXPECT_DOUBLE_EQ(j["total_s"].get<double>(), one_real(file, "SELECT thread_s FROM run_totals"));
    EXPECT_DOUBLE_EQ(j["wall_s"].get<double>(), one_real(file, "SELECT wall_s FROM run_totals"));
    EXPECT_EQ(j["run"]["threads"].get<double>(),
              one_real(file, "SELECT busy_threads FROM run_totals"));
    EXPECT_EQ(j["run"]["idle_threads"].get<double>(),
              one_real(file, "SELECT idle_threads FROM run_totals"));
  }
}

// Walks a `tree --threads merge` JSON node: its path of names and its numbers, per node.
void collect_tree(const Json& node, const std::string& path,
                  std::multiset<std::tuple<std::string, std::int64_t, long, long>>& out) {
  for (const auto& c : node["children"]) {
    std::string p =
        path.empty() ? c["name"].get<std::string>() : path + ";" + c["name"].get<std::string>();
    out.insert({p, c["calls"].get<std::int64_t>(), std::lround(c["incl_s"].get<double>() * 1e9),
                std::lround(c["excl_s"].get<double>() * 1e9)});
    collect_tree(c, p, out);
  }
}

TEST_F(OneTruthTest, MergedTreeAndFoldedExportPrintTheCallpathsView) {
  for (const std::string& db : {fixture_, modules_, waits_}) {
    ProfileFile file = ProfileFile::open(db);
    std::multiset<std::tuple<std::string, std::int64_t, long, long>> view, tree;
    std::ostringstream folded_view;
    auto st = file.prepare(
        "SELECT path, calls, incl_s, excl_s FROM callpaths "
        "ORDER BY path, path_ids");
    while (st.step()) {
      view.insert(
          {st.text(0), st.int64(1), std::lround(st.real(2) * 1e9), std::lround(st.real(3) * 1e9)});
      if (std::llround(st.real(3) * 1e6) > 0)
        folded_view << st.text(0) << ' ' << std::llround(st.real(3) * 1e6) << '\n';
    }
    Json j = cli_json("tree '" + db + "' --threads merge --min-pct 0");
    collect_tree(j["tree"], "", tree);
    EXPECT_EQ(tree, view) << db;
    EXPECT_DOUBLE_EQ(j["tree"]["incl_s"].get<double>(),
                     one_real(file, "SELECT thread_s FROM run_totals"));

    // And the busy threads' roots, as the hotspots view's root row has them.
    auto root = file.prepare("SELECT excl_s FROM hotspots WHERE kind = 'root'");
    if (root.step() && std::llround(root.real(0) * 1e6) > 0)
      folded_view << "<thread> " << std::llround(root.real(0) * 1e6) << '\n';
    test::CliResult r = test::run_sonde("export '" + db + "' --format folded");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, folded_view.str()) << db;
  }
}

TEST_F(OneTruthTest, DiffPrintsTheHotspotsAndRunTotalsViews) {
  ProfileFile file = ProfileFile::open(fixture_);
  Json j = cli_json("diff '" + fixture_ + "' '" + modules_ + "'");
  EXPECT_DOUBLE_EQ(j["total_before_s"].get<double>(),
                   one_real(file, "SELECT wall_s FROM run_totals"));
  EXPECT_DOUBLE_EQ(j["threads_before_s"].get<double>(),
                   one_real(file, "SELECT thread_s FROM run_totals"));
  std::size_t rows = 0;
  for (const char* section : {"phases", "routines"})
    for (const auto& row : j[section]) {
      if (row["before_s"].is_null()) continue;
      ++rows;
      auto st = file.prepare("SELECT incl_s FROM hotspots WHERE routine = ? AND kind = ?");
      st.bind(1, row["name"].get<std::string>()).bind(2, row["kind"].get<std::string>());
      ASSERT_TRUE(st.step()) << row.dump();
      EXPECT_NEAR(row["before_s"].get<double>(), st.real(0), 1e-9) << row.dump();
    }
  EXPECT_EQ(rows, 5u);  // every routine of the fixture but the thread root
}

}  // namespace
}  // namespace sonde::analyzers
