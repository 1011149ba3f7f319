/* SPDX-License-Identifier: MIT */
/*
 * What the files of the TCP transport share (tcp.h is its header for the
 * rest of the provider): a link's state (struct sv_tcp), the context's
 * (struct sv_tcp_ctx), their constants, and the calls that cross files.
 */
#ifndef SV_TCP_PRIV_H
#define SV_TCP_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "tcp.h"
#include "transport.h"

enum conn_state {
	CONN_NONE,	 /* no connection: we call at next_ns (t->fd may
			  * hold the socket made at RTR for the call) */
	CONN_CONNECTING, /* our connect(2) in progress */
	CONN_HELLO,	 /* our hello sent, its answer not read yet */
	CONN_READY,	 /* frames flow, both ways */
};

/* The most a frame takes: header and the longest record. */
#define FRAME_MAX (sizeof(struct sv_tcp_frame) + SV_MAX_REC)
#define IBUF_LEN  (4 * FRAME_MAX)
/* What one sendmsg carries at most: OIOV pieces (the frame headers and
 * states in obuf, the records' bodies where they are, in our rings: no
 * copy), and OUT_MAX bytes of records (more than one, whatever their
 * size: the socket takes what fits). */
#define OIOV 64
#define OBUF_LEN \
	(OIOV * sizeof(struct sv_tcp_frame) + sizeof(struct sv_tcp_state))
#define OUT_MAX (1024u * 1024)
/* Request records remembered with their place in the stream: those a
 * FIN may show the peer's host took (sv_tcp_peer_eof).  A round trip's
 * worth at any rate; older ones were long acknowledged, or the peer
 * still holds so many that it was not simply taking them. */
#define TOOK_RECS 64u
/* A connection that does not complete in this long is tried again. */
#define CONNECT_WAIT_NS 1000000000ull
/* How long the door the kernel picked may take to pass our hello on, at
 * least: every process of the user on the host shares the port, and a
 * stopped one's listener still completes connections that it will not
 * read.  A new connection hashes to another listener, so a silent door
 * is left for a new call soon.  The wait is also 4 times what doors took
 * lately (the context's pass_ns: 8,192 QPs calling at once keep doors busy
 * for longer, and calls given up too soon only add to their work), and
 * doubles while doors keep silent, up to DOOR_WAIT_MAX_NS. */
#define DOOR_WAIT_NS 25000000ull
/* The longest wait for a door, and for the QP it passed us to: a call
 * given up stays in the door's accept queue (the door reads it, to find
 * its caller gone), and the call made again waits behind the whole queue.
 * With a cap of 1 s, 2,048 pairs calling at once on a host at load 13
 * gave up 45,000 calls in a minute, and the doors spent it on 40,000
 * callers that had left: the queue never drained.  A stopped process's
 * door is still left soon while doors pass calls quickly (DOOR_WAIT_NS). */
#define DOOR_WAIT_MAX_NS 8000000000ull
/* Calls refused in a row, after the peer answered once, that mean no
 * process of the peer's host has a door any more: its QP is gone (a QP's
 * process keeps its door open while it has a TCP link).  One refusal is
 * not that: a listener that closes as our call reaches it refuses it,
 * and the next call reaches another. */
#define REFUSED_GONE 3
/* How long a link's first set-up may wait at doors that do not answer
 * (busy: thousands of calls at once; or stopped) before the requester's
 * ACK timer counts its tries again (sv_tcp_setup_waits); and as long
 * as after the peer's host last passed any call of ours (HOST_PASSES):
 * its doors work through a queue that ours waits in. */
#define SETUP_WAIT_MAX_NS 10000000000ull
/* How long after the peer was last heard an ACK timeout with every byte
 * taken by the peer's host waits for a slow peer instead of calling
 * again (sv_tcp_retransmit); then a black hole (a path that takes bytes
 * and delivers none) is called again and runs out of tries. */
#define SLOW_PEER_MAX_NS 10000000000ull

#define HOST_PASSES 16
/* A context's calls at the doors at once (connecting, or their hello not
 * passed on yet); the rest wait for a place (sv_tcp_call_admit).  A
 * door's accept queue is FIFO: 8,192 links (4,096 pairs) calling at once
 * on a loaded host queued for longer than a caller waits, callers gave
 * up and called again, and the doors spent whole seconds reading the
 * hellos of callers that had left (2-4 of every 5 read, a debug log at
 * load 15), so no call passed for 8-10 s and set-ups ran out.  With the
 * queue bounded a call is passed within a caller's wait. */
#define CALLS_MAX 64

/* The transport's state in a context (its tp_state[SV_TP_TCP]), made
 * at its first TCP link, under the context's door_lock. */
struct sv_tcp_ctx {
	struct sv_tcp_door *_Atomic door;
	bool failed; /* and it could not be opened */
	/* how long doors took to pass our calls lately (a moving average,
	 * so that a loaded host's slow doors are waited for) */
	_Atomic uint64_t pass_ns;
	/* our calls at the doors now (CALLS_MAX) */
	_Atomic int calls;
	/* when a door of a host last passed a call of ours, for a few
	 * hosts (sv_tcp_host_passed): the host's key in the high 32 bits,
	 * the millisecond in the low; one word, so one store */
	_Atomic uint64_t passed[HOST_PASSES];
};

struct sv_tcp {
	union sv_sockaddr dst; /* the peer host's door: IPv4 or IPv6 */
	union sv_sockaddr src; /* our source GID's address, port 0; or
				* AF_UNSPEC: the kernel chooses */
	struct sv_context *ctx;
	struct sv_tcp_ctx *tctx; /* the context's (its door) */
	struct sv_pfd *pfd;	 /* the connection in ctx's epoll */
	int fd;			 /* the connection, our call, or -1 */
	enum conn_state conn;
	bool first;	    /* we call first: the smaller QPN (tcp.h) */
	bool was_up;	    /* the peer QP answered once */
	bool alive;	    /* it exists: it answered, or the door passed
			     * it our call (it may be stopped) */
	bool proto_err;	    /* the peer broke the protocol */
	bool closed;	    /* it said goodbye */
	bool gone;	    /* it is not there any more */
	bool abort_pending; /* an RNR abort to send */
	bool want_out;	    /* EPOLLOUT asked for: we wait for room */
	bool defer;	    /* the engine runs: flush at its end */
	bool lazy;	    /* the app's poll runs it: our state may wait
			     * for the next frame (sv_tcp_set_lazy) */
	int spare;	    /* held for the peer's socket (sv_tcp_spare) */
	unsigned int user_timeout_ms; /* TCP_USER_TIMEOUT set on fd */
	uint32_t my_qpn, peer_qpn;
	uint32_t epoch;		    /* connections the link had up (tcp.h) */
	uint64_t nonce;		    /* our call's (crossing calls, tcp.h) */
	uint64_t tx_sent, rsp_sent; /* next positions to send */
	uint64_t rx_recv, rsp_recv; /* next positions we expect */
	uint64_t peer_rx_size, peer_rsp_size;
	struct sv_tcp_state sent; /* last state sent */
	struct sv_tcp_state prev; /* the one before it */
	struct sv_tcp_state held; /* the one waiting in our memory */
	bool omore;		  /* the pieces go with MSG_MORE */
	bool in_kernel; /* the state waiting (owed_ns) is the kernel's */
	bool replies;	/* our last waiting state went with records */
	bool sent_valid, prev_valid;
	/* What the peer's host took of this connection, for its end
	 * (sv_tcp_peer_eof): the frame bytes put in the pieces and handed to
	 * the kernel, and where our latest request records end in that
	 * stream, each with the PSN of its last packet (a ring, latest at
	 * took_n - 1) */
	uint64_t out_put, out_sent;
	struct {
		uint64_t end;
		uint32_t psn;
	} took[TOOK_RECS];
	uint32_t took_n;
	bool eof_valid;		     /* the peer's FIN said it took eof_psn */
	uint32_t eof_psn;	     /* (sv_tcp_peer_eof, sv_tcp_eof_ack) */
	struct sv_tcp_hello_ack ack; /* being read on fd */
	uint32_t ack_got;
	uint8_t *obuf;		/* frame headers and states to send */
	uint32_t olen;		/* bytes in obuf */
	struct iovec iov[OIOV]; /* what goes next: [oi, on) */
	uint32_t oi, on;
	uint32_t obytes;	   /* record bytes in iov[] */
	struct sv_qp_stats *stats; /* our QP's: sends and reads counted */
	uint8_t *ibuf;
	uint32_t ioff, ilen;	/* in ibuf: [ioff, ilen) read, not taken */
	uint64_t next_ns;	/* CONN_NONE: when to call */
	uint64_t wait_ns;	/* backoff */
	uint64_t deadline_ns;	/* CONN_CONNECTING, _HELLO: give up then */
	uint64_t door_wait_ns;	/* the door's time to pass us (DOOR_WAIT_NS) */
	uint64_t hello_ns;	/* when our hello went */
	bool io;		/* our call's socket had an event since the
				 * call was last looked at (call_due) */
	bool admitted;		/* our call holds a place (CALLS_MAX) */
	uint64_t down_since;	/* when our connection broke after the peer
				 * answered; 0 while it is up */
	uint32_t refused;	/* calls refused in a row */
	uint64_t first_call_ns; /* when the link's first call began */
	bool conn_heard;	/* a frame came on this connection */
	uint64_t heard_ns;	/* the last frame's arrival, or the
				 * connection's start (sv_tcp_retransmit) */
	uint64_t redial_ns;	/* when a connection broke before a frame
				 * came on it: its calls wait as the first
				 * set-up's do (sv_tcp_setup_waits); 0 */
	bool turned_away;	/* the last call was answered: no such QP,
				 * refused, or no door (sv_tcp_setup_waits) */
	uint64_t drained_ns;	/* when an app's poll that read the socket
				 * empty (sv_tcp_read_in) ended: its next
				 * polls within SV_TCP_DRAINED_NS do not ask
				 * again, till SV_TCP_DRAINED_POLLS of them
				 * did not or our records went; 0: they ask */
	uint32_t skipped;	/* polls that did not, since */
	uint64_t owed_ns;	/* since when a state of ours waits, held
				 * back in our memory (state_may_wait) */
	/* the readiness sets (link.h) of the QP's CQs the connection is in
	 * (tcp_idle joins them; the connection leaves them as it closes),
	 * and whether one would not take it (then polls run the link) */
	int sets[2];
	int nsets;
	bool unwatched;
	/* bytes read from the connection, and whether the thread takes
	 * each arrival, driven or not (link.h, sv_tcp_stalled) */
	struct sv_readers rd;
	/* trust (tcp.h's head comment) */
	bool has_cookie;    /* the link's cookie is known (first connection) */
	bool got_frame;	    /* a frame came since the cookie was set: no
			     * unproven call replaces the link any more */
	uint8_t cookie[32]; /* the caller's nonce, then the callee's */
	uint8_t cnonce[16]; /* our call's nonce */
	bool call_cookie;   /* our call proves the cookie */
	bool proved;	    /* our call answered the callee's challenge */
	/* a caller challenged, its proof not read yet (one at a time) */
	int pend_fd;
	struct sv_pfd *pend_pfd;
	/* pend_pfd's callback before the link took it (the QP's: shared
	 * memory's hang-up watch), given back at close */
	sv_io_cb *pend_cb;
	bool pend_edge;
	struct sv_tcp_hello pend_h;
	uint8_t pend_nonce[16];
	bool pend_cookie; /* it proves the cookie (else a first call) */
	struct sv_tcp_proof pend_p;
	uint32_t pend_got;
	uint64_t pend_deadline;
};

/* Counts a system call of ours on the link's socket (sv_qp_stats). */
#define count_call(t, field)                                               \
	__atomic_store_n(                                                  \
		&(t)->stats->field,                                        \
		__atomic_load_n(&(t)->stats->field, __ATOMIC_RELAXED) + 1, \
		__ATOMIC_RELAXED)

/* frame.c */
/* The CRC of a frame: its header with crc 0, then its body. */
uint32_t sv_tcp_frame_crc(const struct sv_tcp_frame *f, const void *body,
			  uint32_t body_len);
void sv_tcp_hello_seal(struct sv_tcp_hello *h);
bool sv_tcp_hello_ok(const struct sv_tcp_hello *h);
void sv_tcp_ack_seal(struct sv_tcp_hello_ack *a);
bool sv_tcp_ack_ok(const struct sv_tcp_hello_ack *a);
/* The address of a socket's peer, or of dst, for a message. */
void sv_tcp_say_secret(uint32_t qpn, const char *peer, const char *what);
/* The key a link's proofs are made with: from the secret's link key if
 * there is a secret, mixed with the link's cookie if it proves one;
 * without a secret, from the cookie alone.  false if there is none (or
 * the MAC failed: nothing can be proven). */
bool sv_tcp_link_key(const uint8_t *cookie, uint8_t *key);
/* MAC_K(who, n1, n2, caller's QPN, callee's QPN, extra): a side's proof
 * of the key over both nonces, bound to the link and to which side made
 * it (a proof is never the other side's).  false if it failed. */
bool sv_tcp_proof_mac(const uint8_t *key, const char *who, const uint8_t *n1,
		      const uint8_t *n2, uint32_t caller, uint32_t callee,
		      const void *extra, size_t extra_len, uint8_t *out);
/* With a secret, a hello's mac: over the hello before it, under the
 * secret's link key (the door's check: a hello from whoever does not
 * have the secret is not even passed on). */
bool sv_tcp_hello_mac(const struct sv_tcp_hello *h, uint8_t *out);
/* The hello proves our secret, or neither side has one; else it is said
 * (once) and refused.  sv_auth_failed: nothing is trusted. */
bool sv_tcp_hello_secret_ok(const struct sv_tcp_hello *h, int fd);
void sv_tcp_proof_seal(struct sv_tcp_proof *p);
bool sv_tcp_proof_ok(const struct sv_tcp_proof *p);
/* A receive ring size the peer says it has: a power of two, 4 KiB (its
 * response ring: SV_RSP_RING_MIN) to 1 GiB. */
bool sv_tcp_size_ok(uint64_t v, uint64_t min);

/* conn.c */
int sv_tcp_prepare(struct sv_link *l, const struct sv_link_conf *c);
/* Nothing to send: what was half sent on a connection is sent again
 * whole on the next (from where the peer says it got). */
void sv_tcp_out_reset(struct sv_tcp *t);
/* The connection (or our call) closed and forgotten, with what was
 * half read or half sent on it. */
void sv_tcp_drop_conn(struct sv_tcp *t);
/* The connection broke, or our call failed: we call again (or wait for
 * the peer's call) after a while. */
void sv_tcp_close_conn(struct sv_tcp *t, uint64_t now);
void sv_tcp_peer_eof(struct sv_tcp *t);
void sv_tcp_eof_ack(struct sv_link *l);
/* Starts a connection to the peer's door and, once it is made, says
 * hello; the answer is read by read_ack. */
void sv_tcp_connect_step(struct sv_link *l, uint64_t now);
/* True when a door of the host at a (its address and port) passed a
 * call of ours within the last within_ns. */
bool sv_tcp_host_passed(struct sv_tcp_ctx *tc, const union sv_sockaddr *a,
			uint64_t now, uint64_t within_ns);
/* The callee's answer to our hello; then the link resumes where it
 * says. */
void sv_tcp_read_ack(struct sv_link *l, uint64_t now);
/* One answer to a caller (status alone, every other field zero: the
 * door's for a QP that does not exist is the same bytes); false if it
 * could not be sent whole (the caller left). */
bool sv_tcp_answer(int fd, uint16_t status);
/* The challenged caller, forgotten (its socket closed, or taken). */
void sv_tcp_pend_forget(struct sv_tcp *t, bool close_fd);
/* The challenged caller's proof: it proves the key over our nonce and
 * its own, and says where it resumes; then it is taken as any call. */
void sv_tcp_pend_step(struct sv_link *l, uint64_t now);
/* mirror.c */
/* Reads and applies everything the peer sent so far: a read that does
 * not fill the buffer took all there was (what comes after is a new
 * event for the thread, or the app's next poll reads it), so no second
 * read to find EAGAIN.  No poll(2) before the read either: it spares
 * the socket's lock on an empty poll, but costs a system call on every
 * arrival (8 B ib_send_lat across namespaces: 3.70-3.81 µs typical one
 * way with it, 3.52-3.63 without). */
void sv_tcp_read_in(struct sv_link *l);
/* A frame: its header and a small body in obuf (copy), or a record's
 * body where it is, in our ring, where it stays till the peer consumed
 * it (its consumer index, never past what we put here: take_tail). */
void sv_tcp_put_frame(struct sv_tcp *t, uint16_t type, uint16_t ring,
		      uint32_t len, uint64_t pos, const void *body,
		      uint32_t body_len, bool copy);
/* Nothing of ours waits to go: every record published is in a frame, every
 * frame sent, our state as last sent, none held (owed) or asked for. */
bool sv_tcp_all_sent(const struct sv_link *l);
/* door.c */
/* A place among the context's calls at the doors (CALLS_MAX), or false:
 * the call waits for one. */
bool sv_tcp_call_admit(struct sv_tcp *t);
/* The call left the doors (passed on, answered, given up): its place is
 * the next call's. */
void sv_tcp_call_leave(struct sv_tcp *t);
/* After the progress thread stopped (its epoll set is gone). */
uint64_t sv_tcp_door_next_ns(struct sv_context *ctx, uint64_t now);

#endif
