// A thread's CPU time (user and system, the scheduler's count), read by its kernel id from any
// thread of the process: what tells a thread that waits for work from one that works where no
// wrapper sees it, both of which show as time outside any measured call.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>

namespace sonde {

// -1 where it cannot be read (the thread is gone). The clock id is the kernel's encoding of a
// thread's scheduler clock (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)), as glibc's
// pthread_getcpuclockid builds it from a pthread_t: by tid, the flusher reads another thread's
// without holding a pthread_t that may have been freed.
inline int64_t thread_cpu_ns(pid_t tid) {
  constexpr clockid_t kPerThread = 4, kSched = 2;
  auto clock = clockid_t((~unsigned(tid)) << 3) | kPerThread | kSched;
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return -1;
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The calling thread's own.
inline int64_t own_cpu_ns() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace sonde
