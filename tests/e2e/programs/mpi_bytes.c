// The MPI calls whose bytes are not their send arguments' (test_mpi_bytes.py): the v-variants
// and all-to-alls in place, where MPI reads the receive counts; receives into a buffer larger
// than the message, blocking (what arrived counts) and nonblocking (the buffer posted); and
// persistent requests made by the main thread and started by another.
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static MPI_Request persistent[2];

static void* start_them(void* arg) {
  (void)arg;
  MPI_Startall(2, persistent);
  MPI_Waitall(2, persistent, MPI_STATUSES_IGNORE);
  return NULL;
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  double* buf = calloc(200000, sizeof(double));
  int* counts = malloc(n * sizeof(int));
  int* displs = malloc(n * sizeof(int));
  int* tens = malloc(n * sizeof(int));
  int* tens_at = malloc(n * sizeof(int));
  int total = 0;
  for (int i = 0; i < n; ++i) {
    counts[i] = 100 * (i + 1);  // rank i's block: 800 (i + 1) bytes of doubles
    displs[i] = total;
    total += counts[i];
    tens[i] = 10;
    tens_at[i] = 10 * i;
  }
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_DOUBLE,
                 MPI_COMM_WORLD);
  if (me == 0)
    MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_DOUBLE, 0,
                MPI_COMM_WORLD);
  else
    MPI_Gatherv(buf, counts[me], MPI_DOUBLE, NULL, NULL, NULL, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (me == 0)
    MPI_Scatterv(buf, counts, displs, MPI_DOUBLE, MPI_IN_PLACE, 0, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  else
    MPI_Scatterv(NULL, NULL, NULL, MPI_DOUBLE, buf, counts[me], MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, buf, tens, tens_at, MPI_DOUBLE,
                MPI_COMM_WORLD);
  MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, 5, MPI_INT, MPI_COMM_WORLD);

  // Rank 0 sends 3 messages of 10 doubles to rank 1, which receives each into room for 100,000:
  // once with MPI_STATUS_IGNORE, once with a status, once nonblocking.
  int received = 0;
  if (me == 0 && n > 1) {
    for (int i = 0; i < 3; ++i) MPI_Send(buf, 10, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD);
  } else if (me == 1) {
    MPI_Status status;
    MPI_Recv(buf, 100000, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(buf, 100000, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, &status);
    MPI_Get_count(&status, MPI_BYTE, &received);
    MPI_Request r;
    MPI_Irecv(buf, 100000, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  }

  // A ring of 50 doubles through persistent requests the main thread made, started by another.
  MPI_Recv_init(buf + 150000, 50, MPI_DOUBLE, (me - 1 + n) % n, 9, MPI_COMM_WORLD, &persistent[0]);
  MPI_Send_init(buf + 160000, 50, MPI_DOUBLE, (me + 1) % n, 9, MPI_COMM_WORLD, &persistent[1]);
  pthread_t worker;
  pthread_create(&worker, NULL, start_them, NULL);
  pthread_join(worker, NULL);
  MPI_Request_free(&persistent[0]);
  MPI_Request_free(&persistent[1]);

  if (me == 1) printf("rank 1 received %d bytes\n", received);
  MPI_Finalize();
  free(buf);
  free(counts);
  free(displs);
  free(tens);
  free(tens_at);
  return 0;
}
