/* SPDX-License-Identifier: MIT */
/*
 * The progress thread (loop/progress.c, layer 4): starting it, the fds
 * the objects and transports register in its loop (evloop.h) with their
 * callbacks, and the calls that make it look at a QP.
 */
#ifndef SV_PROGRESS_H
#define SV_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "evloop.h"
#include "objects.h" /* and link.h: enum sv_link_state */

/* The progress thread (loop/progress.c): the context's event loop.
 * next_ns: the context's deadlines outside the loop's heap (it may run
 * what is due), asked before each sleep; UINT64_MAX: none. */
typedef uint64_t sv_progress_next_cb(struct sv_context *ctx, uint64_t now);
int sv_progress_start(struct sv_context *ctx, sv_progress_next_cb *next_ns);
void sv_progress_stop(struct sv_context *ctx);
/* The context whose progress thread calls; NULL on any other thread. */
struct sv_context *sv_progress_ctx(void);
/* A timer in ctx's loop (evloop.h), from its thread only: 0 or -ENOMEM. */
int sv_progress_timer_start(struct sv_context *ctx, struct sv_timer *t,
			    uint64_t when);
void sv_progress_timer_stop(struct sv_context *ctx, struct sv_timer *t);
/* Has the thread call cb(a) soon (any thread); nothing if a is queued. */
void sv_progress_async(struct sv_context *ctx, struct sv_async *a,
		       sv_async_cb *cb);
/* Has ctx's thread call p's callback soon, as if its fd had input
 * (any thread): input another reader of its socket took for p's owner
 * (a RoCE socket shared by several links, roce/share.c), which the fd's
 * own event may never say.  p's memory must stay valid (or type-stable);
 * nothing if a ring is on its way. */
void sv_pfd_ring(struct sv_context *ctx, struct sv_pfd *p);
/* Registers p (its callback: sv_pfd_set) for fd in ctx's loop. */
void sv_progress_add(struct sv_context *ctx, struct sv_pfd *p, int fd);
void sv_progress_del(struct sv_context *ctx, struct sv_pfd *p);
/* An edge-triggered socket of ours (a TCP link's): out, whether room to
 * send wakes the thread too. */
void sv_progress_want_out(struct sv_context *ctx, struct sv_pfd *p, bool out);
/* Stops (or resumes) watching p for input; hang-ups still wake us. */
void sv_progress_quiet(struct sv_context *ctx, struct sv_pfd *p, bool quiet);
void sv_progress_kick(struct sv_context *ctx);

#endif
