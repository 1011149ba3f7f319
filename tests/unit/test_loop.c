// SPDX-License-Identifier: MIT
/*
 * provider/loop/evloop.c alone: the timer heap (order, re-arm, stop in the
 * middle, many timers against a sorted reference) and the io dispatch
 * (each event to its own callback, a callback switched while registered,
 * a stopped io never called).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "evloop.h"
#include "sv_test.h"

struct rec {
	struct sv_timer t;
	int id;
	int runs;
};

static int order[4096];
static int norder;

static void note(struct sv_timer *t, uint64_t now)
{
	struct rec *r = (struct rec *)t;

	(void)now;
	r->runs++;
	order[norder++] = r->id;
}

/* Every slot's parent is no later than it, and each knows its slot. */
static void check_heap(const struct sv_loop *l)
{
	for (uint32_t i = 1; i <= l->n; i++) {
		ASSERT_EQ(i, l->heap[i]->idx);
		if (i > 1)
			ASSERT_LE(l->heap[i / 2]->when, l->heap[i]->when);
	}
}

SV_TEST(loop_timers_run_in_order)
{
	static const uint64_t when[] = {50, 10, 40, 20, 30};
	struct rec r[5];
	struct sv_loop l;

	ASSERT_OK(sv_loop_init(&l));
	norder = 0;
	ASSERT_EQ(UINT64_MAX, sv_loop_next(&l));
	for (int i = 0; i < 5; i++) {
		r[i] = (struct rec){.id = i};
		sv_timer_init(&r[i].t, note);
		ASSERT_OK(sv_timer_start(&l, &r[i].t, when[i]));
	}
	check_heap(&l);
	ASSERT_EQ(10, sv_loop_next(&l));
	ASSERT_EQ(0, sv_loop_run_timers(&l, 9));  /* none due */
	ASSERT_EQ(2, sv_loop_run_timers(&l, 20)); /* due: 10 and 20 */
	ASSERT_EQ(3, sv_loop_run_timers(&l, 1000));
	ASSERT_EQ(5, norder);
	ASSERT_EQ(1, order[0]);
	ASSERT_EQ(3, order[1]);
	ASSERT_EQ(4, order[2]);
	ASSERT_EQ(2, order[3]);
	ASSERT_EQ(0, order[4]);
	for (int i = 0; i < 5; i++) {
		ASSERT_EQ(1, r[i].runs);
		ASSERT_FALSE(sv_timer_armed(&r[i].t));
	}
	sv_loop_fini(&l);
}

SV_TEST(loop_timer_rearm_moves_it)
{
	struct rec a = {.id = 1}, b = {.id = 2}, c = {.id = 3};
	struct sv_loop l;

	ASSERT_OK(sv_loop_init(&l));
	norder = 0;
	sv_timer_init(&a.t, note);
	sv_timer_init(&b.t, note);
	sv_timer_init(&c.t, note);
	ASSERT_OK(sv_timer_start(&l, &a.t, 10));
	ASSERT_OK(sv_timer_start(&l, &b.t, 20));
	ASSERT_OK(sv_timer_start(&l, &c.t, 30));
	ASSERT_OK(sv_timer_start(&l, &a.t, 40)); /* later: a is last now */
	ASSERT_EQ(3, l.n);
	ASSERT_EQ(20, sv_loop_next(&l));
	ASSERT_OK(sv_timer_start(&l, &c.t, 5)); /* earlier: c is first */
	check_heap(&l);
	ASSERT_EQ(5, sv_loop_next(&l));
	ASSERT_EQ(3, sv_loop_run_timers(&l, 100));
	ASSERT_EQ(3, order[0]);
	ASSERT_EQ(2, order[1]);
	ASSERT_EQ(1, order[2]);
	ASSERT_EQ(1, a.runs); /* re-armed, not armed twice */
	sv_loop_fini(&l);
}

/* A timer that re-arms itself in the past runs once per call. */
static struct sv_loop *again_loop;

static void again(struct sv_timer *t, uint64_t now)
{
	struct rec *r = (struct rec *)t;

	(void)now;
	r->runs++;
	ASSERT_OK(sv_timer_start(again_loop, t, 0));
}

SV_TEST(loop_timer_rearmed_in_the_past_runs_once_per_call)
{
	struct rec a = {.id = 1};
	struct sv_loop l;

	ASSERT_OK(sv_loop_init(&l));
	again_loop = &l;
	sv_timer_init(&a.t, again);
	ASSERT_OK(sv_timer_start(&l, &a.t, 10));
	ASSERT_EQ(1, sv_loop_run_timers(&l, 10));
	ASSERT_EQ(1, sv_loop_run_timers(&l, 10));
	ASSERT_EQ(2, a.runs);
	ASSERT_TRUE(sv_timer_armed(&a.t));
	sv_loop_fini(&l);
}

SV_TEST(loop_timer_stop_from_the_middle)
{
	static const int want[] = {7, 6, 5, 3, 2, 1, 0}; /* 4, 8 stopped */
	struct rec r[9];
	struct sv_loop l;

	ASSERT_OK(sv_loop_init(&l));
	norder = 0;
	for (int i = 0; i < 9; i++) {
		r[i] = (struct rec){.id = i};
		sv_timer_init(&r[i].t, note);
		ASSERT_OK(sv_timer_start(&l, &r[i].t, 100 - 10 * i));
	}
	/* neither the first nor the last slot */
	ASSERT_TRUE(r[4].t.idx > 1 && r[4].t.idx < l.n);
	sv_timer_stop(&l, &r[4].t);
	sv_timer_stop(&l, &r[4].t); /* twice: nothing */
	sv_timer_stop(&l, &r[8].t); /* the earliest */
	check_heap(&l);
	ASSERT_EQ(7, l.n);
	ASSERT_EQ(7, sv_loop_run_timers(&l, 1000));
	for (int i = 0; i < 7; i++)
		ASSERT_EQ(want[i], order[i]);
	ASSERT_EQ(0, r[4].runs);
	ASSERT_EQ(0, r[8].runs);
	sv_loop_fini(&l);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t last_when;
static int out_of_order;

static void in_order(struct sv_timer *t, uint64_t now)
{
	(void)now;
	if (t->when < last_when)
		out_of_order++;
	last_when = t->when;
	((struct rec *)t)->runs++;
}

SV_TEST(loop_many_timers_against_a_sorted_reference)
{
	enum { N = 4000 };
	struct rec *r = calloc(N, sizeof(*r));
	uint64_t *ref = calloc(N, sizeof(*ref));
	uint32_t left = 0, ran;
	struct sv_loop l;

	ASSERT_NOT_NULL(r);
	ASSERT_NOT_NULL(ref);
	ASSERT_OK(sv_loop_init(&l));
	srand(25);
	for (int i = 0; i < N; i++) {
		sv_timer_init(&r[i].t, in_order);
		ASSERT_OK(
			sv_timer_start(&l, &r[i].t, (uint64_t)rand() % 100000));
	}
	/* re-arm a third, stop a third, keep the rest */
	for (int i = 0; i < N; i++) {
		if (i % 3 == 1)
			ASSERT_OK(sv_timer_start(&l, &r[i].t,
						 (uint64_t)rand() % 100000));
		else if (i % 3 == 2)
			sv_timer_stop(&l, &r[i].t);
	}
	check_heap(&l);
	for (int i = 0; i < N; i++)
		if (i % 3 != 2)
			ref[left++] = r[i].t.when;
	qsort(ref, left, sizeof(*ref), cmp_u64);
	ASSERT_EQ(left, l.n);
	ASSERT_EQ(ref[0], sv_loop_next(&l));
	/* half, then the rest: the split falls where the reference says */
	ran = sv_loop_run_timers(&l, ref[left / 2] - 1);
	ASSERT_TRUE(ran <= left / 2);
	ASSERT_EQ(ref[ran], sv_loop_next(&l));
	ran += sv_loop_run_timers(&l, UINT64_MAX);
	ASSERT_EQ(left, ran);
	ASSERT_EQ(0, out_of_order);
	for (int i = 0; i < N; i++)
		ASSERT_EQ(i % 3 == 2 ? 0 : 1, r[i].runs);
	sv_loop_fini(&l);
	free(ref);
	free(r);
}

struct evio {
	struct sv_io io;
	int hits;
	uint32_t got;
};

static void hit(struct sv_io *io, uint32_t revents)
{
	struct evio *e = (struct evio *)io;

	e->hits++;
	e->got = revents;
}

static void hit_twice(struct sv_io *io, uint32_t revents)
{
	struct evio *e = (struct evio *)io;

	e->hits += 2;
	e->got = revents;
}

SV_TEST(loop_io_each_event_to_its_callback)
{
	struct evio a, b;
	uint64_t one = 1;
	struct sv_loop l;
	int fa = eventfd(0, EFD_NONBLOCK), fb = eventfd(0, EFD_NONBLOCK);

	ASSERT_TRUE(fa >= 0 && fb >= 0);
	ASSERT_OK(sv_loop_init(&l));
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	sv_io_init(&a.io, hit);
	sv_io_init(&b.io, hit);
	ASSERT_OK(sv_io_start(&l, &a.io, fa, EPOLLIN | EPOLLET));
	ASSERT_OK(sv_io_start(&l, &b.io, fb, EPOLLIN | EPOLLET));
	ASSERT_EQ(0, sv_loop_poll(&l, 0)); /* nothing happened */
	ASSERT_EQ(sizeof(one), write(fb, &one, sizeof(one)));
	ASSERT_EQ(1, sv_loop_poll(&l, 1000));
	ASSERT_EQ(0, a.hits);
	ASSERT_EQ(1, b.hits);
	ASSERT_TRUE(b.got & EPOLLIN);
	/* another callback for the same registration */
	sv_io_set_cb(&a.io, hit_twice);
	ASSERT_EQ(sizeof(one), write(fa, &one, sizeof(one)));
	ASSERT_EQ(1, sv_loop_poll(&l, 1000));
	ASSERT_EQ(2, a.hits);
	/* stopped: its events are not ours any more */
	sv_io_stop(&l, &a.io);
	ASSERT_EQ(-1, a.io.fd);
	ASSERT_EQ(sizeof(one), write(fa, &one, sizeof(one)));
	ASSERT_EQ(0, sv_loop_poll(&l, 0));
	ASSERT_EQ(2, a.hits);
	/* modify: EPOLLOUT too, level triggered, so it is there at once */
	ASSERT_OK(sv_io_modify(&l, &b.io, EPOLLOUT));
	ASSERT_EQ(1, sv_loop_poll(&l, 1000));
	ASSERT_TRUE(b.got & EPOLLOUT);
	ASSERT_EQ(3, l.ios);
	sv_loop_fini(&l);
	close(fa);
	close(fb);
}
