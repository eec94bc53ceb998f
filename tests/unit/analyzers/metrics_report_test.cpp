// `sonde metrics` on the advice fixture (advice_fixture.hpp), whose numbers make every figure
// exact: the iteration breakdown (classes by name and by kind, outermost name wins, imports
// ignored, user mappings), counter metrics from known counts, and the CLI's sections.
#include "render/metrics_report.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "advice_fixture.hpp"
#include "fixture.hpp"
#include "metrics/breakdown.hpp"
#include "metrics/counter_metrics.hpp"
#include "render/metrics_tables.hpp"

namespace sonde::analyzers {
namespace {

class MetricsReportTest : public test::AdviceFixtureTest {
 protected:
  Breakdown breakdown(const std::vector<PhaseMapping>& m = {}) {
    return compute_breakdown(ProfileFile::open(path_), m);
  }
  static const BreakdownRow& row(const Breakdown& b, const std::string& id) {
    auto it = std::find_if(b.rows.begin(), b.rows.end(),
                           [&](const BreakdownRow& r) { return r.id == id; });
    if (it == b.rows.end()) throw std::runtime_error("no class " + id);
    return *it;
  }
};

// The fixture's train region with a backward beside forward and update: the loop is the
// region, which the three repeat in (10 calls each).
constexpr const char* kBackward = R"sql(
INSERT INTO routines (routine_id, name, kind, file, line) VALUES
  (7, 'train.py:12(backward)', 'python', 'train.py', 12);
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES (7, 1, 2, 7, 2, 0, 10, 0, 300000000, 300000000);
UPDATE nodes SET excl_ns = 200000000 WHERE node_id = 2;
)sql";

TEST_F(MetricsReportTest, BreakdownOutermostEntryWins) {
  sql(kBackward);
  Breakdown b = breakdown();
  ASSERT_TRUE(b.found) << b.reason;
  ASSERT_EQ(b.rows.size(), 6u);
  // forward: its own 0.5 s and the 1.5 s GEMM beneath it.
  EXPECT_EQ(row(b, "t_f").time_ns, 2'000'000'000);
  EXPECT_EQ(row(b, "t_b").time_ns, 300'000'000);
  // update() and the update_core_cpu() inside it: one phase, opened by update.
  EXPECT_EQ(row(b, "t_u").time_ns, 7'000'000'000);
  EXPECT_EQ(row(b, "t_u").routines, std::vector<std::string>{"train.py:20(update)"});
  EXPECT_EQ(b.other_ns, 200'000'000);  // the region "train" itself: the loop frame
  EXPECT_EQ(b.outside_ns, 0);
  EXPECT_EQ(b.unmeasured_ns, 500'000'000);  // the thread root's own time
  EXPECT_EQ(b.iterations, 10);              // update() ran 10 times
  EXPECT_EQ(b.iterations_from, "t_u");
  EXPECT_EQ(b.loop, "train");
  EXPECT_EQ(b.body, "train");
  EXPECT_EQ(b.run_ns, 10'000'000'000);
}

TEST_F(MetricsReportTest, CopiesAndCollectivesCountWhereverTheyRun) {
  sql(kBackward);
  // A host-to-device copy inside forward and an NCCL all-reduce inside update.
  sql(R"sql(
INSERT INTO routines (routine_id, name, kind) VALUES (20, 'cudaMemcpy HtoD', 'cuda'),
  (21, 'ncclAllReduce', 'nccl'), (22, 'cudaMemcpy DtoH', 'cuda');
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES
  (20, 1, 3, 20, 3, 0, 4, 0, 200000000, 200000000),
  (21, 1, 5, 21, 3, 0, 2, 0, 300000000, 300000000),
  (22, 1, 3, 22, 3, 0, 1, 0, 100000000, 100000000);
)sql");
  Breakdown b = breakdown();
  EXPECT_EQ(row(b, "t_h2d").time_ns, 200'000'000);
  EXPECT_EQ(row(b, "t_comm").time_ns, 300'000'000);
  EXPECT_EQ(row(b, "t_f").time_ns, 2'000'000'000 + 100'000'000);  // DtoH stays in forward
  EXPECT_EQ(row(b, "t_u").time_ns, 7'000'000'000);
  EXPECT_EQ(b.iterations, 10);
}

TEST_F(MetricsReportTest, ImportsAndClassBodiesAreNoPhase) {
  sql(kBackward);
  sql(R"sql(
INSERT INTO routines (routine_id, name, kind, file) VALUES
  (30, '<frozen importlib._bootstrap>:1167(_find_and_load)', 'python', '<frozen>'),
  (31, 'functools.py:35(update)', 'python', '/usr/lib/python3.11/functools.py'),
  (32, 'train.py:50(DataLoader)', 'python', 'train.py');
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES
  (30, 1, 2, 30, 2, 0, 10, 1, 100000000, 40000000),
  (31, 1, 30, 31, 3, 0, 30, 0, 60000000, 60000000),
  (32, 1, 2, 32, 2, 0, 10, 0, 5000000, 5000000);
)sql");
  Breakdown b = breakdown();
  EXPECT_EQ(row(b, "t_u").time_ns, 7'000'000'000);  // an update under an import: not t_u
  EXPECT_EQ(b.iterations, 10);
  EXPECT_EQ(row(b, "t_io").time_ns, 0);  // class DataLoader's body
  EXPECT_EQ(b.other_ns, 200'000'000 + 100'000'000 + 5'000'000);
}

TEST_F(MetricsReportTest, UserMappingsWinAndTheirErrors) {
  sql(kBackward);
  // The user says update() and what it calls load data: no update entry is left, so t_u cannot
  // be told, and the iterations are counted at the forward. (`update` alone leaves the
  // update_core_cpu beneath it an update by its name.)
  Breakdown b = breakdown({parse_phase_mapping("t_io=update*")});
  ASSERT_TRUE(b.found);
  EXPECT_EQ(row(b, "t_io").time_ns, 7'000'000'000);
  EXPECT_FALSE(row(b, "t_u").known);
  EXPECT_EQ(b.iterations, 10);
  EXPECT_EQ(b.iterations_from, "t_f");
  EXPECT_EQ(b.notes.size(), 1u);
  EXPECT_THROW(parse_phase_mapping("t_x=train"), Error);
  EXPECT_THROW(parse_phase_mapping("t_io"), Error);
  EXPECT_THROW(parse_phase_mapping("t_io="), Error);
}

TEST_F(MetricsReportTest, NoBackwardCannotTell) {
  Breakdown b = breakdown();  // the fixture as it is: forward and update, no backward
  EXPECT_FALSE(b.found);
  EXPECT_EQ(b.iterations, 0);
  EXPECT_EQ(b.reason,
            "found forward (train.py:5(forward)), update (train.py:20(update)), but no backward "
            "entry, so no frame repeats forward and backward");
  EXPECT_TRUE(breakdown_table(b).rows.empty());
  EXPECT_EQ(b.left_out_threads, 1);
}

TEST_F(MetricsReportTest, CounterMetricsFromKnownCounts) {
  sql(R"sql(
INSERT INTO counters VALUES (1, 'PAPI_TOT_INS', 'papi'), (2, 'PAPI_TOT_CYC', 'papi'),
  (3, 'PAPI_L1_DCM', 'papi'), (4, 'PAPI_L1_DCA', 'papi'), (5, 'perf::TASK-CLOCK', 'papi');
INSERT INTO node_counters VALUES
  (4, 1, 6e9, 6e9), (4, 2, 3e9, 3e9), (4, 3, 5e6, 5e6), (4, 4, 1e8, 1e8),
  (3, 5, 1e9, 4e8);
)sql");
  CounterReport rep = compute_counter_report(ProfileFile::open(path_));
  EXPECT_EQ(rep.events.size(), 5u);
  std::vector<std::string> keys;
  for (const CounterMetric* m : rep.metrics) keys.emplace_back(m->key);
  EXPECT_EQ(keys, (std::vector<std::string>{"ipc", "l1d_miss_pct", "cpu_busy_pct"}));
  auto find = [&](const std::string& name) {
    return *std::find_if(rep.routines.begin(), rep.routines.end(),
                         [&](const RoutineCounters& r) { return r.name == name; });
  };
  auto metric = [&](std::string_view key) {
    return *std::find_if(counter_metrics().begin(), counter_metrics().end(),
                         [&](const CounterMetric& m) { return m.key == key; });
  };
  const RoutineCounters& gemm = find("cblas_sgemm");
  EXPECT_DOUBLE_EQ(*metric_value(metric("ipc"), gemm), 2.0);
  EXPECT_DOUBLE_EQ(*metric_value(metric("l1d_miss_pct"), gemm), 5.0);
  EXPECT_FALSE(metric_value(metric("cpu_busy_pct"), gemm));  // no task clock on that node
  // 1 s of CPU over forward's 2 s of wall time.
  EXPECT_DOUBLE_EQ(*metric_value(metric("cpu_busy_pct"), find("train.py:5(forward)")), 50.0);
  EXPECT_FALSE(metric_value(metric("ipc"), find("train.py:5(forward)")));
}

// Two routines of one display name (train.py:5(forward) in two folders) are two rows with their
// own counts and times, the times the hotspots view's; they were summed into one row by name
// (66.7 % CPU busy, neither's figure).
TEST_F(MetricsReportTest, CounterRowsAreRoutinesNotNames) {
  sql(R"sql(
INSERT INTO routines (routine_id, name, kind, file, line) VALUES
  (8, 'train.py:5(forward)', 'python', 'other/train.py', 5);
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES (8, 1, 2, 8, 2, 0, 1, 0, 1000000000, 1000000000);
UPDATE nodes SET excl_ns = excl_ns - 1000000000 WHERE node_id = 2;
INSERT INTO counters VALUES (5, 'perf::TASK-CLOCK', 'papi');
INSERT INTO node_counters VALUES (3, 5, 1e9, 4e8), (8, 5, 1e9, 1e9);
)sql");
  CounterReport rep = compute_counter_report(ProfileFile::open(path_));
  const CounterMetric& cpu_busy =
      *std::find_if(counter_metrics().begin(), counter_metrics().end(),
                    [](const CounterMetric& m) { return m.key == "cpu_busy_pct"; });
  std::map<std::int64_t, double> busy;  // incl_ns -> CPU busy %
  for (const RoutineCounters& r : rep.routines)
    if (r.name == "train.py:5(forward)") busy[r.incl_ns] = *metric_value(cpu_busy, r);
  ASSERT_EQ(busy.size(), 2u);
  EXPECT_DOUBLE_EQ(busy.at(2'000'000'000), 50.0);
  EXPECT_DOUBLE_EQ(busy.at(1'000'000'000), 100.0);
}

TEST_F(MetricsReportTest, CliSectionsAndFormats) {
  auto r = test::run_sonde("metrics '" + path_ + "' --section breakdown");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Iteration breakdown: cannot tell (found forward"), std::string::npos)
      << r.out;
  sql(kBackward);
  r = test::run_sonde("metrics '" + path_ + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* heading : {"Roofline per routine", "Time per phase",
                              "Iteration breakdown (10 iterations, counted at t_u; loop in "
                              "train; % thread: of 10.000 s, the time of the 1 training thread)",
                              "no counters recorded"})
    EXPECT_NE(r.out.find(heading), std::string::npos) << heading << "\n" << r.out;
  r = test::run_sonde("metrics '" + path_ + "' --section breakdown --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["breakdown"]["iterations"], 10);
  EXPECT_EQ(j["breakdown"]["phases"][4]["phase"], "t_u");
  EXPECT_DOUBLE_EQ(j["breakdown"]["phases"][4]["ms_per_iter"].get<double>(), 700.0);
  EXPECT_DOUBLE_EQ(j["breakdown"]["phases"][4]["pct_thread"].get<double>(), 70.0);
  EXPECT_DOUBLE_EQ(j["breakdown"]["threads_s"].get<double>(), 10.0);
  r = test::run_sonde("metrics '" + path_ + "' --section roofline --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cblas_sgemm,blas,30,1.5,2,80,10,1,memory"), std::string::npos) << r.out;
  EXPECT_EQ(test::run_sonde("metrics '" + path_ + "' --format csv").exit_code, 2);
  EXPECT_EQ(test::run_sonde("metrics '" + path_ + "' --section nope").exit_code, 2);
  r = test::run_sonde("metrics '" + path_ + "' --phase bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("CLASS=GLOB"), std::string::npos) << r.err;
}

// Two threads train side by side for the run's 10 s: the breakdown's shares are of their 20 s
// (update 14 s, 70 %), never of the wall time (140 % "of run" before), and the rows add up to
// 100 %; the denominator is printed beside them.
TEST_F(MetricsReportTest, BreakdownSharesAreOfTheTrainingThreadsTime) {
  sql(kBackward);
  sql("INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns) "
      "SELECT 2, process_id, 1, 11, 'trainer', started_ns, ended_ns FROM threads "
      "WHERE thread_id = 1;"
      "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, "
      "                   subrs, incl_ns, excl_ns) "
      "SELECT node_id + 100, 2, parent_id + 100, routine_id, depth, recursive, calls, subrs, "
      "       incl_ns, excl_ns FROM nodes WHERE thread_id = 1;");
  Breakdown b = breakdown();
  ASSERT_TRUE(b.found) << b.reason;
  EXPECT_EQ(b.threads, 2);
  EXPECT_EQ(b.iterations, 20);
  EXPECT_EQ(b.threads_ns, 20'000'000'000);
  EXPECT_EQ(b.run_ns, 10'000'000'000);
  auto r = test::run_sonde("metrics '" + path_ + "' --section breakdown --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out)["breakdown"];
  EXPECT_DOUBLE_EQ(j["threads_s"].get<double>(), 20.0);
  double sum = 0;
  for (const auto& p : j["phases"]) {
    EXPECT_LE(p["pct_thread"].get<double>(), 100.0) << p;
    sum += p["pct_thread"].get<double>();
  }
  EXPECT_NEAR(sum, 100.0, 1e-9);
  EXPECT_DOUBLE_EQ(j["phases"][4]["pct_thread"].get<double>(), 70.0);
  r = test::run_sonde("metrics '" + path_ + "' --section breakdown");
  EXPECT_NE(r.out.find("% thread: of 20.000 s, the time of the 2 training threads"),
            std::string::npos)
      << r.out;
}

// A phase's share is the hotspots view's incl_pct, of the busy threads' time: with a second
// thread running the same region for the run's 10 s, `train` has 19 s inclusive, 95 % of the
// threads' 20 s (it read 190 % "of run" when the renderer divided by the wall time).
TEST_F(MetricsReportTest, PhaseSharesAreOfTheBusyThreadsTime) {
  sql("INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns) VALUES "
      "  (2, 1, 1, 11, 'worker', 1000000000000, 1000000000000 + 10000000000);"
      "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, "
      "                   subrs, incl_ns, excl_ns) VALUES "
      "  (20, 2, NULL, 1, 0, 0, 1, 1, 10000000000, 500000000),"
      "  (21, 2, 20, 2, 1, 0, 1, 0, 9500000000, 9500000000);");
  auto r = test::run_sonde("metrics '" + path_ + "' --section phases --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ProfileFile file = ProfileFile::open(path_);
  auto st = file.prepare("SELECT routine, incl_pct FROM hotspots WHERE kind <> 'root'");
  std::map<std::string, double> view;
  while (st.step()) view[st.text(0)] = st.real(1);
  ASSERT_FALSE(j["phases"].empty());
  for (const auto& p : j["phases"]) {
    EXPECT_DOUBLE_EQ(p["pct_total"].get<double>(), view.at(p["phase"].get<std::string>()));
    EXPECT_LE(p["pct_total"].get<double>(), 100.0);
    EXPECT_FALSE(p.contains("pct_run"));
  }
  EXPECT_DOUBLE_EQ(j["phases"][0]["pct_total"].get<double>(), 95.0);  // train
  // GFLOP/s and BLAS % of everything beneath forward: 3e9 FLOPs and 1.5 s of BLAS in 2 s.
  for (const auto& p : j["phases"]) {
    if (p["phase"] != "train.py:5(forward)") continue;
    EXPECT_DOUBLE_EQ(p["gflops"].get<double>(), 1.5);
    EXPECT_DOUBLE_EQ(p["blas_pct"].get<double>(), 75.0);
  }
  r = test::run_sonde("metrics '" + path_ + "' --section phases");
  EXPECT_NE(r.out.find("% total: of 20.000 s, the busy threads' time"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace sonde::analyzers
