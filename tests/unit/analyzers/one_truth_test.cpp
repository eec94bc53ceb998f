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

// The modules fixture and a third thread whose measured calls were waits: thread 2 (seq 2) of
// 3.5 s, all of it in queue.get -> threading wait, on a CPU 10 ms of it (a DataLoader's queue
// feeder). It calls cblas_sgemm (openblas) too, a routine the main thread calls, so a reader
// that merges its nodes in shows in a row the counted threads have.
//   thread 3 "feeder" (3.5 s, CPU 0.01 s): <thread> excl 0.001
//     queue.py:154(get) 3.499, excl 0.001
//       threading.py:288(wait) 3.3, excl 3.3
//       cblas_sgemm (openblas) 0.198
void write_off_cpu_fixture(const std::filesystem::path& path) {
  write_modules_fixture(path);
  test::exec_sql(path, R"sql(
INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns, cpu_ns) VALUES
  (3, 1, 2, 502, 'feeder', 1000100000000, 1000100000000 + 3500000000, 10000000);
INSERT INTO routines (routine_id, name, kind, library, file, line) VALUES
  (8, 'queue.py:154(get)', 'python', '', '/usr/lib/python3.11/queue.py', 154),
  (9, 'threading.py:288(wait)', 'python', '', '/usr/lib/python3.11/threading.py', 288);
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES
  (9,  3, NULL, 1, 0, 0, 1, 1, 3500000000,    1000000),
  (10, 3, 9,    8, 1, 0, 1, 2, 3499000000,    1000000),
  (11, 3, 10,   9, 2, 0, 1, 0, 3300000000, 3300000000),
  (12, 3, 10,   6, 2, 0, 1, 0,  198000000,  198000000);
)sql");
}

class OneTruthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = (dir_.path / "prof.db").string();
    modules_ = (dir_.path / "modules.db").string();
    test::write_fixture(fixture_);
    write_modules_fixture(modules_);
    off_cpu_ = (dir_.path / "off_cpu.db").string();
    write_off_cpu_fixture(off_cpu_);
  }
  test::TempDir dir_;
  std::string fixture_, modules_, off_cpu_;
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

// A thread whose calls were waits is in no sum over threads: every view and reader that merges
// threads reads the modules fixture's figures, as though the feeder were not there; its own
// tree is still shown, said to be left out.
TEST_F(OneTruthTest, AThreadOffACpuIsInNoSumOverThreads) {
  ProfileFile file = ProfileFile::open(off_cpu_);
  auto ints = [&](const std::string& sql) {
    auto st = file.prepare(sql);
    std::vector<std::int64_t> row;
    if (st.step())
      for (int i = 0; i < st.column_count(); ++i) row.push_back(st.int64(i));
    return row;
  };
  EXPECT_EQ(ints("SELECT busy, waiting, off_cpu, counted, counted_s = 0 FROM thread_times "
                 "WHERE thread_id = 3"),
            (std::vector<std::int64_t>{0, 0, 1, 0, 1}));
  EXPECT_EQ(ints("SELECT busy_threads, idle_threads, waiting_threads, off_cpu_threads, "
                 "thread_s * 1e9, off_cpu_s * 1e9 FROM run_totals"),
            (std::vector<std::int64_t>{1, 1, 0, 1, 4'000'000'000, 3'500'000'000}));
  Hotspots h = compute_hotspots(file);
  EXPECT_EQ(h.total_ns, 4'000'000'000);
  EXPECT_EQ(h.off_cpu_threads, 1);
  double excl_pct = 0;
  for (const HotspotRow& r : h.rows) {
    EXPECT_NE(r.file, "/usr/lib/python3.11/queue.py");
    EXPECT_NE(r.file, "/usr/lib/python3.11/threading.py");
    if (r.name == "cblas_sgemm" && r.library == "libopenblas.so.0") {
      EXPECT_EQ(r.calls, 3);  // the main thread's alone
      EXPECT_EQ(r.incl_ns, 500'000'000);
    }
    excl_pct += r.excl_pct;
  }
  EXPECT_NEAR(excl_pct, 100.0, 1e-9);
  // The views over nodes, and every reader of them, as the modules fixture reads.
  ProfileFile modules = ProfileFile::open(modules_);
  for (const char* sql :
       {"SELECT path_ids, calls, incl_s, excl_s FROM callpaths ORDER BY path_ids",
        "SELECT caller_id, routine_id, calls, incl_s FROM routine_edges ORDER BY 1, 2",
        "SELECT routine_id, calls, incl_s, excl_s FROM hotspots ORDER BY routine_id",
        "SELECT rank, routine_id, calls, incl_s FROM rank_hotspots ORDER BY routine_id"}) {
    auto a = file.prepare(sql), b = modules.prepare(sql);
    int rows = 0;
    while (true) {
      bool more = a.step();
      ASSERT_EQ(more, b.step()) << sql;
      if (!more) break;
      ++rows;
      for (int i = 0; i < 4; ++i) EXPECT_EQ(a.text(i), b.text(i)) << sql;
    }
    EXPECT_GT(rows, 0) << sql;
  }
  for (const char* format : {"folded", "csv", "callgrind"}) {
    test::CliResult with = test::run_sonde("export '" + off_cpu_ + "' --format " + format);
    test::CliResult without = test::run_sonde("export '" + modules_ + "' --format " + format);
    ASSERT_EQ(with.exit_code, 0) << with.err;
    EXPECT_EQ(with.out.find("queue.py"), std::string::npos) << format << "\n" << with.out;
    if (std::string(format) != "callgrind") EXPECT_EQ(with.out, without.out) << format;
  }
  EXPECT_EQ(load_merged_tree(file).incl_ns, 4'000'000'000);
  test::CliResult callers =
      test::run_sonde("tree '" + off_cpu_ + "' --callers 'queue.py:154(get)'");
  EXPECT_EQ(callers.exit_code, 2) << callers.out;

  // Its own tree is shown, after the counted threads', with what it is.
  Json each = cli_json("tree '" + off_cpu_ + "' --min-pct 0");
  ASSERT_EQ(each["trees"].size(), 2u);
  EXPECT_EQ(each["trees"][1]["tid"], 502);
  EXPECT_EQ(each["trees"][1]["off_cpu"], true);
  EXPECT_EQ(each["trees"][1]["tree"]["children"][0]["name"], "queue.py:154(get)");
  ASSERT_EQ(each["off_cpu_threads"].size(), 1u);
  EXPECT_DOUBLE_EQ(each["off_cpu_threads"][0]["cpu_s"].get<double>(), 0.01);
  test::CliResult text = test::run_sonde("tree '" + off_cpu_ + "' --min-pct 0");
  EXPECT_NE(text.out.find("process 500, thread 2 (tid 502) \"feeder\": 3.500 s = 100 % (this "
                          "thread's time; on a CPU 10.0 ms of it: its calls waited, the run's "
                          "total leaves it out)"),
            std::string::npos)
      << text.out;
  test::CliResult merged = test::run_sonde("tree '" + off_cpu_ + "' --threads merge");
  EXPECT_NE(merged.out.find("1 thread merged: 4.000 s = 100 %"), std::string::npos) << merged.out;
  EXPECT_NE(merged.out.find("on a CPU under 5 % of it: waits, in no percentage; --threads each "
                            "shows their trees): thread 2 (pid 500, tid 502)"),
            std::string::npos)
      << merged.out;
  test::CliResult report = test::run_sonde("report '" + off_cpu_ + "'");
  EXPECT_NE(report.out.find("threads: 1 (+1 off a CPU) (+1 idle)"), std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find("left out: 1 thread on a CPU under 5 % of its life, 3.500 s of "
                            "waits in measured calls"),
            std::string::npos)
      << report.out;
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
  for (const std::string& db : {fixture_, modules_, off_cpu_}) {
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
  for (const std::string& db : {fixture_, modules_, off_cpu_}) {
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
