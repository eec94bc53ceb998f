// The host's view of its signal dispositions (process/signals.cpp), with no runtime started:
// what the host sets is what it reads back, while the kernel holds sonde's handler underneath.
#include "process/signals.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

namespace sonde {
namespace {

std::atomic<int> g_handled{0};

void count(int) { g_handled.fetch_add(1); }

sighandler_t host_handler(int sig) {
  struct sigaction now {};
  EXPECT_EQ(host_sigaction(sig, nullptr, &now), 0);
  return now.sa_handler;
}

sighandler_t kernel_handler(int sig) {
  struct sigaction now {};
  EXPECT_EQ(real_sigaction(sig, nullptr, &now), 0);
  return now.sa_handler;
}

void set(int sig, sighandler_t handler, int flags = 0) {
  struct sigaction a {};
  a.sa_handler = handler;
  a.sa_flags = flags;
  sigemptyset(&a.sa_mask);
  ASSERT_EQ(host_sigaction(sig, &a, nullptr), 0);
}

class Signals : public ::testing::Test {
 protected:
  void SetUp() override {
    install_signal_handlers();
    g_handled = 0;
  }
  void TearDown() override { set(SIGUSR1, SIG_DFL); }
};

TEST_F(Signals, TheHostSeesTheDefaultWhileSondesHandlerIsInTheKernel) {
  EXPECT_EQ(host_handler(SIGUSR1), SIG_DFL);
  EXPECT_NE(kernel_handler(SIGUSR1), SIG_DFL);
  EXPECT_NE(kernel_handler(SIGUSR1), SIG_IGN);
}

TEST_F(Signals, AHostHandlerIsReadBackAndRunsOncePerSignal) {
  set(SIGUSR1, count);
  EXPECT_EQ(host_handler(SIGUSR1), count);
  EXPECT_NE(kernel_handler(SIGUSR1), count);
  raise(SIGUSR1);
  raise(SIGUSR1);
  EXPECT_EQ(g_handled.load(), 2);
}

TEST_F(Signals, IgnoredIsIgnoredInTheKernelToo) {
  set(SIGUSR1, SIG_IGN);
  EXPECT_EQ(host_handler(SIGUSR1), SIG_IGN);
  EXPECT_EQ(kernel_handler(SIGUSR1), SIG_IGN);  // inherited across exec as without sonde
  raise(SIGUSR1);
  set(SIGUSR1, SIG_DFL);
  EXPECT_NE(kernel_handler(SIGUSR1), SIG_IGN);
}

TEST_F(Signals, ResetHandResetsTheHostsViewNotSondesHandler) {
  set(SIGUSR1, count, SA_RESETHAND);
  raise(SIGUSR1);
  EXPECT_EQ(g_handled.load(), 1);
  EXPECT_EQ(host_handler(SIGUSR1), SIG_DFL);
  EXPECT_NE(kernel_handler(SIGUSR1), SIG_DFL);  // a re-raise still finds sonde first
}

TEST_F(Signals, SignalsThatDoNotEndAProcessAreLeftToTheKernel) {
  set(SIGCHLD, count);
  EXPECT_EQ(kernel_handler(SIGCHLD), count);
  set(SIGCHLD, SIG_DFL);
}

// Chaining to the handler it replaced: old is SIG_DFL, so the chain restores it and re-raises.
struct sigaction g_old;
void chain(int sig) {
  g_handled.fetch_add(1);
  if (g_handled.load() > 100) _exit(99);  // a loop back into this handler
  ASSERT_EQ(g_old.sa_handler, SIG_DFL);
  set(sig, SIG_DFL);
  raise(sig);
}

TEST_F(Signals, AHandlerThatChainsToTheDefaultDiesOfTheSignal) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct sigaction a {};
    a.sa_handler = chain;
    sigemptyset(&a.sa_mask);
    host_sigaction(SIGUSR1, &a, &g_old);
    raise(SIGUSR1);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGUSR1);
}

}  // namespace
}  // namespace sonde
