#include "runtime/log.hpp"

#include <sys/stat.h>

#include <string>

#include "sonde/quiet_write.hpp"

namespace sonde {

namespace {
std::atomic<int> g_level{int(LogLevel::kWarn)};
// The file descriptor 2 was at start: 0 while not recorded, 1 recorded open, 2 recorded closed.
std::atomic<int> g_stderr_state{0};
dev_t g_stderr_dev = 0;
ino_t g_stderr_ino = 0;

bool stderr_is_hosts() {
  int state = g_stderr_state.load(std::memory_order_acquire);
  if (state == 0) return true;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;  // closed: EBADF anyway
  // Closed at start, open now: whatever the program opened there is its own file.
  return state == 1 && st.st_dev == g_stderr_dev && st.st_ino == g_stderr_ino;
}
}  // namespace

void remember_stderr() {
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) == 0) {
    g_stderr_dev = st.st_dev;
    g_stderr_ino = st.st_ino;
    g_stderr_state.store(1, std::memory_order_release);
  } else {
    g_stderr_state.store(2, std::memory_order_release);
  }
}

void say_on_stderr(std::string_view text) {
  if (stderr_is_hosts()) quiet_write(STDERR_FILENO, text);
}

void set_log_level(LogLevel level) { g_level.store(int(level), std::memory_order_relaxed); }
LogLevel log_level() { return LogLevel(g_level.load(std::memory_order_relaxed)); }

void log_write(std::string_view line) {
  std::string out = "sonde: ";
  out.append(line);
  out.push_back('\n');
  // write(2) directly: one syscall per line keeps lines whole between processes.
  say_on_stderr(out);
}

}  // namespace sonde
