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

bool alone_in_process() {
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

}  // namespace sonde
