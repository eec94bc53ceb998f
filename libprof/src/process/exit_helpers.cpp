#include "process/exit_helpers.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/clock.hpp"

namespace sonde {

namespace {

constexpr size_t kMaxHelpers = 8;
// A helper neither running nor using CPU this long after its pipe's end was closed got no EOF.
constexpr int64_t kIdleNs = 50'000'000;

// /proc/PID/stat's state and parent pid (its third and fourth fields, after the command in
// parentheses, which may hold spaces and parentheses of its own); false where it cannot be read.
// No memory taken: end_all reads it.
bool stat_fields(pid_t pid, char& state, int& ppid) {
  char path[64], buf[512];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  return close_paren != nullptr && std::sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2;
}

pid_t parent_of(pid_t pid) {
  char state = 0;
  int ppid = 0;
  return stat_fields(pid, state, ppid) ? pid_t(ppid) : 0;
}

// The CPU time `pid` has run (/proc/PID/schedstat, ns), and whether it is running or waiting
// for the disk now (state R or D).
std::uint64_t cpu_ns(pid_t pid, bool& running) {
  char path[64], buf[128];
  std::uint64_t ns = 0;
  std::snprintf(path, sizeof path, "/proc/%d/schedstat", int(pid));
  if (int fd = open(path, O_RDONLY | O_CLOEXEC); fd >= 0) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) {
      buf[n] = '\0';
      unsigned long long v = 0;
      if (std::sscanf(buf, "%llu", &v) == 1) ns = v;
    }
  }
  char state = 0;
  int ppid = 0;
  running = stat_fields(pid, state, ppid) && (state == 'R' || state == 'D');
  return ns;
}

// Whether `pid` holds the pipe of inode `ino` (either end): /proc/PID/fd's links read
// "pipe:[INODE]". A number this process reused for another pipe is not the helper's.
bool holds_pipe(pid_t pid, ino_t ino) {
  char dir_path[64], link[64], want[48];
  std::snprintf(dir_path, sizeof dir_path, "/proc/%d/fd", int(pid));
  int want_n =
      std::snprintf(want, sizeof want, "pipe:[%llu]", static_cast<unsigned long long>(ino));
  DIR* dir = opendir(dir_path);
  if (dir == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    char entry[320];
    std::snprintf(entry, sizeof entry, "%s/%s", dir_path, e->d_name);
    ssize_t n = readlink(entry, link, sizeof link);
    if (n == want_n && std::memcmp(link, want, size_t(n)) == 0) {
      found = true;
      break;
    }
  }
  closedir(dir);
  return found;
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
  if (pid <= 0) return false;
  // A program that closed its descriptors (closerange) gave the helper its EOF already: it is
  // waited for, with nothing to close.
  pid_t self = getpid();
  if (parent_of(pid) != self) return false;  // a fork child's copy of its parent's helper
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode) || !holds_pipe(pid, st.st_ino)) {
    fd = -1;
    st = {};
  }
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
  struct Waiting {
    pid_t pid;
    std::uint64_t cpu_ns;
    int64_t progress_ns;  // when it was last seen running or its CPU time moved
  };
  Waiting waiting[kMaxHelpers];
  size_t n = 0;
  int64_t now = monotonic_ns();
  {
    std::lock_guard lock(mu_);
    pid_t self = getpid();
    for (const Helper& h : helpers_) {
      if (h.owner != self) continue;
      // The descriptor may have been closed and its number reused since it was named: then
      // the helper had its EOF, and is only waited for.
      struct stat st {};
      if (h.fd >= 0 && fstat(h.fd, &st) == 0 && st.st_dev == h.dev && st.st_ino == h.ino)
        close(h.fd);
      waiting[n++] = Waiting{h.pid, 0, now};
    }
    helpers_.clear();
  }
  int64_t deadline = now + int64_t(budget_ms) * 1'000'000;
  while (n > 0) {
    now = monotonic_ns();
    for (size_t i = 0; i < n;) {
      Waiting& w = waiting[i];
      bool gone = ended(w.pid);
      if (!gone) {
        bool running = false;
        std::uint64_t cpu = cpu_ns(w.pid, running);
        if (running || cpu != w.cpu_ns) w.progress_ns = now;
        w.cpu_ns = cpu;
      }
      // Ended; or idle since the close, so another process (a fork child) still holds a write
      // end of its pipe and no EOF comes: not waited for.
      if (gone || now - w.progress_ns > kIdleNs) {
        waiting[i] = waiting[--n];
      } else {
        ++i;
      }
    }
    if (n == 0 || now >= deadline) break;
    timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  return int(n);
}

}  // namespace sonde
