/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every provider file uses: container_of, lists, time,
 * logging (SOFTVERBS_DEBUG=1 prints to stderr), and branch hints.
 */
#ifndef SV_UTIL_H
#define SV_UTIL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr)-offsetof(type, member)))
#define likely(x)     __builtin_expect(!!(x), 1)
#define unlikely(x)   __builtin_expect(!!(x), 0)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SV_CACHELINE  64

/* An intrusive doubly linked list, as the kernel's list_head. */
struct sv_list {
	struct sv_list *next, *prev;
};

static inline void sv_list_init(struct sv_list *l)
{
	l->next = l->prev = l;
}

static inline bool sv_list_empty(const struct sv_list *l)
{
	return l->next == l;
}

static inline void sv_list_add_tail(struct sv_list *l, struct sv_list *n)
{
	n->prev = l->prev;
	n->next = l;
	l->prev->next = n;
	l->prev = n;
}

static inline void sv_list_del(struct sv_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

#define sv_list_for_each(pos, head) \
	for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

/*
 * Places n bytes of the peer's into registered memory as an HCA does:
 * the last byte once, after all the others.  Programs spin on the last
 * byte of an RDMA write's target (riostream, perftest) and then write
 * there themselves; a plain memcpy may store a byte twice (glibc copies
 * 33..64 bytes as two overlapping vector stores, and 64 as the same
 * store twice), and the second, stale store can land after the program
 * saw the first and moved on, undoing the program's own write.
 */
static inline void sv_place(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t k = n - 1; /* the bytes before the last */

	if (!n)
		return;
	/* Those may be stored twice: nobody waits on them, and the last
	 * byte's release store comes after all.  So a few are two
	 * overlapping moves here, not a call (an inline 8-byte RDMA
	 * write: ib_write_lat) */
	if (k >= 8 && k <= 16) {
		memcpy(d, s, 8);
		memcpy(d + k - 8, s + k - 8, 8);
	} else if (k >= 4 && k < 8) {
		memcpy(d, s, 4);
		memcpy(d + k - 4, s + k - 4, 4);
	} else if (k >= 2 && k < 4) {
		memcpy(d, s, 2);
		memcpy(d + k - 2, s + k - 2, 2);
	} else if (k) {
		memcpy(d, s, k);
	}
	__atomic_store_n(d + k, s[k], __ATOMIC_RELEASE);
}

/*
 * ThreadSanitizer sees the order that atomics and locks give, not the
 * order the kernel gives: what a QP sent on its TCP stream before the
 * peer QP of the same process reads it.  So it reported the responder's
 * copy of a read's source bytes as racing with the program's writes made
 * before ibv_post_send (faults_drop_rc_read_and_atomic over TCP, 8 of 8
 * runs), and printing that report stalled the responder until the
 * requester's retries ran out (RETRY_EXC_ERR).  The same over shared
 * memory: the two QPs map the ring at two addresses, and TSan pairs a
 * release and an acquire only at one (3 of 10 runs).  Under TSan a send
 * (a TCP frame, a ring record) releases and a receive acquires one
 * object of the process: coarse (any link's records order any other's),
 * but only what the kernel or the ring orders anyway.
 */
extern char sv_tsan_wire;
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
static inline void sv_tsan_sent(void)
{
	__tsan_release(&sv_tsan_wire);
}
static inline void sv_tsan_received(void)
{
	__tsan_acquire(&sv_tsan_wire);
}
#else
static inline void sv_tsan_sent(void)
{
}
static inline void sv_tsan_received(void)
{
}
#endif

static inline uint64_t sv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* How long since then, 0 if then is later than now: a time taken before
 * another thread stamped then (under the same lock, with its own clock
 * read) is not the stamp's future.  Unsigned now - then would be ~2^64
 * there: the progress thread's look, with one clock read for a walk of
 * thousands of QPs, took links that had just broken for gone. */
static inline uint64_t sv_ns_since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

static inline uint32_t sv_roundup_pow2(uint32_t v)
{
	return v <= 1 ? 1 : 1u << (32 - __builtin_clz(v - 1));
}

/*
 * The lock of a QP or CQ: held for a few hundred nanoseconds, by the app's
 * threads and the context's progress thread.  A plain spinlock is wrong on
 * a machine with fewer CPUs than threads: a waiter can have preempted the
 * holder on the same CPU and then spins away its whole time slice.  So:
 * spin briefly, then yield the CPU to whoever holds it.
 */
struct sv_lock {
	_Atomic int held;
	_Atomic int waiting; /* threads in sv_lock_slow */
};

static inline bool sv_trylock(struct sv_lock *l)
{
	return !atomic_load_explicit(&l->held, memory_order_relaxed) &&
	       !atomic_exchange_explicit(&l->held, 1, memory_order_acquire);
}

/*
 * sv_trylock for a taker that only helps (an app's poll driving a QP
 * that someone else can drive too): it defers to a thread that waits for
 * the lock.  The lock is not fair, and a poll loop that takes it again
 * a few nanoseconds after each release starved the progress thread's
 * sv_lock for 3-21 ms, the time a caller's connection waited to be taken
 * (ibv_rc_pingpong across namespaces).
 */
static inline bool sv_trylock_polite(struct sv_lock *l)
{
	return !atomic_load_explicit(&l->waiting, memory_order_relaxed) &&
	       sv_trylock(l);
}

void sv_lock_slow(struct sv_lock *l);

static inline void sv_lock(struct sv_lock *l)
{
	if (!sv_trylock(l))
		sv_lock_slow(l);
}

static inline void sv_unlock(struct sv_lock *l)
{
	atomic_store_explicit(&l->held, 0, memory_order_release);
}

extern int sv_debug;
/* Sets sv_debug from SOFTVERBS_DEBUG, once (ibv_get_device_list). */
void sv_debug_init(void);
void sv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define sv_dbg(...)                          \
	do {                                 \
		if (unlikely(sv_debug))      \
			sv_log(__VA_ARGS__); \
	} while (0)

/* A work completion status's name (wc_status.c), an enum ibv_wc_status:
 * rdma-core's strings. */
const char *sv_wc_status_str(int status);

#endif
