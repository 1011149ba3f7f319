// SPDX-License-Identifier: MIT
/*
 * Posting work: ibv_post_send, ibv_post_recv and the extended
 * ibv_wr_* builder of struct ibv_qp_ex.  Posting validates the request,
 * fills a queue slot and runs the requester at once, so a send usually
 * reaches the peer's ring before post returns.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "core.h"
#include "engine.h"
#include "inject.h"
#include "progress.h"
#include "rmem.h"

static bool sq_full(const struct sv_qp *qp)
{
	return qp->sq.post - qp->sq.comp >= qp->sq.max;
}

/* Posting to a QP before RTS is an error (IBA 10.8.2); in SQD the WR
 * waits; in SQE and ERR it is flushed. */
static int sq_state_ok(const struct sv_qp *qp)
{
	return qp->attr.qp_state >= IBV_QPS_RTS ? 0 : EINVAL;
}

/* Copies inline data now: the application may reuse the buffer as soon
 * as post returns. */
static int copy_inline(struct sv_qp *qp, struct sv_swqe *w, uint8_t *dst,
		       const struct ibv_sge *sg, uint32_t n)
{
	uint32_t len = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (sg[i].length > qp->max_inline - len)
			return EINVAL;
		if (!sg[i].length) /* UCX gives {NULL, 0}: no memcpy of it */
			continue;
		memcpy(dst + len, (void *)(uintptr_t)sg[i].addr, sg[i].length);
		len += sg[i].length;
	}
	w->length = len;
	w->inl = true;
	return 0;
}

/*
 * What each work request opcode is on the wire (wire.h, opcode.c).
 * Local operations (memory windows' bind and invalidate) put nothing on
 * the wire: the requester executes them in order (req.c).  Unlisted
 * opcodes (LSO, TSO, fast registration) are not supported.
 */
static const struct {
	uint8_t op;  /* enum sv_opcode, 0: local or not supported */
	bool imm;    /* carries immediate data */
	bool remote; /* names (rkey, remote_addr) */
	bool no_inl; /* inline makes no sense: data comes back */
	bool local;  /* executed here (no op on the wire) */
} wr_ops[] = {
	[IBV_WR_SEND] = {SV_OP_SEND, false, false, false, false},
	[IBV_WR_SEND_WITH_IMM] = {SV_OP_SEND, true, false, false, false},
	[IBV_WR_SEND_WITH_INV] = {SV_OP_SEND, false, false, false, false},
	[IBV_WR_RDMA_WRITE] = {SV_OP_WRITE, false, true, false, false},
	[IBV_WR_RDMA_WRITE_WITH_IMM] = {SV_OP_WRITE, true, true, false, false},
	[IBV_WR_RDMA_READ] = {SV_OP_READ_REQ, false, true, true, false},
	[IBV_WR_ATOMIC_CMP_AND_SWP] = {SV_OP_CMP_SWAP, false, true, true,
				       false},
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = {SV_OP_FETCH_ADD, false, true, true,
					 false},
	[IBV_WR_BIND_MW] = {0, false, false, true, true},
	[IBV_WR_LOCAL_INV] = {0, false, false, true, true},
};

/* QP types a local operation is allowed on: the connected ones (IBA
 * 10.6.7.2: a window is bound through a QP of its PD; rxe and mlx5 have
 * no UD bind); SEND_WITH_INV: RC (XRC's forwarded sends cannot carry it
 * here). */
#define SV_QPT_LOCAL                                       \
	(SV_QPT_BIT(IBV_QPT_RC) | SV_QPT_BIT(IBV_QPT_UC) | \
	 SV_QPT_BIT(IBV_QPT_XRC_SEND))

static bool wr_allowed(const struct sv_qp *qp, uint32_t opcode)
{
	uint32_t t = SV_QPT_BIT(qp->qpx.qp_base.qp_type);

	if (wr_ops[opcode].local)
		return SV_QPT_LOCAL & t;
	if (opcode == IBV_WR_SEND_WITH_INV)
		return SV_QPT_BIT(IBV_QPT_RC) & t;
	return sv_opcodes[wr_ops[opcode].op].qpts & t;
}

/*
 * Zeroes n bytes at p (8-byte aligned) with 16-byte stores, unrolled: for
 * a WQE's head (112 bytes) gcc's memset is `rep stos`, whose start-up
 * was half of new_wqe's time in a small one-sided post (perf annotate of
 * postpoll_read).  The loop is unrolled before gcc could turn it back
 * into a memset.
 */
typedef uint64_t sv_v2u64
	__attribute__((vector_size(16), may_alias, aligned(8)));

static inline __attribute__((always_inline)) void zero16(void *p, size_t n)
{
	sv_v2u64 *q = p;

#pragma GCC unroll 16
	for (size_t i = 0; i < n / 16; i++)
		q[i] = (sv_v2u64){0, 0};
	if (n % 16)
		memset((uint8_t *)p + n - n % 16, 0, n % 16);
}

/* A new WQE at sq_post for opcode, or NULL with *err. */
static struct sv_swqe *new_wqe(struct sv_qp *qp, uint32_t opcode, int *err)
{
	struct sv_swqe *w;

	if (opcode >= ARRAY_SIZE(wr_ops) ||
	    (!wr_ops[opcode].op && !wr_ops[opcode].local)) {
		/* known to verbs.h but not to us: not supported */
		*err = opcode <= IBV_WR_DRIVER1 ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (!wr_allowed(qp, opcode)) {
		*err = EINVAL; /* e.g. a read on UC (IBA 9.8.1) */
		return NULL;
	}
	if (sq_full(qp)) {
		*err = ENOMEM;
		return NULL;
	}
	w = &qp->sq.wqe[qp->sq.post & (qp->sq.size - 1)];
	/* An RC or UC WR that is not local reads none of the UD, XRC and
	 * window fields (from ud_qpn on): zeroing all of the WQE was a
	 * tenth of a small one-sided post (issue 27 item 5) */
	if (wr_ops[opcode].local ||
	    !(SV_QPT_BIT(qp->qpx.qp_base.qp_type) &
	      (SV_QPT_BIT(IBV_QPT_RC) | SV_QPT_BIT(IBV_QPT_UC))))
		memset(w, 0, sizeof(*w));
	else
		zero16(w, offsetof(struct sv_swqe, ud_qpn));
	if (unlikely(sv_inject.on) && sv_inject.delay_us)
		w->due_ns = sv_now_ns() + sv_inject.delay_us * 1000;
	w->opcode = opcode;
	w->op = wr_ops[opcode].op;
	w->imm_valid = wr_ops[opcode].imm;
	w->local = wr_ops[opcode].local;
	w->inv = opcode == IBV_WR_SEND_WITH_INV;
	return w;
}

#define SV_MW_ACCESS                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/*
 * A BIND_MW WR (man ibv_post_send, ibv_bind_mw): what it may not say is
 * EINVAL here, as rdma-core's providers check it; what the window, MR
 * and QP may not allow is the bind's completion error (core/mw.c).
 * Type 1 windows come only through ibv_bind_mw (type1).
 */
static int set_bind(struct sv_qp *qp, struct sv_swqe *w,
		    const struct ibv_send_wr *wr, bool type1)
{
	const struct ibv_mw_bind_info *b = &wr->bind_mw.bind_info;
	struct ibv_mw *mw = wr->bind_mw.mw;

	if (!mw || mw->context != qp->qpx.qp_base.context ||
	    mw->type != (type1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2))
		return EINVAL;
	if ((!b->mr && (b->addr || b->length)) ||
	    (b->mw_access_flags & ~(unsigned int)SV_MW_ACCESS))
		return EINVAL; /* incl. IBV_ACCESS_ZERO_BASED */
	if (b->mr && b->mr->pd != mw->pd)
		return EPERM; /* as verbs.h's ibv_bind_mw */
	if (!b->mr && !type1)
		return EINVAL; /* a type 2 window is unbound by LOCAL_INV */
	w->mw = container_of(mw, struct sv_mw, ibv);
	w->rkey = wr->bind_mw.rkey;
	w->mw_mr_key = b->mr ? b->mr->lkey : 0;
	w->raddr = b->addr;
	w->swap_add = b->length;
	w->mw_access = b->mw_access_flags &
		       (unsigned int)(SV_MW_ACCESS & ~IBV_ACCESS_LOCAL_WRITE);
	return 0;
}

/* The checks that need the whole WQE: atomics are 8 bytes (IBA 9.4.5),
 * reads and atomics cannot be inline. */
static int wqe_check(const struct sv_qp *qp, const struct sv_swqe *w)
{
	if (w->inl && wr_ops[w->opcode].no_inl)
		return EINVAL;
	if ((sv_opcodes[w->op].mask & SV_M_ATOMIC) &&
	    (w->length != 8 || w->num_sge != 1))
		return EINVAL;
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD && !w->ud_addr)
		return EINVAL; /* ibv_wr_*: no ibv_wr_set_ud_addr */
	return 0;
}

/* A UD send names its destination: an AH of this QP's PD, a QPN and a
 * qkey (IBA 9.8.4). */
static int ud_set_addr(struct sv_qp *qp, struct sv_swqe *w, struct ibv_ah *ibah,
		       uint32_t qpn, uint32_t qkey)
{
	struct sv_ah *ah;

	if (!ibah || to_spd(ibah->pd) != to_spd(qp->qpx.qp_base.pd) ||
	    qpn > SV_PSN_MASK)
		return EINVAL;
	ah = to_sah(ibah);
	w->ud_qpn = qpn;
	w->ud_qkey = qkey;
	w->ud_grh = ah->attr.is_global;
	w->ud_ip = ah->ud_ip;
	w->ud_ip6 = ah->ud_ip6;
	if (w->ud_grh) {
		w->ud_sgid = ah->sgid;
		w->ud_dgid = ah->attr.grh.dgid;
	}
	w->ud_addr = true;
	return 0;
}

/* A local WR: nothing to gather; LOCAL_INV names the key it kills. */
static int set_local(struct sv_qp *qp, struct sv_swqe *w,
		     const struct ibv_send_wr *wr, bool type1)
{
	int err = 0;

	w->wr_id = wr->wr_id;
	w->flags = wr->send_flags & ~(unsigned int)IBV_SEND_INLINE;
	if (wr->opcode == IBV_WR_BIND_MW)
		err = set_bind(qp, w, wr, type1);
	else
		w->rkey = wr->invalidate_rkey;
	if (!err)
		qp->sq.post++;
	return err;
}

static int post_one_send(struct sv_qp *qp, const struct ibv_send_wr *wr,
			 bool type1)
{
	uint32_t slot = qp->sq.post & (qp->sq.size - 1);
	struct ibv_sge *sg = &qp->sq.sge[(size_t)slot * qp->max_send_sge];
	struct sv_swqe *w;
	uint64_t len = 0;
	int err = 0;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_send_sge)
		return EINVAL;
	w = new_wqe(qp, wr->opcode, &err);
	if (!w)
		return err;
	if (w->local)
		return set_local(qp, w, wr, type1);
	w->wr_id = wr->wr_id;
	w->flags = wr->send_flags;
	w->imm = wr_ops[wr->opcode].imm ? wr->imm_data : 0;
	if (w->inv)
		w->imm = wr->invalidate_rkey; /* SV_PKT_INV: the key */
	if (sv_opcodes[w->op].mask & SV_M_ATOMIC) {
		w->raddr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->swap_add = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP
				      ? wr->wr.atomic.swap
				      : wr->wr.atomic.compare_add;
		w->compare = wr->wr.atomic.compare_add;
	} else if (wr_ops[wr->opcode].remote) {
		w->raddr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	} else if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
		err = ud_set_addr(qp, w, wr->wr.ud.ah, wr->wr.ud.remote_qpn,
				  wr->wr.ud.remote_qkey);
		if (err)
			return err;
	}
	/* IBA 9.3.6: every XRC request names the target's XRC SRQ */
	if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_SEND)
		w->xrc_srqn = wr->qp_type.xrc.remote_srqn & SV_PSN_MASK;
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (wr_ops[wr->opcode].no_inl)
			return EINVAL;
		err = copy_inline(qp, w,
				  qp->sq.inline_buf +
					  (size_t)slot * qp->max_inline,
				  wr->sg_list, (uint32_t)wr->num_sge);
		if (err)
			return err;
	} else {
		for (int i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		if (len > SV_MAX_MSG)
			return EINVAL;
		if (wr->num_sge)
			memcpy(sg, wr->sg_list, wr->num_sge * sizeof(*sg));
		w->num_sge = (uint32_t)wr->num_sge;
		w->length = (uint32_t)len;
	}
	err = wqe_check(qp, w);
	if (err)
		return err;
	qp->sq.post++;
	return 0;
}

/* After posting: send now, or flush if the QP is in error. */
static void sq_kick(struct sv_qp *qp)
{
	switch (qp->attr.qp_state) {
	case IBV_QPS_RTS:
		sv_req_run(qp);
		break;
	case IBV_QPS_SQE:
		sv_qp_flush_sq(qp); /* receives go on */
		break;
	case IBV_QPS_ERR:
		sv_qp_flush(qp);
		break;
	default:
		break;
	}
}

/* The earliest deadline the run of a post set: the ACK timer of what
 * went, a delay line's next request (SOFTVERBS_FAULTS delay_us); the
 * progress thread must look at the QP by then (sv_qp_note_work).
 * Caller holds qp->lock. */
static uint64_t work_due(const struct sv_qp *qp)
{
	uint64_t due = UINT64_MAX;

	if (qp->sq.comp != qp->sq.post && qp->comp.deadline)
		due = qp->comp.deadline;
	if (qp->inject.delay_until && qp->inject.delay_until < due)
		due = qp->inject.delay_until;
	return due;
}

/*
 * Whether a post must tell the progress thread of its work (due, from
 * work_due; sv_qp_note_work asks for a look if the thread would not look
 * by then, or at all: look_at 0).  Not when the post left nothing for it:
 * every entry done (one-sided operations into a peer's shared memory
 * complete in the post) and nothing due.  A QP the thread left to its
 * CQ's polls (drive.c park), or owns with nothing due (its CQ armed: UCX
 * arms its receive CQ and polls the send CQ), has look_at 0; a look
 * asked for by each such post only found it so again, and the thread ran
 * between every two posts on the app's CPU: 15,200 wake-ups in 300 ms,
 * UCX's put_bw at 4 KiB a third slower in half the runs (test_conf's
 * channel_*_posts_do_not_wake_the_thread).  Caller holds qp->lock.
 */
static bool tell_thread(const struct sv_qp *qp, uint64_t due)
{
	return due != UINT64_MAX || qp->sq.comp != qp->sq.post;
}

static int post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad, bool type1)
{
	struct sv_qp *qp = to_sqp(ibqp);
	uint64_t due;
	bool tell;
	int err;

	/* a post is the application driving this QP, as a poll is (the
	 * progress thread keeps off; drive.c) */
	atomic_store_explicit(
		&qp->prog.drives,
		atomic_load_explicit(&qp->prog.drives, memory_order_relaxed) +
			1,
		memory_order_relaxed);
	sv_lock(&qp->lock);
	err = sq_state_ok(qp);
	for (; wr && !err; wr = wr->next) {
		if (sv_req_post_direct(qp, wr))
			continue; /* done and completed: a small one-sided
				   * operation's fast way (req.c) */
		err = post_one_send(qp, wr, type1);
		if (err)
			break; /* *bad names the WR that failed */
	}
	if (err)
		*bad = wr;
	/* in RTS an empty queue has nothing to run (every WR was done in
	 * the post): sv_req_run's look was 7 % of a small read's cycle */
	if (qp->sq.send != qp->sq.post || qp->attr.qp_state != IBV_QPS_RTS)
		sq_kick(qp);
	due = work_due(qp);
	tell = tell_thread(qp, due);
	sv_unlock(&qp->lock);
	if (tell)
		sv_qp_note_work(qp, due);
	return err;
}

int sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		 struct ibv_send_wr **bad)
{
	return post_send(ibqp, wr, bad, false);
}

int sv_post_bind_mw(struct ibv_qp *ibqp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	wr->next = NULL;
	return post_send(ibqp, wr, &bad, true);
}

/* Where receive i's buffer is in our shared memory, for the peer's
 * single-copy sends (ring.h: struct sv_rdesc); nsge 0 if a piece is not
 * shared. */
static void describe(struct sv_qp *qp, uint32_t i)
{
	struct sv_pd *pd = to_spd(qp->qpx.qp_base.pd);
	struct sv_ring *rx = &qp->link.rx;
	struct sv_rdesc *d = &rx->desc[i & (rx->ndesc - 1)];
	struct sv_rwqe *r = &qp->rq.wqe[i & (qp->rq.size - 1)];
	const struct ibv_sge *sg =
		&qp->rq.sge[(size_t)(i & (qp->rq.size - 1)) * qp->max_recv_sge];
	uint32_t n = 0;

	for (uint32_t k = 0; k < r->num_sge; k++) {
		struct sv_mr *mr;
		uint64_t off = SV_RMEM_NOT_REBACKED;

		if (!sg[k].length)
			continue;
		mr = sv_mr_lookup(qp->ctx, sg[k].lkey, pd);
		/* acquire: the pages are on the arena (rmem.c set_off; an
		 * MR waiting to move says it is not, for now) */
		if (mr)
			off = __atomic_load_n(&mr->arena_off, __ATOMIC_ACQUIRE);
		if (n == SV_RDESC_SGE || !mr ||
		    !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
		    off == SV_RMEM_NOT_REBACKED || sg[k].addr < mr->iova ||
		    sg[k].addr - mr->iova > mr->length ||
		    sg[k].length > mr->length - (sg[k].addr - mr->iova)) {
			n = 0; /* the responder copies, and checks */
			break;
		}
		d->sge[n].off = off + (sg[k].addr - mr->iova);
		d->sge[n].len = sg[k].length;
		n++;
	}
	d->nsge = n;
	d->length = r->length;
	r->placeable = n > 0;
	/* release: the pieces before the seq that vouches for them */
	atomic_store_explicit(&d->seq, i + 1, memory_order_release);
}

void sv_rq_describe(struct sv_qp *qp, uint32_t from)
{
	if (!qp->link.rx_ready || !qp->link.rx.ndesc)
		return;
	for (uint32_t i = from; i != qp->rq.post; i++)
		describe(qp, i);
}

/* Whether description d shows a piece in the arena's [off, off + len). */
static bool shows(const struct sv_rdesc *d, uint64_t off, uint64_t len)
{
	uint32_t n = __atomic_load_n(&d->nsge, __ATOMIC_RELAXED);

	for (uint32_t k = 0; k < n && k < SV_RDESC_SGE; k++) {
		uint64_t o = __atomic_load_n(&d->sge[k].off, __ATOMIC_RELAXED);

		if (o < off + len &&
		    off < o + __atomic_load_n(&d->sge[k].len, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

void sv_rq_withdraw(struct sv_qp *qp, uint64_t off, uint64_t len)
{
	struct sv_ring *rx = &qp->link.rx;

	if (!qp->link.rx_ready || !rx->ndesc)
		return;
	for (uint32_t i = qp->rq.comp; i != qp->rq.post; i++) {
		struct sv_rdesc *d = &rx->desc[i & (rx->ndesc - 1)];
		uint32_t expect = i + 1;

		if (!shows(d, off, len))
			continue; /* not on this memory */
		if (!atomic_compare_exchange_strong(&d->seq, &expect, 0)) {
			/* the sender's: claimed, its bytes perhaps on the
			 * way to the memory the MR leaves */
			if (!expect)
				qp->rq.wqe[i & (qp->rq.size - 1)].stale = true;
			continue;
		}
		d->nsge = 0;
		qp->rq.wqe[i & (qp->rq.size - 1)].placeable = false;
		/* release: not placeable, before the seq says so */
		atomic_store_explicit(&d->seq, i + 1, memory_order_release);
	}
}

void sv_rwqe_fill(struct sv_rwqe *r, struct ibv_sge *sge,
		  const struct ibv_recv_wr *wr)
{
	uint64_t len = 0;

	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	r->wr_id = wr->wr_id;
	r->stale = false;
	r->placeable = false;
	r->num_sge = (uint32_t)wr->num_sge;
	r->length = len > SV_MAX_MSG ? SV_MAX_MSG : (uint32_t)len;
	if (wr->num_sge)
		memcpy(sge, wr->sg_list, wr->num_sge * sizeof(*sge));
}

int sv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad)
{
	struct sv_qp *qp = to_sqp(ibqp);
	uint32_t first;
	int err = 0;

	sv_lock(&qp->lock);
	first = qp->rq.post;
	/* on an SRQ the QP has no RQ of its own: ibv_post_srq_recv; nor
	 * has an XRC QP (its receives are its XRC SRQs') */
	if (qp->attr.qp_state == IBV_QPS_RESET || qp->srq ||
	    ibqp->qp_type == IBV_QPT_XRC_SEND ||
	    ibqp->qp_type == IBV_QPT_XRC_RECV)
		err = EINVAL;
	for (; wr && !err; wr = wr->next) {
		uint32_t slot = qp->rq.post & (qp->rq.size - 1);
		struct sv_rwqe *r = &qp->rq.wqe[slot];

		if (wr->num_sge < 0 ||
		    (uint32_t)wr->num_sge > qp->max_recv_sge) {
			err = EINVAL;
			break;
		}
		if (qp->rq.post - qp->rq.comp >= qp->rq.max) {
			err = ENOMEM;
			break;
		}
		sv_rwqe_fill(r, &qp->rq.sge[(size_t)slot * qp->max_recv_sge],
			     wr);
		qp->rq.post++;
	}
	if (err)
		*bad = wr;
	sv_rq_describe(qp, first);
	if (qp->attr.qp_state == IBV_QPS_ERR)
		sv_qp_flush(qp);
	else if (qp->resp.rnr && sv_link_runs(&qp->link))
		sv_qp_run(qp, 0); /* what came meanwhile first (an abort) */
	else if (qp->resp.rnr)
		sv_resp_run(qp); /* a sender waits for this receive */
	sv_unlock(&qp->lock);
	return err;
}

/*
 * The extended post API.  ibv_wr_start takes the QP lock and
 * ibv_wr_complete/abort release it; between them each builder call adds
 * to the newest WQE.  The first error is kept and reported by complete,
 * which then discards the whole batch, as the man page asks.
 */
#define SV_EX_OPS                                                         \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |             \
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |   \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW |   \
	 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV)

static inline struct sv_qp *ex_qp(struct ibv_qp_ex *qx)
{
	return container_of(qx, struct sv_qp, qpx);
}

static struct sv_swqe *ex_cur(struct sv_qp *qp)
{
	if (qp->sq.post == qp->ex_start)
		return NULL;
	return &qp->sq.wqe[(qp->sq.post - 1) & (qp->sq.size - 1)];
}

static void ex_start(struct ibv_qp_ex *qx)
{
	struct sv_qp *qp = ex_qp(qx);

	sv_lock(&qp->lock);
	qp->ex_start = qp->sq.post;
	qp->ex_err = sq_state_ok(qp);
}

static struct sv_swqe *ex_new(struct sv_qp *qp, uint32_t opcode, uint32_t imm)
{
	struct sv_swqe *w;

	if (qp->ex_err)
		return NULL;
	w = new_wqe(qp, opcode, &qp->ex_err);
	if (!w)
		return NULL;
	w->wr_id = qp->qpx.wr_id;
	w->flags = qp->qpx.wr_flags;
	w->imm = imm;
	qp->sq.post++;
	return w;
}

static void ex_send(struct ibv_qp_ex *qx)
{
	ex_new(ex_qp(qx), IBV_WR_SEND, 0);
}

static void ex_send_imm(struct ibv_qp_ex *qx, __be32 imm)
{
	ex_new(ex_qp(qx), IBV_WR_SEND_WITH_IMM, imm);
}

static void ex_remote(struct sv_qp *qp, uint32_t opcode, uint32_t imm,
		      uint32_t rkey, uint64_t raddr)
{
	struct sv_swqe *w = ex_new(qp, opcode, imm);

	if (w) {
		w->rkey = rkey;
		w->raddr = raddr;
	}
}

static void ex_rdma_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr)
{
	ex_remote(ex_qp(qx), IBV_WR_RDMA_WRITE, 0, rkey, raddr);
}

static void ex_rdma_write_imm(struct ibv_qp_ex *qx, uint32_t rkey,
			      uint64_t raddr, __be32 imm)
{
	ex_remote(ex_qp(qx), IBV_WR_RDMA_WRITE_WITH_IMM, imm, rkey, raddr);
}

static void ex_rdma_read(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr)
{
	ex_remote(ex_qp(qx), IBV_WR_RDMA_READ, 0, rkey, raddr);
}

static void ex_cmp_swp(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr,
		       uint64_t compare, uint64_t swap)
{
	struct sv_qp *qp = ex_qp(qx);

	ex_remote(qp, IBV_WR_ATOMIC_CMP_AND_SWP, 0, rkey, raddr);
	if (!qp->ex_err) {
		ex_cur(qp)->compare = compare;
		ex_cur(qp)->swap_add = swap;
	}
}

static void ex_fetch_add(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr,
			 uint64_t add)
{
	struct sv_qp *qp = ex_qp(qx);

	ex_remote(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, rkey, raddr);
	if (!qp->ex_err)
		ex_cur(qp)->swap_add = add;
}

/* Memory windows (type 2 only: a type 1 binds through ibv_bind_mw) and
 * SEND with Invalidate, as their ibv_post_send forms. */
static void ex_send_inv(struct ibv_qp_ex *qx, uint32_t invalidate_rkey)
{
	ex_new(ex_qp(qx), IBV_WR_SEND_WITH_INV, invalidate_rkey);
}

static void ex_local_inv(struct ibv_qp_ex *qx, uint32_t invalidate_rkey)
{
	struct sv_swqe *w = ex_new(ex_qp(qx), IBV_WR_LOCAL_INV, 0);

	if (w)
		w->rkey = invalidate_rkey;
}

static void ex_bind_mw(struct ibv_qp_ex *qx, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct ibv_send_wr wr = {.opcode = IBV_WR_BIND_MW,
				 .bind_mw = {.mw = mw, .rkey = rkey}};
	struct sv_qp *qp = ex_qp(qx);
	struct sv_swqe *w = ex_new(qp, IBV_WR_BIND_MW, 0);

	if (!w)
		return;
	wr.bind_mw.bind_info = *info;
	qp->ex_err = set_bind(qp, w, &wr, false);
}

static void ex_set_ud_addr(struct ibv_qp_ex *qx, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct sv_qp *qp = ex_qp(qx);
	struct sv_swqe *w = ex_cur(qp);

	if (qp->ex_err)
		return;
	if (!w)
		qp->ex_err = EINVAL;
	else
		qp->ex_err = ud_set_addr(qp, w, ah, remote_qpn, remote_qkey);
}

static void ex_set_xrc_srqn(struct ibv_qp_ex *qx, uint32_t remote_srqn)
{
	struct sv_qp *qp = ex_qp(qx);
	struct sv_swqe *w = ex_cur(qp);

	if (qp->ex_err)
		return;
	if (!w)
		qp->ex_err = EINVAL;
	else
		w->xrc_srqn = remote_srqn & SV_PSN_MASK;
}

static void ex_set_sge_list(struct ibv_qp_ex *qx, size_t n,
			    const struct ibv_sge *sg)
{
	struct sv_qp *qp = ex_qp(qx);
	struct sv_swqe *w = ex_cur(qp);
	uint64_t len = 0;

	if (qp->ex_err)
		return;
	if (!w || n > qp->max_send_sge) {
		qp->ex_err = EINVAL;
		return;
	}
	for (size_t i = 0; i < n; i++)
		len += sg[i].length;
	if (len > SV_MAX_MSG) {
		qp->ex_err = EINVAL;
		return;
	}
	if (n)
		memcpy(&qp->sq.sge[(size_t)((qp->sq.post - 1) &
					    (qp->sq.size - 1)) *
				   qp->max_send_sge],
		       sg, n * sizeof(*sg));
	w->num_sge = (uint32_t)n;
	w->length = (uint32_t)len;
}

static void ex_set_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct ibv_sge sg = {.addr = addr, .length = length, .lkey = lkey};

	ex_set_sge_list(qx, 1, &sg);
}

static void ex_set_inline_data_list(struct ibv_qp_ex *qx, size_t n,
				    const struct ibv_data_buf *buf)
{
	struct sv_qp *qp = ex_qp(qx);
	struct sv_swqe *w = ex_cur(qp);
	uint32_t slot = (qp->sq.post - 1) & (qp->sq.size - 1);
	uint32_t len = 0;

	if (qp->ex_err)
		return;
	if (!w) {
		qp->ex_err = EINVAL;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (buf[i].length > qp->max_inline - len) {
			qp->ex_err = EINVAL;
			return;
		}
		if (!buf[i].length) /* {NULL, 0}: nothing to copy */
			continue;
		memcpy(qp->sq.inline_buf + (size_t)slot * qp->max_inline + len,
		       buf[i].addr, buf[i].length);
		len += (uint32_t)buf[i].length;
	}
	w->length = len;
	w->inl = true;
}

static void ex_set_inline_data(struct ibv_qp_ex *qx, void *addr, size_t len)
{
	struct ibv_data_buf b = {.addr = addr, .length = len};

	ex_set_inline_data_list(qx, 1, &b);
}

static int ex_complete(struct ibv_qp_ex *qx)
{
	struct sv_qp *qp = ex_qp(qx);
	int err = qp->ex_err;
	uint64_t due;
	bool tell;

	for (uint32_t i = qp->ex_start; !err && i != qp->sq.post; i++)
		err = wqe_check(qp, &qp->sq.wqe[i & (qp->sq.size - 1)]);
	if (err)
		qp->sq.post = qp->ex_start;
	else
		sq_kick(qp);
	due = work_due(qp);
	tell = tell_thread(qp, due);
	sv_unlock(&qp->lock);
	if (tell)
		sv_qp_note_work(qp, due);
	return err;
}

static void ex_abort(struct ibv_qp_ex *qx)
{
	struct sv_qp *qp = ex_qp(qx);

	qp->sq.post = qp->ex_start;
	sv_unlock(&qp->lock);
}

int sv_qp_ex_check_ops(enum ibv_qp_type type, uint64_t send_ops_flags)
{
	static const uint64_t rc_only = IBV_QP_EX_WITH_RDMA_READ |
					IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
					IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

	if (send_ops_flags & ~(uint64_t)SV_EX_OPS)
		return EOPNOTSUPP;
	if (type != IBV_QPT_RC &&
	    (send_ops_flags & IBV_QP_EX_WITH_SEND_WITH_INV))
		return EOPNOTSUPP; /* post.c wr_allowed */
	if (type == IBV_QPT_UD)
		return send_ops_flags &
				       ~(uint64_t)(IBV_QP_EX_WITH_SEND |
						   IBV_QP_EX_WITH_SEND_WITH_IMM)
			       ? EOPNOTSUPP
			       : 0;
	return type == IBV_QPT_UC && (send_ops_flags & rc_only) ? EOPNOTSUPP
								: 0;
}

void sv_qp_init_ex_ops(struct sv_qp *qp, uint64_t send_ops_flags)
{
	struct ibv_qp_ex *qx = &qp->qpx;

	qx->comp_mask = 0;
	qx->wr_start = ex_start;
	qx->wr_complete = ex_complete;
	qx->wr_abort = ex_abort;
	qx->wr_set_sge = ex_set_sge;
	qx->wr_set_sge_list = ex_set_sge_list;
	qx->wr_set_inline_data = ex_set_inline_data;
	qx->wr_set_inline_data_list = ex_set_inline_data_list;
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD)
		qx->wr_set_ud_addr = ex_set_ud_addr;
	if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_SEND)
		qx->wr_set_xrc_srqn = ex_set_xrc_srqn;
	if (send_ops_flags & IBV_QP_EX_WITH_SEND)
		qx->wr_send = ex_send;
	if (send_ops_flags & IBV_QP_EX_WITH_SEND_WITH_IMM)
		qx->wr_send_imm = ex_send_imm;
	if (send_ops_flags & IBV_QP_EX_WITH_RDMA_WRITE)
		qx->wr_rdma_write = ex_rdma_write;
	if (send_ops_flags & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
		qx->wr_rdma_write_imm = ex_rdma_write_imm;
	if (send_ops_flags & IBV_QP_EX_WITH_RDMA_READ)
		qx->wr_rdma_read = ex_rdma_read;
	if (send_ops_flags & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		qx->wr_atomic_cmp_swp = ex_cmp_swp;
	if (send_ops_flags & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		qx->wr_atomic_fetch_add = ex_fetch_add;
	if (send_ops_flags & IBV_QP_EX_WITH_BIND_MW)
		qx->wr_bind_mw = ex_bind_mw;
	if (send_ops_flags & IBV_QP_EX_WITH_LOCAL_INV)
		qx->wr_local_inv = ex_local_inv;
	if (send_ops_flags & IBV_QP_EX_WITH_SEND_WITH_INV)
		qx->wr_send_inv = ex_send_inv;
}
