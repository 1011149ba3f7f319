/* SPDX-License-Identifier: MIT */
/*
 * A link: one connected QP's connection as the engine sees it — a
 * transmit direction (packets out, ACK/NAK in) and a receive direction
 * (packets in, ACK/NAK out), each a ring (ring.h).  A transport provides
 * it through one ops table (struct sv_link_ops): the shared-memory
 * transport (shm.c) maps the peer's rings between processes of one host;
 * the TCP transport (tcp/) keeps private rings and mirrors them between
 * hosts.  Nothing outside transport/ names a transport: the verbs objects,
 * the engine and the loop call the ops (or the sv_link_* functions of
 * link.c), and sv_transport_for picks the ops at RTR.  Hot calls are
 * inline for shared memory (one compare, no indirect call) and go through
 * the ops for the others.
 *
 * Common to every transport (link.c): the QP's address, an abstract Unix
 * socket named after its QPN (the listener: it allocates the QPN, takes a
 * shared-memory peer's hello, and the TCP door's passed callers), the
 * transport mode and ports, doorbells and sleep flags.
 */
#ifndef SV_LINK_H
#define SV_LINK_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ring.h"

struct sv_link;
struct sv_context;
struct sv_pfd;
struct sv_qp_stats;
union sv_sockaddr;

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

#define SV_QPN_ANY 0xffffffffu

/*
 * The QP's address and what comes through it (a test's hostile peer
 * speaks it too).  A QP's socket is an abstract Unix name; a message
 * carries SCM_RIGHTS fds.
 */
#define SV_HELLO_MAGIC	 0x5356686cu /* "SVhl" */
#define SV_HELLO_VERSION 4	     /* 4: doorbells on the connection */

/* A QP's socket type: connections (hang-up = death) that keep message
 * boundaries, so a doorbell is one 1-byte message and never a stream. */
#define SV_LINK_SOCK SOCK_SEQPACKET

/* The kind of a message on a QP's socket: each is one transport's
 * (sv_link_ops.msg_type), which takes it (sv_link_ops.take). */
enum sv_msg_type {
	SV_MSG_HELLO = 1, /* shm.c: carries [ring memfd, response ring
			   * memfd] and, when the sender shares its
			   * registered memory, [arena memfd, key table] */
	SV_MSG_BYE = 2,	  /* orderly close: the peer QP is going */
	SV_MSG_TCP = 3,	  /* from our user's TCP door (tcp/door.c): a
			   * caller from the network for this QP; carries
			   * its socket and, after the hello, its struct
			   * sv_tcp_hello */
	SV_MSG_ROCE = 4,  /* never sent: a RoCE link has no hello (its
			   * take refuses whatever claims it) */
};

/* Any 1-byte message on a connection is a doorbell: the sender published
 * something in a ring we share with it (or freed room in one). */
#define SV_DOORBELL_LEN 1

struct sv_hello {
	uint32_t magic;	  /* SV_HELLO_MAGIC */
	uint16_t version; /* SV_HELLO_VERSION */
	uint16_t type;	  /* enum sv_msg_type */
	uint32_t src_qpn; /* the sender's QPN */
	uint32_t dst_qpn; /* the QPN it believes it talks to */
	uint32_t pd_id;	  /* the sender QP's PD in its key table */
	uint32_t rsvd;
};
static_assert(sizeof(struct sv_hello) == 24, "wire ABI");

#define SV_HELLO_FDS  4	  /* the most fds a message carries */
#define SV_HELLO_BODY 104 /* the most bytes after the hello (TCP's) */

/* The abstract socket name of QP qpn: per network namespace, no file. */
static inline socklen_t sv_link_qp_addr(struct sockaddr_un *a, uint32_t qpn)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* sun_path[0] = 0: the abstract namespace, per network namespace */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "softverbs/qp/%06x", qpn);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* The smallest response ring we make: a quarter of it (the responder's
 * train, resp.c) holds one MTU of the largest path MTU, 4096. */
#define SV_RSP_RING_MIN 16384u

/* What the QP tells its transport at RTR (sv_link_prepare). */
struct sv_link_conf {
	struct sv_context *ctx;
	uint32_t my_qpn, peer_qpn;
	uint64_t ring_size; /* the receive ring's, a power of two */
	uint32_t ndesc;	    /* receive descriptors (single-copy sends) */
	uint32_t pd_id;	    /* the QP's PD in our key table (rmem.c) */
	bool share_mem;	    /* offer our registered memory to the peer */
	/* network transports: where the peer is (port included) and our
	 * source address (port 0; AF_UNSPEC: the kernel's choice) */
	const union sv_sockaddr *dst, *src;
	/* the QP's connection watches: pfd_conn (the loop drains it, the
	 * link's doorbell or socket) and pfd_acc (shared memory: the peer's
	 * connection; TCP: a caller that proves itself) */
	struct sv_pfd *pfd_conn, *pfd_acc;
	struct sv_qp_stats *stats; /* where the link counts its calls */
	uint32_t mtu;	 /* the QP's path MTU: a packet transport's segment */
	uint32_t rq_psn; /* the first PSN the peer sends us */
	bool uc;	 /* an unreliable connection: no ACKs (RoCE) */
	bool xrc;	 /* an XRC_SEND or XRC_RECV QP: XRCETH (RoCE) */
	uint32_t flow_label; /* the address vector's (RoCE: the UDP source
			      * port is its, if not 0) */
};

/*
 * A transport: what the verbs objects, the engine and the loop need of a
 * connected QP's link.  Every entry may be NULL where it says so (then
 * the link needs nothing there).  All are called under the QP's lock.
 */
struct sv_link_ops {
	const char *name;
	/* Packets may be lost, duplicated or reordered on the way (RoCE):
	 * the requester resends from its WQEs on NAK-seq, ACK timeout and
	 * RNR timer, as the IBA's, and the completer drops answers that are
	 * not the next it awaits (comp.c).  false: a lossless transport
	 * (shared memory; TCP, which resends itself). */
	bool lossy;
	uint16_t msg_type; /* what it takes on the QP's socket */
	size_t msg_body;   /* the bytes after such a hello (<=
			    * SV_HELLO_BODY) */
	/* Makes the link's resources at RTR (rings, sockets), so running
	 * out is modify_qp's error.  -errno. */
	int (*prepare)(struct sv_link *l, const struct sv_link_conf *c);
	/* A message of msg_type on the QP's socket (sock: the connection it
	 * came on; fds: its rights; body: what followed the hello).
	 * 1: taken (the link now owns sock), 0: nothing new, else -errno
	 * (the caller closes sock and whatever fds remain >= 0). */
	int (*take)(struct sv_link *l, int sock, const struct sv_hello *h,
		    int *fds, int nfds, const void *body, uint32_t my_qpn,
		    uint32_t expect);
	/* Holds (hold) or gives up a spare fd around the listener's
	 * accepts, so a caller's socket always finds room.  May be NULL. */
	void (*spare)(struct sv_link *l, bool hold);
	/* After the listener's accepts (got: their result): connects, moves
	 * the link to UP when both directions are there.  -errno when the
	 * link cannot come up. */
	int (*step)(struct sv_link *l, int got, uint32_t my_qpn,
		    uint32_t expect, uint64_t now);
	/* The peer's shared registered memory, once: 1 and its fds (the
	 * caller's to close) and PD, else 0.  May be NULL. */
	int (*peer_memory)(struct sv_link *l, int *arena_fd, int *table_fd,
			   uint32_t *pd);
	/* Moves a link that lives by itself on (reads, sends, connects
	 * again): its state now.  NULL: the link needs no run. */
	enum sv_link_state (*run)(struct sv_link *l, uint32_t peer_qpn,
				  uint64_t ack_timeout_ns, uint64_t down_max_ns,
				  uint64_t now);
	/* What arrived on one of the link's sockets (fd; -1: its doorbell
	 * connection): the new link state. */
	enum sv_link_state (*check)(struct sv_link *l, int fd);
	/* After a batch published in tx, rsp_tx, or consumed from rx,
	 * rsp_rx: sends or wakes the peer (sv_link_tx_commit...). */
	void (*flush)(struct sv_link *l);
	/* The requester gives up an RNR'd packet (sv_link_rnr_abort). */
	bool (*rnr_abort)(struct sv_link *l);
	/* The ACK timer ran out with the link up.  May be NULL. */
	void (*retransmit)(struct sv_link *l);
	/* An ACK timeout is not a try yet: nothing went out (comp.c).
	 * May be NULL (false). */
	bool (*setup_waits)(const struct sv_link *l, uint64_t now);
	/* When the link next needs a look (UINT64_MAX: on events). */
	uint64_t (*next_ns)(const struct sv_link *l, uint64_t now);
	/* A link that runs (run != NULL), as a poll of a CQ of its QP
	 * would run it: true when that run would only read its connection
	 * and find nothing, because the connection is in the CQ's readiness
	 * set (a poll that found it readable there runs it) and nothing else
	 * waits — nothing to send, no state owed, no call or caller in
	 * progress.  Joins set when its connection is not in it yet (false
	 * that time), and leaves it before closing that connection.  NULL:
	 * never idle, every poll runs the link (engine/drive.c). */
	bool (*idle)(struct sv_link *l, int set);
	/* Around one run of the engine (sv_qp_run).  May be NULL. */
	void (*run_begin)(struct sv_link *l);
	void (*run_end)(struct sv_link *l);
	/* The app drives the QP: our state may wait (lazy), the loop stops
	 * watching (quiet) unless reads stall, and pushes what is owed.
	 * May be NULL. */
	void (*set_lazy)(struct sv_link *l, bool lazy);
	bool (*owed)(const struct sv_link *l, uint64_t now);
	bool (*stalled)(struct sv_link *l);
	void (*quiet)(struct sv_link *l, bool quiet);
	/* Says goodbye if bye, and closes the transport's own resources;
	 * the rings and the listener are link.c's (sv_link_close). */
	void (*close)(struct sv_link *l, uint32_t my_qpn, bool bye);
	/* The context's state of the transport (a door), on the context's
	 * close.  May be NULL. */
	void (*ctx_close)(struct sv_context *ctx);
	/* When the transport's context-level fds (a door, which registers
	 * its own callbacks in the loop) next need a look.  May be NULL. */
	uint64_t (*door_next_ns)(struct sv_context *ctx, uint64_t now);
};

extern const struct sv_link_ops sv_shm_link_ops;

/* Room for a transport's state in the link (sv_link_priv): shm.c's. */
#define SV_LINK_PRIV_WORDS 16

struct sv_link {
	const struct sv_link_ops *ops; /* the transport, NULL until one
					* is chosen (RTR, or a shared
					* memory peer's early hello) */
	enum sv_link_state state;
	struct sv_ring tx;     /* the peer's receive ring: we produce */
	struct sv_ring rx;     /* our receive ring: the peer produces */
	struct sv_ring rsp_tx; /* the peer's response ring: our responder
				* answers its reads and atomics there */
	struct sv_ring rsp_rx; /* our response ring: answers to ours */
	bool tx_ready, rx_ready;
	bool refused_noted; /* told stderr of another user */
	uint32_t peer_qpn;  /* whose ring tx is */
	uint32_t train_max; /* the longest packet train the
			     * transport moves best (0:
			     * SV_MAX_TRAIN) */
	/* the QP's socket (link.c): every transport's */
	int listen_fd;		      /* our QP's listener; holds the QPN */
	int pend_fd[SV_LINK_PENDING]; /* accepted, hello not yet read */
	uint64_t pend_ns[SV_LINK_PENDING]; /* when each was accepted */
	/* the loop's watch of each pend_fd, so that its hello wakes the
	 * QP (the QP's; NULL: unwatched), and that loop's context */
	struct sv_pfd *pend_pfd;
	struct sv_context *ctx;
	uint64_t next_accept_ns; /* retry time for a failed accept, or 0 */
	/* a caller waits in our listener, for whoever holds the QP next
	 * (the progress thread found it held: drive.c sv_qp_on_listen) */
	atomic_bool accept_due;
	struct sv_tcp *tcp; /* the TCP transport's state (tcp/), or NULL;
			     * only transport/tcp/ reads it */
	/* the transport's own state (shm.c's), opaque here */
	union {
		uint64_t w[SV_LINK_PRIV_WORDS];
		void *p;
	} priv;
};

/* Room for a packet, or NULL when the ring is full.  Who retries: the
 * app's next poll, or, once it stops polling, our progress thread, which
 * the receiver wakes on freeing space as it wakes it on an ack (tx_sleep). */
static inline void *sv_link_tx_reserve(struct sv_link *l, uint32_t len,
				       int *err)
{
	return sv_ring_reserve(&l->tx, len, err);
}

/* Rings the shared-memory peer's doorbell (shm.c): the wake-up itself
 * is a system call, out of line. */
void sv_shm_ring_peer(struct sv_link *l);

/* Rings a peer's doorbell: a 1-byte message on the peer's connection to
 * us (it watches that socket from the moment it connects, before its hello
 * is taken), sent with MSG_DONTWAIT, so it never blocks (a full queue:
 * rung enough). */
void sv_link_ring_doorbell(int fd);

/* After a batch of published packets: wakes the peer if it sleeps. */
static inline void sv_link_tx_commit(struct sv_link *l)
{
	if (__builtin_expect(l->ops != &sv_shm_link_ops, 0))
		return l->ops->flush(l);
	/* seq_cst: records published before we read the flag (Dekker) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&l->tx.hdr->rx_sleep, memory_order_relaxed))
		sv_shm_ring_peer(l);
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
	sv_tsan_sent(); /* util.h: what the ACK vouches for (a write's
			 * bytes) before the requester's completion */
	atomic_store_explicit(&l->rx.hdr->ack, ack, memory_order_release);
}

/*
 * Responder, after consuming and acking: wakes the requester if it sleeps
 * (it may wait for the ack or for ring space).  The fence waits for the
 * tail/ack line, which a polling requester holds: ~40 ns of an 8 B send's
 * one-way trip when the two CPUs are far apart (bench/README.md, "The
 * ack line's fence").  Moving the barrier to the sleeper's side
 * (membarrier GLOBAL_EXPEDITED) would cost each sleep 22 us and the busy
 * peer an IPI on this VM (1.5 us with no peer running): kept here.
 */
static inline void sv_link_rx_done(struct sv_link *l)
{
	if (__builtin_expect(l->ops != &sv_shm_link_ops, 0))
		return l->ops->flush(l);
	/* seq_cst: tail/ack published before we read the flag (Dekker) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&l->rx.hdr->tx_sleep, memory_order_relaxed))
		sv_shm_ring_peer(l);
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
	uint64_t ack =
		atomic_load_explicit(&l->tx.hdr->ack, memory_order_acquire);

	sv_tsan_received();
	return ack;
}

/* Responder: room for a response (read data, atomic result), or NULL
 * while the peer has not consumed enough of them, or while we have not
 * taken its hello: a peer that took ours can send before its own is out
 * of our listener's queue, and its reads wait for the ring to answer on. */
static inline void *sv_link_rsp_reserve(struct sv_link *l, uint32_t len,
					int *err)
{
	if (__builtin_expect(!l->tx_ready, 0))
		return NULL;
	return sv_ring_reserve(&l->rsp_tx, len, err);
}

/* Responder, after publishing responses: wakes the peer if it sleeps. */
static inline void sv_link_rsp_commit(struct sv_link *l)
{
	if (__builtin_expect(l->ops != &sv_shm_link_ops, 0))
		return l->ops->flush(l);
	/* seq_cst: records published before we read the flag (Dekker) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&l->rsp_tx.hdr->rx_sleep,
				 memory_order_relaxed))
		sv_shm_ring_peer(l);
}

/* Completer, after consuming responses: wakes the peer's responder if it
 * sleeps waiting for room. */
static inline void sv_link_rsp_done(struct sv_link *l)
{
	if (__builtin_expect(l->ops != &sv_shm_link_ops, 0))
		return l->ops->flush(l);
	/* seq_cst: tail published before we read the flag (Dekker) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&l->rsp_rx.hdr->tx_sleep,
				 memory_order_relaxed))
		sv_shm_ring_peer(l);
}

/* Requester: gives up on the packet the responder RNR-NAKed; false if
 * the responder took it meanwhile (its ACK is coming). */
static inline bool sv_link_rnr_abort(struct sv_link *l)
{
	uint32_t expect = SV_RNR_WAIT;

	if (__builtin_expect(l->ops != &sv_shm_link_ops, 0))
		return l->ops->rnr_abort(l);
	return atomic_compare_exchange_strong(&l->tx.hdr->rnr, &expect,
					      SV_RNR_ABORT);
}

/* Sleep flags: set while the progress thread sleeps for this link. */
void sv_link_set_sleep(struct sv_link *l, bool sleep);
/* Whether our sleep flags are up (a peer rings our doorbell). */
bool sv_link_sleeping(const struct sv_link *l);

/* The link lives by itself (ops->run): what arrives waits in its socket
 * until a run reads it, so a receive posted while RNR'd runs the whole
 * engine, not only the responder (post.c, srq.c). */
static inline bool sv_link_runs(const struct sv_link *l)
{
	return l->ops && l->ops->run;
}

/* The loop's view of a link (engine/drive.c): what arrived on one of its
 * sockets (fd; -1: the doorbell connection), and the engine run's
 * brackets; each a no-op where the transport has no such entry. */
static inline enum sv_link_state sv_link_check(struct sv_link *l, int fd)
{
	return l->ops && l->ops->check ? l->ops->check(l, fd) : l->state;
}

static inline void sv_link_run_begin(struct sv_link *l)
{
	if (l->ops && l->ops->run_begin)
		l->ops->run_begin(l);
}

static inline void sv_link_run_end(struct sv_link *l)
{
	if (l->ops && l->ops->run_end)
		l->ops->run_end(l);
}

/* The app drives the QP: the link's state may wait (lazy), the loop stops
 * watching (quiet) unless reads stall, and pushes what is owed. */
static inline void sv_link_set_lazy(struct sv_link *l, bool lazy)
{
	if (l->ops && l->ops->set_lazy)
		l->ops->set_lazy(l, lazy);
}

static inline void sv_link_quiet(struct sv_link *l, bool quiet)
{
	if (l->ops && l->ops->quiet)
		l->ops->quiet(l, quiet);
}

static inline bool sv_link_stalled(struct sv_link *l)
{
	return l->ops && l->ops->stalled && l->ops->stalled(l);
}

/*
 * Who reads a socket's arrivals while the app drives the QP (the TCP and
 * RoCE transports' stalled and quiet).  The app's polls read them, so the
 * progress thread stops watching the socket (quiet) — unless arrivals
 * wait unread across a whole look period: the app drives the QP but waits
 * on its memory for an RDMA write our responder must do (ib_write_lat).
 * Then the thread takes each arrival (loud).  Loud lasts while the thread
 * reads a share of what comes: a look period in which the app's own runs
 * read all but an eighth of it makes the socket quiet again.  Loud for
 * ever, a connection that stalled once — libfabric's rxm registers its
 * buffers after the first message came, before it polls — woke the thread
 * on every later message for nothing (the app had read it), and the
 * thread took the app's CPU: fi_pingpong's round trip 2x.  Units are the
 * transport's (bytes, datagrams).
 */
struct sv_readers {
	uint64_t in, by_thread;	       /* taken, of them by the thread */
	uint64_t seen_in, seen_thread; /* at the thread's last look */
	bool loud;
};

/* n more taken from the socket, by the progress thread or not. */
static inline void sv_readers_took(struct sv_readers *r, uint64_t n,
				   bool thread)
{
	r->in += n;
	if (thread)
		r->by_thread += n;
}

/* The thread's look at a QP the app drives: quiet again if the app kept
 * up.  Whether nothing came since the last look while quiet: then what
 * waits unread (the caller asks the socket) has stalled. */
static inline bool sv_readers_look(struct sv_readers *r)
{
	uint64_t came = r->in - r->seen_in;
	uint64_t ours = r->by_thread - r->seen_thread;

	r->seen_in = r->in;
	r->seen_thread = r->by_thread;
	if (r->loud && came && ours * 8 <= came)
		r->loud = false;
	return !r->loud && !came;
}

static inline bool sv_link_owed(const struct sv_link *l, uint64_t now)
{
	return l->ops && l->ops->owed && l->ops->owed(l, now);
}

/* The link's rings are the peer's own (shared memory): what a run of the
 * engine would find, the engine's loads of them say (engine/drive.c idle),
 * with no run of the link. */
static inline bool sv_link_rings_shared(const struct sv_link *l)
{
	return l->ops == &sv_shm_link_ops;
}

/* A poll of the CQ with readiness set `set` may skip the link's run
 * (struct sv_link_ops.idle). */
static inline bool sv_link_idle(struct sv_link *l, int set)
{
	return l->ops && l->ops->idle && l->ops->idle(l, set);
}

/* The completer's ACK timer ran out with the link up (comp.c): a
 * transport that can lose what it sent resends (ops->retransmit). */
static inline void sv_link_retransmit(struct sv_link *l)
{
	if (l->ops && l->ops->retransmit)
		l->ops->retransmit(l);
}

/* Packets may be lost on the link (struct sv_link_ops.lossy). */
static inline bool sv_link_lossy(const struct sv_link *l)
{
	return l->ops && l->ops->lossy;
}

/* An ACK timeout is not a try while nothing went out yet (comp.c). */
static inline bool sv_link_setup_waits(const struct sv_link *l, uint64_t now)
{
	return l->ops && l->ops->setup_waits && l->ops->setup_waits(l, now);
}

/* --- link.c: what every transport shares --- */

void sv_link_init(struct sv_link *l);
/* Takes a free QPN by binding the QP's socket (type SV_LINK_SOCK), or a
 * UD QP's datagram socket (SOCK_DGRAM: the abstract namespace is one for
 * both, so QPNs stay unique); *qpn on success. */
int sv_link_bind(struct sv_link *l, int type, uint32_t *qpn);
/* At RTR: the link goes on ops (sv_transport_for), with what it needs
 * made now (struct sv_link_conf).  -errno. */
int sv_link_prepare(struct sv_link *l, const struct sv_link_ops *ops,
		    const struct sv_link_conf *c);
/* Takes what waits on the QP's socket and moves the link on (connect,
 * UP); expect: the peer QPN, or SV_QPN_ANY before RTR.  -errno when the
 * link cannot come up. */
int sv_link_step(struct sv_link *l, uint32_t my_qpn, uint32_t expect);
/* Accepts connections on the QP's socket and has their transports take
 * their messages (sv_link_step's first half); expect is the peer QPN or
 * SV_QPN_ANY.  Returns 1 when the link took one, 0 otherwise, -EMFILE
 * (or -ENFILE...) when a connection or our peer's fds could not be taken
 * (out of fds). */
int sv_link_accept(struct sv_link *l, uint32_t my_qpn, uint32_t expect);
/* The transport's goodbye (if bye) and close, then the rings, the
 * pending connections; the QP's socket stays (sv_link_unbind).  The link
 * is IDLE with no transport after. */
void sv_link_close(struct sv_link *l, uint32_t my_qpn, bool bye);
void sv_link_unbind(struct sv_link *l);
/* Connections accepted whose hello has not been read yet. */
bool sv_link_has_pending(const struct sv_link *l);
/* When the link next needs a look: its listener's and its transport's
 * (UINT64_MAX: on events). */
uint64_t sv_link_next_ns(const struct sv_link *l, uint64_t now);
/* The kernel's word on who holds the other end of fd; -EACCES, said on
 * stderr once per link, if it is not our user. */
int sv_link_check_peer(struct sv_link *l, int fd, uint32_t my_qpn,
		       const char *what);
/* A datagram's sender is our user: its SCM_CREDENTIALS (the socket has
 * SO_PASSCRED); false if there were none.  UD (ud/recv.c), XRC forwarding
 * (xrc.c) and the IB CM's passed MADs (rdmacm/ib_pass.c) take nothing
 * from anyone else.  Inline: librdmacm has its own copy of no provider
 * function. */
static inline bool sv_link_sender_ok(struct msghdr *m)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		struct ucred cr;

		if (c->cmsg_level != SOL_SOCKET ||
		    c->cmsg_type != SCM_CREDENTIALS ||
		    c->cmsg_len < CMSG_LEN(sizeof(cr)))
			continue;
		memcpy(&cr, CMSG_DATA(c), sizeof(cr));
		return cr.uid == getuid() || cr.uid == geteuid();
	}
	return false;
}
/* The next retry time after a failure; *wait_ns doubles (1..100 ms). */
uint64_t sv_link_backoff(uint64_t *wait_ns, uint64_t now);

/*
 * Readiness sets: an epoll instance per CQ (verbs/cq.c makes it at the
 * first poll of two QPs or more, one of them with a link that may idle),
 * holding those links' connections, level triggered, each with its link
 * as data.  A poll asks it once (sv_readyset_wait, timeout 0) which links
 * have bytes waiting, runs those, and skips the idle rest (struct
 * sv_link_ops.idle, which joins the set).  A connection leaves its sets
 * before its fd is closed.
 */
/* The most links one sv_readyset_wait returns. */
#define SV_READYSET_MAX 64
/* A new set: its fd, or -errno. */
int sv_readyset_open(void);
/* fd (with l as its data) into set; true when it is in it (already
 * there counts).  Else the link stays unwatched there, and every poll of
 * that set's CQ runs it. */
bool sv_readyset_join(int set, int fd, struct sv_link *l);
/* fd out of set. */
void sv_readyset_leave(int set, int fd);
/* Up to max links of set whose connection has bytes (or an error, or
 * the peer's close) waiting now, into out: how many, never blocking;
 * -errno on an error.  A link may be one whose QP was destroyed since (QPs
 * are type-stable: a spurious run finds it in RESET). */
int sv_readyset_wait(int set, struct sv_link **out, int max);

/* SOFTVERBS_TRANSPORT (enum sv_transport, env.h). */
int sv_transport_mode(void);
/* The well-known port of the network transports (SOFTVERBS_TCP_PORT),
 * and the one we call peers on: SOFTVERBS_TCP_CONNECT_PORT (a proxy's,
 * for fault injection), else the first. */
uint16_t sv_transport_port(void);
uint16_t sv_transport_connect_port(void);
/* The transport of a connected QP whose peer is on this host (local) or
 * not, as SOFTVERBS_TRANSPORT says (sv_av_check refused what none can
 * reach). */
const struct sv_link_ops *sv_transport_for(bool local);
/* Every transport's per-context state, on the context's close. */
void sv_transport_ctx_close(struct sv_context *ctx);
/* When the transports' context-level fds (doors) next need a look. */
uint64_t sv_transport_door_next_ns(struct sv_context *ctx, uint64_t now);
/* The per-context state slot of each transport (struct sv_context
 * tp_state[]), opaque outside it. */
enum sv_tp_slot {
	SV_TP_TCP,
	SV_TP_ROCE,
	SV_TP_SLOTS,
};

#endif
