// SPDX-License-Identifier: MIT
/*
 * The shared part of the floor programs: option parsing, pinning, the
 * forked peer and the calibrate-then-measure loop (see floor.h).
 */
#include "floor.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

void floor_die(const char *what)
{
	fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static __attribute__((noreturn)) void usage(const char *prog, const char *bad)
{
	fprintf(stderr,
		"%s: bad option or value '%s'\n"
		"usage: %s [-s 8,4K,1M] [-m rtt|bw|both] [-t seconds]\n"
		"          [-c cpu,cpu] [-T deadline_seconds]\n",
		prog, bad ? bad : "", prog);
	exit(2);
}

/* "8", "4K", "1M" -> bytes; 0 on a malformed value. */
static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s)
		return 0;
	if (*end == 'K' || *end == 'k') {
		v <<= 10;
		end++;
	} else if (*end == 'M' || *end == 'm') {
		v <<= 20;
		end++;
	}
	if (*end != '\0')
		return 0;
	return (size_t)v;
}

static void parse_sizes(struct floor_opts *o, const char *list)
{
	char buf[1024], *tok, *save;

	if (strlen(list) >= sizeof(buf))
		usage(o->prog, list);
	strcpy(buf, list);
	o->nsizes = 0;
	o->max_size = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		size_t v = parse_size(tok);

		if (!v || v > (1ul << 30) || o->nsizes == FLOOR_MAX_SIZES)
			usage(o->prog, tok);
		o->sizes[o->nsizes++] = v;
		if (v > o->max_size)
			o->max_size = v;
	}
	if (!o->nsizes)
		usage(o->prog, list);
}

void floor_parse(int argc, char **argv, const char *def_sizes,
		 struct floor_opts *o)
{
	const char *sizes = def_sizes;
	int c;

	memset(o, 0, sizeof(*o));
	o->prog = argv[0];
	o->mode = FLOOR_BOTH;
	o->target_s = 0.3;
	o->cpu[0] = 0;
	o->cpu[1] = 1;
	o->deadline_s = 300;
	while ((c = getopt(argc, argv, "s:m:t:c:T:h")) != -1) {
		switch (c) {
		case 's':
			sizes = optarg;
			break;
		case 'm':
			if (!strcmp(optarg, "rtt"))
				o->mode = FLOOR_RTT;
			else if (!strcmp(optarg, "bw"))
				o->mode = FLOOR_BW;
			else if (!strcmp(optarg, "both"))
				o->mode = FLOOR_BOTH;
			else
				usage(o->prog, optarg);
			break;
		case 't':
			o->target_s = atof(optarg);
			if (!(o->target_s > 0 && o->target_s < 60))
				usage(o->prog, optarg);
			break;
		case 'c':
			if (sscanf(optarg, "%d,%d", &o->cpu[0], &o->cpu[1]) !=
				    2 ||
			    o->cpu[0] < 0 || o->cpu[1] < 0)
				usage(o->prog, optarg);
			break;
		case 'T':
			o->deadline_s = (unsigned int)atoi(optarg);
			if (!o->deadline_s)
				usage(o->prog, optarg);
			break;
		default:
			usage(o->prog, NULL);
		}
	}
	if (optind != argc)
		usage(o->prog, argv[optind]);
	parse_sizes(o, sizes);
	/* A peer that died leaves the other spinning: the alarm ends it. */
	alarm(o->deadline_s);
}

void floor_banner(const struct floor_opts *o, const char *what)
{
	printf("# %s: %s\n", o->prog, what);
	printf("# cpus %d,%d; %.3f s per measurement; busy polling\n",
	       o->cpu[0], o->cpu[1], o->target_s);
	fflush(stdout);
}

void *floor_shared(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		floor_die("mmap shared");
	return p;
}

void floor_prefault(void *p, size_t len)
{
	unsigned char *c = p;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	/* an atomic or of 0: a write fault, and no lost update */
	for (size_t off = 0; off < len; off += page)
		__atomic_fetch_or(c + off, 0, __ATOMIC_RELAXED);
}

void *floor_alloc(size_t len)
{
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		floor_die("mmap private");
	memset(p, 0x5a, len);
	return p;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	/* Not fatal: a one-CPU machine still gives (slow) figures. */
	if (sched_setaffinity(0, sizeof(set), &set))
		fprintf(stderr, "floor: cannot pin to CPU %d: %s\n", cpu,
			strerror(errno));
}

pid_t floor_fork(const struct floor_opts *o)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		floor_die("fork");
	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL))
			floor_die("prctl(PR_SET_PDEATHSIG)");
		if (getppid() != parent)
			_exit(1);
		pin(o->cpu[1]);
		return 0;
	}
	pin(o->cpu[0]);
	return pid;
}

int floor_reap(const struct floor_opts *o, pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		floor_die("waitpid");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFSIGNALED(st))
		fprintf(stderr, "%s: peer killed by signal %d\n", o->prog,
			WTERMSIG(st));
	else
		fprintf(stderr, "%s: peer exited with status %d\n", o->prog,
			WEXITSTATUS(st));
	return 1;
}

uint64_t floor_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double floor_measure(const struct floor_opts *o, floor_run_fn run, void *ctx,
		     size_t size, uint64_t *iters)
{
	uint64_t n = 1, total_n = 0;
	double t, total_t = 0;

	/* Warm-up (pages, caches, branch predictors) and a batch size: double
	 * n until a batch takes a twentieth of the target. */
	while ((t = run(ctx, size, n)) < o->target_s / 20 && n < (1ull << 40))
		n *= 2;
	/* Then batches until the target time is spent: a batch slowed down
	 * by a descheduled peer still leaves a long measurement. */
	while (total_t < o->target_s) {
		total_t += run(ctx, size, n);
		total_n += n;
	}
	*iters = total_n;
	return total_t / (double)total_n;
}

void floor_report(enum floor_mode m, size_t size, double per_iter_s,
		  uint64_t iters)
{
	if (m == FLOOR_RTT)
		printf("size=%zu rtt_us=%.4f iters=%llu\n", size,
		       per_iter_s * 1e6, (unsigned long long)iters);
	else
		printf("size=%zu bw_GBps=%.4f mmsg_s=%.3f iters=%llu\n", size,
		       (double)size / per_iter_s / 1e9, 1e-6 / per_iter_s,
		       (unsigned long long)iters);
	fflush(stdout);
}

void floor_run_sizes(const struct floor_opts *o, enum floor_mode m,
		     floor_run_fn fn, void *ctx)
{
	uint64_t iters;

	if (!(o->mode & m))
		return;
	for (int i = 0; i < o->nsizes; i++) {
		double t = floor_measure(o, fn, ctx, o->sizes[i], &iters);

		floor_report(m, o->sizes[i], t, iters);
	}
}

#define FLOOR_STOP UINT64_MAX

void floor_chan_call(struct floor_chan *ch, uint64_t *seq, enum floor_cmd cmd,
		     size_t size)
{
	uint64_t s = ++*seq;

	/* Stores only what changed: each store to the line the peer spins
	 * on costs a round of the coherence protocol. */
	if (ch->cmd != cmd)
		ch->cmd = cmd;
	if (ch->size != size)
		ch->size = size;
	/* release: data, cmd and size written before the peer sees ping */
	atomic_store_explicit(&ch->ping, s, memory_order_release);
	while (atomic_load_explicit(&ch->pong, memory_order_acquire) != s)
		floor_relax();
}

void floor_chan_serve(struct floor_chan *ch, void (*echo)(void *, size_t),
		      void *ctx)
{
	uint64_t last = 0, v;

	for (;;) {
		while ((v = atomic_load_explicit(&ch->ping,
						 memory_order_acquire)) == last)
			floor_relax();
		if (v == FLOOR_STOP)
			return;
		if (ch->cmd == FLOOR_CMD_ECHO)
			echo(ctx, ch->size);
		/* release: the answer lands before the parent sees pong */
		atomic_store_explicit(&ch->pong, v, memory_order_release);
		last = v;
	}
}

void floor_chan_stop(struct floor_chan *ch)
{
	atomic_store_explicit(&ch->ping, FLOOR_STOP, memory_order_release);
}
