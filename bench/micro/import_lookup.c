// SPDX-License-Identifier: MIT
/*
 * The cost of looking up another process's imported MR (issue 28): 10^6
 * sv_mr_lookup calls (core/mr.c, this tree's: the revocation word, one
 * load) against the same lookup with the check it replaced (a
 * recv(MSG_PEEK | MSG_DONTWAIT) on the owner's socket, as core/mr.c did
 * before the revocation page), alternating, in one process, on one CPU,
 * CPU time of this thread (CLOCK_THREAD_CPUTIME_ID).  Prints each round
 * and the ratio of the medians.
 *
 *   cmake --build build --target bench_import_lookup
 *   taskset -c 1 build/bin/bench_import_lookup [rounds]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "objects.h"

#define N 1000000

/* core/mr.c's check at 5525c47: one recv per lookup of an import */
static bool old_revoked(struct sv_mr *mr)
{
	char c;
	ssize_t n;

	if (atomic_load_explicit(&mr->imp_revoked, memory_order_relaxed))
		return true;
	do
		n = recv(mr->imp_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return !(n < 0 && errno == EAGAIN);
}

static double cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5, sp[2], fd;
	struct sv_context *ctx = calloc(1, sizeof(*ctx));
	struct sv_mr *mr = calloc(1, sizeof(*mr));
	struct sv_pd *pd = calloc(1, sizeof(*pd));
	const uint32_t key = 0x12345;
	double told[64], tnew[64];
	uint64_t *page;
	long hits = 0;

	if (rounds < 1 || rounds > 64 || !ctx || !mr || !pd)
		return 2;
	ctx->mrs = calloc(SV_MAX_MR, sizeof(*ctx->mrs));
	fd = memfd_create("bench-revoke", MFD_CLOEXEC);
	if (!ctx->mrs || fd < 0 || ftruncate(fd, 4096) ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp))
		return 2;
	page = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED)
		return 2;
	mr->pd = pd;
	mr->ibv.lkey = mr->ibv.rkey = key;
	mr->imp_remote = true;
	mr->imp_fd = sp[0];
	mr->imp_word = (const _Atomic uint64_t *)&page[3];
	mr->imp_gen = 0;
	ctx->mrs[sv_mr_slot(key)] = mr;
	for (int r = 0; r < rounds; r++) {
		double t0;

		/* before: no word (the lookup skips it), the old check */
		mr->imp_word = NULL;
		t0 = cpu_ns();
		for (int i = 0; i < N; i++) {
			struct sv_mr *m = sv_mr_lookup(ctx, key, pd);

			hits += m && !old_revoked(m);
		}
		told[r] = (cpu_ns() - t0) / N;
		mr->imp_word = (const _Atomic uint64_t *)&page[3];
		t0 = cpu_ns();
		for (int i = 0; i < N; i++)
			hits += sv_mr_lookup(ctx, key, pd) != NULL;
		tnew[r] = (cpu_ns() - t0) / N;
		printf("round %d: before %.1f ns, after %.1f ns per lookup\n",
		       r, told[r], tnew[r]);
	}
	qsort(told, rounds, sizeof(double), cmp);
	qsort(tnew, rounds, sizeof(double), cmp);
	printf("median: before %.1f ns, after %.1f ns, ratio %.0fx (%ld hits "
	       "of %ld)\n",
	       told[rounds / 2], tnew[rounds / 2],
	       told[rounds / 2] / tnew[rounds / 2], hits, 2L * N * rounds);
	return hits == 2L * N * rounds ? 0 : 1;
}
