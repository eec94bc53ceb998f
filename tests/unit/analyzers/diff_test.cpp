// sonde diff with several runs a side: each figure's median and min-max, the noise rule's word
// on it, and the warnings where the runs measured different windows, commands or thread counts.
#include "metrics/diff.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "advice_fixture.hpp"
#include "metrics/noise.hpp"
#include "render/diff.hpp"

using namespace sonde::analyzers;

TEST(NoiseRule, OverlapIsWithinAndApartNeedsRunsAndAnEffect) {
  EXPECT_EQ(judge_noise({1.0, 1.2, 1.1}, {1.15, 1.3, 1.25}), Noise::kWithin);
  EXPECT_EQ(judge_noise({1.0, 1.1}, {1.1, 1.2}), Noise::kWithin);  // touching ranges
  EXPECT_EQ(judge_noise({1.0, 1.01, 1.02}, {0.5, 0.51, 0.52}), Noise::kBeyond);
  // Apart, but two runs a side fall so by chance 1 time in 6.
  EXPECT_EQ(judge_noise({1.0, 1.01}, {0.5, 0.51}), Noise::kTooFewRuns);
  // Apart by under 3 %, or by no more than the figure's floor.
  EXPECT_EQ(judge_noise({1.0, 1.001, 1.002}, {1.01, 1.011, 1.012}), Noise::kSmall);
  EXPECT_EQ(judge_noise({1.0, 1.001, 1.002}, {1.5, 1.51, 1.52}, 1.0), Noise::kTooSmall);
  EXPECT_EQ(noise_text(Noise::kTooSmall), "under the floor");
  EXPECT_EQ(judge_noise({}, {1.0}), Noise::kUnknown);
  EXPECT_EQ(noise_text(Noise::kSmall), "under 3 %");
  Spread s = spread_of({3, 1, 2, 10});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 10);
  EXPECT_EQ(s.runs, 4u);
}

namespace {

class DiffRunsTest : public sonde::test::AdviceFixtureTest {
 protected:
  // A copy of the fixture with update_core_cpu at `update_s`, the sgemm at `gemm_s` (its shapes'
  // times scaled with it) and the run `wall_s` long.
  std::string run(const std::string& name, double update_s, double gemm_s, double wall_s,
                  const std::string& more_sql = "") {
    std::string p = (dir_.path / ("run-" + name + ".db")).string();  // a.db is the fixture's
    sonde::test::write_advice_fixture(p);
    auto ns = [](double s) { return std::to_string(static_cast<long long>(s * 1e9)); };
    sonde::test::exec_sql(p, "UPDATE nodes SET incl_ns = " + ns(update_s) +
                                 ", excl_ns = " + ns(update_s) +
                                 " WHERE node_id = 6; UPDATE nodes SET incl_ns = " + ns(gemm_s) +
                                 ", excl_ns = " + ns(gemm_s) +
                                 " WHERE node_id = 4; UPDATE shapes SET time_ns = "
                                 "CAST(time_ns * " +
                                 std::to_string(gemm_s / 1.5) +
                                 " AS INTEGER); UPDATE processes SET ended_ns = "
                                 "started_ns + " +
                                 ns(wall_s) + ";" + more_sql);
    files_.push_back(ProfileFile::open(p));
    return p;
  }
  std::vector<const ProfileFile*> side(std::size_t from, std::size_t n) {
    std::vector<const ProfileFile*> out;
    for (std::size_t i = from; i < from + n; ++i) out.push_back(&files_[i]);
    return out;
  }
  // SQL adding a Python function `id` (a routine and its node, 1 ms under update) to a run.
  static std::string python_routine(int id, const std::string& name, const std::string& file,
                                    int line) {
    return fmt::format(
        "INSERT INTO routines (routine_id, name, kind, file, line) VALUES "
        "  ({0}, '{1}', 'python', '{2}', {3});"
        "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, "
        "  subrs, incl_ns, excl_ns, flops, bytes) VALUES ({0}, 1, 5, {0}, 3, 0, 1, 0, 1000000, "
        "  1000000, 0, 0);",
        id, name, file, line);
  }
  static const DiffRow& row(const std::vector<DiffRow>& rows, const std::string& name) {
    for (const DiffRow& r : rows)
      if (r.name == name) return r;
    throw std::runtime_error("no row " + name);
  }
  void SetUp() override {
    AdviceFixtureTest::SetUp();
    files_.reserve(16);
  }
  std::vector<ProfileFile> files_;
};

}  // namespace

TEST_F(DiffRunsTest, SeveralRunsASideGiveMedianSpreadAndNoise) {
  // The update halves beyond the noise; the sgemm's runs overlap; the wall time too.
  run("a1", 6.8, 1.5, 10.0);
  run("a2", 7.0, 1.6, 10.4);
  run("a3", 6.9, 1.4, 9.8);
  run("b1", 3.4, 1.45, 10.1);
  run("b2", 3.5, 1.7, 9.7);
  run("b3", 3.3, 1.55, 10.2);
  ProfileDiff d = compute_diff(side(0, 3), side(3, 3));
  EXPECT_EQ(d.runs_before, 3u);
  EXPECT_EQ(d.total_before_ns, 10'000'000'000);
  EXPECT_DOUBLE_EQ(d.total.before.min, 9.8e9);
  EXPECT_DOUBLE_EQ(d.total.after.max, 10.2e9);
  EXPECT_EQ(d.total.noise, Noise::kWithin);
  const DiffRow& adam = row(d.phases, "train.py:30(update_core_cpu)");
  EXPECT_EQ(*adam.before_ns, 6'900'000'000);
  EXPECT_EQ(*adam.after_ns, 3'400'000'000);
  EXPECT_DOUBLE_EQ(*adam.speedup, 6.9 / 3.4);
  EXPECT_EQ(adam.noise, Noise::kBeyond);
  EXPECT_EQ(adam.before.runs, 3u);
  const DiffRow& gemm = row(d.routines, "cblas_sgemm");
  EXPECT_EQ(*gemm.before_ns, 1'500'000'000);
  EXPECT_DOUBLE_EQ(gemm.after.min, 1.45e9);
  EXPECT_EQ(gemm.noise, Noise::kWithin);
  ASSERT_EQ(d.shapes.size(), 2u);
  for (const ShapeDiffRow& s : d.shapes) {
    EXPECT_EQ(s.noise, Noise::kWithin) << s.m;
    EXPECT_EQ(s.before.runs, 3u);
  }
  EXPECT_TRUE(d.warnings.empty());

  std::string text = render_diff_text(d);
  EXPECT_NE(text.find("3 runs before, 3 runs after"), std::string::npos) << text;
  EXPECT_NE(text.find("total wall time: 10.000 s (9.800-10.400) -> 10.100 s (9.700-10.200), "
                      "speedup 0.99x: within noise"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("beyond noise"), std::string::npos) << text;
  Json j = render_diff_json({"a1", "a2", "a3"}, {"b1", "b2", "b3"}, d);
  EXPECT_EQ(j["before_files"].size(), 3u);
  EXPECT_EQ(j["total_noise"], "within noise");
  EXPECT_DOUBLE_EQ(j["total_before_min_s"].get<double>(), 9.8);
  bool found = false;
  for (const auto& r : j["phases"])
    if (r["name"] == "train.py:30(update_core_cpu)") {
      found = true;
      EXPECT_EQ(r["noise"], "beyond noise");
      EXPECT_DOUBLE_EQ(r["before_min_s"].get<double>(), 6.8);
      EXPECT_DOUBLE_EQ(r["after_max_s"].get<double>(), 3.5);
      EXPECT_EQ(r["runs_after"], 3);
    }
  EXPECT_TRUE(found);
  // The CSV holds the same figures as the JSON's rows.
  Table csv = diff_csv_table(d);
  std::vector<std::string> keys;
  for (const Column& c : csv.columns) keys.push_back(c.key);
  std::vector<std::string> json_keys = {"section"};
  for (const auto& [k, v] : j["phases"][0].items()) json_keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  std::sort(json_keys.begin(), json_keys.end());
  EXPECT_EQ(keys, json_keys);
}

// The daily loop: profile, edit the file, profile again. Lines added above a def move it;
// every function below an edit read "only before" and "only after" (the red team's
// normalize_rows, 12x faster, among them), and one line could name two functions.
TEST_F(DiffRunsTest, AFunctionWhoseLineMovedIsTheSameFunction) {
  // One GEMM shape is called from update_core_cpu (numpy's `@` in a function of the program's).
  run("before", 6.8, 1.5, 10.0,
      "UPDATE shapes SET call_site = 'train.py:30(update_core_cpu)' WHERE m = 100;");
  // After: update_core_cpu 4 lines down, and a new function at its old line.
  run("after", 3.4, 1.5, 10.0,
      "UPDATE shapes SET call_site = 'train.py:34(update_core_cpu)' WHERE m = 100;"
      "UPDATE routines SET name = 'train.py:34(update_core_cpu)', line = 34 WHERE routine_id = 6;"
      "INSERT INTO routines (routine_id, name, kind, file, line) VALUES "
      "  (7, 'train.py:30(helper)', 'python', '/nonexistent/train.py', 30);"
      "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, "
      "  subrs, incl_ns, excl_ns, flops, bytes) VALUES (7, 1, 5, 7, 3, 0, 1, 0, 1000, 1000, 0, "
      "0);");
  ProfileDiff d = compute_diff(side(0, 1), side(1, 1));
  const DiffRow& moved = row(d.phases, "train.py:34(update_core_cpu)");
  EXPECT_EQ(moved.status, "both");
  EXPECT_EQ(moved.before_name, "train.py:30(update_core_cpu)");
  EXPECT_EQ(moved.line, 34);
  EXPECT_DOUBLE_EQ(*moved.speedup, 2.0);
  EXPECT_EQ(row(d.phases, "train.py:30(helper)").status, "only after");
  for (const DiffRow& r : d.phases) EXPECT_NE(r.name, "train.py:30(update_core_cpu)");
  // Its GEMM shape is one row with a ratio, not "only before" and "only after" (until
  // 2026-12-07, a red-team diff's every shape of the program's own code).
  ASSERT_EQ(d.shapes.size(), 2u);
  auto shape = std::find_if(d.shapes.begin(), d.shapes.end(),
                            [](const ShapeDiffRow& r) { return r.m == 100; });
  EXPECT_EQ(shape->call_site, "train.py:34(update_core_cpu)");
  EXPECT_EQ(shape->before_call_site, "train.py:30(update_core_cpu)");
  EXPECT_EQ(shape->status, "both");
  EXPECT_TRUE(shape->ratio.has_value());
  std::string text = render_diff_text(d);
  EXPECT_NE(text.find("train.py:34(update_core_cpu) (before: train.py:30(update_core_cpu))"),
            std::string::npos)
      << text;
  Json j =
      render_diff_json(std::vector<std::string>{"before"}, std::vector<std::string>{"after"}, d);
  bool found = false;
  for (const auto& r : j["phases"])
    if (r["name"] == "train.py:34(update_core_cpu)") {
      found = true;
      EXPECT_EQ(r["before_name"], "train.py:30(update_core_cpu)");
    }
  EXPECT_TRUE(found);
  found = false;
  for (const auto& r : j["shapes"])
    if (r["call_site"] == "train.py:34(update_core_cpu)") {
      found = true;
      EXPECT_EQ(r["before_call_site"], "train.py:30(update_core_cpu)");
    }
  EXPECT_TRUE(found);
}

// Functions of one name that are two functions: a method of another class in an unchanged
// file, or in an installed package's. A red-team diff of a loader without workers against one
// with them paired dataloader.py:669(_next_data) (the single-process iterator's) with
// dataloader.py:1286(_next_data) (the multi-process one's) as one, "both", 1.01x.
TEST_F(DiffRunsTest, SameNamedFunctionsOfOtherClassesAreNotOneMoved) {
  const std::string loader = "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py";
  // Before: Attention.forward at 10; after, FastAttention.forward at 40 in its place; Block's
  // forward at 60 ran in both, at the same line: the file did not move.
  run("before", 6.8, 1.5, 10.0,
      python_routine(7, "dataloader.py:669(_next_data)", loader, 669) +
          python_routine(8, "model.py:10(forward)", "/w/model.py", 10) +
          python_routine(9, "model.py:60(forward)", "/w/model.py", 60));
  run("after", 6.8, 1.5, 10.0,
      python_routine(7, "dataloader.py:1286(_next_data)", loader, 1286) +
          python_routine(8, "model.py:40(forward)", "/w/model.py", 40) +
          python_routine(9, "model.py:60(forward)", "/w/model.py", 60));
  ProfileDiff d = compute_diff(side(0, 1), side(1, 1));
  EXPECT_EQ(row(d.phases, "dataloader.py:669(_next_data)").status, "only before");
  EXPECT_EQ(row(d.phases, "dataloader.py:1286(_next_data)").status, "only after");
  EXPECT_EQ(row(d.phases, "model.py:10(forward)").status, "only before");
  EXPECT_EQ(row(d.phases, "model.py:40(forward)").status, "only after");
  EXPECT_EQ(row(d.phases, "model.py:60(forward)").status, "both");
  for (const DiffRow& r : d.phases) EXPECT_EQ(r.before_name, "") << r.name;
}

// A function below the pair's line in another file of that base name (an installed package's
// utils.py) says nothing of this one: the pair stands.
TEST_F(DiffRunsTest, AnotherFilesFunctionOfTheSameBaseNameLeavesAMovedPair) {
  const std::string theirs = "/usr/lib/python3/dist-packages/pkg/utils.py";
  run("before", 6.8, 1.5, 10.0,
      python_routine(7, "utils.py:10(clean)", "/w/utils.py", 10) +
          python_routine(8, "utils.py:50(other)", theirs, 50));
  run("after", 6.8, 1.5, 10.0,
      python_routine(7, "utils.py:14(clean)", "/w/utils.py", 14) +
          python_routine(8, "utils.py:50(other)", theirs, 50));
  ProfileDiff d = compute_diff(side(0, 1), side(1, 1));
  const DiffRow& moved = row(d.phases, "utils.py:14(clean)");
  EXPECT_EQ(moved.status, "both");
  EXPECT_EQ(moved.before_name, "utils.py:10(clean)");
}

// The daily loop under python3 -m sonde re-profiles with --lines on the hot function, or
// launches with sonde run --python: the program is the same, and diff warned "the commands
// differ ...: the runs may do different work" for each (a red-team find). What differs in the
// first is how it was measured, said so; the output, the flush interval and the launch change
// neither.
TEST_F(DiffRunsTest, SondesOwnOptionsAreNoOtherCommand) {
  auto command = [](const std::string& c) { return "UPDATE runs SET command = '" + c + "';"; };
  run("a", 6.8, 1.5, 10.0, command("/usr/bin/python3 -m sonde -o a.db train.py 100"));
  run("b", 6.8, 1.5, 10.0,
      command("/usr/bin/python3 -m sonde --force --output=b.db --flush-interval 5 -- train.py "
              "100"));
  run("c", 6.8, 1.5, 10.0, command("/usr/bin/python3 train.py 100"));
  run("d", 6.8, 1.5, 10.0,
      command("/usr/bin/python3 -m sonde -o d.db --lines step --trace train.py 100"));
  run("e", 6.8, 1.5, 10.0, command("/usr/bin/python3 -m sonde -o e.db train.py 200"));
  for (std::size_t other : {1u, 2u})
    EXPECT_TRUE(compute_diff(side(0, 1), side(other, 1)).warnings.empty()) << other;
  ProfileDiff d = compute_diff(side(0, 1), side(3, 1));
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0],
            "the runs were measured differently (before: none; after: --lines step --trace): "
            "Python frames, timed lines, traced calls, samples and recorded shapes add their "
            "cost to the times, and --paused records only what the program's sonde.start() and "
            "stop() enclose");
  // sonde run records the program's command alone: what it was given is run_info's (a red
  // team's traced, sampled run against a plain one read no warning), and --paused is one.
  run("f", 6.8, 1.5, 10.0,
      command("/usr/bin/python3 train.py 100") +
          "INSERT INTO run_info VALUES (1, 1, 'env.SONDE_TRACE', '1'),"
          " (1, 1, 'env.SONDE_SAMPLE_HZ', '997'), (1, 1, 'python.hook', 'eval_frame');");
  d = compute_diff(side(2, 1), side(5, 1));
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_NE(d.warnings[0].find("(before: none; after: --python --sample 997 --trace)"),
            std::string::npos)
      << d.warnings[0];
  run("g", 6.8, 1.5, 10.0, command("/usr/bin/python3 -m sonde -o g.db --paused train.py 100"));
  d = compute_diff(side(0, 1), side(6, 1));
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_NE(d.warnings[0].find("(before: none; after: --paused)"), std::string::npos)
      << d.warnings[0];
  d = compute_diff(side(0, 1), side(4, 1));
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0],
            "the commands differ (before: /usr/bin/python3 train.py 100; after: /usr/bin/python3 "
            "train.py 200): the runs may do different work");
}

// A run killed before its first flush holds no process: a red team's diff against one said only
// "0.012 s -> 0.000 s" and that the commands differed.
TEST_F(DiffRunsTest, AFileNoProcessWroteToIsSaid) {
  run("a", 6.8, 1.5, 10.0);
  std::string empty =
      run("b", 6.8, 1.5, 10.0, "DELETE FROM nodes; DELETE FROM threads; DELETE FROM processes;");
  ProfileDiff d = compute_diff(side(0, 1), side(1, 1));
  ASSERT_FALSE(d.warnings.empty());
  EXPECT_EQ(d.warnings[0], empty +
                               " holds no process: no process of its run wrote to it (killed "
                               "before its first flush, or still starting), and its figures are "
                               "all 0");
  EXPECT_TRUE(compute_diff(side(0, 1), side(0, 1)).warnings.empty());
}

// Every routine of a run in a quieter moment is faster at once: one ordering of the runs set
// each tiny row apart. A row that moved by the floor or less (1 ms, or 0.1 % of the busy
// threads' time) is "under the floor", however apart its runs; a large move is still beyond.
TEST_F(DiffRunsTest, RowsApartByLessThanTheFloorAreUnderIt) {
  for (double s : {0.1000, 0.1001, 0.1002}) run("b" + std::to_string(s), s, 1.5, 10.0);
  for (double s : {0.0950, 0.0951, 0.0952}) run("a" + std::to_string(s), s, 1.0, 10.0);
  ProfileDiff d = compute_diff(side(0, 3), side(3, 3));
  // The fixture's busy threads' time: the floor is 0.1 % of it.
  EXPECT_EQ(d.row_floor_ns,
            std::llround(0.001 * double(std::max(d.threads_before_ns, d.threads_after_ns))));
  EXPECT_GT(d.row_floor_ns, 5'000'000);  // above the update's 5 ms
  const DiffRow& update = row(d.phases, "train.py:30(update_core_cpu)");
  EXPECT_NEAR(*update.speedup, 1.053, 0.001);
  EXPECT_EQ(update.noise, Noise::kTooSmall);  // apart, 5 % faster, 5 ms: under the floor
  bool gemm = false;
  for (const DiffRow& r : d.routines)
    if (r.kind == "blas") {
      gemm = true;
      EXPECT_EQ(r.noise, Noise::kBeyond) << r.name;  // 1.5 -> 1.0 s
    }
  EXPECT_TRUE(gemm);
  Json j = render_diff_json({"b1", "b2", "b3"}, {"a1", "a2", "a3"}, d);
  EXPECT_DOUBLE_EQ(j["noise_row_floor_s"].get<double>(), d.row_floor_ns / 1e9);
  EXPECT_NE(render_diff_text(d).find("is under the floor"), std::string::npos);
}

TEST_F(DiffRunsTest, OneRunASideSaysTheNoiseIsUnknown) {
  run("a", 6.8, 1.5, 10.0);
  run("b", 3.4, 1.5, 8.0);
  ProfileDiff d = compute_diff(side(0, 1), side(1, 1));
  EXPECT_EQ(row(d.phases, "train.py:30(update_core_cpu)").noise, Noise::kUnknown);
  std::string text = render_diff_text(d);
  EXPECT_NE(text.find("total: 10.000 s -> 8.000 s wall time, speedup 1.25x"), std::string::npos);
  EXPECT_NE(text.find("noise: unknown with one run a side"), std::string::npos) << text;
  EXPECT_NE(text.find("sonde diff a1.db a2.db a3.db -- b1.db b2.db b3.db"), std::string::npos);
}

TEST_F(DiffRunsTest, DifferentWindowsCommandsAndThreadsAreSaid) {
  run("a", 6.8, 1.5, 10.0);
  run("b", 6.8, 1.5, 3.5,
      "INSERT INTO run_info VALUES (1, 1, 'env.SONDE_DELAY', '25');"
      "UPDATE runs SET command = 'python3 train.py --epochs 2';"
      "UPDATE run_info SET value = '2' WHERE key = 'blas.threads';");
  run("c", 6.8, 1.5, 10.0, "INSERT INTO run_info VALUES (1, 1, 'env.SONDE_STEPS', '10');");
  ProfileDiff d = compute_diff(side(0, 1), side(1, 1));
  ASSERT_EQ(d.warnings.size(), 3u);
  EXPECT_EQ(d.warnings[0],
            "the collection windows differ (before: the whole run; after: --delay "
            "25): the times are of different parts of the runs, and no speedup "
            "between them means anything");
  EXPECT_EQ(d.warnings[1],
            "the commands differ (before: python3 train.py; after: python3 "
            "train.py --epochs 2): the runs may do different work");
  EXPECT_EQ(d.warnings[2],
            "the thread counts differ (before: BLAS 1; after: BLAS 2): a speedup "
            "includes theirs");
  EXPECT_EQ(render_diff_text(d).rfind("warning: the collection windows differ", 0), 0u);
  // Runs of one side that differ among themselves are said too.
  d = compute_diff(side(0, 1), std::vector<const ProfileFile*>{&files_[0], &files_[2]});
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_NE(d.warnings[0].find("after: the whole run | --steps 10 (region 'step')"),
            std::string::npos)
      << d.warnings[0];
  EXPECT_TRUE(compute_diff(side(0, 1), side(0, 1)).warnings.empty());
}

TEST_F(DiffRunsTest, CliTakesSeveralRunsASide) {
  std::vector<std::string> p = {run("a1", 6.8, 1.5, 10.0), run("a2", 7.0, 1.6, 10.4),
                                run("b1", 3.4, 1.45, 10.1), run("b2", 3.5, 1.7, 9.7)};
  auto r = sonde::test::run_sonde("diff '" + p[0] + "' '" + p[1] + "' -- '" + p[2] + "' '" + p[3] +
                                  "' --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["runs_before"], 2);
  EXPECT_EQ(j["runs_after"], 2);
  EXPECT_EQ(j["after_files"][1], p[3]);
  r = sonde::test::run_sonde("diff '" + p[0] + "' '" + p[1] + "' '" + p[2] + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give two profiles"), std::string::npos) << r.err;
  r = sonde::test::run_sonde("diff '" + p[0] + "' --");
  EXPECT_EQ(r.exit_code, 2);
  // One run twice on a side would weigh double: refused, as merge refuses it. The same file on
  // both sides is said. A run's min, median and max are one figure (the min read above the
  // median, converted another way).
  r = sonde::test::run_sonde("diff '" + p[0] + "' '" + p[1] + "' '" + p[0] + "' -- '" + p[2] + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is given twice"), std::string::npos) << r.err;
  std::string odd = run("odd", 0.94803969, 1.5, 10.0);  // x 1e-9 read 0.9480396900000001
  r = sonde::test::run_sonde("diff '" + odd + "' '" + odd + "' --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["warnings"][0], "a file is on both sides: its run is compared with itself");
  for (const auto& row : j["routines"])
    if (!row["before_s"].is_null()) {
      EXPECT_EQ(row["before_min_s"], row["before_s"]) << row["name"];
      EXPECT_EQ(row["before_max_s"], row["before_s"]) << row["name"];
    }
}
