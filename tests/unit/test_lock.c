// SPDX-License-Identifier: MIT
/*
 * provider/lib/util.h's QP and CQ lock alone: a polite taker (an app's
 * poll that only helps drive a QP) leaves the lock to a thread that waits
 * for it, so that a poll loop cannot starve the progress thread.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "sv_test.h"
#include "util.h"

struct waiter {
	struct sv_lock *l;
	atomic_int got;	 /* it holds the lock */
	atomic_int done; /* it may let go */
};

static void *wait_for_it(void *arg)
{
	struct waiter *w = arg;

	sv_lock(w->l);
	atomic_store(&w->got, 1);
	while (!atomic_load(&w->done))
		;
	sv_unlock(w->l);
	return NULL;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

SV_TEST(lock_polite_taker_defers_to_a_waiter)
{
	struct sv_lock l = {0};
	struct waiter w = {.l = &l};
	pthread_t th;
	uint64_t end;

	ASSERT_TRUE(sv_trylock_polite(&l)); /* nobody waits: taken */
	ASSERT_OK(pthread_create(&th, NULL, wait_for_it, &w));
	for (end = now_ms() + 10000; !atomic_load(&l.waiting);)
		ASSERT_TRUE(now_ms() < end);
	sv_unlock(&l);
	/* the waiter still spins for it, or has it: a polite taker gets
	 * nothing either way, where sv_trylock could have won the race */
	ASSERT_FALSE(sv_trylock_polite(&l));
	for (end = now_ms() + 10000; !atomic_load(&w.got);) {
		ASSERT_FALSE(sv_trylock_polite(&l));
		ASSERT_TRUE(now_ms() < end);
	}
	ASSERT_EQ(0, atomic_load(&l.waiting)); /* it stopped waiting */
	atomic_store(&w.done, 1);
	ASSERT_OK(pthread_join(th, NULL));
	ASSERT_TRUE(sv_trylock_polite(&l)); /* free again, nobody waits */
	sv_unlock(&l);
}
