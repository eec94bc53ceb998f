// One definition per figure: the peaks views (peaks_at_threads, gemm_shapes, routine_peaks) hold
// the rule for % of peak, and every consumer (sonde shapes, sonde metrics, sonde candidates)
// prints what they hold. Against the advice fixture, with the shapes' thread counts varied.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "advice/candidates.hpp"
#include "advice_fixture.hpp"
#include "metrics/metrics.hpp"
#include "profile/profile_file.hpp"
#include "render/shapes.hpp"

namespace sonde::analyzers {
namespace {

using Row = std::vector<std::optional<double>>;

class PeaksViewsTest : public test::AdviceFixtureTest {
 protected:
  std::vector<Row> rows(const std::string& sql) {
    ProfileFile file = ProfileFile::open(path_);
    auto st = file.prepare(sql);
    std::vector<Row> out;
    while (st.step()) {
      Row r;
      for (int c = 0; c < st.column_count(); ++c)
        r.push_back(st.is_null(c) ? std::nullopt : std::optional<double>(st.real(c)));
      out.push_back(r);
    }
    return out;
  }
  std::optional<double> peak_at(const std::string& resource, int threads) {
    auto r = rows("SELECT value FROM peaks_at_threads WHERE resource = '" + resource +
                  "' AND threads = " + std::to_string(threads));
    return r.empty() ? std::nullopt : r[0][0];
  }
};

TEST_F(PeaksViewsTest, PeaksAtThreadsIsTheNearestCalibratedCountNotAbove) {
  // gemm.f32: 1 thread 2.5, threads 0 = the run's 2 cores 4.
  EXPECT_EQ(peak_at("gemm.f32", 1), 2.5);
  EXPECT_EQ(peak_at("gemm.f32", 2), 4.0);
  sql("UPDATE shapes SET threads = 6;");  // the view reaches the largest count a shape has
  EXPECT_EQ(peak_at("gemm.f32", 6), 4.0);
  sql("INSERT INTO peaks (run_id, resource, threads, value, source) "
      "  VALUES (1, 'gemm.f32', 4, 7.0, 'manual'), (1, 'gemm.f32', 2, 3.0, 'manual');");
  EXPECT_EQ(peak_at("gemm.f32", 3), 3.0);  // the explicit 2-thread row wins over threads 0
  EXPECT_EQ(peak_at("gemm.f32", 5), 7.0);
  sql("DELETE FROM peaks WHERE threads = 1;");
  EXPECT_EQ(peak_at("gemm.f32", 1), std::nullopt);  // none at or below 1
}

TEST_F(PeaksViewsTest, ShapesMetricsAndCandidatesPrintTheGemmShapesView) {
  // One shape on 1 thread, the other on 2: each against its own peak (2.5 and 4).
  sql("UPDATE shapes SET threads = 2 WHERE n = 10;"
      "UPDATE peaks SET value = 25 WHERE threads = 1;");  // the 1000^3 shape: 10 % of 25
  auto view = rows(
      "SELECT m, n, gflops, pct_peak, threads, peak_gflops FROM gemm_shapes "
      "ORDER BY time_s DESC");
  ASSERT_EQ(view.size(), 2u);
  EXPECT_DOUBLE_EQ(*view[0][3], 10.0);
  EXPECT_DOUBLE_EQ(*view[1][3], 25.0);  // 1 GFLOP/s of the 2-thread 4
  EXPECT_EQ(view[1][4], 2.0);
  EXPECT_EQ(view[1][5], 4.0);

  ProfileFile file = ProfileFile::open(path_);
  std::vector<ShapeRow> shapes = compute_shapes(file);
  Metrics m = compute_metrics(file);
  ASSERT_EQ(shapes.size(), 2u);
  ASSERT_EQ(m.shapes.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(shapes[i].gflops, view[i][2]);
    EXPECT_EQ(shapes[i].pct_peak, view[i][3]);
    EXPECT_EQ(m.shapes[i].perf.gflops, view[i][2]);
    EXPECT_EQ(m.shapes[i].perf.pct_peak, view[i][3]);
  }
  // The gemm-shape rule's evidence: the 1000^3 shape at 5 % (below its 10 % threshold).
  sql("UPDATE peaks SET value = 50 WHERE threads = 1;");
  view = rows("SELECT pct_peak FROM gemm_shapes ORDER BY time_s DESC");
  bool found = false;
  for (const Candidate& c : compute_candidates(ProfileFile::open(path_))) {
    if (c.rule != "gemm-shape" || number(c, "n") != 1000) continue;
    found = true;
    EXPECT_EQ(number(c, "pct_peak"), *view[0][0]);
  }
  EXPECT_TRUE(found);
}

TEST_F(PeaksViewsTest, RoutineMetricsPrintTheRoutinePeaksView) {
  sql("UPDATE shapes SET threads = 2 WHERE n = 10;");
  auto view = rows(
      "SELECT gflops, pct_peak, peak_gflops, mem_bw_gbs FROM routine_peaks "
      "WHERE routine = 'cblas_sgemm'");
  ASSERT_EQ(view.size(), 1u);
  // 3e9 FLOPs over 1 s x 2.5 + 0.5 s x 4: 3 / 4.5 = 66.7 %.
  EXPECT_DOUBLE_EQ(*view[0][1], 100.0 * 3.0 / 4.5);
  EXPECT_DOUBLE_EQ(*view[0][2], 4.5 / 1.5);  // time-weighted
  Metrics m = compute_metrics(ProfileFile::open(path_));
  auto it = std::find_if(m.routines.begin(), m.routines.end(),
                         [](const RoutineMetrics& r) { return r.name == "cblas_sgemm"; });
  ASSERT_NE(it, m.routines.end());
  EXPECT_EQ(it->perf.pct_peak, view[0][1]);
  EXPECT_EQ(it->perf.attainable_gflops, std::min(*view[0][2], 10.0 * *view[0][3]));
}

// routine_metrics holds each routine's rates, ceilings and roofline, worked out by hand here;
// `sonde metrics` prints exactly what it holds.
TEST_F(PeaksViewsTest, RoutineMetricsHoldsEachRoutinesRoofline) {
  // cblas_sdot: no shapes, 2e9 FLOPs and 1e8 bytes in 1 s under train.
  sql("INSERT INTO routines (routine_id, name, kind, dtype) VALUES (7, 'cblas_sdot', 'blas', "
      "'f32');"
      "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, "
      "subrs, incl_ns, excl_ns, flops, bytes) VALUES (7, 1, 2, 7, 2, 0, 5, 0, 1000000000, "
      "1000000000, 2000000000, 100000000);");
  auto of = [&](const std::string& routine) {
    auto r = rows(
        "SELECT gflops, intensity, peak_gflops, mem_bw_gbs, pct_peak, attainable_gflops, "
        "threads FROM routine_metrics WHERE routine = '" +
        routine + "'");
    EXPECT_EQ(r.size(), 1u) << routine;
    return r.empty() ? Row(7) : r[0];
  };
  auto bound = [&](const std::string& routine) {
    ProfileFile file = ProfileFile::open(path_);
    auto st = file.prepare("SELECT bound FROM routine_metrics WHERE routine = ?1");
    st.bind(1, routine);
    return st.step() && !st.is_null(0) ? st.text(0) : std::string("NULL");
  };
  // cblas_sgemm: 3e9 FLOPs in 1.5 s = 2 GFLOP/s, 10 FLOP/byte; its shapes ran on 1 thread
  // (peak 2.5): 80 % of it; memory's ceiling 10 x 0.1 = 1 GFLOP/s is the lower.
  EXPECT_EQ(of("cblas_sgemm"), (Row{2.0, 10.0, 2.5, 0.1, 80.0, 1.0, 1.0}));
  EXPECT_EQ(bound("cblas_sgemm"), "memory");
  // cblas_sdot, at the process's blas.threads 1: 2 GFLOP/s of 2.5; 20 x 0.1 = 2 < 2.5.
  EXPECT_EQ(of("cblas_sdot"), (Row{2.0, 20.0, 2.5, 0.1, 80.0, 2.0, 1.0}));
  // No cost model: no figures.
  EXPECT_EQ(of("train.py:5(forward)"), (Row{std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                            std::nullopt, std::nullopt, 1.0}));
  EXPECT_EQ(bound("train.py:5(forward)"), "NULL");

  // blas.threads 2: the all-core peak 4, 50 %; a faster memory makes it compute-bound.
  sql("UPDATE run_info SET value = '2' WHERE key = 'blas.threads';"
      "UPDATE peaks SET value = 1.0 WHERE resource = 'mem.bw' AND threads = 0;");
  EXPECT_EQ(of("cblas_sdot"), (Row{2.0, 20.0, 4.0, 1.0, 50.0, 4.0, 2.0}));
  EXPECT_EQ(bound("cblas_sdot"), "compute");
  // A run-wide row wins over the process's; a count that is not a whole number is none.
  sql("INSERT INTO run_info VALUES (1, NULL, 'blas.threads', '1');");
  EXPECT_EQ(*of("cblas_sdot")[4], 80.0);
  sql("UPDATE run_info SET value = '1x' WHERE process_id IS NULL;");
  EXPECT_EQ(of("cblas_sdot")[2], std::nullopt);

  // The dtype of most of a routine's shapes' FLOPs: an f64 shape of more FLOPs makes cblas_sgemm
  // f64 (no f64 peak: no % of peak for it).
  sql("INSERT INTO shapes (node_id, call_site, m, n, k, trans_a, trans_b, dtype, calls, "
      "time_ns, flops, bytes, threads) VALUES (4, 'x', 10, 10, 10, 'N', 'N', 'f64', 1, 1, "
      "3500000000, 1, 1);");
  ProfileFile file = ProfileFile::open(path_);
  auto dtype = file.prepare("SELECT dtype FROM routine_metrics WHERE routine = 'cblas_sgemm'");
  ASSERT_TRUE(dtype.step());
  EXPECT_EQ(dtype.text(0), "f64");

  // `sonde metrics` prints the view's figures, routine by routine.
  Metrics m = compute_metrics(file);
  for (const RoutineMetrics& r : m.routines) {
    Row v = of(r.name);
    EXPECT_EQ(r.perf.gflops, v[0]) << r.name;
    EXPECT_EQ(r.perf.intensity, v[1]) << r.name;
    EXPECT_EQ(r.perf.peak_gflops, v[2]) << r.name;
    EXPECT_EQ(r.perf.pct_peak, v[4]) << r.name;
    EXPECT_EQ(r.perf.attainable_gflops, v[5]) << r.name;
    EXPECT_EQ(r.threads ? std::optional<double>(*r.threads) : std::nullopt, v[6]) << r.name;
  }
  EXPECT_EQ(std::find_if(m.routines.begin(), m.routines.end(),
                         [](const RoutineMetrics& r) { return r.name == "cblas_sgemm"; })
                ->dtype,
            "f64");
}

// A oneDNN build that cannot say its thread count (TBB, threadpool) runs on torch's intra-op
// pool: its shapes take the process's torch.num_threads, recorded by the Python hook. A BLAS
// shape never does (its own query is the truth), nor a process without the fact.
TEST_F(PeaksViewsTest, OnednnShapesWithoutACountTakeTorchsThreads) {
  sql("UPDATE routines SET name = 'dnnl:convolution_fwd', kind = 'onednn' WHERE routine_id = 4;"
      "UPDATE shapes SET threads = NULL;");
  auto threads = [&] {
    return rows("SELECT threads, pct_peak, peak_gflops FROM gemm_shapes ORDER BY time_s DESC");
  };
  auto view = threads();
  ASSERT_EQ(view.size(), 2u);
  EXPECT_EQ(view[0][0], std::nullopt);  // unknown: no % of a CPU peak
  EXPECT_EQ(view[0][1], std::nullopt);

  sql("INSERT INTO run_info VALUES (1, 1, 'torch.num_threads', '2');");
  view = threads();
  EXPECT_EQ(view[0][0], 2.0);
  EXPECT_EQ(view[0][2], 4.0);  // the 2-thread (all cores) peak
  EXPECT_DOUBLE_EQ(*view[0][1], 100.0 * 2.5 / 4.0);
  EXPECT_EQ(rows("SELECT threads FROM routine_peaks")[0][0], 2.0);

  sql("UPDATE run_info SET value = '1' WHERE key = 'torch.num_threads';");
  view = threads();
  EXPECT_EQ(view[0][0], 1.0);
  EXPECT_DOUBLE_EQ(*view[0][1], 100.0);  // 2.5 GFLOP/s of the 1-thread 2.5
  // A count recorded with the call wins over the process's setting.
  sql("UPDATE shapes SET threads = 2 WHERE n = 1000;");
  EXPECT_EQ(threads()[0][0], 2.0);

  // The same shapes as BLAS calls: no fallback (a BLAS that cannot say runs on 1 thread and
  // records 1; NULL here means unknown and stays so).
  sql("UPDATE shapes SET threads = NULL; UPDATE routines SET kind = 'blas' WHERE routine_id = 4;");
  EXPECT_EQ(threads()[0][0], std::nullopt);
  // torch's count larger than any other count in the run still has its peaks row.
  sql("UPDATE routines SET kind = 'onednn' WHERE routine_id = 4;"
      "UPDATE run_info SET value = '8' WHERE key = 'torch.num_threads';");
  view = threads();
  EXPECT_EQ(view[0][0], 8.0);
  EXPECT_EQ(view[0][2], 4.0);  // the nearest calibrated count not above 8: the 2 cores
}

}  // namespace
}  // namespace sonde::analyzers
