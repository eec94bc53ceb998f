// The real binary on good and bad input: exit codes, one clear line on stderr, never a crash.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture.hpp"
#include "profile/profile_file.hpp"

namespace sonde::test {
namespace {
namespace fs = std::filesystem;

int count_lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

void expect_one_clean_line(const CliResult& r, const std::string& contains) {
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(contains), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("what()"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = dir_.path / "prof.db";
    write_fixture(good_);
  }
  std::string q(const fs::path& p) { return "'" + p.string() + "'"; }
  TempDir dir_;
  fs::path good_;
};

TEST_F(CliTest, ReportOnAGoodFile) {
  CliResult r = run_sonde("report " + q(good_));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("%Time  Exclusive msec  Inclusive total msec  #Call  #Subrs"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("warning: libfoo.so"), std::string::npos);
  CliResult j = run_sonde("report " + q(good_) + " --format json --top 2");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["rows"].size(), 2u);
}

TEST_F(CliTest, MissingFile) {
  CliResult r = run_sonde("report " + q(dir_.path / "prof2.db"));
  EXPECT_EQ(r.exit_code, 1);
  expect_one_clean_line(
      r, "sonde report: cannot open " + (dir_.path / "prof2.db").string() + ": no such file");
  EXPECT_FALSE(fs::exists(dir_.path / "prof2.db"));  // opening never creates
}

TEST_F(CliTest, TextFileIsNotADatabase) {
  fs::path bad = dir_.path / "x.db";
  std::ofstream(bad) << "this is not a database, just some text long enough to have a header\n";
  CliResult r = run_sonde("tree " + q(bad));
  EXPECT_EQ(r.exit_code, 1);
  expect_one_clean_line(r, "is not a SQLite database");
}

TEST_F(CliTest, TruncatedCopy) {
  fs::path cut = dir_.path / "cut.db";
  std::string bytes = read_file(good_);
  ASSERT_GT(bytes.size(), 1024u);
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, 1024);
  CliResult r = run_sonde("report " + q(cut));
  EXPECT_EQ(r.exit_code, 1);
  expect_one_clean_line(r, "sonde report: ");
  EXPECT_TRUE(r.err.find("corrupt") != std::string::npos ||
              r.err.find("not a SQLite database") != std::string::npos)
      << r.err;
}

TEST_F(CliTest, SqliteFileWithoutMeta) {
  fs::path other = dir_.path / "other.db";
  exec_sql(other, "CREATE TABLE t (a);");
  CliResult r = run_sonde("shapes " + q(other));
  EXPECT_EQ(r.exit_code, 1);
  expect_one_clean_line(r, "not a sonde profile (no meta table)");
}

// A profile still being written is read from a copy, so that no statement of a command holds
// the lock the run's flushes wait for: in memory up to 256 MiB, in a temporary file above.
// Read in place, a red team's 440 MB live file took 33-46 s a report, the run's ended threads
// piled up to 8.4 GB meanwhile, and 16 of 60 DataLoader workers lost their profiles.
TEST_F(CliTest, ALiveProfileIsReadFromACopyWhateverItsSize) {
  fs::path live = dir_.path / "live.db";
  write_fixture(live);
  // Written by a process that runs still: this one, as started now.
  auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  exec_sql(live, fmt::format("UPDATE processes SET ended_ns = NULL, host = NULL, pid = {}, "
                             "started_ns = {};",
                             ::getpid(), now_ns));
  auto read_from = [&] {
    sonde::analyzers::ProfileFile f = sonde::analyzers::ProfileFile::open(live.string());
    auto st = f.prepare("SELECT COUNT(*) FROM nodes");
    EXPECT_TRUE(st.step() && st.int64(0) > 0);
    return std::string(sqlite3_db_filename(f.db(), "main"));
  };
  EXPECT_EQ(read_from(), "");  // a copy (in memory), not the file
  exec_sql(live, "CREATE TABLE pad (b BLOB); INSERT INTO pad VALUES (zeroblob(270 * 1048576));");
  ASSERT_GT(fs::file_size(live), std::uintmax_t{256} << 20);
  EXPECT_EQ(read_from(), "");  // a copy (a temporary file), not the file
  CliResult r = run_sonde("report " + q(live));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A killed run's (no end, and its process gone: every reader copied it again), and an
  // ended run's, are read in place.
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  exec_sql(live, fmt::format("UPDATE processes SET pid = {};", gone));
  EXPECT_EQ(read_from(), fs::canonical(live).string());
  exec_sql(live, "UPDATE processes SET ended_ns = started_ns + 1;");
  EXPECT_EQ(read_from(), fs::canonical(live).string());
}

TEST_F(CliTest, ProfileWithATableDropped) {
  // A table every reader reads, dropped by hand: one line naming the file, not an SQL error.
  fs::path cut = dir_.path / "cut.db";
  write_fixture(cut, {});
  exec_sql(cut, "DROP TABLE nodes;");
  CliResult r = run_sonde("report " + q(cut));
  EXPECT_EQ(r.exit_code, 1);
  expect_one_clean_line(r, "is not a whole sonde profile: its table nodes is missing");
}

TEST_F(CliTest, NewerSchemaVersion) {
  fs::path newer = dir_.path / "newer.db";
  write_fixture(newer, {.schema_version = "99"});
  CliResult r = run_sonde("report " + q(newer));
  EXPECT_EQ(r.exit_code, 1);
  expect_one_clean_line(
      r, "schema version 99; this sonde reads up to version " + std::to_string(kSchemaVersion));
}

TEST_F(CliTest, OlderSchemaVersion) {
  // Version 2 files lack the rank and communication tables: one line, not an SQL error.
  fs::path older = dir_.path / "older.db";
  write_fixture(older, {.schema_version = "2"});
  CliResult r = run_sonde("metrics " + q(older));
  EXPECT_EQ(r.exit_code, 1);
  expect_one_clean_line(r,
                        "schema version 2, written by an older sonde; this sonde reads "
                        "versions 3 to " +
                            std::to_string(kSchemaVersion));
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  CliResult unknown = run_sonde("report " + q(good_) + " --bogus");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("--bogus"), std::string::npos) << unknown.err;
  EXPECT_EQ(run_sonde("report").exit_code, 2);
  EXPECT_EQ(run_sonde("report " + q(good_) + " --format xml").exit_code, 2);
  CliResult none = run_sonde("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("report"), std::string::npos);  // the help lists the subcommands
  EXPECT_EQ(run_sonde("frobnicate").exit_code, 2);
  CliResult help = run_sonde("report --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--sort"), std::string::npos);
}

// "-o $OUT" of an unset variable: one usage line, by every command that writes a file (they
// said "writing  failed", "cannot rename .merging.N to", "cannot write : Success", or an
// internal error).
TEST_F(CliTest, AnEmptyOutputNameIsAUsageError) {
  for (const std::string& args :
       {"export " + q(good_) + " --format csv -o ''", "merge -o '' " + q(good_),
        "view " + q(good_) + " --html ''", std::string("calibrate --set gemm.f32=1 -o ''"),
        std::string("run -o '' -- /bin/true"), std::string("tune -o '' -- /bin/true")}) {
    CliResult r = run_sonde(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    expect_one_clean_line(r, "names no file (an empty value)");
  }
}

TEST_F(CliTest, QueryRefusesWrites) {
  std::string before = read_file(good_);
  CliResult r = run_sonde("query " + q(good_) + " 'DROP TABLE nodes'");
  EXPECT_EQ(r.exit_code, 1);
  expect_one_clean_line(r, "sonde query: refusing to write");
  EXPECT_EQ(read_file(good_), before);
  CliResult bad = run_sonde("query " + q(good_) + " 'SELEKT 1'");
  EXPECT_EQ(bad.exit_code, 1);
  expect_one_clean_line(bad, "syntax error");
}

TEST_F(CliTest, QueryCsvAndExportToFile) {
  CliResult r = run_sonde("query " + q(good_) +
                          " 'SELECT routine, calls FROM hotspots ORDER BY calls DESC LIMIT 2' "
                          "--format csv");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "routine,calls\ncblas_sgemm,6\nload_data,4\n");
  fs::path folded = dir_.path / "out.folded";
  CliResult e = run_sonde("export " + q(good_) + " --format folded -o " + q(folded));
  EXPECT_EQ(e.exit_code, 0) << e.err;
  EXPECT_EQ(read_file(folded).substr(0, 18), "load_data 3010000\n");
  CliResult c = run_sonde("export " + q(good_) + " --format chrome");
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_TRUE(nlohmann::json::accept(c.out));
  // A name the file system takes (255 bytes, NAME_MAX): the file written beside it first
  // (NAME.sonde-tmp-PID) made those of 240 and more fail as "File name too long".
  fs::path longest = dir_.path / std::string(255, 'n');
  CliResult l = run_sonde("export " + q(good_) + " --format folded -o " + q(longest));
  EXPECT_EQ(l.exit_code, 0) << l.err;
  EXPECT_EQ(read_file(longest), read_file(folded));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_.path)) ++entries;
  EXPECT_EQ(entries, 3u);  // the profile, out.folded and the long one: no temporary left
}

}  // namespace
}  // namespace sonde::test
