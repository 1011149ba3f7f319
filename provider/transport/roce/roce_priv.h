/* SPDX-License-Identifier: MIT */
/*
 * What the files of the RoCEv2 transport share (roce_link.h is its
 * header for the rest of the provider): a link's state and the calls
 * that cross files.
 */
#ifndef SV_ROCE_PRIV_H
#define SV_ROCE_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "roce.h"
#include "roce_link.h"
#include "transport.h"

/* The longest datagram we build: headers, one MTU, pad, ICRC. */
#define SV_ROCE_PKT_MAX (SV_ROCE_HDR_MAX + SV_ROCE_MAX_PMTU + 8)
/* Datagrams taken per look before others get the thread. */
#define SV_ROCE_RX_BATCH 256
/* A socket that took nothing (its buffer full): look again then. */
#define SV_ROCE_RETRY_NS 200000ull

struct sv_roce {
	struct sv_context *ctx;
	struct sv_pfd *pfd;	   /* rx_fd in the context's epoll */
	struct sv_qp_stats *stats; /* our QP's counters */
	int rx_fd;		   /* bound to :4791, connected to the peer */
	int tx_fd;		   /* bound to the pair's source port */
	union sv_sockaddr dst;	   /* the peer's address, port 4791 */
	struct sv_roce_ip ip;	   /* what our packets' ICRC covers */
	struct sv_roce_ip rip;	   /* the peer's, with IP ID 0 */
	uint32_t my_qpn, peer_qpn, mtu;
	uint8_t tp;		    /* SV_IB_RC, or SV_IB_UC: no ACKs */
	uint32_t tx_done;	    /* packets of the tx head record sent */
	uint32_t rsp_done;	    /* ... of the rsp_tx head record */
	uint64_t retry_ns;	    /* the socket was full: send then */
	uint64_t ack_sent;	    /* the last ACK word we sent */
	bool ack_sent_valid;	    /* (any yet) */
	uint32_t epsn;		    /* the next request PSN, as seen here */
	uint32_t msn;		    /* messages the peer sent us, for AETH */
	uint32_t nak_seq;	    /* NAKs the peer sent us (the ack word) */
	bool icrc_strict;	    /* the peer sends IP ID 0: verify all */
	bool defer;		    /* the engine runs: flush at its end */
	uint64_t reads, seen_reads; /* datagrams taken (sv_roce_stalled) */
	size_t held;		    /* a response in `in` waiting for room */
	bool more;		    /* we freed room in tx or rsp_tx */
	uint8_t buf[SV_ROCE_PKT_MAX];
	uint8_t in[SV_ROCE_PKT_MAX + 64];
};

static inline struct sv_roce *sv_roce_of(const struct sv_link *l)
{
	return (struct sv_roce *)l->priv.p;
}

#define roce_count(r, field)                                               \
	__atomic_store_n(                                                  \
		&(r)->stats->field,                                        \
		__atomic_load_n(&(r)->stats->field, __ATOMIC_RELAXED) + 1, \
		__ATOMIC_RELAXED)

/* out.c */
/* Sends what the engine published (requests, responses) and our ACK
 * word when it changed. */
void sv_roce_flush(struct sv_link *l);
/* One datagram built from p to the peer; false if the socket was full
 * (tried again at retry_ns). */
bool sv_roce_send(struct sv_roce *r, const struct sv_roce_pkt *p);
/* Our ACK word again, as an AETH packet (a duplicate's answer). */
void sv_roce_send_ack(struct sv_link *l, uint64_t ack);
/* in.c */
/* Takes what arrived on the link's socket into the rings. */
void sv_roce_read_in(struct sv_link *l);

#endif
