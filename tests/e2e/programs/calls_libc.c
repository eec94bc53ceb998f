/* Calls into libc from a library's own C code, as a C extension makes them (torch's DataLoader
 * workers: sigaction, _exit): loaded by test_in_process.py with ctypes after an in-process
 * sonde, whose wrappers it must reach as under LD_PRELOAD. */
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Forks a child that ends by libc's _exit(status), called from here; the child's exit status,
 * -1 on error. */
int fork_child_exits(int status) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) _exit(status);
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Sets SIGTERM back to its default action with sigaction; 1 when reading it back gives the
 * default action (the program's view of its own disposition), 0 if not, -1 on error. */
int term_to_default(void) {
  struct sigaction act, now;
  memset(&act, 0, sizeof act);
  act.sa_handler = SIG_DFL;
  sigemptyset(&act.sa_mask);
  if (sigaction(SIGTERM, &act, NULL) != 0 || sigaction(SIGTERM, NULL, &now) != 0) return -1;
  return now.sa_handler == SIG_DFL;
}

/* dlopen by bare name, found only through this library's RUNPATH ($ORIGIN/origin_lib): glibc
 * takes the caller from dlopen's return address, which sonde's wrapper must leave the caller's.
 * liborigin_dep.so's answer (42), -1 where it was not found. */
int answer_beside(void) {
  void* h = dlopen("liborigin_dep.so", RTLD_NOW);
  if (!h) return -1;
  int (*answer)(void) = (int (*)(void))dlsym(h, "origin_dep_answer");
  return answer ? answer() : -2;
}
