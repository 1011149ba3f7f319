/* SPDX-License-Identifier: MIT */
/*
 * The TCP transport (this directory: frame.c, conn.c, mirror.c, run.c,
 * door.c; tcp_priv.h what they share): a link (link.h) between QPs of
 * different hosts, or of one host when SOFTVERBS_TRANSPORT=tcp.  The engine
 * keeps working on rings; here they are private memory on each side and
 * the transport mirrors them over the network:
 *  - what our requester and responder publish in the tx and rsp_tx rings
 *    is sent, record by record, at its ring position, and the peer's
 *    transport writes each record at the same position of its own rx or
 *    rsp_rx ring, with the ring's seq and poison rules (ring.h), so its
 *    engine reads it as from shared memory;
 *  - the words a shared ring would share (the responder's ACK word, the
 *    consumer indexes, the RNR handshake) travel as STATE frames and land
 *    in our copies of the peer's ring headers;
 *  - a record stays in the sender's ring until the peer consumed it (its
 *    consumer index is the flow control), so after a broken connection
 *    the sender resends from the position the receiver says it got to:
 *    nothing is lost and nothing is delivered twice.
 * One TCP connection per link carries both directions (records, STATE
 * frames, both rings): one socket and one fd per QP while the link is up
 * (and, while it is down, one socket to call with and one fd held for a
 * caller's, sv_tcp_spare).  Who calls: the QP with the smaller QPN calls
 * at once, and again at once after a break; the other only takes calls,
 * unless none came for SV_TCP_CALLEE_WAIT_NS (its peer's calls cannot
 * reach it, or its peer is gone: its own calls find that out), or its
 * process opened its door at this RTR (the peer's calls were refused).  Equal
 * QPNs (two hosts) both call.  Two calls that cross resolve to one: a QP
 * with a call of its own in flight takes the peer's only if the peer's
 * (QPN, nonce) is smaller than its own call's, else answers BUSY; both
 * sides compare the same two pairs.  A call older than the connection
 * that is up (its epoch, the count of connections the link had, is
 * smaller) is answered BUSY: it was given up at a slow door.  A single
 * connection saves the pure TCP ACK each data segment cost on the other
 * direction's connection, and one socket to read per arrival.
 *
 * Finding a QP by (address, QPN) with no daemon: every context that has a
 * TCP link listens on one well-known port (SOFTVERBS_TCP_PORT, default
 * 4791) with SO_REUSEPORT, so every process of the user on a host shares
 * it; the one the kernel picks reads the hello and passes the socket, with
 * SCM_RIGHTS, to the QP named in it through that QP's Unix socket (shm.h),
 * or answers that there is no such QP.
 *
 * Trust (issue 24).  Anyone who reaches the port may call, so:
 *  - The QP takes a caller only at its destination's address (the GID's
 *    IPv4 or IPv6 address, as rxe's check_addr), and one on this host
 *    only of our user (peer.h, sv_peer_check); the caller checks the
 *    callee the same way (another user may hold the port first).
 *  - Strangers learn nothing: the door answers PASSED to every
 *    well-formed hello, then NO_QP itself if the QP does not exist; a
 *    QP that refuses a caller answers the same NO_QP bytes.  Resume
 *    positions, ring sizes and the epoch go only in an OK, and the
 *    peer's STATE only on a connection an OK made.
 *  - A link cookie: on the link's first connection the hello carries
 *    16 random bytes of the caller's and the OK 16 of the callee's; the
 *    cookie is both.  Every later connection proves it: the hello claims
 *    it (SV_TCP_HELLO_COOKIE) with a fresh nonce Nc; the callee answers
 *    CHALLENGE with a fresh Ns and MAC_K("callee", Nc, Ns, QPNs); the
 *    caller checks it and sends its proof MAC_K("caller", Ns, Nc, QPNs,
 *    epoch, positions); only then the OK.  K = HMAC(cookie, label).  A
 *    working connection stays until a caller proved the cookie, and the
 *    epoch is the callee's to set (the caller's counts only proven).
 *  - An unproven (first) call is still taken while the link's connection
 *    has brought no frame: the OK of a first connection may be lost with
 *    it (the callee has the cookie, the caller not), and the caller then
 *    calls unproven again.  Once a frame came (the caller sends its STATE
 *    as soon as it reads the OK, so at once), only the cookie opens the
 *    link.  Without a secret the first connection is in clear: whoever
 *    sees it (on the path between the two hosts) learns the cookie.
 *  - SOFTVERBS_SECRET_FILE (auth.h): every connection, the first too,
 *    goes through the challenge, with K from the secret's link key (mixed
 *    with the cookie once there is one), and the hello carries a MAC
 *    under that key that the door checks before anything (a caller
 *    without the secret learns not even PASSED: SV_TCP_SECRET_REFUSED).
 *    A peer with another secret or none is refused, both sides say so
 *    once on stderr, and the link is dead (its QP's sends fail).
 * What is still in clear: every frame after the OK (records, STATE): the
 * proofs say who set the connection up, not who writes on it later; a
 * host on the path can still inject into the TCP stream, as on RoCE.
 */
#ifndef SV_TCP_H
#define SV_TCP_H

#include <assert.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "link.h"

#define SV_TCP_MAGIC	    0x53567463u /* "SVtc" */
#define SV_TCP_VERSION	    3	 /* 2: one connection per link; 3: proofs */
#define SV_TCP_PORT_DEFAULT 4791 /* RoCEv2's (UDP) port number */
/* How long the QP that does not call first waits for its peer's call
 * before it calls itself (tcp.h's head comment). */
#define SV_TCP_CALLEE_WAIT_NS 50000000ull
/* The longest packet train (req.c, resp.c) on a TCP link: 16 KiB, not
 * shared memory's 64 KiB.  Across two namespaces, 1 MiB ib_send_bw moved
 * 3.1-3.4 GiB/s with 16 KiB trains, 2.1-2.2 with 64 KiB (12 KiB as 16,
 * 20-24 KiB between): each record is read from the socket, checked and
 * copied into the ring, then into the receive buffer, by one CPU, and
 * 16 KiB stays in its first-level cache through all three. */
#define SV_TCP_TRAIN 16384u

/* First bytes on a new connection: who calls whom, the sizes of the
 * caller's receive rings (the callee's copies must have the same), and
 * the caller's nonce.  magic and version sit where every version has
 * them: a hello of another version is answered SV_TCP_VERSION_REFUSED.
 * Where the caller resumes and its epoch come only in its proof (below):
 * nothing in a hello is believed before the caller proved itself. */
struct sv_tcp_hello {
	uint32_t magic;	   /* SV_TCP_MAGIC */
	uint32_t version;  /* SV_TCP_VERSION */
	uint32_t src_qpn;  /* the caller's QP */
	uint32_t dst_qpn;  /* the QP it calls */
	uint64_t rx_size;  /* the caller's request ring */
	uint64_t rsp_size; /* the caller's response ring */
	uint64_t nonce;	   /* this call's: crossing calls (tcp.h head) */
	uint32_t flags;	   /* enum sv_tcp_hello_flags */
	uint32_t rsvd;
	uint8_t cnonce[16]; /* fresh random: the challenge to the callee;
			     * on a first connection, the caller's half
			     * of the link cookie */
	uint8_t mac[32];    /* SECRET: HMAC-SHA-256 under the secret's
			     * link key of the hello before it (the
			     * door's check) */
	uint32_t crc;	    /* CRC-32C of the hello with crc 0 */
	uint32_t rsvd2;
};
static_assert(sizeof(struct sv_tcp_hello) == 104, "wire ABI");

enum sv_tcp_hello_flags {
	SV_TCP_HELLO_COOKIE = 1, /* the caller has the link's cookie and
				  * proves it (a later connection) */
	SV_TCP_HELLO_SECRET = 2, /* the caller has a secret: mac is set */
};

enum sv_tcp_status {
	SV_TCP_OK = 0,
	SV_TCP_NO_QP = 1,	    /* no such QP here, or it does not take
				     * this caller: one answer for both */
	SV_TCP_BUSY = 2,	    /* try again */
	SV_TCP_REFUSED = 3,	    /* version 2's; never sent since 3 */
	SV_TCP_PASSED = 4,	    /* from the door, to every well-formed
				     * hello: the QP's answer, or the door's
				     * NO_QP, follows */
	SV_TCP_VERSION_REFUSED = 5, /* the hello's version is not ours */
	SV_TCP_CHALLENGE = 6,	    /* the callee's nonce and proof: prove
				     * yourself (struct sv_tcp_proof) */
	SV_TCP_SECRET_REFUSED = 7,  /* from the door: the hello does not
				     * prove our secret, or proves one
				     * where we have none */
};

/* The callee's answers.  OK: where to resume sending (what it has
 * received), its receive rings' sizes (the caller's copies), the
 * connection's epoch, and on a first connection its half of the link
 * cookie (nonce).  CHALLENGE: its nonce and mac = MAC_K("callee", the
 * caller's nonce, its own, the QPNs).  Every other answer has all
 * fields but magic, version, status and crc zero. */
struct sv_tcp_hello_ack {
	uint32_t magic;	   /* SV_TCP_MAGIC */
	uint16_t version;  /* SV_TCP_VERSION */
	uint16_t status;   /* enum sv_tcp_status */
	uint32_t src_qpn;  /* OK, CHALLENGE: the callee */
	uint32_t epoch;	   /* OK: the connection's (the callee's choice) */
	uint64_t rx_recv;  /* OK: request ring bytes received */
	uint64_t rsp_recv; /* OK: response ring bytes received */
	uint64_t rx_size;  /* OK: the callee's request ring */
	uint64_t rsp_size; /* OK: the callee's response ring */
	uint8_t nonce[16]; /* OK: cookie half; CHALLENGE: the callee's */
	uint8_t mac[32];   /* CHALLENGE: the callee's proof */
	uint32_t crc;	   /* CRC-32C of the answer with crc 0 */
	uint32_t rsvd;
};
static_assert(sizeof(struct sv_tcp_hello_ack) == 104, "wire ABI");

/* The caller's answer to a CHALLENGE: mac = MAC_K("caller", the
 * callee's nonce, its own, the QPNs, and this message before mac): where
 * to resume and the caller's epoch come proven. */
struct sv_tcp_proof {
	uint32_t magic;	   /* SV_TCP_MAGIC */
	uint32_t epoch;	   /* connections the caller's link had up */
	uint64_t rx_recv;  /* request ring bytes the caller received */
	uint64_t rsp_recv; /* response ring bytes the caller received */
	uint8_t mac[32];
	uint32_t crc; /* CRC-32C of the proof with crc 0 */
	uint32_t rsvd;
};
static_assert(sizeof(struct sv_tcp_proof) == 64, "wire ABI");

enum sv_tcp_frame_type {
	SV_TF_REC = 1,	     /* a record (len bytes follow) at pos */
	SV_TF_PAD = 2,	     /* a pad of len bytes at pos, nothing follows */
	SV_TF_STATE = 3,     /* struct sv_tcp_state follows */
	SV_TF_RNR_ABORT = 4, /* the requester gave up on the RNR'd packet */
	SV_TF_BYE = 5,	     /* orderly close: the QP is going */
};

enum sv_tcp_ring {
	SV_TR_REQ = 0, /* the peer's request ring (its rx) */
	SV_TR_RSP = 1, /* the peer's response ring (its rsp_rx) */
};

/* TCP's checksum is weak and middleboxes rewrite: every frame carries a
 * CRC-32C of its header (crc 0) and body, as RoCE's ICRC; a frame that
 * fails it ends the connection, and the sender resends from where we
 * got (mirror.c), as a lost packet is resent. */
struct sv_tcp_frame {
	uint16_t type; /* enum sv_tcp_frame_type */
	uint16_t ring; /* enum sv_tcp_ring, for REC and PAD */
	uint32_t len;
	uint64_t pos; /* ring position, for REC and PAD */
	uint32_t crc;
	uint32_t rsvd;
};
static_assert(sizeof(struct sv_tcp_frame) == 24, "wire ABI");

/* What a shared ring header would show the peer. */
struct sv_tcp_state {
	uint64_t rx_tail;  /* our request ring's consumer index */
	uint64_t ack;	   /* our responder's ACK word (ring.h) */
	uint64_t rsp_tail; /* our response ring's consumer index */
	uint32_t rnr;	   /* enum sv_rnr_state of our request ring */
	uint32_t rsvd;
};
static_assert(sizeof(struct sv_tcp_state) == 32, "wire ABI");

/* The transport's ops (link.h).  Its prepare makes a TCP link to
 * peer_qpn at the conf's dst (port included), called from its src (the
 * address of the QP's source GID, port 0; NULL or AF_UNSPEC: the
 * kernel's choice), as RoCE's IP source is the source GID: the peer
 * takes the call only from the address its QP names.  The rings now, so
 * running out of memory is modify_qp's error.  The link's socket is
 * watched by the context's progress thread through pfd_conn (with the
 * QP's doorbell callback), which this transport registers and unregisters as it
 * opens and closes it.  It counts its system calls on its socket
 * (tcp_sends, tcp_reads) into the conf's stats. */
extern const struct sv_link_ops sv_tcp_link_ops;

/* Moves the link on: connects (again, with backoff), reads what arrived,
 * sends what is due.  ack_timeout_ns: the QP's local ACK timeout; data
 * of ours the peer's host has not acknowledged for twice that (1 s at
 * least: TCP_USER_TIMEOUT) breaks the connection, so a path that is down
 * is not taken for a slow peer.  down_max_ns: how long a connection that
 * broke after the peer answered may stay broken (the QP's retry budget)
 * before the peer is taken for gone, whether or not anything is in
 * flight.  Returns the link state it is in now: CONNECTING, UP, CLOSED
 * (goodbye) or DEAD (the peer QP is gone: its host's doors say so, or
 * refuse every call, or none answers within down_max_ns; or it broke the
 * protocol). */
enum sv_link_state sv_tcp_run(struct sv_link *l, uint32_t peer_qpn,
			      uint64_t ack_timeout_ns, uint64_t down_max_ns,
			      uint64_t now);
/* The ACK timer ran out with the link up: as a requester retransmits,
 * the connection is made again and resumes where the receiver got (what
 * TCP could not deliver — a stalled path, a damaged frame's length — is
 * sent again).  The completer counts the try if the peer does not answer
 * (comp.c). */
void sv_tcp_retransmit(struct sv_link *l);
/* The link was never up and its calls wait at the peer host's doors with
 * no answer yet (busy doors: thousands of QPs connecting at once), for
 * less than 10 s since its first call: what our requester posted has not
 * gone out, so an ACK timeout is not a try (IBA 9.7.6.1.3: the timer runs
 * from when the packet was sent; comp.c).  False once any call was
 * answered that the peer QP is not there or does not take it (no such
 * QP, refused, nothing listens): those count, as packets lost. */
bool sv_tcp_setup_waits(const struct sv_link *l, uint64_t now);
/* Around one run of the engine: what it publishes goes out at the end,
 * its ACKs and requests together. */
void sv_tcp_run_begin(struct sv_link *l);
void sv_tcp_run_end(struct sv_link *l);
/* While the app's poll runs the engine (sv_qp_drive), a state of ours
 * that only moves on may wait in the kernel for the next frame, up to this
 * long (mirror.c, state_may_wait). */
#define SV_TCP_ACK_DELAY_NS 20000ull
void sv_tcp_set_lazy(struct sv_link *l, bool lazy);
/* How soon after an app's poll read the connection empty, and how many of
 * its next polls, leave the socket alone until our records go (mirror.c,
 * read_may_wait). */
#define SV_TCP_DRAINED_NS    10000ull
#define SV_TCP_DRAINED_POLLS 4u
/* A state of ours has waited SV_TCP_ACK_DELAY_NS: the thread pushes it. */
bool sv_tcp_owed(const struct sv_link *l, uint64_t now);
/* For a QP the app drives, the thread stops watching what arrives on the
 * link's connection (quiet): the app's polls read it, with no thread
 * woken per message.  The thread calls sv_tcp_stalled at each look: true
 * (once) when bytes waited unread since its last look with none read,
 * i.e. the app drives the QP but does not wait on it (it polls its memory
 * for an RDMA write our responder must do, ib_write_lat): from then on
 * the link is never quiet.  So does a link found with bytes unread when
 * the thread takes it back from the app (undriven for a check period). */
bool sv_tcp_stalled(struct sv_link *l);
void sv_tcp_quiet(struct sv_link *l, bool quiet);
/* Sends what the engine published (records, state); never blocks. */
void sv_tcp_flush(struct sv_link *l);
/* The requester gives up on an RNR'd packet: false if the responder has
 * taken it meanwhile (as far as we know). */
bool sv_tcp_rnr_abort(struct sv_link *l);
/* A connection the door passed us (link.c, SV_MSG_TCP): 1 if it is our
 * peer's and is now the link's connection, 0 if it is challenged (the
 * link holds it in pend_pfd until its proof comes), else -errno (the
 * socket is answered and closed).  expect: the peer QPN or SV_QPN_ANY. */
int sv_tcp_take(struct sv_link *l, int fd, const struct sv_tcp_hello *h,
		uint32_t my_qpn, uint32_t expect);
/* The place held for the peer's socket: given up (hold false) right
 * before our listener takes hellos, held again after while the link has
 * no connection up. */
void sv_tcp_spare(struct sv_link *l, bool hold);
/* The link's connection, -1 if none is up. */
int sv_tcp_fd(const struct sv_link *l);
/* When the link next needs a look (UINT64_MAX: on events). */
uint64_t sv_tcp_next_ns(const struct sv_link *l);
/* Says goodbye if bye and it can without blocking; closes the sockets
 * (the rings are the link's: sv_link_close unmaps them). */
void sv_tcp_close(struct sv_link *l, bool bye);

/* The context's listener on the well-known port, opened at its first TCP
 * link (a failure is said once, and only a peer calling us notices): the
 * context's TCP state, NULL if out of memory; *opened: this call opened
 * it (a peer's earlier calls found no door of ours). */
struct sv_tcp_ctx;
struct sv_tcp_ctx *sv_tcp_door_open(struct sv_context *ctx, bool *opened);
void sv_tcp_door_close(struct sv_context *ctx);
/* When a caller that has not said hello is dropped. */
uint64_t sv_tcp_door_next_ns(struct sv_context *ctx, uint64_t now);

#endif
