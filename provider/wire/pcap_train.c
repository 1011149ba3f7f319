// SPDX-License-Identifier: MIT
/*
 * SOFTVERBS_PCAP's drawing of the engine's records as the IBA packets
 * they stand for (pcap.c's head comment says what a capture shows): a
 * train (wire.h) becomes its per-MTU packets with consecutive PSNs, an
 * ack word an ACKNOWLEDGE, a one-sided operation done in the peer's
 * memory its request and its response, a UD datagram a SEND with its
 * DETH.  Each packet is a struct ib_pkt that pcap.c's sv_pcap_emit frames
 * and appends; this file decides which packets there are.
 */
#include <string.h>

#include "objects.h"
#include "pcap.h"
#include "pcap_ib.h"

static uint8_t prefix(const struct sv_qp *qp)
{
	switch (qp->qpx.qp_base.qp_type) {
	case IBV_QPT_UC:
		return SV_IB_UC;
	case IBV_QPT_UD:
		return SV_IB_UD;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return SV_IB_XRC;
	default:
		return SV_IB_RC;
	}
}

/* The QPN a packet of this direction is for. */
static uint32_t dqpn(const struct sv_qp *qp, bool to_peer)
{
	return to_peer ? qp->attr.dest_qp_num : qp->qpx.qp_base.qp_num;
}

/* IBA 9.3.1: the opcode of a packet at position first/last of a message */
static uint8_t seg_op(uint8_t first, uint8_t middle, uint8_t last, uint8_t only,
		      bool f, bool l)
{
	return f && l ? only : f ? first : l ? last : middle;
}

/* The operations of one packet (READ request, atomics and their
 * answer, a write's note); false if h is none of them. */
static bool train_one(struct sv_qp *qp, struct ib_pkt *k,
		      const struct sv_pkt *h, const uint8_t *ext,
		      const struct sv_pcap_sg *sg, const struct sv_reth *note,
		      uint8_t pre, uint32_t off, uint32_t mtu)
{
	struct sv_reth reth;
	struct sv_atometh ae;
	struct sv_atomack aa;
	uint32_t total;

	switch (h->opcode) {
	case SV_OP_READ_REQ:
		memcpy(&reth, ext, sizeof(reth));
		k->opcode = pre | SV_IB_READ_REQ;
		k->reth = &reth;
		k->ack_req = true;
		k->psn = h->psn + off;
		sv_pcap_emit(k);
		return true;
	case SV_OP_CMP_SWAP:
	case SV_OP_FETCH_ADD:
		memcpy(&ae, ext, sizeof(ae));
		k->opcode =
			pre | (h->opcode == SV_OP_CMP_SWAP ? SV_IB_CMP_SWAP
							   : SV_IB_FETCH_ADD);
		k->atometh = &ae;
		k->ack_req = true;
		k->psn = h->psn + off;
		sv_pcap_emit(k);
		return true;
	case SV_OP_ATOMIC_RESP:
		memcpy(&aa, ext, sizeof(aa));
		k->opcode = pre | SV_IB_ATOMIC_ACK;
		k->aeth = true;
		k->syndrome = 0x1f;
		k->msn = ++qp->pcap.msn;
		k->atomack = &aa;
		k->psn = h->psn + off;
		sv_pcap_emit(k);
		return true;
	case SV_OP_WRITE_NOTE:
		/* the data went straight into the peer's memory (req.c):
		 * only the last packet of the write travels, with its
		 * immediate; RETH if it is the only one */
		reth.va = note ? note->va : 0;
		reth.rkey = note ? note->rkey : 0;
		reth.dma_len = h->msg_len;
		total = h->msg_len ? (h->msg_len - 1) % mtu + 1 : 0;
		/* the bytes: in the gather list (ours), else not at hand */
		k->sg = sg;
		k->sg_off = h->msg_len - total;
		k->opcode = pre | (h->msg_len <= mtu ? SV_IB_WRITE_ONLY_IMM
						     : SV_IB_WRITE_LAST_IMM);
		k->reth = h->msg_len <= mtu ? &reth : NULL;
		k->imm = true;
		k->imm_be = h->imm;
		k->se = (h->flags & SV_PKT_SOLICITED) != 0;
		k->ack_req = pre != SV_IB_UC;
		k->len = total;
		k->psn = h->psn + off;
		sv_pcap_emit(k);
		return true;
	default:
		return false;
	}
}

/* SEND, WRITE, READ_RESP: the packets of a train, one per MTU. */
static void train_segments(struct sv_qp *qp, struct ib_pkt *k,
			   const struct sv_pkt *h, const uint8_t *ext,
			   const uint8_t *data, const struct sv_pcap_sg *sg,
			   uint8_t pre, uint32_t off, uint32_t mtu)
{
	struct sv_reth reth;
	uint32_t total, npkt;

	total = (h->flags & SV_PKT_PLACED) ? h->msg_len : h->len;
	if (h->flags & SV_PKT_PLACED) {
		/* in the receive buffer (single copy): from the sender's
		 * gather list, or the receiver's buffer (sg), if at hand */
		data = NULL;
		k->sg = sg;
	}
	npkt = h->npsn ? h->npsn : 1;
	if (h->opcode == SV_OP_WRITE && (h->seg & SV_SEG_FIRST))
		memcpy(&reth, ext, sizeof(reth));
	for (uint32_t i = 0; i < npkt; i++) {
		bool f = i == 0 && (h->seg & SV_SEG_FIRST);
		bool l = i == npkt - 1 && (h->seg & SV_SEG_LAST);
		uint32_t at = i * mtu, len = total > at ? total - at : 0;

		if (len > mtu)
			len = mtu;
		k->len = len;
		k->data = data ? data + at : NULL;
		k->sg_off = at;
		k->psn = h->psn + i + off;
		k->reth = NULL;
		k->aeth = false;
		k->imm = l && (h->flags & SV_PKT_IMM);
		k->imm_be = h->imm;
		k->inv = l && (h->flags & SV_PKT_INV);
		k->inv_rkey = h->imm;
		k->se = l && (h->flags & SV_PKT_SOLICITED);
		k->ack_req = l && pre != SV_IB_UC;
		switch (h->opcode) {
		case SV_OP_SEND:
			k->opcode =
				pre |
				(k->imm	  ? seg_op(0, 0, SV_IB_SEND_LAST_IMM,
						   SV_IB_SEND_ONLY_IMM, f, l)
				 : k->inv ? seg_op(0, 0, SV_IB_SEND_LAST_INV,
						   SV_IB_SEND_ONLY_INV, f, l)
					  : seg_op(SV_IB_SEND_FIRST,
						   SV_IB_SEND_MIDDLE,
						   SV_IB_SEND_LAST,
						   SV_IB_SEND_ONLY, f, l));
			break;
		case SV_OP_WRITE:
			k->opcode = pre |
				    (k->imm ? seg_op(0, 0, SV_IB_WRITE_LAST_IMM,
						     SV_IB_WRITE_ONLY_IMM, f, l)
					    : seg_op(SV_IB_WRITE_FIRST,
						     SV_IB_WRITE_MIDDLE,
						     SV_IB_WRITE_LAST,
						     SV_IB_WRITE_ONLY, f, l));
			k->reth = f ? &reth : NULL;
			break;
		case SV_OP_READ_RESP:
			k->opcode = pre | seg_op(SV_IB_READ_RESP_FIRST,
						 SV_IB_READ_RESP_MIDDLE,
						 SV_IB_READ_RESP_LAST,
						 SV_IB_READ_RESP_ONLY, f, l);
			k->ack_req = false;
			/* IBA 9.3.5: AETH on FIRST, LAST and ONLY */
			k->aeth = f || l;
			k->syndrome = 0x1f;
			k->msn = l ? ++qp->pcap.msn : qp->pcap.msn;
			break;
		default:
			return; /* not a packet we draw */
		}
		sv_pcap_emit(k);
	}
}

/* sv_pcap_train; note: the RETH of a write whose note this is (ours) */
static void train(struct sv_qp *qp, bool tx, const struct sv_pkt *h,
		  const uint8_t *ext, const uint8_t *data,
		  const struct sv_pcap_sg *sg, const struct sv_reth *note)
{
	uint8_t pre = prefix(qp);
	/* requests travel to the responder; responses back */
	bool req =
		h->opcode != SV_OP_READ_RESP && h->opcode != SV_OP_ATOMIC_RESP;
	bool mine = tx == req; /* the requester's QP shows shifted PSNs */
	uint32_t off = mine ? qp->pcap.psn_off : 0;
	struct ib_pkt k = {.a = &qp->pcap.addr, .tx = tx, .dqpn = dqpn(qp, tx)};
	uint32_t mtu = qp->mtu ? qp->mtu : 4096;
	const struct sv_opcode_info *o = sv_opcode(h->opcode);
	bool raw = data == ext; /* a record as received: check its lengths */
	uint32_t room = h->rec_len > sizeof(*h) ? h->rec_len - sizeof(*h) : 0;
	struct sv_pkt c;

	if (!o)
		return;
	if (sg && !sg->n)
		sg = NULL; /* none at hand */
	if (raw) {
		uint32_t x =
			h->flags & SV_PKT_XRC ? sizeof(struct sv_xrceth) : 0;

		if (x + sv_ext_len(o, h->seg) > room)
			return; /* the responder refuses it: not a packet */
		c = *h;
		room -= x + sv_ext_len(o, h->seg);
		if (c.len > room)
			c.len = room;
		h = &c;
		data = ext + x + sv_ext_len(o, h->seg);
	}
	if (h->flags & SV_PKT_XRC) {
		struct sv_xrceth x;

		memcpy(&x, ext, sizeof(x));
		ext += sizeof(x);
		k.xrc = true;
		k.xrc_srqn = x.srqn;
	}
	if (!train_one(qp, &k, h, ext, sg, note, pre, off, mtu))
		train_segments(qp, &k, h, ext, data, sg, pre, off, mtu);
}

void sv_pcap_train(struct sv_qp *qp, bool tx, const struct sv_pkt *h,
		   const uint8_t *ext, const uint8_t *data,
		   const struct sv_pcap_sg *sg)
{
	train(qp, tx, h, ext, data, sg, NULL);
}

void sv_pcap_req(struct sv_qp *qp, const struct sv_swqe *w,
		 const struct sv_pkt *h, const uint8_t *ext,
		 const uint8_t *data)
{
	struct sv_reth note = {.va = w->raddr, .rkey = w->rkey};
	struct ibv_sge one;
	struct sv_pcap_sg sg = {.sge = &one, .n = 1};

	/* a placed send's or a note's bytes are the WQE's: inline, or
	 * its SGEs, made pointers by the gather that placed them */
	if (w->inl) {
		one.addr =
			(uintptr_t)(qp->sq.inline_buf +
				    (size_t)(w - qp->sq.wqe) * qp->max_inline);
		one.length = w->length;
	} else if (w->mapped) {
		sg.sge = sv_swqe_sge(qp, w);
		sg.n = w->num_sge;
	} else {
		sg.n = 0;
	}
	train(qp, true, h, ext, data, &sg, &note);
}

void sv_pcap_ack(struct sv_qp *qp, bool tx, uint64_t ack)
{
	uint32_t syn = SV_ACK_SYN(ack);
	struct ib_pkt k = {.a = &qp->pcap.addr,
			   .tx = tx,
			   .opcode = prefix(qp) | SV_IB_ACK,
			   .dqpn = dqpn(qp, tx),
			   .aeth = true};

	/* IBA 9.7.5.2: 0x1f ACK (no credits), 0x20|timer RNR NAK,
	 * 0x60|code NAK */
	switch (syn) {
	case SV_ACK:
		k.syndrome = 0x1f;
		k.msn = ++qp->pcap.msn;
		break;
	case SV_NAK_RNR:
		k.syndrome = 0x20 | (SV_ACK_TIMER(ack) & 0x1f);
		break;
	case SV_NAK_SEQ:
		k.syndrome = 0x60;
		break;
	case SV_NAK_INV_REQ:
		k.syndrome = 0x61;
		break;
	case SV_NAK_REM_ACCESS:
		k.syndrome = 0x62;
		break;
	case SV_NAK_REM_OP:
		k.syndrome = 0x63;
		break;
	default:
		return; /* not a word a responder writes */
	}
	if (syn != SV_ACK)
		k.msn = qp->pcap.msn;
	/* the requester's process shows its PSNs shifted (direct ops) */
	k.psn = SV_ACK_PSN(ack) + (tx ? 0 : qp->pcap.psn_off);
	sv_pcap_emit(&k);
}

void sv_pcap_direct(struct sv_qp *qp, const struct sv_swqe *w,
		    const uint8_t *data, uint32_t npsn_shown)
{
	const struct sv_opcode_info *o = &sv_opcodes[w->op];
	uint32_t mtu = qp->mtu ? qp->mtu : 4096;
	uint32_t n = w->length ? (w->length + mtu - 1) / mtu : 1;
	uint32_t base = sv_psn_add(qp->req.psn, qp->pcap.psn_off);
	struct sv_pkt h = {.psn = base, .npsn = n, .msg_len = w->length};
	uint8_t ext[sizeof(struct sv_atometh)];
	struct sv_reth r = {
		.va = w->raddr, .rkey = w->rkey, .dma_len = w->length};
	struct sv_atomack aa = {0};

	if (o->mask & SV_M_ATOMIC) {
		struct sv_atometh a = {.va = w->raddr,
				       .rkey = w->rkey,
				       .swap_add = w->swap_add,
				       .compare = w->compare};

		h.opcode = w->op;
		h.seg = SV_SEG_ONLY;
		h.npsn = 1;
		memcpy(ext, &a, sizeof(a));
		{
			uint32_t keep = qp->pcap.psn_off;

			qp->pcap.psn_off = 0;
			train(qp, true, &h, ext, NULL, NULL, NULL);
			if (data)
				memcpy(&aa.orig, data, 8);
			h.opcode = SV_OP_ATOMIC_RESP;
			memcpy(ext, &aa, sizeof(aa));
			train(qp, false, &h, ext, NULL, NULL, NULL);
			qp->pcap.psn_off = keep + 1;
		}
		return;
	}
	{
		uint32_t keep = qp->pcap.psn_off;

		qp->pcap.psn_off = 0;
		memcpy(ext, &r, sizeof(r));
		if (w->op == SV_OP_READ_REQ) {
			h.opcode = SV_OP_READ_REQ;
			h.seg = SV_SEG_ONLY;
			train(qp, true, &h, ext, NULL, NULL, NULL);
			h.opcode = SV_OP_READ_RESP;
			h.len = w->length;
			train(qp, false, &h, NULL, data, NULL, NULL);
			qp->pcap.psn_off = keep + n;
			return;
		}
		/* a write: its packets, then the peer's ACK of the last;
		 * with immediate the last packet is the note's (req.c) */
		h.opcode = SV_OP_WRITE;
		h.npsn = npsn_shown;
		h.seg = SV_SEG_FIRST | (npsn_shown == n ? SV_SEG_LAST : 0);
		h.len = npsn_shown == n ? w->length : npsn_shown * mtu;
		if (npsn_shown)
			train(qp, true, &h, ext, data, NULL, NULL);
		if (npsn_shown == n)
			sv_pcap_ack(qp, false,
				    sv_ack_word(base + n - 1, SV_ACK, 0, 0));
		qp->pcap.psn_off = keep + npsn_shown;
	}
}

void sv_pcap_ud(struct sv_qp *qp, bool tx, const struct sv_ud_hdr *u,
		const uint8_t *sgid, const uint8_t *dgid, const uint8_t *data)
{
	static const uint8_t lo[16] = {0, 0, 0,	   0,	 0,   0, 0, 0,
				       0, 0, 0xff, 0xff, 127, 0, 0, 1};
	struct sv_pcap_addr a;
	struct ib_pkt k = {.a = &a, .tx = true, .deth = true};
	uint32_t h;

	/* the GRH is the IP header: the AH's GIDs, else this host */
	memcpy(a.src, sgid ? sgid : lo, 16);
	memcpy(a.dst, dgid ? dgid : lo, 16);
	h = u->src_qpn * 0x9e3779b1u ^ u->dst_qpn;
	a.sport = (uint16_t)(0xc000 | (h >> 18));
	k.opcode = SV_IB_UD | (u->flags & SV_UD_IMM ? SV_IB_SEND_ONLY_IMM
						    : SV_IB_SEND_ONLY);
	k.se = (u->flags & SV_UD_SOLICITED) != 0;
	k.dqpn = u->dst_qpn;
	/* UD's PSNs mean nothing to the receiver: ours count sends */
	k.psn = tx ? qp->pcap.psn_off++ & SV_PSN_MASK : 0;
	k.qkey = u->qkey;
	k.src_qpn = u->src_qpn;
	k.imm = (u->flags & SV_UD_IMM) != 0;
	k.imm_be = u->imm;
	k.data = data;
	k.len = u->len;
	sv_pcap_emit(&k);
}
