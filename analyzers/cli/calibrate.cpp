// sonde calibrate: measure this machine's peaks into the peaks file (analyzers/programs).
#include "programs/calibrate.hpp"

#include <memory>

#include "cli/command.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

Command add_calibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateCommand>();
  auto* cmd = app.add_subcommand(
      "calibrate", "Measure peak GEMM GFLOP/s and memory bandwidth into the peaks file");
  auto* quick = cmd->add_flag("--quick", a->quick,
                              "Smaller GEMMs (256, 512) and fewer passes: seconds, not a minute");
  cmd->add_option("-o,--output", a->output,
                  "Peaks file (default: $SONDE_PEAKS, else $XDG_CACHE_HOME/sonde/peaks.txt, "
                  "else ~/.cache/sonde/peaks.txt)");
  auto* blas = cmd->add_option("--blas", a->blas,
                               "BLAS library whose GEMMs are timed (default libblas.so.3, the "
                               "system's); for a program's % of peak, the one it uses: its "
                               "profile's blas.library")
                   ->type_name("PATH");
  auto* set = cmd->add_option("--set", a->sets,
                              "Record a hand-given peak (source manual), measure nothing; "
                              "THREADS 1 or 0 = all (default)")
                  ->type_name("RESOURCE[@THREADS]=VALUE");
  auto* show =
      cmd->add_flag("--show", a->show, "Print the peaks file (after any --set), measure nothing");
  auto* force = cmd->add_flag("--force", a->force,
                              "Write figures that fail the checks (more threads slower than one, "
                              "repeats spread over 25 %) with source 'forced' instead of refusing");
  add_format(cmd, a->format, {"text", "csv", "json"});
  quick->excludes(set)->excludes(show);
  blas->excludes(set)->excludes(show);
  force->excludes(set)->excludes(show);
  cmd->footer(
      "RESOURCE: gemm.f32, gemm.f64, gemm.bf16 (GFLOP/s; bf16 only on a CPU with bfloat16 "
      "units, with oneDNN), mem.bw (GB/s). Calibrated lines are "
      "replaced, manual ones kept unless --set again.");
  return {cmd, [a] { return calibrate_command(*a); }};
}

}  // namespace sonde::cli
