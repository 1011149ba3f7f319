/* SPDX-License-Identifier: MIT */
/*
 * A link: one RC connection as the engine sees it — a transmit direction
 * (packets out, ACK/NAK in) and a receive direction (packets in, ACK/NAK
 * out).  The shared-memory transport (shm.c) provides it with two rings
 * between processes of one host; the TCP transport (tcp.h) provides the
 * same rings, mirrored, between hosts.  Hot calls are inline for the
 * shared-memory case and branch to tcp.c for the other.
 */
#ifndef SV_LINK_H
#define SV_LINK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ring.h"

struct sv_tcp;
struct sv_link;
/* The TCP transport's (tcp.c); the hot calls below branch to it. */
void sv_tcp_flush(struct sv_link *l);
bool sv_tcp_rnr_abort(struct sv_link *l);

enum sv_link_state {
	SV_LINK_IDLE,	    /* not connected (QP before RTR) */
	SV_LINK_CONNECTING, /* we sent our receive ring; no tx yet */
	SV_LINK_UP,	    /* both directions mapped */
	SV_LINK_CLOSED,	    /* the peer said goodbye */
	SV_LINK_DEAD,	    /* the peer vanished (process died) */
};

extern const char *const sv_link_state_names[];

/* Connections whose hello has not arrived yet that we keep waiting for;
 * one that stays silent longer than SV_HELLO_WAIT_NS is dropped. */
#define SV_LINK_PENDING	 4
#define SV_HELLO_WAIT_NS 1000000000ull

struct sv_link {
	enum sv_link_state state;
	struct sv_ring tx;     /* the peer's receive ring: we produce */
	struct sv_ring rx;     /* our receive ring: the peer produces */
	struct sv_ring rsp_tx; /* the peer's response ring: our responder
				* answers its reads and atomics there */
	struct sv_ring rsp_rx; /* our response ring: answers to ours */
	bool tx_ready, rx_ready;
	bool refused_noted;	      /* told stderr of another user */
	int listen_fd;		      /* our QP's listener; holds the QPN */
	int conn_sock;		      /* made at RTR, connected on a try */
	int conn_fd;		      /* ours to the peer's listener: the
				       * peer rings our doorbell on it */
	int acc_fd;		      /* the peer's to our listener: we
				       * ring the peer's doorbell on it */
	int pend_fd[SV_LINK_PENDING]; /* accepted, hello not yet read */
	uint64_t pend_ns[SV_LINK_PENDING]; /* when each was accepted */
	int rx_fd;		  /* memfd of rx, until our hello has it */
	int rsp_rx_fd;		  /* memfd of rsp_rx, likewise */
	int peer_arena_fd;	  /* the peer's shared memory (rmem.c), */
	int peer_table_fd;	  /* and its key table, until attached */
	uint32_t peer_pd;	  /* the peer QP's PD id in that table */
	uint32_t peer_qpn;	  /* whose ring tx is */
	uint64_t next_connect_ns; /* retry time for a failed connect */
	uint64_t connect_wait_ns; /* backoff: doubles, capped */
	uint64_t next_accept_ns;  /* retry time for a failed accept, or 0 */
	struct sv_tcp *tcp;	  /* the TCP transport's state, or NULL: the
				   * rings are then private memory that it
				   * mirrors with the peer's (tcp.h) */
	uint32_t train_max;	  /* the longest packet train the transport
				   * moves best (0: SV_MAX_TRAIN) */
};

/* Room for a packet, or NULL when the ring is full.  Who retries: the
 * app's next poll, or, once it stops polling, our progress thread, which
 * the receiver wakes on freeing space as it wakes it on an ack (tx_sleep). */
static inline void *sv_link_tx_reserve(struct sv_link *l, uint32_t len,
				       int *err)
{
	return sv_ring_reserve(&l->tx, len, err);
}

/* Rings a peer's doorbell: a 1-byte message on the peer's connection to
 * us (it watches that socket from the moment it connects, before its hello
 * is taken), sent with MSG_DONTWAIT, so it never blocks (a full queue:
 * rung enough). */
void sv_link_ring_doorbell(int fd);

/* After a batch of published packets: wakes the peer if it sleeps. */
static inline void sv_link_tx_commit(struct sv_link *l)
{
	if (__builtin_expect(l->tcp != NULL, 0))
		return sv_tcp_flush(l);
	/* seq_cst: records published before we read the flag (Dekker) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&l->tx.hdr->rx_sleep, memory_order_relaxed))
		sv_link_ring_doorbell(l->acc_fd);
}

static inline int sv_link_rx_peek(struct sv_link *l, struct sv_pkt *pkt,
				  const uint8_t **payload)
{
	return sv_ring_peek(&l->rx, pkt, payload);
}

static inline void sv_link_rx_consume(struct sv_link *l)
{
	sv_ring_consume(&l->rx);
}

/* Responder: publish an ACK/NAK word (without a wake-up: see
 * sv_link_rx_done). */
static inline void sv_link_ack_set(struct sv_link *l, uint64_t ack)
{
	atomic_store_explicit(&l->rx.hdr->ack, ack, memory_order_release);
}

/* Responder, after consuming and acking: wakes the requester if it sleeps
 * (it may wait for the ack or for ring space). */
static inline void sv_link_rx_done(struct sv_link *l)
{
	if (__builtin_expect(l->tcp != NULL, 0))
		return sv_tcp_flush(l);
	/* seq_cst: tail/ack published before we read the flag (Dekker) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&l->rx.hdr->tx_sleep, memory_order_relaxed))
		sv_link_ring_doorbell(l->acc_fd);
}

/* Responder: an ACK/NAK right now, with its wake-up. */
static inline void sv_link_ack_put(struct sv_link *l, uint64_t ack)
{
	sv_link_ack_set(l, ack);
	sv_link_rx_done(l);
}

/* Requester: the latest ACK/NAK word from the peer. */
static inline uint64_t sv_link_ack_get(struct sv_link *l)
{
	return atomic_load_explicit(&l->tx.hdr->ack, memory_order_acquire);
}

/* Responder: room for a response (read data, atomic result), or NULL
 * while the peer has not consumed enough of them. */
static inline void *sv_link_rsp_reserve(struct sv_link *l, uint32_t len,
					int *err)
{
	return sv_ring_reserve(&l->rsp_tx, len, err);
}

/* Responder, after publishing responses: wakes the peer if it sleeps. */
static inline void sv_link_rsp_commit(struct sv_link *l)
{
	if (__builtin_expect(l->tcp != NULL, 0))
		return sv_tcp_flush(l);
	/* seq_cst: records published before we read the flag (Dekker) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&l->rsp_tx.hdr->rx_sleep,
				 memory_order_relaxed))
		sv_link_ring_doorbell(l->acc_fd);
}

/* Completer, after consuming responses: wakes the peer's responder if it
 * sleeps waiting for room. */
static inline void sv_link_rsp_done(struct sv_link *l)
{
	if (__builtin_expect(l->tcp != NULL, 0))
		return sv_tcp_flush(l);
	/* seq_cst: tail published before we read the flag (Dekker) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&l->rsp_rx.hdr->tx_sleep,
				 memory_order_relaxed))
		sv_link_ring_doorbell(l->acc_fd);
}

/* Requester: gives up on the packet the responder RNR-NAKed; false if
 * the responder took it meanwhile (its ACK is coming). */
static inline bool sv_link_rnr_abort(struct sv_link *l)
{
	uint32_t expect = SV_RNR_WAIT;

	if (__builtin_expect(l->tcp != NULL, 0))
		return sv_tcp_rnr_abort(l);
	return atomic_compare_exchange_strong(&l->tx.hdr->rnr, &expect,
					      SV_RNR_ABORT);
}

/* Sleep flags: set while the progress thread sleeps for this link. */
void sv_link_set_sleep(struct sv_link *l, bool sleep);

#endif
