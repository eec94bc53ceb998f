#include "core/signal_block.hpp"

#include <pthread.h>

namespace sonde {

namespace {
// A fault in sonde's own code must still kill at once (blocked, it would kill without a
// flush, or hang): only the signals that come from outside are held back.
constexpr int kSynchronousSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
}  // namespace

AsyncSignalBlock::AsyncSignalBlock() {
  sigset_t block;
  sigfillset(&block);
  for (int sig : kSynchronousSignals) sigdelset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old_);
}

AsyncSignalBlock::~AsyncSignalBlock() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

}  // namespace sonde
