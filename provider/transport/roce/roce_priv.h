/* SPDX-License-Identifier: MIT */
/*
 * What the files of the RoCEv2 transport share (roce_link.h is its
 * header for the rest of the provider): a link's state and the calls
 * that cross files.
 */
#ifndef SV_ROCE_PRIV_H
#define SV_ROCE_PRIV_H

#include <netinet/udp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "roce.h"
#include "roce_link.h"
#include "transport.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103 /* linux/udp.h: a UDP GSO message's segment size */
#endif

/* The longest datagram we build: headers, one MTU, pad, ICRC. */
#define SV_ROCE_PKT_MAX (SV_ROCE_HDR_MAX + SV_ROCE_MAX_PMTU + 8)
/* Datagrams taken per look before others get the thread. */
#define SV_ROCE_RX_BATCH 256
/* Messages per sendmmsg, datagrams per recvmmsg: one system call moves
 * a train (a 16-packet one, and an ACK), where one per packet cost most
 * of the link's time (docs/roce.md "Speed"). */
#define SV_ROCE_BATCH 64
/* SOFTVERBS_FAULTS reorder: a datagram held back waits at most this
 * long for one to overtake it */
#define SV_ROCE_REORDER_NS 1000000ull
/* Reads and atomics taken whose PSNs our ACK word may yet name: the
 * responder's max_dest_rd_atomic at most (SV_MAX_RD_ATOM); a peer that
 * sends more pushes the oldest out (a power of 2) */
#define SV_ROCE_RD_MAX SV_MAX_RD_ATOM
_Static_assert((SV_ROCE_RD_MAX & (SV_ROCE_RD_MAX - 1)) == 0,
	       "SV_ROCE_RD_MAX indexes a ring by mask");
/* The out queue (out.c) holds whole GSO runs, SV_ROCE_OUT_RUNS of them
 * and never fewer datagrams than SV_ROCE_BATCH (sv_roce_out_slots): a
 * queue of 64 at a 1 KiB MTU sent runs of 57 and 7, and GSO messages
 * of 32 datagrams on average; three whole runs gave 1 MiB 15-25 % more
 * bandwidth across two namespaces.  SV_ROCE_OUT_MAX: its most, at the
 * smallest MTU (64 datagrams a run, the kernel's UDP_MAX_SEGMENTS). */
#define SV_ROCE_GSO_SEGS 64 /* a run's most datagrams: UDP_MAX_SEGMENTS */
#define SV_ROCE_OUT_RUNS 3
#define SV_ROCE_OUT_MAX	 (SV_ROCE_OUT_RUNS * SV_ROCE_GSO_SEGS)
/* UDP GRO: buffers per recvmmsg, each room for one bundle (an IPv4
 * datagram's most), of at most 64 segments (the kernel's UDP GRO). */
#define SV_ROCE_GRO_MSGS 4
#define SV_ROCE_GRO_BUF	 65536u
#define SV_ROCE_RX_SEGS	 (SV_ROCE_GRO_MSGS * 64)
#ifndef UDP_GRO
#define UDP_GRO 104 /* linux/udp.h: bundles of segments, their size */
#endif
/* Room past the MTU in a receive slot: a longer datagram is truncated
 * (MSG_TRUNC) and dropped as too long. */
#define SV_ROCE_RX_SLACK 64
/* A socket that took nothing (its buffer full): look again then. */
#define SV_ROCE_RETRY_NS 200000ull
/* How long a plain ACK may wait for the app's reply (out.c ack_waits):
 * the TCP wire's SV_TCP_ACK_DELAY_NS. */
#define SV_ROCE_ACK_DELAY_NS 20000ull
/* ilen of a slot whose datagram went to another link (share.c). */
#define SV_ROCE_GONE UINT32_MAX
/* The most bytes of one message of a relay (share.c): datagrams for a
 * link of another process, each its length and itself. */
#define SV_ROCE_RELAY_MSG SV_ROCE_GRO_BUF
/* Datagrams another link of its group can hold for a link (share.c). */
#define SV_ROCE_MAIL 64u

struct sv_roce {
	struct sv_context *ctx;
	struct sv_pfd *pfd;	   /* rx_fd in the context's epoll */
	struct sv_qp_stats *stats; /* our QP's counters */
	int rx_fd;		   /* bound to :4791, connected to the peer */
	int tx_fd;		   /* bound to the pair's source port */
	union sv_sockaddr dst;	   /* the peer's address, port 4791 */
	struct sv_roce_ip ip;	   /* what our packets' ICRC covers */
	struct sv_roce_ip rip;	   /* the peer's, with IP ID 0 */
	struct sv_roce_idmemo idmemo;	      /* rip's (id_span) */
	struct sv_roce_hdrmemo hmemo, rhmemo; /* ip's, rip's */
	uint32_t my_qpn, peer_qpn, mtu;
	uint8_t tp;	     /* SV_IB_RC, _UC (no ACKs), _XRC */
	uint32_t tx_done;    /* packets of the tx head record sent */
	uint32_t rsp_done;   /* ... of the rsp_tx head record */
	uint64_t retry_ns;   /* the socket was full: send then */
	uint64_t ack_sent;   /* the last ACK word we sent */
	bool ack_sent_valid; /* (any yet) */
	uint32_t epsn;	     /* the next request PSN, as seen here */
	uint32_t msn;	     /* messages the peer sent us, for AETH */
	/* the PSNs of the reads and atomics taken that our ACK word has not
	 * passed, oldest first (sv_roce_answered_by_response): a response
	 * acknowledges them, never a bare ACK */
	struct sv_roce_rd {
		uint32_t first, last;
	} rdq[SV_ROCE_RD_MAX];
	uint32_t rdq_head, rdq_tail; /* (free-running: tail - head kept) */
	uint32_t nak_seq;	     /* NAKs the peer sent us (the ack word) */
	bool defer;		     /* the engine runs: flush at its end */
	bool lazy;		     /* the app's poll runs us (set_lazy) */
	uint64_t ack_owed_ns;	     /* a plain ACK waits since (0: none) */
	bool ack_alone; /* the last that waited left alone: no reply comes
			 * (a stream's receiver); none waits until we send
			 * a request again */
	/* datagrams taken, and whether the thread takes each arrival,
	 * driven or not (link.h, roce_stalled) */
	struct sv_readers rd;
	bool more; /* we freed room in tx or rsp_tx */
	/* out.c: datagrams built, not yet taken by the socket, olen[k]
	 * bytes at obuf + ooff[k], back to back in the order built (oend
	 * bytes in all; omax datagrams of oslot bytes at most):
	 * [ohead, ocount) go first at the next flush */
	uint8_t *obuf;
	uint32_t oslot, omax, ohead, ocount; /* omax: sv_roce_out_slots */
	uint32_t oend;
	uint32_t olen[SV_ROCE_OUT_MAX];
	uint32_t ooff[SV_ROCE_OUT_MAX];
	/* UDP GSO: consecutive datagrams of one length (the last of them
	 * may be shorter) leave as one super-packet, which the kernel or
	 * the NIC cuts into them with IPv4 IDs 0, 1, 2...: oseg is each
	 * one's place in its run, the ID its ICRC was made for */
	uint8_t oseg[SV_ROCE_OUT_MAX];
	bool gso; /* the kernel takes UDP_SEGMENT, and the user allows it */
	/* SOFTVERBS_FAULTS reorder_out: the queue's order was drawn (once
	 * a queue, until it empties); oseq: datagrams drawn for */
	bool oreordered;
	uint32_t oseq;
	/* in.c: datagrams read by one recvmmsg, at iptr: slots of islot
	 * bytes in ibuf, or segments of the UDP GRO bundles in gbuf;
	 * [inext, icount) not taken yet (inext: a response waiting for
	 * room in our response ring); ifull: the read filled every buffer,
	 * more may wait */
	uint8_t *ibuf, *gbuf;
	uint32_t islot, inext, icount;
	bool gro; /* rx_fd has UDP_GRO: gbuf, SV_ROCE_GRO_MSGS bundles */
	bool ifull;
	uint32_t ilen[SV_ROCE_RX_SEGS];
	uint8_t *iptr[SV_ROCE_RX_SEGS];
	/* SOFTVERBS_FAULTS reorder: a datagram held back (hold_len bytes
	 * at hold, since hold_ns), taken after the next one that comes,
	 * or by itself SV_ROCE_REORDER_NS later */
	uint8_t *hold;
	uint32_t hold_len;
	uint64_t hold_ns;
	/* share.c: the four-tuple of rx_fd, our place among the process's
	 * links (listed, snext), whether another has it too (shared: we
	 * read under its lock), and the datagrams another member read for
	 * us (mail: mail_n from mail_head, in slots of islot bytes) */
	union sv_sockaddr key_me, key_peer;
	union sv_sockaddr bind_me; /* what rx_fd is bound to (port 4791) */
	uint16_t sport;
	bool listed;
	int claim_fd; /* the four-tuple's claim for this process; -1 for a
		       * relayed link */
	/* another process has the four-tuple: rx_fd is our connection to
	 * its claim, which relays what its socket reads for our QPN
	 * (share.c); orphan: that process let go of it (EOF), and the link
	 * takes the four-tuple over at its next read (sv_roce_share_rejoin) */
	bool relayed, orphan;
	bool relay_owed; /* we relayed datagrams: flush at our batch's end */
	atomic_bool shared;
	struct sv_roce *snext;
	uint8_t *mail;
	uint32_t mail_head;
	_Atomic uint32_t mail_n;
	uint32_t mail_len[SV_ROCE_MAIL];
};

static inline struct sv_roce *sv_roce_of(const struct sv_link *l)
{
	return (struct sv_roce *)l->priv.p;
}

#define roce_count(r, field) sv_stats_add((r)->stats, field, 1)

/* conn.c */
/* r, an orphan (share.c), takes its four-tuple over: its socket in the
 * context's epoll again (said on stderr if it cannot: deaf, it lets its
 * peer's retries and its own run out). */
void sv_roce_orphaned(struct sv_roce *r);
/* out.c */
/* Sends what the engine published (requests, responses) and our ACK
 * word when it changed. */
void sv_roce_flush(struct sv_link *l);
/* An ACK waits for the app's reply (lazy): since long enough that the
 * thread must send it (now), or at all (now UINT64_MAX). */
bool sv_roce_owed(const struct sv_link *l, uint64_t now);
/* One datagram built from p to the peer, queued for the next
 * sendmmsg (sv_roce_push); false if the queue is full and the socket
 * took none of it (tried again at retry_ns). */
bool sv_roce_send(struct sv_roce *r, const struct sv_roce_pkt *p);
/* The out queue's datagrams for a path MTU of mtu bytes (omax): whole
 * GSO runs of full-MTU datagrams, SV_ROCE_OUT_RUNS of them or more. */
uint32_t sv_roce_out_slots(uint32_t mtu);
/* Sends what sv_roce_send queued while the socket takes it; false if
 * some waits (the socket was full: retry_ns). */
bool sv_roce_push(struct sv_roce *r);
/* Our ACK word as an AETH packet, queued; false if the queue is full
 * and the socket took none of it. */
bool sv_roce_send_ack(struct sv_link *l, uint64_t ack);
/* in.c */
/* Takes what arrived on the link's socket into the rings. */
void sv_roce_read_in(struct sv_link *l);
/* share.c: the link's sockets, and the receive socket shared by links
 * of one four-tuple */
/* A UDP socket bound to addr (port included) that shares it: -errno. */
int sv_roce_udp_socket(const union sv_sockaddr *addr);
/* What waits on the socket, up to SV_ROCE_BATCH datagrams or
 * SV_ROCE_GRO_MSGS bundles, at iptr: how many datagrams, 0 when none
 * waits (ifull: there may be more). */
int sv_roce_recv(struct sv_roce *r);
/* r's receive socket (rx_fd): a new one bound to me and connected to
 * peer, or a duplicate of the socket of the link of this process that
 * has that four-tuple already (the two then pass each other what they
 * read), or, when another process has it, a connection to that
 * process's claim, which relays what is ours (relayed); r joins the
 * process's links.  -errno (said on stderr when it is about the other
 * process). */
int sv_roce_share_open(struct sv_roce *r, const union sv_sockaddr *me,
		       const union sv_sockaddr *peer, uint16_t sport);
/* r leaves the process's links (before rx_fd closes). */
void sv_roce_share_close(struct sv_roce *r);
/* A datagram of n bytes at d, checked, for QPN qpn, which is not r's
 * and no link's that shares r's socket: passed to the link of another
 * process that has the four-tuple through r's claim (share.c), if one
 * has asked for it.  Whether it went. */
bool sv_roce_share_relay(struct sv_roce *r, const uint8_t *d, uint32_t n,
			 uint32_t qpn);
/* What sv_roce_share_relay kept for r's relays goes (at the end of the
 * reader's batch: in.c sv_roce_read_in). */
void sv_roce_share_flush(struct sv_roce *r);
/* An orphan (a relayed link whose relaying process let go): rx_fd, its
 * number kept, becomes the four-tuple's socket again, as at
 * sv_roce_share_open (ours, a duplicate of a link of this process, or a
 * connection to the process that took it first).  The caller takes
 * rx_fd out of its epoll before and puts it back after.  -errno. */
int sv_roce_share_rejoin(struct sv_roce *r);
/* sv_roce_recv for a link that shares its socket: our mailbox first,
 * else the socket, passing on what is another member's; whether more
 * may wait. */
bool sv_roce_share_read(struct sv_roce *r);
/* A datagram read and not taken yet waits (sv_roce_read_in). */
static inline bool sv_roce_held(const struct sv_roce *r)
{
	return r->inext < r->icount;
}

/* When the datagram SOFTVERBS_FAULTS reorder holds back is taken by
 * itself, if none overtakes it (UINT64_MAX: none held). */
static inline uint64_t sv_roce_hold_due(const struct sv_roce *r)
{
	return r->hold_len ? r->hold_ns + SV_ROCE_REORDER_NS : UINT64_MAX;
}

/*
 * ack names the PSN of a read or an atomic we took: its response says it
 * (IBA 9.7.5.1.1: a read request is acknowledged by its response).  A
 * bare ACK there makes rxe complete the read without its data, which it
 * drops when that response came out of order.  Each taken one is kept
 * until the word passes it, so an ACK word for the second of three reads
 * in flight (the responder's answers wait for room) is known too.
 */
bool sv_roce_answered_by_response(struct sv_roce *r, uint64_t ack);
void sv_roce_rd_taken(struct sv_roce *r, uint32_t first, uint32_t npsn);

#endif
