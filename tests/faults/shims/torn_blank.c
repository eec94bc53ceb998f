// Preloaded before libsonde by a fault cell (test_files.py): the write that begins an SQLite
// file and is larger than its pages (the blank profile a process writes as it starts) stops half
// way and the process dies of SIGKILL, as a kill landing between two pages of the kernel's copy
// leaves it. SQLite's own writes are a page at a time and pass through.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*pwrite_fn)(int, const void*, size_t, off_t);

ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) {
  static pwrite_fn real;
  if (real == NULL) real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite64");
  if (off == 0 && n > 65536 && memcmp(buf, "SQLite format 3", 16) == 0) {
    real(fd, buf, n / 2, off);
    kill(getpid(), SIGKILL);
  }
  return real(fd, buf, n, off);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) { return pwrite64(fd, buf, n, off); }
