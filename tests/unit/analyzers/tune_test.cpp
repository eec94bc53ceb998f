// sonde tune's own judgement, apart from the candidates it informs (advice_test.cpp): which
// output lines are results, and when a difference in time is a verdict.
#include <gtest/gtest.h>

#include <string>

#include "tools/tune.hpp"

// sonde tune compares the program's results, not its own timings: `python3 -m timeit` prints
// only a timing, and a training loop prints its epoch time beside its loss.
TEST(TuneOutputs, TheProgramsOwnTimingsAreNoResult) {
  EXPECT_EQ(sonde::analyzers::compare_outputs("20 loops, best of 5: 310 usec per loop\n",
                            "20 loops, best of 5: 305 usec per loop\n"),
            "");
  EXPECT_EQ(sonde::analyzers::compare_outputs("epoch 1 loss 0.4100 time 2.13s\nelapsed: 4.2\n",
                            "epoch 1 loss 0.4100 time 1.98s\nelapsed: 3.9\n"),
            "");
  // The loss beside a timing still counts.
  std::string changed = sonde::analyzers::compare_outputs("epoch 1 loss 0.4100 took 2.1 s\n",
                                        "epoch 1 loss 0.4200 took 1.9 s\n");
  EXPECT_NE(changed.find("loss 0.4100"), std::string::npos) << changed;
  EXPECT_NE(changed.find("largest relative difference on the result lines 0.024"),
            std::string::npos) << changed;
  // Samples or steps are counts, not seconds.
  EXPECT_NE(sonde::analyzers::compare_outputs("64 samples\n", "65 samples\n"), "");
}

// A verdict only where "every run beat every run" would be a 1-in-20 chance without an effect.
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
