// SPDX-License-Identifier: MIT
/*
 * What the responder tells the requester (resp.c decides when): the ACK
 * word it publishes, ACK or NAK (a NAK's word is new each time, its seq,
 * so a repeated one is seen), with the rules of IBA 9.7.5 that keep a
 * NAK-seq from being lost to a later ACK of the same run, and the RNR NAK
 * of a lossy link, which drops what it refuses.
 */
#include "resp.h"

#include "core.h"
#include "engine.h"
#include "pcap.h"
#include "transport.h"

/* A NAK of kind syn at psn, a new word (its seq), with its counters.
 * It ends a suspicion of a new round (check_psn): it told the requester
 * what we expect. */
void sv_resp_nak(struct sv_qp *qp, uint32_t psn, enum sv_syndrome syn)
{
	uint64_t a = sv_ack_word(psn, syn, qp->attr.min_rnr_timer,
				 ++qp->resp.nak_seq);

	qp->resp.seq_suspect = false;

	if (__builtin_expect(sv_pcap_on, 0))
		sv_pcap_ack(qp, true, a);
	sv_stat_add(qp, tx_pkts, 1);
	if (syn == SV_NAK_SEQ)
		sv_stat_add(qp, seq_nak_sent, 1);
	else if (syn == SV_NAK_RNR)
		sv_stat_add(qp, rnr_nak_sent, 1);
	sv_link_ack_put(&qp->link, a);
}

/* Acknowledges everything up to the PSN before the one we expect. */
void sv_resp_ack_last(struct sv_qp *qp)
{
	uint64_t a = sv_ack_word(sv_psn_add(qp->resp.psn, SV_PSN_MASK), SV_ACK,
				 0, qp->resp.nak_seq);

	if (__builtin_expect(sv_pcap_on, 0))
		sv_pcap_ack(qp, true, a);
	sv_stat_add(qp, tx_pkts, 1);
	sv_link_ack_set(&qp->link, a);
}

/*
 * A train cut by a drop (resp_inject.c) was taken up to the lost packet (none
 * when the first was lost).  If packets came after it, the first of them
 * was out of sequence: one NAK-seq for the lost PSN, and the rest of the
 * train counts as discarded after it (check_psn).  If the last packet was
 * the lost one, what was taken is acknowledged (the caller's ACK), and
 * the requester's timer resends the rest.
 */
void sv_resp_cut_answer(struct sv_qp *qp, uint32_t psn, uint32_t npsn)
{
	if (sv_psn_diff(qp->resp.psn, sv_psn_add(psn, npsn - 1)) >= 0)
		return;
	qp->resp.seq_naked = true;
	qp->resp.nak_from = sv_psn_add(psn, npsn - 1);
	sv_resp_nak(qp, qp->resp.psn, SV_NAK_SEQ);
}

/*
 * The gap a NAK-seq named was filled in the same run, by a packet that
 * came late (reordered, not lost), while packets after it had been
 * discarded: the NAK, not sent yet, would become the ACK of the packet
 * that filled it, and the requester would wait for its ACK timer to send
 * the discarded ones again.  It is told at once, with a NAK-seq at the
 * PSN we now expect (as a responder whose NAK had left before the late
 * packet came would tell it with its next NAK).
 */
void sv_resp_refill_nak(struct sv_qp *qp)
{
	bool nak_new = qp->resp.seq_nak_new;

	qp->resp.seq_nak_new = false;
	/* only a NAK written in this run: one that left already told the
	 * requester, whose resend may be on its way (a NAK for that, rxe's
	 * requester took as the end of its retry and stopped) */
	if (!nak_new || !qp->resp.seq_dropped)
		return;
	if (sv_psn_diff(qp->resp.nak_from, qp->resp.psn) < 0) {
		qp->resp.seq_dropped = false; /* all taken since */
		return;
	}
	if (qp->resp.seq_naked)
		return; /* a NAK-seq at this PSN stands */
	qp->resp.seq_naked = true;
	sv_resp_nak(qp, qp->resp.psn, SV_NAK_SEQ);
}

/*
 * No receive on a lossy link (RoCE): as IBA 9.7.5.2.8 has it, the
 * packet is dropped and NAKed for RNR, every time it comes; the
 * requester sends it again after the RNR timer, or gives up with
 * nothing of it left here.  The packets after it are out of sequence
 * and dropped without a NAK-seq (check_psn), which would cut the
 * requester's RNR wait short.
 */
void sv_resp_rnr_drop(struct sv_qp *qp, const struct sv_pkt *p)
{
	sv_resp_nak(qp, p->psn, SV_NAK_RNR);
	qp->resp.seq_naked = true;
	qp->resp.nak_from = p->psn;
	sv_link_rx_consume(&qp->link);
}
