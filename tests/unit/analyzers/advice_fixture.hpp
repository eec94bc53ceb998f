// A profile built to exercise the advice layer (metrics, candidates, diff), numbers chosen so
// that every derived figure is exact:
//   thread 1 (10 s): <thread> excl 0.5 s
//     train [region] 9.5 s, excl 0.5 s
//       train.py:5(forward) [python] 2 s, excl 0.5 s
//         cblas_sgemm [blas] 30 calls, 1.5 s, 3e9 FLOPs, 3e8 bytes  (2 GFLOP/s, 10 FLOP/byte)
//           shape 1000x1000x1000: 10 calls, 1.0 s, 2.5e9 FLOPs  (2.5 GFLOP/s), on 1 thread
//           shape  100x10x1000:   20 calls, 0.5 s, 0.5e9 FLOPs  (1 GFLOP/s), on 1 thread
//       train.py:20(update) [python] 7 s, excl 0.2 s
//         train.py:30(update_core_cpu) [python] 60 calls, 6.8 s, excl 6.8 s
//           line costs: 32: 1.0 s, 33: 1.8 s, 34: 4.0 s (58.8 %)
// runs: 2 cores, 2 affinity cores; run_info blas.threads 1, fpu.ftz 0, fpu.daz 0;
// peaks: gemm.f32 threads 0 (= 2) = 4 GFLOP/s, threads 1 = 2.5 GFLOP/s, mem.bw 0.1 GB/s (both).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <variant>

#include "fixture.hpp"

namespace sonde::test {

inline void write_advice_fixture(const std::filesystem::path& path) {
  std::string sql = read_file(SONDE_SCHEMA_SQL);
  sql += "INSERT INTO meta VALUES ('schema_version', '" + std::to_string(kSchemaVersion) + "');";
  sql += R"sql(
INSERT INTO runs VALUES (1, 'uuid-a', 1000000000000, 'python3 train.py', 'h', 'cpu', 2, 2,
                         'profile');
INSERT INTO processes (process_id, run_id, pid, ppid, origin, command, started_ns, ended_ns,
                       end_reason)
  VALUES (1, 1, 10, 1, 'root', 'python3 train.py', 1000000000000, 1000000000000 + 10000000000,
          'exit');
INSERT INTO run_info VALUES (1, 1, 'blas.library', 'OpenBLAS 0.3.21'),
                            (1, 1, 'blas.threads', '1'),
                            (1, 1, 'fpu.ftz', '0'),
                            (1, 1, 'fpu.daz', '0');
INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns) VALUES
  (1, 1, 0, 10, 'main', 1000000000000, 1000000000000 + 10000000000);
INSERT INTO routines (routine_id, name, kind, file, line) VALUES
  (1, '<thread>', 'root', '', 0), (2, 'train', 'region', '', 0),
  (3, 'train.py:5(forward)', 'python', 'train.py', 5),
  (4, 'cblas_sgemm', 'blas', '', 0),
  (5, 'train.py:20(update)', 'python', 'train.py', 20),
  (6, 'train.py:30(update_core_cpu)', 'python', '/nonexistent/train.py', 30);
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns, flops, bytes) VALUES
  (1, 1, NULL, 1, 0, 0, 1, 1, 10000000000, 500000000, 0, 0),
  (2, 1, 1, 2, 1, 0, 1, 2, 9500000000, 500000000, 0, 0),
  (3, 1, 2, 3, 2, 0, 10, 30, 2000000000, 500000000, 0, 0),
  (4, 1, 3, 4, 3, 0, 30, 0, 1500000000, 1500000000, 3000000000, 300000000),
  (5, 1, 2, 5, 2, 0, 10, 60, 7000000000, 200000000, 0, 0),
  (6, 1, 5, 6, 3, 0, 60, 0, 6800000000, 6800000000, 0, 0);
INSERT INTO shapes (node_id, call_site, m, n, k, trans_a, trans_b, dtype, calls, time_ns, flops,
                    bytes, threads) VALUES
  (4, 'train.py:7(forward)', 1000, 1000, 1000, 'N', 'N', 'f32', 10, 1000000000, 2500000000,
   200000000, 1),
  (4, 'train.py:8(forward)', 100, 10, 1000, 'N', 'T', 'f32', 20, 500000000, 500000000,
   100000000, 1);
INSERT INTO line_costs (thread_id, routine_id, line, hits, time_ns) VALUES
  (1, 6, 32, 60, 1000000000), (1, 6, 33, 60, 1800000000), (1, 6, 34, 60, 4000000000);
INSERT INTO peaks (run_id, resource, threads, value, source)
  VALUES (1, 'gemm.f32', 0, 4.0, 'test'), (1, 'gemm.f32', 1, 2.5, 'test'),
         (1, 'mem.bw', 0, 0.1, 'test'), (1, 'mem.bw', 1, 0.1, 'test');
)sql";
  exec_sql(path, sql);
}

// A test with the advice fixture written fresh into its own directory, plus what the advice
// tests all need: more SQL on top of it, and a candidate's evidence as a number.
class AdviceFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (dir_.path / "a.db").string();
    write_advice_fixture(path_);
  }
  void sql(const std::string& s) { exec_sql(path_, s); }
  template <class Candidate>
  static double number(const Candidate& c, const std::string& key) {
    for (const auto& [k, v] : c.evidence)
      if (k == key) {
        if (const auto* d = std::get_if<double>(&v)) return *d;
        if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
      }
    throw std::runtime_error("no number " + key);
  }
  TempDir dir_;
  std::string path_;
};

}  // namespace sonde::test
