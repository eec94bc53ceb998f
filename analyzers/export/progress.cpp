#include "export/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace sonde::analyzers {
namespace {

constexpr auto kInterval = std::chrono::milliseconds(200);

}  // namespace

Progress::Progress(std::FILE* out, std::string what) : what_(std::move(what)) {
  if (out != nullptr && ::isatty(::fileno(out)) == 1) out_ = out;
}

Progress::~Progress() { finish(); }

void Progress::start(std::int64_t total, std::string unit) {
  total_ = total;
  done_ = 0;
  unit_ = std::move(unit);
  next_check_ = (out_ != nullptr && total_ >= kMinTotal) ? 0 : INT64_MAX;
}

void Progress::tick() {
  next_check_ = done_ + kStride;
  auto now = std::chrono::steady_clock::now();
  if (shown_ && now - last_ < kInterval) return;
  last_ = now;
  draw();
}

void Progress::draw() {
  int pct = total_ > 0 ? static_cast<int>(100 * std::min(done_, total_) / total_) : 100;
  // \r and erase-to-end-of-line: the line is redrawn in place.
  fmt::print(out_, "\r{}: {:3d} % ({} of {} {})\x1b[K", what_, pct, done_, total_, unit_);
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
