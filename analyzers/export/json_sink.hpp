// Buffered JSON text for exports with millions of events: fmt into a buffer, written out in
// large blocks, rather than a JSON value per event (the chrome trace of a 2-step PyTorch run
// spent most of its minute building and dumping those).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "base/table_format.hpp"

namespace sonde::analyzers {

class JsonSink {
 public:
  explicit JsonSink(std::ostream& out) : out_(out) {}
  JsonSink(const JsonSink&) = delete;
  JsonSink& operator=(const JsonSink&) = delete;
  ~JsonSink() { flush(); }

  template <typename... Args>
  void put(fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(buf_), format, std::forward<Args>(args)...);
    if (buf_.size() >= kBlock) flush();
  }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

 private:
  static constexpr std::size_t kBlock = 1 << 20;
  std::ostream& out_;
  fmt::memory_buffer buf_;
};

// A JSON string literal, quotes included; bytes that are not UTF-8 become U+FFFD (names are
// bytes as the program gave them).
inline std::string json_string(std::string_view text) {
  return dump_json(Json(std::string(text)), -1);
}

// Nanoseconds as microseconds with three decimals, exactly: Perfetto rounds ts * 1000 back to
// whole nanoseconds, so a child never appears to end after its parent.
struct Micros {
  std::int64_t ns;
};

}  // namespace sonde::analyzers

template <>
struct fmt::formatter<sonde::analyzers::Micros> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(sonde::analyzers::Micros m, Context& ctx) const {
    std::int64_t ns = m.ns;
    const char* sign = "";
    if (ns < 0) {
      sign = "-";
      ns = -ns;
    }
    return fmt::format_to(ctx.out(), "{}{}.{:03}", sign, ns / 1000, ns % 1000);
  }
};
