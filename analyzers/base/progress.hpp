// A progress line for work that takes a while (exports, merges): on a terminal only, so a pipe
// or a log file never receives carriage returns and half lines. It says the rate and, once a
// second has gone by, the time left at that rate; at the end, the time it took.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace sonde::analyzers {

class Progress {
 public:
  // Below this many units an export finishes before a line would be worth reading.
  static constexpr std::int64_t kMinTotal = 100000;

  Progress() = default;  // silent
  // `out` is where the line goes (stderr); nothing is written unless `out` is a terminal.
  Progress(std::FILE* out, std::string what);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();

  // Begins counting `total` units (events, nodes) of a `unit` ("events"). `coarse`: each unit
  // is long (a file merged), so the line is shown from the first and the clock read at each.
  void start(std::int64_t total, std::string unit, bool coarse = false);
  // Cheap enough for every event: the clock is read once per kStride units.
  void advance(std::int64_t n = 1) {
    done_ += n;
    if (done_ >= next_check_) tick();
  }
  // Ends the line (only if one was shown).
  void finish();
  bool shown() const { return shown_; }

 private:
  static constexpr std::int64_t kStride = 4096;
  void tick();
  void draw();

  std::FILE* out_ = nullptr;  // null: silent
  std::string what_;
  std::string unit_;
  std::int64_t total_ = 0;
  std::int64_t done_ = 0;
  std::int64_t next_check_ = INT64_MAX;
  std::int64_t stride_ = kStride;
  bool shown_ = false;
  std::chrono::steady_clock::time_point started_{}, last_{};
};

}  // namespace sonde::analyzers
