// sonde tune's own judgement, apart from the candidates it informs (advice_test.cpp): which
// numbers of its output are compared, and when a difference in time is a verdict.
#include "programs/tune.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "advice/tune_results.hpp"

using sonde::analyzers::compare_outputs;
using sonde::analyzers::output_summary;
using sonde::analyzers::OutputComparison;

// sonde tune compares the program's results, not its own timings: `python3 -m timeit` prints
// only a timing, and a training loop prints its epoch time beside its loss.
TEST(TuneOutputs, TheProgramsOwnTimingsAreNoResult) {
  OutputComparison c = compare_outputs("20 loops, best of 5: 310 usec per loop\n",
                                       "20 loops, best of 5: 305 usec per loop\n");
  EXPECT_FALSE(c.differs());
  EXPECT_EQ(c.compared, 2u);
  EXPECT_EQ(c.left_out, 1u);
  c = compare_outputs("epoch 1 loss 0.4100 time 2.13s\nelapsed: 4.2\n",
                      "epoch 1 loss 0.4100 time 1.98s\nelapsed: 3.9\n");
  EXPECT_TRUE(c.exact()) << c.first;
  EXPECT_EQ(c.left_out, 2u);
  // The loss beside a timing still counts.
  c = compare_outputs("epoch 1 loss 0.4100 took 2.1 s\n", "epoch 1 loss 0.4200 took 1.9 s\n");
  EXPECT_TRUE(c.differs());
  EXPECT_EQ(c.beyond, 1u);
  EXPECT_NE(c.first.find("loss 0.4100"), std::string::npos) << c.first;
  EXPECT_NEAR(c.largest_rel, 0.0238, 1e-4);
  // Samples or steps are counts, not seconds.
  EXPECT_TRUE(compare_outputs("64 samples\n", "65 samples\n").differs());
  EXPECT_TRUE(compare_outputs("3 steps\n", "4 steps\n").differs());
}

// Every number, wherever it stands: a bare table under a header (the 0.75181 against
// 0.42122 under FTZ read "same": only the header had a word tune knew), numbers inside text,
// scientific notation.
TEST(TuneOutputs, EveryNumberIsCompared) {
  OutputComparison c = compare_outputs("epoch  loss      val_loss\n1      0.75181   0.66530\n",
                                       "epoch  loss      val_loss\n1      0.42122   0.50000\n");
  EXPECT_EQ(c.compared, 3u);
  EXPECT_EQ(c.beyond, 2u);
  EXPECT_EQ(output_summary(c), "differs (2 of 3 numbers beyond rel 1e-3, abs 1e-12)");
  c = compare_outputs("norm 3.2000e-04 at step 7\n", "norm 3.2001e-04 at step 7\n");
  EXPECT_FALSE(c.differs());
  EXPECT_FALSE(c.exact());
  EXPECT_EQ(output_summary(c), "same within rel 1e-3, abs 1e-12 (2 numbers compared)");
  // Nothing to hold the runs to is no "same": a red team's results went to stderr (logging).
  EXPECT_EQ(output_summary(compare_outputs("done\n", "done\n")),
            "nothing compared (no number on stdout; stderr, where logging writes, is not "
            "compared)");
  EXPECT_TRUE(compare_outputs("norm 3.2e-04\n", "norm 4.1e-04\n").differs());
  EXPECT_TRUE(compare_outputs("w=-1.5E+03\n", "w=1.5E+03\n").differs());
  // Zero against what cancels to nearly zero: within abs.
  EXPECT_FALSE(compare_outputs("mean 0.0\n", "mean -1.3e-17\n").differs());
  // NaN is a result: against a number it differs, against NaN it does not.
  EXPECT_TRUE(compare_outputs("loss 0.5\n", "loss nan\n").differs());
  EXPECT_TRUE(compare_outputs("loss nan\n", "loss nan\n").exact());
  // Words and lines are part of the output too.
  EXPECT_EQ(compare_outputs("pred cat\n", "pred dog\n").word_lines, 1u);
  c = compare_outputs("a 1\n", "a 1\nb 2\n");
  EXPECT_TRUE(c.differs());
  EXPECT_EQ(output_summary(c), "differs (2 lines against 1)");
  // Digits inside names are no numbers; versions are words.
  c = compare_outputs("conv2d fc1 v1.2.3\n", "conv2d fc1 v1.2.3\n");
  EXPECT_EQ(c.compared, 0u);
}

// What varies from run to run by nature is left out, and counted.
TEST(TuneOutputs, TimingsDatesIdsAndAddressesAreLeftOut) {
  auto left_out = [](const std::string& a, const std::string& b) {
    OutputComparison c = compare_outputs(a, b);
    EXPECT_FALSE(c.differs()) << a << " / " << b << ": " << c.first;
    return c.left_out;
  };
  EXPECT_EQ(left_out("100%|####| 10/10 [00:01<00:00, 5.23it/s]\n",
                     "100%|####| 10/10 [00:02<00:00, 4.10it/s]\n"),
            3u);
  EXPECT_EQ(
      left_out("2026-12-02 14:01:58,123 INFO epoch 1\n", "2026-12-03T09:11:02.5Z INFO epoch 1\n"),
      1u);
  EXPECT_EQ(left_out("worker pid 4242 ready\n", "worker pid 4317 ready\n"), 1u);
  EXPECT_EQ(left_out("<Net object at 0x7f3a2b1c>\n", "<Net object at 0x7f99aa00>\n"), 1u);
  EXPECT_EQ(left_out("{\"elapsed_time\": 6.45, \"loss\": 0.5}\n",
                     "{\"elapsed_time\": 7.01, \"loss\": 0.5}\n"),
            1u);
  EXPECT_EQ(left_out("1200 samples/sec, 340 MiB, 12.5 GB/s, 3 ms/step\n",
                     "1100 samples/sec, 351 MiB, 11.0 GB/s, 4 ms/step\n"),
            4u);
  EXPECT_EQ(left_out("stepTime=0.31 epochDuration=12\n", "stepTime=0.29 epochDuration=13\n"), 2u);
  // A timestep is no time.
  EXPECT_TRUE(compare_outputs("timestep 100\n", "timestep 200\n").differs());
}

// Chainer's PrintReport: the elapsed time is a column of bare numbers, known by its header,
// with progress-bar lines between the rows.
TEST(TuneOutputs, ATablesTimingColumnIsKnownByItsHeader) {
  std::string head = "epoch       main/loss   elapsed_time\n";
  OutputComparison c =
      compare_outputs(head +
                          "1           0.191976    6.45497     \n\x1b[J     total [#....] 10.00%\n"
                          "2           0.0744141   12.3921     \n",
                      head +
                          "1           0.191976    6.91003     \n\x1b[J     total [#....] 10.00%\n"
                          "2           0.0744141   13.0001     \n");
  EXPECT_TRUE(c.exact()) << c.first;
  EXPECT_EQ(c.compared, 5u);
  EXPECT_EQ(c.left_out, 2u);
  // An index column before the named ones (a pandas frame).
  c = compare_outputs("   loss  time\n0  0.50  1.2\n", "   loss  time\n0  0.50  1.9\n");
  EXPECT_TRUE(c.exact()) << c.first;
  // The loss column still counts.
  EXPECT_EQ(compare_outputs(head + "1  0.191976  6.4\n", head + "1  0.291976  6.4\n").beyond, 1u);
}

// A verdict only where "every run beat every run" would be a 1-in-20 chance without an effect.
// Numbers that vary among the original's own runs: a bare timing ("fwd 0.003") is left out; a
// result named so (val_loss) is held to the band its runs span, so a stage moving it beyond that
// band still differs (FTZ dropping a subnormal term from a noisy loss read "same" once every
// varying number was left out: a red-team find).
TEST(TuneOutputs, VaryingTimingsAreLeftOutAndVaryingResultsHeldToTheirBand) {
  std::vector<std::string> originals = {"loss 1.016 fwd 0.003\n", "loss 1.011 fwd 0.004\n",
                                        "loss 1.016 fwd 0.005\n"};
  sonde::analyzers::VaryingPlaces v = sonde::analyzers::varying_places(originals);
  EXPECT_EQ(v.left_out.size(), 1u);  // fwd
  ASSERT_EQ(v.bands.size(), 1u);     // loss, 1.011 to 1.016
  EXPECT_DOUBLE_EQ(v.bands.begin()->second.first, 1.011);
  EXPECT_DOUBLE_EQ(v.bands.begin()->second.second, 1.016);
  OutputComparison c = compare_outputs(originals[0], "loss 1.013 fwd 0.009\n", {}, v);
  EXPECT_FALSE(c.differs());  // inside the band; the timing left out
  EXPECT_EQ(c.left_out, 1u);
  c = compare_outputs(originals[0], "loss 1.001 fwd 0.003\n", {}, v);
  EXPECT_TRUE(c.differs());  // 0.010 below the band's lowest
  EXPECT_EQ(c.beyond, 1u);
}

TEST(TuneVerdict, NoVerdictFromTooFewRuns) {
  using sonde::analyzers::tune_too_few_runs;
  using sonde::analyzers::tune_verdict;
  using sonde::analyzers::Verdict;
  EXPECT_TRUE(tune_too_few_runs(1, 1));   // 1 in 2
  EXPECT_TRUE(tune_too_few_runs(2, 2));   // 1 in 6
  EXPECT_TRUE(tune_too_few_runs(4, 2));   // 1 in 15
  EXPECT_FALSE(tune_too_few_runs(3, 3));  // 1 in 20
  EXPECT_FALSE(tune_too_few_runs(5, 2));  // 1 in 21
  EXPECT_EQ(tune_verdict({1.0, 1.01, 1.02}, {0.5, 0.51, 0.52}), Verdict::kFaster);
  EXPECT_EQ(tune_verdict({0.5, 0.51, 0.52}, {1.0, 1.01, 1.02}), Verdict::kSlower);
  // Twice as fast, twice each, and once each: the order could be chance.
  EXPECT_EQ(tune_verdict({1.0, 1.01}, {0.5, 0.51}), Verdict::kNone);
  EXPECT_EQ(tune_verdict({1.0}, {0.5}), Verdict::kNone);
}

// The report's sentence and `sonde candidates`' measured verdict are one function's: an
// estimate under a millisecond for a stage that was not faster said "refutes it" in the report
// and "confirmed" in candidates (a red-team run of ftz on a numpy MLP).
TEST(TuneVerdict, TheReportSaysWhatCandidatesSay) {
  using namespace sonde::analyzers;
  EXPECT_STREQ(measured_verdict(false, 0.0008, 0, 0.02, false), "confirmed");
  EXPECT_STREQ(measured_verdict(false, 0.5, 0, 0.02, false), "refuted");
  // Under what tune can tell from the original: neither (a red-team tune said "refutes" of
  // 0.003 s, its own floor 0.020 s and the original's runs 0.33 s apart).
  EXPECT_STREQ(measured_verdict(false, 0.003, 0, 0.02, false), "unmeasured");
  // But a stage slower beyond that floor refutes any gain (0.30x, a red-team blas-threads).
  EXPECT_STREQ(measured_verdict(false, 0.003, -4.102, 0.02, false), "refuted");
  // Too few runs to tell: nothing refuted, however the runs fell (a red-team stage 1.60x
  // faster in both its runs read "refutes").
  EXPECT_STREQ(measured_verdict(false, 1.1, 0, 0.02, true), "unmeasured");
  EXPECT_STREQ(measured_verdict(true, 0.0, 0.2, 0.02, false), "underestimated");
  EXPECT_STREQ(measured_verdict(true, 1.0, 0.2, 0.02, false), "overestimated");
  EXPECT_STREQ(measured_verdict(true, 0.3, 0.2, 0.02, false), "confirmed");
  TuneResult r;
  r.command = {"python3", "train.py"};
  r.repeat = 1;
  r.stages.resize(5);
  r.stages[0].name = "original";
  r.stages[0].runs.resize(3);  // three runs a side: tune can tell
  const std::tuple<const char*, double, Verdict, double> stages[] = {
      {"ftz", 0.0008, Verdict::kNone, 0},
      {"blas-threads", 0.5, Verdict::kNone, 0},
      {"framework-threads", 0.0, Verdict::kFaster, 0.2},
      {"pinning", 0.003, Verdict::kNone, 0}};
  for (std::size_t i = 0; i < 4; ++i) {
    TuneStage& s = r.stages[i + 1];
    auto [name, est, verdict, gain] = stages[i];
    s.name = name;
    s.rule = name;
    s.estimated_gain_s = est;
    s.verdict = verdict;
    s.smallest_gain_s = 0.02;
    s.runs.resize(3);
    if (verdict == Verdict::kFaster) s.measured_gain_s = gain;
  }
  std::string text = render_tune_text(r);
  EXPECT_EQ(text.find("ftz: the ftz rule"), std::string::npos) << text;
  EXPECT_NE(text.find("blas-threads: the blas-threads rule estimated 0.500 s; the measurement "
                      "refutes it"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pinning: the pinning rule estimated 0.003 s, under the 0.020 s a stage "
                      "must gain here to be told from the original: neither confirmed nor "
                      "refuted"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("framework-threads: the framework-threads rule estimated 0.000 s, 0.200 s "
                      "measured: the measurement finds it underestimated"),
            std::string::npos)
      << text;
  // Two runs a side (1 in 6 by chance): too few to refute (a red-team stage faster in both of
  // its runs, 1.60x, read "the measurement refutes it").
  r.stages[0].runs.resize(2);
  r.stages[2].runs.resize(2);
  text = render_tune_text(r);
  EXPECT_NE(text.find("blas-threads: the blas-threads rule estimated 0.500 s; too few runs to "
                      "tell (--repeat 3 or more): neither confirmed nor refuted"),
            std::string::npos)
      << text;
}

// `sonde candidates --tune DIR` for a profile of another program: said (a red-team run applied
// a tune of gemm_spin.py to a profile of gemm_np.py, its "refuted" unsaid).
TEST(TuneResultsCommand, AnotherProgramIsSaid) {
  using namespace sonde::analyzers;
  TuneResults t;
  t.command = {"python3", "gemm_spin.py", "2000"};
  EXPECT_EQ(tune_of_another_command(t, "/v/bin/python -m sonde -o a.db gemm_spin.py 2000"), "");
  EXPECT_NE(tune_of_another_command(t, "/v/bin/python -m sonde -o a.db gemm_np.py 20000")
                .find("sonde tune ran another command (python3 gemm_spin.py 2000)"),
            std::string::npos);
  t.command = {"./mlp_train", "--steps", "10"};
  EXPECT_EQ(tune_of_another_command(t, "./mlp_train --steps 10"), "");
  t.command.clear();  // a tune.json of before its command was kept: nothing to compare
  EXPECT_EQ(tune_of_another_command(t, "./x"), "");
}
