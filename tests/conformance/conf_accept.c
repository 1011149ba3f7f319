// SPDX-License-Identifier: MIT
/*
 * A QP's listener is accepted on only when the progress thread saw it
 * readable (transport/link.c sv_link_accept, issue 27 item 3): every
 * step of a connecting QP (its move to RTR, each app poll, each progress
 * visit) called accept4, ~3 times per QP with nothing there.  This
 * program defines accept4, so libibverbs' calls come here first and go
 * on to the next definition (the sanitizer's or libc's) by RTLD_NEXT,
 * counted with their EAGAIN answers.  Each row brings QP pairs up with
 * the peer's connection arriving before, during or after the QP's move
 * to RTR and sends over each (the connection must never be lost); over
 * shared memory and, as the .tcp. runs, TCP (the door's socket comes to
 * the same listener).
 *   accept_connect_before_rtr: a's RTR (its connect to b) first, then b
 *     waits until its progress thread took the connection, then b's RTR;
 *   accept_connect_after_rtr: b's RTR first, then a's;
 *   accept_connect_during_rtr: both moved at once from two threads;
 *   accept_eagain_bounded: 16 pairs, at most 1.5 accept4 answered EAGAIN
 *     per QP (before: ~3; one per drain of the queue is the floor).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>

#include "pair.h"
#include "sv_test.h"

static atomic_long n_accept, n_eagain, n_taken;
static int (*next_accept4)(int, struct sockaddr *, socklen_t *, int);

/* resolved before any thread (the progress threads call accept4) */
__attribute__((constructor)) static void find_accept4(void)
{
	next_accept4 = (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(
		RTLD_NEXT, "accept4");
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int r, e;

	if (!next_accept4)
		find_accept4(); /* called before our constructor ran */
	r = next_accept4(fd, addr, len, flags);
	e = errno;
	atomic_fetch_add(&n_accept, 1);
	if (r >= 0)
		atomic_fetch_add(&n_taken, 1);
	else if (e == EAGAIN || e == EWOULDBLOCK)
		atomic_fetch_add(&n_eagain, 1);
	errno = e;
	return r;
}

static void open_ends(struct sv_pair *p)
{
	struct sv_end_opts db = sv_end_opts_default();

	db.psn = 0x5678;
	sv_end_open(&p->a, NULL);
	sv_end_open(&p->b, &db);
	ASSERT_OK(sv_end_to_init(&p->a));
	ASSERT_OK(sv_end_to_init(&p->b));
}

static void to_rtr_rts(struct sv_end *e, const struct sv_end *peer)
{
	ASSERT_OK(sv_end_to_rtr(e, peer->qp->qp_num, peer->o.psn));
	ASSERT_OK(sv_end_to_rts(e));
}

/* Both ways, so each side's link is up (each accepted its peer). */
static void ping_both(struct sv_pair *p)
{
	struct sv_pair r = {.a = p->b, .b = p->a};

	sv_pair_ping(p);
	sv_pair_ping(&r);
}

SV_TEST(accept_connect_before_rtr)
{
	for (int i = 0; i < 4; i++) {
		struct sv_pair p;
		long taken = atomic_load(&n_taken);
		unsigned int us = 100;
		uint64_t until;

		open_ends(&p);
		to_rtr_rts(&p.a, &p.b);
		/* a connects to b at its RTR (over TCP through the door):
		 * wait for b's progress thread to take it, b still INIT */
		until = sv_now_ms() + 5000;
		while (atomic_load(&n_taken) == taken && sv_now_ms() < until)
			sv_backoff(&us);
		ASSERT_TRUE(atomic_load(&n_taken) > taken);
		ASSERT_EQ(IBV_QPS_INIT, sv_end_state(&p.b));
		to_rtr_rts(&p.b, &p.a);
		ping_both(&p);
		sv_pair_close(&p);
	}
}

SV_TEST(accept_connect_after_rtr)
{
	for (int i = 0; i < 4; i++) {
		struct sv_pair p;

		open_ends(&p);
		to_rtr_rts(&p.b, &p.a);
		to_rtr_rts(&p.a, &p.b);
		ping_both(&p);
		sv_pair_close(&p);
	}
}

struct mover {
	struct sv_end *e;
	const struct sv_end *peer;
	atomic_int *go;
	int err;
};

static void *move(void *arg)
{
	struct mover *m = arg;

	atomic_fetch_add(m->go, 1);
	while (atomic_load(m->go) < 2)
		; /* both threads at the line, then RTR at once */
	m->err = sv_end_to_rtr(m->e, m->peer->qp->qp_num, m->peer->o.psn);
	if (!m->err)
		m->err = sv_end_to_rts(m->e);
	return NULL;
}

SV_TEST(accept_connect_during_rtr)
{
	for (int i = 0; i < 8; i++) {
		struct sv_pair p;
		atomic_int go = 0;
		struct mover ma, mb;
		pthread_t ta, tb;

		open_ends(&p);
		ma = (struct mover){.e = &p.a, .peer = &p.b, .go = &go};
		mb = (struct mover){.e = &p.b, .peer = &p.a, .go = &go};
		ASSERT_OK(pthread_create(&ta, NULL, move, &ma));
		ASSERT_OK(pthread_create(&tb, NULL, move, &mb));
		ASSERT_OK(pthread_join(ta, NULL));
		ASSERT_OK(pthread_join(tb, NULL));
		ASSERT_OK(ma.err);
		ASSERT_OK(mb.err);
		ping_both(&p);
		sv_pair_close(&p);
	}
}

SV_TEST(accept_eagain_bounded)
{
	enum { PAIRS = 16 };
	struct sv_pair p[PAIRS];
	long calls, eagain, taken;

	/* opened first: only the connections are counted */
	for (int i = 0; i < PAIRS; i++)
		open_ends(&p[i]);
	calls = atomic_load(&n_accept);
	eagain = atomic_load(&n_eagain);
	taken = atomic_load(&n_taken);
	for (int i = 0; i < PAIRS; i++) {
		to_rtr_rts(&p[i].a, &p[i].b);
		to_rtr_rts(&p[i].b, &p[i].a);
		ping_both(&p[i]);
	}
	calls = atomic_load(&n_accept) - calls;
	eagain = atomic_load(&n_eagain) - eagain;
	taken = atomic_load(&n_taken) - taken;
	fprintf(stderr,
		"%d QPs: %ld accept4 calls, %ld took a connection, "
		"%ld EAGAIN\n",
		2 * PAIRS, calls, taken, eagain);
	ASSERT_GE(taken, 2 * PAIRS); /* each QP took its peer's */
	ASSERT_LE(eagain * 2, 3 * 2 * PAIRS);
	for (int i = 0; i < PAIRS; i++)
		sv_pair_close(&p[i]);
}
