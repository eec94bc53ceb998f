// The GPU rules of `sonde candidates` on the advice fixture plus known CUDA API calls and CUPTI
// activity (10 s run): each fires with exact evidence, and none fires on a CPU-only profile.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "advice/candidates.hpp"
#include "advice_fixture.hpp"
#include "fixture.hpp"
#include "metrics/metrics.hpp"

namespace sonde::analyzers {
namespace {

class GpuRulesTest : public test::AdviceFixtureTest {
 protected:
  void add_gpu_run() {
    sql(R"sql(
INSERT INTO routines (routine_id, name, kind, role) VALUES (20, 'cudaMemcpy HtoD', 'cuda', 'copy'),
  (21, 'cudaDeviceSynchronize', 'cuda', 'sync'), (22, 'cudaLaunchKernel', 'cuda', 'launch'),
  (23, 'cuLaunchKernel', 'cuda', 'launch'), (24, 'cudaMemcpy DtoD', 'cuda', 'other');
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns, flops, bytes) VALUES
  (20, 1, 2, 20, 2, 0, 100, 0, 1000000000, 1000000000, 0, 4000000000),
  (21, 1, 2, 21, 2, 0, 10, 0, 2000000000, 2000000000, 0, 0),
  (22, 1, 3, 22, 3, 0, 1000, 1000, 600000000, 100000000, 0, 0),
  (23, 1, 22, 23, 4, 0, 1000, 0, 500000000, 500000000, 0, 0),
  (24, 1, 2, 24, 2, 0, 5, 0, 900000000, 900000000, 0, 0);
INSERT INTO gpu_activity (process_id, node_id, kind, name, start_ns, end_ns, bytes, grid_x,
                          grid_y, grid_z, block_x, block_y, block_z, registers) VALUES
  (1, 23, 'kernel', 'sgemm_128x64', 0, 300000000, NULL, 64, 2, 1, 256, 1, 1, 96),
  (1, 23, 'kernel', 'sgemm_128x64', 0, 600000000, NULL, 8, 1, 1, 128, 1, 1, 90),
  (1, 23, 'kernel', 'relu_kernel', 0, 100000000, NULL, 1, 1, 1, 32, 1, 1, 16),
  (1, 20, 'memcpy', 'memcpy HtoD', 0, 600000000, 3000000000, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL);
)sql");
  }
  // An operator (routine 30, node 30 under the fixture's region) taking `own_ns` of its own and
  // `under_ns` in cblas_sgemm calls beneath it, the time taken from update_core_cpu's.
  void add_operator(const std::string& name, long long own_ns, long long under_ns = 0) {
    long long incl = own_ns + under_ns;
    sql(fmt::format(
        "INSERT INTO routines (routine_id, name, kind) VALUES (30, '{}', 'torch');"
        "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, "
        "subrs, incl_ns, excl_ns, flops, bytes) VALUES (30, 1, 2, 30, 2, 0, 40, {}, {}, {}, 0, "
        "0);"
        "UPDATE nodes SET excl_ns = excl_ns - {} WHERE node_id = 6;"
        "UPDATE nodes SET incl_ns = incl_ns - {} WHERE node_id IN (5, 6);",
        name, under_ns > 0 ? 400 : 0, incl, own_ns, incl, incl));
    if (under_ns > 0)
      sql(fmt::format(
          "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, "
          "calls, subrs, incl_ns, excl_ns, flops, bytes) VALUES (31, 1, 30, 4, 3, 0, 400, 0, "
          "{}, {}, 800000000, 0);",
          under_ns, under_ns));
  }
  std::vector<Candidate> of_rule(const std::string& rule) {
    std::vector<Candidate> out;
    for (auto& c : compute_candidates(ProfileFile::open(path_)))
      if (c.rule == rule) out.push_back(c);
    return out;
  }
};

TEST_F(GpuRulesTest, NoGpuCandidateOnACpuRun) {
  for (const char* rule : {"gpu-copies", "gpu-sync", "gpu-launches", "gpu-kernel"})
    EXPECT_TRUE(of_rule(rule).empty()) << rule;
}

// torch-operator judges an ATen operator's own host time: on the CPU its work, on a GPU its
// launches and waits, which the GPU rules judge. Fired on a CPU run, left to them on a GPU one.
TEST_F(GpuRulesTest, TorchOperatorRuleIsTheCpusOnly) {
  add_operator("aten::dropout", 2000000000);
  auto c = of_rule("torch-operator");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].location, "aten::dropout");
  EXPECT_DOUBLE_EQ(number(c[0], "pct_run"), 20.0);
  EXPECT_DOUBLE_EQ(c[0].est_gain_s, 2.0);  // all of it: dropout is removed, not made cheaper
  add_gpu_run();
  EXPECT_TRUE(of_rule("torch-operator").empty());
}

// A GEMM operator that keeps its time ran its BLAS where sonde did not see it (a pip wheel's
// MKL inside libtorch_cpu.so): not told the element-wise advice, and no gain claimed.
TEST_F(GpuRulesTest, AGemmOperatorsOwnTimeIsAnUnseenLibraryNotMemoryPasses) {
  add_operator("aten::addmm", 2000000000);
  auto text = [](const Candidate& c, const std::string& key) {
    for (const auto& [k, v] : c.evidence)
      if (const auto* s = std::get_if<std::string>(&v); k == key && s) return *s;
    return std::string();
  };
  auto c = of_rule("torch-operator");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].location, "aten::addmm");
  EXPECT_DOUBLE_EQ(c[0].est_gain_s, 0.0);
  EXPECT_NE(c[0].advice.find("libtorch_cpu.so"), std::string::npos) << c[0].advice;
  EXPECT_EQ(c[0].advice.find("passes over memory"), std::string::npos) << c[0].advice;
  EXPECT_EQ(text(c[0], "library_calls_in_run"), "some");  // the fixture's cblas_sgemm
  sql("UPDATE nodes SET calls = 0 WHERE routine_id IN (SELECT routine_id FROM routines WHERE "
      "kind = 'blas')");
  c = of_rule("torch-operator");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(text(c[0], "library_calls_in_run"), "none");
  EXPECT_NE(c[0].advice.find("nor did any other operator"), std::string::npos) << c[0].advice;
  EXPECT_NE(c[0].advice.find("run again with --record-shapes"), std::string::npos);
  // With its shapes recorded (--record-shapes), the GFLOP/s they give: 40 calls of a
  // 64x256 by 256x512 product, 2*64*256*512 FLOPs each, over the operator's 2 s.
  sql("INSERT INTO op_shapes (node_id, input_shapes, input_dtypes, calls, time_ns) VALUES "
      "(30, '[[512], [64, 256], [256, 512], [], []]', 'float, float, float, Scalar, Scalar', 40, "
      "2000000000);");
  c = of_rule("torch-operator");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(number(c[0], "gflops_from_shapes"), 2.0 * 64 * 256 * 512 * 40 / 2.0 / 1e9);
  EXPECT_DOUBLE_EQ(number(c[0], "calls_with_flops"), 40);
  EXPECT_NE(c[0].advice.find("its recorded shapes give 0.34 GFLOP/s over 40"), std::string::npos)
      << c[0].advice;
  EXPECT_EQ(c[0].advice.find("run again with --record-shapes"), std::string::npos);
  EXPECT_DOUBLE_EQ(c[0].est_gain_s, 0.0);
}

// A GEMM operator whose library calls were seen beneath it keeps the work between them (a
// recurrent layer's gates; autocast's casts): a red team's LSTM under bfloat16 autocast was told
// its 9,048 GEMM calls, seen beneath aten::lstm, ran where sonde could not see them.
TEST_F(GpuRulesTest, AGemmOperatorWithItsCallsSeenKeepsTheWorkBetweenThem) {
  add_operator("aten::lstm", 2000000000, 1000000000);
  auto c = of_rule("torch-operator");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].location, "aten::lstm");
  EXPECT_DOUBLE_EQ(number(c[0], "library_under_s"), 1.0);
  EXPECT_DOUBLE_EQ(c[0].est_gain_s, 1.0);  // half its own 2 s
  EXPECT_EQ(c[0].advice.find("libtorch_cpu.so"), std::string::npos) << c[0].advice;
  EXPECT_NE(c[0].advice.find("ran in the BLAS and oneDNN calls beneath it (1.000 s"),
            std::string::npos)
      << c[0].advice;
  EXPECT_NE(c[0].advice.find("torch.autocast"), std::string::npos) << c[0].advice;
}

TEST_F(GpuRulesTest, CopiesFromTheCudaApiTime) {
  add_gpu_run();
  auto c = of_rule("gpu-copies");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(number(c[0], "copy_time_s"), 1.0);  // HtoD only: DtoD stays on the device
  EXPECT_DOUBLE_EQ(number(c[0], "pct_run"), 10.0);
  EXPECT_DOUBLE_EQ(number(c[0], "gb_per_s"), 4.0);
  EXPECT_EQ(number(c[0], "calls"), 100);
  EXPECT_DOUBLE_EQ(c[0].est_gain_s, 0.5);
}

// What a CUDA call counts as is its routines.role, which the wrappers' table states: not a
// search of its name.
TEST_F(GpuRulesTest, TheRoleNotTheNameSaysWhatACallIs) {
  add_gpu_run();
  sql("UPDATE routines SET role = 'copy' WHERE routine_id = 24; "
      "UPDATE routines SET role = 'other' WHERE routine_id = 21");
  auto c = of_rule("gpu-copies");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(number(c[0], "copy_time_s"), 1.9);
  EXPECT_EQ(number(c[0], "calls"), 105);
  EXPECT_TRUE(of_rule("gpu-sync").empty());
}

// A file before schema version 9 has no role column: the reader's view guesses it from the
// name, as sonde did before, so its candidates stay what they were.
TEST_F(GpuRulesTest, AVersion8FileGetsItsRolesFromTheNames) {
  add_gpu_run();
  // A version 8 file has neither the columns nor routine_metrics (the reader makes it).
  sql("DROP VIEW routine_metrics; ALTER TABLE routines DROP COLUMN dtype; "
      "ALTER TABLE routines DROP COLUMN role; "
      "UPDATE meta SET value = '8' WHERE key = 'schema_version'");
  auto c = of_rule("gpu-copies");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(number(c[0], "copy_time_s"), 1.0);  // HtoD only: DtoD stays on the device
  auto s = of_rule("gpu-sync");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_DOUBLE_EQ(number(s[0], "sync_time_s"), 2.0);
  auto l = of_rule("gpu-launches");
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(number(l[0], "launches"), 1000);
  auto opened = ProfileFile::open(path_);  // outlives its statement
  auto st = opened.prepare("SELECT role FROM routines WHERE routine_id = 24");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.text(0), "other");
}

TEST_F(GpuRulesTest, CopiesFromDeviceActivityWithoutApiCalls) {
  add_gpu_run();
  sql("DELETE FROM nodes WHERE node_id = 20");
  auto c = of_rule("gpu-copies");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(number(c[0], "copy_time_s"), 0.6);
  EXPECT_DOUBLE_EQ(number(c[0], "gb_per_s"), 5.0);
  EXPECT_DOUBLE_EQ(c[0].est_gain_s, 0.3);
}

TEST_F(GpuRulesTest, SyncAndLaunchesCountTheOutermostApiCall) {
  add_gpu_run();
  auto s = of_rule("gpu-sync");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_DOUBLE_EQ(number(s[0], "sync_time_s"), 2.0);
  EXPECT_DOUBLE_EQ(number(s[0], "avg_ms"), 200.0);
  EXPECT_DOUBLE_EQ(s[0].est_gain_s, 1.0);
  auto l = of_rule("gpu-launches");
  ASSERT_EQ(l.size(), 1u);
  // cuLaunchKernel inside cudaLaunchKernel is the same launch: 1000, not 2000.
  EXPECT_EQ(number(l[0], "launches"), 1000);
  EXPECT_DOUBLE_EQ(number(l[0], "avg_launch_us"), 600.0);
  EXPECT_DOUBLE_EQ(number(l[0], "avg_kernel_us"), 1e6 / 3);  // 1 s of kernels, 3 launches
  EXPECT_DOUBLE_EQ(l[0].est_gain_s, 0.3);
}

TEST_F(GpuRulesTest, KernelsRankedByTheirShareOfGpuTime) {
  add_gpu_run();
  auto k = of_rule("gpu-kernel");
  ASSERT_EQ(k.size(), 2u);  // relu_kernel's 10 % is at the threshold
  // Equal gains (0, no metrics): the rule's own ranking, by time.
  EXPECT_EQ(k[0].location, "sgemm_128x64");
  EXPECT_EQ(k[1].location, "relu_kernel");
  const Candidate& sgemm = k[0];
  EXPECT_DOUBLE_EQ(number(sgemm, "pct_gpu_kernel_time"), 90.0);
  EXPECT_EQ(number(sgemm, "calls"), 2);
  // The launch configuration of its longest launch (0.6 s of 0.9), one of two.
  EXPECT_EQ(number(sgemm, "grid_threads"), 8);
  EXPECT_EQ(number(sgemm, "block_threads"), 128);
  EXPECT_EQ(number(sgemm, "registers"), 90);
  EXPECT_EQ(number(sgemm, "launch_configs"), 2);
  EXPECT_NE(sgemm.advice.find("sgemm_128x64"), std::string::npos);
}

// Grid and block are one launch's, never the largest grid of one launch beside the largest
// block of another (before: 128 blocks of 1024 threads, which no launch had); the evidence
// and gpu_kernel_totals agree.
TEST_F(GpuRulesTest, GridAndBlockAreTheLongestLaunchs) {
  add_gpu_run();
  sql("INSERT INTO gpu_activity (process_id, node_id, kind, name, start_ns, end_ns, grid_x, "
      "grid_y, grid_z, block_x, block_y, block_z, registers) VALUES "
      "(1, 23, 'kernel', 'sgemm_128x64', 0, 50000000, 1, 1, 1, 1024, 1, 1, 255)");
  auto k = of_rule("gpu-kernel");
  ASSERT_FALSE(k.empty());
  EXPECT_EQ(k[0].location, "sgemm_128x64");
  EXPECT_EQ(number(k[0], "grid_threads"), 8);
  EXPECT_EQ(number(k[0], "block_threads"), 128);
  EXPECT_EQ(number(k[0], "registers"), 90);
  EXPECT_EQ(number(k[0], "launch_configs"), 3);
  EXPECT_EQ(number(k[0], "calls"), 3);
  auto opened = ProfileFile::open(path_);  // outlives its statement
  auto st = opened.prepare(
      "SELECT grid, block, launch_configs, calls FROM gpu_kernel_totals "
      "WHERE kernel = 'sgemm_128x64'");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.int64(0), 8);
  EXPECT_EQ(st.int64(1), 128);
  EXPECT_EQ(st.int64(2), 3);
  EXPECT_EQ(st.int64(3), 3);
}

// A version 3 file (the same tables, version 3's views) is read through version 4's views,
// made at open: its old gpu_kernels (averages) is not what the candidates read.
TEST_F(GpuRulesTest, AVersion3FileIsReadThroughVersion4sViews) {
  add_gpu_run();
  sql("DROP VIEW gpu_kernel_totals; DROP VIEW gpu_kernels; DROP VIEW gpu_kernel_groups; "
      "DROP VIEW gpu_kernel_launches; DROP VIEW routine_totals; "
      "CREATE VIEW gpu_kernels AS SELECT name AS kernel, AVG(grid_x) AS grid FROM gpu_activity "
      "GROUP BY name; UPDATE meta SET value = '3' WHERE key = 'schema_version'");
  auto k = of_rule("gpu-kernel");
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(number(k[0], "grid_threads"), 8);
  auto opened = ProfileFile::open(path_);  // outlives its statement
  auto st = opened.prepare("SELECT launch_configs FROM gpu_kernels WHERE kernel = 'sgemm_128x64'");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.int64(0), 2);
  EXPECT_NO_THROW(compute_metrics(ProfileFile::open(path_)));
}

// A kernel CUPTI's range profiler replayed comes without timestamps (as on an H200): its time
// is its gpu__time_duration.sum, in every figure (kernel table, call paths, tree), once.
TEST_F(GpuRulesTest, AnUntimedKernelTakesItsTimeFromItsDurationMetric) {
  add_gpu_run();
  sql("INSERT INTO gpu_activity (activity_id, process_id, node_id, kind, name, start_ns, end_ns, "
      "grid_x, grid_y, grid_z, block_x, block_y, block_z, registers) VALUES "
      "(10, 1, 23, 'kernel', 'relu_kernel', NULL, NULL, 4, 1, 1, 32, 1, 1, 16), "
      "(11, 1, 23, 'kernel', 'relu_kernel', NULL, NULL, 4, 1, 1, 32, 1, 1, 16);"
      "INSERT INTO gpu_metrics VALUES (10, 'gpu__time_duration.sum', 50000000), "
      "(10, 'smsp__inst_executed.sum', 7);");
  auto file = ProfileFile::open(path_);
  auto k = file.prepare(
      "SELECT calls, time_s, avg_s, grid FROM gpu_kernel_totals WHERE kernel = 'relu_kernel'");
  ASSERT_TRUE(k.step());
  EXPECT_EQ(k.int64(0), 3);            // every launch is counted
  EXPECT_DOUBLE_EQ(k.real(1), 0.15);   // 0.1 s timed + 0.05 s measured; 11 has neither
  EXPECT_DOUBLE_EQ(k.real(2), 0.075);  // over the two launches with a time
  EXPECT_EQ(k.int64(3), 1);            // the longest launch's grid
  auto p = file.prepare("SELECT gpu_s FROM callpaths WHERE routine_id = 23");
  ASSERT_TRUE(p.step());
  EXPECT_DOUBLE_EQ(p.real(0), 1.05);  // 0.3 + 0.6 + 0.1 + 0.05
  auto m = file.prepare(
      "SELECT time_s FROM gpu_kernel_metrics WHERE metric = 'smsp__inst_executed.sum'");
  ASSERT_TRUE(m.step());
  EXPECT_DOUBLE_EQ(m.real(0), 0.05);
}

// A version 4 file has no gpu_activity_ns: it is made at open, from the timestamps.
TEST_F(GpuRulesTest, AVersion4FileGetsItsDeviceTimesAtOpen) {
  add_gpu_run();
  sql("DROP VIEW callpaths; DROP VIEW gpu_kernel_metrics; DROP VIEW gpu_kernel_totals; "
      "DROP VIEW gpu_kernels; DROP VIEW gpu_kernel_groups; DROP VIEW gpu_kernel_launches; "
      "DROP VIEW gpu_activity_ns; UPDATE meta SET value = '4' WHERE key = 'schema_version'");
  auto opened = ProfileFile::open(path_);  // outlives its statement
  auto st = opened.prepare("SELECT SUM(ns) FROM gpu_activity_ns WHERE kind = 'kernel'");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.int64(0), 1000000000);
}

// SONDE_GPU_METRICS per launch (activity ids 1-3 above): TAU's derived metrics summed over
// launches, ranking by warps per instruction x time, and the gain from the throughput peaks.
TEST_F(GpuRulesTest, KernelMetricsRankAsTauAndGiveTheGain) {
  add_gpu_run();
  sql(R"sql(
INSERT INTO gpu_metrics (activity_id, metric, value) VALUES
  (1, 'smsp__warps_launched.sum', 100), (1, 'smsp__inst_executed.sum', 10000),
  (1, 'smsp__inst_executed_op_global_ld.sum', 500),
  (1, 'sm__throughput.avg.pct_of_peak_sustained_elapsed', 90),
  (1, 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed', 30),
  (2, 'smsp__warps_launched.sum', 300), (2, 'smsp__inst_executed.sum', 30000),
  (2, 'smsp__inst_executed_op_global_ld.sum', 1500),
  (2, 'sm__throughput.avg.pct_of_peak_sustained_elapsed', 60),
  (2, 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed', 40),
  (3, 'smsp__warps_launched.sum', 2000), (3, 'smsp__inst_executed.sum', 4000),
  (3, 'smsp__inst_executed_op_global_ld.sum', 2000),
  (3, 'sm__throughput.avg.pct_of_peak_sustained_elapsed', 5),
  (3, 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed', 20);
)sql");
  auto k = of_rule("gpu-kernel");
  ASSERT_EQ(k.size(), 2u);
  // sgemm: 400 warps / 40000 instructions = 0.01, x 0.9 s = 0.009; relu: 0.5 x 0.1 s = 0.05.
  // relu's gain: 0.5 x 0.1 s x (1 - 0.20) = 0.04; sgemm's SM throughput, weighted by launch
  // time, (90 x 0.3 + 60 x 0.6) / 0.9 = 70 %: 0.5 x 0.9 x 0.3 = 0.135, so sgemm comes first.
  EXPECT_EQ(k[0].location, "sgemm_128x64");
  EXPECT_DOUBLE_EQ(number(k[0], "warps_per_inst"), 0.01);
  EXPECT_DOUBLE_EQ(number(k[0], "gld_per_inst"), 0.05);
  EXPECT_DOUBLE_EQ(number(k[0], "warps_per_inst_x_time_s"), 0.009);
  EXPECT_DOUBLE_EQ(number(k[0], "sm_pct_peak"), 70.0);
  EXPECT_NEAR(number(k[0], "memory_pct_peak"), 110.0 / 3, 1e-9);
  EXPECT_EQ(number(k[0], "metric_launches"), 2);
  EXPECT_NEAR(k[0].est_gain_s, 0.135, 1e-12);
  EXPECT_EQ(k[1].location, "relu_kernel");
  EXPECT_DOUBLE_EQ(number(k[1], "warps_per_inst_x_time_s"), 0.05);
  EXPECT_DOUBLE_EQ(number(k[1], "gld_per_inst_x_time_s"), 0.05);
  EXPECT_NEAR(k[1].est_gain_s, 0.04, 1e-12);
}

// Without throughput metrics the gains are equal (0) and TAU's product alone ranks: relu's
// 0.05 before sgemm's 0.009, although sgemm takes nine times as long.
TEST_F(GpuRulesTest, WithoutThroughputsTauProductRanks) {
  add_gpu_run();
  sql(R"sql(
INSERT INTO gpu_metrics (activity_id, metric, value) VALUES
  (1, 'smsp__warps_launched.sum', 100), (1, 'smsp__inst_executed.sum', 10000),
  (2, 'smsp__warps_launched.sum', 300), (2, 'smsp__inst_executed.sum', 30000),
  (3, 'smsp__warps_launched.sum', 2000), (3, 'smsp__inst_executed.sum', 4000);
)sql");
  auto k = of_rule("gpu-kernel");
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].location, "relu_kernel");
  EXPECT_EQ(k[1].location, "sgemm_128x64");
  EXPECT_DOUBLE_EQ(k[0].est_gain_s, 0.0);
  EXPECT_THROW(number(k[1], "gld_per_inst"), std::runtime_error);
}

// A kernel whose metrics were not recorded is not ranked against those whose were (time in s
// against warps/inst x s): measured kernels first, then the rest by time.
TEST_F(GpuRulesTest, KernelsWithoutMetricsComeAfterMeasuredOnes) {
  add_gpu_run();
  sql(R"sql(
INSERT INTO gpu_metrics (activity_id, metric, value) VALUES
  (3, 'smsp__warps_launched.sum', 2000), (3, 'smsp__inst_executed.sum', 4000);
)sql");
  auto k = of_rule("gpu-kernel");
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].location, "relu_kernel");   // 0.5 x 0.1 s = 0.05, measured
  EXPECT_EQ(k[1].location, "sgemm_128x64");  // 0.9 s, not measured
}

}  // namespace
}  // namespace sonde::analyzers
