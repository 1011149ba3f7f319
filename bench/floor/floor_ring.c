// SPDX-License-Identifier: MIT
/*
 * Floor (2): a single-producer single-consumer ring in shared memory, with
 * a copy in (sender's private buffer -> slot) and a copy out (slot ->
 * receiver's private buffer): what send/receive through a shared-memory
 * ring cannot go below.  Messages larger than a slot travel as several
 * slots, so copy in and copy out overlap.  Round trip: the peer echoes
 * each message.  Streaming: the parent pushes a batch, the peer drains it
 * and answers the batch's last message with an empty one.
 */
#include "floor.h"

#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOT_DATA (64 * 1024) /* bytes of payload per slot */
#define NSLOTS	  64	      /* 4 MiB per ring: a 1 MiB message fits */

enum reply {
	REPLY_NONE = 0,	 /* streaming: keep draining */
	REPLY_ECHO = 1,	 /* send the message back, same length */
	REPLY_EMPTY = 2, /* end of a batch: answer with an empty message */
	REPLY_STOP = 3,	 /* the peer exits */
};

struct slot {
	_Atomic uint64_t seq; /* producer: position + 1 once the slot is full */
	uint32_t len;	      /* payload bytes in this slot */
	uint16_t last;	      /* 1 on the message's final slot */
	uint16_t reply;	      /* enum reply; valid on the final slot */
	uint32_t msg_len;     /* whole message length, on the final slot */
	/* payload follows the header in the same cache line: an 8-byte
	 * message moves one line per direction */
	unsigned char data[SLOT_DATA];
};

struct ring {
	alignas(FLOOR_LINE) _Atomic uint64_t tail; /* consumer: slots freed */
	alignas(FLOOR_LINE) struct slot slots[NSLOTS];
};

/* One end of a ring, in the private memory of the process that owns it. */
struct end {
	struct ring *r;
	uint64_t pos;	 /* next slot to fill (producer) or drain (consumer) */
	uint64_t cached; /* producer: last tail seen; read only when full */
};

static void ring_send(struct end *e, const unsigned char *buf, size_t len,
		      enum reply reply)
{
	size_t off = 0;

	do {
		size_t chunk = len - off < SLOT_DATA ? len - off : SLOT_DATA;
		struct slot *s;

		while (e->pos - e->cached >= NSLOTS) {
			e->cached = atomic_load_explicit(&e->r->tail,
							 memory_order_acquire);
			floor_relax();
		}
		s = &e->r->slots[e->pos % NSLOTS];
		memcpy(s->data, buf + off, chunk);
		s->len = (uint32_t)chunk;
		off += chunk;
		s->last = off == len;
		s->reply = (uint16_t)reply;
		s->msg_len = (uint32_t)len;
		/* release: slot contents written before the peer sees seq */
		atomic_store_explicit(&s->seq, ++e->pos, memory_order_release);
	} while (off < len);
}

/* Receives one message into buf; returns its length, *reply its kind. */
static size_t ring_recv(struct end *e, unsigned char *buf, size_t cap,
			enum reply *reply)
{
	size_t off = 0;
	int last;

	do {
		struct slot *s = &e->r->slots[e->pos % NSLOTS];

		while (atomic_load_explicit(&s->seq, memory_order_acquire) !=
		       e->pos + 1)
			floor_relax();
		if (s->len > cap - off) {
			fprintf(stderr, "floor_ring: message overflows\n");
			exit(1);
		}
		memcpy(buf + off, s->data, s->len);
		off += s->len;
		last = s->last;
		*reply = (enum reply)s->reply;
		/* release: slot read before the producer may reuse it */
		atomic_store_explicit(&e->r->tail, ++e->pos,
				      memory_order_release);
	} while (!last);
	return off;
}

struct ctx {
	struct end out, in; /* parent: out = ring a, in = ring b */
	unsigned char *buf;
	size_t cap;
};

static void serve(struct ctx *c)
{
	enum reply reply;

	for (;;) {
		size_t len = ring_recv(&c->in, c->buf, c->cap, &reply);

		if (reply == REPLY_STOP)
			return;
		if (reply == REPLY_ECHO)
			ring_send(&c->out, c->buf, len, REPLY_NONE);
		else if (reply == REPLY_EMPTY)
			ring_send(&c->out, c->buf, 0, REPLY_NONE);
	}
}

static void expect_len(size_t got, size_t want)
{
	if (got != want) {
		fprintf(stderr, "floor_ring: got %zu bytes back, sent %zu\n",
			got, want);
		exit(1);
	}
}

static double rtt(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();
	enum reply r;

	for (uint64_t i = 0; i < n; i++) {
		ring_send(&c->out, c->buf, size, REPLY_ECHO);
		expect_len(ring_recv(&c->in, c->buf, c->cap, &r), size);
	}
	return (double)(floor_now_ns() - t0) * 1e-9;
}

static double bw(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();
	enum reply r;

	for (uint64_t i = 1; i < n; i++)
		ring_send(&c->out, c->buf, size, REPLY_NONE);
	ring_send(&c->out, c->buf, size, REPLY_EMPTY);
	expect_len(ring_recv(&c->in, c->buf, c->cap, &r), 0);
	return (double)(floor_now_ns() - t0) * 1e-9;
}

int main(int argc, char **argv)
{
	struct floor_opts o;
	struct ring *a, *b;
	struct ctx c = {0};
	pid_t pid;

	floor_parse(argc, argv, "8,64,512,4K,64K,1M", &o);
	floor_banner(&o, "SPSC ring in shared memory, copy in + copy out, "
			 "64 x 64 KiB slots, a sequence number per slot");
	a = floor_shared(sizeof(*a)); /* parent -> peer */
	b = floor_shared(sizeof(*b)); /* peer -> parent */
	pid = floor_fork(&o);
	floor_prefault(a, sizeof(*a));
	floor_prefault(b, sizeof(*b));
	c.cap = o.max_size;
	c.buf = floor_alloc(c.cap); /* each side its own, after the fork */
	if (pid == 0) {
		c.in.r = a;
		c.out.r = b;
		serve(&c);
		_exit(0);
	}
	c.out.r = a;
	c.in.r = b;
	floor_run_sizes(&o, FLOOR_RTT, rtt, &c);
	floor_run_sizes(&o, FLOOR_BW, bw, &c);
	ring_send(&c.out, c.buf, 0, REPLY_STOP);
	return floor_reap(&o, pid);
}
