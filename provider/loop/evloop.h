/* SPDX-License-Identifier: MIT */
/*
 * The progress thread's event loop, in libuv's spirit: each fd is
 * registered with the callback that handles it (struct sv_io, libuv's
 * uv__io_t), and timers sit in a binary min-heap (struct sv_timer), so a
 * wake-up costs what happened, not the number of objects.  A low layer: it
 * calls nothing of the provider; owners register callbacks.
 */
#ifndef SV_EVLOOP_H
#define SV_EVLOOP_H

#include <stdbool.h>
#include <stdint.h>

struct sv_io;
struct sv_timer;

typedef void sv_io_cb(struct sv_io *io, uint32_t revents);
typedef void sv_timer_cb(struct sv_timer *t, uint64_t now);

/* An fd in the loop's epoll (epoll_event.data.ptr is the sv_io).  Start,
 * modify and stop may be called from any thread (epoll is); an event the
 * loop already took may still be handed to cb after sv_io_stop, so the
 * owner's memory must stay valid (or type-stable) while its loop runs. */
struct sv_io {
	sv_io_cb *cb;	 /* relaxed atomic: an owner may switch it while
			  * the loop dispatches an event (sv_io_set_cb) */
	int fd;		 /* -1 when not registered */
	uint32_t events; /* EPOLL* bits as registered */
};

/* A deadline.  Only the loop's thread arms, re-arms, stops and runs
 * timers: the heap has no lock.  idx is its slot, so that re-arming or
 * stopping one in the middle of the heap is O(log n). */
struct sv_timer {
	uint64_t when;	 /* ns, the caller's clock (sv_now_ns) */
	sv_timer_cb *cb; /* called once when due; it may re-arm */
	uint32_t idx;	 /* 1-based slot in the heap; 0: not armed */
};

struct sv_loop {
	int epfd;
	struct sv_timer **heap; /* heap[1..n]: a binary min-heap on when */
	uint32_t n, cap;
	uint64_t ios;	 /* io callbacks run (tests, counters) */
	uint64_t timers; /* timer callbacks run */
};

/* 0 or -errno. */
int sv_loop_init(struct sv_loop *l);
void sv_loop_fini(struct sv_loop *l);

static inline void sv_io_init(struct sv_io *io, sv_io_cb *cb)
{
	__atomic_store_n(&io->cb, cb, __ATOMIC_RELAXED);
	io->fd = -1;
	io->events = 0;
}

static inline void sv_io_set_cb(struct sv_io *io, sv_io_cb *cb)
{
	__atomic_store_n(&io->cb, cb, __ATOMIC_RELAXED);
}

/* Registers fd with events (EPOLLIN, EPOLLET, ...): 0 or -errno. */
int sv_io_start(struct sv_loop *l, struct sv_io *io, int fd, uint32_t events);
/* New events for a registered io: 0 or -errno. */
int sv_io_modify(struct sv_loop *l, struct sv_io *io, uint32_t events);
/* Unregisters (nothing if not registered); the fd stays open. */
void sv_io_stop(struct sv_loop *l, struct sv_io *io);

static inline void sv_timer_init(struct sv_timer *t, sv_timer_cb *cb)
{
	t->cb = cb;
	t->idx = 0;
}

static inline bool sv_timer_armed(const struct sv_timer *t)
{
	return t->idx != 0;
}

/* Arms t at when, or moves it there if armed: 0, or -ENOMEM (the heap
 * could not grow; t is then not armed). */
int sv_timer_start(struct sv_loop *l, struct sv_timer *t, uint64_t when);
void sv_timer_stop(struct sv_loop *l, struct sv_timer *t);

/* The earliest timer's deadline, or UINT64_MAX: O(1). */
static inline uint64_t sv_loop_next(const struct sv_loop *l)
{
	return l->n ? l->heap[1]->when : UINT64_MAX;
}

/* Runs the timers due at now, earliest first, each disarmed before its
 * callback; at most as many callbacks as timers were armed on entry, so
 * one that re-arms itself in the past cannot hold the loop.  Returns how
 * many ran. */
uint32_t sv_loop_run_timers(struct sv_loop *l, uint64_t now);
/* One epoll_wait (timeout_ms as epoll's: -1 forever), each event handed
 * to its io's callback.  Returns the events, or -errno. */
int sv_loop_poll(struct sv_loop *l, int timeout_ms);

#endif
