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

/* The link's peer said goodbye (st CLOSED) or vanished (DEAD)
 * (progress.c).  Caller holds qp->lock. */
void sv_qp_link_event(struct sv_qp *qp, enum sv_link_state st);

/* Progress (progress.c). */
int sv_progress_start(struct sv_context *ctx);
void sv_progress_stop(struct sv_context *ctx);
/* Registers p (its callback: sv_pfd_set) for fd in ctx's loop. */
void sv_progress_add(struct sv_context *ctx, struct sv_pfd *p, int fd);
void sv_progress_del(struct sv_context *ctx, struct sv_pfd *p);
/* An edge-triggered socket of ours (a TCP link's): out, whether room to
 * send wakes the thread too. */
void sv_progress_want_out(struct sv_context *ctx, struct sv_pfd *p, bool out);
/* Stops (or resumes) watching p for input; hang-ups still wake us. */
void sv_progress_quiet(struct sv_context *ctx, struct sv_pfd *p, bool quiet);
void sv_progress_kick(struct sv_context *ctx);
/* New send work while the app may not poll: the thread must see its
 * timers (a plain load when the thread will look at qp anyway). */
void sv_progress_note_work(struct sv_qp *qp);
/* Asks the thread to look at qp soon (any thread; qp is type-stable). */
void sv_progress_visit(struct sv_qp *qp);
/* The callbacks of a QP's fds (sv_pfd_set), in the progress thread:
 * listener (hellos, edge), our connection or a TCP link's socket (rung,
 * edge), a peer's connection to us (goodbye or hang-up, level), a UD
 * QP's datagram socket (edge).  Each looks at the QP after. */
void sv_progress_on_listen(struct sv_io *io, uint32_t revents);
void sv_progress_on_doorbell(struct sv_io *io, uint32_t revents);
void sv_progress_on_conn(struct sv_io *io, uint32_t revents);
void sv_progress_on_ud(struct sv_io *io, uint32_t revents);
/* Runs the engine for one QP if it has work; the fast path of poll/post. */
void sv_qp_drive(struct sv_qp *qp);
/* now: the time if the caller knows it, else 0 (the engine may skip
 * its timers to save clock reads). */
void sv_qp_run(struct sv_qp *qp, uint64_t now);

#endif
