/* SPDX-License-Identifier: MIT */
/*
 * sv_soak_worker's pieces (tests/soak): the content pattern, the
 * per-round operation lists both sides derive from a session's seed, the
 * out-of-band control messages and the counters the driver sums.
 */
#ifndef SV_SOAK_H
#define SV_SOAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SOAK_MAXQP     4	  /* QPs in one session */
#define SOAK_DEPTH     8	  /* receives posted per QP */
#define SOAK_SLOT      (1u << 20) /* bytes of one receive slot (1 MiB) */
#define SOAK_SLOT_PAD  4096u	  /* a UD receive's GRH, a split's gap */
#define SOAK_SPLIT     512u	  /* a two-SGE receive: [0,512) then ... */
#define SOAK_SPLIT_GAP 512u	  /* ... a hole of 512, then the rest */
#define SOAK_SENDAREA  (4u << 20) /* a round's sends and write sources */
#define SOAK_WINAREA   (4u << 20) /* the peer's writes land here */
#define SOAK_EXPAREA   (1u << 20) /* the peer reads from here */
#define SOAK_READAREA  (4u << 20) /* our reads and atomics land here */
#define SOAK_MAXOPS    48	  /* operations one side posts per round */
#define SOAK_SQ_DEPTH  64
#define SOAK_MAXMSG    (1u << 20) /* the largest message: 1 MiB */
#define SOAK_POISON    0xa5	  /* a write region before the write */

enum soak_kind { KIND_RC, KIND_SRQ, KIND_UC, KIND_UD, KIND_NR };
extern const char *const soak_kind_names[KIND_NR];

enum soak_op {
	OP_SEND,      /* payload starts with the 8-byte sequence number */
	OP_SEND_IMM,  /* imm = sequence number */
	OP_WRITE,     /* into the peer's write area */
	OP_WRITE_IMM, /* the same, and imm = sequence number */
	OP_READ,      /* from the peer's exposed area */
	OP_FADD,      /* the peer's counter */
	OP_CAS,	      /* the peer's counter, to succeed or to fail */
	OP_NR
};
extern const char *const soak_op_names[OP_NR];

/* Does the operation consume a receive at the peer? */
static inline bool soak_op_recv(enum soak_op op)
{
	return op == OP_SEND || op == OP_SEND_IMM || op == OP_WRITE_IMM;
}

/* One operation of one direction in one round; both sides derive it. */
struct soak_opdesc {
	uint8_t op;	  /* enum soak_op */
	uint8_t qpi;	  /* which of the session's QPs */
	uint8_t nsge;	  /* local pieces (1..3) */
	uint8_t inl;	  /* IBV_SEND_INLINE */
	uint32_t len;	  /* bytes */
	uint32_t seq;	  /* receive-consuming: per QP and direction */
	uint32_t roff;	  /* offset in the peer's write or exposed area */
	uint64_t key;	  /* the content's pattern key */
	uint32_t loff[3]; /* local pieces: send or read area offsets */
	uint32_t llen[3]; /* their lengths, summing to len */
	uint64_t add;	  /* FADD: add; CAS: the new value's delta */
	uint64_t cmp;	  /* CAS: compare */
	uint64_t old;	  /* atomics: the value the peer's counter had */
};

/* A direction's state carried from round to round. */
struct soak_dirstate {
	uint32_t seq[SOAK_MAXQP]; /* next sequence number per QP */
	uint64_t ctr[SOAK_MAXQP]; /* the counters at the receiving side:
				   * one per QP, as atomics of different QPs
				   * are not ordered with each other */
};

/* What a session is, as the listener chose it. */
struct soak_session {
	enum soak_kind kind;
	uint32_t nqp;
	uint32_t nrounds;
	uint64_t seed;
	uint32_t mtu;	     /* UD payload limit */
	uint32_t max_inline; /* what both sides' QPs take */
};

/* The operations of direction dir in round r; ds is advanced. */
int soak_gen_ops(const struct soak_session *s, int dir, uint32_t round,
		 struct soak_dirstate *ds, struct soak_opdesc *ops);

/* The content: byte i of the stream named key. */
void soak_fill(uint8_t *dst, uint64_t key, uint64_t off, size_t len);
/* Index of the first byte of dst that differs from the stream, or -1. */
long soak_check(const uint8_t *dst, uint64_t key, uint64_t off, size_t len);
uint64_t soak_mix(uint64_t x);
uint64_t soak_key(uint64_t seed, uint32_t tag, uint32_t dir, uint32_t a,
		  uint32_t b);
enum { KEY_MSG = 1, KEY_WRITE, KEY_EXP };

/* Out-of-band messages, over a Unix stream socket between the pair. */
#define SOAK_MAGIC   0x736f616bu /* "soak" */
#define SOAK_VERSION 1
enum soak_msg_type { MSG_HELLO = 1, MSG_READY, MSG_DONE, MSG_BYE, MSG_ABORT };
struct soak_msg {
	uint32_t magic;	  /* SOAK_MAGIC */
	uint16_t version; /* SOAK_VERSION */
	uint16_t type;	  /* enum soak_msg_type */
	uint32_t round;	  /* READY, DONE: the round; HELLO: session no. */
	uint32_t kind;	  /* HELLO: enum soak_kind */
	uint32_t nqp;	  /* HELLO: 1..SOAK_MAXQP */
	uint32_t nrounds; /* HELLO: rounds in the session */
	uint32_t lid;	  /* HELLO: our port's LID */
	uint32_t rkey;	  /* HELLO: our MR's rkey */
	uint32_t pid;	  /* HELLO: who we are, for the logs */
	uint32_t mtu;	  /* HELLO: UD payload limit */
	uint64_t seed;	  /* HELLO: the session's seed */
	uint64_t base;	  /* HELLO: our MR's address */
	uint32_t qpn[SOAK_MAXQP];
	uint32_t max_inline; /* HELLO: inline limit of our QPs */
	uint32_t pad;
};
_Static_assert(sizeof(struct soak_msg) == 80, "a wire format");

#endif
