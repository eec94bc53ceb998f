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
  // `fd` this process's end of the pipe, `pid` the helper (a child of this process: nothing
  // else is waited for; false, with nothing kept, otherwise). An `fd` that is no FIFO now was
  // closed by the program, which gave the helper its EOF: the helper is waited for all the same.
  bool add(int fd, pid_t pid);
  // Closes the ends still open as they were named, then waits for the helpers to end,
  // `budget_ms` in all. A helper idle 50 ms after the close (neither running nor using CPU) got
  // no EOF, as a fork child of this process holds a copy of the end: it is not waited for.
  // Only in the process that named them: a fork child's inherited list is not its own. Takes
  // no memory (the signal flush calls it while another thread may hold the heap's lock).
  // Returns how many were still running when it stopped waiting.
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
