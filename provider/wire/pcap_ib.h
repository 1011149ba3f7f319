/* SPDX-License-Identifier: MIT */
/*
 * Between pcap.c (the capture file, the frame of one packet) and
 * pcap_train.c (which packets the engine's records are): one IBA packet.
 */
#ifndef SV_PCAP_IB_H
#define SV_PCAP_IB_H

#include "objects.h"
#include "pcap.h"
#include "roce.h"

/* What one packet is: filled by the callers, drawn by sv_pcap_emit()
 * with the RoCEv2 codec (roce.h), which draws the headers the opcode
 * carries. */
struct ib_pkt {
	const struct sv_pcap_addr *a;
	bool tx;
	uint8_t opcode; /* with its transport prefix (roce.h) */
	bool se, ack_req;
	uint32_t dqpn, psn;
	bool xrc;
	uint32_t xrc_srqn;
	bool deth;
	uint32_t qkey, src_qpn;
	const struct sv_reth *reth;
	const struct sv_atometh *atometh;
	bool aeth;
	uint8_t syndrome;
	uint32_t msn;
	const struct sv_atomack *atomack;
	bool imm;
	uint32_t imm_be;	     /* network order */
	bool inv;		     /* SEND with Invalidate: IETH */
	uint32_t inv_rkey;	     /* its key */
	const uint8_t *data;	     /* the payload; NULL: see sg */
	const struct sv_pcap_sg *sg; /* else: from byte sg_off of these */
	uint32_t sg_off;
	uint32_t len; /* payload bytes (neither data nor sg: not at hand) */
};

/* Frames k (Ethernet, IP, UDP, BTH and extensions, payload, ICRC) and
 * appends it to the capture. */
void sv_pcap_emit(const struct ib_pkt *k);

#endif
