// sonde export: the profile for other tools (chrome trace, speedscope, SVG flame graph, folded
// stacks, csv, pstats, callgrind, pprof).
#include "export/export.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "base/output_file.hpp"
#include "cli/command.hpp"
#include "export/export_samples.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format;
  std::optional<std::string> output;
  bool sampled = false;
  std::optional<std::string> baseline;  // svg: a differential flame graph against this file
};

void write_export(const Options& a, const ProfileFile& file, std::ostream& out) {
  // On a terminal only: stderr piped or redirected gets no progress line.
  Progress progress(stderr, "sonde export");
  if (a.format == "folded" && a.sampled) {
    write_folded_samples(file, out);
  } else if (a.format == "folded") {
    write_folded(file, out);
  } else if (a.format == "samples") {
    write_samples_json(file, out);
  } else if (a.format == "csv") {
    // path_ids tells apart two paths whose names join the same (a frame "a;b", frames a, b).
    write_callpaths_csv(file, out);
  } else if (a.format == "speedscope") {
    write_speedscope(file, out, &progress);
  } else if (a.format == "svg" && a.baseline) {
    ProfileFile before = ProfileFile::open(*a.baseline);
    before.check_tree_links();
    write_svg_flamegraph(file, out, &before);
  } else if (a.format == "svg") {
    write_svg_flamegraph(file, out);
  } else if (a.format == "pstats") {
    write_pstats(file, out);
  } else if (a.format == "callgrind") {
    write_callgrind(file, out);
  } else if (a.format == "pprof") {
    write_pprof(file, out);
  } else {
    write_chrome_trace(file, out, &progress);
  }
  out.flush();
}

int export_profile(const Options& given) {
  // `-o -` is standard output, as for most tools (it wrote a file named "-").
  Options a = given;
  if (a.output && *a.output == "-") a.output.reset();
  if ((a.format == "pstats" || a.format == "pprof") && !a.output && ::isatty(STDOUT_FILENO)) {
    throw Error(fmt::format("--format {} is binary ({}): give -o FILE, or redirect standard output",
                            a.format,
                            a.format == "pstats" ? "Python's marshal" : "gzip-compressed protobuf"),
                2);
  }
  if (a.sampled && a.format != "folded") {
    throw Error(
        "--sampled goes with --format folded (chrome and speedscope carry the samples "
        "in tracks of their own; --format samples is their JSON)",
        2);
  }
  if (a.baseline && a.format != "svg") {
    throw Error(
        "--baseline goes with --format svg (a differential flame graph); sonde diff "
        "compares two profiles in a table",
        2);
  }
  if (a.output)
    refuse_input_as_output(a.baseline ? std::vector<std::string>{a.file, *a.baseline}
                                      : std::vector<std::string>{a.file},
                           *a.output);
  ProfileFile file = ProfileFile::open(a.file);
  file.check_tree_links();  // every format walks the call paths
  // An empty file would read as a flame graph of nothing, with no word of why.
  if (a.sampled && !file.has_rows("samples")) {
    throw Error(
        fmt::format("{} holds no samples: record them with sonde run --sample N (or "
                    "SONDE_SAMPLE_HZ=N)",
                    a.file));
  }
  if (!a.output) {
    write_export(a, file, std::cout);
    if (!std::cout) throw Error("writing to standard output failed");
    return 0;
  }
  if (written_through(*a.output)) {  // /dev/null, /dev/stdout, a FIFO, a link (output_file.hpp)
    std::ofstream out(*a.output, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(fmt::format("cannot write {}: {}", *a.output, std::strerror(errno)));
    write_export(a, file, out);
    if (!out) throw Error(fmt::format("writing {} failed: {}", *a.output, std::strerror(errno)));
    return 0;
  }
  // Written beside the output and renamed over it: a failure midway leaves what was there.
  std::string temp = temp_beside(*a.output);
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(fmt::format("cannot write {}: {}", *a.output, std::strerror(errno)));
  try {
    write_export(a, file, out);
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  int err = out ? 0 : errno;
  out.close();
  if (err == 0 && out.fail()) err = errno;
  if (err != 0 || ::rename(temp.c_str(), a.output->c_str()) != 0) {
    if (err == 0) err = errno;
    ::unlink(temp.c_str());
    throw Error(fmt::format("writing {} failed: {}", *a.output, std::strerror(err)));
  }
  return 0;
}
}  // namespace

Command add_export(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "export",
      "The profile for other tools: chrome, speedscope, svg, folded, csv, samples, pstats, "
      "callgrind or pprof");
  add_file(cmd, a->file);
  cmd->add_option("-f,--format", a->format,
                  "chrome: trace-event JSON (Perfetto, chrome://tracing); speedscope: speedscope's "
                  "JSON; svg: a static flame graph; folded: flame-graph stacks; csv: callpaths; "
                  "samples: the sampler's paths as JSON; pstats: cProfile's stats file (pstats, "
                  "snakeviz, tuna, gprof2dot); callgrind: KCachegrind's format; pprof: pprof's "
                  "profile.proto, gzipped (go tool pprof, Pyroscope, Parca)")
      ->check(CLI::IsMember({"chrome", "speedscope", "svg", "folded", "csv", "samples", "pstats",
                             "callgrind", "pprof"}))
      ->required();
  cmd->add_flag("--sampled", a->sampled,
                "With folded: the sampler's stacks (values in samples) instead of the exact "
                "figures' (microseconds); the two never share a file");
  cmd->add_option("--baseline", a->baseline,
                  "With svg: a differential flame graph, widths from FILE's profile and each "
                  "frame coloured by the change of its call path's share of the busy time from "
                  "BASELINE's (red grew, blue shrank)")
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", a->output, "Output file (default, or -: standard output)");
  return {cmd, [a] { return export_profile(*a); }};
}

}  // namespace sonde::cli
