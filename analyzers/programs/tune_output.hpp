// What `sonde tune` compares of a program's stdout: every number it prints, line by line, with a
// stated tolerance, but for the numbers that vary from run to run by nature (timings, clock
// times and dates, process ids, addresses), which are left out and counted (docs/tune.md).
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sonde::analyzers {

// Two printed numbers agree when |a - b| <= max(rel * max(|a|, |b|), abs): a sum taken in
// another order moves a float32 loss in its 4th-7th digit, a changed result moves it further;
// abs only keeps a 0 against a 1e-17 (what cancels to zero) from being an infinite relative
// difference.
struct OutputTolerance {
  double rel = 1e-3;
  double abs = 1e-12;
};

// One line of output as compared: its words (numbers as '#', left-out numbers as '~', spaces
// folded), the numbers compared, how many were left out.
struct PrintedLine {
  std::string words;
  std::vector<double> numbers;
  std::vector<bool> results;  // per number: its name says a result (loss, acc, error, score, ...)
  std::size_t left_out = 0;
  std::string text;  // as printed, for the report
};
std::vector<PrintedLine> printed_lines(const std::string& output);

struct OutputComparison {
  std::size_t compared = 0;    // numbers compared (the later output's)
  std::size_t beyond = 0;      // of them, beyond the tolerance
  std::size_t left_out = 0;    // timings, dates, ids of the later output, not compared
  std::size_t word_lines = 0;  // line pairs whose words differ
  std::size_t lines_before = 0, lines_after = 0;
  double largest_rel =
      0;              // the largest relative difference among the compared (inf: NaN vs a number)
  std::string first;  // the first line pair that differs at all, quoted
  OutputTolerance tolerance;  // what it was compared within
  bool differs() const { return beyond > 0 || word_lines > 0 || lines_before != lines_after; }
  bool exact() const { return !differs() && largest_rel == 0; }
};
// Numbers that vary from run to run of one program, by place (line, number of the line), as
// printed_lines reads them: beyond the tolerance between the first output and another, where
// their lines are otherwise alike. One named as a result (val_loss 1.016, 1.011, 1.016) is
// compared against the band its runs span; any other (a timing printed with no name or unit
// that says so: "bwd+step 0.006") is left out, counted with the timings.
struct VaryingPlaces {
  using Place = std::pair<std::size_t, std::size_t>;
  std::set<Place> left_out;
  std::map<Place, std::pair<double, double>> bands;  // lowest, highest
  bool empty() const { return left_out.empty() && bands.empty(); }
};
VaryingPlaces varying_places(const std::vector<std::string>& outputs,
                             const OutputTolerance& tolerance = {});

// `varying`: the places left out, and those held to their band (beyond it by the tolerance:
// differs) rather than to the number of `before`.
OutputComparison compare_outputs(const std::string& before, const std::string& after,
                                 const OutputTolerance& tolerance = {},
                                 const VaryingPlaces& varying = {});

// 1e-3 rather than 0.001: a tolerance as it is written.
std::string tolerance_text(double v);

// The output column: "same (40 numbers compared, 12 timings/ids left out)", "same within rel
// 0.001, abs 1e-12 (...)", "differs (3 of 40 numbers beyond rel 0.001, abs 1e-12)".
std::string output_summary(const OutputComparison& c);
// The sentence under the table: the summary and the first differing line pair.
std::string output_detail(const OutputComparison& c);

}  // namespace sonde::analyzers
