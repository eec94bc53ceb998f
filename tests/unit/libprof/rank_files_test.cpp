// The rank files a run's launcher names (store/rank_files.cpp): said by `sonde run` and, at its
// exit, by an in-process launcher, inside the profiled process, where the readers' wait for
// ranks still holding their files is bounded for all files together.
#include "store/rank_files.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "store/sqlite_db.hpp"
#include "temp_dir.hpp"

namespace sonde {
namespace {

// A file with what the rank files' readers ask of a profile: its runs and processes.
Database make_file(const std::string& path, const std::string& uuid) {
  Database db;
  std::string error;
  EXPECT_TRUE(db.open(path, true, error)) << error;
  EXPECT_TRUE(db.exec(("CREATE TABLE runs (run_id INTEGER PRIMARY KEY, uuid TEXT);"
                       "CREATE TABLE processes (process_id INTEGER PRIMARY KEY, rank INTEGER, "
                       "started_ns INTEGER);"
                       "CREATE TABLE notes (run_id INTEGER, process_id INTEGER, severity TEXT, "
                       "topic TEXT, message TEXT, UNIQUE (run_id, topic, message));"
                       "INSERT INTO runs (uuid) VALUES ('" +
                       uuid + "')")
                          .c_str(),
                      error))
      << error;
  return db;
}

TEST(RankFiles, ThisRunsFilesByRankTheOthersCounted) {
  test::TempDir dir;
  make_file(dir.file("prof.db"), "run-a");
  make_file(dir.file("prof.rank1.db"), "run-a");
  make_file(dir.file("prof.rank0.db"), "run-a");
  make_file(dir.file("prof.rank2.4242.db"), "run-a");  // beside an earlier run's prof.rank2.db
  make_file(dir.file("prof.rank2.db"), "run-b");       // that earlier run's
  make_file(dir.file("prof.rank01.db"), "run-a");      // not a rank's name
  make_file(dir.file("prof.rankx.db"), "run-a");
  int others = 0;
  auto found = rank_files_written(dir.file("prof.db"), 0, others);
  std::vector<RankFile> want = {
      {0, "prof.rank0.db", 0}, {1, "prof.rank1.db", 0}, {2, "prof.rank2.4242.db", 0}};
  EXPECT_EQ(found, want);
  EXPECT_EQ(others, 1);
  // With another run's file among them, the merge names this run's files, not the pattern.
  RankFilesSaid said = rank_files_said(dir.file("prof.db"), "out/prof.db", 0);
  EXPECT_EQ(said.line,
            "sonde: 3 ranks wrote their own files, out/prof.rank0.db, out/prof.rank1.db, "
            "out/prof.rank2.4242.db; to read them as one: sonde merge -o out/prof.merged.db "
            "out/prof.rank0.db out/prof.rank1.db out/prof.rank2.4242.db\n");
  note_rank_files(dir.file("prof.db"), said.note);
  Database db;
  ASSERT_EQ(db.open_readonly(dir.file("prof.db"), 0), SQLITE_OK);
  Statement st(db.handle(), "SELECT topic, message FROM notes");
  ASSERT_EQ(st.step(), SQLITE_ROW);
  EXPECT_EQ(st.column_text(0), kRankFilesTopic);
  EXPECT_EQ(st.column_text(1), said.note);
}

// torchrun --max_restarts: a file per rank per attempt, one run id. Read as files, "4 ranks" for
// 2, and the merge suggested refused them, "both hold rank 0" (a red-team find).
TEST(RankFiles, ARestartedJobsLastAttemptIsNamed) {
  test::TempDir dir;
  make_file(dir.file("prof.db"), "run-a");
  for (auto [name, attempt] :
       {std::pair{"prof.rank0.db", 0}, std::pair{"prof.rank1.db", 0},
        std::pair{"prof.rank0.4242.db", 1}, std::pair{"prof.rank1.4243.db", 1}}) {
    Database db = make_file(dir.file(name), "run-a");
    std::string error;
    std::string sql =
        "CREATE TABLE run_info (key TEXT, value TEXT); INSERT INTO run_info VALUES "
        "('torch.restart_count', '" +
        std::to_string(attempt) + "')";
    ASSERT_TRUE(db.exec(sql.c_str(), error)) << error;
  }
  int others = 0;
  auto found = rank_files_written(dir.file("prof.db"), 0, others);
  std::vector<RankFile> want = {{0, "prof.rank0.db", 0},
                                {1, "prof.rank1.db", 0},
                                {0, "prof.rank0.4242.db", 1},
                                {1, "prof.rank1.4243.db", 1}};
  EXPECT_EQ(found, want);
  EXPECT_EQ(rank_files_said(dir.file("prof.db"), "prof.db", 0).line,
            "sonde: 2 ranks wrote their own files in each of 2 attempts (torchrun restarted "
            "them; 4 files in all); the last attempt's, prof.rank0.4242.db, prof.rank1.4243.db; "
            "to read that attempt as one: sonde merge -o prof.merged.db prof.rank0.4242.db "
            "prof.rank1.4243.db\n");
}

TEST(RankFiles, RanksHoldingTheirFilesDelayTheLauncherTwoSecondsInAll) {
  test::TempDir dir;
  make_file(dir.file("prof.db"), "run-a");
  // Three ranks in the middle of a flush: each holds its file's write lock throughout.
  std::vector<Database> held;
  for (int r = 0; r < 3; ++r) {
    held.push_back(make_file(dir.file("prof.rank" + std::to_string(r) + ".db"), "run-a"));
    std::string error;
    ASSERT_TRUE(held.back().exec("BEGIN EXCLUSIVE", error)) << error;
  }
  auto start = std::chrono::steady_clock::now();
  int others = 0;
  auto found = rank_files_written(dir.file("prof.db"), 0, others);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // 2 s a file before: 6 s at the host's exit. The files could not be read: not named.
  EXPECT_LT(waited, 4.0);
  EXPECT_GE(waited, 1.5);
  EXPECT_TRUE(found.empty());
  EXPECT_EQ(others, 3);
}

}  // namespace
}  // namespace sonde
