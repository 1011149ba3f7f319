// SPDX-License-Identifier: MIT
/*
 * An MPI job for netns_mpi.sh (issue 29, item 2): ranks on namespace
 * hosts, every byte checked.
 *   pingpong: ranks 0 and 1, 8 B, 4 KiB and 1 MiB, each iteration's
 *             payload different, checked on both sides; prints RTTs.
 *   coll:     MPI_Allreduce (sum of longs) and MPI_Alltoall at 1, 1 Ki and
 *             256 Ki elements, results checked on every rank.
 *   kill:     after a barrier the last rank kills itself (SIGKILL); the
 *             others go on with collectives, which must end the job with
 *             an error (mpirun's status), never hang (the script's
 *             deadline).
 * Exit 0 only when everything checked.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static unsigned char pat(size_t i, int it, int from)
{
	return (unsigned char)(i * 131 + (size_t)it * 7 + (size_t)from * 17);
}

static int pingpong(void)
{
	static const int sizes[] = {8, 4096, 1 << 20};
	int bad = 0;

	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		int n = sizes[s], iters = n >= (1 << 20) ? 20 : 200;
		unsigned char *b = malloc((size_t)n);
		double t0;

		if (!b)
			return 1;
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (int it = 0; it < iters && rank < 2; it++) {
			int peer = 1 - rank;

			if (rank == 0) {
				for (int i = 0; i < n; i++)
					b[i] = pat((size_t)i, it, 0);
				MPI_Send(b, n, MPI_BYTE, peer, it,
					 MPI_COMM_WORLD);
			}
			MPI_Recv(b, n, MPI_BYTE, peer, it, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			for (int i = 0; i < n; i++)
				if (b[i] != pat((size_t)i, it, peer)) {
					bad++;
					break;
				}
			if (rank == 1) {
				for (int i = 0; i < n; i++)
					b[i] = pat((size_t)i, it, 1);
				MPI_Send(b, n, MPI_BYTE, peer, it,
					 MPI_COMM_WORLD);
			}
		}
		if (rank == 0)
			printf("pingpong %d B: %.1f us round trip%s\n", n,
			       (MPI_Wtime() - t0) / iters * 1e6,
			       bad ? " BAD DATA" : "");
		free(b);
	}
	return bad;
}

static int coll(void)
{
	static const int counts[] = {1, 1024, 262144};
	int bad = 0;

	for (unsigned c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		int n = counts[c], m = n / size ? n / size : 1;
		long *in = malloc((size_t)n * sizeof(long));
		long *out = malloc((size_t)n * sizeof(long));
		int *a = malloc((size_t)m * (size_t)size * sizeof(int));
		int *b = malloc((size_t)m * (size_t)size * sizeof(int));

		if (!in || !out || !a || !b)
			return 1;
		for (int i = 0; i < n; i++)
			in[i] = (long)rank * 1000003 + i;
		MPI_Allreduce(in, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		for (int i = 0; i < n; i++)
			if (out[i] != (long)size * (size - 1) / 2 * 1000003 +
					      (long)size * i) {
				bad++;
				break;
			}
		for (int d = 0; d < size; d++)
			for (int i = 0; i < m; i++)
				a[d * m + i] = rank * 7919 + d * 31 + i;
		MPI_Alltoall(a, m, MPI_INT, b, m, MPI_INT, MPI_COMM_WORLD);
		for (int s = 0; s < size; s++)
			for (int i = 0; i < m; i++)
				if (b[s * m + i] != s * 7919 + rank * 31 + i) {
					bad++;
					s = size;
					break;
				}
		if (rank == 0)
			printf("allreduce %d longs, alltoall %d ints a rank: "
			       "%s\n",
			       n, m, bad ? "BAD DATA" : "checked");
		free(in);
		free(out);
		free(a);
		free(b);
	}
	return bad;
}

static int killed(void)
{
	long v = 1, sum;

	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == size - 1)
		raise(SIGKILL);
	for (int i = 0; i < 1000; i++)
		MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	printf("rank %d: 1000 allreduces without rank %d\n", rank, size - 1);
	return 1; /* cannot have succeeded */
}

int main(int argc, char **argv)
{
	int bad, all = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc != 2 || size < 2) {
		if (rank == 0)
			fprintf(stderr,
				"usage: mpirun -np N>=2 %s "
				"pingpong|coll|kill\n",
				argv[0]);
		MPI_Finalize();
		return 2;
	}
	if (!strcmp(argv[1], "pingpong"))
		bad = pingpong();
	else if (!strcmp(argv[1], "coll"))
		bad = coll();
	else
		bad = killed();
	MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s\n", all ? "FAILED" : "all checked");
	MPI_Finalize();
	return all != 0;
}
