// SPDX-License-Identifier: MIT
/*
 * Floor (1): one cache-line flag round trip between two processes.  The
 * parent stores a sequence number in its line, the peer spins on it and
 * stores the same number in its own line; nothing moves but the two cache
 * lines.  No transport can beat this: it is the cost of the coherence
 * protocol between the two CPUs.  Only size 8 (the flag) is meaningful.
 */
#include "floor.h"

#include <stdalign.h>
#include <stdio.h>
#include <unistd.h>

#define STOP UINT64_MAX

struct flags {
	alignas(FLOOR_LINE) _Atomic uint64_t ping; /* parent writes */
	alignas(FLOOR_LINE) _Atomic uint64_t pong; /* peer writes */
};

struct ctx {
	struct flags *f;
	uint64_t seq; /* last number sent; parent only */
};

static void serve(struct flags *f)
{
	uint64_t last = 0, v;

	for (;;) {
		while ((v = atomic_load_explicit(&f->ping,
						 memory_order_acquire)) == last)
			floor_relax();
		if (v == STOP)
			return;
		atomic_store_explicit(&f->pong, v, memory_order_release);
		last = v;
	}
}

static double rtt(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();

	for (uint64_t i = 0; i < n; i++) {
		uint64_t seq = ++c->seq;

		atomic_store_explicit(&c->f->ping, seq, memory_order_release);
		while (atomic_load_explicit(&c->f->pong,
					    memory_order_acquire) != seq)
			floor_relax();
	}
	return (double)(floor_now_ns() - t0) * 1e-9;
}

int main(int argc, char **argv)
{
	struct floor_opts o;
	struct ctx c = {0};
	uint64_t iters;
	pid_t pid;

	floor_parse(argc, argv, "8", &o);
	floor_banner(&o, "one cache-line flag round trip (size is always 8)");
	c.f = floor_shared(sizeof(*c.f));
	pid = floor_fork(&o);
	if (pid == 0) {
		serve(c.f);
		_exit(0);
	}
	if (o.mode & FLOOR_RTT) {
		double t = floor_measure(&o, rtt, &c, 8, &iters);

		floor_report(FLOOR_RTT, 8, t, iters);
	}
	atomic_store_explicit(&c.f->ping, STOP, memory_order_release);
	return floor_reap(&o, pid);
}
