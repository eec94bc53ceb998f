#include "export/export.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "base/table_format.hpp"
#include "export/export_samples.hpp"
#include "fixture.hpp"
#include "profile/query.hpp"

namespace sonde::analyzers {
namespace {

class ExportTest : public ::testing::Test {
 protected:
  void write(const test::FixtureOptions& o = {}) {
    path_ = (dir_.path / "prof.db").string();
    test::write_fixture(path_, o);
  }
  test::TempDir dir_;
  std::string path_;
};

TEST_F(ExportTest, FoldedIsExclusiveMicrosecondsMergedOverThreads) {
  write();
  ProfileFile file = ProfileFile::open(path_);
  std::ostringstream out;
  write_folded(file, out);
  // noop (0 us) is left out; the busy threads' roots (their time in no measured call) are one
  // frame of their own, last: the lines add up to the threads' time, as the report's 100 %.
  EXPECT_EQ(out.str(),
            "load_data 3010000\n"
            "train 2000000\n"
            "train;cblas_sgemm 6000000\n"
            "train;fib 400000\n"
            "train;fib;fib 600000\n"
            "<thread> 2990000\n");
}

// What the file's SQL says the folded lines are: the callpaths view's rows in its order, each
// path's frames from its routine ids, its microseconds rounded on the running sum (so the lines
// add up to the paths' time however small each is), then the busy threads' roots (the hotspots
// view's).
std::string folded_from_sql(const ProfileFile& file) {
  std::map<std::string, std::string> frame;
  for (auto st = file.prepare("SELECT CAST(routine_id AS TEXT), name FROM routines"); st.step();)
    frame[st.text(0)] = folded_frame(st.text(1));
  std::string out;
  auto st = file.prepare("SELECT path_ids, excl_s FROM callpaths ORDER BY path, path_ids");
  double sum_s = 0;
  std::int64_t written_us = 0;
  while (st.step()) {
    sum_s += st.real(1);
    auto us = std::llround(sum_s * 1e6) - written_us;
    if (us <= 0) continue;
    written_us += us;
    std::string ids = st.text(0), path;
    for (std::size_t at = 0; at <= ids.size();) {
      std::size_t end = std::min(ids.find('/', at), ids.size());
      path += (path.empty() ? "" : ";") + frame.at(ids.substr(at, end - at));
      at = end + 1;
    }
    out += fmt::format("{} {}\n", path, us);
  }
  std::int64_t root_us = 0;
  for (auto r = file.prepare("SELECT excl_s FROM hotspots WHERE kind = 'root'"); r.step();)
    root_us += std::llround(r.real(0) * 1e6);
  return out + fmt::format("<thread> {}\n", root_us);
}

// Names that sort around the ';' the view joins them with ('.', ' ', '2' come before it), two
// routines of one name (ids 7 and 10: "10" sorts first as text), the same paths in two threads,
// a zero, and a node whose routine the file does not list (the view leaves out its subtree).
constexpr const char* kTangledPaths = R"sql(
INSERT INTO routines (routine_id, name, kind, file, line) VALUES
  (7, 'h', 'python', 'x.py', 1), (10, 'h', 'python', 'y.py', 1), (20, 'f', 'native', '', 0),
  (21, 'f2', 'native', '', 0), (22, 'f.g', 'native', '', 0), (23, 'f g', 'native', '', 0),
  (24, 'g', 'native', '', 0), (25, 'f', 'python', 'z.py', 3);
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES
  (100, 1, 1, 20, 1, 0, 1, 0, 9000, 1000), (101, 1, 100, 24, 2, 0, 1, 0, 2000, 2000),
  (102, 1, 100, 21, 2, 0, 1, 0, 3000, 3000), (103, 1, 1, 25, 1, 0, 1, 0, 9000, 4000),
  (104, 1, 103, 24, 2, 0, 1, 0, 5000, 5000), (105, 1, 103, 20, 2, 0, 1, 0, 6000, 6000),
  (106, 1, 1, 21, 1, 0, 1, 0, 7000, 7000), (107, 1, 106, 22, 2, 0, 1, 0, 8000, 8000),
  (108, 1, 1, 22, 1, 0, 1, 0, 9000, 9000), (109, 1, 1, 23, 1, 0, 1, 0, 1000, 1000),
  (110, 1, 1, 99, 1, 0, 1, 0, 5000, 2000), (111, 1, 110, 24, 2, 0, 1, 0, 3000, 3000),
  (112, 1, 1, 7, 1, 0, 1, 0, 4000, 4000), (113, 1, 1, 10, 1, 0, 1, 0, 5000, 5000),
  (114, 1, 112, 24, 2, 0, 1, 0, 6000, 6000), (115, 1, 113, 24, 2, 0, 1, 0, 7000, 7000),
  (116, 1, 100, 20, 2, 0, 1, 0, 0, 0),
  (120, 2, 7, 20, 1, 0, 1, 0, 9000, 1500), (121, 2, 120, 24, 2, 0, 1, 0, 2500, 2500),
  (122, 2, 7, 10, 1, 0, 1, 0, 3000, 3000), (123, 2, 122, 24, 2, 0, 1, 0, 3500, 3500),
  (124, 2, 123, 25, 3, 0, 1, 0, 4500, 4500);
)sql";

TEST_F(ExportTest, FoldedIsTheCallpathsViewInItsOrder) {
  write();
  test::exec_sql(path_, kTangledPaths);
  ProfileFile file = ProfileFile::open(path_);
  std::ostringstream out;
  write_folded(file, out);
  EXPECT_EQ(out.str(), folded_from_sql(file));
  // The view's order, not the tree's: "f2" and "f.g" come between "f" and "f;g".
  std::string text = out.str();
  EXPECT_LT(text.find("\nf;f2 "), text.find("\nf;g "));
  EXPECT_LT(text.find("\nf2 "), text.find("\nf;g "));
  EXPECT_EQ(text.find("routine 99"), std::string::npos);
}

TEST_F(ExportTest, FoldedOrdersNamesWithSemicolonsAsTheView) {
  // A ';' in a name: "f;g" the routine sorts among the paths through "f".
  write();
  test::exec_sql(path_, std::string(kTangledPaths) + R"sql(
INSERT INTO routines (routine_id, name, kind) VALUES (30, 'f;g', 'region'), (31, 'f;', 'region');
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES
  (130, 1, 1, 30, 1, 0, 1, 0, 5000, 5000), (131, 1, 130, 20, 2, 0, 1, 0, 7000, 7000),
  (132, 2, 7, 31, 1, 0, 1, 0, 5000, 5000);
)sql");
  ProfileFile file = ProfileFile::open(path_);
  std::ostringstream out;
  write_folded(file, out);
  EXPECT_EQ(out.str(), folded_from_sql(file));
  EXPECT_NE(out.str().find("\nf\\x3bg;f 7\n"), std::string::npos) << out.str();
}

// 2,000 paths of 0.4 us each: rounded one by one each line was 0 and left out, and the file's
// 0.8 ms was missing from the flame graph (a red-team 1M-path file lost 6.9 % of its time).
TEST_F(ExportTest, FoldedLinesAddUpToThePathsTimeHoweverSmallEach) {
  write();
  std::string sql =
      "INSERT INTO routines (routine_id, name, kind) VALUES (40, 'small', 'region');"
      "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, "
      "subrs, incl_ns, excl_ns) VALUES ";
  for (int i = 0; i < 2000; ++i) {
    sql += fmt::format("{}({}, 1, 1, {}, 1, 0, 1, 0, 400, 400)", i ? ", " : "", 1000 + i, 1000 + i);
  }
  sql += ";";
  for (int i = 0; i < 2000; ++i)
    sql += fmt::format(
        "INSERT INTO routines (routine_id, name, kind) VALUES ({}, 'tiny{}', 'region');", 1000 + i,
        i);
  test::exec_sql(path_, sql);
  ProfileFile file = ProfileFile::open(path_);
  std::ostringstream out;
  write_folded(file, out);
  EXPECT_EQ(out.str(), folded_from_sql(file));
  std::int64_t tiny_us = 0;
  std::istringstream lines(out.str());
  for (std::string l; std::getline(lines, l);)
    if (l.starts_with("tiny")) tiny_us += std::stoll(l.substr(l.rfind(' ') + 1));
  EXPECT_NEAR(static_cast<double>(tiny_us), 800.0, 1.0);
}

TEST(FoldedFrame, NoTwoNamesMakeOneFrame) {
  // The frames a flame-graph tool would merge: "a;b" against "a" -> "b", a name that spells an
  // escape against the character it stands for, "<empty>" against the empty name.
  std::vector<std::string> names = {"a;b",     "a\\x3bb", "<empty>", "",     "a\\b",
                                    "a\\x5cb", "x\ny",    "x\\ny",   "plain"};
  std::set<std::string> frames;
  for (const std::string& n : names) {
    std::string f = folded_frame(n);
    EXPECT_EQ(f.find(';'), std::string::npos) << n;
    EXPECT_EQ(f.find('\n'), std::string::npos) << n;
    EXPECT_TRUE(frames.insert(f).second) << n << " -> " << f;
  }
  EXPECT_EQ(folded_frame("a;b"), "a\\x3bb");
  EXPECT_EQ(folded_frame("a\\x3bb"), "a\\x5cx3bb");
  EXPECT_EQ(folded_frame("plain"), "plain");
}

TEST_F(ExportTest, CsvIsTheCallpathsView) {
  write();
  ProfileFile file = ProfileFile::open(path_);
  std::string csv = render_csv(run_query(file, "SELECT * FROM callpaths ORDER BY path"));
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "path,calls,incl_s,excl_s,subrs,flops,gpu_s,routine_id,path_ids");
  EXPECT_NE(csv.find("\ntrain;cblas_sgemm,6,6,6,0,8067108864,0,3,2/3\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\ntrain;fib;fib,2,0.6,0.6,0,0,0,4,2/4/4\n"), std::string::npos) << csv;
}

// `sonde export --format csv` is what `sonde query` writes of the view, row for row.
std::string csv_from_sql(const ProfileFile& file) {
  return render_csv(run_query(file,
                              "SELECT path, calls, incl_s, excl_s, path_ids FROM callpaths "
                              "ORDER BY path, path_ids"));
}

TEST_F(ExportTest, CsvExportIsTheCallpathsViewRowForRow) {
  // Names the CSV must quote (a comma, a quote, a line break), two routines of one name, a
  // routine the file does not list (99), and then a ';' inside a name (the rows sorted apart).
  write();
  test::exec_sql(path_, std::string(kTangledPaths) + R"sql(
UPDATE routines SET name = 'f, "g"' WHERE routine_id = 23;
UPDATE routines SET name = 'line
break' WHERE routine_id = 21;
)sql");
  {
    ProfileFile file = ProfileFile::open(path_);
    std::ostringstream out;
    write_callpaths_csv(file, out);
    EXPECT_EQ(out.str(), csv_from_sql(file));
    EXPECT_NE(out.str().find("\n\"f, \"\"g\"\"\",1,1e-06,1e-06,23\n"), std::string::npos)
        << out.str();
  }
  test::exec_sql(path_, R"sql(
INSERT INTO routines (routine_id, name, kind) VALUES (30, 'f;g', 'region');
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns) VALUES (130, 1, 1, 30, 1, 0, 1, 0, 5000, 5000),
                                            (131, 1, 130, 20, 2, 0, 1, 0, 7000, 7000);
)sql");
  ProfileFile file = ProfileFile::open(path_);
  std::ostringstream out;
  write_callpaths_csv(file, out);
  EXPECT_EQ(out.str(), csv_from_sql(file));
  EXPECT_NE(out.str().find("\nf;g;f,1,7e-06,7e-06,30/20\n"), std::string::npos) << out.str();
}

std::vector<Json> complete_events(const Json& trace) {
  std::vector<Json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") out.push_back(e);
  return out;
}

// An event's call path from its sf and the stackFrames dictionary (root first, by ';').
std::string path_of(const Json& trace, const Json& event) {
  if (!event.contains("sf")) return "";
  std::string path, id = std::to_string(event["sf"].get<std::int64_t>());
  while (!id.empty()) {
    const Json& frame = trace["stackFrames"].at(id);
    path = frame["name"].get<std::string>() + (path.empty() ? "" : ";") + path;
    id = frame.contains("parent") ? frame["parent"].get<std::string>() : "";
  }
  return path;
}

TEST_F(ExportTest, ChromeWithoutTraceEventsLaysOutTheTree) {
  write();
  ProfileFile file = ProfileFile::open(path_);
  std::ostringstream out;
  write_chrome_trace(file, out);
  Json trace = Json::parse(out.str());
  EXPECT_EQ(trace["otherData"]["sonde_layout"], "aggregated call tree, not a timeline");
  auto events = complete_events(trace);
  ASSERT_EQ(events.size(), 12u);  // one per node
  std::map<std::pair<std::int64_t, std::string>, Json> by_path;
  for (const auto& e : events) by_path[{e["tid"].get<std::int64_t>(), path_of(trace, e)}] = e;
  // Each distinct call path once, shared by the threads: load_data, train, train;cblas_sgemm,
  // train;fib, train;fib;fib, train;noop.
  EXPECT_EQ(trace["stackFrames"].size(), 6u) << trace["stackFrames"].dump();
  const Json& train = by_path.at({1000, "train"});
  EXPECT_EQ(train["pid"], 1000);
  EXPECT_DOUBLE_EQ(train["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(train["dur"].get<double>(), 6e6);
  // Siblings follow each other, largest first, from the parent's start.
  EXPECT_DOUBLE_EQ(by_path.at({1000, "load_data"})["ts"].get<double>(), 6e6);
  EXPECT_DOUBLE_EQ(by_path.at({1000, "train;fib"})["ts"].get<double>(), 4e6);
  EXPECT_DOUBLE_EQ(by_path.at({1000, "train;fib;fib"})["ts"].get<double>(), 4e6);
  EXPECT_DOUBLE_EQ(by_path.at({1000, "train;fib;fib"})["dur"].get<double>(), 6e5);
  int thread_names = 0, process_names = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["name"] == "thread_name") ++thread_names;
    if (e["name"] == "process_name") ++process_names;
  }
  EXPECT_EQ(thread_names, 3);
  EXPECT_EQ(process_names, 1);
}

TEST_F(ExportTest, ChromeWithTraceEventsIsATimeline) {
  write({.trace_events = true});
  ProfileFile file = ProfileFile::open(path_);
  std::ostringstream out;
  write_chrome_trace(file, out);
  Json trace = Json::parse(out.str());
  EXPECT_EQ(trace["otherData"]["sonde_layout"], "timeline (trace events)");
  auto events = complete_events(trace);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["tid"], 1001);  // earliest event: ts 0
  EXPECT_DOUBLE_EQ(events[0]["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(events[0]["dur"].get<double>(), 3e6);
  EXPECT_EQ(events[2]["name"], "cblas_sgemm");
  EXPECT_EQ(path_of(trace, events[2]), "train;cblas_sgemm");
  EXPECT_FALSE(events[2].contains("args"));  // the path is the sf, not repeated per event
  EXPECT_DOUBLE_EQ(events[2]["ts"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(events[2]["dur"].get<double>(), 1e6);
}

Json speedscope(const std::string& path) {
  ProfileFile file = ProfileFile::open(path);
  std::ostringstream out;
  write_speedscope(file, out);
  return Json::parse(out.str());
}

TEST_F(ExportTest, SpeedscopeWithoutTraceEventsSamplesEachCallPathByExclusiveTime) {
  write();
  Json doc = speedscope(path_);
  EXPECT_EQ(doc["$schema"], "https://www.speedscope.app/file-format-schema.json");
  std::vector<std::string> frames;
  for (const auto& f : doc["shared"]["frames"]) frames.push_back(f["name"]);
  ASSERT_EQ(doc["profiles"].size(), 2u);  // the idle thread has nothing to show
  const Json& main = doc["profiles"][0];
  EXPECT_EQ(main["type"], "sampled");
  EXPECT_EQ(main["unit"], "nanoseconds");
  EXPECT_EQ(main["name"], "main (pid 1000, tid 1000)");
  std::map<std::string, std::int64_t> weight;
  for (std::size_t i = 0; i < main["samples"].size(); ++i) {
    std::string path;
    for (const auto& f : main["samples"][i]) path += (path.empty() ? "" : ";") + frames.at(f);
    weight[path] += main["weights"][i].get<std::int64_t>();
  }
  std::map<std::string, std::int64_t> expected{
      {"train", 1000000000},        {"train;cblas_sgemm", 4000000000}, {"train;fib", 400000000},
      {"train;fib;fib", 600000000}, {"load_data", 3000000000},         {"<thread>", 1000000000}};
  EXPECT_EQ(weight, expected);
  EXPECT_EQ(main["endValue"], 10000000000);  // the weights' sum: the thread's time
  EXPECT_EQ(doc["activeProfileIndex"], 0);
}

TEST_F(ExportTest, SpeedscopeWithTraceEventsIsEventedAndBalanced) {
  write({.trace_events = true});
  Json doc = speedscope(path_);
  std::vector<std::string> frames;
  for (const auto& f : doc["shared"]["frames"]) frames.push_back(f["name"]);
  ASSERT_EQ(doc["profiles"].size(), 2u);
  const Json& main = doc["profiles"][0];
  EXPECT_EQ(main["type"], "evented");
  std::vector<std::string> seen;
  for (const auto& e : main["events"])
    seen.push_back(fmt::format("{} {} {}", e["type"].get<std::string>(),
                               frames.at(e["frame"].get<std::size_t>()),
                               e["at"].get<std::int64_t>()));
  // Nanoseconds from the file's first event (the worker's, 500 ns earlier).
  EXPECT_EQ(seen, (std::vector<std::string>{"O train 500", "O cblas_sgemm 1500",
                                            "C cblas_sgemm 1000001500", "C train 6000000500"}));
  EXPECT_EQ(main["startValue"], 500);
  EXPECT_EQ(main["endValue"], 6000000500);
  EXPECT_EQ(doc["activeProfileIndex"], 0);  // the longer of the two
}

TEST_F(ExportTest, SpeedscopeClosesAnOpenFrameThatEndsInsideALaterEvent) {
  // The worker's train (node 8) seen starting 200 ns after its child cblas_sgemm (node 9), as
  // two flushes' tick conversions can make it: the child is closed where train starts, and
  // train keeps its 3 s.
  write({.trace_events = true});
  test::exec_sql(path_,
                 "INSERT INTO trace_events VALUES (2, 9, 1000000000000 + 300, "
                 "1000000000000 + 300 + 1000000000)");
  Json doc = speedscope(path_);
  std::vector<std::string> frames;
  for (const auto& f : doc["shared"]["frames"]) frames.push_back(f["name"]);
  const Json& worker = doc["profiles"][1];
  std::vector<std::string> seen;
  for (const auto& e : worker["events"])
    seen.push_back(fmt::format("{} {} {}", e["type"].get<std::string>(),
                               frames.at(e["frame"].get<std::size_t>()),
                               e["at"].get<std::int64_t>()));
  EXPECT_EQ(seen, (std::vector<std::string>{"O cblas_sgemm 0", "C cblas_sgemm 200", "O train 200",
                                            "C train 3000000200"}));
}

}  // namespace
}  // namespace sonde::analyzers
