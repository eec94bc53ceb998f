#include "runtime/last_thread.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sonde {

namespace {

// The state letter of /proc/self/task/TID/stat ('R', 'S', 'Z', ...; 'X' for a task gone
// between readdir and open), or 0 when unreadable.
char task_state(const char* tid) {
  char path[64], buf[512];
  std::snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? 'X' : 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // The command name may hold spaces and parentheses: the state follows the last ')'.
  const char* paren = std::strrchr(buf, ')');
  return paren != nullptr && paren[1] == ' ' ? paren[2] : 0;
}

}  // namespace

// Threads of the group in /proc/self/status (a main thread that ended stays counted while it is
// a zombie), or -1.
int threads_in_group() {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* at = std::strstr(buf, "\nThreads:");
  return at != nullptr ? std::atoi(at + 9) : -1;
}

bool alone_in_process() {
  // One read first: with more than this thread and a zombie main, some other thread lives
  // (sonde's flusher asks 20 times a second while it waits for the last one).
  if (int n = threads_in_group(); n > 2) return false;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return false;
  long self = syscall(SYS_gettid);
  bool alone = true;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || std::atol(e->d_name) == self) continue;
    char state = task_state(e->d_name);
    if (state != 'Z' && state != 'X') {
      alone = false;
      break;
    }
  }
  closedir(dir);
  return alone;
}

int main_thread_exit_code() {
  char path[64], buf[1024];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", int(getpid()));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* at = std::strrchr(buf, ')');
  if (at == nullptr || at[1] != ' ' || at[2] != 'Z') return -1;
  // Fields separated by one space, the state (3) after ") "; exit_code is field 52.
  for (int field = 2; field < 52; ++field) {
    at = std::strchr(at + 1, ' ');
    if (at == nullptr) return -1;
  }
  return (std::atoi(at + 1) >> 8) & 0xff;
}

}  // namespace sonde
