// Keeping a flush-triggering signal away while a host thread holds one of sonde's locks.
#pragma once

#include <signal.h>

namespace sonde {

// Held by a host thread while it holds one of sonde's locks: a SIGTERM handled meanwhile would
// wait for a flush that needs that very lock. Blocked signals are delivered at the end of the
// scope. Slow paths only (one system call each way); a block inside another on the same thread
// makes none (RoutineBatch: a wrapper's 50 routines, one pair instead of 50).
class AsyncSignalBlock {
 public:
  AsyncSignalBlock();
  ~AsyncSignalBlock();
  AsyncSignalBlock(const AsyncSignalBlock&) = delete;
  AsyncSignalBlock& operator=(const AsyncSignalBlock&) = delete;

 private:
  sigset_t old_;
};

}  // namespace sonde
