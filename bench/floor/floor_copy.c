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

struct ctx {
	struct floor_chan *ch;	  /* the head of the memfd */
	unsigned char *to_peer;	  /* memfd window the parent writes */
	unsigned char *to_parent; /* memfd window the peer writes */
	unsigned char *src;	  /* private source buffer, per process */
	uint64_t seq;
};

/* Peer: the answer, one copy into the parent's window. */
static void echo(void *arg, size_t size)
{
	struct ctx *c = arg;

	memcpy(c->to_parent, c->src, size);
}

static double rtt(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();

	for (uint64_t i = 0; i < n; i++) {
		memcpy(c->to_peer, c->src, size);
		floor_chan_call(c->ch, &c->seq, FLOOR_CMD_ECHO, size);
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
	floor_chan_call(c->ch, &c->seq, FLOOR_CMD_ACK, 0);
	return (double)(floor_now_ns() - t0) * 1e-9;
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
	c.ch = (struct floor_chan *)shm; /* then the two windows */
	c.to_peer = shm + head;
	c.to_parent = shm + head + win;
	pid = floor_fork(&o);
	floor_prefault(shm, head + 2 * win);
	c.src = floor_alloc(o.max_size);
	if (pid == 0) {
		floor_chan_serve(c.ch, echo, &c);
		_exit(0);
	}
	floor_run_sizes(&o, FLOOR_RTT, rtt, &c);
	floor_run_sizes(&o, FLOOR_BW, bw, &c);
	floor_chan_stop(c.ch);
	return floor_reap(&o, pid);
}
