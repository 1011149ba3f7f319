// SPDX-License-Identifier: MIT
/*
 * The RoCEv2 transport's way out: each record our requester publishes in
 * the tx ring, and our responder in rsp_tx, leaves as one packet per PSN
 * of its train (IBA 9.7.7: FIRST / MIDDLE / LAST or ONLY at the path
 * MTU), then is consumed: the engine resends from its WQEs what is lost.
 * The responder's ACK word leaves as an ACK or NAK packet whenever it
 * changed, once per flush: ACKs coalesce to the latest PSN (IBA
 * 9.7.5.1.1).  A UC link (IBA 9.8) sends its sends and writes with UC
 * opcodes and no AckReq, and never an ACK.  A flush queues its datagrams
 * and hands them to the kernel when it holds whole runs (sendmmsg,
 * sv_roce_out_slots).  Where
 * the kernel takes UDP GSO, a run of datagrams of one length (a train's
 * packets) is one message with UDP_SEGMENT: one trip through the stack
 * and the veth or NIC, cut into the same datagrams on the way out.  The
 * kernel gives the segments IPv4 IDs 0, 1, 2... (an unconnected socket
 * with DF sends ID 0; GSO counts up from it), so each datagram's ICRC is
 * made for its place in its run (docs/roce.md "Speed").
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "inject.h"
#include "roce_priv.h"

/* A control message that carries UDP_SEGMENT's size, aligned. */
union sv_gso_cmsg {
	char buf[CMSG_SPACE(sizeof(uint16_t))];
	struct cmsghdr h;
};

/* A send error that means "not now": the datagrams wait for retry_ns. */
static bool full(int err)
{
	return err == EAGAIN || err == ENOBUFS;
}

/* A GSO run's datagrams, bytes in all: the IPv4 total length is 16 bits */
#define GSO_MAX_BYTES 60000u

uint32_t sv_roce_out_slots(uint32_t mtu)
{
	/* a full-MTU datagram: BTH, the payload, the ICRC (a MIDDLE) */
	uint32_t run = GSO_MAX_BYTES / (SV_ROCE_BTH + mtu + SV_ROCE_ICRC), runs;

	if (run > SV_ROCE_GSO_SEGS)
		run = SV_ROCE_GSO_SEGS; /* mtu is at most 4096: run >= 14 */
	runs = (SV_ROCE_BATCH + run - 1) / run;
	if (runs < SV_ROCE_OUT_RUNS)
		runs = SV_ROCE_OUT_RUNS;
	return run * runs > SV_ROCE_OUT_MAX ? SV_ROCE_OUT_MAX : run * runs;
}

/* The message of run [i, j) of the queue in m: one datagram, or a
 * super-packet of j - i that the kernel cuts at olen[i] (UDP_SEGMENT).
 * A run's datagrams lie back to back in obuf, one piece for the kernel
 * to copy: a piece a datagram (about 1 KiB each, in slots of oslot)
 * gave 5-8 % less bandwidth (docs/roce.md "Speed"). */
static void run_msg(struct sv_roce *r, uint32_t i, uint32_t j,
		    struct mmsghdr *m, struct iovec *v, union sv_gso_cmsg *c)
{
	size_t len = 0;

	for (uint32_t k = i; k < j; k++)
		len += r->olen[k];
	v->iov_base = r->obuf + r->ooff[i];
	v->iov_len = len;
	m->msg_hdr = (struct msghdr){
		.msg_name = &r->dst.sa,
		.msg_namelen = sv_sockaddr_len(&r->dst),
		.msg_iov = v,
		.msg_iovlen = 1,
	};
	if (j - i > 1) {
		struct cmsghdr *h = &c->h;

		h->cmsg_level = SOL_UDP;
		h->cmsg_type = UDP_SEGMENT;
		h->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		*(uint16_t *)CMSG_DATA(h) = (uint16_t)r->olen[i];
		m->msg_hdr.msg_control = c->buf;
		m->msg_hdr.msg_controllen = sizeof(c->buf);
	}
}

/* The queue's datagrams again with the ICRC of IPv4 ID 0, to be sent
 * one by one (no GSO run). */
static void unrun(struct sv_roce *r)
{
	for (uint32_t k = r->ohead; k < r->ocount; k++)
		if (r->oseg[k]) {
			r->ip.ip_id = 0;
			sv_roce_reseal(r->obuf + r->ooff[k], r->olen[k],
				       &r->ip);
			r->oseg[k] = 0;
		}
}

/* The kernel refused a super-packet (a device or path that cannot cut
 * it): datagrams one by one, and GSO stays off for the link. */
static void gso_refused(struct sv_roce *r, int err)
{
	sv_dbg("qp %06x: roce: UDP GSO refused (%s): datagrams one by one\n",
	       r->my_qpn, strerror(err));
	r->gso = false;
	unrun(r);
}

/* SOFTVERBS_FAULTS reorder_out, once per queue: each datagram leaves
 * after the next one of the queue with probability P (the two change
 * places in the queue, not in obuf; one moved is not moved again; the
 * queue's last has no next).  A queue where one moves leaves one
 * datagram a message: a GSO run's IPv4 IDs, and so its ICRCs, follow
 * its order. */
static void reorder_out(struct sv_roce *r)
{
	r->oreordered = true;
	for (uint32_t k = r->ohead; k + 1 < r->ocount; k++) {
		uint32_t off = r->ooff[k], n = r->olen[k];

		if (!sv_inject_hit(sv_inject.reorder_out, sv_inject.seed,
				   SV_FAULT_REORDER_OUT, r->my_qpn, r->oseq++,
				   0))
			continue;
		unrun(r); /* (again: nothing left to reseal) */
		r->ooff[k] = r->ooff[k + 1];
		r->olen[k] = r->olen[k + 1];
		r->ooff[k + 1] = off;
		r->olen[k + 1] = n;
		roce_count(r, fault_reorders_out);
		k++;
	}
}

bool sv_roce_push(struct sv_roce *r)
{
	struct mmsghdr m[SV_ROCE_BATCH];
	struct iovec v[SV_ROCE_BATCH];
	union sv_gso_cmsg c[SV_ROCE_BATCH];
	uint32_t first[SV_ROCE_BATCH + 1];

	if (SV_FAULT_ON(reorder_out) && !r->oreordered)
		reorder_out(r);
	while (r->ohead < r->ocount) {
		uint32_t n = 0, i = r->ohead;
		int s;

		/* one message a run, SV_ROCE_BATCH a call */
		while (i < r->ocount && n < SV_ROCE_BATCH) {
			uint32_t j = i + 1;

			while (j < r->ocount && r->oseg[j])
				j++;
			first[n] = i;
			run_msg(r, i, j, &m[n], &v[n], &c[n]);
			n++;
			i = j;
		}
		first[n] = i;
		s = sendmmsg(r->tx_fd, m, n, MSG_DONTWAIT);
		if (s < 0 && errno == EINTR)
			continue;
		for (int k = 0; k < s; k++)
			if (m[k].msg_hdr.msg_controllen)
				roce_count(r, roce_gso_sends);
		if (s < 0 && full(errno)) {
			r->retry_ns = sv_now_ns() + SV_ROCE_RETRY_NS;
			return false;
		}
		if (s < 0 && m[0].msg_hdr.msg_controllen &&
		    (errno == EIO || errno == EINVAL || errno == EMSGSIZE)) {
			gso_refused(r, errno);
			continue;
		}
		if (s < 0) { /* EMSGSIZE (a path MTU below the QP's),
			      * unreachable: lost, as on a wire; the
			      * engine's timer resends */
			sv_dbg("qp %06x: roce: send: %s\n", r->my_qpn,
			       strerror(errno));
			s = 1;
		}
		r->ohead = first[s];
	}
	r->ohead = r->ocount = r->oend = 0;
	r->oreordered = false;
	return true;
}

/* The place in the queue's last run of p's datagram queued now, 0 if
 * it starts a run: a run's datagrams but its last have one length, lie
 * back to back in obuf, and fit one UDP datagram of at most
 * UDP_MAX_SEGMENTS. */
static uint8_t run_place(const struct sv_roce *r, const struct sv_roce_pkt *p)
{
	uint32_t i = r->ocount, k, seg, len;

	if (!r->gso || i == r->ohead ||
	    r->ooff[i - 1] + r->olen[i - 1] != r->oend)
		return 0;
	k = r->oseg[i - 1] + 1u;
	seg = r->olen[i - k];
	len = sv_roce_pkt_len(p);
	if (!len || r->olen[i - 1] != seg || len > seg ||
	    k >= SV_ROCE_GSO_SEGS || (k + 1) * seg > GSO_MAX_BYTES)
		return 0;
	return (uint8_t)k;
}

bool sv_roce_send(struct sv_roce *r, const struct sv_roce_pkt *p)
{
	int n;

	if (r->ocount >= r->omax && !sv_roce_push(r))
		return false;
	r->oseg[r->ocount] = run_place(r, p);
	r->ip.ip_id = r->oseg[r->ocount]; /* what the kernel will write */
	/* (room: each datagram queued took oslot bytes at most) */
	n = sv_roce_build(r->obuf + r->oend, r->oslot, p, &r->ip);
	if (n < 0) { /* our own engine's record: never, but not a crash */
		sv_dbg("qp %06x: roce: cannot build opcode %#x len %u\n",
		       r->my_qpn, p->opcode, p->len);
		return true;
	}
	r->ooff[r->ocount] = r->oend;
	r->olen[r->ocount++] = (uint32_t)n;
	r->oend += (uint32_t)n;
	return true;
}

/* AETH syndrome (IBA 9.7.5.2.1) of an ACK word's. */
static uint8_t aeth_of(uint64_t ack)
{
	switch (SV_ACK_SYN(ack)) {
	case SV_ACK:
		return 0x1f; /* ACK, credits not limited */
	case SV_NAK_RNR:
		return (uint8_t)(0x20 | (SV_ACK_TIMER(ack) & 0x1f));
	case SV_NAK_SEQ:
		return 0x60;
	case SV_NAK_INV_REQ:
		return 0x61;
	case SV_NAK_REM_ACCESS:
		return 0x62;
	default:
		return 0x63; /* remote operational error */
	}
}

bool sv_roce_send_ack(struct sv_link *l, uint64_t ack)
{
	struct sv_roce *r = sv_roce_of(l);
	struct sv_roce_pkt p = {.opcode = r->tp | SV_IB_ACK,
				.pkey = 0xffff,
				.dqpn = r->peer_qpn,
				.psn = SV_ACK_PSN(ack),
				.syndrome = aeth_of(ack),
				.msn = r->msn & SV_PSN_MASK};

	if (!sv_roce_send(r, &p))
		return false;
	roce_count(r, roce_acks);
	return true;
}

/* The IBA opcode of packet (first, last) of a message of op. */
static uint8_t ib_opcode(uint8_t op, bool first, bool last, bool imm, bool inv)
{
	uint8_t base = op == SV_OP_WRITE       ? SV_IB_WRITE_FIRST
		       : op == SV_OP_READ_RESP ? SV_IB_READ_RESP_FIRST
					       : SV_IB_SEND_FIRST;

	if (op == SV_OP_READ_RESP)
		return first && last ? SV_IB_READ_RESP_ONLY
		       : first	     ? base
		       : last	     ? base + 2
				     : base + 1;
	if (last && inv) /* SEND with Invalidate: its IETH */
		return first ? SV_IB_SEND_ONLY_INV : SV_IB_SEND_LAST_INV;
	if (first && last)
		return (uint8_t)(base + 4 + imm);
	if (first)
		return base;
	return last ? (uint8_t)(base + 2 + imm) : (uint8_t)(base + 1);
}

/* The packets of a one-PSN request or answer: a read request, an atomic
 * or its answer (srqn: an XRC request's XRCETH).  false: the socket is
 * full. */
static bool put_single(struct sv_roce *r, const struct sv_pkt *h,
		       const uint8_t *ext, uint32_t srqn)
{
	struct sv_roce_pkt p = {.pkey = 0xffff,
				.dqpn = r->peer_qpn,
				.psn = h->psn,
				.srqn = srqn,
				.ack_req = true};
	struct sv_atometh a;
	struct sv_atomack k;

	switch (h->opcode) {
	case SV_OP_READ_REQ:
		p.opcode = r->tp | SV_IB_READ_REQ;
		memcpy(&p.reth, ext, sizeof(p.reth));
		break;
	case SV_OP_CMP_SWAP:
	case SV_OP_FETCH_ADD:
		p.opcode =
			r->tp | (h->opcode == SV_OP_CMP_SWAP ? SV_IB_CMP_SWAP
							     : SV_IB_FETCH_ADD);
		memcpy(&a, ext, sizeof(a));
		p.atomic = a;
		break;
	default: /* SV_OP_ATOMIC_RESP */
		memcpy(&k, ext, sizeof(k));
		p.opcode = r->tp | SV_IB_ATOMIC_ACK;
		p.ack_req = false;
		p.syndrome = 0x1f;
		p.msn = r->msn & SV_PSN_MASK;
		p.orig = k.orig;
		break;
	}
	return sv_roce_send(r, &p);
}

/* The packets of a train (sends, writes, read answers) from packet
 * *done on (srqn: an XRC request's XRCETH): true when all went (*done
 * back to 0). */
static bool put_train(struct sv_roce *r, const struct sv_pkt *h,
		      const uint8_t *body, uint32_t srqn, uint32_t *done)
{
	const struct sv_opcode_info *o = sv_opcode(h->opcode);
	uint32_t ext = sv_ext_len(o, h->seg), mtu = r->mtu;
	const uint8_t *data = body + ext;
	bool imm = h->flags & SV_PKT_IMM;
	bool inv = h->opcode == SV_OP_SEND && (h->flags & SV_PKT_INV);

	if (h->npsn == 0 || (uint64_t)h->len > (uint64_t)h->npsn * mtu ||
	    (h->npsn > 1 && h->len <= (h->npsn - 1) * mtu))
		return true; /* not one we can cut: none of ours */
	for (uint32_t j = *done; j < h->npsn; j++) {
		bool first = (h->seg & SV_SEG_FIRST) && j == 0;
		bool last = (h->seg & SV_SEG_LAST) && j == h->npsn - 1;
		uint32_t off = j * mtu;
		struct sv_roce_pkt p = {
			.opcode = (uint8_t)(r->tp | ib_opcode(h->opcode, first,
							      last, imm, inv)),
			.pkey = 0xffff,
			.dqpn = r->peer_qpn,
			.psn = sv_psn_add(h->psn, j),
			.srqn = srqn,
			.payload = data + off,
			.len = h->len - off < mtu ? h->len - off : mtu,
		};

		if (h->opcode == SV_OP_READ_RESP) {
			p.syndrome = 0x1f; /* AETH on FIRST, LAST, ONLY */
			p.msn = r->msn & SV_PSN_MASK;
		} else {
			/* UC: no ACKs, AckReq 0 (IBA 9.2.3) */
			p.ack_req = r->tp != SV_IB_UC && j == h->npsn - 1;
			p.se = last && (h->flags & SV_PKT_SOLICITED);
			p.imm_be = h->imm;
			p.inv_rkey = h->imm; /* IETH: the key, as posted */
		}
		if (first && h->opcode == SV_OP_WRITE)
			memcpy(&p.reth, body, sizeof(p.reth));
		if (!sv_roce_send(r, &p)) {
			*done = j;
			return false;
		}
	}
	*done = 0;
	return true;
}

/* Sends the records of ring g from its head while the socket takes
 * them; each is consumed once all its packets went. */
static void put_ring(struct sv_link *l, struct sv_ring *g, uint32_t *done)
{
	struct sv_roce *r = sv_roce_of(l);
	const uint8_t *body;
	struct sv_pkt h;
	int got;

	while ((got = sv_ring_peek(g, &h, &body)) > 0) {
		uint32_t srqn = 0;
		bool sent, xrc = h.flags & SV_PKT_XRC;

		if (xrc && r->tp == SV_IB_XRC &&
		    h.rec_len >= sizeof(h) + sizeof(struct sv_xrceth)) {
			struct sv_xrceth x; /* first, before the extension */

			memcpy(&x, body, sizeof(x));
			srqn = x.srqn & SV_PSN_MASK;
			body += sizeof(x);
		} else if (xrc) {
			srqn = UINT32_MAX; /* none of ours */
		}
		if (srqn == UINT32_MAX || (h.flags & SV_PKT_PLACED) ||
		    !sv_opcode(h.opcode) || h.opcode == SV_OP_WRITE_NOTE ||
		    (r->tp == SV_IB_UC && h.opcode != SV_OP_SEND &&
		     h.opcode != SV_OP_WRITE))
			sent = true; /* nothing we speak: not ours to make */
		else if (h.opcode == SV_OP_SEND || h.opcode == SV_OP_WRITE ||
			 h.opcode == SV_OP_READ_RESP)
			sent = put_train(r, &h, body, srqn, done);
		else
			sent = put_single(r, &h, body, srqn);
		if (!sent)
			return;
		sv_ring_consume(g);
		if (g == &l->tx)
			r->ack_alone = false; /* a reply may come: ACKs wait */
		/* room freed: the engine may have more to put there (a
		 * read's answer longer than the ring), with no arrival to
		 * run it: the loop looks again at once (next_ns) */
		r->more = true;
	}
	if (got < 0)
		sv_dbg("qp %06x: roce: bad record in our own ring\n",
		       r->my_qpn);
}

/* Datagrams of ours go in this flush: queued, or in our rings. */
static bool with_others(struct sv_link *l, const struct sv_roce *r)
{
	return r->ocount > r->ohead || sv_ring_ready(&l->tx) ||
	       sv_ring_ready(&l->rsp_tx);
}

/*
 * Whether our new ACK, a plain one alone in this flush, waits for the
 * reply a ping-pong's app posts at once: while the app's polls run the
 * link (lazy; engine/drive.c sets it only where a late ACK cannot make
 * the peer time out).  It then leaves with that reply, one sendmmsg a
 * message instead of two (IBA 9.7.5.1.1: a responder may coalesce ACKs);
 * the TCP wire holds its state so (tcp/mirror.c state_may_wait).  At
 * most SV_ROCE_ACK_DELAY_NS: the next flush after sends it, the app's
 * next poll or, when the polls stop, the progress thread (sv_roce_owed).
 * A NAK, an RNR NAK, or an ACK with anything else to send never waits.
 */
static bool ack_waits(struct sv_link *l, struct sv_roce *r, uint64_t ack)
{
	uint64_t now;

	if (!r->lazy || r->ack_alone || SV_ACK_SYN(ack) != SV_ACK ||
	    r->retry_ns || with_others(l, r))
		return false;
	now = sv_now_ns();
	if (!r->ack_owed_ns)
		r->ack_owed_ns = now ? now : 1; /* (0: none) */
	/* sv_ns_since: a stamp past now (1 at boot) is not ~2^64 ago */
	return sv_ns_since(now, r->ack_owed_ns) < SV_ROCE_ACK_DELAY_NS;
}

bool sv_roce_owed(const struct sv_link *l, uint64_t now)
{
	const struct sv_roce *r = sv_roce_of(l);

	/* (now UINT64_MAX: whatever waits) */
	return r && r->ack_owed_ns &&
	       sv_ns_since(now, r->ack_owed_ns) >= SV_ROCE_ACK_DELAY_NS;
}

/* Our ACK word out when it changed and need not wait (ack_waits); if
 * the queue is full and the socket took none of it, at the next flush. */
static void ack_out(struct sv_link *l, struct sv_roce *r)
{
	uint64_t ack =
		atomic_load_explicit(&l->rx.hdr->ack, memory_order_acquire);
	bool joined;

	if (r->tp == SV_IB_UC || SV_ACK_SYN(ack) > SV_NAK_REM_OP ||
	    (r->ack_sent_valid && ack == r->ack_sent) || /* UC: none */
	    ack_waits(l, r, ack))
		return;
	/* it waited, and goes with datagrams of ours (before it is one) */
	joined = r->ack_owed_ns && with_others(l, r);
	if (!sv_roce_answered_by_response(r, ack) && !sv_roce_send_ack(l, ack))
		return;
	if (joined)
		roce_count(r, roce_acks_joined);
	else if (r->ack_owed_ns)
		r->ack_alone = true; /* it waited for nothing */
	r->ack_sent = ack;
	r->ack_sent_valid = true;
	r->ack_owed_ns = 0;
}

void sv_roce_flush(struct sv_link *l)
{
	struct sv_roce *r = sv_roce_of(l);
	bool ack_last, after_rsp;

	if (!r || r->defer)
		return;
	if (r->retry_ns && sv_now_ns() < r->retry_ns)
		return;
	r->retry_ns = 0;
	if (!sv_roce_push(r))
		return; /* what waits goes first */
	/* the ACK first, where it frees the peer's requester soonest; after
	 * our requests where GSO sends them: the last of their run, one
	 * trip through the stack for both (an ACK is never longer).  Never
	 * before the answers to reads and atomics it comes after: a
	 * responder answers in PSN order (IBA 9.7.5.1), and a NAK for a
	 * write that overtook the answer to the read before it failed that
	 * read at the peer */
	ack_last = r->gso && sv_ring_ready(&l->tx);
	after_rsp = sv_ring_ready(&l->rsp_tx);
	if (!ack_last && !after_rsp)
		ack_out(l, r);
	put_ring(l, &l->rsp_tx, &r->rsp_done);
	if (after_rsp && !ack_last && !r->retry_ns)
		ack_out(l, r);
	if (!r->retry_ns)
		put_ring(l, &l->tx, &r->tx_done);
	if (ack_last && !r->retry_ns)
		ack_out(l, r);
	sv_roce_push(r);
}
