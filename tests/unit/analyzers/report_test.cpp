#include "render/report.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>

#include "base/table_format.hpp"
#include "fixture.hpp"
#include "profile/run_summary.hpp"

namespace sonde::analyzers {
namespace {

class ReportTest : public test::FixtureTest {};

const HotspotRow& row(const Hotspots& h, const std::string& name) {
  for (const auto& r : h.rows)
    if (r.name == name) return r;
  throw std::runtime_error("no row " + name);
}

TEST_F(ReportTest, HotspotsMergeThreadsAndSkipRecursiveInclusive) {
  ProfileFile file = ProfileFile::open(path_);
  Hotspots h = compute_hotspots(file);
  EXPECT_EQ(h.total_ns, 15'000'000'000);  // the busy threads': the idle one's 0.5 s is out
  EXPECT_EQ(h.wall_ns, 10'500'000'000);
  EXPECT_EQ(h.busy_threads, 2);
  EXPECT_EQ(h.idle_threads, 1);
  ASSERT_EQ(h.rows.size(), 6u);

  const auto& sgemm = row(h, "cblas_sgemm");
  EXPECT_EQ(sgemm.kind, "blas");
  EXPECT_EQ(sgemm.calls, 6);
  EXPECT_EQ(sgemm.excl_ns, 6'000'000'000);
  EXPECT_EQ(sgemm.incl_ns, 6'000'000'000);
  EXPECT_DOUBLE_EQ(sgemm.incl_us_per_call, 1e6);
  EXPECT_DOUBLE_EQ(sgemm.pct_time, 100.0 * 6.0 / 15.0);

  const auto& fib = row(h, "fib");
  EXPECT_EQ(fib.calls, 3);
  EXPECT_EQ(fib.subrs, 2);
  EXPECT_EQ(fib.incl_ns, 1'000'000'000);  // the recursive node's 0.6 s is not added again
  EXPECT_EQ(fib.excl_ns, 1'000'000'000);

  const auto& train = row(h, "train");
  EXPECT_EQ(train.calls, 2);
  EXPECT_EQ(train.subrs, 8);
  EXPECT_EQ(train.incl_ns, 9'000'000'000);
  EXPECT_EQ(train.excl_ns, 2'000'000'000);

  const auto& root = row(h, "<thread>");
  EXPECT_EQ(root.calls, 2);
  EXPECT_EQ(root.subrs, 6);
  EXPECT_EQ(root.excl_ns, 2'990'000'000);
  EXPECT_DOUBLE_EQ(root.pct_time, 100.0);

  // Every nanosecond is somebody's exclusive time.
  std::int64_t excl_sum = 0;
  for (const auto& r : h.rows) excl_sum += r.excl_ns;
  EXPECT_EQ(excl_sum, h.total_ns);
}

TEST_F(ReportTest, SortKeys) {
  ProfileFile file = ProfileFile::open(path_);
  auto names = [](const Hotspots& h) {
    std::vector<std::string> out;
    for (const auto& r : h.rows) out.push_back(r.name);
    return out;
  };
  EXPECT_EQ(
      names(compute_hotspots(file, ReportSort::kExclusive)),
      (std::vector<std::string>{"cblas_sgemm", "load_data", "<thread>", "train", "fib", "noop"}));
  EXPECT_EQ(
      names(compute_hotspots(file, ReportSort::kInclusive)),
      (std::vector<std::string>{"<thread>", "train", "cblas_sgemm", "load_data", "fib", "noop"}));
  EXPECT_EQ(names(compute_hotspots(file, ReportSort::kCalls))[0], "cblas_sgemm");
  // pstats' ascending keys: by the name, by file and line.
  EXPECT_EQ(
      names(compute_hotspots(file, parse_report_sort("name"))),
      (std::vector<std::string>{"<thread>", "cblas_sgemm", "fib", "load_data", "noop", "train"}));
  EXPECT_EQ(parse_report_sort("stdname"), ReportSort::kName);
  EXPECT_EQ(parse_report_sort("module"), ReportSort::kFile);
  EXPECT_THROW(parse_report_sort("bogus"), Error);
}

TEST_F(ReportTest, RunSummaryAndHeader) {
  ProfileFile file = ProfileFile::open(path_);
  RunSummary s = load_run_summary(file);
  EXPECT_EQ(s.command, "./train --steps 3");
  EXPECT_EQ(s.processes, 1);
  EXPECT_EQ(s.threads, 2);
  EXPECT_EQ(s.idle_threads, 1);
  ASSERT_TRUE(s.wall_s);
  EXPECT_DOUBLE_EQ(*s.wall_s, 10.5);
  EXPECT_EQ(s.blas_library.value_or(""), "OpenBLAS 0.3.21");
  EXPECT_EQ(s.blas_threads.value_or(""), "4");
  ASSERT_EQ(s.notes.size(), 1u);

  std::string text = render_report_text(s, compute_hotspots(file), 3);
  EXPECT_NE(text.find("command:   ./train --steps 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("testhost, Test CPU 9000, 8 cores"), std::string::npos) << text;
  EXPECT_NE(text.find("processes: 1, threads: 2 (+1 idle), wall time: 10.500 s"), std::string::npos)
      << text;
  EXPECT_NE(text.find("total:     10.500 s wall time\n"
                      "%Time of:  15.000 s, the busy threads' time (2 threads; 1 idle thread "
                      "left out)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("BLAS:      OpenBLAS 0.3.21, 4 threads"), std::string::npos) << text;
  EXPECT_NE(text.find("warning: libfoo.so was opened with RTLD_DEEPBIND"), std::string::npos);
  EXPECT_NE(text.find("(3 more routines; --top 0 shows all)"), std::string::npos) << text;
  // The top row: %Time 40.0, exclusive 6000 ms over 6 calls of 1e6 us each.
  EXPECT_NE(text.find("40.0        6000.000"), std::string::npos) << text;
  EXPECT_NE(text.find("1000000.0  cblas_sgemm [blas]"), std::string::npos) << text;
}

// A process a signal ended wrote its final flush: the report says the signal (a hung DDP job
// killed by `timeout` read as a finished run).
TEST_F(ReportTest, AProcessEndedByASignalIsSaid) {
  test::exec_sql(path_, "UPDATE processes SET end_reason = 'signal 15'");
  ProfileFile file = ProfileFile::open(path_);
  std::string text = render_report_text(load_run_summary(file), compute_hotspots(file), 3);
  EXPECT_NE(text.find("the process was ended by signal 15 (SIGTERM): its figures stop there"),
            std::string::npos)
      << text;
}

TEST_F(ReportTest, JsonHasRunNotesAndRows) {
  ProfileFile file = ProfileFile::open(path_);
  Json j = render_report_json(path_, load_run_summary(file), compute_hotspots(file), 0);
  EXPECT_EQ(j["run"]["host"], "testhost");
  EXPECT_EQ(j["notes"][0]["topic"], "deepbind");
  // run_info's text as JSON types: a count a number, a flag a boolean, a figure a number.
  EXPECT_EQ(j["run"]["blas_threads"], 4);
  test::exec_sql(
      path_,
      "INSERT OR REPLACE INTO run_info VALUES (1, 1, 'fpu.ftz', '1'), (1, 1, 'fpu.daz', '0'), "
      "(1, 1, 'cpu.quota', '1.5'), (1, 1, 'torch.num_threads', 'many');");
  Json typed = run_summary_to_json(load_run_summary(ProfileFile::open(path_)));
  EXPECT_EQ(typed["fpu_ftz"], true);
  EXPECT_EQ(typed["fpu_daz"], false);
  EXPECT_EQ(typed["cpu_quota"], 1.5);
  EXPECT_EQ(typed["torch_threads"], "many");  // no number: as recorded
  EXPECT_EQ(typed["cpu_throttled_s"], nullptr);
  EXPECT_DOUBLE_EQ(j["total_s"].get<double>(), 15.0);
  EXPECT_DOUBLE_EQ(j["wall_s"].get<double>(), 10.5);
  ASSERT_EQ(j["rows"].size(), 6u);
  EXPECT_EQ(j["rows"][0]["name"], "cblas_sgemm");
  EXPECT_EQ(j["rows"][0]["calls"], 6);
  EXPECT_DOUBLE_EQ(j["rows"][0]["excl_ms"].get<double>(), 6000.0);
  EXPECT_DOUBLE_EQ(j["rows"][3]["incl_ms"].get<double>(), 9000.0);  // train
}

// A profile still being written is read from a copy: a reader's statement in progress leaves
// the file unlocked for the writer's flush, which waited behind each statement (3 to 9 s on a
// file of 11k threads), while the threads that had ended piled up in memory unwritten (a
// red-team run: 1.2 GB against 139 MB). A finished profile is read in place, as before.
TEST_F(ReportTest, AProfileStillBeingWrittenIsReadFromACopy) {
  auto writer_gets_in = [&] {
    sqlite3* w = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &w), SQLITE_OK);
    sqlite3_busy_timeout(w, 0);
    int rc = sqlite3_exec(w, "BEGIN EXCLUSIVE; COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(w);
    return rc == SQLITE_OK;
  };
  {
    ProfileFile file = ProfileFile::open(path_);
    auto st = file.prepare("SELECT node_id FROM nodes");
    ASSERT_TRUE(st.step());  // in place: the statement holds the file's shared lock
    EXPECT_FALSE(writer_gets_in());
  }
  // Still written: no end, and its writer runs (this process, as started now; a killed run's
  // file is read in place, its writer gone).
  auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  test::exec_sql(path_, fmt::format("UPDATE processes SET ended_ns = NULL, end_reason = NULL, "
                                    "host = NULL, pid = {}, started_ns = {}",
                                    ::getpid(), now_ns));
  ProfileFile file = ProfileFile::open(path_);
  auto st = file.prepare("SELECT node_id FROM nodes");
  ASSERT_TRUE(st.step());
  EXPECT_TRUE(writer_gets_in());
  // And the copy reads as the file: the report's rows.
  ProfileFile again = ProfileFile::open(path_);
  EXPECT_EQ(render_report_text(load_run_summary(file), compute_hotspots(file), 0),
            render_report_text(load_run_summary(again), compute_hotspots(again), 0));
}

TEST(TableFormat, CsvQuotesAndJsonNulls) {
  Table t;
  t.columns = {{"A", "a"}, {"B", "b"}, {"C", "c", 2}};
  t.rows = {{std::string("x,\"y\""), std::int64_t{3}, 1.5},
            {std::string("z"), std::monostate{}, 2.0}};
  EXPECT_EQ(render_csv(t), "a,b,c\n\"x,\"\"y\"\"\",3,1.5\nz,,2\n");
  Json j = render_json(t);
  EXPECT_TRUE(j[1]["b"].is_null());
  EXPECT_EQ(render_text(t), "A      B     C\n--------------\nx,\"y\"  3  1.50\nz      -  2.00\n");
}

}  // namespace
}  // namespace sonde::analyzers

namespace sonde::analyzers {
namespace {

// The same note from many processes is one line naming them (a test suite's helpers that
// intercept nothing wrote 40 lines); distinct notes keep their first order.
TEST(RenderNotes, OneLinePerDistinctNoteNamingItsProcesses) {
  RunSummary s;
  auto note = [&](const char* severity, const char* message, std::optional<int64_t> pid) {
    s.notes.push_back(Note{severity, "topic", message, pid});
  };
  note("warning", "nothing was intercepted", 10);
  note("warning", "deep calls", 11);
  for (int64_t pid = 12; pid < 17; ++pid) note("warning", "nothing was intercepted", pid);
  note("info", "deep calls", std::nullopt);  // another severity: its own line
  note("warning", "deep calls", 20);
  note("info", "run note", std::nullopt);
  EXPECT_EQ(render_notes(s),
            "warning: nothing was intercepted (6 processes: pid 10, 12, 13 and 3 more)\n"
            "warning: deep calls (2 processes: pid 11, 20)\n"
            "note: deep calls\n"
            "note: run note\n");
}

}  // namespace
}  // namespace sonde::analyzers

namespace sonde::analyzers {
namespace {

// What a terminal would not show as written: control bytes, and the characters that show as
// nothing or reorder what follows (a name could read as another's; U+2028 split a folded line
// for Python's splitlines; a red-team find). Everything else, UTF-8 included, as it is.
TEST(Visible, ControlsAndInvisibleCharactersAreEscaped) {
  EXPECT_EQ(visible("train.py:12(forward)"), "train.py:12(forward)");
  EXPECT_EQ(visible("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"),
            "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac");
  EXPECT_EQ(visible("a\x1b]0;t\x07"
                    "b\n"),
            "a\\x1b]0;t\\x07b\\n");
  EXPECT_EQ(visible("a\xe2\x80\xae"
                    "b"),
            "a\\u202eb");                             // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(visible("x\xe2\x80\xa8y"), "x\\u2028y");  // LINE SEPARATOR
  EXPECT_EQ(visible("z\xe2\x80\x8bw\xe2\x81\xa6v\xef\xbb\xbf"), "z\\u200bw\\u2066v\\ufeff");
  EXPECT_EQ(visible("\xe2\x80\x94"), "\xe2\x80\x94");  // an em dash stays
  EXPECT_EQ(visible("\xff"), "\\xff");
}

}  // namespace
}  // namespace sonde::analyzers
