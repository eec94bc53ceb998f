/* Calls MPI_Send before MPI_Init, which Open MPI refuses with a message naming MPI_Send and an
 * abort: under sonde the message and the exit status must be the same (sonde's byte model must not
 * ask MPI for a datatype's size before MPI is initialized). */
#include <mpi.h>
#include <stdio.h>

int main(void) {
  int x = 1;
  int rc = MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
  printf("MPI_Send returned %d\n", rc);
  return 0;
}
