/* SPDX-License-Identifier: MIT */
/*
 * UD lanes (lane.c): a shared-memory path for UD datagrams between
 * processes of this host, one lane per (sending context, destination UD
 * QP).  The sender makes the lane (a sealed memfd) and offers it with its
 * first datagram to that QP (SCM_RIGHTS on the QP's socket); the receiver
 * checks and maps it and says ACCEPTED in its header; from then on the
 * sender writes its datagrams into the lane's slots and the receiver's
 * poll takes them with no system call.  The lane's records are the
 * socket's datagrams (wire.h struct sv_ud_hdr + payload), checked the same
 * way.  Everything in a lane but the slots' records comes from our own
 * constants: the producer may write anything anywhere in it.
 */
#ifndef SV_LANE_H
#define SV_LANE_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "wire.h"

#define SV_LANE_MAGIC	 0x5356554cu /* "SVUL" */
#define SV_LANE_VERSION	 1
#define SV_LANE_SLOTS	 64u /* records in flight, a power of two */
#define SV_LANE_SLOT	 (sizeof(struct sv_ud_hdr) + SV_UD_MTU)
#define SV_LANE_DATA_OFF 4096u
#define SV_LANE_BYTES	 (SV_LANE_DATA_OFF + SV_LANE_SLOTS * SV_LANE_SLOT)
/* Lanes a UD QP takes (past it, senders stay on the socket), and lanes a
 * context keeps to destinations (past it, the least recently used goes). */
#define SV_LANES_PER_QP	 64u
#define SV_LANES_PER_CTX 256u

/* The lane's state word: written by the receiver only. */
enum sv_lane_state {
	SV_LANE_OFFERED = 0,  /* made by the sender, not (yet) taken */
	SV_LANE_ACCEPTED = 1, /* the receiver polls it: use it */
	SV_LANE_CLOSED = 2,   /* the receiver QP is gone, or reaped the lane:
			       * what is written is lost; use the socket */
	SV_LANE_REFUSED = 3,  /* the receiver takes no lane (lanes off, or
			       * full): use the socket */
};

/*
 * The lane's header, then SV_LANE_SLOTS slots of SV_LANE_SLOT bytes at
 * SV_LANE_DATA_OFF.  Record n (from 0) is in slot n % SV_LANE_SLOTS: a
 * struct sv_ud_hdr whose rsvd word is the record's seq, (uint32_t)(n + 1),
 * written last with release, then its payload.  There is no producer
 * index: the receiver polls the seq of the slot at its tail.
 */
struct sv_lane_hdr {
	/* Written once by the sender before the offer. */
	uint32_t magic;	    /* SV_LANE_MAGIC */
	uint32_t version;   /* SV_LANE_VERSION: bump on any layout change */
	uint32_t slots;	    /* SV_LANE_SLOTS */
	uint32_t slot_size; /* SV_LANE_SLOT */
	uint32_t dst_qpn;   /* the QP it is offered to */
	uint32_t rsvd0[11];
	/* Written by the receiver (state) or the sender (tx_closed), rarely:
	 * their own line, so the sender's check per send is a cache hit. */
	_Alignas(64) _Atomic uint32_t state; /* enum sv_lane_state */
	_Atomic uint32_t tx_closed; /* the sender's context closed: nothing
				     * more comes, the receiver may unmap */
	uint32_t rsvd1[14];
	/* Written by the receiver for every record it takes. */
	_Alignas(64) _Atomic uint64_t tail; /* records consumed */
	uint64_t rsvd2[7];
	/* Written by the receiver when its progress thread sleeps or wakes
	 * for the QP (as a ring's rx_sleep): the sender then rings the QP's
	 * socket with an empty datagram after a record. */
	_Alignas(64) _Atomic uint32_t rx_sleep;
	uint32_t rsvd3[15];
};
static_assert(sizeof(struct sv_lane_hdr) == 256, "shared layout is ABI");
static_assert(offsetof(struct sv_lane_hdr, state) == 64, "shared layout");
static_assert(offsetof(struct sv_lane_hdr, tail) == 128, "shared layout");
static_assert(offsetof(struct sv_lane_hdr, rx_sleep) == 192, "shared layout");
static_assert(offsetof(struct sv_ud_hdr, rsvd) == 28, "the seq word");
static_assert(SV_LANE_SLOT % 64 == 0, "slots are cache-line aligned");

/* The record seq of slot position n: never 0, the word of a new lane. */
static inline uint32_t sv_lane_seq(uint64_t n)
{
	return (uint32_t)(n + 1);
}

/* A receiver's lane: what it mapped, and its own copy of the tail. */
struct sv_lane_rx {
	struct sv_lane_hdr *hdr; /* the mapping, SV_LANE_BYTES */
	uint64_t tail;		 /* next record to take (never re-read) */
	pid_t pid;		 /* the offering process (SCM_CREDENTIALS) */
	dev_t dev;		 /* the memfd's identity: a second offer of */
	ino_t ino;		 /* the same lane is not a second lane */
};

#endif
