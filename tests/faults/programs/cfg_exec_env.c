// cfg_exec_env PROGRAM ARGS...: execs PROGRAM with an environment of its own making, holding only
// LD_PRELOAD=libm.so.6 (a library the child asks for itself) and PATH: the child must stay
// profiled.
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  char* env[] = {"LD_PRELOAD=libm.so.6", "PATH=/usr/bin:/bin", NULL};
  execve(argv[1], argv + 1, env);
  perror("execve");
  return 127;
}
