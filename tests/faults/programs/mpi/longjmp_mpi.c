// An MPI host under a storm of timer signals whose handler siglongjmps out of wherever the thread
// is (issue 37), as longjmp_storm.c does to BLAS: for about a second a timer fires every 20 us
// while the one rank calls MPI_Allreduce in a loop, so thousands of jumps land inside the MPI
// wrapper, at every step of it. Then the timer stops and 1000 MPI_Barrier and 10 MPI_Bcast calls
// run, routines the storm never called: each is counted in the profile, whatever the jumps left.
// Run alone (MPI's singleton start), one rank.
#include <mpi.h>
#include <stdio.h>

#include "../jump_storm.h"

static double one = 1, sum = 0;

static void allreduce(void) { MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  storm_prepare(0);
  // The first call binds the symbols and sets the collective up: not to be interrupted.
  allreduce();
  volatile double first = sum;
  long finished = 0;
  long jumps = storm_run(allreduce, &finished);
  for (int i = 0; i < 1000; ++i) MPI_Barrier(MPI_COMM_WORLD);
  double value = 0;
  for (int i = 0; i < 10; ++i) {
    value = i + 1;
    MPI_Bcast(&value, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }
  // What the timer's luck decides on stderr, the rest on stdout, the same under sonde.
  fprintf(stderr, "jumps %ld allreduce %ld finished\n", jumps, finished);
  printf("allreduce %s, then barrier 1000, bcast 10 (%.0f)\n", first == 1 ? "right" : "wrong",
         value);
  MPI_Finalize();
  return 0;
}
