/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory ring: one direction of one RC connection.  The
 * receiver creates it (a sealed memfd) and hands it to the sender, so a
 * sender can never make a receiver's mapping shrink under it.  Records are
 * 64-byte aligned packets (wire.h); the receiver's consumer index doubles
 * as flow control, and the ack word carries ACK/NAK back to the sender.
 *
 * Record boundaries.  The receiver learns that a record is complete by
 * polling its seq word (wire.h: offset 28 of its first line) at its tail
 * until it equals sv_rec_seq(tail).  Until the sender stores that seq,
 * the word holds whatever the previous lap left there, and a previous
 * lap's payload may hold any value: honest payload bytes must never be
 * read as a record.  So before the sender releases a record ending at end
 * (where the next record, or a pad, will start), it has stored
 * ~sv_rec_seq(end) in the seq word of the line at end (sv_ring_poison), so
 * the receiver sees it before it can reach end; a pad does the same for
 * offset 0 of the next lap.  Usually the previous publish did it, one
 * line ahead, while the peer had yet to answer (sv_ring_publish); else
 * sv_ring_reserve does.  The receiver's tail only ever moves to the ends
 * of records it consumed, so the word it polls is always one of:
 *  - zero, at position 0 of a new ring (its seq is 1);
 *  - the invalidation ~sv_rec_seq(tail), or one of an older lap,
 *    ~sv_rec_seq(tail - k * size): never sv_rec_seq(tail), as x == ~y
 *    needs x + y == 2^32 - 1, odd, while x + y is 2x - k * (size >> 6),
 *    even (size >> 6 is);
 *  - when the ring was exactly full after the record ending at tail, the
 *    line was not free (it held the oldest unconsumed record's header, so
 *    the sender left it alone): that header's seq, sv_rec_seq(tail -
 *    size), which differs by size >> 6 (< 2^32);
 *  - the real record's seq, written last, with release.
 * Payload is never in that word, whatever the payloads were.  Cost: one
 * 4-byte store per record, into a line the sender writes soon anyway,
 * and a second one, on the critical path, when the record is longer
 * than a line (its copy hides that line's cache miss).
 */
#ifndef SV_RING_H
#define SV_RING_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"
#include "wire.h"

#define SV_RING_MAGIC	 0x53567247u /* "SVrG" */
#define SV_RING_VERSION	 7	     /* 7: receive descriptors */
#define SV_RING_DATA_OFF 4096u
#define SV_REC_ALIGN	 64u
/* An emptied ring starts over from an eighth of a lap, at least this far
 * into it (ring.c rewind_now) */
#define SV_RING_REWIND 16384u

/* ack word: psn[0:24] syndrome[24:32] rnr_timer[32:40] nak_seq[40:64] */
#define SV_ACK_PSN(a)	((uint32_t)(a)&SV_PSN_MASK)
#define SV_ACK_SYN(a)	((uint32_t)((a) >> 24) & 0xff)
#define SV_ACK_TIMER(a) ((uint32_t)((a) >> 32) & 0xff)
#define SV_ACK_SEQ(a)	((uint32_t)((a) >> 40))
/* The ack word before the first ACK: a syndrome no responder sends. */
#define SV_ACK_NONE (0xffull << 24)

/* The responder's ack word (decoded by SV_ACK_* above). */
static inline uint64_t sv_ack_word(uint32_t psn, uint32_t syn, uint32_t timer,
				   uint32_t seq)
{
	return (psn & SV_PSN_MASK) | (uint64_t)(syn & 0xff) << 24 |
	       (uint64_t)(timer & 0xff) << 32 |
	       (uint64_t)(seq & 0xffffff) << 40;
}

/* The last PSN a word acknowledges: an ACK's own, a NAK's the one
 * before it (IBA 9.7.5.2: a NAK acknowledges what precedes it). */
static inline uint32_t sv_ack_acked_psn(uint64_t a)
{
	return SV_ACK_SYN(a) == SV_ACK ? SV_ACK_PSN(a)
				       : sv_psn_add(SV_ACK_PSN(a), SV_PSN_MASK);
}

/* rnr word: the RNR handshake for the packet at the ring's tail. */
enum sv_rnr_state {
	SV_RNR_NONE = 0,  /* no RNR NAK outstanding */
	SV_RNR_WAIT = 1,  /* NAKed; the responder may still take it */
	SV_RNR_ABORT = 2, /* the requester gave up; drop it */
};

struct sv_ring_hdr {
	/* Written once by the receiver before the fd is shared. */
	uint32_t magic;	   /* catches a mapping that is not ours */
	uint32_t version;  /* bump on any layout change */
	uint64_t size;	   /* data bytes, a power of two */
	uint64_t data_off; /* offset of the data: peers map at will */
	uint32_t rx_qpn;   /* QPN of the receiving QP */
	/* Written by the receiver whenever its QP's access flags change:
	 * what one-sided operations the sender may execute itself in the
	 * receiver's memory (IBV_ACCESS_REMOTE_*; rmem.c). */
	_Atomic uint32_t qp_access;
	uint32_t ndesc;	   /* receive descriptors after the data (a power
			    * of two, or 0: none), see struct sv_rdesc */
	uint64_t desc_off; /* their offset: data_off + size */
	uint32_t rsvd0[4];
	/* Unused: the receiver polls each record's own seq, so there is no
	 * producer index to publish (nor for a peer to lie about). */
	_Alignas(64) uint64_t rsvd1[8];
	/* Written by the receiver (responder) for every packet, except rnr
	 * (a CAS by either side, rare). */
	_Alignas(64) _Atomic uint64_t tail; /* bytes ever consumed */
	_Atomic uint64_t ack;		    /* latest ACK/NAK, see SV_ACK_* */
	_Atomic uint32_t rnr;		    /* enum sv_rnr_state */
	uint32_t rsvd2[11];
	/* Written only when a progress thread goes to sleep or wakes: on a
	 * line of their own, so checking them after every packet is a
	 * cache hit and does not steal the lines above. */
	_Alignas(64) _Atomic uint32_t rx_sleep; /* receiver asleep: doorbell
						 * on data */
	_Atomic uint32_t tx_sleep; /* sender asleep: doorbell on ack
				    * or on freed space */
	uint32_t rsvd3[14];
};
static_assert(sizeof(struct sv_ring_hdr) == 256, "shared layout is ABI");
static_assert(offsetof(struct sv_ring_hdr, tail) == 128, "shared layout");
static_assert(offsetof(struct sv_ring_hdr, rx_sleep) == 192, "shared layout");

/*
 * A posted receive WQE as the receiver shows it to the sender, so that a
 * send can place its payload straight into the receive buffer (req.c:
 * single copy).  Slot i % ndesc holds the receiver's i-th posted receive;
 * the receiver writes it at post time, seq last.  The sender claims it
 * by a CAS of seq from i + 1 to 0 before reading the rest; a receiver on
 * an SRQ takes back a WQE it lent only by the same CAS (srq.c unshow).
 * Only the sender reads the rest, for its own sends: whatever it writes
 * here can only misdirect its own data, or keep its own QP's lent WQEs
 * from being taken back; the receiver reads no other word.
 */
#define SV_RDESC_SGE 7
struct sv_rdesc {
	_Atomic uint32_t seq; /* i + 1 once receive i is described */
	uint32_t nsge;	      /* pieces below; 0: not placeable (a piece
			       * is not in the receiver's shared memory) */
	uint32_t length;      /* bytes the receive takes, at most */
	uint32_t rsvd;
	struct {
		uint64_t off; /* offset in the receiver's arena (rmem.c) */
		uint64_t len; /* bytes */
	} sge[SV_RDESC_SGE];
};
static_assert(sizeof(struct sv_rdesc) == 128, "shared layout is ABI");

/* One process's view of a ring: local copies of what must not change. */
struct sv_ring {
	struct sv_ring_hdr *hdr;
	uint8_t *data;
	uint64_t size;	       /* copied at attach; never re-read */
	uint64_t head;	       /* sender: next byte to write */
	uint64_t last_pos;     /* sender: position of the last reserved */
	uint32_t last_rec;     /* sender: its length, for its header */
	uint64_t tail_cache;   /* sender: last tail seen */
	uint64_t poisoned;     /* sender: the last position whose seq word
				* sv_ring_poison wrote (valid if >= head) */
	uint64_t rewind_at;    /* sender: head from which an emptied ring
				* is started over next (sv_ring_reserve) */
	bool no_rewind;	       /* sender: never started over early (a
				* producer that cannot wait for room) */
	uint64_t tail;	       /* receiver: next byte to read */
	uint32_t cur_rec;      /* receiver: validated length of the peeked */
	struct sv_rdesc *desc; /* receive descriptors, ndesc of them */
	uint32_t ndesc;	       /* copied at attach; never re-read */
	size_t map_len;
};

/* Receiver side: a new ring in a sealed memfd, with ndesc receive
 * descriptors (0 or a power of two); *fd is ours to pass on. */
int sv_ring_create(struct sv_ring *r, uint64_t size, uint32_t ndesc,
		   uint32_t rx_qpn, int *fd);
/* Sender side: validate and map a ring received from a peer. */
int sv_ring_attach(struct sv_ring *r, int fd, uint32_t rx_qpn);
void sv_ring_unmap(struct sv_ring *r);

/* Sender: contiguous room for a record of `len` bytes (header+payload),
 * whose length rounded up lands in r->last_rec, or NULL when the ring is
 * full.  The caller fills the record, header last, then publishes it
 * before the next reserve (the seq word after it is poisoned by then).
 * -EPROTO in *err if the peer corrupted the consumer index. */
void *sv_ring_reserve(struct sv_ring *r, uint32_t len, int *err);
/*
 * Sender: stores in the seq word of the line at pos a value no record
 * there can carry (see the top of this file).  Only for a free line: the
 * receiver must have consumed pos - size.
 */
static inline void sv_ring_poison(struct sv_ring *r, uint64_t pos)
{
	uint8_t *line = r->data + (pos & (r->size - 1));

	/* relaxed: the release of the record ending at pos publishes it */
	atomic_store_explicit(
		(_Atomic uint32_t *)(line + offsetof(struct sv_pkt, seq)),
		~sv_rec_seq(pos), memory_order_relaxed);
	r->poisoned = pos;
}

/* Sender: the record at ring position pos is complete. */
static inline void sv_ring_release(struct sv_pkt *p, uint64_t pos)
{
	/* release: every byte of the record, and the poisoned seq word
	 * where the next one starts (sv_ring_reserve), before its seq;
	 * TSan: also what the sender did before, for a receiver of this
	 * process whose mapping is at another address (util.h) */
	sv_tsan_sent();
	atomic_store_explicit((_Atomic uint32_t *)&p->seq, sv_rec_seq(pos),
			      memory_order_release);
}

/* Sender: the record from the last sv_ring_reserve is complete. */
static inline void sv_ring_publish(struct sv_ring *r, struct sv_pkt *p)
{
	uint64_t ahead = r->head + SV_REC_ALIGN;

	sv_ring_release(p, r->last_pos);
	/* Where the record after the next ends if it is one line: poisoned
	 * now, off the critical path (the peer has yet to see and answer
	 * this one), the next reserve of one line finds it done instead of
	 * waiting for that line's cache miss before its release. */
	if (ahead - r->tail_cache < r->size)
		sv_ring_poison(r, ahead);
}

/*
 * Receiver: the next packet.  Copies its header into *pkt (the sender
 * cannot change it under us afterwards) and points *payload at pkt->len
 * bytes inside the ring.  Returns 1, 0 when the ring is empty, or -EPROTO
 * when the sender wrote something that is not a packet.
 */
int sv_ring_peek(struct sv_ring *r, struct sv_pkt *pkt,
		 const uint8_t **payload);
/* Receiver: done with the packet sv_ring_peek returned. */
void sv_ring_consume(struct sv_ring *r);

/* Receiver: whether a record (or a pad) waits at the tail, what
 * sv_ring_peek would look at first: one load, nothing read beyond it. */
static inline bool sv_ring_ready(const struct sv_ring *r)
{
	const struct sv_pkt *p =
		(const struct sv_pkt *)(r->data + (r->tail & (r->size - 1)));

	return atomic_load_explicit((_Atomic uint32_t *)&p->seq,
				    memory_order_relaxed) ==
	       sv_rec_seq(r->tail);
}

#endif
