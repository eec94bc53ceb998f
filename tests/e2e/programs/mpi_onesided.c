/* Persistent requests and one-sided communication, a known number of times (test_mpi_onesided.py).
 * Per step:
 *   a ring exchange of 50 doubles through persistent requests made once (MPI_Recv_init +
 *   MPI_Send_init, then MPI_Startall and MPI_Waitall; with --start, MPI_Start on each);
 *   MPI_Put of 25 ints to the right neighbour's window and MPI_Get of 10 doubles from the left
 *   one's, between two MPI_Win_fence, with --compute-ms of work between the operations and the
 *   closing fence; MPI_Accumulate of 4 ints inside MPI_Win_lock / MPI_Win_unlock on rank 0's
 *   window.
 * Prints a checksum of every value transferred (not of the timed work), so a broken forward
 * would change it.
 * --regions puts each step in a sonde region "step" (for a collection window by steps).
 * Usage: mpi_onesided [--steps N] [--compute-ms M] [--start] [--regions] */
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

static void compute(double ms) {
  volatile double x = 0;
  double end = now_s() + ms * 1e-3;
  while (now_s() < end)
    for (int i = 0; i < 1000; ++i) x += i * 1e-9;
}

int main(int argc, char** argv) {
  int steps = 3, each = 0, regions = 0;
  double compute_ms = 5;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--compute-ms") && i + 1 < argc)
      compute_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--start"))
      each = 1;
    else if (!strcmp(argv[i], "--regions"))
      regions = 1;
  }
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;

  double out[50], in[50];
  MPI_Request req[2];
  MPI_Recv_init(in, 50, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &req[0]);
  MPI_Send_init(out, 50, MPI_DOUBLE, right, 3, MPI_COMM_WORLD, &req[1]);

  /* The window: 25 ints others put into, 10 doubles others read, 4 ints accumulated. */
  struct {
    int put[25];
    double get[10];
    int acc[4];
  } * mem;
  MPI_Win win;
  MPI_Win_allocate(sizeof *mem, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
  memset(mem, 0, sizeof *mem);
  MPI_Barrier(MPI_COMM_WORLD);

  double checksum = 0;
  int src[25], one[4] = {1, 1, 1, 1};
  double got[10];
  for (int s = 0; s < steps; ++s) {
    if (regions) sonde_region_begin("step");
    for (int i = 0; i < 50; ++i) out[i] = rank * 100 + s + i;
    if (each) {
      MPI_Start(&req[0]);
      MPI_Start(&req[1]);
    } else {
      MPI_Startall(2, req);
    }
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 50; ++i) checksum += in[i];

    for (int i = 0; i < 25; ++i) src[i] = rank + s + i;
    for (int i = 0; i < 10; ++i) mem->get[i] = rank * 10 + s + i;
    MPI_Win_fence(0, win);
    MPI_Put(src, 25, MPI_INT, right, 0, 25, MPI_INT, win);
    MPI_Get(got, 10, MPI_DOUBLE, left, (MPI_Aint)((char*)mem->get - (char*)mem), 10, MPI_DOUBLE,
            win);
    compute(compute_ms);
    MPI_Win_fence(0, win);
    for (int i = 0; i < 25; ++i) checksum += mem->put[i];
    for (int i = 0; i < 10; ++i) checksum += got[i];

    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Accumulate(one, 4, MPI_INT, 0, (MPI_Aint)((char*)mem->acc - (char*)mem), 4, MPI_INT,
                   MPI_SUM, win);
    MPI_Win_unlock(0, win);
    if (regions) sonde_region_end("step");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    for (int i = 0; i < 4; ++i) checksum += mem->acc[i];
  MPI_Request_free(&req[0]);
  MPI_Request_free(&req[1]);
  MPI_Win_free(&win);
  double total = 0;
  MPI_Reduce(&checksum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("checksum %.6f\n", total);
  MPI_Finalize();
  return 0;
}
