// Helper processes that end when this process's end of a pipe to them closes: multiprocessing's
// resource tracker and forkserver, which read until EOF and then end. The kernel closes that end
// as this process exits, after libsonde's final flush, so their own final flushes came after
// `python3 -m sonde` had returned: a reader at once met "database is locked", or a report whose
// warning said those processes had been killed. Named by the Python hook at the interpreter's
// last atexit call, each is ended by closing that end once the final flush is written, and
// waited for, so the run's file is whole when the command returns.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <vector>

namespace sonde {

class ExitHelpers {
 public:
  // `fd` this process's end of the pipe (a FIFO now), `pid` the helper (a child of this process:
  // nothing else is waited for). False, with nothing kept, where either is not so.
  bool add(int fd, pid_t pid);
  // Closes the ends still open as they were named, then waits for the helpers to end,
  // `budget_ms` in all (a helper that another process still holds the pipe for ends later).
  // Only in the process that named them: a fork child's inherited list is not its own.
  // Returns how many were still running when the budget ran out.
  int end_all(int budget_ms);

 private:
  struct Helper {
    int fd;
    pid_t pid, owner;
    dev_t dev;
    ino_t ino;
  };
  std::mutex mu_;
  std::vector<Helper> helpers_;
};

}  // namespace sonde
