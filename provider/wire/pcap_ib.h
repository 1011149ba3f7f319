/* SPDX-License-Identifier: MIT */
/*
 * Between pcap.c (the capture file, the frame of one packet) and
 * pcap_train.c (which packets the engine's records are): one IBA packet.
 */
#ifndef SV_PCAP_IB_H
#define SV_PCAP_IB_H

#include "objects.h"
#include "pcap.h"

#define ROCE_PORT 4791

/* IBA opcode prefixes (transport of the QP), and the RC/UC/XRC codes. */
enum {
	IB_RC = 0x00,
	IB_UC = 0x20,
	IB_UD = 0x60,
	IB_XRC = 0xa0,
	IB_SEND_FIRST = 0x00,
	IB_SEND_MIDDLE = 0x01,
	IB_SEND_LAST = 0x02,
	IB_SEND_LAST_IMM = 0x03,
	IB_SEND_ONLY = 0x04,
	IB_SEND_ONLY_IMM = 0x05,
	IB_WRITE_FIRST = 0x06,
	IB_WRITE_MIDDLE = 0x07,
	IB_WRITE_LAST = 0x08,
	IB_WRITE_LAST_IMM = 0x09,
	IB_WRITE_ONLY = 0x0a,
	IB_WRITE_ONLY_IMM = 0x0b,
	IB_READ_REQ = 0x0c,
	IB_READ_RESP_FIRST = 0x0d,
	IB_READ_RESP_MIDDLE = 0x0e,
	IB_READ_RESP_LAST = 0x0f,
	IB_READ_RESP_ONLY = 0x10,
	IB_ACK = 0x11,
	IB_ATOMIC_ACK = 0x12,
	IB_CMP_SWAP = 0x13,
	IB_FETCH_ADD = 0x14,
};

/* What one packet is: filled by the callers, drawn by sv_pcap_emit(). */
struct ib_pkt {
	const struct sv_pcap_addr *a;
	bool tx;
	uint8_t opcode; /* with its transport prefix */
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
	const uint8_t *data;	     /* the payload; NULL: see sg */
	const struct sv_pcap_sg *sg; /* else: from byte sg_off of these */
	uint32_t sg_off;
	uint32_t len; /* payload bytes (neither data nor sg: not at hand) */
};

/* Frames k (Ethernet, IP, UDP, BTH and extensions, payload, ICRC) and
 * appends it to the capture. */
void sv_pcap_emit(const struct ib_pkt *k);

#endif
