// SPDX-License-Identifier: MIT
/*
 * The requester: turns posted send WQEs into packet trains on the link
 * (wire.h), assigning PSNs, one path MTU per PSN.  It gathers from the
 * application's buffers straight into the peer's ring: one copy.
 *
 * One-sided operations whose target memory the peer shares with us
 * (rmem.c) are executed here, in the peer's memory, with no help from
 * the peer: a write is one copy, a read one copy back, an atomic one CPU
 * atomic instruction.  Everything else — memory the peer could not share,
 * keys that do not check out, a write's immediate — travels as a request
 * to the peer's responder, which decides (and reports) errors.
 *
 * A WQE whose gather list fails the key checks, or whose memory faults
 * under the copy, stops the queue there and is completed with
 * IBV_WC_LOC_PROT_ERR by the completer, in order.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "core.h"
#include "engine.h"
#include "guard.h"
#include "inject.h"
#include "pcap.h"
#include "rmem.h"
#include "transport.h"

/* The largest train: whole MTUs, at most what the link likes (64 KiB,
 * 16 KiB over TCP: SV_TCP_TRAIN) and a quarter ring, but
 * never less than one MTU (a train of none would never end; a ring too
 * small for one is the peer's: the train waits, see rsp_train_max). */
static uint32_t train_max(const struct sv_qp *qp)
{
	uint64_t m = qp->link.train_max ? qp->link.train_max : SV_MAX_TRAIN;

	if (qp->link.tx.size / 4 < m)
		m = qp->link.tx.size / 4;
	if (m < qp->mtu)
		m = qp->mtu;
	return (uint32_t)(m / qp->mtu * qp->mtu);
}

/*
 * IBA 10.6.3.4: every SGE inside an MR of our PD with local access (and
 * local write where the operation writes it: reads, atomics).  An SGE
 * names an iova of its MR; this turns it, in our copy of the WQE, into
 * where the bytes are in our memory.
 */
static bool translate_sges(struct sv_qp *qp, struct sv_swqe *w)
{
	struct sv_pd *pd = to_spd(qp->qpx.qp_base.pd);
	struct ibv_sge *sg = sv_swqe_sge(qp, w);
	bool writes = w->op == SV_OP_READ_REQ ||
		      (sv_opcodes[w->op].mask & SV_M_ATOMIC);

	for (uint32_t i = 0; i < w->num_sge; i++) {
		struct sv_mr *mr;

		if (!sg[i].length)
			continue;
		mr = sv_mr_lookup(qp->ctx, sg[i].lkey, pd);
		if (!mr || sg[i].addr < mr->iova ||
		    sg[i].addr - mr->iova > mr->length ||
		    sg[i].length > mr->length - (sg[i].addr - mr->iova) ||
		    (writes && !(mr->access & IBV_ACCESS_LOCAL_WRITE)))
			return false;
		sg[i].addr = (uintptr_t)mr->addr + (sg[i].addr - mr->iova);
	}
	w->mapped = true;
	return true;
}

/*
 * Copies len bytes between buf and the WQE's local SGEs at its cursor:
 * out of them (gather: a send's or write's payload) or into them
 * (scatter: read data, an atomic's old value).  -EFAULT if the
 * application took the memory away under its registration, -EINVAL past
 * the SGEs.  translate_sges made each SGE's addr a pointer.
 */
static int sge_copy(struct sv_qp *qp, struct sv_swqe *w, uint8_t *buf,
		    uint32_t len, bool into_sges)
{
	const struct ibv_sge *sg = sv_swqe_sge(qp, w);

	while (len) {
		const struct ibv_sge *s;
		uint8_t *at;
		uint32_t n;

		if (w->sge_idx >= w->num_sge)
			return -EINVAL;
		s = &sg[w->sge_idx];
		n = s->length - w->sge_off;
		if (n > len)
			n = len;
		at = (uint8_t *)(uintptr_t)s->addr + w->sge_off;
		if (n && (into_sges ? sv_copy_guarded(at, buf, n)
				    : sv_copy_guarded(buf, at, n)))
			return -EFAULT;
		buf += n;
		len -= n;
		w->sge_off += n;
		if (w->sge_off == s->length) {
			w->sge_idx++;
			w->sge_off = 0;
		}
	}
	return 0;
}

/* The message's next len bytes into dst (inline data, or the SGEs). */
static int gather(struct sv_qp *qp, struct sv_swqe *w, uint8_t *dst,
		  uint32_t len)
{
	if (w->inl) {
		sv_place(dst,
			 qp->sq.inline_buf +
				 (size_t)(w - qp->sq.wqe) * qp->max_inline +
				 w->sent,
			 len);
		return 0;
	}
	return sge_copy(qp, w, dst, len, false);
}

int sv_swqe_scatter(struct sv_qp *qp, struct sv_swqe *w, const uint8_t *src,
		    uint32_t len)
{
	return sge_copy(qp, w, (uint8_t *)src, len, true);
}

/* The header extension of a one-sided request's first train. */
static void put_ext(const struct sv_swqe *w, uint8_t *ext)
{
	if (sv_opcodes[w->op].mask & SV_M_ATOMETH) {
		struct sv_atometh a = {.va = w->raddr,
				       .rkey = w->rkey,
				       .swap_add = w->swap_add,
				       .compare = w->compare};

		memcpy(ext, &a, sizeof(a));
	} else if (sv_opcodes[w->op].mask & SV_M_RETH) {
		/* a read asks from rd_base: what came before it is placed */
		struct sv_reth r = {.va = w->raddr + w->rd_base,
				    .rkey = w->rkey,
				    .dma_len = w->length - w->rd_base};

		memcpy(ext, &r, sizeof(r));
	}
}

/* PSNs a request of `bytes` takes: one per path MTU, at least one.  The
 * path MTU is a power of two (256 << path_mtu): a shift, not a division
 * (a division was a few percent of a small one-sided post). */
static uint32_t npsn_of(const struct sv_qp *qp, uint32_t bytes)
{
	return bytes ? (uint32_t)(((uint64_t)bytes + qp->mtu - 1) >>
				  __builtin_ctz(qp->mtu))
		     : 1;
}

/* A lossy link (RoCE): the most PSNs in flight, unacknowledged, as rxe
 * keeps (RXE_MAX_UNACKED_PSNS).  Without it a requester that sends
 * faster than the peer reads (sendmmsg) overflows the peer's socket,
 * and every loss resends all that followed it (go-back-N) until
 * retry_cnt runs out. */
#define SV_LOSSY_WINDOW 512

/* No new train of w while the window is full (w: the WQE being sent). */
static bool window_full(const struct sv_qp *qp, const struct sv_swqe *w)
{
	const struct sv_swqe *o = &qp->sq.wqe[qp->sq.comp & (qp->sq.size - 1)];
	uint32_t base;

	/* UC: nothing is acknowledged (IBA 9.8), nothing waits for it */
	if (!sv_link_lossy(&qp->link) ||
	    qp->qpx.qp_base.qp_type == IBV_QPT_UC || (o == w && !w->sent))
		return false; /* nothing in flight */
	base = o->first_psn;
	if (qp->comp.acked_valid && sv_psn_diff(qp->comp.acked, base) >= 0 &&
	    sv_psn_diff(qp->comp.acked, qp->req.psn) < 0)
		base = sv_psn_add(qp->comp.acked, 1);
	return sv_psn_diff(qp->req.psn, base) >= SV_LOSSY_WINDOW;
}

/* Puts as much of one WQE on the link as fits; true when all of it. */
static bool send_wqe(struct sv_qp *qp, struct sv_swqe *w, uint32_t tmax,
		     int *err)
{
	const struct sv_opcode_info *o = &sv_opcodes[w->op];
	/* reads and atomics carry no payload: their data comes back; a
	 * placed send's is in the peer's buffer already */
	uint32_t payload =
		(o->mask & SV_M_PAYLOAD) && !w->placed ? w->length : 0;
	/* XRC: every request names the target's SRQ first (IBA 9.3.6) */
	uint32_t xext = qp->qpx.qp_base.qp_type == IBV_QPT_XRC_SEND
				? sizeof(struct sv_xrceth)
				: 0;

	do {
		uint32_t chunk = payload - w->sent, ext;
		struct sv_pkt *p, h;
		uint8_t *at;

		if (chunk > tmax)
			chunk = tmax;
		if (window_full(qp, w))
			return false; /* the completer's ACKs reopen it */
		h.seg = (w->sent ? 0 : SV_SEG_FIRST) |
			(w->sent + chunk == payload ? SV_SEG_LAST : 0);
		ext = sv_ext_len(o, h.seg);
		p = sv_link_tx_reserve(&qp->link,
				       sizeof(*p) + xext + ext + chunk, err);
		if (!p)
			return false;
		/* the receiver polls the header line: write the payload
		 * first and the header in one go at the end */
		h.opcode = w->op;
		h.flags = (w->placed ? SV_PKT_PLACED : 0) |
			  (xext ? SV_PKT_XRC : 0);
		if (h.seg & SV_SEG_LAST) {
			if (w->imm_valid)
				h.flags |= SV_PKT_IMM;
			if (w->inv) /* SEND with Invalidate: imm is the key */
				h.flags |= SV_PKT_INV;
			if (w->flags & IBV_SEND_SOLICITED)
				h.flags |= SV_PKT_SOLICITED;
		}
		h.psn = qp->req.psn;
		/* a read takes the PSNs of its response (IBA 9.7.1), a
		 * placed send those of its payload */
		h.npsn = w->op == SV_OP_READ_REQ
				 ? npsn_of(qp, w->length - w->rd_base)
			 : w->placed ? npsn_of(qp, w->length)
				     : npsn_of(qp, chunk);
		h.len = chunk;
		h.imm = w->imm;
		h.msg_len = w->length - w->rd_base;
		h.rec_len = qp->link.tx.last_rec;
		if (!w->sent && !w->rd_base)
			w->first_psn = qp->req.psn;
		at = (uint8_t *)(p + 1);
		if (xext) {
			struct sv_xrceth x = {.srqn = w->xrc_srqn};

			memcpy(at, &x, sizeof(x));
			at += xext;
		}
		if (ext)
			put_ext(w, at);
		if (gather(qp, w, at + ext, chunk)) {
			/* never published: the peer sees nothing of it */
			w->status = IBV_WC_LOC_PROT_ERR;
			return true;
		}
		memcpy(p, &h, offsetof(struct sv_pkt, seq));
		if (__builtin_expect(sv_pcap_on, 0))
			sv_pcap_req(qp, w, &h, (uint8_t *)(p + 1), at + ext);
		sv_ring_publish(&qp->link.tx, p);
		if (unlikely(w->tries))
			SV_STAT_INC(qp, retrans_pkts);
		if (unlikely(sv_inject.on))
			sv_inject_sent();
		/* a read request is one packet; its PSNs are the answer's */
		sv_stat_add(qp, tx_pkts, w->op == SV_OP_READ_REQ ? 1 : h.npsn);
		sv_stat_add(qp, tx_bytes, w->placed ? w->length : chunk);
		qp->req.psn = sv_psn_add(qp->req.psn, h.npsn);
		w->sent += chunk;
	} while (w->sent < payload);
	w->last_psn = sv_psn_add(qp->req.psn, SV_PSN_MASK); /* next - 1 */
	if (o->mask & SV_M_RECV || w->imm_valid)
		qp->req.recv_msgs++; /* it takes the peer's next receive */
	if (o->mask & SV_M_RD_ATOMIC)
		qp->req.rd_out++;
	if (o->access && qp->qpx.qp_base.qp_type != IBV_QPT_UC)
		qp->req.ring_rdma++; /* the responder touches its memory */
	w->sent = w->length;
	return true;
}

/* An atomic on 8 bytes of the peer's memory: fetch-and-add of swap_add,
 * or compare-and-swap (compare, swap_add); the old value. */
static uint64_t do_atomic(bool fetch_add, uint64_t swap_add, uint64_t compare,
			  uint64_t *p)
{
	uint64_t old = compare;

	if (fetch_add)
		return __atomic_fetch_add(p, swap_add, __ATOMIC_SEQ_CST);
	__atomic_compare_exchange_n(p, &old, swap_add, false, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
	return old;
}

/*
 * Executes a one-sided WQE in the peer's memory if the peer shares it and
 * its key table and QP allow exactly this; false: send it to the peer's
 * responder.  Never passes a one-sided request still with the responder:
 * the IBA executes requests in order.  A write with immediate places its
 * data here and sends only the immediate (it consumes a receive there).
 */
/*
 * Whether a one-sided operation of len bytes at (rkey, raddr), needing
 * access, may be done in the peer's memory: the peer's QP flags and key
 * table allow exactly this (an atomic 8-aligned: else the responder
 * refuses it, IBA 9.4.5); *dst where it lands (NULL for len 0, IBA 9.4.4:
 * no key or address to check).  false: the responder decides.
 */
static bool direct_dst(const struct sv_qp *qp, uint32_t rkey, uint64_t raddr,
		       uint64_t len, unsigned int access, uint8_t **dst)
{
	bool atomic = access == IBV_ACCESS_REMOTE_ATOMIC;

	*dst = NULL;
	/* acquire: the peer's flags, set before its modify returned */
	if (!(atomic_load_explicit(&qp->link.tx.hdr->qp_access,
				   memory_order_acquire) &
	      access) ||
	    (atomic && (raddr & 7)))
		return false;
	if (!len)
		return true;
	*dst = sv_rpeer_resolve(qp->req.rpeer, rkey, qp->req.peer_pd, raddr,
				len, access);
	return *dst && !(atomic && ((uintptr_t)*dst & 7));
}

/* The counters of a one-sided operation done in the peer's memory: the
 * packets an IBA HCA would have sent (n PSNs; rd: a read or atomic, its
 * answer the n; imm: a write with immediate, whose last packet goes as a
 * request). */
static void count_direct(struct sv_qp *qp, bool rd, bool imm, uint64_t len,
			 uint32_t n)
{
	sv_stat_add(qp, direct_ops, 1);
	sv_stat_add(qp, tx_pkts, rd ? 1 : n - imm);
	sv_stat_add(qp, tx_bytes, rd ? 0 : len);
	sv_stat_add(qp, rx_pkts, rd ? n : !imm);
	sv_stat_add(qp, rx_bytes, rd ? len : 0);
}

static bool try_direct(struct sv_qp *qp, struct sv_swqe *w)
{
	const struct sv_opcode_info *o = &sv_opcodes[w->op];
	uint64_t old = 0;
	uint8_t *dst;

	if (!o->access || !qp->req.rpeer || qp->req.ring_rdma)
		return false;
	if (!direct_dst(qp, w->rkey, w->raddr, w->length, o->access, &dst))
		return false;
	if (o->mask & SV_M_ATOMIC) {
		old = do_atomic(w->op == SV_OP_FETCH_ADD, w->swap_add,
				w->compare, (uint64_t *)dst);

		if (sv_swqe_scatter(qp, w, (const uint8_t *)&old, 8))
			w->status = IBV_WC_LOC_PROT_ERR;
	} else if (w->op == SV_OP_READ_REQ) {
		if (w->length && sv_swqe_scatter(qp, w, dst, w->length))
			w->status = IBV_WC_LOC_PROT_ERR;
	} else if (w->length && gather(qp, w, dst, w->length)) {
		w->status = IBV_WC_LOC_PROT_ERR;
	}
	if (!w->status) {
		/* an IBA HCA would have sent these packets */
		uint32_t n = npsn_of(qp, w->length);
		bool rd = w->op == SV_OP_READ_REQ || (o->mask & SV_M_ATOMIC);

		if (__builtin_expect(sv_pcap_on, 0))
			sv_pcap_direct(qp, w,
				       (o->mask & SV_M_ATOMIC) ? (uint8_t *)&old
							       : dst,
				       w->imm_valid		 ? n - 1
				       : (o->mask & SV_M_ATOMIC) ? 1
								 : n);
		count_direct(qp, rd, w->imm_valid, w->length, n);
	}
	if (w->status || !w->imm_valid) {
		w->sent = w->length;
		w->done = true;
		w->direct = true;
		return true;
	}
	/* the data is there: the immediate goes as a request */
	w->op = SV_OP_WRITE_NOTE;
	w->direct = true;
	return false;
}

/*
 * An RDMA write, read or atomic done inside its post, straight from the
 * work request: what try_direct and the completer do for it, without a
 * WQE.  A small one-sided post spent most of its time filling a WQE,
 * running the requester over it and completing it (issue 27 item 5):
 * 100-160 ns of a 0.4 µs ib_write_lat one way before the store, against
 * UCX's put, one memcpy.  Only for a queue with nothing in it (nothing to
 * pass, nothing to wait for: ordering, fences and rd_atomic hold
 * trivially), on a connected QP in RTS whose peer shares the target; no
 * fault injection or capture.  false, having changed nothing: the caller
 * posts the WR as usual, and that path decides, and reports, what this
 * one would not (a key that does not check out goes to the peer's
 * responder; a bad lkey completes in error).  A write or read whose copy
 * faults halfway gives false too: the usual path copies the same bytes
 * again and meets the same fault.  An atomic cannot be done twice: if
 * the old value cannot be stored in our memory (the application
 * unmapped it under its registration), the WR completes here as the
 * usual path completes it, IBV_WC_LOC_PROT_ERR, and the QP goes to
 * ERROR.  Caller holds qp->lock.
 */
#define SV_DIRECT_SGE 4 /* gather lists longer go the usual way */

bool sv_req_post_direct(struct sv_qp *qp, const struct ibv_send_wr *wr)
{
	struct sv_pd *pd = to_spd(qp->qpx.qp_base.pd);
	bool atomic = wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
		      wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP,
	     rd = atomic || wr->opcode == IBV_WR_RDMA_READ,
	     inl = !rd && (wr->send_flags & IBV_SEND_INLINE);
	unsigned int access = atomic ? IBV_ACCESS_REMOTE_ATOMIC
			      : rd   ? IBV_ACCESS_REMOTE_READ
				     : IBV_ACCESS_REMOTE_WRITE;
	uint8_t *src[SV_DIRECT_SGE], *dst;
	uint64_t len = 0, raddr;
	uint32_t n;
	int k;

	if ((wr->opcode != IBV_WR_RDMA_WRITE && !rd) ||
	    (rd && (wr->send_flags & IBV_SEND_INLINE)) || wr->num_sge < 1 ||
	    wr->num_sge > SV_DIRECT_SGE ||
	    (uint32_t)wr->num_sge > qp->max_send_sge ||
	    qp->sq.comp != qp->sq.post || !qp->sq.max || qp->sq.stopped ||
	    qp->attr.qp_state != IBV_QPS_RTS || !qp->req.rpeer ||
	    qp->req.ring_rdma || qp->req.rd_out ||
	    qp->link.state != SV_LINK_UP || !qp->link.tx_ready ||
	    unlikely(sv_inject.on) || __builtin_expect(sv_pcap_on, 0))
		return false;
	if (qp->qpx.qp_base.qp_type != IBV_QPT_RC &&
	    (qp->qpx.qp_base.qp_type != IBV_QPT_UC || rd))
		return false;
	raddr = atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
	/* IBA 9.4.5: one 8-byte SGE; else the usual path says */
	if (atomic && (wr->num_sge != 1 || wr->sg_list[0].length != 8))
		return false;
	for (k = 0; k < wr->num_sge; k++) {
		const struct ibv_sge *s = &wr->sg_list[k];

		src[k] =
			inl ? (uint8_t *)(uintptr_t)s->addr
			    : sv_mr_at(qp->ctx, s->lkey, pd, s->addr, s->length,
				       rd ? IBV_ACCESS_LOCAL_WRITE : 0);
		if (!src[k] && s->length)
			return false;
		len += s->length;
	}
	if (!len || len > (inl ? qp->max_inline : SV_MAX_MSG))
		return false;
	if (!direct_dst(qp, atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey,
			raddr, len, access, &dst))
		return false;
	if (atomic) {
		bool fadd = wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
		uint64_t old = do_atomic(
			fadd,
			fadd ? wr->wr.atomic.compare_add : wr->wr.atomic.swap,
			wr->wr.atomic.compare_add, (uint64_t *)dst);

		if (sv_copy_guarded(src[0], &old, 8)) {
			qp->sq.post++;
			qp->sq.send++;
			sv_comp_wr(qp, wr->wr_id, wr->opcode, wr->send_flags, 8,
				   IBV_WC_LOC_PROT_ERR);
			sv_qp_to_error(qp, 0);
			return true;
		}
	}
	for (k = 0, n = 0; !atomic && k < wr->num_sge;
	     n += wr->sg_list[k++].length) {
		uint32_t l = wr->sg_list[k].length;

		if (!l)
			continue;
		if (inl) /* sv_place: the last byte last, once (util.h) */
			sv_place(dst + n, src[k], l);
		else if (rd ? sv_copy_guarded(src[k], dst + n, l)
			    : sv_copy_guarded(dst + n, src[k], l))
			return false;
	}
	count_direct(qp, rd, false, len, npsn_of(qp, (uint32_t)len));
	qp->sq.post++;
	qp->sq.send++;
	sv_comp_wr(qp, wr->wr_id, wr->opcode, wr->send_flags, (uint32_t)len,
		   IBV_WC_SUCCESS);
	return true;
}

/*
 * Whether a send of w's size may go into the receive buffer at arena
 * offset off.  Placing into a cold buffer (one of many an application
 * cycles through: UCX's 4095 of 8 KiB) moves its cache misses to our CPU,
 * and the receiver then reads every line back from our cache: for a
 * latency-bound receiver (idle, waiting for this one message) the ring's
 * two copies are faster, the second made by the CPU that reads the data
 * next (UCX tag_lat 4 KiB, bench/results/srq/README.md).  So a send of
 * at most sv_single_copy_cold() bytes is placed only into one of the
 * last SV_WARM_BUFS buffers the peer described to us (a warm one: a
 * program that reuses a few buffers), or when the receiver is busy:
 * more sends queued behind this one, or records it has yet to consume
 * in the ring (a stream, where one copy wins).  The peer's tail word is
 * only a hint here: a lie decides only the path of our own data.
 */
static bool place_pays(struct sv_qp *qp, const struct sv_swqe *w, uint64_t off)
{
	const struct sv_ring *tx = &qp->link.tx;
	bool warm = false;

	for (uint32_t k = 0; k < SV_WARM_BUFS; k++)
		warm |= qp->req.warm_off[k] == off + 1;
	if (!warm)
		qp->req.warm_off[qp->req.warm_next++ % SV_WARM_BUFS] = off + 1;
	if (warm || w->length > sv_single_copy_cold() ||
	    qp->sq.post - qp->sq.send > 1 ||
	    atomic_load_explicit(&tx->hdr->tail, memory_order_relaxed) !=
		    tx->head)
		return true;
	sv_stat_add(qp, cold_sends, 1);
	return false;
}

/*
 * Single copy: a send of at least sv_single_copy_min() bytes goes
 * straight into the receive buffer it will take, when the peer shows that
 * buffer in its shared memory (post.c: describe) and placing pays
 * (place_pays); then only its header travels, and the responder
 * completes the receive without a copy.  The receive a send takes is the
 * peer's next: number recv_msgs.  Anything amiss (not posted yet, too
 * small, not shared) and the send goes the ring's way, where the
 * responder decides (a claimed receive it did not place into included).
 */
static void try_place(struct sv_qp *qp, struct sv_swqe *w)
{
	const struct sv_ring *tx = &qp->link.tx;
	struct sv_rdesc *d;
	uint32_t seq, n, left = w->length;

	/* inline data is at most a KiB: the ring's way is as fast */
	if (w->op != SV_OP_SEND || w->inl || !qp->req.rpeer || !tx->ndesc ||
	    w->length < sv_single_copy_min())
		return;
	d = &tx->desc[qp->req.recv_msgs & (tx->ndesc - 1)];
	/* Claimed before it is read: a receiver on an SRQ may take a WQE
	 * lent to us back (srq.c unshow) and show another under the same
	 * number; once we hold it, it stays ours.  Acquire: the pieces the
	 * seq vouches for. */
	seq = qp->req.recv_msgs + 1;
	if (atomic_load_explicit(&d->seq, memory_order_relaxed) != seq)
		return;
	/* whether placing pays, from the buffer the descriptor shows
	 * before we claim it (a hint: it picks only our data's path): a
	 * receive claimed and then not placed into costs both sides the
	 * claim's cache-line trips for nothing (UCX tag_lat 4 KiB: 3.23 µs
	 * a round trip so, 3.01 with no claim) */
	if (!place_pays(qp, w,
			__atomic_load_n(&d->sge[0].off, __ATOMIC_RELAXED)) ||
	    !atomic_compare_exchange_strong_explicit(&d->seq, &seq, 0,
						     memory_order_acquire,
						     memory_order_relaxed))
		return;
	n = __atomic_load_n(&d->nsge, __ATOMIC_RELAXED);
	if (!n || n > SV_RDESC_SGE ||
	    __atomic_load_n(&d->length, __ATOMIC_RELAXED) < w->length)
		return;
	for (uint32_t k = 0; k < n && left; k++) {
		uint64_t len =
			__atomic_load_n(&d->sge[k].len, __ATOMIC_RELAXED);
		uint8_t *dst;

		if (len > left)
			len = left;
		dst = sv_rpeer_at(
			qp->req.rpeer,
			__atomic_load_n(&d->sge[k].off, __ATOMIC_RELAXED), len);
		if (!dst)
			break; /* the ring's way; the bytes placed are not
				* the receive's until it completes */
		if (gather(qp, w, dst, (uint32_t)len)) {
			w->status = IBV_WC_LOC_PROT_ERR;
			return;
		}
		left -= (uint32_t)len;
	}
	if (left) { /* start over on the ring */
		w->sge_idx = w->sge_off = 0;
		return;
	}
	w->placed = true;
	sv_stat_add(qp, placed_sends, 1);
}

/*
 * A local operation, in order with the queue (rxe's rxe_do_local_ops): a
 * window's bind (IBV_WC_MW_BIND_ERR if refused) or a local invalidate
 * (IBV_WC_LOC_QP_OP_ERR, as rxe).  Nothing travels: its PSNs are none.
 */
static void exec_local(struct sv_qp *qp, struct sv_swqe *w)
{
	struct sv_pd *pd = to_spd(qp->qpx.qp_base.pd);

	if (w->opcode == IBV_WR_BIND_MW)
		w->status = (uint8_t)sv_mw_bind(qp, w);
	else if (sv_mw_invalidate(qp->ctx, w->rkey, pd, 0))
		w->status = IBV_WC_LOC_QP_OP_ERR;
	w->first_psn = qp->req.psn;
	w->last_psn = sv_psn_add(qp->req.psn, SV_PSN_MASK);
	w->done = w->direct = true;
}

/* A lossy link (RoCE): the answers to the reads outstanding and to w
 * must fit our response ring, or one read at a time: what overflows the
 * receiver is lost, every read is asked again, and overflows again. */
static bool reads_overflow(const struct sv_qp *qp, const struct sv_swqe *w)
{
	uint64_t bytes = w->length;

	if (w->op != SV_OP_READ_REQ || !qp->req.rd_out)
		return false;
	for (uint32_t i = qp->sq.comp; i != qp->sq.send; i++) {
		const struct sv_swqe *x = &qp->sq.wqe[i & (qp->sq.size - 1)];

		if (x->op == SV_OP_READ_REQ && !x->done)
			bytes += x->length - x->got;
	}
	return bytes > qp->link.rsp_rx.size / 2;
}

/* IBA 10.8.3.3: a fenced WQE waits for the reads and atomics before it;
 * and no more reads/atomics in flight than max_rd_atomic (0 as 1). */
static bool must_wait(const struct sv_qp *qp, const struct sv_swqe *w)
{
	uint32_t max = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;

	if ((w->flags & IBV_SEND_FENCE) && qp->req.rd_out)
		return true;
	if (sv_link_lossy(&qp->link) && reads_overflow(qp, w))
		return true;
	return (sv_opcodes[w->op].mask & SV_M_RD_ATOMIC) &&
	       qp->req.rd_out >= max;
}

/* The gather cursor of w at byte off of its message. */
static void sge_seek(struct sv_qp *qp, struct sv_swqe *w, uint32_t off)
{
	const struct ibv_sge *sg = sv_swqe_sge(qp, w);

	w->sge_idx = w->sge_off = 0;
	if (w->inl)
		return; /* gather reads at w->sent */
	while (off && w->sge_idx < w->num_sge) {
		uint32_t n = sg[w->sge_idx].length;

		if (off < n) {
			w->sge_off = off;
			return;
		}
		off -= n;
		w->sge_idx++;
	}
}

/*
 * Retransmission (IBA 9.7.5.1, rxe's req_retry): after a NAK-seq for psn
 * or a local ACK timeout (psn: the first not acknowledged), every WQE on
 * the link from the one holding psn is sent again, with its PSNs, from
 * psn (a message from the train there; an atomic whole; a read for the
 * bytes not yet placed, from the PSN of the first of them).  WQEs still
 * in the SQ are all there is to resend; what was answered meanwhile (a
 * read's data) is skipped.
 */
void sv_req_rewind(struct sv_qp *qp, uint32_t psn)
{
	uint32_t end = qp->sq.send, i, j;
	struct sv_swqe *w = NULL;
	uint32_t from;

	/* the WQE being sent, partly on the link, counts too */
	if (end != qp->sq.post && qp->sq.wqe[end & (qp->sq.size - 1)].sent)
		end++;
	for (i = qp->sq.comp; i != end; i++) {
		w = &qp->sq.wqe[i & (qp->sq.size - 1)];
		if (w->done)
			continue;
		if (i == qp->sq.send || w->status ||
		    (sv_opcodes[w->op].mask & SV_M_RD_ATOMIC) ||
		    sv_psn_diff(w->last_psn, psn) >= 0)
			break;
	}
	if (i == end)
		return; /* nothing on the link to resend */
	from = i;
	for (j = from; j != end; j++) {
		struct sv_swqe *x = &qp->sq.wqe[j & (qp->sq.size - 1)];
		const struct sv_opcode_info *o = &sv_opcodes[x->op];

		if (x->done)
			continue;
		if (j != qp->sq.send) { /* send_wqe's counts, undone */
			if (o->mask & SV_M_RECV || x->imm_valid)
				qp->req.recv_msgs--;
			if ((o->mask & SV_M_RD_ATOMIC) && qp->req.rd_out)
				qp->req.rd_out--;
			if (o->access && qp->req.ring_rdma)
				qp->req.ring_rdma--;
		}
		x->sent = 0;
		x->sge_idx = x->sge_off = 0;
		if (x->op == SV_OP_READ_REQ) {
			/* asked again for the rest (IBA 9.7.6.1.3, rxe's
			 * req_retry): the responses placed stay, the next
			 * lands after them.  All but a LAST are whole
			 * MTUs; what a cut train left over is asked again */
			x->got -= x->got & (qp->mtu - 1);
			x->rd_base = x->got;
			sge_seek(qp, x, x->got);
		} else {
			x->got = 0;
		}
		if (x->tries < UINT32_MAX)
			x->tries++;
	}
	qp->req.psn = w->op == SV_OP_READ_REQ
			      ? sv_psn_add(w->first_psn, w->rd_base / qp->mtu)
			      : w->first_psn;
	if (!(sv_opcodes[w->op].mask & (SV_M_RD_ATOMIC)) && !w->placed &&
	    (sv_opcodes[w->op].mask & SV_M_PAYLOAD) &&
	    sv_psn_diff(psn, w->first_psn) > 0) {
		uint64_t off =
			(uint64_t)sv_psn_diff(psn, w->first_psn) * qp->mtu;

		if (off < w->length) { /* from the train at psn */
			w->sent = (uint32_t)off;
			sge_seek(qp, w, w->sent);
			qp->req.psn = psn;
		}
	}
	qp->sq.send = from;
	qp->sq.stopped = false; /* a failed WQE after it fails again */
	sv_dbg("qp %06x: rewind to psn %06x (WQE %u, byte %u)\n",
	       qp->qpx.qp_base.qp_num, qp->req.psn, from, w->sent);
}

void sv_req_run(struct sv_qp *qp)
{
	uint32_t tmax;
	bool wrote = false, done = false;
	int err = 0;

	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
		sv_ud_send_run(qp); /* datagrams, no link (ud/send.c) */
		return;
	}

	/* a TCP link may be UP (its peer alive) before our copy of the
	 * peer's ring exists (tcp/) */
	if (qp->attr.qp_state != IBV_QPS_RTS || qp->link.state != SV_LINK_UP ||
	    !qp->link.tx_ready || qp->sq.stopped)
		return;
	tmax = 0; /* train_max() divides: only when a train is sent */
	if (unlikely(sv_inject.on))
		qp->inject.delay_until = 0; /* set again if delay_us holds */
	while (qp->sq.send != qp->sq.post) {
		struct sv_swqe *w =
			&qp->sq.wqe[qp->sq.send & (qp->sq.size - 1)];
		uint64_t head = qp->link.tx.head;

		if (unlikely(w->done)) {
			/* rewound past it (sv_req_rewind): answered already,
			 * its PSNs are behind the responder */
			qp->req.psn = sv_psn_add(w->last_psn, 1);
			qp->sq.send++;
			continue;
		}
		if (!w->sent && must_wait(qp, w))
			break;
		if (unlikely(w->due_ns) && !w->sent && !w->tries &&
		    sv_now_ns() < w->due_ns) {
			/* SOFTVERBS_FAULTS delay_us: a delay line on the
			 * requests, timed from each WQE's post, so the ones
			 * behind it are not delayed further */
			qp->inject.delay_until = w->due_ns;
			break;
		}
		if (unlikely(w->local)) {
			exec_local(qp, w);
			done = true;
		} else if (!w->inl && !w->mapped && !translate_sges(qp, w)) {
			w->status = IBV_WC_LOC_PROT_ERR;
		} else if (!w->sent && !w->direct && try_direct(qp, w)) {
			done = true; /* in the peer's memory */
		} else if (!w->sent && !w->placed &&
			   (try_place(qp, w), w->status)) {
			/* its memory faulted under the copy */
		} else if (!send_wqe(qp, w,
				     tmax ? tmax : (tmax = train_max(qp)),
				     &err)) {
			wrote |= qp->link.tx.head != head;
			break;
		} else {
			wrote = true;
			/* IBA 9.8: UC is unacknowledged: sent is done */
			if (qp->qpx.qp_base.qp_type == IBV_QPT_UC)
				done = w->done = true;
		}
		qp->sq.send++;
		if (w->status) {
			qp->sq.stopped = true;
			break; /* nothing after it goes out */
		}
	}
	if (wrote)
		sv_link_tx_commit(&qp->link);
	if (err) /* the peer corrupted its consumer index */
		sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
	else if (done) /* complete them now: the poll finds them ready */
		sv_comp_advance(qp);
}
