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

struct flags {
	struct floor_chan ch;			 /* the parent's commands */
	alignas(FLOOR_LINE) uint64_t parent_buf; /* the parent's buffer */
	uint64_t peer_buf;	/* the peer's buffer, before ready */
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
static void cma_write(void *arg, size_t size)
{
	struct ctx *c = arg;
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

static double rtt(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();

	for (uint64_t i = 0; i < n; i++) {
		cma_write(c, size);
		floor_chan_call(&c->f->ch, &c->seq, FLOOR_CMD_ECHO, size);
	}
	return (double)(floor_now_ns() - t0) * 1e-9;
}

static double bw(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();

	for (uint64_t i = 0; i < n; i++)
		cma_write(c, size);
	floor_chan_call(&c->f->ch, &c->seq, FLOOR_CMD_ACK, 0);
	return (double)(floor_now_ns() - t0) * 1e-9;
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
		floor_chan_serve(&c.f->ch, cma_write, &c);
		_exit(0);
	}
	while (!atomic_load_explicit(&c.f->ready, memory_order_acquire))
		floor_relax();
	c.other = pid;
	c.other_buf = c.f->peer_buf;
	floor_run_sizes(&o, FLOOR_RTT, rtt, &c);
	floor_run_sizes(&o, FLOOR_BW, bw, &c);
	floor_chan_stop(&c.f->ch);
	return floor_reap(&o, pid);
}
