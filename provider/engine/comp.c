// SPDX-License-Identifier: MIT
/*
 * The completer: reads the peer's ACK/NAK word, completes acknowledged
 * send WQEs in order, and runs the two requester timers: the local ACK
 * timeout (retry_cnt) and the RNR timer (rnr_retry, 7 = forever).  A
 * failed WQE gets its own status; the QP then goes to ERROR and the rest
 * is flushed (IBA 10.8.3).  The ACK timeout counts only while the link is
 * not up: a ring loses nothing, and a peer that dies hangs up (qp_link.c),
 * so a late ACK on an up link means a slow peer (stopped, debugged), which
 * an HCA would have acknowledged for — never an error; nor while a TCP
 * link's first calls wait unanswered at busy doors (ops->setup_waits):
 * nothing was sent yet.  Except with
 * SOFTVERBS_FAULTS drop, where packets are lost: then the timeout resends
 * (req.c sv_req_rewind) and counts against retry_cnt.  A NAK-seq always
 * resends from the PSN it names (IBA 9.7.5.1), not counted.  A peer QP that
 * said goodbye (destroyed, reset) answers nothing more: what it did not
 * acknowledge fails when the timer has run out retry_cnt times, as
 * toward a QP that is gone on a wire — not at once, which would fail a
 * program whose last, unneeded sends race its peer's exit (ibv_srq_pingpong
 * posts up to one send per QP more than it waits for).
 *
 * Reads and atomics complete when their response has arrived on the
 * link's response ring (take_responses), one-sided WQEs executed in the
 * peer's memory (req.c) as soon as every WQE before them has: completions
 * come in posting order (IBA 10.8.3).  Steps: take_responses -> take_ack
 * -> advance (complete in order) -> timers.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "engine.h"
#include "inject.h"
#include "pcap.h"

/*
 * IBA 9.7.5.2.8 table 45: RNR NAK timer codes, in 10 µs units
 * (code 0 is the longest, 655.36 ms).
 */
static const uint32_t rnr_10us[32] = {
	65536, 1,    2,	   3,	 4,    6,     8,     12,    16,	   24,	  32,
	48,    64,   96,   128,	 192,  256,   384,   512,   768,   1024,  1536,
	2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

uint64_t sv_rnr_timer_ns(uint8_t code)
{
	return rnr_10us[code & 31] * 10000ull;
}

/* Software links are not wires: never time out faster than this. */
#define SV_MIN_ACK_TIMEOUT_NS 500000000ull

uint64_t sv_qp_ack_timeout_ns(const struct sv_qp *qp)
{
	/* IBA 9.7.6.1.3: 4.096 µs * 2^timeout; 0 means infinite */
	uint64_t t;

	if (!qp->attr.timeout)
		return UINT64_MAX / 2;
	t = 4096ull << qp->attr.timeout;
	return t < SV_MIN_ACK_TIMEOUT_NS ? SV_MIN_ACK_TIMEOUT_NS : t;
}

/* With SOFTVERBS_FAULTS drop, and on a wire that loses packets (RoCE),
 * packets are lost on an up link: the local ACK timeout resends (IBA
 * 9.7.6.1.3), at the QP's value as rxe and NICs do, but no faster than
 * this; each such retry counts against retry_cnt.  (At softverbs' floor
 * for software links, each loss nothing after it showed cost 0.5 s, not
 * the 67 ms of perftest's timeout 14.) */
#define SV_MIN_RETX_TIMEOUT_NS 1000000ull

static uint64_t ack_timeout(const struct sv_qp *qp)
{
	uint64_t t;

	if (!SV_FAULT_ON(drop) && !sv_link_lossy(&qp->link))
		return sv_qp_ack_timeout_ns(qp);
	if (!qp->attr.timeout)
		return UINT64_MAX / 2;
	t = 4096ull << qp->attr.timeout;
	return t < SV_MIN_RETX_TIMEOUT_NS ? SV_MIN_RETX_TIMEOUT_NS : t;
}

static const enum ibv_wc_opcode wc_opcode[] = {
	[IBV_WR_RDMA_WRITE] = IBV_WC_RDMA_WRITE,
	[IBV_WR_RDMA_WRITE_WITH_IMM] = IBV_WC_RDMA_WRITE,
	[IBV_WR_SEND] = IBV_WC_SEND,
	[IBV_WR_SEND_WITH_IMM] = IBV_WC_SEND,
	[IBV_WR_RDMA_READ] = IBV_WC_RDMA_READ,
	[IBV_WR_ATOMIC_CMP_AND_SWP] = IBV_WC_COMP_SWAP,
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = IBV_WC_FETCH_ADD,
	[IBV_WR_LOCAL_INV] = IBV_WC_LOCAL_INV,
	[IBV_WR_BIND_MW] = IBV_WC_BIND_MW,
	[IBV_WR_SEND_WITH_INV] = IBV_WC_SEND,
};

/* The head WQE is finished: its bookkeeping, and its completion if it
 * is signalled or failed. */
static void complete(struct sv_qp *qp, struct sv_swqe *w, enum ibv_wc_status st)
{
	const struct sv_opcode_info *o = &sv_opcodes[w->op];

	if (!w->direct && !w->done && o->access && qp->req.ring_rdma)
		qp->req.ring_rdma--; /* a write, answered by an ACK or NAK */
	sv_comp_wr(qp, w->wr_id, w->opcode, w->flags, w->length, st);
}

void sv_comp_wr(struct sv_qp *qp, uint64_t wr_id, uint32_t opcode,
		uint32_t flags, uint32_t length, enum ibv_wc_status st)
{
	struct ibv_wc wc;

	qp->sq.comp++;
	if (st == IBV_WC_SUCCESS && !qp->sq.sig_all &&
	    !(flags & IBV_SEND_SIGNALED))
		return;
	wc = (struct ibv_wc){
		.wr_id = wr_id,
		.status = st,
		.opcode = wc_opcode[opcode],
		.byte_len = length,
		.qp_num = qp->qpx.qp_base.qp_num,
	};
	sv_stat_wc(qp, st);
	sv_cq_push(qp->scq, &wc, false);
}

/* Completes, in order, every WQE at the head that is finished: executed
 * here, answered, or acknowledged.  Stops at one that failed (the caller
 * completes it in error) or that still waits. */
void sv_comp_advance(struct sv_qp *qp)
{
	while (qp->sq.comp != qp->sq.send) {
		struct sv_swqe *w =
			&qp->sq.wqe[qp->sq.comp & (qp->sq.size - 1)];

		if (w->status)
			return;
		if (!w->done) {
			if (w->sent < w->length || !qp->comp.acked_valid ||
			    (sv_opcodes[w->op].mask & SV_M_RD_ATOMIC) ||
			    sv_psn_diff(w->last_psn, qp->comp.acked) > 0)
				return;
		}
		complete(qp, w, IBV_WC_SUCCESS);
		qp->comp.retries = qp->comp.rnr_retries = 0;
		qp->comp.deadline = 0;
	}
}

/* Whether a read response of position seg may come next to w: a FIRST
 * opens the answer to the read, none comes after.  The answer to a read
 * asked again for its rest (rd_base, req.c sv_req_rewind) opens with a
 * FIRST by the IBA's letter, and with a MIDDLE or LAST from rxe, which
 * replays the original read's responses: either is taken. */
static bool read_seg_ok(const struct sv_swqe *w, uint8_t seg)
{
	if (w->got != w->rd_base)
		return !(seg & SV_SEG_FIRST);
	return w->rd_base || (seg & SV_SEG_FIRST);
}

/*
 * A response beyond the one the read w awaits (want): the ones between
 * were lost, responses coming in PSN order.  Asked again at once for the
 * rest (rxe's completer does; the ACK timer would take its timeout),
 * once per loss: the rest of the round it cut still comes, and finds
 * the same want and tries.  Not against retry_cnt: want only moves on
 * with a response placed, so each ask is progress.
 */
static void read_gap(struct sv_qp *qp, const struct sv_swqe *w, uint32_t want)
{
	if (qp->comp.gap_valid && qp->comp.gap_psn == want &&
	    qp->comp.gap_tries == w->tries)
		return;
	sv_dbg("qp %06x: read response gap at psn %06x\n",
	       qp->qpx.qp_base.qp_num, want);
	sv_req_rewind(qp, want);
	qp->comp.gap_valid = true;
	qp->comp.gap_psn = want;
	qp->comp.gap_tries = w->tries;
	qp->comp.deadline = 0; /* the timer runs from this ask */
	SV_STAT_INC(qp, read_gaps);
}

/* The oldest read or atomic on the ring still waiting for its answer. */
static struct sv_swqe *awaiting_response(struct sv_qp *qp)
{
	for (uint32_t i = qp->sq.comp; i != qp->sq.send; i++) {
		struct sv_swqe *w = &qp->sq.wqe[i & (qp->sq.size - 1)];

		if (!w->done && !w->direct &&
		    (sv_opcodes[w->op].mask & SV_M_RD_ATOMIC))
			return w;
	}
	return NULL;
}

/* One response: its data into the WQE's local SGEs.  false if the peer
 * answered something we did not ask. */
static bool take_response(struct sv_qp *qp, const struct sv_pkt *p,
			  const uint8_t *payload)
{
	const struct sv_opcode_info *o = sv_opcode(p->opcode);
	struct sv_swqe *w = awaiting_response(qp);
	const uint8_t *data;

	if (!o || !(o->mask & SV_M_RESP) ||
	    (uint64_t)o->ext_len + p->len > p->rec_len - sizeof(*p))
		return false;
	if (SV_FAULT_ON(drop) || sv_link_lossy(&qp->link)) {
		/* responses are lost and asked again: one that is not the
		 * next we await is an old round's or follows a loss; drop
		 * it.  The next one may be lost too (SOFTVERBS_FAULTS): the
		 * attempt is the WQE's (times rewound), so each round of a
		 * read of several trains, asked again from its start, draws
		 * afresh for every train (a count of drops in a row, reset
		 * by the train that passed, drew the same for the train
		 * after it each round: a read that failed for ever) */
		uint32_t want;

		if (!w)
			return true;
		want = w->op == SV_OP_READ_REQ
			       ? sv_psn_add(w->first_psn, w->got / qp->mtu)
			       : w->first_psn;
		if (p->psn == want &&
		    (w->op != SV_OP_READ_REQ || read_seg_ok(w, p->seg))) {
			/* the one awaited: below */
		} else if (w->op == SV_OP_READ_REQ &&
			   sv_psn_diff(p->psn, want) > 0) {
			read_gap(qp, w, want);
			return true;
		} else {
			return true;
		}
		if (SV_FAULT_ON(drop) &&
		    sv_inject_hit(sv_inject.drop, sv_inject.seed, SV_FAULT_RSP,
				  qp->inject.idx, p->psn, w->tries)) {
			SV_STAT_INC(qp, fault_drops);
			qp->inject.drop_hash =
				(qp->inject.drop_hash ^
				 ((uint64_t)p->psn << 32 | (w->tries + 1))) *
				0x100000001b3ull;
			return true;
		}
	}
	if (!w || sv_psn_diff(p->psn, w->first_psn) < 0 ||
	    sv_psn_diff(p->psn, w->last_psn) > 0)
		return false;
	data = payload + o->ext_len;
	if (p->opcode == SV_OP_ATOMIC_RESP) {
		struct sv_atomack a;

		if (w->op == SV_OP_READ_REQ)
			return false;
		memcpy(&a, data - o->ext_len, sizeof(a));
		if (!w->status &&
		    sv_swqe_scatter(qp, w, (const uint8_t *)&a.orig, 8))
			w->status = IBV_WC_LOC_PROT_ERR;
		w->got = 8;
	} else {
		if (w->op != SV_OP_READ_REQ || p->len > w->length - w->got ||
		    !read_seg_ok(w, p->seg) ||
		    ((p->seg & SV_SEG_LAST) && w->got + p->len != w->length))
			return false;
		if (!w->status && p->len &&
		    sv_swqe_scatter(qp, w, data, p->len))
			w->status = IBV_WC_LOC_PROT_ERR;
		w->got += p->len;
		if (sv_link_lossy(&qp->link) || SV_FAULT_ON(drop)) {
			/* IBA 9.7.6.1.3: a response restarts the timer, and
			 * is forward progress: the retry count starts again
			 * (a read asked again went on from where it was) */
			qp->comp.deadline = 0;
			qp->comp.retries = 0;
		}
		if (!(p->seg & SV_SEG_LAST))
			return true;
	}
	/* a rewound request not sent again (sv_req_rewind undid its
	 * counts) is answered by its first try's response */
	if (w->sent == w->length) {
		if (qp->req.rd_out)
			qp->req.rd_out--;
		if (qp->req.ring_rdma)
			qp->req.ring_rdma--;
	}
	w->done = true;
	return true;
}

/* One response record taken; false on a protocol error (the QP has gone
 * to ERROR). */
static bool take_record(struct sv_qp *qp, const struct sv_pkt *p,
			const uint8_t *payload)
{
	if (!take_response(qp, p, payload)) {
		sv_dbg("qp %06x: bad response in ring\n",
		       qp->qpx.qp_base.qp_num);
		sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
		return false;
	}
	if (__builtin_expect(sv_pcap_on, 0))
		sv_pcap_train(qp, false, p, payload, payload, NULL);
	sv_stat_add(qp, rx_pkts, p->npsn);
	sv_stat_add(qp, rx_bytes, p->len);
	return true;
}

/* The next response record: 1, 0 if none, -1 if the ring is bad (the
 * QP has gone to ERROR). */
static int peek_response(struct sv_qp *qp, struct sv_pkt *p,
			 const uint8_t **payload)
{
	int r = sv_ring_peek(&qp->link.rsp_rx, p, payload);

	if (r < 0) {
		sv_dbg("qp %06x: bad response in ring\n",
		       qp->qpx.qp_base.qp_num);
		sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
	}
	return r < 0 ? -1 : r;
}

/* Takes every response that has arrived; false on a protocol error
 * (the QP has gone to ERROR). */
static bool take_responses(struct sv_qp *qp)
{
	bool took = false;

	for (;;) {
		const uint8_t *payload;
		struct sv_pkt p;
		int r = peek_response(qp, &p, &payload);

		if (r == 0)
			break;
		if (r < 0)
			return false;
		if (!take_record(qp, &p, payload))
			return false;
		sv_ring_consume(&qp->link.rsp_rx);
		took = true;
	}
	if (took)
		sv_link_rsp_done(&qp->link);
	return true;
}

/* Completes the WQE at the head with an error; the QP goes to ERROR. */
static void fail_head(struct sv_qp *qp, enum ibv_wc_status st)
{
	sv_dbg("qp %06x: WQE %u fails: %s (sq %u/%u/%u, ack %#llx)\n",
	       qp->qpx.qp_base.qp_num, qp->sq.comp, sv_wc_status_str(st),
	       qp->sq.comp, qp->sq.send, qp->sq.post,
	       (unsigned long long)qp->comp.ack);
	complete(qp, &qp->sq.wqe[qp->sq.comp & (qp->sq.size - 1)], st);
	sv_qp_to_error(qp, 0);
}

static void nak_head(struct sv_qp *qp, uint64_t ack, uint64_t now)
{
	switch (SV_ACK_SYN(ack)) {
	case SV_NAK_RNR:
		qp->comp.rnr_wait = true;
		qp->comp.deadline = (now ? now : sv_now_ns()) +
				    rnr_10us[SV_ACK_TIMER(ack) & 31] * 10000ull;
		break;
	case SV_NAK_INV_REQ:
		fail_head(qp, IBV_WC_REM_INV_REQ_ERR);
		break;
	case SV_NAK_REM_ACCESS:
		fail_head(qp, IBV_WC_REM_ACCESS_ERR);
		break;
	case SV_NAK_REM_OP:
		fail_head(qp, IBV_WC_REM_OP_ERR);
		break;
	default: /* NAK-seq: resend from the PSN it names (IBA 9.7.5.1);
		  * it does not count against retry_cnt */
		sv_req_rewind(qp, SV_ACK_PSN(ack));
		qp->comp.deadline = 0;
		break;
	}
}

/* Completes every WQE the ack word covers; handles a NAK at the head
 * (now: the time, 0 if not read: only an RNR NAK's timer needs it). */
static void take_ack(struct sv_qp *qp, uint64_t ack, uint64_t now)
{
	uint32_t syn = SV_ACK_SYN(ack), psn = SV_ACK_PSN(ack);
	uint32_t acked = sv_ack_acked_psn(ack);

	qp->comp.ack = ack;
	qp->comp.rnr_wait = false;
	if (syn > SV_NAK_REM_OP) /* not a word a responder writes */
		return;
	if (__builtin_expect(sv_pcap_on, 0))
		sv_pcap_ack(qp, false, ack);
	sv_stat_add(qp, rx_pkts, 1);
	if (syn == SV_NAK_SEQ)
		sv_stat_add(qp, seq_nak_recv, 1);
	else if (syn == SV_NAK_RNR)
		sv_stat_add(qp, rnr_nak_recv, 1);
	sv_dbg("qp %06x: ack psn %06x syndrome %u\n", qp->qpx.qp_base.qp_num,
	       psn, syn);
	if (qp->comp.acked_valid && sv_psn_diff(acked, qp->comp.acked) > 0) {
		/* forward progress (IBA 9.7.6.1.3, as rxe and mlx5): the
		 * retry counter starts again, and so does the ACK timer */
		qp->comp.retries = 0;
		qp->comp.deadline = 0;
	}
	qp->comp.acked = acked;
	qp->comp.acked_valid = true;
	sv_comp_advance(qp);
	if (syn != SV_ACK && qp->sq.comp != qp->sq.send)
		nak_head(qp, ack, now);
}

/* The RNR timer expired: retry again, or give up if the responder has
 * not taken the message meanwhile. */
static void rnr_expired(struct sv_qp *qp, uint64_t now)
{
	if (qp->attr.rnr_retry == 7 ||
	    qp->comp.rnr_retries++ < qp->attr.rnr_retry) {
		if (sv_link_lossy(&qp->link)) {
			/* the responder dropped it (IBA 9.7.5.2.8): sent
			 * again from the PSN it NAKed, answered by an ACK or
			 * another RNR NAK within the ACK timeout */
			sv_req_rewind(qp, SV_ACK_PSN(qp->comp.ack));
			qp->comp.rnr_wait = false;
			qp->comp.deadline = now + ack_timeout(qp);
			return;
		}
		qp->comp.deadline =
			now +
			rnr_10us[SV_ACK_TIMER(qp->comp.ack) & 31] * 10000ull;
		return;
	}
	if (sv_link_rnr_abort(&qp->link))
		fail_head(qp, IBV_WC_RNR_RETRY_EXC_ERR);
	else
		qp->comp.rnr_wait = false; /* taken: its ACK is coming */
}

/*
 * SOFTVERBS_FAULTS delay_us on the way back: an acknowledgement (ACK or
 * NAK word) is taken delay_us after we first saw it.  One is held at a
 * time, the oldest: a newer word seen meanwhile waits its own delay from
 * when the held one is taken (coalesced, as a delayed ACK may be), so a
 * word that keeps changing never starves.  true: *ack is the one to take
 * now.
 */
static bool ack_due(struct sv_qp *qp, uint64_t *ack, uint64_t now)
{
	if (!qp->inject.ack_pending) {
		qp->inject.ack_pending = true;
		qp->inject.ack_val = *ack;
		qp->inject.ack_due = now + sv_inject.delay_us * 1000;
		return false;
	}
	if (now < qp->inject.ack_due)
		return false;
	qp->inject.ack_pending = false;
	*ack = qp->inject.ack_val;
	return true;
}

/*
 * SOFTVERBS_FAULTS delay_us on the way back, for read and atomic
 * responses: each record is copied out of the response ring when we first
 * see it, stamped with that time, and taken delay_us later, in order.  So
 * a train of answers made together is taken together (a read of many
 * packets waits one delay, not one per packet: the ring is free for the
 * next ones meanwhile, as a wire holds what is in flight), and an ACK word
 * is never taken before a response published before it: the word is read
 * (acquire) before the ring, so its responses are stamped no later than
 * it, and the due ones are taken before it.  The copy is what the peer
 * wrote, checked when taken as a ring record would be.  At most
 * SV_FAULT_RSP_MAX bytes are held; beyond, the rest waits in the ring
 * (the peer's flow control), and no new ACK word is looked at until the
 * ring is empty, which keeps that order.
 */
struct sv_fault_rsp {
	struct sv_fault_rsp *next;
	uint64_t due;	   /* taken then (ns) */
	struct sv_pkt p;   /* the record's header */
	uint8_t payload[]; /* its rec_len - sizeof(p) bytes */
};

#define SV_FAULT_RSP_MAX (16u << 20)

/* Copies what the response ring holds into the hold queue; 1: the ring
 * is empty, 0: some left there (the queue is full), -1: a protocol error
 * (the QP has gone to ERROR). */
static int hold_responses(struct sv_qp *qp, uint64_t now)
{
	bool took = false;
	int all = 1;

	for (;;) {
		const uint8_t *payload;
		struct sv_fault_rsp *h;
		struct sv_pkt p;
		int r;

		if (qp->inject.rsp_bytes >= SV_FAULT_RSP_MAX) {
			all = 0;
			break;
		}
		r = peek_response(qp, &p, &payload);
		if (r == 0)
			break;
		if (r < 0)
			return -1;
		/* peek checked sizeof(p) <= rec_len <= SV_MAX_REC */
		h = malloc(sizeof(*h) + p.rec_len - sizeof(p));
		if (!h) {
			all = 0; /* it waits in the ring */
			break;
		}
		h->next = NULL;
		h->due = now + sv_inject.delay_us * 1000;
		h->p = p;
		memcpy(h->payload, payload, p.rec_len - sizeof(p));
		if (!qp->inject.rsp)
			qp->inject.rsp_end = &qp->inject.rsp;
		*qp->inject.rsp_end = h;
		qp->inject.rsp_end = &h->next;
		qp->inject.rsp_bytes += p.rec_len;
		sv_ring_consume(&qp->link.rsp_rx);
		took = true;
	}
	if (took)
		sv_link_rsp_done(&qp->link);
	return all;
}

/* The responses held, then the ACK word, each delay_us after it came;
 * *ack is left at qp->comp.ack when none is to be taken now.  false on a
 * protocol error (the QP has gone to ERROR). */
static bool delay_back(struct sv_qp *qp, uint64_t *ack, uint64_t now)
{
	/* a peer that hung up: its last words are all taken now, as
	 * without the delay (qp_link.c sv_qp_link_event) */
	bool dead = qp->link.state == SV_LINK_DEAD;
	uint64_t until = dead ? UINT64_MAX : now;
	struct sv_fault_rsp *h;
	int all = hold_responses(qp, now);

	if (all < 0)
		return false;
	while ((h = qp->inject.rsp) && h->due <= until) {
		bool ok;

		qp->inject.rsp = h->next;
		qp->inject.rsp_bytes -= h->p.rec_len;
		ok = take_record(qp, &h->p, h->payload);
		free(h);
		if (!ok) {
			sv_comp_fault_free(qp);
			return false;
		}
	}
	qp->inject.rsp_due = qp->inject.rsp ? qp->inject.rsp->due : 0;
	if (dead) {
		qp->inject.ack_pending = false; /* the word now is newer */
		return true;
	}
	if (*ack != qp->comp.ack &&
	    ((!qp->inject.ack_pending && !all) || !ack_due(qp, ack, now)))
		*ack = qp->comp.ack; /* still on the wire */
	return true;
}

void sv_comp_fault_free(struct sv_qp *qp)
{
	while (qp->inject.rsp) {
		struct sv_fault_rsp *h = qp->inject.rsp;

		qp->inject.rsp = h->next;
		free(h);
	}
	qp->inject.rsp_bytes = 0;
	qp->inject.rsp_due = 0;
	qp->inject.ack_pending = false;
}

void sv_comp_run(struct sv_qp *qp, uint64_t now)
{
	uint64_t ack;

	/* UD sends complete as they are sent (ud/send.c) */
	if (qp->sq.comp == qp->sq.post || qp->qpx.qp_base.qp_type == IBV_QPT_UD)
		return;
	if (qp->link.tx_ready) {
		/* acquire, before the responses: a NAK after a read is
		 * published after the read's answer */
		ack = sv_link_ack_get(&qp->link);
		if (unlikely(sv_inject.on) && sv_inject.delay_us) {
			now = sv_now_ns(); /* fresh: it stamps arrivals */
			if (!delay_back(qp, &ack, now))
				return;
		} else if (!take_responses(qp)) {
			return;
		}
		if (ack != qp->comp.ack) {
			/* no clock read for a plain ACK: one a message
			 * was 4 % of an 8 B ping-pong's CPU */
			take_ack(qp, ack, now);
			if (qp->sq.comp == qp->sq.post ||
			    qp->attr.qp_state == IBV_QPS_ERR)
				return;
		}
	}
	sv_comp_advance(qp);
	if (qp->sq.comp == qp->sq.post)
		return;
	if (qp->sq.comp != qp->sq.send) {
		struct sv_swqe *w =
			&qp->sq.wqe[qp->sq.comp & (qp->sq.size - 1)];

		if (w->status) { /* failed in the requester, now in order */
			fail_head(qp, w->status);
			return;
		}
	}
	if (!now) {
		/* a clock read costs ~65 ns here: look every 32nd spin */
		if (qp->comp.deadline && (++qp->comp.spins & 31))
			return;
		now = sv_now_ns();
	}
	if (!qp->comp.deadline) {
		qp->comp.deadline = now + ack_timeout(qp);
		return;
	}
	if (now < qp->comp.deadline)
		return;
	if (qp->comp.rnr_wait) {
		rnr_expired(qp, now);
		return;
	}
	if ((SV_FAULT_ON(drop) || sv_link_lossy(&qp->link)) &&
	    qp->link.state == SV_LINK_UP &&
	    qp->qpx.qp_base.qp_type != IBV_QPT_UC) {
		/* packets are lost on this link: resend what is not
		 * acknowledged, retry_cnt times (IBA 9.7.6.1.3) */
		if (qp->comp.retries++ >= qp->attr.retry_cnt) {
			fail_head(qp, IBV_WC_RETRY_EXC_ERR);
			return;
		}
		SV_STAT_INC(qp, ack_timeouts);
		sv_req_rewind(
			qp,
			qp->comp.acked_valid
				? sv_psn_add(qp->comp.acked, 1)
				: qp->sq.wqe[qp->sq.comp & (qp->sq.size - 1)]
					  .first_psn);
		qp->comp.deadline = now + ack_timeout(qp);
	} else if (qp->link.state == SV_LINK_UP) {
		/* slow, alive; over TCP, resent (ops->retransmit) */
		sv_link_retransmit(&qp->link);
		qp->comp.deadline = now + ack_timeout(qp);
	} else if (sv_link_setup_waits(&qp->link, now)) {
		/* IBA 9.7.6.1.3: the timer runs from when a packet was
		 * sent; ours still wait for our call to the peer's host */
		qp->comp.deadline = now + ack_timeout(qp);
	} else if (qp->comp.retries++ >= qp->attr.retry_cnt) {
		sv_dbg("qp %06x: ACK timeout with the link %s: retries "
		       "exhausted\n",
		       qp->qpx.qp_base.qp_num,
		       sv_link_state_names[qp->link.state]);
		fail_head(qp, IBV_WC_RETRY_EXC_ERR);
	} else {
		qp->comp.deadline = now + ack_timeout(qp);
	}
}
