// A small profile with known numbers, written with the real schema, and helpers to run the CLI.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "store/schema_version.hpp"

namespace sonde::test {

inline constexpr long long kT0 = 1'000'000'000'000;  // the run's start, CLOCK_REALTIME ns

struct FixtureOptions {
  std::string schema_version = std::to_string(kSchemaVersion);
  bool trace_events = false;
};

// Two threads with calls and one idle thread:
//   thread 0 "main"  (10 s): <thread> excl 1 s
//       train [region] 6 s, excl 1 s
//           cblas_sgemm [blas] 4 calls, 4 s;  fib [python] 1 s, excl 0.4 s
//                                                 fib (recursive) 2 calls, 0.6 s
//       load_data [native] 3 calls, 3 s
//   thread 1 "worker" (5 s): <thread> excl 1.99 s
//       train 3 s, excl 1 s: cblas_sgemm 2 calls 2 s, noop 0 s;  load_data 0.01 s
//   thread 2: root only, 0.5 s
// Total (sum of roots) 15.5 s.
void write_fixture(const std::filesystem::path& path, const FixtureOptions& options = {});

// Executes SQL on a new or existing SQLite file (for damaged / foreign fixtures).
void exec_sql(const std::filesystem::path& path, const std::string& sql);

// A fresh directory under the test temp dir, removed by the caller's TempDir.
struct TempDir {
  TempDir();
  ~TempDir();
  std::filesystem::path path;
};

// A test whose fixture profile is written fresh into its own directory before each test.
class FixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (dir_.path / "prof.db").string();
    write_fixture(path_);
  }
  TempDir dir_;
  std::string path_;
};

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the real sonde binary with a shell-quoted argument string; env is prepended as-is.
CliResult run_sonde(const std::string& args, const std::string& env = "");
std::string sonde_binary();
std::string read_file(const std::filesystem::path& path);

}  // namespace sonde::test
