#include "store/writer_child.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace sonde {
namespace {

// A fork that runs no pthread_atfork handler: a program's handlers may take locks another thread
// holds. glibc 2.34's _Fork, looked up (not linked) when libsonde loads, since the wheel runs on
// 2.31; before 2.34, the clone system call as fork makes it. The child there keeps the parent
// thread's TID in glibc's thread descriptor: only a recursive or error-checking mutex's owner
// reads it, and the writing child takes none that the parent held.
using ForkFn = pid_t (*)();
const ForkFn kFork = reinterpret_cast<ForkFn>(dlvsym(RTLD_DEFAULT, "_Fork", "GLIBC_2.34"));

pid_t fork_without_handlers() {
  if (kFork != nullptr) return kFork();
  return pid_t(syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr));
}

struct Shared {
  std::atomic<int> state{0};  // 0 running, 1 written, 2 failed
  char error[256] = {};
};

// Closes up to `n` of this process's highest open descriptors below the soft limit.
void close_highest(unsigned n) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return;
  for (long fd = long(lim.rlim_cur) - 1; fd > 2 && n > 0; --fd) {
    if (::fcntl(int(fd), F_GETFD) < 0) continue;
    ::close(int(fd));
    --n;
  }
}

int64_t monotonic_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace

bool write_in_child(unsigned spare, int timeout_ms, const std::function<bool(std::string&)>& write,
                    std::string& error) {
  void* page =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    error += "; no memory to hand the flush to a child";
    return false;
  }
  auto* shared = new (page) Shared;
  pid_t pid = fork_without_handlers();
  if (pid == 0) {
    // A signal for the parent's process group (a terminal's ^C) is not the child's to act on.
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, nullptr);
    close_highest(spare);
    std::string why;
    bool ok = false;
    try {
      ok = write(why);
    } catch (...) {
      why = "the child writing the profile failed";
    }
    if (!ok) std::strncpy(shared->error, why.c_str(), sizeof(shared->error) - 1);
    shared->state.store(ok ? 1 : 2, std::memory_order_release);
    _exit(ok ? 0 : 1);
  }
  bool ok = false;
  if (pid < 0) {
    error += "; no child could be made to write it";
  } else {
    // The host may reap the child first (a SIGCHLD handler waiting for any child): the page,
    // not the exit status, says how it went.
    int64_t deadline = monotonic_ms() + timeout_ms;
    int status = 0;
    bool reaped = false;
    while (shared->state.load(std::memory_order_acquire) == 0 && monotonic_ms() < deadline) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno == ECHILD)) {
        reaped = true;
        break;
      }
      timespec pause{0, 2'000'000};
      nanosleep(&pause, nullptr);
    }
    int state = shared->state.load(std::memory_order_acquire);
    if (state == 0 && !reaped) {
      ::kill(pid, SIGKILL);
      error += "; the child writing it had not ended after " + std::to_string(timeout_ms / 1000) +
               " s and was ended";
    } else if (state == 2) {
      error = shared->error;
    } else if (state == 0) {
      error += "; the child writing it ended without finishing";
    }
    if (!reaped) {
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    ok = state == 1;
  }
  shared->~Shared();
  munmap(page, sizeof(Shared));
  return ok;
}

}  // namespace sonde
