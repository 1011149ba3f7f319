// SPDX-License-Identifier: MIT
/*
 * util.h's out-of-line parts: the lock's contended path and the debug log
 * (SOFTVERBS_DEBUG).  Every layer uses them, so they live beside none.
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "util.h"

int sv_debug;

void sv_lock_slow(struct sv_lock *l)
{
	/* seen by sv_trylock_polite: a polite taker leaves it to us */
	atomic_fetch_add_explicit(&l->waiting, 1, memory_order_relaxed);
	for (unsigned int spins = 0;; spins++) {
		if (sv_trylock(l)) {
			atomic_fetch_sub_explicit(&l->waiting, 1,
						  memory_order_relaxed);
			return;
		}
		if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		} else {
			sched_yield(); /* let a preempted holder run */
		}
	}
}

void sv_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "softverbs[%d]: ", getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static void debug_once(void)
{
	sv_debug = sv_env_bool(SV_ENV_DEBUG);
}

void sv_debug_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, debug_once);
}
