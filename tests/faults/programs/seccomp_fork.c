// A host that sandboxes itself with a seccomp-bpf filter that ends it at one system call glibc's
// fork and signal delivery do not make, then forks or takes a signal (issue 37): alone it goes
// on, or dies of the signal; a profiler's fork handlers or signal handler must not make that
// call on the thread.
//   seccomp_fork AT WHAT
//     AT    sigprocmask | getpid | sigaction | tgkill | openat
//                      the system call the filter kills the process at
//     WHAT  fork       fork; the child exits 7, the parent waits for it
//           resethand  a SIGUSR1 handler installed with SA_RESETHAND, the signal sent to the
//                      thread by tkill (raise asks getpid)
//           default    SIGTERM, left at its default, sent to the process by kill: it dies of it
// 2 GEMMs before the filter, 1 after; "done" and the child's status through stdio, _exit(0).
#include <cblas.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t g_handled;

static void on_usr1(int sig) { g_handled = sig; }

static void gemm(void) {
  static float a[16 * 16], c[16 * 16];
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 16, 16, 16, 1.0f, a, 16, a, 16, 0.0f, c,
              16);
}

int main(int argc, char** argv) {
  const char* at = argc > 1 ? argv[1] : "sigprocmask";
  unsigned nr = strcmp(at, "getpid") == 0      ? __NR_getpid
                : strcmp(at, "sigaction") == 0 ? __NR_rt_sigaction
                : strcmp(at, "tgkill") == 0    ? __NR_tgkill
                : strcmp(at, "openat") == 0    ? __NR_openat
                                               : __NR_rt_sigprocmask;
  const char* what = argc > 2 ? argv[2] : "fork";
  gemm();
  gemm();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGUSR1, &sa, NULL);
  long tid = syscall(SYS_gettid);
  pid_t pid = getpid();
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof filter / sizeof filter[0], filter};
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return 2;
  gemm();
  if (strcmp(what, "default") == 0) {
    printf("before the signal\n");
    fflush(stdout);
    kill(pid, SIGTERM);
    printf("done, alive after SIGTERM\n");
  } else if (strcmp(what, "resethand") == 0) {
    syscall(SYS_tkill, tid, SIGUSR1);
    printf("done, handler ran for signal %d\n", (int)g_handled);
  } else {
    pid_t child = fork();
    if (child == 0) _exit(7);
    int status = 0;
    waitpid(child, &status, 0);
    printf("done, child %s %d\n", WIFEXITED(status) ? "exited" : "killed by",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  }
  fflush(stdout);
  _exit(0);
}
