// The writer's wait for the other processes of its run (store/sqlite_db.cpp): as long as the
// file keeps changing it waits, past the stall limit; once nothing changes it gives up.
#include "store/sqlite_db.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "temp_dir.hpp"

namespace sonde {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class WriterWaitTest : public testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("p.db");
    std::string error;
    Database db;
    ASSERT_TRUE(db.open(path_, true, error)) << error;
    ASSERT_TRUE(db.exec("CREATE TABLE t (x INTEGER)", error)) << error;
  }
  // Another writer holding the lock for `hold_ms` at a time, committing (so changing the file)
  // between holds when `commits`, for `total_ms` in all.
  std::thread holder(int hold_ms, int total_ms, bool commits, std::atomic<bool>& locked) {
    return std::thread([=, this, &locked] {
      std::string error;
      Database db;
      ASSERT_TRUE(db.open(path_, false, error)) << error;
      auto start = Clock::now();
      bool first = true;
      while (seconds_since(start) * 1000 < total_ms) {
        ASSERT_TRUE(db.exec("BEGIN EXCLUSIVE", error)) << error;
        if (first) locked = true, first = false;
        ASSERT_TRUE(db.exec("INSERT INTO t VALUES (1)", error)) << error;
        std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
        ASSERT_TRUE(db.exec(commits ? "COMMIT" : "ROLLBACK", error)) << error;
      }
    });
  }
  // A write as a flush makes it; its seconds, or a negative number when it gave up.
  double write(int stall_ms, int max_ms) {
    std::string error;
    Database db;
    db.set_writer_patience(stall_ms, max_ms);
    auto start = Clock::now();
    // Opening reads the schema, so it may wait already.
    bool ok = db.open(path_, false, error) && db.exec("BEGIN IMMEDIATE", error) && db.exec("INSERT INTO t VALUES (2)", error) &&
              db.exec("COMMIT", error);
    double s = seconds_since(start);
    if (!ok) EXPECT_NE(error.find("locked"), std::string::npos) << error;
    return ok ? s : -s;
  }
  test::TempDir dir_;
  std::string path_;
};

TEST_F(WriterWaitTest, WaitsPastTheStallLimitWhileTheOthersCommit) {
  std::atomic<bool> locked{false};
  // 300 ms at a time, re-taken at once, for 1.5 s: five times the 0.3 s stall limit.
  std::thread other = holder(300, 1500, true, locked);
  while (!locked) std::this_thread::yield();
  double s = write(300, 10'000);
  other.join();
  EXPECT_GT(s, 0.3) << "gave up after " << -s << " s, or never waited";
}

TEST_F(WriterWaitTest, GivesUpOnceTheFileStopsChanging) {
  std::atomic<bool> locked{false};
  // One hold of 3 s, nothing written to the file: a stuck writer.
  std::thread other = holder(3000, 1, false, locked);
  while (!locked) std::this_thread::yield();
  double s = write(300, 10'000);
  other.join();
  EXPECT_LT(s, 0) << "wrote after " << s << " s under a lock that was never released";
  EXPECT_GT(-s, 0.25);
  EXPECT_LT(-s, 2.5);
}

TEST_F(WriterWaitTest, GivesUpAtTheLimitHoweverTheOthersMove) {
  std::atomic<bool> locked{false};
  std::thread other = holder(200, 2500, true, locked);
  while (!locked) std::this_thread::yield();
  double s = write(300, 800);
  other.join();
  // Either it found a gap between two holds (then before the limit) or gave up near the limit.
  if (s < 0) {
    EXPECT_GT(-s, 0.7);
    EXPECT_LT(-s, 2.0);
  } else {
    EXPECT_LT(s, 1.0);
  }
}

}  // namespace
}  // namespace sonde
