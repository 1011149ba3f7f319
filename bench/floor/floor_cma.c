// SPDX-License-Identifier: MIT
/*
 * Floor (4): process_vm_writev (cross-memory attach) plus a flag: what the
 * fallback path for RDMA writes into memory that cannot be shared costs.
 * Each side writes from its private buffer into the other's private buffer
 * with one system call, then raises a flag in a small shared mapping.
 * Round trip: the peer answers each flag with its own write and flag.
 * Streaming: the parent writes a batch and raises the flag once.
 */
#include "floor.h"

#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/uio.h>

#define STOP UINT64_MAX

enum cmd {
	CMD_ECHO = 1, /* answer with a write of the same size and a flag */
	CMD_ACK = 2,  /* end of a batch: answer with the flag alone */
};

struct flags {
	alignas(FLOOR_LINE) _Atomic uint64_t ping; /* parent writes: seq */
	uint64_t cmd;	     /* enum cmd, written before ping */
	uint64_t size;	     /* bytes the peer answers with */
	uint64_t parent_buf; /* address of the parent's private buffer */
	alignas(FLOOR_LINE) _Atomic uint64_t pong; /* peer writes: seq */
	uint64_t peer_buf;	/* address of the peer's buffer, before ready */
	_Atomic uint64_t ready; /* peer: 1 once peer_buf is set */
};

struct ctx {
	struct flags *f;
	pid_t other;	    /* the process we write into */
	unsigned char *buf; /* private: source of our writes, target of its */
	uint64_t other_buf; /* address of the other's buffer, in its space */
	uint64_t seq;
};

/* Writes size bytes into the other process; exits on failure. */
static void cma_write(struct ctx *c, size_t size)
{
	size_t off = 0;

	while (off < size) {
		struct iovec l = {c->buf + off, size - off};
		struct iovec r = {(void *)(uintptr_t)(c->other_buf + off),
				  size - off};
		ssize_t n = process_vm_writev(c->other, &l, 1, &r, 1, 0);

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			floor_die("process_vm_writev");
		}
		off += (size_t)n;
	}
}

static void serve(struct ctx *c)
{
	uint64_t last = 0, v;

	for (;;) {
		while ((v = atomic_load_explicit(&c->f->ping,
						 memory_order_acquire)) == last)
			floor_relax();
		if (v == STOP)
			return;
		if (c->f->cmd == CMD_ECHO)
			cma_write(c, c->f->size);
		/* release: the write is done before the parent sees pong */
		atomic_store_explicit(&c->f->pong, v, memory_order_release);
		last = v;
	}
}

static void signal_peer(struct ctx *c, enum cmd cmd, size_t size)
{
	uint64_t seq = ++c->seq;

	/* Stores only what changed: each store to the line the peer spins
	 * on costs a round of the coherence protocol. */
	if (c->f->cmd != cmd)
		c->f->cmd = cmd;
	if (c->f->size != size)
		c->f->size = size;
	/* release: cmd and size written before the peer sees ping */
	atomic_store_explicit(&c->f->ping, seq, memory_order_release);
	while (atomic_load_explicit(&c->f->pong, memory_order_acquire) != seq)
		floor_relax();
}

static double rtt(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();

	for (uint64_t i = 0; i < n; i++) {
		cma_write(c, size);
		signal_peer(c, CMD_ECHO, size);
	}
	return (double)(floor_now_ns() - t0) * 1e-9;
}

static double bw(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();

	for (uint64_t i = 0; i < n; i++)
		cma_write(c, size);
	signal_peer(c, CMD_ACK, 0);
	return (double)(floor_now_ns() - t0) * 1e-9;
}

static void run(const struct floor_opts *o, enum floor_mode m, floor_run_fn fn,
		struct ctx *c)
{
	uint64_t iters;

	if (!(o->mode & m))
		return;
	for (int i = 0; i < o->nsizes; i++) {
		double t = floor_measure(o, fn, c, o->sizes[i], &iters);

		floor_report(m, o->sizes[i], t, iters);
	}
}

int main(int argc, char **argv)
{
	struct floor_opts o;
	struct ctx c = {0};
	pid_t parent = getpid(), pid;

	floor_parse(argc, argv, "8,64,512,4K,64K,1M", &o);
	floor_banner(&o, "process_vm_writev into the peer + flag");
#ifdef PR_SET_PTRACER
	/* Yama ptrace_scope 1 would forbid the child writing to us. */
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
	c.f = floor_shared(sizeof(*c.f));
	c.buf = floor_alloc(o.max_size);
	c.f->parent_buf = (uintptr_t)c.buf;
	pid = floor_fork(&o);
	if (pid == 0) {
		/* A fresh buffer: no copy-on-write pages shared with parent */
		c.buf = floor_alloc(o.max_size);
		c.f->peer_buf = (uintptr_t)c.buf;
		c.other = parent;
		c.other_buf = c.f->parent_buf;
		/* release: peer_buf written before the parent sees ready */
		atomic_store_explicit(&c.f->ready, 1, memory_order_release);
		serve(&c);
		_exit(0);
	}
	while (!atomic_load_explicit(&c.f->ready, memory_order_acquire))
		floor_relax();
	c.other = pid;
	c.other_buf = c.f->peer_buf;
	run(&o, FLOOR_RTT, rtt, &c);
	run(&o, FLOOR_BW, bw, &c);
	atomic_store_explicit(&c.f->ping, STOP, memory_order_release);
	return floor_reap(&o, pid);
}
