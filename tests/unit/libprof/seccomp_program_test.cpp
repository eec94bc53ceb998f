// A seccomp filter's program run as the kernel runs it (process/seccomp_program.cpp), and the
// signal handler's calls checked against it (process/signals.cpp). Each program below is also
// handed to the kernel in a fork child, where the kernel's own verdict is the reference: the
// child makes the call and reports how it ended.
#include "process/seccomp_program.hpp"

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "process/signals.hpp"

namespace sonde {
namespace {

constexpr uint32_t kNr = offsetof(seccomp_data, nr);
constexpr uint32_t kArch = offsetof(seccomp_data, arch);
constexpr uint32_t kArg0 = offsetof(seccomp_data, args[0]);

using Program = std::vector<sock_filter>;

seccomp_data call(long nr, uint64_t arg0 = 0) {
  seccomp_data d{};
  d.nr = int(nr);
  d.arch = seccomp_native_arch();
  d.args[0] = arg0;
  return d;
}

// Kills the process at `nr` (the rest allowed), after checking the architecture as filters do.
Program kill_at(long nr, uint32_t action = SECCOMP_RET_KILL_PROCESS) {
  return {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArch),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_native_arch(), 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNr),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, uint32_t(nr), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, action),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
}

// What the kernel does with `program` at getpid, in a child: 0 allowed, 1 refused with an errno,
// -SIG killed by SIG.
int kernel_answer_at_getpid(const Program& program) {
  pid_t child = fork();
  if (child == 0) {
    sock_fprog fprog{static_cast<unsigned short>(program.size()),
                     const_cast<sock_filter*>(program.data())};
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) _exit(3);
    long rc = syscall(SYS_getpid);
    _exit(rc < 0 ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
}

TEST(SeccompProgram, AnswersAsTheKernelDoesForEachAction) {
  for (uint32_t action : {SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO | EPERM}) {
    Program p = kill_at(SYS_getpid, action);
    EXPECT_FALSE(seccomp_allows(p, call(SYS_getpid)));
    EXPECT_TRUE(seccomp_allows(p, call(SYS_gettid)));
    EXPECT_EQ(*seccomp_verdict(p, call(SYS_getpid)), action);
    EXPECT_EQ(kernel_answer_at_getpid(p), action == SECCOMP_RET_KILL_PROCESS ? -SIGSYS : 1);
  }
  Program log = kill_at(SYS_getpid, SECCOMP_RET_LOG);
  EXPECT_TRUE(seccomp_allows(log, call(SYS_getpid)));
  EXPECT_EQ(kernel_answer_at_getpid(log), 0);
}

TEST(SeccompProgram, AnotherArchitectureIsKilledBeforeTheNumberIsRead) {
  seccomp_data d = call(SYS_gettid);
  d.arch = AUDIT_ARCH_I386;
  EXPECT_FALSE(seccomp_allows(kill_at(SYS_getpid), d));
}

TEST(SeccompProgram, ReadsArgumentsScratchAndAluAsTheKernel) {
  // Allows rt_sigaction only for signal numbers below 16, computed the long way: the argument
  // kept in scratch word 3, moved through X, shifted and masked.
  Program p = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNr),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigaction, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArg0),
      BPF_STMT(BPF_ST, 3),
      BPF_STMT(BPF_LDX | BPF_MEM, 3),
      BPF_STMT(BPF_MISC | BPF_TXA, 0),
      BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 4),
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0xff, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  EXPECT_TRUE(seccomp_allows(p, call(SYS_rt_sigaction, SIGTERM)));
  EXPECT_FALSE(seccomp_allows(p, call(SYS_rt_sigaction, SIGRTMIN + 2)));
  EXPECT_TRUE(seccomp_allows(p, call(SYS_getpid)));
  // RET A returns what was computed; a division by a zero X ends the program with 0 (kill).
  Program ret_a = {BPF_STMT(BPF_LD | BPF_IMM, SECCOMP_RET_ALLOW), BPF_STMT(BPF_RET | BPF_A, 0)};
  EXPECT_TRUE(seccomp_allows(ret_a, call(SYS_getpid)));
  Program div = {BPF_STMT(BPF_LDX | BPF_IMM, 0), BPF_STMT(BPF_LD | BPF_IMM, 7),
                 BPF_STMT(BPF_ALU | BPF_DIV | BPF_X, 0),
                 BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  EXPECT_EQ(*seccomp_verdict(div, call(SYS_getpid)), 0u);
}

TEST(SeccompProgram, AProgramTheKernelWouldRefuseAllowsNothing) {
  seccomp_data d = call(SYS_getpid);
  Program allow = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  EXPECT_TRUE(seccomp_allows(allow, d));
  EXPECT_FALSE(seccomp_allows({}, d));
  // A load past seccomp_data, or unaligned; a jump out; no return at the end; a packet load.
  for (Program bad : std::vector<Program>{
           {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, sizeof(seccomp_data)), allow[0]},
           {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2), allow[0]},
           {BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 5, 0), allow[0]},
           {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNr)},
           {BPF_STMT(BPF_LD | BPF_B | BPF_IND, 0), allow[0]},
           {BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 0), allow[0]},
       }) {
    EXPECT_FALSE(seccomp_verdict(bad, d).has_value());
    EXPECT_FALSE(seccomp_allows(bad, d));
  }
}

TEST(SeccompProgram, TheDefaultDeathSurvivesOnlyAFilterThatAllowsItsCalls) {
  install_signal_handlers();
  EXPECT_TRUE(default_death_survives(kill_at(SYS_openat)));
  for (long nr : {SYS_getpid, SYS_gettid, SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_tgkill})
    EXPECT_FALSE(default_death_survives(kill_at(nr))) << nr;
  // rt_sigaction refused for SIGTERM alone: that signal's death would not survive it.
  Program sigterm_only = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNr),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigaction, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArg0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SIGTERM, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  EXPECT_FALSE(default_death_survives(sigterm_only));
}

TEST(SeccompProgram, HandedBackTheKernelHoldsTheDefaultAndTakesItAgain) {
  install_signal_handlers();
  struct sigaction now {};
  ASSERT_EQ(real_sigaction(SIGTERM, nullptr, &now), 0);
  ASSERT_NE(now.sa_handler, SIG_DFL);  // sonde's
  hand_back_default_deaths(true);
  ASSERT_EQ(real_sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  // A host handler set meanwhile is still run through sonde's, SA_RESETHAND left to the kernel.
  struct sigaction host {};
  host.sa_handler = [](int) {};
  host.sa_flags = SA_RESETHAND;
  ASSERT_EQ(host_sigaction(SIGTERM, &host, nullptr), 0);
  ASSERT_EQ(real_sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_NE(now.sa_handler, host.sa_handler);
  EXPECT_NE(now.sa_flags & SA_RESETHAND, 0);
  raise(SIGTERM);  // the host's handler, then the kernel's reset
  ASSERT_EQ(real_sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  ASSERT_EQ(host_sigaction(SIGTERM, nullptr, &host), 0);
  EXPECT_EQ(host.sa_handler, SIG_DFL);
  hand_back_default_deaths(false);
  ASSERT_EQ(real_sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_NE(now.sa_handler, SIG_DFL);
  EXPECT_EQ(now.sa_flags & SA_RESETHAND, 0);
}

}  // namespace
}  // namespace sonde
