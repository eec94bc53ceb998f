// sonde export: the profile for other tools (chrome trace, folded stacks, csv).
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "export/export.hpp"
#include "profile/query.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format;
  std::optional<std::string> output;
};

int export_profile(const Options& a) {
  ProfileFile file = ProfileFile::open(a.file);
  std::ofstream out_file;
  if (a.output) {
    out_file.open(*a.output, std::ios::binary | std::ios::trunc);
    if (!out_file) throw Error(fmt::format("cannot write {}: {}", *a.output, std::strerror(errno)));
  }
  std::ostream& out = a.output ? out_file : std::cout;
  if (a.format == "folded") {
    write_folded(file, out);
  } else if (a.format == "csv") {
    out << render_csv(run_query(file, "SELECT path, calls, incl_s, excl_s FROM callpaths "
                                      "ORDER BY path, path_ids"));
  } else {
    write_chrome_trace(file, out);
  }
  out.flush();
  if (!out) throw Error(fmt::format("writing {} failed", a.output.value_or("standard output")));
  return 0;
}
}  // namespace

Command add_export(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("export", "The profile for other tools: chrome, folded or csv");
  add_file(cmd, a->file);
  cmd->add_option("-f,--format", a->format,
                  "chrome: trace-event JSON (Perfetto); folded: flame-graph stacks; csv: callpaths")
      ->check(CLI::IsMember({"chrome", "folded", "csv"}))
      ->required();
  cmd->add_option("-o,--output", a->output, "Output file (default: standard output)");
  return {cmd, [a] { return export_profile(*a); }};
}

}  // namespace sonde::cli
