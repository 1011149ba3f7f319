/* SPDX-License-Identifier: MIT */
/*
 * The core interface (DESIGN.md, "provider/"): what the engine (engine/),
 * the transports (transport/) and the progress loop (loop/) need of the
 * verbs objects, below all of them so their calls go down.  Only an
 * object's data path lives here: a CQ's push, an MR key's lookup, an event
 * queued for the program, a QP's flush.  The verbs that make and destroy
 * the objects stay in verbs/.  Calls only wire/ and lib/.
 */
#ifndef SV_CORE_H
#define SV_CORE_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "util.h"

struct sv_context;
struct sv_cq;
struct sv_channel;
struct sv_evq;
struct sv_mr;
struct sv_mw;
struct sv_pd;
struct sv_qp;
struct sv_swqe;

/* Pushes a completion; raises CQ events and IBV_EVENT_CQ_ERR on overrun.
 * Caller holds no CQ lock (cq.c). */
void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, bool solicited);

/* Looks up an lkey/rkey; NULL if it names no live MR of this PD (mr.c). */
struct sv_mr *sv_mr_lookup(struct sv_context *ctx, uint32_t key,
			   struct sv_pd *pd);
/* Whether an import of another process's MR was revoked (mr.c). */
bool sv_mr_revoked(struct sv_mr *mr);
/* Where [addr, addr+len) of key is in our memory, if key names a live MR
 * of pd with every bit of access and the range is inside it; else NULL. */
uint8_t *sv_mr_at(struct sv_context *ctx, uint32_t key, struct sv_pd *pd,
		  uint64_t addr, uint64_t len, unsigned int access);
/* Whether the first len bytes of a gather/scatter list are all in live
 * MRs of pd with local write (a receive WQE as it stands now). */
bool sv_sges_writable(struct sv_context *ctx, struct sv_pd *pd,
		      const struct ibv_sge *sg, uint32_t n, uint64_t len);

/* Memory windows (mw.c).  Where [va, va+len) of a window's rkey is in
 * our memory, for a request of QP qpn on PD pd needing access; NULL if
 * the key names no valid window that allows it. */
uint8_t *sv_mw_at(struct sv_context *ctx, uint32_t rkey, struct sv_pd *pd,
		  uint32_t qpn, uint64_t va, uint64_t len, unsigned int access);
/* Executes a BIND_MW WQE of qp (caller holds qp->lock): success, or
 * IBV_WC_MW_BIND_ERR with the window unchanged. */
enum ibv_wc_status sv_mw_bind(struct sv_qp *qp, const struct sv_swqe *w);
/* Invalidates the type 2 window rkey of pd: qpn 0 for a local
 * invalidate, else the QP a SEND with Invalidate came on.  -EINVAL if
 * the key names no such valid window. */
int sv_mw_invalidate(struct sv_context *ctx, uint32_t rkey, struct sv_pd *pd,
		     uint32_t qpn);
/* Makes mw invalid; caller holds ctx->mw_lock. */
void sv_mw_clear(struct sv_mw *mw);

/* One queued async event (ctx->async.events); ibv_get_async_event
 * (verbs/channel.c) takes it off. */
struct sv_async_ev {
	struct sv_list node;
	struct ibv_async_event ev;
};

/* Queues an async event for the program (event.c). */
void sv_async_event(struct sv_context *ctx, const struct ibv_async_event *e);
/* Queues one completion event of cq on its channel (event.c). */
void sv_channel_signal(struct sv_channel *ch, struct sv_cq *cq);
/* The queue the calling thread spins on in ibv_get_cq_event, NULL after:
 * the events it raises there meanwhile go uncounted (struct sv_evq). */
void sv_evq_spinning(struct sv_evq *q);
/* Adds n events' counts to q's fd (event.c). */
void sv_evq_count(struct sv_evq *q, uint64_t n);

/* IBA 10.3.1: every outstanding WR completes with a flush error: both
 * queues, or the send queue alone (SQE: receives go on).  Caller holds
 * qp->lock (flush.c). */
void sv_qp_flush(struct sv_qp *qp);
void sv_qp_flush_sq(struct sv_qp *qp);

#endif
