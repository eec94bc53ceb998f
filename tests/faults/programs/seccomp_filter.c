// A host that sandboxes itself with a seccomp-bpf filter that ends it (ACTION) at any open or
// openat, as a program that has read what it needs does before it handles untrusted input.
//   seccomp_filter HOW ACTION
//     HOW     prctl      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER) on the main thread
//             syscall    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER), as libseccomp does
//             tsync      the same with SECCOMP_FILTER_FLAG_TSYNC: every thread of the process
//             thread     a second thread filters itself (prctl), then ends; main goes on
//             refused    prctl with an empty program, which the kernel refuses (EINVAL)
//             raw        the seccomp system call by a syscall instruction of its own, past any
//                        wrapper (as static helpers and sandboxing runtimes do), 1.2 s in
//             plain      no filter
//     ACTION  kill-process | kill-thread | trap   what the filter does at an open
//     AT      open (the default: open and openat) | read   the system calls it does that at
// 3 GEMMs, the filter, 2 GEMMs (1 before and 2 after it on the thread for `thread`), then a
// last GEMM on main, "done" through stdio and exit(0): its atexit handlers and stdio's flush
// run under the filter.
#include <cblas.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void gemms(int n) {
  static __thread float a[16 * 16], c[16 * 16];
  for (int i = 0; i < n; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 16, 16, 16, 1.0f, a, 16, a, 16, 0.0f, c,
                16);
}

static const char* g_how;
static unsigned g_action;
static unsigned g_nr_a = __NR_openat, g_nr_b = __NR_open;

static void filter(void) {
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, g_nr_a, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, g_nr_b, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, g_action),
  };
  int refused = strcmp(g_how, "refused") == 0;
  struct sock_fprog prog = {refused ? 0 : sizeof code / sizeof code[0], code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    perror("no_new_privs");
    exit(99);
  }
  long rc;
  if (strcmp(g_how, "raw") == 0) {
    long op = SECCOMP_SET_MODE_FILTER, flags = 0;
    struct sock_fprog* arg = &prog;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "0"((long)SYS_seccomp), "D"(op), "S"(flags), "d"(arg)
                     : "rcx", "r11", "memory");
  } else if (strcmp(g_how, "syscall") == 0)
    rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
  else if (strcmp(g_how, "tsync") == 0)
    rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
  else
    rc = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
  if ((rc != 0) != refused) {
    fprintf(stderr, "seccomp: %ld %s\n", rc, strerror(errno));
    exit(98);
  }
}

static void* sandboxed_thread(void* arg) {
  (void)arg;
  gemms(1);
  filter();
  gemms(2);
  return NULL;
}

int main(int argc, char** argv) {
  g_how = argc > 1 ? argv[1] : "prctl";
  const char* action = argc > 2 ? argv[2] : "kill-process";
  g_action = strcmp(action, "kill-thread") == 0 ? SECCOMP_RET_KILL_THREAD
             : strcmp(action, "trap") == 0      ? SECCOMP_RET_TRAP
                                                : SECCOMP_RET_KILL_PROCESS;
  if (argc > 3 && strcmp(argv[3], "read") == 0) g_nr_a = g_nr_b = __NR_read;
  gemms(3);
  if (strcmp(g_how, "thread") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, sandboxed_thread, NULL) != 0) return 97;
    pthread_join(t, NULL);
  } else if (strcmp(g_how, "plain") != 0) {
    if (strcmp(g_how, "raw") == 0) usleep(1200 * 1000);  // past a profiler's first flush (1 s)
    filter();
    gemms(2);
  }
  gemms(1);
  printf("done\n");
  return 0;
}
