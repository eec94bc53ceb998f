// sonde diff: profiles side by side, with speedups per phase, routine and GEMM shape; with
// several runs a side (`sonde diff A1 A2 A3 -- B1 B2 B3`), each figure's spread and noise.
#include "metrics/diff.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string_view>
#include <utility>

#include "base/output_file.hpp"
#include "cli/command.hpp"
#include "render/diff.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {

std::vector<std::string>& after_side_words() {
  static std::vector<std::string> words;
  return words;
}

struct Options {
  std::vector<std::string> files;  // both sides (A B), or the before side when "--" splits them
  std::string format = "text";
};

int diff(const Options& a) {
  Format format = parse_format(a.format);
  std::vector<std::string> before = a.files, after = after_side_words();
  if (after.empty()) {
    after = {before[1]};
    before.resize(1);
  }
  // One run counted twice weighs its figures double in the median and the noise rule: refused,
  // as sonde merge refuses a file given twice. The same file on both sides compares nothing.
  refuse_repeated_inputs(before);
  refuse_repeated_inputs(after);
  bool same_both_sides = false;
  for (const std::string& x : before)
    for (const std::string& y : after) same_both_sides = same_both_sides || same_file(x, y);
  std::vector<ProfileFile> opened;
  opened.reserve(before.size() + after.size());
  std::vector<const ProfileFile*> b, f;
  for (const std::string& p : before) b.push_back(&opened.emplace_back(ProfileFile::open(p)));
  for (const std::string& p : after) f.push_back(&opened.emplace_back(ProfileFile::open(p)));
  ProfileDiff d = compute_diff(b, f);
  if (same_both_sides)
    d.warnings.insert(d.warnings.begin(),
                      "a file is on both sides: its run is compared with itself");
  // Said on stderr too, where a script that reads the JSON or CSV, or the text piped or saved,
  // still shows it to a person; not where the text itself goes to the terminal, which said it
  // twice (a red-team find).
  if (format != Format::kText || isatty(STDOUT_FILENO) == 0)
    for (const std::string& w : d.warnings)
      std::cerr << "sonde diff: warning: " << visible(w) << '\n';
  if (format == Format::kJson)
    print_json("diff", "", render_diff_json(before, after, d));
  else if (format == Format::kCsv)
    std::cout << render_csv(diff_csv_table(d));
  else
    std::cout << render_diff_text(d);
  return 0;
}

}  // namespace

void split_diff_sides(std::vector<std::string>& args) {
  if (args.empty() || args[0] != "diff") return;
  auto dash = std::find(args.begin(), args.end(), "--");
  if (dash == args.end()) return;
  // After "--", the after side's files; an option there (--format json) is still diff's.
  std::vector<std::string> files, kept;
  for (auto it = dash + 1; it != args.end(); ++it) {
    if (it->size() > 1 && (*it)[0] == '-') {
      kept.push_back(*it);
      if ((*it == "-f" || *it == "--format") && it + 1 != args.end()) kept.push_back(*++it);
    } else {
      files.push_back(*it);
    }
  }
  args.erase(dash, args.end());
  args.insert(args.end(), kept.begin(), kept.end());
  after_side_words() = files;
  if (files.empty()) after_side_words() = {""};  // "--" and nothing: said by the check
}

Command add_diff(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("diff",
                                 "Profiles side by side: time per phase and routine "
                                 "with the speedup, GEMM GFLOP/s per shape; several "
                                 "runs a side give each figure's spread and noise");
  cmd->description(
      "Profiles side by side: sonde diff BEFORE AFTER, or several runs of each "
      "side: sonde diff BEFORE... -- AFTER... (each figure the median of its runs "
      "with their min-max, and whether the sides differ beyond the noise)");
  cmd->add_option("files", a->files,
                  "Profiles: BEFORE AFTER, or the runs before the change, then -- and the runs "
                  "after it");  // how many: said by the check, which knows of "--"
  add_format(cmd, a->format, {"text", "csv", "json"});
  Command c{cmd, [a] { return diff(*a); }};
  c.check = [a] {
    const std::vector<std::string>& after = after_side_words();
    if (!after.empty() && (after == std::vector<std::string>{""} || a->files.empty()))
      return std::string(
          "give one or more profiles on each side of -- (sonde diff A1 A2 -- B1 B2)");
    if (after.empty() && a->files.size() != 2)
      return fmt::format(
          "give two profiles (sonde diff BEFORE AFTER), or several runs a side "
          "(sonde diff A1 A2 A3 -- B1 B2 B3); got {}",
          a->files.size());
    return std::string();
  };
  return c;
}

}  // namespace sonde::cli
