/* A known sequence of MPI calls per step, for exact call counts and bytes (test_mpi.py):
 *   MPI_Allreduce of 1000 floats, MPI_Bcast of 10 doubles from rank 0, a ring exchange of 100 ints
 *   (--blocking: MPI_Sendrecv after the compute; else MPI_Irecv + MPI_Isend, the compute while
 *   they are in flight, then MPI_Waitall), MPI_Barrier.
 * --complete KIND completes the exchange with MPI_Wait, Waitany, Waitsome, Test, Testall, Testany
 * or Testsome instead of Waitall; --after-ms M computes M ms more once nothing is in flight.
 * --burst N first posts N receives and N sends to itself, then one MPI_Waitall.
 * The nonblocking exchange prints the time from before its requests were posted to after they
 * completed, summed over steps: no request of it can be in flight outside that window.
 * --rank0-ms M makes rank 0 compute M ms more per step, so the others wait for it: communication
 * that is exposed however the ranks happen to be scheduled. --rank-ms M makes rank r compute r * M
 * ms more per step (in the same phase): every rank's share differs (tests/viewer/ranks.test.mjs).
 * Usage: mpi_calls [--steps N] [--blocking] [--compute-ms M] [--complete KIND] [--after-ms M]
 *                  [--burst N] [--rank0-ms M] [--rank-ms M] [--regions]
 * --regions names two phases: "compute" (rank 0's extra compute) and "allreduce" (the
 * MPI_Allreduce alone, where the other ranks wait for rank 0). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sonde/sonde.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Work that keeps the CPU busy for about `ms` milliseconds, outside any MPI call. */
static double compute(double ms) {
  volatile double x = 0;
  double end = now_s() + ms * 1e-3;
  while (now_s() < end)
    for (int i = 0; i < 1000; ++i) x += i * 1e-9;
  return x;
}

/* Completes both requests of the exchange the way `kind` names. */
static void complete(const char* kind, MPI_Request req[2]) {
  int flag = 0, index, outcount, indices[2];
  if (!strcmp(kind, "waitall")) {
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
  } else if (!strcmp(kind, "wait")) {
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    MPI_Wait(&req[1], MPI_STATUS_IGNORE);
  } else if (!strcmp(kind, "waitany")) {
    MPI_Waitany(2, req, &index, MPI_STATUS_IGNORE);
    MPI_Waitany(2, req, &index, MPI_STATUS_IGNORE);
  } else if (!strcmp(kind, "waitsome")) {
    for (int done = 0; done < 2; done += outcount)
      MPI_Waitsome(2, req, &outcount, indices, MPI_STATUSES_IGNORE);
  } else if (!strcmp(kind, "test")) {
    for (int i = 0; i < 2; ++i)
      for (flag = 0; !flag;) MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
  } else if (!strcmp(kind, "testall")) {
    while (!flag) MPI_Testall(2, req, &flag, MPI_STATUSES_IGNORE);
  } else if (!strcmp(kind, "testany")) {
    for (int done = 0; done < 2;) {
      MPI_Testany(2, req, &index, &flag, MPI_STATUS_IGNORE);
      done += flag && index != MPI_UNDEFINED;
    }
  } else if (!strcmp(kind, "testsome")) {
    for (int done = 0; done < 2;) {
      MPI_Testsome(2, req, &outcount, indices, MPI_STATUSES_IGNORE);
      if (outcount != MPI_UNDEFINED) done += outcount;
    }
  }
}

int main(int argc, char** argv) {
  int steps = 5, blocking = 0, burst = 0, regions = 0;
  double compute_ms = 5, after_ms = 0, rank0_ms = 0, rank_ms = 0;
  const char* kind = "waitall";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--blocking"))
      blocking = 1;
    else if (!strcmp(argv[i], "--compute-ms") && i + 1 < argc)
      compute_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--after-ms") && i + 1 < argc)
      after_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--complete") && i + 1 < argc)
      kind = argv[++i];
    else if (!strcmp(argv[i], "--burst") && i + 1 < argc)
      burst = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rank0-ms") && i + 1 < argc)
      rank0_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--rank-ms") && i + 1 < argc)
      rank_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--regions"))
      regions = 1;
  }
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float grad[1000], sum[1000];
  double params[10];
  int out[100], in[100];
  for (int i = 0; i < 1000; ++i) grad[i] = (float)(rank + i);
  for (int i = 0; i < 10; ++i) params[i] = rank == 0 ? i : 0;
  for (int i = 0; i < 100; ++i) out[i] = rank * 1000 + i;
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  double checksum = 0;
  double window_s = 0; /* from before each exchange is posted to after it completes */
  if (burst > 0) {
    MPI_Request* reqs = malloc(sizeof(MPI_Request) * 2 * burst);
    int* bufs = calloc(2 * (size_t)burst, sizeof(int));
    for (int i = 0; i < burst; ++i)
      MPI_Irecv(&bufs[i], 1, MPI_INT, rank, 100 + i, MPI_COMM_WORLD, &reqs[i]);
    for (int i = 0; i < burst; ++i)
      MPI_Isend(&bufs[burst + i], 1, MPI_INT, rank, 100 + i, MPI_COMM_WORLD, &reqs[burst + i]);
    MPI_Waitall(2 * burst, reqs, MPI_STATUSES_IGNORE);
    free(reqs);
    free(bufs);
  }
  if (rank != 0) rank0_ms = 0;
  for (int s = 0; s < steps; ++s) {
    if (regions) sonde_region_begin("compute");
    checksum += compute(rank0_ms + rank * rank_ms);
    if (regions) sonde_region_end("compute");
    if (regions) sonde_region_begin("allreduce");
    MPI_Allreduce(grad, sum, 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (regions) sonde_region_end("allreduce");
    MPI_Bcast(params, 10, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (blocking) {
      checksum += compute(compute_ms);
      MPI_Sendrecv(out, 100, MPI_INT, right, 7, in, 100, MPI_INT, left, 7, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    } else {
      MPI_Request req[2];
      double posted = now_s();
      MPI_Irecv(in, 100, MPI_INT, left, 7, MPI_COMM_WORLD, &req[0]);
      MPI_Isend(out, 100, MPI_INT, right, 7, MPI_COMM_WORLD, &req[1]);
      checksum += compute(compute_ms);
      complete(kind, req);
      window_s += now_s() - posted;
      checksum += compute(after_ms);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  printf("rank %d of %d: sum[1]=%g params[9]=%g in[0]=%d\n", rank, size, sum[1], params[9], in[0]);
  if (!blocking) printf("rank %d: exchange window %.6f s\n", rank, window_s);
  MPI_Finalize();
  return checksum < 0;
}
