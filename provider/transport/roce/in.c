// SPDX-License-Identifier: MIT
/*
 * The RoCEv2 transport's way in: every datagram on the link's socket is
 * parsed as hostile (wire/roce.c: lengths, opcode, headers, pad, ICRC
 * where it can be known), must be for our QP and of its type (RC, or UC:
 * sends and writes only, which the responder takes in PSN order or
 * drops, IBA 9.8.3), and then becomes
 *  - a request (SEND, WRITE, READ request, atomic): a one-PSN record in
 *    our receive ring, which the responder checks in PSN order;
 *  - a read answer or atomic ACK: a record in our response ring, then, as
 *    it acknowledges every request before it (IBA 9.7.5.1.2), the peer's
 *    ACK word;
 *  - an ACK or NAK: the peer's ACK word (ring.h), which the completer
 *    judges.
 * What cannot be taken is dropped and counted by reason (softverbs-stat):
 * the peer resends it, as for a packet lost on the wire.  A duplicate
 * request is acknowledged again here (rxe retransmits on a quiet link
 * too): the ACK word did not change, so the responder would not.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "inject.h"
#include "progress.h"
#include "roce_priv.h"

void sv_roce_count_drop(struct sv_qp_stats *st, enum sv_roce_verdict v)
{
	switch (v) {
	case SV_ROCE_SHORT:
		sv_stats_add(st, roce_drop_short, 1);
		break;
	case SV_ROCE_TVER:
		sv_stats_add(st, roce_drop_tver, 1);
		break;
	case SV_ROCE_OPCODE:
		sv_stats_add(st, roce_drop_opcode, 1);
		break;
	case SV_ROCE_TRUNC:
		sv_stats_add(st, roce_drop_trunc, 1);
		break;
	case SV_ROCE_PAD:
		sv_stats_add(st, roce_drop_pad, 1);
		break;
	case SV_ROCE_LEN:
		sv_stats_add(st, roce_drop_len, 1);
		break;
	case SV_ROCE_ICRC_BAD:
		sv_stats_add(st, roce_drop_icrc, 1);
		break;
	case SV_ROCE_QPT:
		sv_stats_add(st, roce_drop_qpt, 1);
		break;
	default:
		sv_stats_add(st, roce_drop_seg, 1);
		break;
	}
}

/* Counts a datagram dropped for reason v. */
static void drop(struct sv_roce *r, enum sv_roce_verdict v)
{
	sv_roce_count_drop(r->stats, v);
}

/* A record of h and its extension and payload in ring g; false when
 * there is no room. */
static bool put_record(struct sv_ring *g, struct sv_pkt *h, const void *ext,
		       uint32_t ext_len, const uint8_t *data)
{
	int err = 0;
	struct sv_pkt *p =
		sv_ring_reserve(g, sizeof(*h) + ext_len + h->len, &err);

	if (!p)
		return false;
	if (ext_len)
		memcpy(p + 1, ext, ext_len);
	if (h->len)
		memcpy((uint8_t *)(p + 1) + ext_len, data, h->len);
	h->rec_len = g->last_rec;
	memcpy(p, h, offsetof(struct sv_pkt, seq));
	sv_ring_publish(g, p);
	return true;
}

/*
 * The peer's ACK word from an AETH: ours to judge (comp.c).  A NAK's
 * word is new each time (its seq), so a repeated one is seen.  One that
 * acknowledges less than the word already does came late (reordered on
 * the way, or by SOFTVERBS_FAULTS reorder): it is stale, and taken it
 * would undo the newer one before the completer saw it.  Our last send's
 * ACK taken before the one of the packets ahead of it then read as
 * unacknowledged; the peer had gone, and the send failed RETRY_EXC
 * (rxe_interop reorder_pp.s, 2 runs of 20 here).
 */
static void take_aeth(struct sv_link *l, uint32_t psn, uint8_t aeth)
{
	struct sv_roce *r = sv_roce_of(l);
	uint64_t w, cur;

	switch (aeth >> 5) {
	case 0: /* ACK */
		w = sv_ack_word(psn, SV_ACK, 0, 0);
		break;
	case 1: /* RNR NAK, its timer */
		w = sv_ack_word(psn, SV_NAK_RNR, aeth & 0x1f, ++r->nak_seq);
		break;
	case 3: /* NAK */
		if ((aeth & 0x1f) > 4)
			return; /* reserved codes: ignored (IBA 9.7.5.2.1) */
		w = sv_ack_word(psn,
				(aeth & 0x1f) == 0   ? SV_NAK_SEQ
				: (aeth & 0x1f) == 1 ? SV_NAK_INV_REQ
				: (aeth & 0x1f) == 2 ? SV_NAK_REM_ACCESS
						     : SV_NAK_REM_OP,
				0, ++r->nak_seq);
		break;
	default:
		return;
	}
	cur = atomic_load_explicit(&l->tx.hdr->ack, memory_order_relaxed);
	if (cur != SV_ACK_NONE &&
	    sv_psn_diff(sv_ack_acked_psn(w), sv_ack_acked_psn(cur)) < 0) {
		roce_count(r, roce_stale_acks);
		return;
	}
	atomic_store_explicit(&l->tx.hdr->ack, w, memory_order_release);
}

/* A read answer or atomic ACK; false if our response ring is full: the
 * datagram waits (sv_roce_read_in), as the completer always makes room
 * and answers to 16 reads outstanding overflow it (dropped, they were
 * all asked again, and overflowed again). */
static bool take_response(struct sv_link *l, const struct sv_roce_pkt *p)
{
	struct sv_pkt h = {.psn = p->psn, .npsn = 1, .len = p->len};
	struct sv_atomack k = {.orig = p->orig};
	bool ok;

	if (SV_IB_OPERATION(p->opcode) == SV_IB_ATOMIC_ACK) {
		h.opcode = SV_OP_ATOMIC_RESP;
		h.seg = SV_SEG_ONLY;
		h.msg_len = 8;
		ok = put_record(&l->rsp_rx, &h, &k, sizeof(k), NULL);
	} else {
		h.opcode = SV_OP_READ_RESP;
		h.seg = (p->mask & SV_RH_FIRST ? SV_SEG_FIRST : 0) |
			(p->mask & SV_RH_LAST ? SV_SEG_LAST : 0);
		ok = put_record(&l->rsp_rx, &h, NULL, 0, p->payload);
	}
	if (!ok)
		return false;
	/* its AETH acknowledges what came before; a read's only once its
	 * answer is whole (the completer takes the record first) */
	if ((p->mask & SV_RH_AETH) && (p->mask & SV_RH_LAST) &&
	    (p->syndrome >> 5) == 0)
		take_aeth(l, p->psn, p->syndrome);
	return true;
}

/* The record a request makes: its opcode, position, flags, extension. */
static bool request_record(const struct sv_roce_pkt *p, uint32_t mtu,
			   struct sv_pkt *h, uint8_t *ext, uint32_t *ext_len)
{
	uint8_t op = SV_IB_OPERATION(p->opcode);
	bool first = p->mask & SV_RH_FIRST, last = p->mask & SV_RH_LAST;

	*h = (struct sv_pkt){.psn = p->psn, .npsn = 1, .len = p->len};
	*ext_len = 0;
	h->seg = (first ? SV_SEG_FIRST : 0) | (last ? SV_SEG_LAST : 0);
	if (p->mask & SV_RH_IMM) {
		h->flags |= SV_PKT_IMM;
		h->imm = p->imm_be;
	}
	if (p->se && last)
		h->flags |= SV_PKT_SOLICITED;
	if (p->ack_req)
		h->flags |= SV_PKT_ACK_REQ;
	if (op == SV_IB_SEND_LAST_INV || op == SV_IB_SEND_ONLY_INV) {
		/* IBA 9.3.7: the key the receiver invalidates (resp.h) */
		h->opcode = SV_OP_SEND;
		h->flags |= SV_PKT_INV;
		h->imm = p->inv_rkey;
		h->msg_len = p->len;
		if (!first)
			h->flags |= SV_PKT_OPEN_LEN;
	} else if (op <= SV_IB_SEND_ONLY_IMM) {
		h->opcode = SV_OP_SEND;
		h->msg_len = p->len;
		if (!(first && last)) /* SEND_FIRST says no length */
			h->flags |= SV_PKT_OPEN_LEN;
	} else if (op <= SV_IB_WRITE_ONLY_IMM) {
		h->opcode = SV_OP_WRITE;
		if (first) {
			h->msg_len = p->reth.dma_len;
			memcpy(ext, &p->reth, sizeof(p->reth));
			*ext_len = sizeof(p->reth);
		}
	} else if (op == SV_IB_READ_REQ) {
		h->opcode = SV_OP_READ_REQ;
		h->msg_len = p->reth.dma_len;
		h->npsn = sv_roce_npkts(p->reth.dma_len, mtu);
		memcpy(ext, &p->reth, sizeof(p->reth));
		*ext_len = sizeof(p->reth);
	} else if (op == SV_IB_CMP_SWAP || op == SV_IB_FETCH_ADD) {
		struct sv_atometh a = p->atomic;

		a.rsvd = 0;
		h->opcode =
			op == SV_IB_CMP_SWAP ? SV_OP_CMP_SWAP : SV_OP_FETCH_ADD;
		h->msg_len = 8;
		memcpy(ext, &a, sizeof(a));
		*ext_len = sizeof(a);
	} else {
		return false; /* a request we do not take (none yet) */
	}
	return true;
}

/* A read or an atomic of npsn PSNs from first, taken in order: kept
 * until our ACK word passes it (sv_roce_answered_by_response). */
void sv_roce_rd_taken(struct sv_roce *r, uint32_t first, uint32_t npsn)
{
	struct sv_roce_rd *d;

	if (r->rdq_tail - r->rdq_head == SV_ROCE_RD_MAX)
		r->rdq_head++; /* more than max_dest_rd_atomic in flight */
	d = &r->rdq[r->rdq_tail++ & (SV_ROCE_RD_MAX - 1)];
	d->first = first;
	d->last = sv_psn_add(first, npsn - 1);
}

bool sv_roce_answered_by_response(struct sv_roce *r, uint64_t ack)
{
	uint32_t psn = SV_ACK_PSN(ack);
	const struct sv_roce_rd *d;

	if (SV_ACK_SYN(ack) != SV_ACK)
		return false;
	/* the word only moves on: those it passed no ACK names again */
	while (r->rdq_head != r->rdq_tail &&
	       sv_psn_diff(psn,
			   r->rdq[r->rdq_head & (SV_ROCE_RD_MAX - 1)].last) > 0)
		r->rdq_head++;
	if (r->rdq_head == r->rdq_tail)
		return false;
	/* taken in PSN order (only at the expected PSN), so the ranges
	 * follow each other: psn is at most the oldest's last, and before
	 * every later one's first */
	d = &r->rdq[r->rdq_head & (SV_ROCE_RD_MAX - 1)];
	return sv_psn_diff(psn, d->first) >= 0;
}

/* A request: into our receive ring, PSN order the responder's. */
static void take_request(struct sv_link *l, const struct sv_roce_pkt *p)
{
	struct sv_roce *r = sv_roce_of(l);
	struct sv_xrceth x = {.srqn = p->srqn};
	uint8_t ext[sizeof(x) + sizeof(struct sv_atometh)];
	uint32_t ext_len, xlen = r->tp == SV_IB_XRC ? sizeof(x) : 0;
	uint64_t ack;
	struct sv_pkt h;
	int32_t d = sv_psn_diff(p->psn, r->epsn);

	/* an XRC request's XRCETH first (the responder's take_xrceth) */
	if (!request_record(p, r->mtu, &h, ext + xlen, &ext_len)) {
		drop(r, SV_ROCE_OPCODE);
		return;
	}
	if (xlen) {
		memcpy(ext, &x, sizeof(x));
		ext_len += xlen;
		h.flags |= SV_PKT_XRC;
	}
	if (r->tp == SV_IB_UC) { /* no ACKs: the responder judges PSNs */
		if (!put_record(&l->rx, &h, ext, ext_len, p->payload))
			roce_count(r, roce_drop_full); /* lost, as on a wire */
		return;
	}
	ack = atomic_load_explicit(&l->rx.hdr->ack, memory_order_acquire);
	if (d < 0 && (p->ack_req || (p->mask & SV_RH_LAST)) &&
	    r->ack_sent_valid && SV_ACK_SYN(ack) == SV_ACK) {
		/* a duplicate, as far as we saw: what the responder
		 * acknowledged, again (its word did not change, so it would
		 * not); the packet still goes to it, which judges its PSN
		 * (one we saw may never have been taken: SOFTVERBS_FAULTS
		 * drop), answers a read again and an atomic from its cache */
		if (!sv_roce_answered_by_response(r, ack))
			sv_roce_send_ack(l, ack);
		roce_count(r, roce_reacks);
	}
	if (!put_record(&l->rx, &h, ext, ext_len, p->payload)) {
		/* dropped: the peer resends (a held packet here could stall
		 * its ACKs behind a receive the app never posts) */
		roce_count(r, roce_drop_full);
		return;
	}
	if (d == 0) {
		if (h.opcode == SV_OP_READ_REQ || h.opcode == SV_OP_CMP_SWAP ||
		    h.opcode == SV_OP_FETCH_ADD) {
			sv_roce_rd_taken(r, p->psn, h.npsn);
		}
		r->epsn = sv_psn_add(r->epsn, h.npsn);
		if (h.seg & SV_SEG_LAST)
			r->msn = (r->msn + 1) & SV_PSN_MASK;
	}
}

/* One datagram of n bytes at in; false: it waits there (a response
 * without room). */
static bool take(struct sv_link *l, const uint8_t *in, size_t n)
{
	struct sv_roce *r = sv_roce_of(l);
	struct sv_roce_pkt p;
	enum sv_roce_verdict v;

	/* the ICRC verified with the IPv4 ID it was sent with, which the
	 * socket does not show: solved from the ICRC (roce.h).  softverbs
	 * sends 0, or 0, 1, 2... in a GSO run; rxe, its kernel's count */
	v = sv_roce_parse(in, n, &r->rip, &p);
	if (!v && p.ip_id)
		roce_count(r, roce_icrc_id);
	if (!v)
		v = sv_roce_check_qpt(&p, r->tp == SV_IB_UC ? IBV_QPT_UC
					  : r->tp == SV_IB_XRC
						  ? IBV_QPT_XRC_SEND
						  : IBV_QPT_RC);
	if (!v)
		v = sv_roce_check_seg(&p, r->mtu);
	if (v) {
		drop(r, v);
		return true;
	}
	if (p.dqpn != r->my_qpn) {
		/* another process's link of this four-tuple, maybe */
		if (!sv_roce_share_relay(r, in, (uint32_t)n, p.dqpn))
			roce_count(r, roce_drop_qpn);
		return true;
	}
	/* SOFTVERBS_FAULTS drop on a UC link: lost on the wire, a true PSN
	 * gap for the responder (RC's losses are the engine's) */
	if (r->tp == SV_IB_UC && SV_FAULT_ON(drop) &&
	    sv_inject_hit(sv_inject.drop, sv_inject.seed, SV_FAULT_DROP,
			  r->my_qpn, p.psn, (uint32_t)r->rd.in)) {
		roce_count(r, fault_drops);
		return true;
	}
	if (p.mask & SV_RH_REQ)
		take_request(l, &p);
	else if (r->tp == SV_IB_UC)
		drop(r, SV_ROCE_QPT); /* (none in UC's table) */
	else if (SV_IB_OPERATION(p.opcode) == SV_IB_ACK)
		take_aeth(l, p.psn, p.syndrome);
	else if (p.mask & SV_RH_RESP)
		return take_response(l, &p);
	else
		drop(r, SV_ROCE_OPCODE); /* CNP: no congestion control */
	return true;
}

/* The datagram SOFTVERBS_FAULTS reorder held back, taken now: after
 * the one that overtook it, or by itself when none came in time.  One
 * that cannot be taken (a response with no room) is lost. */
static void take_held(struct sv_link *l, struct sv_roce *r)
{
	uint32_t n = r->hold_len;

	r->hold_len = 0;
	if (!take(l, r->hold, n))
		roce_count(r, roce_drop_full);
}

/* SOFTVERBS_FAULTS reorder: whether the datagram d of n bytes is held
 * back, to be taken after the next one (decided per datagram taken). */
static bool hold_back(struct sv_roce *r, const uint8_t *d, uint32_t n)
{
	if (r->hold_len ||
	    !sv_inject_hit(sv_inject.reorder, sv_inject.seed, SV_FAULT_REORDER,
			   r->my_qpn, (uint32_t)(r->rd.in + r->inext),
			   (uint32_t)r->stats->fault_reorders))
		return false;
	if (!r->hold)
		r->hold = malloc(r->islot);
	if (!r->hold)
		return false;
	memcpy(r->hold, d, n);
	r->hold_len = n;
	r->hold_ns = sv_now_ns();
	roce_count(r, fault_reorders);
	return true;
}

/* Takes the datagrams read from inext on; false: one waits. */
static bool take_read(struct sv_link *l)
{
	struct sv_roce *r = sv_roce_of(l);

	for (; r->inext < r->icount; r->inext++) {
		uint32_t n = r->ilen[r->inext];

		if (n == SV_ROCE_GONE)
			continue;   /* passed to the link it is for (share.c) */
		if (n > r->islot) { /* truncated: longer than our MTU's */
			drop(r, SV_ROCE_LEN);
			continue;
		}
		if (SV_FAULT_ON(reorder) && hold_back(r, r->iptr[r->inext], n))
			continue;
		if (!take(l, r->iptr[r->inext], n))
			return false;
		if (r->hold_len)
			take_held(l, r); /* overtaken */
	}
	return true;
}

static void read_batches(struct sv_link *l, struct sv_roce *r)
{
	if (!take_read(l))
		return; /* still no room: the completer's next run */
	for (int i = 0; i < SV_ROCE_RX_BATCH; i += SV_ROCE_BATCH) {
		bool more =
			atomic_load_explicit(&r->shared, memory_order_acquire)
				? sv_roce_share_read(r)
				: sv_roce_recv(r) > 0 && r->ifull;

		if (!take_read(l) || !more)
			return; /* one waits, or the socket is empty */
	}
}

void sv_roce_read_in(struct sv_link *l)
{
	struct sv_roce *r = sv_roce_of(l);
	uint64_t in;

	if (!r)
		return;
	in = r->rd.in;
	read_batches(l, r);
	if (r->orphan) /* our relay's process let go of the four-tuple */
		sv_roce_orphaned(r);
	if (r->hold_len && sv_now_ns() >= sv_roce_hold_due(r))
		take_held(l, r); /* none overtook it */
	sv_roce_share_flush(r);	 /* what we took for another process's */
	/* what the progress thread took (link.h, sv_readers) */
	if (sv_progress_ctx())
		r->rd.by_thread += r->rd.in - in;
}
