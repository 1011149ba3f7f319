// SPDX-License-Identifier: MIT
/*
 * Floor (3): one copy into shared-memory-backed memory plus a flag: what an
 * RDMA write cannot go below when registered memory is backed by a memfd
 * that the peer maps too.  Each side copies from its private buffer
 * straight into a window of the other side's memfd-backed memory, then
 * raises a flag.  Round trip: the peer answers each flag with its own copy
 * and flag.  Streaming: the parent copies a batch into the window and
 * raises the flag once; the peer answers the flag.
 */
#include "floor.h"

#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#define STOP UINT64_MAX

enum cmd {
	CMD_ECHO = 1, /* answer with a copy of the same size and a flag */
	CMD_ACK = 2,  /* end of a batch: answer with the flag alone */
};

/* The head of the memfd: two flags, then the two windows. */
struct flags {
	alignas(FLOOR_LINE) _Atomic uint64_t ping; /* parent writes: seq */
	uint64_t cmd;  /* enum cmd, written before ping */
	uint64_t size; /* bytes the peer answers with, before ping */
	alignas(FLOOR_LINE) _Atomic uint64_t pong; /* peer writes: seq */
};

struct ctx {
	struct flags *f;
	unsigned char *to_peer;	  /* memfd window the parent writes */
	unsigned char *to_parent; /* memfd window the peer writes */
	unsigned char *src;	  /* private source buffer, per process */
	uint64_t seq;
};

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
			memcpy(c->to_parent, c->src, c->f->size);
		/* release: the copy lands before the parent sees pong */
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
	/* release: data, cmd and size written before the peer sees ping */
	atomic_store_explicit(&c->f->ping, seq, memory_order_release);
	while (atomic_load_explicit(&c->f->pong, memory_order_acquire) != seq)
		floor_relax();
}

static double rtt(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();

	for (uint64_t i = 0; i < n; i++) {
		memcpy(c->to_peer, c->src, size);
		signal_peer(c, CMD_ECHO, size);
	}
	return (double)(floor_now_ns() - t0) * 1e-9;
}

static double bw(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();

	for (uint64_t i = 0; i < n; i++) {
		memcpy(c->to_peer, c->src, size);
		/* keep the copies: the compiler must not merge them */
		__asm__ __volatile__("" : : "r"(c->to_peer) : "memory");
	}
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

static void *map_memfd(size_t len)
{
	int fd = memfd_create("floor_copy", MFD_CLOEXEC);
	void *p;

	if (fd < 0)
		floor_die("memfd_create");
	if (ftruncate(fd, (off_t)len))
		floor_die("ftruncate memfd");
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		floor_die("mmap memfd");
	close(fd);
	memset(p, 0, len);
	return p;
}

int main(int argc, char **argv)
{
	struct floor_opts o;
	struct ctx c = {0};
	unsigned char *shm;
	size_t win, head = 4096;
	pid_t pid;

	floor_parse(argc, argv, "8,64,512,4K,64K,1M", &o);
	floor_banner(&o, "one copy into memfd-backed shared memory + flag");
	win = (o.max_size + 4095) & ~(size_t)4095;
	shm = map_memfd(head + 2 * win);
	c.f = (struct flags *)shm;
	c.to_peer = shm + head;
	c.to_parent = shm + head + win;
	pid = floor_fork(&o);
	floor_prefault(shm, head + 2 * win);
	c.src = floor_alloc(o.max_size);
	if (pid == 0) {
		serve(&c);
		_exit(0);
	}
	run(&o, FLOOR_RTT, rtt, &c);
	run(&o, FLOOR_BW, bw, &c);
	atomic_store_explicit(&c.f->ping, STOP, memory_order_release);
	return floor_reap(&o, pid);
}
