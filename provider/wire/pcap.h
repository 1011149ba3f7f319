/* SPDX-License-Identifier: MIT */
/*
 * The capture's hooks (wire/pcap.c, wire/pcap_train.c), which the engine
 * and UD call behind `if (sv_pcap_on)`.  The records' formats are
 * pcap_ib.h's.
 */
#ifndef SV_PCAP_H
#define SV_PCAP_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "wire.h"

struct sv_qp;
struct sv_swqe;
struct sv_ud_hdr;

/*
 * Capture (pcap.c): SOFTVERBS_PCAP=FILE writes every packet as RoCEv2 in
 * a pcap file.  sv_pcap_on is set once, at the first ibv_open_device,
 * before any QP exists; every hook sits behind `if (sv_pcap_on)`.
 * tx: we send it (src = us); else we received it.
 */
extern bool sv_pcap_on;
void sv_pcap_open(void);
/* Where a payload the record does not carry is (a send placed in the
 * receive buffer): SGEs whose addr are pointers, from the message's
 * first byte. */
struct sv_pcap_sg {
	const struct ibv_sge *sge;
	uint32_t n;
};
/* A train (wire.h) as the per-MTU packets it stands for.  ext: the bytes
 * after the header (XRCETH if flagged, then the opcode's extension),
 * data: the payload (NULL: not at hand, the packet's headers written as
 * cut; ext itself: a received record, the payload after the extension,
 * lengths checked against h->rec_len); sg: a placed send's payload, or
 * NULL.  The requester's QP shows its PSNs shifted by qp->pcap.psn_off. */
void sv_pcap_train(struct sv_qp *qp, bool tx, const struct sv_pkt *h,
		   const uint8_t *ext, const uint8_t *data,
		   const struct sv_pcap_sg *sg);
/* sv_pcap_train of a train the requester sends for WQE w: a placed
 * send's payload and a write's note's (req.c try_direct) from w. */
void sv_pcap_req(struct sv_qp *qp, const struct sv_swqe *w,
		 const struct sv_pkt *h, const uint8_t *ext,
		 const uint8_t *data);
/* An ack word (ring.h) written (tx) or newly read, as an ACKNOWLEDGE. */
void sv_pcap_ack(struct sv_qp *qp, bool tx, uint64_t ack);
/* A one-sided WQE done in the peer's memory (req.c try_direct): its
 * request and its response as a hardware initiator would see them,
 * under PSNs of their own (qp->pcap.psn_off grows).  data: the bytes
 * written or read; npsn_shown: how many of the write's PSNs to show
 * (a write with immediate leaves its last to the note). */
void sv_pcap_direct(struct sv_qp *qp, const struct sv_swqe *w,
		    const uint8_t *data, uint32_t npsn_shown);
/* A UD datagram (ud.c) sent or received. */
void sv_pcap_ud(struct sv_qp *qp, bool tx, const struct sv_ud_hdr *h,
		const uint8_t *sgid, const uint8_t *dgid, const uint8_t *data);
/* Writes out what is buffered (the progress thread, context close). */
void sv_pcap_flush(void);

#endif
