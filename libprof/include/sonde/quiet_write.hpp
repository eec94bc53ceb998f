// Writing sonde's own lines onto descriptors that belong to someone else (the host's stderr, the
// stderr and stdout `sonde run` shares with its command).
#pragma once

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <string_view>

namespace sonde {

// Writes all of `text` to `fd`, or as much as the descriptor takes; never raises SIGPIPE and
// never fails loudly. A pipe whose reader has gone (`prog 2>&1 | head -1`) would otherwise end
// the writer by SIGPIPE: a host that never wrote there itself, or `sonde run` after its command
// ended well, would die of sonde's message and change the status the caller sees. SIGPIPE is
// held for the write and, if this write raised it, taken. A closed descriptor is EBADF, skipped.
// Async-signal-safe.
inline bool quiet_write(int fd, std::string_view text) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  sigset_t pending;
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  int saved_errno = errno;
  bool whole = true;
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      whole = false;
      if (n < 0 && errno == EPIPE && !was_pending) {
        timespec now{0, 0};
        sigtimedwait(&pipe_only, nullptr, &now);
      }
      break;
    }
    p += n;
    left -= size_t(n);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved_errno;
  return whole;
}

}  // namespace sonde
