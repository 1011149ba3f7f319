// SPDX-License-Identifier: MIT
/*
 * The requester: turns posted send WQEs into packet trains on the link
 * (wire.h), assigning PSNs, one path MTU per PSN.  It gathers from the
 * application's buffers straight into the peer's ring: one copy.  A WQE
 * whose gather list fails the key checks, or whose memory faults under
 * the copy, stops the queue there and is completed with
 * IBV_WC_LOC_PROT_ERR by the completer, in order.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "sv.h"

/* The largest train: whole MTUs, at most 64 KiB and a quarter ring. */
static uint32_t train_max(const struct sv_qp *qp)
{
	uint64_t m = SV_MAX_TRAIN;

	if (qp->link.tx.size / 4 < m)
		m = qp->link.tx.size / 4;
	return (uint32_t)(m / qp->mtu * qp->mtu);
}

static struct ibv_sge *wqe_sge(struct sv_qp *qp, const struct sv_swqe *w)
{
	return &qp->sq_sge[(size_t)(w - qp->sq) * qp->max_send_sge];
}

/*
 * IBA 10.6.3.4: every SGE inside an MR of our PD with local access.  An
 * SGE names an iova of its MR; this turns it, in our copy of the WQE,
 * into where the bytes are in our memory, for gather.
 */
static bool translate_sges(struct sv_qp *qp, struct sv_swqe *w)
{
	struct sv_pd *pd = container_of(qp->qpx.qp_base.pd, struct sv_pd, ibv);
	struct ibv_sge *sg = wqe_sge(qp, w);

	for (uint32_t i = 0; i < w->num_sge; i++) {
		struct sv_mr *mr;

		if (!sg[i].length)
			continue;
		mr = sv_mr_lookup(qp->ctx, sg[i].lkey, pd);
		if (!mr || sg[i].addr < mr->iova ||
		    sg[i].addr - mr->iova > mr->length ||
		    sg[i].length > mr->length - (sg[i].addr - mr->iova))
			return false;
		sg[i].addr = (uintptr_t)mr->addr + (sg[i].addr - mr->iova);
	}
	w->mapped = true;
	return true;
}

/* Copies len bytes of the message at the WQE's gather cursor; -EFAULT if
 * the application took the memory away under its registration. */
static int gather(struct sv_qp *qp, struct sv_swqe *w, uint8_t *dst,
		  uint32_t len)
{
	const struct ibv_sge *sg = wqe_sge(qp, w);

	if (w->inl) {
		memcpy(dst,
		       qp->sq_inline + (size_t)(w - qp->sq) * qp->max_inline +
			       w->sent,
		       len);
		return 0;
	}
	while (len) {
		const struct ibv_sge *s = &sg[w->sge_idx];
		uint32_t n = s->length - w->sge_off;

		if (n > len)
			n = len;
		/* translate_sges made s->addr a pointer */
		if (sv_copy_guarded(dst,
				    (const uint8_t *)(uintptr_t)s->addr +
					    w->sge_off,
				    n))
			return -EFAULT;
		dst += n;
		len -= n;
		w->sge_off += n;
		if (w->sge_off == s->length) {
			w->sge_idx++;
			w->sge_off = 0;
		}
	}
	return 0;
}

/* Puts as much of one WQE on the link as fits; true when all of it. */
static bool send_wqe(struct sv_qp *qp, struct sv_swqe *w, uint32_t tmax,
		     int *err)
{
	do {
		uint32_t chunk = w->length - w->sent;
		struct sv_pkt *p, h;

		if (chunk > tmax)
			chunk = tmax;
		p = sv_link_tx_reserve(&qp->link, sizeof(*p) + chunk, err);
		if (!p)
			return false;
		/* the receiver polls the header line: write the payload
		 * first and the header in one go at the end */
		h.opcode = SV_OP_SEND;
		h.seg = (w->sent ? 0 : SV_SEG_FIRST) |
			(w->sent + chunk == w->length ? SV_SEG_LAST : 0);
		h.flags = 0;
		if (h.seg & SV_SEG_LAST) {
			if (w->opcode == IBV_WR_SEND_WITH_IMM)
				h.flags |= SV_PKT_IMM;
			if (w->flags & IBV_SEND_SOLICITED)
				h.flags |= SV_PKT_SOLICITED;
		}
		h.psn = qp->next_psn;
		h.npsn = chunk ? (chunk + qp->mtu - 1) / qp->mtu : 1;
		h.len = chunk;
		h.imm = w->imm;
		h.msg_len = w->length;
		h.rec_len = qp->link.tx.last_rec;
		if (!w->sent)
			w->first_psn = qp->next_psn;
		if (gather(qp, w, (uint8_t *)(p + 1), chunk)) {
			/* never published: the peer sees nothing of it */
			w->status = IBV_WC_LOC_PROT_ERR;
			return true;
		}
		memcpy(p, &h, offsetof(struct sv_pkt, seq));
		sv_ring_publish(&qp->link.tx, p);
		qp->next_psn = sv_psn_add(qp->next_psn, h.npsn);
		w->sent += chunk;
	} while (w->sent < w->length);
	w->last_psn = sv_psn_add(qp->next_psn, SV_PSN_MASK); /* next - 1 */
	return true;
}

void sv_req_run(struct sv_qp *qp)
{
	uint32_t tmax;
	bool wrote = false;
	int err = 0;

	if (qp->qpx.qp_base.state != IBV_QPS_RTS ||
	    qp->link.state != SV_LINK_UP || qp->sq_stopped)
		return;
	tmax = train_max(qp);
	while (qp->sq_send != qp->sq_post) {
		struct sv_swqe *w = &qp->sq[qp->sq_send & (qp->sq_size - 1)];
		uint64_t head = qp->link.tx.head;

		if (!w->inl && !w->mapped && !translate_sges(qp, w))
			w->status = IBV_WC_LOC_PROT_ERR;
		else if (!send_wqe(qp, w, tmax, &err)) {
			wrote |= qp->link.tx.head != head;
			break;
		}
		wrote = true;
		qp->sq_send++;
		if (w->status) {
			qp->sq_stopped = true;
			break; /* nothing after it goes out */
		}
	}
	if (wrote)
		sv_link_tx_commit(&qp->link);
	if (err) /* the peer corrupted its consumer index */
		sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
}
