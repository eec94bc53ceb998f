// The flusher thread's wake-up: rung by the host's threads and signal handlers, and answered
// too when a watched thread of the process ends, however it ends. The kernel clears a thread's
// tid word and wakes it when the thread exits (CLONE_CHILD_CLEARTID, which glibc asks for every
// thread): so a thread that leaves by a raw SYS_exit, running none of glibc's or sonde's code
// on its way out (a SECCOMP_MODE_STRICT sandbox ends so), is still seen.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstdint>

namespace sonde {

// The calling thread's tid word (prctl PR_GET_TID_ADDRESS) and its tid: what Doorbell::wait
// watches. addr is null where the kernel does not say (CONFIG_CHECKPOINT_RESTORE off); tid 0:
// no thread watched.
struct WatchedThread {
  const uint32_t* addr = nullptr;
  uint32_t tid = 0;
};
WatchedThread this_thread_to_watch();

class Doorbell {
 public:
  enum class Woke { kRung, kTimeout, kWatchedEnded };

  void reset();  // in a fork child, before its flusher starts
  // Async-signal-safe: an atomic add and a futex wake.
  void ring();
  // Until a ring() not yet answered, the deadline (CLOCK_MONOTONIC; null: none), or the end of
  // `watched`. Never reads the watched word itself (its thread's memory may
  // be gone once it has ended): the kernel compares it. Where the kernel cannot wait on two
  // words (futex_waitv, Linux 5.16), the watched thread is looked at in /proc every 0.25 s.
  Woke wait(const timespec* deadline, WatchedThread watched);

 private:
  std::atomic<uint32_t> rings_{0};
  uint32_t answered_ = 0;  // the flusher's own
};

}  // namespace sonde
