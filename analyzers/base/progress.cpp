#include "base/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace sonde::analyzers {
namespace {

constexpr auto kInterval = std::chrono::milliseconds(200);

// 1234567 -> "1.2 M": a rate read at a glance.
std::string short_count(double n) {
  if (n >= 1e9) return fmt::format("{:.1f} G", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f} M", n / 1e6);
  if (n >= 1e4) return fmt::format("{:.0f} k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

// Seconds as a person says them: "8 s", "2 min 05 s", "1 h 02 min".
std::string duration(double s) {
  auto whole = static_cast<long long>(s + 0.5);
  if (whole < 60) return fmt::format("{} s", whole);
  if (whole < 3600) return fmt::format("{} min {:02d} s", whole / 60, whole % 60);
  return fmt::format("{} h {:02d} min", whole / 3600, (whole % 3600) / 60);
}

}  // namespace

Progress::Progress(std::FILE* out, std::string what) : what_(std::move(what)) {
  if (out != nullptr && ::isatty(::fileno(out)) == 1) out_ = out;
}

Progress::~Progress() { finish(); }

void Progress::start(std::int64_t total, std::string unit, bool coarse) {
  total_ = total;
  done_ = 0;
  unit_ = std::move(unit);
  started_ = std::chrono::steady_clock::now();
  stride_ = coarse ? 1 : kStride;
  next_check_ = (out_ != nullptr && total_ >= (coarse ? 1 : kMinTotal)) ? 0 : INT64_MAX;
}

void Progress::tick() {
  next_check_ = done_ + stride_;
  auto now = std::chrono::steady_clock::now();
  if (shown_ && now - last_ < kInterval) return;
  last_ = now;
  draw();
}

void Progress::draw() {
  int pct = total_ > 0 ? static_cast<int>(100 * std::min(done_, total_) / total_) : 100;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::string pace;
  if (done_ >= total_) {
    pace = fmt::format(", {:.1f} s", seconds);
  } else if (seconds > 0 && done_ > 0) {
    double rate = static_cast<double>(done_) / seconds;
    pace = fmt::format(", {} {}/s", short_count(rate), unit_);
    // The first second's rate is mostly start-up: no estimate from it.
    if (seconds >= 1.0)
      pace += fmt::format(", ~{} left", duration(static_cast<double>(total_ - done_) / rate));
  }
  // \r and erase-to-end-of-line: the line is redrawn in place.
  fmt::print(out_, "\r{}: {:3d} % ({} of {} {}){}\x1b[K", what_, pct, done_, total_, unit_, pace);
  std::fflush(out_);
  shown_ = true;
}

void Progress::finish() {
  if (!shown_) return;
  done_ = total_;
  draw();
  std::fputc('\n', out_);
  std::fflush(out_);
  shown_ = false;
  next_check_ = INT64_MAX;
}

}  // namespace sonde::analyzers
