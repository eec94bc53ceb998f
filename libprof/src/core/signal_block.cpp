#include "core/signal_block.hpp"

#include <pthread.h>

namespace sonde {

namespace {
// The signals sonde flushes on that arrive from outside, at any point of the host's code.
constexpr int kAsyncSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXCPU};
}  // namespace

AsyncSignalBlock::AsyncSignalBlock() {
  sigset_t block;
  sigemptyset(&block);
  for (int sig : kAsyncSignals) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old_);
}

AsyncSignalBlock::~AsyncSignalBlock() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

}  // namespace sonde
