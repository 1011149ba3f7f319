// SPDX-License-Identifier: MIT
/*
 * A two-rank MPI ping-pong for the program matrix: rank 0 sends a message,
 * rank 1 returns it, ITERS times; the payload is checked each way.  Which
 * transport Open MPI picks (openib over softverbs0, UCX, shared memory) is
 * the matrix row's business, not this program's.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define ITERS 100
#define SIZE  4096

static void fill(unsigned char *buf, int iter)
{
	for (int i = 0; i < SIZE; i++)
		buf[i] = (unsigned char)(i * 7 + iter);
}

static int check(const unsigned char *buf, int iter)
{
	for (int i = 0; i < SIZE; i++)
		if (buf[i] != (unsigned char)(i * 7 + iter))
			return -1;
	return 0;
}

static int pingpong(int rank)
{
	static unsigned char buf[SIZE];
	int peer = 1 - rank;

	for (int it = 0; it < ITERS; it++) {
		if (rank == 0) {
			fill(buf, it);
			MPI_Send(buf, SIZE, MPI_BYTE, peer, it, MPI_COMM_WORLD);
			memset(buf, 0, SIZE);
		}
		MPI_Recv(buf, SIZE, MPI_BYTE, peer, it, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
		if (check(buf, it)) {
			fprintf(stderr, "rank %d: iteration %d: bad data\n",
				rank, it);
			return -1;
		}
		if (rank == 1)
			MPI_Send(buf, SIZE, MPI_BYTE, peer, it, MPI_COMM_WORLD);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int rank, size, bad;
	double t0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr,
				"mpi_pingpong: run with 2 ranks, not "
				"%d (mpirun -np 2)\n",
				size);
		MPI_Finalize();
		return 2;
	}
	t0 = MPI_Wtime();
	bad = pingpong(rank);
	if (!bad && rank == 0)
		printf("mpi_pingpong: %d round trips of %d bytes, %.1f usec "
		       "each\n",
		       ITERS, SIZE, (MPI_Wtime() - t0) * 1e6 / ITERS);
	MPI_Finalize();
	return bad ? 1 : 0;
}
