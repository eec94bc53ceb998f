// core/signal_block: a block inside another on the same thread leaves the mask to the outer one
// (no system call), and the outermost puts back what was there.
#include "core/signal_block.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include "sonde/probe.hpp"

namespace sonde {
namespace {

bool blocked(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

void unblock(int sig) {
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
}

TEST(AsyncSignalBlock, TheOutermostBlocksAndRestores) {
  ASSERT_FALSE(blocked(SIGTERM));
  {
    AsyncSignalBlock outer;
    EXPECT_TRUE(blocked(SIGTERM));
    EXPECT_FALSE(blocked(SIGSEGV));  // a fault in sonde's code must still kill at once
    {
      AsyncSignalBlock inner;
      EXPECT_TRUE(blocked(SIGTERM));
    }
    EXPECT_TRUE(blocked(SIGTERM));
  }
  EXPECT_FALSE(blocked(SIGTERM));
}

// An inner block sets no mask of its own: a signal the outer scope let through stays let through
// (each inner block used to block and unblock again, two system calls).
TEST(AsyncSignalBlock, AnInnerBlockMakesNoSystemCall) {
  {
    AsyncSignalBlock outer;
    unblock(SIGUSR2);
    {
      AsyncSignalBlock inner;
      EXPECT_FALSE(blocked(SIGUSR2));
      EXPECT_TRUE(blocked(SIGTERM));
    }
  }
  EXPECT_FALSE(blocked(SIGUSR2));
  EXPECT_FALSE(blocked(SIGTERM));
}

TEST(AsyncSignalBlock, ARoutineBatchHoldsOneBlockForItsRegistrations) {
  ASSERT_FALSE(blocked(SIGINT));
  {
    RoutineBatch batch;
    EXPECT_TRUE(blocked(SIGINT));
    register_routine({"batch_test_routine", "region", ""});  // no runtime here: id 0
    EXPECT_TRUE(blocked(SIGINT));
  }
  EXPECT_FALSE(blocked(SIGINT));
}

}  // namespace
}  // namespace sonde
