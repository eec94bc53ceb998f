// Peak rates (GEMM GFLOP/s, memory GB/s) from `sonde calibrate` or a datasheet, copied into
// each profile so that % of peak can be computed from the file alone. The one reader of the
// peaks file: libsonde (at start-up, before the host's main) and `sonde calibrate` both use it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sonde {

struct Peak {
  std::string resource;  // gemm.f32, gemm.f64, mem.bw
  int threads = 0;       // 0 = all threads (the machine's online CPUs), else that many
  double value = 0;      // GFLOP/s or GB/s
  std::string source;    // calibrated, manual, forced (failed sonde calibrate's checks)
  // How far the measurement's repeats fell below its best, in % (sonde calibrate); none for a
  // hand-given figure or an older file.
  std::optional<double> spread_pct;
};

struct PeaksText {
  std::vector<Peak> peaks;
  // One per rejected line: "LINE: why: text". The other lines are still read.
  std::vector<std::string> bad_lines;
};

// A peaks file is a few hundred bytes; anything larger is not one (e.g. SONDE_PEAKS=/dev/zero).
inline constexpr std::size_t kMaxPeaksFileBytes = 64 * 1024;

// Lines `resource threads value [source [spread]]` separated by blanks, '#' starts a comment.
// Strict: threads a whole number >= 0, value a finite number > 0, spread a finite number >= 0
// (%), each field whole (no `100abc`), at most five fields; a line without a source is `manual`.
PeaksText parse_peaks(std::string_view text);

// The fields a peak is given by, in the file and in `sonde calibrate --set`: threads a whole
// number >= 0, the value a finite number > 0, each field whole (no `100abc`). `why` says what
// is wrong with a value that is refused.
std::optional<int> parse_peak_threads(std::string_view field);
std::optional<double> parse_peak_value(std::string_view field, std::string* why = nullptr);

// Where the peaks file is when SONDE_PEAKS does not name one: $XDG_CACHE_HOME/sonde/peaks.txt,
// else $HOME/.cache/sonde/peaks.txt; empty when neither is set (or set empty). `lookup` reads
// the environment: getenv, or libsonde's lookup at start-up.
template <class Lookup>
std::string default_peaks_location(Lookup lookup) {
  if (const char* cache = lookup("XDG_CACHE_HOME"); cache != nullptr && *cache != '\0')
    return std::string(cache) + "/sonde/peaks.txt";
  if (const char* home = lookup("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/sonde/peaks.txt";
  return {};
}

// Reads and parses the file at `path`. A missing file is no peaks (true, empty). A file that
// is not a regular file (a FIFO, a device, a directory), larger than kMaxPeaksFileBytes, or
// unreadable is refused without blocking: false and a one-line `error` naming the path (and
// errno EACCES where the file could not be opened for lack of permission).
bool read_peaks_file(const std::string& path, PeaksText& out, std::string& error);

}  // namespace sonde
