// One line per message on stderr, prefixed "sonde: ". Never throws; formats without the host's
// stdio buffers so it cannot interleave with or reorder the program's own output.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <string_view>

namespace sonde {

enum class LogLevel { kQuiet = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_write(std::string_view line);

// sonde's own lines go to the host's stderr only while descriptor 2 is still the file it was
// when sonde started: a program that closed it and opened a data file (which took 2), or moved
// its log onto 2, found "sonde: profile written to ..." in that file (a red-team find).
// remember_stderr() records it (at start); say_on_stderr() writes `text` there, or nothing.
// Both async-signal-safe.
void remember_stderr();
void say_on_stderr(std::string_view text);

template <class... A>
void log(LogLevel level, fmt::format_string<A...> f, A&&... args) {
  if (level > log_level()) return;
  try {
    log_write(fmt::format(f, std::forward<A>(args)...));
  } catch (...) {
  }
}

template <class... A>
void warn(fmt::format_string<A...> f, A&&... args) {
  log(LogLevel::kWarn, f, std::forward<A>(args)...);
}

}  // namespace sonde
