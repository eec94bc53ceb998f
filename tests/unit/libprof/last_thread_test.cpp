// alone_in_process decides when sonde's flusher ends a process: never while another thread
// lives, and also once the main thread is a zombie (pthread_exit) beside it.
#include "runtime/last_thread.hpp"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace {

TEST(LastThread, NotAloneWhileAnotherThreadRuns) {
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop) usleep(1000);
  });
  EXPECT_FALSE(sonde::alone_in_process());
  stop = true;
  other.join();
  // join returns once the thread's tid is cleared; the kernel may list the task a moment
  // longer (seen once at load 14), so allow it a second to go.
  bool alone = sonde::alone_in_process();
  for (int i = 0; i < 1000 && !alone; ++i) {
    usleep(1000);
    alone = sonde::alone_in_process();
  }
  EXPECT_TRUE(alone);
}

// In a child: a thread waits until the main thread has ended (the exit system call alone, as
// pthread_exit ends it, without unwinding through the test framework), then reports through
// its exit status whether it found itself alone.
TEST(LastThread, AloneBesideAZombieMainThread) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pthread_t t;
    pthread_create(
        &t, nullptr,
        [](void*) -> void* {
          for (int i = 0; i < 2000 && !sonde::alone_in_process(); ++i) usleep(1000);
          _exit(sonde::alone_in_process() ? 0 : 1);
        },
        nullptr);
    syscall(SYS_exit, 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
