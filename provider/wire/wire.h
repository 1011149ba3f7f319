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
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

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

/*
 * Wire opcodes.  What each carries and who handles it is data: the
 * table in opcode.c (struct sv_opcode_info), tested by property.
 * Requests travel on a link's request ring; responses (read data,
 * atomic results) on its response ring, so a request waiting at the
 * head of one direction (RNR) never holds up the answers to ours.
 */
enum sv_opcode {
	SV_OP_SEND = 1,	       /* payload for the next receive WQE */
	SV_OP_WRITE = 2,       /* RETH on FIRST; payload to (rkey, va) */
	SV_OP_READ_REQ = 3,    /* RETH; answered by READ_RESP trains */
	SV_OP_CMP_SWAP = 4,    /* AtomicETH; answered by ATOMIC_RESP */
	SV_OP_FETCH_ADD = 5,   /* AtomicETH; answered by ATOMIC_RESP */
	SV_OP_READ_RESP = 6,   /* response: read data, psn of the request */
	SV_OP_ATOMIC_RESP = 7, /* response: AtomicAckETH, the old value */
	SV_OP_WRITE_NOTE = 8,  /* the initiator placed a write-with-imm's
				* payload itself (shared memory): only the
				* immediate and length travel */
	SV_OP_MAX,
	SV_OP_PAD = 0x7f, /* ring filler up to the wrap point; no PSN */
};

/* IBA 9.3.3.1-like RETH: where a write or read goes. */
struct sv_reth {
	uint64_t va;	  /* the target's iova */
	uint32_t rkey;	  /* the target's MR key */
	uint32_t dma_len; /* the whole message's length */
};
static_assert(sizeof(struct sv_reth) == 16, "wire ABI");

/* IBA 9.3.3.2-like AtomicETH. */
struct sv_atometh {
	uint64_t va;	   /* 8-byte aligned target iova */
	uint32_t rkey;	   /* the target's MR key */
	uint32_t rsvd;	   /* zero */
	uint64_t swap_add; /* swap value, or the addend */
	uint64_t compare;  /* compare value (CMP_SWAP only) */
};
static_assert(sizeof(struct sv_atometh) == 32, "wire ABI");

/* IBA 9.3.3.3-like AtomicAckETH. */
struct sv_atomack {
	uint64_t orig; /* the value before the operation */
	uint64_t rsvd;
};
static_assert(sizeof(struct sv_atomack) == 16, "wire ABI");

/* Header extensions and properties, per opcode (opcode.c). */
enum sv_opmask {
	SV_M_RETH = 1 << 0,	  /* struct sv_reth follows the header */
	SV_M_RETH_FIRST = 1 << 1, /* ... only on the FIRST train */
	SV_M_ATOMETH = 1 << 2,	  /* struct sv_atometh follows */
	SV_M_ATOMACK = 1 << 3,	  /* struct sv_atomack follows */
	SV_M_PAYLOAD = 1 << 4,	  /* carries message bytes */
	SV_M_IMM_OK = 1 << 5,	  /* may carry immediate data (LAST) */
	SV_M_RECV = 1 << 6,	  /* consumes a receive WQE (with imm) */
	SV_M_REQ = 1 << 7,	  /* a request: request ring, PSN checked */
	SV_M_RESP = 1 << 8,	  /* a response: response ring */
	SV_M_RD_ATOMIC = 1 << 9,  /* counts against max_(dest_)rd_atomic */
	SV_M_ATOMIC = 1 << 10,	  /* 8 bytes, 8-aligned, one atomic */
};

struct sv_qp;

/* What the responder does with a request: its handler (resp.c). */
enum sv_resp_handler {
	SV_H_NONE,
	SV_H_SEND,
	SV_H_WRITE,
	SV_H_READ,
	SV_H_ATOMIC,
	SV_H_NOTE,
};

/* QP types an opcode is allowed on (struct sv_opcode_info.qpts). */
#define SV_QPT_BIT(t) (1u << (t))
#define SV_QPT(t)     SV_QPT_BIT(IBV_QPT_##t)

struct sv_opcode_info {
	const char *name;
	uint32_t mask;	  /* enum sv_opmask */
	uint32_t qpts;	  /* SV_QPT(RC) | ...: where it is allowed */
	uint16_t ext_len; /* bytes of header extension (when present) */
	uint8_t access;	  /* IBV_ACCESS_REMOTE_* the target MR needs */
	uint8_t handler;  /* enum sv_resp_handler */
};

extern const struct sv_opcode_info sv_opcodes[SV_OP_MAX];

/* The table's row for a peer-given opcode, or NULL. */
static inline const struct sv_opcode_info *sv_opcode(uint8_t op)
{
	return op < SV_OP_MAX && sv_opcodes[op].name ? &sv_opcodes[op] : 0;
}

/* Extension bytes a packet of this opcode and position carries. */
static inline uint32_t sv_ext_len(const struct sv_opcode_info *o, uint8_t seg)
{
	if ((o->mask & SV_M_RETH_FIRST) && !(seg & SV_SEG_FIRST))
		return 0;
	return o->ext_len;
}

enum sv_pkt_flags {
	SV_PKT_IMM = 1 << 0,	   /* imm valid (on the LAST train) */
	SV_PKT_SOLICITED = 1 << 1, /* solicited event (IBA 9.2.3) */
	SV_PKT_PLACED = 1 << 2,	   /* SEND: the sender put the payload in
				    * the receive buffer (ring.h: struct
				    * sv_rdesc); only the header travels */
	SV_PKT_XRC = 1 << 3,	   /* struct sv_xrceth follows the header,
				    * before the opcode's extension */
	SV_PKT_INV = 1 << 4,	   /* SEND with Invalidate (LAST): imm is
				    * the rkey the target invalidates (IETH,
				    * IBA 9.3.7) */
	SV_PKT_OPEN_LEN = 1 << 5,  /* SEND: msg_len unknown (a RoCE peer's
				    * SEND_FIRST says none): the message
				    * ends at its LAST packet, at most the
				    * receive's length */
	SV_PKT_ACK_REQ = 1 << 6,   /* a RoCE packet's AckReq (BTH A bit,
				    * IBA 9.7.5.1.1): the responder acks
				    * it, mid-message too, so a lossy
				    * link's window moves */
};

/* IBA 9.3.6-like XRCETH: the XRC SRQ a request on an XRC QP is for.
 * Every request of an XRC_SEND QP carries it (flag SV_PKT_XRC). */
struct sv_xrceth {
	uint32_t srqn; /* 24 bits: the target's XRC SRQ number */
	uint32_t rsvd; /* zero */
};
static_assert(sizeof(struct sv_xrceth) == 8, "wire ABI");

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

/*
 * A UD datagram (ud/): this header, then the payload, in one SOCK_DGRAM
 * message to the destination QP's socket.  Every field comes from
 * another process and is validated before use (sv_ud_hdr_ok).
 */
#define SV_UD_MAGIC   0x53565544u /* "SVUD" */
#define SV_UD_VERSION 1
#define SV_UD_MTU     4096	/* the port's active MTU: longest payload */
#define SV_MCAST_QPN  0xffffffu /* the DQPN of multicast (IB_MULTICAST_QPN) */
#define SV_GRH_LEN    40	/* the GRH at the start of a receive buffer */

enum sv_ud_flags {
	SV_UD_IMM = 1 << 0,	  /* imm is valid */
	SV_UD_SOLICITED = 1 << 1, /* IBV_SEND_SOLICITED */
	SV_UD_GRH = 1 << 2,	  /* sgid/dgid valid: a GRH travels */
	SV_UD_MAC = 1 << 3,	  /* struct sv_ud_mac follows the payload
				   * (from another host, with a secret) */
	SV_UD_NET = 1 << 4,	  /* set by the UDP listener that passed it
				   * on: it came from the network (never
				   * covered by the MAC) */
	SV_UD_ROCE = 1 << 5,	  /* set by the listener with SV_UD_NET: it
				   * came as a RoCEv2 packet (ud/roce.c);
				   * sgid and dgid are the IP header's
				   * addresses, rsvd its TOS << 8 | TTL */
};

struct sv_ud_hdr {
	uint32_t magic;	  /* SV_UD_MAGIC: catches a stray datagram */
	uint16_t version; /* SV_UD_VERSION: bump on any layout change */
	uint16_t flags;	  /* enum sv_ud_flags */
	uint32_t src_qpn; /* the sender's QP: wc.src_qp */
	uint32_t dst_qpn; /* the QP it is for: must be the receiver's */
	uint32_t qkey;	  /* must match the receiver's qkey */
	uint32_t imm;	  /* network order, with SV_UD_IMM */
	uint32_t len;	  /* payload bytes after this header */
	uint32_t rsvd;	  /* over UDP without SV_UD_MAC: CRC-32C of the
			   * datagram (this word 0); else 0 */
	uint8_t sgid[16]; /* SV_UD_GRH: the sender's GID */
	uint8_t dgid[16]; /* SV_UD_GRH: the GID the sender's AH named */
};
static_assert(sizeof(struct sv_ud_hdr) == 64, "wire ABI");

/*
 * The trailer of a datagram between hosts with SOFTVERBS_SECRET_FILE
 * (ud/mac.c): HMAC-SHA-256 under sv_auth_key(SV_AUTH_UD), truncated to 128
 * bits, of the header (rsvd and sgid zero, SV_UD_NET clear: the
 * listener rewrites those), the payload, sender and seq.  The receiving
 * QP keeps a window of seqs per sender (a replay is dropped).
 */
struct sv_ud_mac {
	uint64_t sender; /* random, never 0: the sending QP's id */
	uint64_t seq;	 /* 1, 2, ...: the sender's datagram number */
	uint8_t mac[16]; /* the truncated HMAC */
};
static_assert(sizeof(struct sv_ud_mac) == 32, "wire ABI");
#define SV_UD_MAC_COVERS offsetof(struct sv_ud_mac, mac)
/* The longest datagram is then 64 + 4096 + 32 bytes: UDP carries up to
 * 65,507, in IP fragments on a 1500-byte link, as it carried 4160. */

/* True if h, of n bytes received, is a datagram we can take. */
static inline bool sv_ud_hdr_ok(const struct sv_ud_hdr *h, size_t n)
{
	size_t mac;

	if (n < sizeof(*h) || h->magic != SV_UD_MAGIC ||
	    h->version != SV_UD_VERSION ||
	    (h->flags & ~(SV_UD_IMM | SV_UD_SOLICITED | SV_UD_GRH | SV_UD_MAC |
			  SV_UD_NET | SV_UD_ROCE)))
		return false;
	mac = (h->flags & SV_UD_MAC) ? sizeof(struct sv_ud_mac) : 0;
	return h->len <= SV_UD_MTU && n - sizeof(*h) >= mac &&
	       h->len == n - sizeof(*h) - mac;
}

/*
 * A send forwarded by an XRC_RECV QP to the process that owns the XRC SRQ
 * it names (xrc.c): this header, then the payload, in one SOCK_DGRAM
 * message to the SRQ's socket (its name holds the domain and the SRQ
 * number); a payload longer than SV_XRC_FWD_MAX travels instead in a
 * sealed memfd passed with the header (SCM_RIGHTS).  Every field comes
 * from another process and is validated.
 */
#define SV_XRC_MAGIC   0x53565852u /* "SVXR" */
#define SV_XRC_VERSION 1
#define SV_XRC_FWD_MAX (64u * 1024) /* the longest payload in the datagram */
#define SV_XRC_MSG_MAX (1u << 31)   /* the longest message (max_msg_sz) */

enum sv_xrc_flags {
	SV_XRC_IMM = 1 << 0,	   /* imm is valid */
	SV_XRC_SOLICITED = 1 << 1, /* the sender asked for an event */
	SV_XRC_MEMFD = 1 << 2,	   /* the payload is in the memfd passed */
};

struct sv_xrc_hdr {
	uint32_t magic;	  /* SV_XRC_MAGIC */
	uint16_t version; /* SV_XRC_VERSION: bump on any layout change */
	uint16_t flags;	  /* enum sv_xrc_flags */
	uint32_t srqn;	  /* the SRQ it is for: must be the receiver's */
	uint32_t tgt_qpn; /* the XRC_RECV QP it came in on: wc.qp_num */
	uint32_t src_qpn; /* the XRC_SEND QP that sent it: wc.src_qp */
	uint32_t imm;	  /* network order, with SV_XRC_IMM */
	uint32_t len;	  /* payload bytes after this header */
	uint32_t rsvd;
	char domain[40]; /* the XRC domain's name, NUL-terminated */
};
static_assert(sizeof(struct sv_xrc_hdr) == 72, "wire ABI");

/* True if h, of n bytes received, is a forwarded send we can take. */
static inline bool sv_xrc_hdr_ok(const struct sv_xrc_hdr *h, size_t n)
{
	if (n < sizeof(*h) || h->magic != SV_XRC_MAGIC ||
	    h->version != SV_XRC_VERSION ||
	    (h->flags & ~(SV_XRC_IMM | SV_XRC_SOLICITED | SV_XRC_MEMFD)) ||
	    h->domain[sizeof(h->domain) - 1] != 0)
		return false;
	if (h->flags & SV_XRC_MEMFD)
		return n == sizeof(*h) && h->len > SV_XRC_FWD_MAX &&
		       h->len <= SV_XRC_MSG_MAX;
	return h->len <= SV_XRC_FWD_MAX && h->len == n - sizeof(*h);
}

#endif
