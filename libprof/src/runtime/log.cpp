#include "runtime/log.hpp"

#include <string>

#include "sonde/quiet_write.hpp"

namespace sonde {

namespace {
std::atomic<int> g_level{int(LogLevel::kWarn)};
}

void set_log_level(LogLevel level) { g_level.store(int(level), std::memory_order_relaxed); }
LogLevel log_level() { return LogLevel(g_level.load(std::memory_order_relaxed)); }

void log_write(std::string_view line) {
  std::string out = "sonde: ";
  out.append(line);
  out.push_back('\n');
  // write(2) directly: one syscall per line keeps lines whole between processes.
  quiet_write(STDERR_FILENO, out);
}

}  // namespace sonde
