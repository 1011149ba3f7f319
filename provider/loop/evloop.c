// SPDX-License-Identifier: MIT
/*
 * The event loop (evloop.h): an epoll set whose events carry their sv_io, so
 * dispatch is a call through io->cb, and a binary min-heap of timers, each
 * knowing its slot: arm, re-arm and stop are O(log n), the next deadline
 * O(1).  One thread runs a loop and owns its heap.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "evloop.h"

int sv_loop_init(struct sv_loop *l)
{
	*l = (struct sv_loop){.epfd = epoll_create1(EPOLL_CLOEXEC)};
	return l->epfd < 0 ? -errno : 0;
}

void sv_loop_fini(struct sv_loop *l)
{
	if (l->epfd >= 0)
		close(l->epfd);
	free(l->heap);
	*l = (struct sv_loop){.epfd = -1};
}

int sv_io_start(struct sv_loop *l, struct sv_io *io, int fd, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = io};

	io->fd = fd;
	io->events = events;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev))
		return -errno;
	return 0;
}

int sv_io_modify(struct sv_loop *l, struct sv_io *io, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = io};

	if (io->fd < 0)
		return -EBADF;
	io->events = events;
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev))
		return -errno;
	return 0;
}

void sv_io_stop(struct sv_loop *l, struct sv_io *io)
{
	if (io->fd < 0)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
	io->fd = -1;
}

static void place(struct sv_loop *l, uint32_t i, struct sv_timer *t)
{
	l->heap[i] = t;
	t->idx = i;
}

/* t goes up from slot i while its parent is later. */
static void sift_up(struct sv_loop *l, uint32_t i, struct sv_timer *t)
{
	while (i > 1 && l->heap[i / 2]->when > t->when) {
		place(l, i, l->heap[i / 2]);
		i /= 2;
	}
	place(l, i, t);
}

/* t goes down from slot i while a child is earlier. */
static void sift_down(struct sv_loop *l, uint32_t i, struct sv_timer *t)
{
	for (;;) {
		uint32_t c = 2 * i;

		if (c > l->n)
			break;
		if (c + 1 <= l->n && l->heap[c + 1]->when < l->heap[c]->when)
			c++;
		if (l->heap[c]->when >= t->when)
			break;
		place(l, i, l->heap[c]);
		i = c;
	}
	place(l, i, t);
}

void sv_timer_stop(struct sv_loop *l, struct sv_timer *t)
{
	uint32_t i = t->idx;
	struct sv_timer *last;

	if (!i)
		return;
	t->idx = 0;
	last = l->heap[l->n--];
	if (last == t)
		return;
	/* the last one fills the hole, and moves whichever way it must */
	if (i > 1 && l->heap[i / 2]->when > last->when)
		sift_up(l, i, last);
	else
		sift_down(l, i, last);
}

int sv_timer_start(struct sv_loop *l, struct sv_timer *t, uint64_t when)
{
	if (t->idx) {
		uint64_t was = t->when;

		t->when = when;
		if (when < was)
			sift_up(l, t->idx, t);
		else
			sift_down(l, t->idx, t);
		return 0;
	}
	if (l->n + 1 >= l->cap) {
		uint32_t cap = l->cap ? 2 * l->cap : 64;
		struct sv_timer **h = realloc(l->heap, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		l->heap = h;
		l->cap = cap;
	}
	t->when = when;
	sift_up(l, ++l->n, t);
	return 0;
}

uint32_t sv_loop_run_timers(struct sv_loop *l, uint64_t now)
{
	uint32_t ran = 0, most = l->n;

	while (ran < most && l->n && l->heap[1]->when <= now) {
		struct sv_timer *t = l->heap[1];

		sv_timer_stop(l, t);
		ran++;
		l->timers++;
		t->cb(t, now);
	}
	return ran;
}

int sv_loop_poll(struct sv_loop *l, int timeout_ms)
{
	struct epoll_event ev[32];
	int n = epoll_wait(l->epfd, ev, 32, timeout_ms);

	if (n < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		struct sv_io *io = ev[i].data.ptr;
		sv_io_cb *cb = __atomic_load_n(&io->cb, __ATOMIC_RELAXED);

		l->ios++;
		if (cb)
			cb(io, ev[i].events);
	}
	return n;
}
