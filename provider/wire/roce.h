/* SPDX-License-Identifier: MIT */
/*
 * RoCEv2 packets (IBA Annex A17 over IBA chapter 9), encode and decode
 * side by side: the UDP payload to port 4791 is BTH, the extension
 * headers the opcode requires, the payload, 0-3 pad bytes and the ICRC.
 * Which headers an opcode carries is data (opcode.c, sv_ib_ops[]); the
 * parser treats every byte as hostile and says why it refused a packet
 * (enum sv_roce_verdict).  Captures (pcap.c) draw their packets with this
 * codec; the RoCEv2 transport will put the same bytes on a socket.
 *
 * What the ICRC covers and who can know it: the IP and UDP headers with
 * their variant fields set to ones (IPv4: TOS, TTL, header checksum;
 * IPv6: traffic class, flow label, hop limit; UDP: checksum), then BTH
 * with its byte 4 (FECN/BECN, "resv8a") set to ones, then the rest.  The
 * IPv4 Identification and flags/fragment word are covered.  A sender on
 * an unconnected UDP socket with IP_PMTUDISC_DO knows them: Linux sends
 * DF with ID 0, which is what a zeroed struct sv_roce_ip says.  A
 * receiver on a UDP socket does not: the socket hides the ID, and rxe
 * sends random ones, so over IPv4 it can verify only a peer known to send
 * ID 0 (or one that reads the IP header itself: a raw socket).  Over
 * IPv6 there is no ID: a receiver that knows both addresses and ports can
 * always verify.
 */
#ifndef SV_ROCE_H
#define SV_ROCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "wire.h"

#define SV_ROCE_PORT	 4791 /* IANA's RoCEv2 UDP port */
#define SV_ROCE_BTH	 12
#define SV_ROCE_ICRC	 4
#define SV_ROCE_HDR_MAX	 (SV_ROCE_BTH + 8 + 16 + 28 + 4) /* the longest */
#define SV_ROCE_IP4_UDP	 (20 + 8)
#define SV_ROCE_IP6_UDP	 (40 + 8)
#define SV_ROCE_MAX_PMTU 4096 /* IBA: the largest path MTU */

/* IBA 9.2.1 / table 40: an opcode is a transport prefix | an operation. */
enum sv_ib_transport {
	SV_IB_RC = 0x00,
	SV_IB_UC = 0x20,
	SV_IB_RD = 0x40, /* never spoken: no opcode of it is known */
	SV_IB_UD = 0x60,
	SV_IB_CNP = 0x80, /* RoCEv2 congestion notification (A17.9) */
	SV_IB_XRC = 0xa0,
};
#define SV_IB_TRANSPORT(op) ((uint8_t)((op)&0xe0))
#define SV_IB_OPERATION(op) ((uint8_t)((op)&0x1f))

enum sv_ib_operation {
	SV_IB_SEND_FIRST = 0x00,
	SV_IB_SEND_MIDDLE = 0x01,
	SV_IB_SEND_LAST = 0x02,
	SV_IB_SEND_LAST_IMM = 0x03,
	SV_IB_SEND_ONLY = 0x04,
	SV_IB_SEND_ONLY_IMM = 0x05,
	SV_IB_WRITE_FIRST = 0x06,
	SV_IB_WRITE_MIDDLE = 0x07,
	SV_IB_WRITE_LAST = 0x08,
	SV_IB_WRITE_LAST_IMM = 0x09,
	SV_IB_WRITE_ONLY = 0x0a,
	SV_IB_WRITE_ONLY_IMM = 0x0b,
	SV_IB_READ_REQ = 0x0c,
	SV_IB_READ_RESP_FIRST = 0x0d,
	SV_IB_READ_RESP_MIDDLE = 0x0e,
	SV_IB_READ_RESP_LAST = 0x0f,
	SV_IB_READ_RESP_ONLY = 0x10,
	SV_IB_ACK = 0x11,
	SV_IB_ATOMIC_ACK = 0x12,
	SV_IB_CMP_SWAP = 0x13,
	SV_IB_FETCH_ADD = 0x14,
	SV_IB_SEND_LAST_INV = 0x16,
	SV_IB_SEND_ONLY_INV = 0x17,
	SV_IB_CNP_OP = 0x01, /* with SV_IB_CNP: opcode 0x81 */
};

/* What a packet of an opcode carries, in wire order, and what it is. */
enum sv_roce_mask {
	SV_RH_DETH = 1 << 0,	/* UD: Q_Key, source QP (8 bytes) */
	SV_RH_XRCETH = 1 << 1,	/* XRC requests: the XRC SRQ (4) */
	SV_RH_RETH = 1 << 2,	/* va, rkey, DMA length (16) */
	SV_RH_ATOMETH = 1 << 3, /* va, rkey, swap/add, compare (28) */
	SV_RH_AETH = 1 << 4,	/* syndrome, MSN (4) */
	SV_RH_ATOMACK = 1 << 5, /* the original value (8) */
	SV_RH_IMM = 1 << 6,	/* immediate data (4) */
	SV_RH_IETH = 1 << 7,	/* the rkey to invalidate (4) */
	SV_RH_CNP = 1 << 8,	/* CNP: 16 reserved bytes */
	SV_RH_PAYLOAD = 1 << 9, /* may carry message bytes */
	SV_RH_FIRST = 1 << 10,	/* first packet of a message */
	SV_RH_MIDDLE = 1 << 11,
	SV_RH_LAST = 1 << 12,
	SV_RH_REQ = 1 << 13,  /* requester to responder */
	SV_RH_RESP = 1 << 14, /* responder to requester (ACKs too) */
	SV_RH_ONLY = SV_RH_FIRST | SV_RH_LAST,
	SV_RH_HDRS = SV_RH_DETH | SV_RH_XRCETH | SV_RH_RETH | SV_RH_ATOMETH |
		     SV_RH_AETH | SV_RH_ATOMACK | SV_RH_IMM | SV_RH_IETH |
		     SV_RH_CNP,
};

/* A transport's bit in struct sv_ib_op.tps. */
#define SV_TP(t) ((uint8_t)(1u << (SV_IB_##t >> 5)))

/* One operation (the opcode's low five bits): its headers, its kind and
 * the transports that have it. */
struct sv_ib_op {
	const char *name; /* NULL: no such operation */
	uint32_t mask;	  /* enum sv_roce_mask, without DETH/XRCETH */
	uint8_t tps;	  /* SV_TP(RC) | ...: where the opcode exists */
};

/* By operation (opcode.c); CNP's one opcode apart. */
extern const struct sv_ib_op sv_ib_ops[32];
extern const struct sv_ib_op sv_ib_cnp;

/* The headers and kind of an IBA opcode (the operation's, plus DETH on
 * UD and XRCETH on XRC requests), or 0 if no transport we speak has it. */
uint32_t sv_roce_op_mask(uint8_t opcode);

/* Its name for logs ("RC SEND_ONLY"), or NULL. */
const char *sv_roce_op_name(uint8_t opcode, char *buf, size_t cap);

/* Bytes of the headers (BTH included) a packet of this mask carries. */
uint32_t sv_roce_hdr_len(uint32_t mask);

/*
 * One packet, host order: what sv_roce_hdr_put writes and sv_roce_parse
 * fills.  Only the fields of the headers the opcode carries are used.
 */
struct sv_roce_pkt {
	uint8_t opcode; /* prefix | operation */
	bool se;	/* solicited event */
	bool mig;	/* MigReq */
	bool ack_req;	/* A: the responder must acknowledge */
	uint8_t pad;	/* parse: the pad count (build: from len) */
	uint8_t tver;	/* parse: the header version (build: 0) */
	uint8_t fb;	/* BTH byte 4 (FECN/BECN); outside the ICRC */
	uint16_t pkey;
	uint32_t dqpn;		  /* 24 bits */
	uint32_t psn;		  /* 24 bits */
	uint32_t srqn;		  /* XRCETH */
	uint32_t qkey, src_qpn;	  /* DETH */
	struct sv_reth reth;	  /* RETH */
	struct sv_atometh atomic; /* AtomicETH (its rsvd unused) */
	uint8_t syndrome;	  /* AETH (IBA 9.7.5.2.1) */
	uint32_t msn;		  /* AETH, 24 bits */
	uint64_t orig;		  /* AtomicAckETH */
	uint32_t imm_be;	  /* ImmDt, network order as posted */
	uint32_t inv_rkey;	  /* IETH */
	const uint8_t *payload;	  /* parse: into the buffer given */
	uint32_t len;		  /* payload bytes, pad excluded */
	uint32_t mask;		  /* parse: sv_roce_op_mask(opcode) */
	uint32_t icrc;		  /* parse: as received */
	uint16_t ip_id;		  /* parse: the IPv4 ID it verified with */
};

/* The 16 vectors by which IPv4 ID bits change the ICRC of a datagram
 * of n bytes, in echelon form (sv_roce_parse with id_span): kept by a
 * receiver, so that a train's packets, of one length, cost it one
 * elimination. */
struct sv_roce_idmemo {
	size_t n;
	uint32_t v[16];
	uint16_t c[16]; /* which ID bits row j is made of */
	uint8_t piv[16], rank;
};
#define SV_ROCE_ID_ANY 0x10000u /* id_span: every ID */

/* The ICRC's register after the masked IP and UDP headers, for the
 * datagram lengths and IPv4 IDs seen last (sv_roce_icrc_start): they
 * differ from packet to packet in nothing else, and most packets of a
 * link have one of a few lengths.  key: 0 empty, else the length and ID
 * with bit 32 set. */
#define SV_ROCE_HDRMEMO 128
struct sv_roce_hdrmemo {
	uint64_t key[SV_ROCE_HDRMEMO];
	uint32_t crc[SV_ROCE_HDRMEMO];
};

/*
 * Where a packet travels, as far as the ICRC covers it.  Zeroed but for
 * the addresses and ports, it says what an unconnected UDP socket with
 * IP_PMTUDISC_DO sends: DF set, ID 0.
 */
struct sv_roce_ip {
	uint8_t src[16], dst[16]; /* IPv4-mapped (::ffff:a.b.c.d): IPv4 */
	uint16_t sport, dport;	  /* dport 0 means SV_ROCE_PORT */
	uint16_t ip_id;		  /* IPv4 Identification as on the wire */
	/* parse, IPv4, ip_id 0: a packet sent with any ID below id_span
	 * verifies too (at most SV_ROCE_ID_ANY).  A UDP socket does not show
	 * the ID, which the ICRC covers: the ID is solved from the ICRC
	 * itself, and damage passes with odds of id_span in 2^32 (2^-16 for
	 * SV_ROCE_ID_ANY) instead of 2^-32.  softverbs
	 * sends ID 0, its GSO runs as segments 0, 1, 2...; the kernel's rxe
	 * sends IDs from a counter of the kernel's. */
	uint32_t id_span;
	struct sv_roce_idmemo *memo; /* ... its memo, NULL: none */
	/* the headers' memo, NULL: none; it belongs to this sv_roce_ip,
	 * whose fields but ip_id must not change while it has one */
	struct sv_roce_hdrmemo *hmemo;
	bool no_df;  /* IPv4: DF clear (a fragmentable packet) */
	uint8_t ttl; /* 0: 64; not covered (framing only) */
};

bool sv_roce_ip_is_v4(const struct sv_roce_ip *ip);

/* The IP and UDP headers at out (20 + 8 or 40 + 8 bytes) for a UDP
 * payload (BTH to ICRC) of payload_len bytes; IPv4 header checksum
 * computed, UDP checksum 0 (IPv6: sv_roce_udp6_csum once the payload is
 * there).  Returns the bytes written. */
uint32_t sv_roce_ip_udp_put(uint8_t *out, const struct sv_roce_ip *ip,
			    uint32_t payload_len);

/* RFC 8200 8.1: the UDP checksum of an IPv6 packet at ip6 (40 bytes,
 * UDP header, payload_len bytes of UDP payload); never 0. */
uint16_t sv_roce_udp6_csum(const uint8_t *ip6, uint32_t payload_len);

/* BTH and the extension headers of p at h (SV_ROCE_HDR_MAX room), the
 * pad count from p->len; returns their length, 0 for an opcode we do not
 * speak. */
uint32_t sv_roce_hdr_put(uint8_t *h, const struct sv_roce_pkt *p);

/* The ICRC, in three steps so a payload may come in pieces: start over
 * the pseudo headers and the packet's headers (hdr, hlen >= 12 bytes from
 * BTH; payload_len the UDP payload's whole length, ICRC included), add
 * the payload and pad, end.  Stored on the wire least significant byte
 * first (sv_roce_icrc_put). */
uint32_t sv_roce_icrc_start(const struct sv_roce_ip *ip, const uint8_t *hdr,
			    uint32_t hlen, uint32_t payload_len);
uint32_t sv_roce_icrc_add(uint32_t crc, const void *p, size_t n);
/* sv_roce_icrc_add of the n bytes at src, which it copies to dst (one
 * pass over src where the CPU has VPCLMULQDQ). */
uint32_t sv_roce_icrc_copy(uint32_t crc, void *dst, const void *src, size_t n);
/* sv_roce_icrc_add by tables alone, whatever the CPU has (tests compare
 * the carry-less multiplication's result with it). */
uint32_t sv_roce_crc_tables(uint32_t crc, const void *p, size_t n);
static inline uint32_t sv_roce_icrc_end(uint32_t crc)
{
	return ~crc;
}

static inline void sv_roce_icrc_put(uint8_t *at, uint32_t icrc)
{
	at[0] = (uint8_t)icrc;
	at[1] = (uint8_t)(icrc >> 8);
	at[2] = (uint8_t)(icrc >> 16);
	at[3] = (uint8_t)(icrc >> 24);
}

/* The length sv_roce_build makes of p (headers, payload, pad, ICRC), 0
 * if it would refuse it. */
uint32_t sv_roce_pkt_len(const struct sv_roce_pkt *p);

/* The whole UDP payload of p (headers, payload, pad, ICRC for ip) at
 * out: its length, or -ENOSPC (cap too small) or -EINVAL (an opcode we
 * do not speak, a payload where it carries none, len > 4096). */
int sv_roce_build(uint8_t *out, size_t cap, const struct sv_roce_pkt *p,
		  const struct sv_roce_ip *ip);

/* The ICRC of the built UDP payload b (n bytes) made again for ip. */
void sv_roce_reseal(uint8_t *b, size_t n, const struct sv_roce_ip *ip);

/* Why a received packet was refused (sv_roce_verdict_names[]). */
enum sv_roce_verdict {
	SV_ROCE_OK = 0,
	SV_ROCE_SHORT,	  /* shorter than BTH + ICRC */
	SV_ROCE_TVER,	  /* BTH transport header version not 0 */
	SV_ROCE_OPCODE,	  /* an opcode we do not speak */
	SV_ROCE_TRUNC,	  /* the opcode's headers run into the ICRC */
	SV_ROCE_PAD,	  /* pad count past the payload */
	SV_ROCE_LEN,	  /* payload where the opcode has none, > 4096, or
			   * longer than a UDP datagram */
	SV_ROCE_ICRC_BAD, /* the ICRC does not match */
	SV_ROCE_QPT,	  /* opcode not allowed on the QP's type */
	SV_ROCE_SEG_LEN,  /* FIRST/MIDDLE not one MTU, LAST/ONLY over it */
	SV_ROCE_VERDICTS,
};
extern const char *const sv_roce_verdict_names[SV_ROCE_VERDICTS];

/*
 * Parses the UDP payload b of n bytes into p (p->payload points into b).
 * ip: the addressing as received, to verify the ICRC; NULL skips the
 * check (a UDP socket's receiver over IPv4 from a peer with unknown IP
 * IDs: head comment) and p->icrc still says what came.  Reads no byte
 * outside b; p is written only on SV_ROCE_OK.
 */
enum sv_roce_verdict sv_roce_parse(const uint8_t *b, size_t n,
				   const struct sv_roce_ip *ip,
				   struct sv_roce_pkt *p);

/* SV_ROCE_QPT unless p's opcode belongs to a QP of type t (IBA 9.2.1:
 * the prefix; XRC_SEND and XRC_RECV share XRC's). */
enum sv_roce_verdict sv_roce_check_qpt(const struct sv_roce_pkt *p,
				       enum ibv_qp_type t);

/*
 * The UD datagram header (wire.h) of a parsed RoCE UD packet p, as a UD
 * QP's socket takes it: QPNs, Q_Key, length, tos and ttl as received in
 * rsvd, immediate and solicited flags (magic, version, the other flags
 * and the GIDs are the caller's).  False, h untouched, for what no UD QP
 * here takes: a P_Key other than the default, multicast, QP0 or QP1, a
 * payload past SV_UD_MTU, or header and payload past cap bytes.
 */
bool sv_roce_ud_hdr(const struct sv_roce_pkt *p, uint8_t tos, uint8_t ttl,
		    size_t cap, struct sv_ud_hdr *h);

/* SV_ROCE_SEG_LEN unless p's payload fits its position at path MTU mtu
 * (IBA 9.7.7: FIRST and MIDDLE exactly one MTU, LAST 1..MTU, ONLY
 * 0..MTU); packets without payload pass. */
enum sv_roce_verdict sv_roce_check_seg(const struct sv_roce_pkt *p,
				       uint32_t mtu);

/* The UDP source port of a QP pair's packets, the same both ways: the
 * kernel's rdma_get_udp_sport with no flow label (rdma_calc_flow_label of
 * the two QPNs, folded to 14 bits, in 0xc000-0xffff), which rxe sends
 * from; a transport that sends from it too can tell its links apart by
 * port. */
uint16_t sv_roce_sport(uint32_t qpn_a, uint32_t qpn_b);

/* The UDP source port of a flow label (the kernel's
 * rdma_flow_label_to_udp_sport): a QP whose address vector has one sends
 * from it (rxe), as an rdma_cm connection's does when its REQ gave one. */
uint16_t sv_roce_fl_sport(uint32_t flow_label);

/* A QP pair whose two ends have one address (two processes on one
 * host, over 127.0.0.1 say): the pair's port (sv_roce_sport) would make
 * both ends' receiving sockets one four-tuple, which the kernel cannot
 * tell apart.  So each way gets its own, the pair's with its low bit
 * saying which: the port QPN from sends to QPN to from. */
uint16_t sv_roce_sport_way(uint16_t pair_port, uint32_t from, uint32_t to);

/* A message's kinds as the segmenter knows them. */
enum sv_roce_msg {
	SV_ROCE_MSG_SEND,
	SV_ROCE_MSG_SEND_IMM,
	SV_ROCE_MSG_SEND_INV,
	SV_ROCE_MSG_WRITE,
	SV_ROCE_MSG_WRITE_IMM,
	SV_ROCE_MSG_READ_RESP,
};

/* One packet of a message: its opcode, where its payload starts in the
 * message and how long it is. */
struct sv_roce_seg {
	uint8_t opcode;
	uint32_t off, len;
};

/* Packets a message of len bytes takes at path MTU mtu (1 for 0). */
static inline uint32_t sv_roce_npkts(uint32_t len, uint32_t mtu)
{
	return len ? (uint32_t)(((uint64_t)len + mtu - 1) / mtu) : 1;
}

/* Packet i of such a message on transport (enum sv_ib_transport):
 * FIRST, MIDDLE..., LAST or ONLY, the immediate or invalidate on the
 * last.  0, or -EINVAL (mtu not 256..4096 a power of two, i past the
 * end, a kind the transport lacks). */
int sv_roce_segment(uint8_t transport, enum sv_roce_msg kind, uint32_t len,
		    uint32_t mtu, uint32_t i, struct sv_roce_seg *out);

#endif
