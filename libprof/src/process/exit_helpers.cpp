#include "process/exit_helpers.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/clock.hpp"

namespace sonde {

namespace {

constexpr size_t kMaxHelpers = 8;

// The parent pid /proc/<pid>/stat gives (its fourth field, after the command in parentheses,
// which may hold spaces and parentheses of its own); 0 where it cannot be read.
pid_t parent_of(pid_t pid) {
  char path[64], buf[512];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  char state = 0;
  int ppid = 0;
  if (close_paren == nullptr || std::sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2)
    return 0;
  return pid_t(ppid);
}

// True once `pid` has ended: reaped here, or gone (SIGCHLD ignored reaps children at once).
bool ended(pid_t pid) {
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) return true;
  if (r == 0) return false;
  return errno == ECHILD && kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

bool ExitHelpers::add(int fd, pid_t pid) {
  struct stat st {};
  if (fd < 0 || pid <= 0 || fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return false;
  pid_t self = getpid();
  if (parent_of(pid) != self) return false;  // a fork child's copy of its parent's helper
  std::lock_guard lock(mu_);
  for (Helper& h : helpers_) {
    if (h.pid == pid && h.owner == self) {
      h = Helper{fd, pid, self, st.st_dev, st.st_ino};  // named again at a later exit call
      return true;
    }
  }
  if (helpers_.size() >= kMaxHelpers) return false;
  helpers_.push_back(Helper{fd, pid, self, st.st_dev, st.st_ino});
  return true;
}

int ExitHelpers::end_all(int budget_ms) {
  std::vector<pid_t> waiting;
  {
    std::lock_guard lock(mu_);
    pid_t self = getpid();
    for (const Helper& h : helpers_) {
      if (h.owner != self) continue;
      // The descriptor may have been closed and its number reused since it was named.
      struct stat st {};
      if (fstat(h.fd, &st) != 0 || st.st_dev != h.dev || st.st_ino != h.ino) continue;
      close(h.fd);
      waiting.push_back(h.pid);
    }
    helpers_.clear();
  }
  int64_t deadline = monotonic_ns() + int64_t(budget_ms) * 1'000'000;
  while (!waiting.empty()) {
    std::erase_if(waiting, ended);
    if (waiting.empty() || monotonic_ns() >= deadline) break;
    timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  return int(waiting.size());
}

}  // namespace sonde
