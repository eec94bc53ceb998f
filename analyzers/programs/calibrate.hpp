// `sonde calibrate`: measures the machine's peak GEMM GFLOP/s (through the system BLAS, loaded
// at run time) and memory bandwidth (a STREAM triad), and keeps them in the peaks file that
// libsonde copies into each profile's `peaks` table.
//
// The peaks file: `$SONDE_PEAKS`, else `$XDG_CACHE_HOME/sonde/peaks.txt`, else
// `$HOME/.cache/sonde/peaks.txt`. One peak a line, `resource threads value source` separated by
// single spaces (threads 0 = all threads; source `calibrated` or `manual`); `#` starts a comment.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/table_format.hpp"
#include "store/peaks.hpp"

namespace sonde::analyzers {

inline constexpr const char* kSourceCalibrated = "calibrated";
inline constexpr const char* kSourceManual = "manual";
// Measured, failed the checks (more threads slower than one, repeats spread too far) on every
// attempt, and written because of --force.
inline constexpr const char* kSourceForced = "forced";

// The resources sonde measures, in file order: gemm.f32 and gemm.f64 in GFLOP/s, mem.bw in GB/s.
const std::vector<std::string>& peak_resources();
// "GFLOP/s" for gemm.*, "GB/s" for mem.bw, "" otherwise.
std::string peak_unit(std::string_view resource);

// The peaks file has one reader, libsonde's (store/peaks.hpp): what calibrate keeps is what a
// profile gets.
using Peak = sonde::Peak;
// bad_lines: "LINE: why: text" for each line the strict reader rejects.
using PeaksFile = sonde::PeaksText;

// The peaks file's location from the environment (SONDE_PEAKS, XDG_CACHE_HOME, HOME; empty values
// count as unset), as libsonde resolves it. Throws Error (exit 1) when none is set.
std::string default_peaks_path();

PeaksFile parse_peaks(std::istream& in);
// A missing file is an empty PeaksFile; an unreadable one, or one libsonde would refuse (not a
// regular file, too large), throws Error (exit 1).
PeaksFile read_peaks_file(const std::string& path);

// "RESOURCE[@THREADS]=VALUE" (threads default 0 = all) into a manual peak. Throws Error with
// exit code 2 on bad syntax, an unknown resource, or a value that is not a positive number.
Peak parse_peak_setting(std::string_view text);

// Merges `updates` into `existing`: a manual update replaces the line with its resource and
// threads; a calibrated update replaces a calibrated line but leaves a manual one in place (it
// is then listed in `kept_manual`). Lines for other resources and thread counts are kept.
std::vector<Peak> merge_peaks(const std::vector<Peak>& existing, const std::vector<Peak>& updates,
                              std::vector<Peak>* kept_manual = nullptr);

// The known resources in their order (threads 1, 2, ..., then 0 = all), then any others as given.
std::vector<Peak> sort_peaks(const std::vector<Peak>& peaks);
// The file's text: a header comment naming `written_by` (e.g. "`sonde calibrate` on host date"),
// then the peaks, sorted, one `resource threads value source` line each.
std::string format_peaks(const std::vector<Peak>& peaks, const std::string& written_by);

// resource, threads ("1" / "all" / N), value, unit, source.
// `words`: the threads as text shows them ("all"); else their number, 0 for all.
Table peaks_table(const std::vector<Peak>& peaks, bool words = true);

// Writes `text` to a temporary file beside `path` and renames it over `path`, creating the
// directory first. Throws Error (exit 1) when that fails.
void write_peaks_file(const std::string& path, const std::string& text);
// Fails early (Error, exit 1) when `path` could not be written, before minutes of measuring.
void check_peaks_writable(const std::string& path);

struct CalibrateOptions {
  bool quick = false;
  // The BLAS whose GEMMs are timed: the system's by default; the one a program uses (a
  // profile's blas.library) for that program's % of peak.
  std::string blas_library = "libblas.so.3";
  // Progress, e.g. ("calibrating gemm.f32, 1 thread, n=512 ...", false) before a measurement
  // and ("74.2 GFLOP/s", true) after it; may be empty.
  std::function<void(const std::string& text, bool line_done)> progress;
  // Where the BLAS is an OpenBLAS whose DYNAMIC_ARCH chose kernels narrower than the CPU's
  // vectors (metrics/blas_kernels.hpp) and OPENBLAS_CORETYPE is not set: set it to the CPU's
  // core and start this process again (/proc/self/exe, its own arguments), so that the peaks
  // are the machine's, not those of kernels a newer OpenBLAS would not choose. The command
  // asks for it; a caller that is not `sonde calibrate` must not.
  bool cpu_kernels = false;
  // --force: gemm.bf16's figures that fail the checks are kept with source kSourceForced, as
  // the other resources' are, instead of left out with a warning.
  bool force = false;
};

struct Calibration {
  std::vector<Peak> peaks;  // gemm.f32, gemm.f64, mem.bw, each for 1 and all threads
  std::string blas;         // what was loaded, e.g. "libblas.so.3 (OpenBLAS 0.3.21 ...)"
  int all_threads = 1;      // sysconf(_SC_NPROCESSORS_ONLN)
  std::vector<std::string> warnings;
  // Per resource whose figures failed the checks on every attempt: why (its peaks then carry
  // the source kSourceForced). Empty: every figure is believable.
  std::vector<std::string> doubts;
  std::optional<double> load;  // /proc/loadavg's 1-minute figure before measuring
};

// Loads options.blas_library (dlopen), times square GEMMs and the triad. Throws Error (exit 1) when
// the BLAS cannot be loaded or lacks cblas_sgemm / cblas_dgemm, or memory cannot be had.
Calibration run_calibration(const CalibrateOptions& options);

struct CalibrateCommand {
  bool quick = false;
  std::optional<std::string> output;  // default: default_peaks_path()
  std::string blas = "libblas.so.3";  // --blas
  std::vector<std::string> sets;      // RESOURCE[@THREADS]=VALUE: record, measure nothing
  bool show = false;                  // print the file (after any --set); measure nothing
  bool force = false;           // write figures that failed the checks, as source kSourceForced
  std::string format = "text";  // of the table printed: text, csv or json
};

// `sonde calibrate`: progress and notes on stderr, the resulting table on stdout. Returns 0;
// problems throw Error (exit 1; 2 for a bad --set), as do figures that fail the checks without
// --force (nothing is written then).
int calibrate_command(const CalibrateCommand& command);

}  // namespace sonde::analyzers
