#include "core/signal_block.hpp"

#include <pthread.h>

namespace sonde {

namespace {
// A fault in sonde's own code must still kill at once (blocked, it would kill without a
// flush, or hang): only the signals that come from outside are held back.
constexpr int kSynchronousSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};

// Blocks open on this thread. Counted once the mask is set and uncounted before it is put back,
// so a handler that runs in between sees 0 and blocks for itself.
thread_local int t_depth __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

AsyncSignalBlock::AsyncSignalBlock() {
  if (t_depth > 0) {  // an outer block holds them already: no system call
    ++t_depth;
    return;
  }
  sigset_t block;
  sigfillset(&block);
  for (int sig : kSynchronousSignals) sigdelset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old_);
  t_depth = 1;
}

AsyncSignalBlock::~AsyncSignalBlock() {
  if (t_depth > 1) {
    --t_depth;
    return;
  }
  t_depth = 0;
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace sonde
