// SPDX-License-Identifier: MIT
/*
 * An MPI ping-pong for bench/run's MPI rows across two namespaces (issue
 * 29 item 3): ranks 0 and 1, for each size given WARMUP untimed round
 * trips then ITERS timed ones.  Which transport carries them (pml ucx on
 * softverbs, ob1/tcp, the ofi MTL) is mpirun's business, not this
 * program's.
 *
 * The payload is checked byte for byte, both ways, on every warm-up
 * round trip and on one more after the clock stops (not on the timed
 * ones: filling and checking 1 MiB costs more than its trip), each
 * iteration's pattern different, so a transport that loses or tears
 * data fails the run.
 *
 * usage: mpirun -np 2 ... mpi_pp SIZE[,SIZE...] ITERS[,ITERS...] [WARMUP]
 * (one launch, several sizes, each with its own count; WARMUP default 10)
 * prints per size: "mpi_pp size=SIZE iters=N rtt_us=X bw_GBps=Y
 * stream_GBps=Z rtt_med_us=M" (rtt: the mean; M: the median round trip,
 * as perftest's t_typical, each timed on rank 0; bw: SIZE bytes each way
 * per round trip; stream: 16 messages in flight one way, as ib_send_bw;
 * 10^9 B/s one direction); exit 0 only when all checked.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pat(long i, long it, int from)
{
	return (unsigned char)(i * 131 + it * 7 + from * 17 + 1);
}

static void fill(unsigned char *b, long n, long it, int from)
{
	for (long i = 0; i < n; i++)
		b[i] = pat(i, it, from);
}

static int check(const unsigned char *b, long n, long it, int from)
{
	for (long i = 0; i < n; i++)
		if (b[i] != pat(i, it, from))
			return 1;
	return 0;
}

/* One round trip; checked: fill before sending, check on arrival. */
static int trip(unsigned char *b, int n, long it, int rank, int checked)
{
	int peer = 1 - rank, bad = 0;

	if (rank == 0) {
		if (checked)
			fill(b, n, it, 0);
		MPI_Send(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
		if (checked)
			memset(b, 0, (size_t)n);
	}
	MPI_Recv(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	if (checked)
		bad = check(b, n, it, peer);
	if (rank == 1) {
		if (checked)
			fill(b, n, it, 1);
		MPI_Send(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
		if (checked)
			memset(b, 0, (size_t)n);
	}
	return bad;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* the median of v[0..n-1] (sorted in place), in µs */
static double median_us(double *v, long n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) * 1e6;
}

static long arg(const char *s, char **end, long lo, long hi)
{
	long v = strtol(s, end, 10);

	return *end == s || v < lo || v > hi ? -1 : v;
}

/* "A,B,C" into v[]: the count, or -1 on anything else */
static int list(const char *s, long *v, int max, long lo, long hi)
{
	int n = 0;
	char *end;

	while (n < max) {
		v[n] = arg(s, &end, lo, hi);
		if (v[n++] < 0)
			return -1;
		if (!*end)
			return n;
		if (*end != ',')
			return -1;
		s = end + 1;
	}
	return -1;
}

/*
 * Streaming, as osu_bw and ib_send_bw: rank 0 sends WINDOW messages
 * back to back, rank 1 receives them all and answers 1 byte; COUNT such
 * windows timed, then one checked.  Returns 10^9 B/s one way, < 0 when
 * the checked window's bytes were wrong (on either rank: agreed).
 */
#define WINDOW 16
static void window(unsigned char *b, long n, int rank)
{
	MPI_Request rq[WINDOW];
	unsigned char ack = 0;

	for (int k = 0; k < WINDOW; k++)
		if (rank == 0)
			MPI_Isend(b + k * n, (int)n, MPI_BYTE, 1, 2,
				  MPI_COMM_WORLD, &rq[k]);
		else
			MPI_Irecv(b + k * n, (int)n, MPI_BYTE, 0, 2,
				  MPI_COMM_WORLD, &rq[k]);
	MPI_Waitall(WINDOW, rq, MPI_STATUSES_IGNORE);
	if (rank == 0)
		MPI_Recv(&ack, 1, MPI_BYTE, 1, 3, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
	else
		MPI_Send(&ack, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
}

static double stream(long n, long count, int rank)
{
	unsigned char *b = calloc(WINDOW, (size_t)n);
	int bad = 0, all = 0;
	double t0, t;

	if (!b)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (long w = 0; w < count; w++)
		window(b, n, rank);
	t = MPI_Wtime() - t0;
	/* one more, checked, after the clock stopped */
	for (int k = 0; k < WINDOW; k++)
		if (rank == 0)
			fill(b + k * n, n, count + k, 0);
		else
			memset(b + k * n, 0, (size_t)n);
	window(b, n, rank);
	for (int k = 0; rank == 1 && k < WINDOW; k++)
		bad |= check(b + k * n, n, count + k, 0);
	MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
	free(b);
	return all ? -1 : (double)n * WINDOW * (double)count / t / 1e9;
}

/* One size: warm-up round trips checked, ITERS timed, one more checked;
 * then ITERS / 4 (at least 2) streamed windows. */
static int one(long n, long iters, long warm, int rank)
{
	unsigned char *b = calloc(1, (size_t)n);
	double *rtt = calloc((size_t)iters, sizeof(*rtt));
	int bad = 0, all = 0;
	double t0, t, st, prev;

	if (!b || !rtt)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (long it = 0; it < warm; it++)
		bad |= trip(b, (int)n, it, rank, 1);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = prev = MPI_Wtime();
	for (long it = 0; it < iters; it++) {
		double now;

		bad |= trip(b, (int)n, warm + it, rank, 0);
		now = MPI_Wtime();
		rtt[it] = now - prev;
		prev = now;
	}
	t = prev - t0;
	/* one more, checked, after the clock stopped */
	bad |= trip(b, (int)n, warm + iters, rank, 1);
	MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
	st = all ? 0 : stream(n, iters / 4 > 2 ? iters / 4 : 2, rank);
	all |= st < 0;
	if (rank == 0 && all)
		printf("mpi_pp size=%ld: BAD DATA\n", n);
	else if (rank == 0)
		printf("mpi_pp size=%ld iters=%ld rtt_us=%.3f bw_GBps=%.6f "
		       "stream_GBps=%.6f rtt_med_us=%.3f\n",
		       n, iters, t / (double)iters * 1e6,
		       (double)n * 2 * (double)iters / t / 1e9, st,
		       median_us(rtt, iters));
	fflush(stdout);
	free(rtt);
	free(b);
	return all;
}

int main(int argc, char **argv)
{
	long sizes[16], iters[16], warm = 10;
	int rank, size, ns = -1, ni = -1, bad = 0;
	char *end;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc == 3 || argc == 4) {
		ns = list(argv[1], sizes, 16, 1, 1L << 30);
		ni = list(argv[2], iters, 16, 1, 100000000);
		if (argc == 4 && (arg(argv[3], &end, 1, 100000) < 0 || *end))
			ns = -1;
		else if (argc == 4)
			warm = arg(argv[3], &end, 1, 100000);
	}
	if (size != 2 || ns < 1 || ni != ns) {
		if (rank == 0)
			fprintf(stderr,
				"usage: mpirun -np 2 %s SIZE[,SIZE...] "
				"ITERS[,ITERS...] [WARMUP]\n",
				argv[0]);
		MPI_Finalize();
		return 2;
	}
	for (int i = 0; i < ns && !bad; i++)
		bad = one(sizes[i], iters[i], warm, rank);
	MPI_Finalize();
	return bad != 0;
}
