// SPDX-License-Identifier: MIT
/*
 * SOFTVERBS_FAULTS at the responder (faults.c parses the spec, inject.h
 * decides each hit): a message refused as if no receive were posted
 * (rnr), a one-sided request refused as a bad key (access), and packets
 * lost on the wire (drop), each (PSN, attempt) decided once so the same
 * seed loses the same packets.  resp.c asks; what a loss means for the
 * protocol (NAK-seq, nothing) stays there.
 */
#include "resp.h"

#include "core.h"
#include "engine.h"
#include "inject.h"

/*
 * rnr: the message at the head is refused as if no receive were posted,
 * each attempt decided once and held for the RNR timer (the requester's
 * retry comes no sooner); then the next attempt.
 */
bool sv_resp_fault_rnr(struct sv_qp *qp, const struct sv_pkt *p)
{
	uint64_t now = sv_now_ns();

	if (qp->inject.rnr_until) {
		if (now < qp->inject.rnr_until)
			return true;
		qp->inject.rnr_try++;
	}
	if (sv_inject_hit(sv_inject.rnr, sv_inject.seed, SV_FAULT_RNR,
			  qp->inject.idx, p->psn, qp->inject.rnr_try)) {
		qp->inject.rnr_until =
			now + sv_rnr_timer_ns(qp->attr.min_rnr_timer);
		SV_STAT_INC(qp, fault_rnr);
		return true;
	}
	qp->inject.rnr_until = 0;
	qp->inject.rnr_try = 0;
	return false;
}

/* access: a one-sided request refused as a bad key. */
bool sv_resp_fault_access(struct sv_qp *qp, const struct sv_pkt *p)
{
	if (!sv_inject_hit(sv_inject.access, sv_inject.seed, SV_FAULT_ACCESS,
			   qp->inject.idx, p->psn, 0))
		return false;
	SV_STAT_INC(qp, fault_access);
	return true;
}

/*
 * drop inside a train: the j packets before the lost one arrived, and
 * are taken (a train is a run of packets, and the IBA loses one packet,
 * not a run).  The segment size is the train's own: every segment but
 * the last is one path MTU, so for npsn >= 2 it is the one power of two
 * m in [256, 4096] with (npsn - 1) m < len <= npsn m.  The payload bytes
 * of those j packets, or 0: the train is lost whole (a send the requester
 * placed, a request answered by a response, XRC, UC's message, or no
 * such m).
 */
static uint32_t cut_len(const struct sv_qp *qp, const struct sv_pkt *p,
			uint32_t j)
{
	const struct sv_opcode_info *o = sv_opcode(p->opcode);

	if (qp->qpx.qp_base.qp_type == IBV_QPT_UC || !o ||
	    !(o->mask & SV_M_PAYLOAD) || (o->mask & SV_M_RD_ATOMIC) ||
	    (p->flags & (SV_PKT_PLACED | SV_PKT_XRC)) || j == 0 || j >= p->npsn)
		return 0;
	for (uint64_t m = 256; m <= 4096; m <<= 1)
		if ((p->npsn - 1) * m < p->len && p->len <= p->npsn * m)
			return (uint32_t)(j * m);
	return 0;
}

enum sv_resp_loss sv_resp_fault_drop(struct sv_qp *qp, struct sv_pkt *p)
{
	uint32_t n, cut;

	if (p->psn != qp->inject.try_psn) { /* attempts count per PSN */
		qp->inject.try_psn = p->psn;
		qp->inject.try = 0;
	}
	/* a read request is one packet; its npsn are its response's */
	n = p->opcode == SV_OP_READ_REQ ? 1 : p->npsn;
	for (uint32_t j = 0; j < n; j++) {
		if (!sv_inject_hit(sv_inject.drop, sv_inject.seed,
				   SV_FAULT_DROP, qp->inject.idx,
				   sv_psn_add(p->psn, j), qp->inject.try))
			continue;
		qp->inject.try++;
		SV_STAT_INC(qp, fault_drops);
		qp->inject.drop_hash =
			(qp->inject.drop_hash ^
			 ((uint64_t)p->psn << 32 | qp->inject.try)) *
			0x100000001b3ull;
		sv_dbg("qp %06x: fault: drop psn %06x (try %u)\n",
		       qp->qpx.qp_base.qp_num, sv_psn_add(p->psn, j),
		       qp->inject.try);
		if ((cut = cut_len(qp, p, j))) {
			/* its attempts go on at the lost PSN, where the
			 * requester resends from */
			qp->inject.try_psn = sv_psn_add(p->psn, j);
			p->npsn = j;
			p->len = cut;
			p->seg &= (uint8_t)~SV_SEG_LAST;
			p->flags &= (uint8_t) ~(SV_PKT_IMM | SV_PKT_SOLICITED);
			return SV_LOSS_CUT;
		}
		return j == 0 && cut_len(qp, p, 1) ? SV_LOSS_FIRST
						   : SV_LOSS_ALL;
	}
	return SV_LOSS_NONE;
}
