#include "profile/process_alive.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sonde::analyzers {
namespace {

// The boot time in seconds since the epoch (/proc/stat's btime), or -1.
long long boot_time() {
  std::ifstream in("/proc/stat");
  std::string key;
  long long value = -1;
  while (in >> key) {
    if (key == "btime") {
      in >> value;
      return value;
    }
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

}  // namespace

bool process_alive(pid_t pid, std::int64_t started_ns) {
  if (pid <= 0) return false;
  bool signalable = ::kill(pid, 0) == 0 || errno == EPERM;
  if (!signalable) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  std::ifstream in(path);
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields count from
  // the last ')'.
  std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return signalable;
  std::istringstream fields(stat.substr(close + 1));
  std::string state, field;
  fields >> state;
  if (state == "Z" || state == "X" || state == "x") return false;  // ended, not yet waited for
  // Field 22, starttime, in clock ticks after boot; state was field 3.
  for (int f = 4; f < 22 && fields >> field;) ++f;
  unsigned long long ticks = 0;
  long long boot = boot_time();
  long hz = ::sysconf(_SC_CLK_TCK);
  if (!(fields >> ticks) || boot < 0 || hz <= 0 || started_ns <= 0) return true;
  // A process that started after the row's writer did is another one with its pid (the writer
  // started no later than the row: a fork child's row is written after the fork, an exec'd
  // image's after the exec). One second of slack: btime is in whole seconds.
  double started_s = double(boot) + double(ticks) / double(hz);
  return started_s <= double(started_ns) / 1e9 + 1.0;
}

std::vector<pid_t> processes_with_environment(const std::string& entry) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = d.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    // Another user's environment cannot be read: not a process of this user's run.
    std::ifstream in(d.path() / "environ", std::ios::binary);
    if (!in) continue;
    std::string variable;
    while (std::getline(in, variable, '\0')) {
      if (variable == entry) {
        out.push_back(static_cast<pid_t>(std::stol(name)));
        break;
      }
    }
  }
  return out;
}

bool on_this_host(const char* host) {
  if (host == nullptr) return true;
  char here[256] = {};
  ::gethostname(here, sizeof here - 1);
  return std::strcmp(host, here) == 0;
}

}  // namespace sonde::analyzers
