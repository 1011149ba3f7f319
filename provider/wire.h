/* SPDX-License-Identifier: MIT */
/*
 * The packet format, in one place.  A packet is what a requester puts on a
 * link (a shared-memory ring, or later a TCP stream): a BTH-like header and,
 * for sends, the payload.  A packet may carry a train of consecutive
 * path-MTU segments of one message: `npsn` PSNs, each segment but the last
 * exactly one MTU long, so PSN accounting is the IBA's while a large
 * message costs one header per train instead of one per MTU.
 * Acknowledgements travel back in the link's ack word (see ring.h).
 */
#ifndef SV_WIRE_H
#define SV_WIRE_H

#include <assert.h>
#include <stdint.h>

#define SV_PSN_MASK 0xffffffu

/* IBA 9.7.1: PSNs are 24-bit and compared modulo 2^24. */
static inline int32_t sv_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static inline uint32_t sv_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & SV_PSN_MASK;
}

/* Position of a packet train inside its message (IBA FIRST/MIDDLE/LAST). */
enum sv_seg {
	SV_SEG_FIRST = 1 << 0,
	SV_SEG_LAST = 1 << 1,
	SV_SEG_ONLY = SV_SEG_FIRST | SV_SEG_LAST,
};

/* The most payload one packet train carries (req.c); with its header,
 * rounded to the record alignment, the largest record but a pad. */
#define SV_MAX_TRAIN 65536u
#define SV_MAX_REC   (SV_MAX_TRAIN + 64u)

enum sv_opcode {
	SV_OP_SEND = 1,	  /* payload for the next receive WQE */
	SV_OP_PAD = 0x7f, /* ring filler up to the wrap point; no PSN */
};

enum sv_pkt_flags {
	SV_PKT_IMM = 1 << 0,	   /* imm valid (on the LAST train) */
	SV_PKT_SOLICITED = 1 << 1, /* solicited event (IBA 9.2.3) */
};

/* Header of every packet; payload follows at +sizeof(struct sv_pkt). */
struct sv_pkt {
	uint8_t opcode; /* enum sv_opcode */
	uint8_t seg;	/* enum sv_seg */
	uint8_t flags;	/* enum sv_pkt_flags */
	uint8_t rsvd;
	uint32_t psn;	  /* PSN of the first segment of the train */
	uint32_t npsn;	  /* segments (PSNs) in this train, >= 1 */
	uint32_t len;	  /* payload bytes in this train */
	uint32_t imm;	  /* immediate data, network order as posted */
	uint32_t msg_len; /* whole message length, on FIRST */
	uint32_t rec_len; /* bytes this record occupies in the ring */
	uint32_t seq;	  /* written last: the record is complete when
			   * it equals sv_rec_seq(its ring position) */
};
static_assert(sizeof(struct sv_pkt) == 32, "packet header is wire ABI");

/*
 * The seq a record at absolute ring position pos must carry.  It changes
 * every lap, and the +1 keeps a zero-filled new ring from looking full.
 * The receiver polls this word, in the record's first cache line, instead
 * of a separate producer index: one cache miss per packet, not two.
 */
static inline uint32_t sv_rec_seq(uint64_t pos)
{
	return (uint32_t)(pos >> 6) + 1;
}

/* IBA 9.7.5.2: the ACK/NAK syndromes we carry back. */
enum sv_syndrome {
	SV_ACK = 0,
	SV_NAK_RNR = 1,	       /* no receive WQE; retry after the timer */
	SV_NAK_SEQ = 2,	       /* PSN sequence error */
	SV_NAK_INV_REQ = 3,    /* invalid request (e.g. too long) */
	SV_NAK_REM_ACCESS = 4, /* remote access error */
	SV_NAK_REM_OP = 5,     /* remote operational error */
};

#endif
