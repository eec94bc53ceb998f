// The iteration breakdown in device time, on a profile written with the real schema: a loop of
// 10 steps (forward, backward, update regions) whose launches, copies and NCCL kernels have
// known device times, an evaluation outside the loop and a launch sonde did not see. Each phase
// gets the device time launched under it (NCCL kernels t_comm, host-to-device copies t_h2d),
// and each device the overlap of its NCCL kernels with its compute kernels, as unions.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "fixture.hpp"
#include "metrics/breakdown.hpp"
#include "render/metrics_report.hpp"
#include "render/metrics_tables.hpp"

namespace sonde::analyzers {
namespace {

constexpr long long kMs = 1'000'000;

// Nodes (host ms): <thread> 10000 -> step x10 6000 -> forward 1000 -> {cudaLaunchKernel 100,
// cudaMemcpy HtoD 200}; backward 2000 -> {cudaLaunchKernel 100, ncclAllReduce 300 ->
// cudaLaunchKernel 50}; update 500 -> {cudaLaunchKernel 50, cudaMemcpy DtoH 20};
// <thread> -> eval x1 1000 -> cudaLaunchKernel 10.
constexpr const char* kTree = R"sql(
INSERT INTO runs VALUES (1, 'u', 0, 'train', 'h', 'cpu', 2, 2, 'profile');
INSERT INTO processes (process_id, run_id, pid, ppid, origin, command, started_ns, ended_ns,
                       end_reason) VALUES (1, 1, 10, 1, 'root', 'train', 0, 10000000000, 'exit');
INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns)
  VALUES (1, 1, 0, 10, 'main', 0, 10000000000);
INSERT INTO routines (routine_id, name, kind) VALUES (1, '<thread>', 'root'),
  (2, 'step', 'region'), (3, 'forward', 'region'), (4, 'backward', 'region'),
  (5, 'update', 'region'), (6, 'cudaLaunchKernel', 'cuda'), (7, 'cudaMemcpy HtoD', 'cuda'),
  (8, 'ncclAllReduce', 'nccl'), (9, 'cudaMemcpy DtoH', 'cuda'), (10, 'eval', 'region');
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES
  (1, 1, NULL, 1, 0, 0, 1, 11, 10000000000, 3000000000),
  (2, 1, 1, 2, 1, 0, 10, 30, 6000000000, 2500000000),
  (3, 1, 2, 3, 2, 0, 10, 20, 1000000000, 700000000),
  (4, 1, 3, 6, 3, 0, 10, 0, 100000000, 100000000),
  (5, 1, 3, 7, 3, 0, 10, 0, 200000000, 200000000),
  (6, 1, 2, 4, 2, 0, 10, 20, 2000000000, 1600000000),
  (7, 1, 6, 6, 3, 0, 10, 0, 100000000, 100000000),
  (8, 1, 6, 8, 3, 0, 10, 10, 300000000, 250000000),
  (9, 1, 8, 6, 4, 0, 10, 0, 50000000, 50000000),
  (10, 1, 2, 5, 2, 0, 10, 20, 500000000, 430000000),
  (11, 1, 10, 6, 3, 0, 10, 0, 50000000, 50000000),
  (12, 1, 10, 9, 3, 0, 10, 0, 20000000, 20000000),
  (13, 1, 1, 10, 1, 0, 1, 1, 1000000000, 990000000),
  (14, 1, 13, 6, 2, 0, 1, 0, 10000000, 10000000);
)sql";

// Device times in ms (device 0 unless said): forward sgemm [0, 3] and a replayed kernel of
// 0.5 ms without timestamps; the HtoD copy [3, 4]; backward kernels [4, 9] and [8, 10] on two
// streams; NCCL kernels [7, 11] (under ncclAllReduce) and [9.5, 10.5] (launched straight from
// backward, as DDP's hooks do), and [0, 2] on device 1; update [11, 12] and a DtoH copy of
// 0.5 ms; evaluation [20, 21]; a kernel whose launch sonde did not see [30, 32].
constexpr const char* kGpu = R"sql(
INSERT INTO gpu_activity (activity_id, process_id, node_id, kind, name, device, stream,
                          start_ns, end_ns) VALUES
  (1, 1, 4, 'kernel', 'sgemm_fwd', 0, 7, 0, 3000000),
  (2, 1, 4, 'kernel', 'replayed_fwd', 0, 7, NULL, NULL),
  (3, 1, 5, 'memcpy', 'memcpy HtoD', 0, 7, 3000000, 4000000),
  (4, 1, 7, 'kernel', 'sgemm_bwd', 0, 7, 4000000, 9000000),
  (5, 1, 7, 'kernel', 'relu_bwd', 0, 8, 8000000, 10000000),
  (6, 1, 9, 'kernel', 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)',
   0, 9, 7000000, 11000000),
  (7, 1, 7, 'kernel', 'ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)',
   0, 9, 9500000, 10500000),
  (8, 1, 9, 'kernel', 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)',
   1, 3, 0, 2000000),
  (9, 1, 11, 'kernel', 'sgd_update', 0, 7, 11000000, 12000000),
  (10, 1, 12, 'memcpy', 'memcpy DtoH', 0, 7, 12000000, 12500000),
  (11, 1, 14, 'kernel', 'eval_relu', 0, 7, 20000000, 21000000),
  (12, 1, NULL, 'kernel', 'unseen', 0, 7, 30000000, 32000000);
INSERT INTO gpu_metrics VALUES (2, 'gpu__time_duration.sum', 500000);
)sql";

class BreakdownGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (dir_.path / "gpu.db").string();
    std::string sql = test::read_file(SONDE_SCHEMA_SQL);
    sql += "INSERT INTO meta VALUES ('schema_version', '" + std::to_string(kSchemaVersion) + "');";
    test::exec_sql(path_, sql + kTree);
  }
  Breakdown compute() { return compute_breakdown(ProfileFile::open(path_), {}); }
  static std::int64_t gpu(const Breakdown& b, const std::string& id) {
    return std::find_if(b.rows.begin(), b.rows.end(),
                        [&](const BreakdownRow& r) { return r.id == id; })
        ->gpu_ns;
  }
  test::TempDir dir_;
  std::string path_;
};

TEST_F(BreakdownGpuTest, EachPhaseHasTheDeviceTimeLaunchedUnderIt) {
  test::exec_sql(path_, kGpu);
  Breakdown b = compute();
  ASSERT_TRUE(b.found) << b.reason;
  ASSERT_TRUE(b.gpu);
  EXPECT_EQ(b.iterations, 10);
  EXPECT_EQ(gpu(b, "t_f"), 3 * kMs + kMs / 2);  // the replayed kernel by its measured duration
  EXPECT_EQ(gpu(b, "t_h2d"), 1 * kMs);
  EXPECT_EQ(gpu(b, "t_b"), 5 * kMs + 2 * kMs);  // NCCL kernels launched from it are not
  EXPECT_EQ(gpu(b, "t_comm"), 4 * kMs + 1 * kMs + 2 * kMs);
  EXPECT_EQ(gpu(b, "t_u"), 1 * kMs + kMs / 2);  // the DtoH copy stays in its phase
  EXPECT_EQ(gpu(b, "t_io"), 0);
  EXPECT_EQ(b.gpu_other_ns, 0);
  EXPECT_EQ(b.gpu_outside_ns, 1 * kMs);
  EXPECT_EQ(b.gpu_unseen_ns, 2 * kMs);
  // The host's figures are the host's.
  EXPECT_EQ(b.rows[kForward].time_ns, 800 * kMs);  // its own and its launch's
  EXPECT_EQ(b.rows[kComm].time_ns, 300 * kMs);
}

TEST_F(BreakdownGpuTest, OverlapIsPerDeviceAndCountsConcurrentKernelsOnce) {
  test::exec_sql(path_, kGpu);
  Breakdown b = compute();
  ASSERT_EQ(b.overlap.size(), 2u);
  const GpuOverlapRow& d0 = b.overlap[0];
  EXPECT_EQ(d0.pid, 10);
  EXPECT_EQ(d0.device, 0);
  EXPECT_EQ(d0.iterations, 10);
  EXPECT_EQ(d0.time.comm_ns, 4 * kMs);      // [7, 11]: the second NCCL kernel is inside it
  EXPECT_EQ(d0.time.compute_ns, 10 * kMs);  // [0, 3] [4, 10] [11, 12]; not the evaluation's
  EXPECT_EQ(d0.time.overlap_ns, 3 * kMs);   // [7, 10]; pairwise sums would say 4.5
  const GpuOverlapRow& d1 = b.overlap[1];
  EXPECT_EQ(d1.device, 1);
  EXPECT_EQ(d1.time.comm_ns, 2 * kMs);
  EXPECT_EQ(d1.time.overlap_ns, 0);
  ASSERT_EQ(b.notes.size(), 1u);  // the replayed kernel is not in the overlap, and it says so
  EXPECT_NE(b.notes[0].find("1 kernel(s)"), std::string::npos) << b.notes[0];

  Table t = breakdown_overlap_table(b);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(std::get<double>(t.rows[0][5]), 75.0);  // % of communication hidden
  EXPECT_DOUBLE_EQ(std::get<double>(t.rows[0][6]), 0.1);   // exposed ms per iteration
  EXPECT_DOUBLE_EQ(std::get<double>(t.rows[0][7]), 0.3);   // overlapped ms per iteration
}

TEST_F(BreakdownGpuTest, TheTableShowsDeviceTimeBesideHostTime) {
  test::exec_sql(path_, kGpu);
  Breakdown b = compute();
  Table t = breakdown_table(b);
  auto col = [&](const std::string& key) {
    for (std::size_t i = 0; i < t.columns.size(); ++i)
      if (t.columns[i].key == key) return i;
    throw std::runtime_error("no column " + key);
  };
  const auto& backward = t.rows[kBackward];
  EXPECT_DOUBLE_EQ(std::get<double>(backward[col("time_s")]), 1.7);
  EXPECT_DOUBLE_EQ(std::get<double>(backward[col("gpu_s")]), 0.007);
  EXPECT_DOUBLE_EQ(std::get<double>(backward[col("gpu_ms_per_iter")]), 0.7);
  // Every row of gpu_activity is in one row of the table, once.
  double sum = 0;
  for (const auto& r : t.rows) sum += std::get<double>(r[col("gpu_s")]);
  EXPECT_NEAR(sum, 0.023, 1e-12);
}

TEST_F(BreakdownGpuTest, NoGpuActivityNoDeviceColumns) {
  Breakdown b = compute();
  ASSERT_TRUE(b.found);
  EXPECT_FALSE(b.gpu);
  EXPECT_TRUE(b.overlap.empty());
  Table t = breakdown_table(b);
  for (const Column& c : t.columns) EXPECT_EQ(c.key.find("gpu"), std::string::npos) << c.key;
}

TEST_F(BreakdownGpuTest, NoNcclKernelNoOverlapRows) {
  test::exec_sql(path_, kGpu);
  test::exec_sql(path_, "DELETE FROM gpu_activity WHERE name GLOB 'nccl*'");
  Breakdown b = compute();
  EXPECT_TRUE(b.overlap.empty());
  EXPECT_EQ(gpu(b, "t_comm"), 0);
}

// PyTorch runs backward ops on a CUDA device in its autograd thread (pt_autograd_0), which
// launches their kernels from no frame of the loop: within the device time of the iterations'
// work ([0, 12.5] ms) they are t_b; a warm-up's or evaluation's after it is outside.
TEST_F(BreakdownGpuTest, AutogradThreadsWorkInTheIterationsIsBackward) {
  test::exec_sql(path_, kGpu);
  test::exec_sql(path_, R"sql(
INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns)
  VALUES (2, 1, 1, 11, 'pt_autograd_0', 0, 10000000000);
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES
  (15, 2, NULL, 1, 0, 0, 1, 20, 9000000000, 8000000000),
  (16, 2, 15, 6, 1, 0, 20, 0, 1000000000, 1000000000);
INSERT INTO gpu_activity (activity_id, process_id, node_id, kind, name, device, stream,
                          start_ns, end_ns) VALUES
  (13, 1, 16, 'kernel', 'autograd_gemm', 0, 7, 12000000, 12400000),
  (14, 1, 16, 'kernel', 'autograd_gemm', 0, 7, 40000000, 41000000);
)sql");
  Breakdown b = compute();
  EXPECT_EQ(b.left_out_threads, 1);  // on the host it is still a thread without a loop
  EXPECT_EQ(gpu(b, "t_b"), 7 * kMs + 400'000);
  EXPECT_EQ(b.gpu_outside_ns, 1 * kMs + 1 * kMs);
  EXPECT_EQ(b.overlap.at(0).time.compute_ns, 10 * kMs + 400'000);  // [11, 12.4] now
  EXPECT_TRUE(std::any_of(b.notes.begin(), b.notes.end(), [](const std::string& n) {
    return n.find("pt_autograd_N") != std::string::npos;
  }));
}

// A version 5 file has no gpu_work: it is made at open, and the breakdown reads it the same.
TEST_F(BreakdownGpuTest, AVersion5FileGetsGpuWorkAtOpen) {
  test::exec_sql(path_, kGpu);
  test::exec_sql(path_,
                 "DROP VIEW gpu_work; UPDATE meta SET value = '5' WHERE key = "
                 "'schema_version'");
  Breakdown b = compute();
  EXPECT_EQ(gpu(b, "t_comm"), 7 * kMs);
  EXPECT_EQ(b.overlap.at(0).time.overlap_ns, 3 * kMs);
}

}  // namespace
}  // namespace sonde::analyzers
