/* SPDX-License-Identifier: MIT */
/*
 * The IB CM's counters over RoCE (ib_link.c), shown by softverbs-stat:
 * librdmacm has no device context of its own, so it makes its own
 * "softverbs-stat" table (provider/lib/stat.h's layout) as context 0 of
 * the process, with no QP slots, at its first MAD (ib_stat.c).
 */
#ifndef SV_CM_IB_STAT_H
#define SV_CM_IB_STAT_H

enum cm_ib_ctr {
	CM_IB_SENT,	     /* MADs sent (REQ, REP, RTU, REJ, DREQ, DREP) */
	CM_IB_RESENT,	     /* REQs, REPs, DREQs sent again */
	CM_IB_RECV,	     /* datagrams read from the peers' QP1 */
	CM_IB_DUP_REQ,	     /* a REQ again: its REP again */
	CM_IB_DUP_REP,	     /* a REP again: its RTU again */
	CM_IB_GAVE_UP,	     /* a REQ's, REP's, DREQ's retries ran out */
	CM_IB_SEND_ERR,	     /* sendto failed */
	CM_IB_MRA,	     /* an MRA held our kept REQ or REP */
	CM_IB_DROP_FAULT,    /* lost on purpose: SOFTVERBS_CM_MAD_DROP */
	CM_IB_DROP_PKT,	     /* not a GSI MAD (RoCE codec, QPNs, Q_Key) */
	CM_IB_DROP_MAD,	     /* cm_mad_decode said no */
	CM_IB_DROP_NOT_OURS, /* comm IDs, service or addresses not ours */
	CM_IB_PASSED,	     /* another process's: passed to it (ib_pass.c) */
	CM_IB_PASS_LOST,     /* another process's, which could not be passed
			      * (no such name: gone; its queue full) */
	CM_IB_PASS_RECV,     /* passed to us by another process, taken */
	CM_IB_DROP_PASS,     /* passed to us: not our user, or malformed */
	CM_IB_NCTR
};

/* Lock held (cm_core.lock): counter k plus one. */
void cm_ib_count(enum cm_ib_ctr k);

#endif
