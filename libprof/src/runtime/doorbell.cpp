#include "runtime/doorbell.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace sonde {
namespace {

#ifndef SYS_futex_waitv
constexpr long SYS_futex_waitv = 449;
#endif
constexpr uint32_t kFutex32 = 2;  // FUTEX_32: the futex2 flag of a 32-bit word
constexpr long kFallbackPollNs = 250'000'000;

std::atomic<bool> g_no_waitv{false};

// Whether /proc says thread `tid` of this process has ended ('Z' for a leader that stays a
// zombie until the process ends, or gone).
bool proc_says_ended(uint32_t tid) {
  char path[64], buf[512];
  std::snprintf(path, sizeof path, "/proc/self/task/%u/stat", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');
  return paren != nullptr && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

bool before(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

}  // namespace

WatchedThread this_thread_to_watch() {
  WatchedThread w;
  w.tid = uint32_t(syscall(SYS_gettid));
  int* addr = nullptr;
  if (prctl(PR_GET_TID_ADDRESS, &addr, 0, 0, 0) == 0)
    w.addr = reinterpret_cast<const uint32_t*>(addr);
  return w;
}

void Doorbell::reset() {
  rings_.store(0);
  answered_ = 0;
}

void Doorbell::ring() {
  rings_.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &rings_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

Doorbell::Woke Doorbell::wait(const timespec* deadline, WatchedThread watched) {
  for (;;) {
    uint32_t rings = rings_.load(std::memory_order_acquire);
    if (rings != answered_) {
      answered_ = rings;
      return Woke::kRung;
    }
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (deadline != nullptr && !before(now, *deadline)) return Woke::kTimeout;
    if (watched.addr != nullptr && !g_no_waitv.load(std::memory_order_relaxed)) {
      // The tid word is waited on as a shared futex: the kernel's wake at a thread's end is.
      struct futex_waitv waiters[2] = {};
      waiters[0].val = rings;
      waiters[0].uaddr = uintptr_t(&rings_);
      waiters[0].flags = kFutex32 | FUTEX_PRIVATE_FLAG;
      waiters[1].val = watched.tid;
      waiters[1].uaddr = uintptr_t(watched.addr);
      waiters[1].flags = kFutex32;
      long rc = syscall(SYS_futex_waitv, waiters, 2, 0, deadline, CLOCK_MONOTONIC);
      if (rc == 1) return Woke::kWatchedEnded;
      if (rc == 0 || errno == EINTR) continue;
      if (errno == ETIMEDOUT) return Woke::kTimeout;
      // A value that no longer matched: ours (rung meanwhile) or the thread's (it has ended).
      if (errno == EAGAIN) {
        if (rings_.load(std::memory_order_acquire) != rings) continue;
        return Woke::kWatchedEnded;
      }
      if (errno == EFAULT) return Woke::kWatchedEnded;    // its memory is gone with it
      g_no_waitv.store(true, std::memory_order_relaxed);  // ENOSYS: an older kernel
      continue;
    }
    // One word: ours, with a deadline no later than the next look at the watched thread.
    timespec until{};
    const timespec* limit = deadline;
    if (watched.tid != 0) {
      until = now;
      until.tv_nsec += kFallbackPollNs;
      if (until.tv_nsec >= 1'000'000'000) {
        until.tv_sec += 1;
        until.tv_nsec -= 1'000'000'000;
      }
      if (deadline == nullptr || before(until, *deadline)) limit = &until;
    }
    long rc = syscall(SYS_futex, &rings_, FUTEX_WAIT_BITSET_PRIVATE, rings, limit, nullptr,
                      FUTEX_BITSET_MATCH_ANY);
    if (rc != 0 && errno == ETIMEDOUT && limit == &until && watched.tid != 0 &&
        proc_says_ended(watched.tid))
      return Woke::kWatchedEnded;
  }
}

}  // namespace sonde
