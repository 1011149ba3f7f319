// SPDX-License-Identifier: MIT
/*
 * The TCP transport (tcp.h says how it works).  Everything that arrives
 * is checked before it touches a ring: frame types, lengths, positions
 * (exactly the next one expected, inside the window our consumer index
 * gives), consumer indexes (never back, never past what we sent), ring
 * sizes.  A peer that breaks the protocol takes the link down, as a
 * malformed ring record does; a peer that does not read or does not
 * write can hold nothing of ours but its own link: sockets are
 * non-blocking, and records wait in our ring for it.
 */
#include "tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "auth.h"
#include "crc32c.h"
#include "peer.h"
#include "shm.h"
#include "sv.h"

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
/* A connection that does not complete in this long is tried again. */
#define CONNECT_WAIT_NS 1000000000ull
/* How long the door the kernel picked may take to pass our hello on, at
 * least: every process of the user on the host shares the port, and a
 * stopped one's listener still completes connections that it will not
 * read.  A new connection hashes to another listener, so a silent door
 * is left for a new call soon.  The wait is also 4 times what doors took
 * lately (ctx->door_pass_ns: 8,192 QPs calling at once keep doors busy
 * for longer, and calls given up too soon only add to their work), and
 * doubles while doors keep silent, up to CONNECT_WAIT_NS. */
#define DOOR_WAIT_NS 25000000ull
/* Calls refused in a row, after the peer answered once, that mean no
 * process of the peer's host has a door any more: its QP is gone (a QP's
 * process keeps its door open while it has a TCP link).  One refusal is
 * not that: a listener that closes as our call reaches it refuses it,
 * and the next call reaches another. */
#define REFUSED_GONE 3
/* How long a link's first set-up may wait at doors that do not answer
 * (busy: thousands of calls at once; or stopped) before the requester's
 * ACK timer counts its tries again (sv_tcp_setup_waits). */
#define SETUP_WAIT_MAX_NS 10000000000ull

struct sv_tcp {
	union sv_sockaddr dst; /* the peer host's door: IPv4 or IPv6 */
	union sv_sockaddr src; /* our source GID's address, port 0; or
				* AF_UNSPEC: the kernel chooses */
	struct sv_context *ctx;
	struct sv_pfd *pfd; /* the connection in ctx's epoll */
	int fd;		    /* the connection, our call, or -1 */
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
	bool loud;	    /* the thread runs it on every arrival, driven
			     * or not (sv_tcp_stalled) */
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
	bool sent_valid, prev_valid;
	bool omore; /* the pieces go with MSG_MORE (state_may_wait) */
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
	uint64_t down_since;	/* when our connection broke after the peer
				 * answered; 0 while it is up */
	uint32_t refused;	/* calls refused in a row */
	uint64_t first_call_ns; /* when the link's first call began */
	bool turned_away;	/* the last call was answered: no such QP,
				 * refused, or no door (sv_tcp_setup_waits) */
	uint64_t owed_ns;	/* since when a state of ours waits */
	uint64_t in_bytes;	/* read from the connection */
	uint64_t seen_in_bytes; /* in_bytes at the thread's last look */
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
	struct sv_tcp_hello pend_h;
	uint8_t pend_nonce[16];
	bool pend_cookie; /* it proves the cookie (else a first call) */
	struct sv_tcp_proof pend_p;
	uint32_t pend_got;
	uint64_t pend_deadline;
};

/* The counters of a link that has no QP's (fuzz_tcp.c's). */
static struct sv_qp_stats no_stats;

/* Counts a system call of ours on the link's socket (sv_qp_stats). */
#define count_call(t, field)                                               \
	__atomic_store_n(                                                  \
		&(t)->stats->field,                                        \
		__atomic_load_n(&(t)->stats->field, __ATOMIC_RELAXED) + 1, \
		__ATOMIC_RELAXED)

/* The CRC of a frame: its header with crc 0, then its body. */
static uint32_t frame_crc(const struct sv_tcp_frame *f, const void *body,
			  uint32_t body_len)
{
	struct sv_tcp_frame h = *f;

	h.crc = 0;
	return sv_crc32c(sv_crc32c(0, &h, sizeof(h)), body, body_len);
}

static void hello_seal(struct sv_tcp_hello *h)
{
	h->crc = 0;
	h->crc = sv_crc32c(0, h, sizeof(*h));
}

static bool hello_ok(const struct sv_tcp_hello *h)
{
	struct sv_tcp_hello c = *h;

	c.crc = 0;
	return h->magic == SV_TCP_MAGIC && h->version == SV_TCP_VERSION &&
	       h->crc == sv_crc32c(0, &c, sizeof(c));
}

static void ack_seal(struct sv_tcp_hello_ack *a)
{
	a->crc = 0;
	a->crc = sv_crc32c(0, a, sizeof(*a));
}

static bool ack_ok(const struct sv_tcp_hello_ack *a)
{
	struct sv_tcp_hello_ack c = *a;

	c.crc = 0;
	return a->magic == SV_TCP_MAGIC && a->version == SV_TCP_VERSION &&
	       a->crc == sv_crc32c(0, &c, sizeof(c));
}

/* The address of a socket's peer, or of dst, for a message. */

/* A peer that does not prove the shared secret (or proves one where we
 * have none), said once per process, on either side. */
static void say_secret(uint32_t qpn, const char *peer, const char *what)
{
	static atomic_bool said;

	if (!atomic_exchange(&said, true))
		fprintf(stderr,
			"softverbs: qp %06x: the peer at %s %s "
			"(SOFTVERBS_SECRET_FILE): refused\n",
			qpn, peer, what);
}
static void say_secret_fd(uint32_t qpn, int fd, const char *what)
{
	char buf[INET6_ADDRSTRLEN];

	say_secret(qpn, sv_peer_name(fd, buf, sizeof(buf)), what);
}

/* The key a link's proofs are made with: from the secret's link key if
 * there is a secret, mixed with the link's cookie if it proves one;
 * without a secret, from the cookie alone.  false if there is none (or
 * the MAC failed: nothing can be proven). */
static bool link_key(const uint8_t *cookie, uint8_t *key)
{
	static const char label[] = "softverbs-v1 tcp link cookie";
	const uint8_t *base = sv_auth_key(SV_AUTH_TCP_LINK);
	struct iovec v;

	if (base && !cookie) {
		memcpy(key, base, SV_AUTH_KEY_LEN);
		return true;
	}
	if (!cookie)
		return false;
	if (base) {
		v = (struct iovec){(void *)cookie, 32};
		return !sv_auth_mac(base, &v, 1, key);
	}
	v = (struct iovec){(void *)label, sizeof(label)};
	return !sv_auth_mac(cookie, &v, 1, key);
}

/* MAC_K(who, n1, n2, caller's QPN, callee's QPN, extra): a side's proof
 * of the key over both nonces, bound to the link and to which side made
 * it (a proof is never the other side's).  false if it failed. */
static bool proof_mac(const uint8_t *key, const char *who, const uint8_t *n1,
		      const uint8_t *n2, uint32_t caller, uint32_t callee,
		      const void *extra, size_t extra_len, uint8_t *out)
{
	uint32_t q[2] = {caller, callee};
	struct iovec v[5] = {{(void *)who, strlen(who) + 1},
			     {(void *)n1, 16},
			     {(void *)n2, 16},
			     {q, sizeof(q)},
			     {(void *)extra, extra_len}};

	return !sv_auth_mac(key, v, extra_len ? 5 : 4, out);
}

/* With a secret, a hello's mac: over the hello before it, under the
 * secret's link key (the door's check: a hello from whoever does not
 * have the secret is not even passed on). */
static bool hello_mac(const struct sv_tcp_hello *h, uint8_t *out)
{
	const uint8_t *base = sv_auth_key(SV_AUTH_TCP_LINK);
	struct iovec v[2] = {{"hello", 6},
			     {(void *)h, offsetof(struct sv_tcp_hello, mac)}};

	return base && !sv_auth_mac(base, v, 2, out);
}

/* The hello proves our secret, or neither side has one; else it is said
 * (once) and refused.  sv_auth_failed: nothing is trusted. */
static bool hello_secret_ok(const struct sv_tcp_hello *h, int fd)
{
	bool has = h->flags & SV_TCP_HELLO_SECRET;
	uint8_t mac[SV_AUTH_MAC_LEN];

	if (sv_auth_failed())
		return false;
	if (!sv_auth_on() && !has)
		return true;
	if (!sv_auth_on()) {
		say_secret_fd(h->dst_qpn, fd,
			      "proves a shared secret, and this process has "
			      "no shared secret");
		return false;
	}
	if (has && hello_mac(h, mac) && sv_auth_equal(mac, h->mac, sizeof(mac)))
		return true;
	say_secret_fd(h->dst_qpn, fd, "does not prove the shared secret");
	return false;
}

static void proof_seal(struct sv_tcp_proof *p)
{
	p->crc = 0;
	p->crc = sv_crc32c(0, p, sizeof(*p));
}

static bool proof_ok(const struct sv_tcp_proof *p)
{
	struct sv_tcp_proof c = *p;

	c.crc = 0;
	return p->magic == SV_TCP_MAGIC &&
	       p->crc == sv_crc32c(0, &c, sizeof(c));
}

int sv_tcp_mode(void)
{
	return (int)sv_env_uint(SV_ENV_TRANSPORT); /* enum sv_transport */
}

uint16_t sv_tcp_connect_port(void)
{
	uint64_t v = sv_env_uint(SV_ENV_TCP_CONNECT_PORT);

	return v ? (uint16_t)v : sv_tcp_port(); /* 0: unset */
}

uint16_t sv_tcp_port(void)
{
	return (uint16_t)sv_env_uint(SV_ENV_TCP_PORT);
}

static int local_ring(struct sv_ring *r, uint64_t size, uint32_t qpn)
{
	int fd, err = sv_ring_create(r, size, 0, qpn, &fd);

	if (!err)
		close(fd); /* private: the mapping keeps it */
	return err;
}

/* A receive ring size the peer says it has: a power of two, 4 KiB (its
 * response ring: SV_RSP_RING_MIN) to 1 GiB. */
static bool size_ok(uint64_t v, uint64_t min)
{
	return v >= min && v <= (1ull << 30) && !(v & (v - 1));
}

/* Our copies of the peer's receive rings (the first connection makes
 * them; every later one must name the same peer and sizes).  -errno. */
static int peer_rings(struct sv_link *l, uint32_t qpn, uint64_t rx_size,
		      uint64_t rsp_size)
{
	struct sv_tcp *t = l->tcp;
	int err;

	if (!size_ok(rx_size, 4096) || !size_ok(rsp_size, SV_RSP_RING_MIN))
		return -EPROTO;
	if (l->tx_ready)
		return qpn == l->peer_qpn && rx_size == t->peer_rx_size &&
				       rsp_size == t->peer_rsp_size
			       ? 0
			       : -ECONNREFUSED; /* one peer, one geometry */
	err = local_ring(&l->tx, rx_size, qpn);
	if (err)
		return err;
	err = local_ring(&l->rsp_tx, rsp_size, qpn);
	if (err) {
		sv_ring_unmap(&l->tx);
		return err;
	}
	/* our copies of its headers: nobody sleeps there */
	atomic_store(&l->tx.hdr->rx_sleep, 0);
	atomic_store(&l->rsp_tx.hdr->rx_sleep, 0);
	t->peer_rx_size = rx_size;
	t->peer_rsp_size = rsp_size;
	l->peer_qpn = qpn;
	l->tx_ready = true;
	return 0;
}

/* Where the peer says it got in our rings: between what it consumed and
 * what we published (a record once published stays until consumed). */
static bool resume_ok(const struct sv_link *l, uint64_t rx_recv,
		      uint64_t rsp_recv)
{
	return rx_recv >= atomic_load(&l->tx.hdr->tail) &&
	       rx_recv <= l->tx.head &&
	       rsp_recv >= atomic_load(&l->rsp_tx.hdr->tail) &&
	       rsp_recv <= l->rsp_tx.head;
}

int sv_tcp_prepare(struct sv_link *l, uint32_t my_qpn, uint32_t peer_qpn,
		   uint64_t ring_size, const union sv_sockaddr *dst,
		   const union sv_sockaddr *src, struct sv_context *ctx,
		   struct sv_pfd *pfd, struct sv_pfd *pend_pfd)
{
	struct sv_tcp *t = calloc(1, sizeof(*t));
	int err = -ENOMEM;

	if (!t)
		return -ENOMEM;
	t->obuf = malloc(OBUF_LEN);
	t->ibuf = malloc(IBUF_LEN);
	if (!t->obuf || !t->ibuf)
		goto err_free;
	l->train_max = SV_TCP_TRAIN;
	t->dst = *dst;
	if (src && src->sa.sa_family == dst->sa.sa_family)
		t->src = *src;
	t->ctx = ctx;
	t->pfd = pfd;
	t->pend_pfd = pend_pfd;
	t->pend_fd = -1;
	t->fd = -1;
	t->stats = &no_stats;
	t->my_qpn = my_qpn;
	t->peer_qpn = peer_qpn;
	t->first = my_qpn <= peer_qpn;
	t->next_ns = t->first ? 0 : sv_now_ns() + SV_TCP_CALLEE_WAIT_NS;
	/* the fds the link will hold, now: out of fds is modify_qp's
	 * error, not a send that never completes (a socket to call with,
	 * and a place for the peer's, which the kernel installs at its
	 * hello; the link keeps one of them) */
	t->fd = socket(dst->sa.sa_family,
		       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	t->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (t->fd < 0 || t->spare < 0) {
		err = -errno;
		goto err_free;
	}
	err = local_ring(&l->rx, ring_size, my_qpn);
	if (err)
		goto err_free;
	err = local_ring(&l->rsp_rx,
			 ring_size / 4 < SV_RSP_RING_MIN ? SV_RSP_RING_MIN
							 : ring_size / 4,
			 my_qpn);
	if (err) {
		sv_ring_unmap(&l->rx);
		goto err_free;
	}
	l->rx_ready = true;
	l->tcp = t;
	return 0;

err_free:
	if (t->fd >= 0)
		close(t->fd);
	if (t->spare >= 0)
		close(t->spare);
	free(t->obuf);
	free(t->ibuf);
	free(t);
	return err;
}

void sv_tcp_count_into(struct sv_link *l, struct sv_qp_stats *s)
{
	if (l->tcp)
		l->tcp->stats = s;
}

void sv_tcp_spare(struct sv_link *l, bool hold)
{
	struct sv_tcp *t = l->tcp;

	if (!t)
		return;
	if (!hold && t->spare >= 0) {
		close(t->spare);
		t->spare = -1;
	} else if (hold && t->spare < 0 && t->conn != CONN_READY) {
		t->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
}

/* When we call next: after a backoff; the QP that does not call first
 * leaves its peer SV_TCP_CALLEE_WAIT_NS to call it. */
static void call_later(struct sv_tcp *t, uint64_t now)
{
	t->next_ns = sv_shm_backoff(&t->wait_ns, now);
	if (!t->first && t->next_ns < now + SV_TCP_CALLEE_WAIT_NS)
		t->next_ns = now + SV_TCP_CALLEE_WAIT_NS;
}

/* Nothing to send: what was half sent on a connection is sent again
 * whole on the next (from where the peer says it got). */
static void out_reset(struct sv_tcp *t)
{
	t->olen = t->oi = t->on = t->obytes = 0;
	t->omore = false;
}

/* The connection (or our call) closed and forgotten, with what was
 * half read or half sent on it. */
static void drop_conn(struct sv_tcp *t)
{
	/* out of epoll before the number can be anyone's again */
	sv_progress_del(t->ctx, t->pfd);
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	t->conn = CONN_NONE;
	out_reset(t);
	t->owed_ns = 0;
	t->ack_got = 0;
	t->ioff = t->ilen = 0; /* a partial frame: the peer resends it whole */
	t->sent_valid = false;
	t->want_out = false;
	t->user_timeout_ms = 0;
}

/* The connection broke, or our call failed: we call again (or wait for
 * the peer's call) after a while. */
static void close_conn(struct sv_tcp *t, uint64_t now)
{
	if (t->was_up && !t->down_since)
		t->down_since = now; /* till a door or the peer answers */
	drop_conn(t);
	t->alive = false;
	if (t->spare < 0) /* the peer's next call needs a place */
		t->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	call_later(t, now);
}

/* A call that did not reach a door.  Refused again and again after the
 * peer answered once: nobody listens on its host any more (REFUSED_GONE). */
static void call_failed(struct sv_tcp *t, int err)
{
	t->turned_away = err == ECONNREFUSED;
	if (err != ECONNREFUSED) {
		t->refused = 0;
		return;
	}
	if (++t->refused >= REFUSED_GONE && t->was_up && !t->gone) {
		sv_dbg("qp %06x: tcp: %u calls refused: the peer is gone\n",
		       t->my_qpn, t->refused);
		t->gone = true;
	}
}

static uint64_t new_nonce(const struct sv_tcp *t, uint64_t now)
{
	uint64_t x = now ^ ((uint64_t)t->my_qpn << 40) ^ (uint64_t)getpid();

	/* splitmix64: two calls that cross differ in their nonces */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Starts a connection to the peer's door and, once it is made, says
 * hello; the answer is read by read_ack. */
static void connect_step(struct sv_link *l, uint64_t now)
{
	struct sv_tcp *t = l->tcp;

	if (t->conn == CONN_NONE) {
		int one = 1, fd = t->fd; /* made at RTR, the first time */

		if (now < t->next_ns || t->pend_fd >= 0)
			return; /* (a caller of the peer's proves itself) */
		if (sv_auth_failed()) {
			t->proto_err = true; /* nothing can be trusted */
			return;
		}
		t->fd = -1;
		if (!t->first_call_ns)
			t->first_call_ns = now;
		if (fd < 0)
			fd = socket(t->dst.sa.sa_family,
				    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
				    0);
		if (fd < 0) {
			sv_dbg("qp %06x: tcp socket: %s\n", t->my_qpn,
			       strerror(errno));
			call_later(t, now);
			return;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* from the source GID's address: the one the peer's QP
		 * names (a host with several, or SOFTVERBS_TRANSPORT=tcp on
		 * one host between GIDs of two of its addresses) */
		if (t->src.sa.sa_family &&
		    bind(fd, &t->src.sa, sv_sockaddr_len(&t->src)))
			sv_dbg("qp %06x: tcp: bind to the source GID's "
			       "address: %s\n",
			       t->my_qpn, strerror(errno));
		if (connect(fd, &t->dst.sa, sv_sockaddr_len(&t->dst)) &&
		    errno != EINPROGRESS) {
			sv_dbg("qp %06x: tcp connect: %s\n", t->my_qpn,
			       strerror(errno));
			call_failed(t, errno);
			close(fd);
			call_later(t, now);
			return;
		}
		t->fd = fd;
		t->nonce = new_nonce(t, now);
		sv_progress_add(t->ctx, t->pfd, fd);
		/* the thread hears when the connection is made */
		sv_progress_want_out(t->ctx, t->pfd, true);
		t->want_out = true;
		t->conn = CONN_CONNECTING;
		t->deadline_ns = now + CONNECT_WAIT_NS;
	}
	if (t->conn == CONN_CONNECTING) {
		struct pollfd p = {.fd = t->fd, .events = POLLOUT};
		struct sv_tcp_hello h = {
			.magic = SV_TCP_MAGIC,
			.version = SV_TCP_VERSION,
			.src_qpn = t->my_qpn,
			.dst_qpn = t->peer_qpn,
			.rx_size = l->rx.size,
			.rsp_size = l->rsp_rx.size,
			.nonce = t->nonce,
		};
		socklen_t len = sizeof(int);
		int err = 0;

		if (poll(&p, 1, 0) <= 0) {
			if (now >= t->deadline_ns)
				close_conn(t, now);
			return;
		}
		if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &len) ||
		    err) {
			sv_dbg("qp %06x: tcp connect to %06x: %s\n", t->my_qpn,
			       t->peer_qpn, strerror(err ? err : errno));
			call_failed(t, err ? err : errno);
			close_conn(t, now);
			return;
		}
		/* the callee, if on this host, must be our user's: another
		 * user may hold the port first */
		err = sv_peer_check_now(t->fd, &t->dst.sa);
		if (err == -EAGAIN) {
			/* a door of this host whose accept queue is full:
			 * busy; the thread does not wait for it (peer.h) */
			sv_dbg("qp %06x: tcp: the door is busy\n", t->my_qpn);
			t->turned_away = false;
			close_conn(t, now);
			return;
		}
		if (err) {
			sv_dbg("qp %06x: tcp: the door at the peer's address "
			       "is not our peer's: %s\n",
			       t->my_qpn, sv_peer_why(err));
			t->turned_away = true;
			close_conn(t, now);
			return;
		}
		sv_auth_random(t->cnonce, sizeof(t->cnonce));
		memcpy(h.cnonce, t->cnonce, sizeof(h.cnonce));
		t->call_cookie = t->has_cookie;
		t->proved = false;
		if (t->call_cookie)
			h.flags |= SV_TCP_HELLO_COOKIE;
		if (sv_auth_on()) {
			h.flags |= SV_TCP_HELLO_SECRET;
			hello_mac(&h, h.mac);
		}
		hello_seal(&h);
		if (send(t->fd, &h, sizeof(h), MSG_DONTWAIT | MSG_NOSIGNAL) !=
		    sizeof(h)) {
			sv_dbg("qp %06x: tcp connect to %06x: %s\n", t->my_qpn,
			       t->peer_qpn, strerror(err ? err : errno));
			call_failed(t, err ? err : errno);
			close_conn(t, now);
			return;
		}
		t->refused = 0;
		if (!t->door_wait_ns) {
			uint64_t lately =
				4 * atomic_load_explicit(&t->ctx->door_pass_ns,
							 memory_order_relaxed);

			t->door_wait_ns = lately < DOOR_WAIT_NS ? DOOR_WAIT_NS
					  : lately > CONNECT_WAIT_NS
						  ? CONNECT_WAIT_NS
						  : lately;
		}
		t->hello_ns = now;
		t->deadline_ns = now + t->door_wait_ns;
		t->conn = CONN_HELLO;
		t->ack_got = 0;
		sv_progress_want_out(t->ctx, t->pfd, false);
		t->want_out = false;
	}
}

/* Ours, the first time a connection is up: the fd held for the peer's
 * socket is not needed any more. */
static void conn_up(struct sv_tcp *t, uint32_t epoch, uint64_t tx_sent,
		    uint64_t rsp_sent)
{
	t->conn = CONN_READY;
	t->epoch = epoch;
	t->tx_sent = tx_sent;
	t->rsp_sent = rsp_sent;
	t->was_up = t->alive = true;
	t->down_since = 0;
	t->wait_ns = 0;
	t->refused = 0;
	out_reset(t);
	t->owed_ns = 0;
	t->ioff = t->ilen = 0;
	t->sent_valid = false;
	if (t->spare >= 0) {
		close(t->spare);
		t->spare = -1;
	}
}

static void read_ack(struct sv_link *l, uint64_t now);

/* The callee's challenge (in t->ack): it must prove the key over our
 * nonce and its own; then we prove it over its nonce and ours, with
 * where we resume, and read its OK next. */
static void answer_challenge(struct sv_link *l, uint64_t now)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_hello_ack *a = &t->ack;
	struct sv_tcp_proof p = {
		.magic = SV_TCP_MAGIC,
		.epoch = t->epoch,
		.rx_recv = t->rx_recv,
		.rsp_recv = t->rsp_recv,
	};
	uint8_t key[SV_AUTH_KEY_LEN], mac[SV_AUTH_MAC_LEN];

	if (t->proved || a->src_qpn != t->peer_qpn ||
	    !link_key(t->call_cookie ? t->cookie : NULL, key) ||
	    !proof_mac(key, "callee", t->cnonce, a->nonce, t->my_qpn,
		       t->peer_qpn, NULL, 0, mac) ||
	    !sv_auth_equal(mac, a->mac, sizeof(mac)) ||
	    !proof_mac(key, "caller", a->nonce, t->cnonce, t->my_qpn,
		       t->peer_qpn, &p, offsetof(struct sv_tcp_proof, mac),
		       p.mac)) {
		/* not our peer (it does not have the cookie, or the
		 * secret): as a refusal */
		sv_dbg("qp %06x: tcp: the callee does not prove the link's "
		       "key: refused\n",
		       t->my_qpn);
		t->turned_away = true;
		close_conn(t, now);
		return;
	}
	proof_seal(&p);
	if (send(t->fd, &p, sizeof(p), MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    sizeof(p)) {
		close_conn(t, now);
		return;
	}
	t->proved = true;
	t->ack_got = 0;
	t->deadline_ns = now + CONNECT_WAIT_NS;
	read_ack(l, now);
}

/* The callee's answer to our hello; then the link resumes where it
 * says. */
static void read_ack(struct sv_link *l, uint64_t now)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_hello_ack *a = &t->ack;
	static atomic_bool said;
	ssize_t n;

	n = recv(t->fd, (uint8_t *)a + t->ack_got, sizeof(*a) - t->ack_got,
		 MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		if (now < t->deadline_ns)
			return;
		t->turned_away = false; /* no answer: still on its way */
		if (!t->alive) {	/* a silent door: call again, at once */
			sv_dbg("qp %06x: tcp: no door answered in %llu ms\n",
			       t->my_qpn,
			       (unsigned long long)t->door_wait_ns / 1000000);
			t->door_wait_ns = t->door_wait_ns * 2 > CONNECT_WAIT_NS
						  ? CONNECT_WAIT_NS
						  : t->door_wait_ns * 2;
			t->wait_ns = 0;
		}
		close_conn(t, now);
		return;
	}
	if (n <= 0) {
		close_conn(t, now);
		return;
	}
	t->ack_got += (uint32_t)n;
	/* every version starts with magic, version and status: the peer's
	 * host runs another build of the protocol; the link cannot be */
	if (t->ack_got >= 8 && a->magic == SV_TCP_MAGIC &&
	    (a->version != SV_TCP_VERSION ||
	     a->status == SV_TCP_VERSION_REFUSED)) {
		if (!atomic_exchange(&said, true))
			fprintf(stderr,
				"softverbs: qp %06x: the peer's host speaks "
				"TCP protocol version %u, this library %u: "
				"run the same softverbs on both hosts\n",
				t->my_qpn,
				a->version != SV_TCP_VERSION ? a->version : 0u,
				SV_TCP_VERSION);
		t->proto_err = true;
		close_conn(t, now);
		return;
	}
	if (t->ack_got < sizeof(*a))
		return;
	if (!ack_ok(a)) {
		close_conn(t, now);
		return;
	}
	if (a->status == SV_TCP_PASSED) { /* the QP's own answer next */
		t->alive = true;
		t->ack_got = 0;
		t->door_wait_ns = 0;
		t->down_since = 0; /* it exists: slow (stopped), not gone */
		if (now > t->hello_ns) { /* 7/8 old, 1/8 new; races: fine */
			_Atomic uint64_t *avg = &t->ctx->door_pass_ns;
			uint64_t v =
				atomic_load_explicit(avg, memory_order_relaxed);

			atomic_store_explicit(
				avg, v - v / 8 + (now - t->hello_ns) / 8,
				memory_order_relaxed);
		}
		t->deadline_ns = now + CONNECT_WAIT_NS;
		read_ack(l, now);
		return;
	}
	if (a->status == SV_TCP_CHALLENGE) {
		answer_challenge(l, now);
		return;
	}
	if (a->status == SV_TCP_SECRET_REFUSED) {
		char buf[INET6_ADDRSTRLEN];

		/* a setting, not a moment: the link cannot be */
		say_secret(t->my_qpn,
			   sv_peer_addr_str(&t->dst.sa, buf, sizeof(buf)),
			   sv_auth_on() ? "refuses our proof: it has "
					  "another, or no shared secret"
					: "wants a shared secret, and this "
					  "process has no shared secret");
		t->proto_err = true;
		close_conn(t, now);
		return;
	}
	if (a->status != SV_TCP_OK) {
		sv_dbg("qp %06x: tcp: QP %06x answers %u\n", t->my_qpn,
		       t->peer_qpn, a->status);
		t->turned_away = a->status != SV_TCP_BUSY;
		/* no such QP: not yet, or not any more once it answered
		 * (dead); refused by a QP that answered before: it left
		 * the connection (to ERROR, RESET), as a goodbye says */
		if (t->was_up && a->status == SV_TCP_NO_QP)
			t->gone = true;
		else if (t->was_up && a->status == SV_TCP_REFUSED)
			t->closed = true;
		close_conn(t, now);
		return;
	}
	if ((t->call_cookie || sv_auth_on()) && !t->proved) {
		/* an OK that did not prove the callee: not our peer's */
		sv_dbg("qp %06x: tcp: an unproven callee: refused\n",
		       t->my_qpn);
		t->turned_away = true;
		close_conn(t, now);
		return;
	}
	if (a->src_qpn != t->peer_qpn ||
	    peer_rings(l, a->src_qpn, a->rx_size, a->rsp_size) ||
	    !resume_ok(l, a->rx_recv, a->rsp_recv) || a->epoch <= t->epoch) {
		t->proto_err = true;
		close_conn(t, now);
		return;
	}
	if (!t->call_cookie) { /* the link's first connection */
		memcpy(t->cookie, t->cnonce, 16);
		memcpy(t->cookie + 16, a->nonce, 16);
		t->has_cookie = true;
		t->got_frame = false;
	}
	conn_up(t, a->epoch, a->rx_recv, a->rsp_recv);
}

static void read_in(struct sv_link *l);

/* A caller turned away: one answer (status alone, every other field
 * zero: the door's for a QP that does not exist is the same bytes), and
 * the socket closed. */
static void answer(int fd, uint16_t status)
{
	struct sv_tcp_hello_ack a = {.magic = SV_TCP_MAGIC,
				     .version = SV_TCP_VERSION,
				     .status = status};

	ack_seal(&a);
	send(fd, &a, sizeof(a), MSG_DONTWAIT | MSG_NOSIGNAL);
}

static int refuse(int fd, uint16_t status, int err)
{
	answer(fd, status);
	close(fd);
	return err;
}

/* The caller proved itself, or a first call may go unproven: the link's
 * connection is now fd, resumed at rx_recv/rsp_recv, with the epoch we
 * choose.  first: the link's cookie is made (h's nonce and ours).  1, or
 * -errno (fd answered and closed). */
static int take_call(struct sv_link *l, int fd, const struct sv_tcp_hello *h,
		     uint32_t epoch, uint64_t rx_recv, uint64_t rsp_recv,
		     bool first)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_hello_ack a = {
		.magic = SV_TCP_MAGIC,
		.version = SV_TCP_VERSION,
		.status = SV_TCP_OK,
		.src_qpn = t->my_qpn,
	};
	int one = 1, err;

	err = peer_rings(l, h->src_qpn, h->rx_size, h->rsp_size);
	if (err)
		return refuse(fd, SV_TCP_NO_QP, err);
	if (!resume_ok(l, rx_recv, rsp_recv))
		return refuse(fd, SV_TCP_NO_QP, -EPROTO);
	/* what the old connection delivered is ours first: else the
	 * answer sends the caller back to resend it, and a path that
	 * breaks often would move nothing */
	if (t->conn == CONN_READY)
		read_in(l);
	a.rx_recv = t->rx_recv;
	a.rsp_recv = t->rsp_recv;
	a.rx_size = l->rx.size;
	a.rsp_size = l->rsp_rx.size;
	a.epoch = epoch;
	if (first)
		sv_auth_random(a.nonce, sizeof(a.nonce));
	ack_seal(&a);
	if (send(fd, &a, sizeof(a), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(a)) {
		err = -errno;
		close(fd);
		return err;
	}
	if (first) {
		memcpy(t->cookie, h->cnonce, 16);
		memcpy(t->cookie + 16, a.nonce, 16);
		t->has_cookie = true;
		t->got_frame = false;
	}
	fcntl(fd, F_SETFL, O_RDWR | O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a newer connection replaces the older, and the socket we held
	 * to call with */
	drop_conn(t);
	t->fd = fd;
	conn_up(t, a.epoch, rx_recv, rsp_recv);
	sv_progress_add(t->ctx, t->pfd, fd);
	return 1;
}

/* The challenged caller, forgotten (its socket closed, or taken). */
static void pend_forget(struct sv_tcp *t, bool close_fd)
{
	if (t->pend_fd < 0)
		return;
	sv_progress_del(t->ctx, t->pend_pfd);
	if (close_fd)
		close(t->pend_fd);
	t->pend_fd = -1;
}

/* Challenges a caller: our nonce and our proof over both nonces; its
 * proof comes on fd (pend_step). */
static int challenge(struct sv_tcp *t, int fd, const struct sv_tcp_hello *h,
		     bool cookie)
{
	struct sv_tcp_hello_ack a = {
		.magic = SV_TCP_MAGIC,
		.version = SV_TCP_VERSION,
		.status = SV_TCP_CHALLENGE,
		.src_qpn = t->my_qpn,
	};
	uint8_t key[SV_AUTH_KEY_LEN];

	sv_auth_random(a.nonce, sizeof(a.nonce));
	if (!link_key(cookie ? t->cookie : NULL, key) ||
	    !proof_mac(key, "callee", h->cnonce, a.nonce, h->src_qpn, t->my_qpn,
		       NULL, 0, a.mac))
		return refuse(fd, SV_TCP_NO_QP, -EIO);
	ack_seal(&a);
	if (send(fd, &a, sizeof(a), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(a)) {
		close(fd);
		return -EIO;
	}
	pend_forget(t, true); /* one caller at a time: the newest */
	t->pend_fd = fd;
	t->pend_h = *h;
	memcpy(t->pend_nonce, a.nonce, sizeof(a.nonce));
	t->pend_cookie = cookie;
	t->pend_got = 0;
	t->pend_deadline = sv_now_ns() + CONNECT_WAIT_NS;
	sv_progress_add(t->ctx, t->pend_pfd, fd);
	return 0;
}

/* The challenged caller's proof: it proves the key over our nonce and
 * its own, and says where it resumes; then it is taken as any call. */
static void pend_step(struct sv_link *l, uint64_t now)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_proof *p = &t->pend_p;
	uint8_t key[SV_AUTH_KEY_LEN], mac[SV_AUTH_MAC_LEN];
	uint32_t epoch;
	ssize_t n;
	int fd;

	if (t->pend_fd < 0)
		return;
	n = recv(t->pend_fd, (uint8_t *)p + t->pend_got,
		 sizeof(*p) - t->pend_got, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		if (now >= t->pend_deadline)
			pend_forget(t, true);
		return;
	}
	if (n <= 0) {
		pend_forget(t, true);
		return;
	}
	t->pend_got += (uint32_t)n;
	if (t->pend_got < sizeof(*p))
		return;
	fd = t->pend_fd;
	pend_forget(t, false);
	if (!proof_ok(p) || !link_key(t->pend_cookie ? t->cookie : NULL, key) ||
	    !proof_mac(key, "caller", t->pend_nonce, t->pend_h.cnonce,
		       t->pend_h.src_qpn, t->my_qpn, p,
		       offsetof(struct sv_tcp_proof, mac), mac) ||
	    !sv_auth_equal(mac, p->mac, sizeof(mac))) {
		sv_dbg("qp %06x: tcp: a caller does not prove the link's "
		       "key: refused\n",
		       t->my_qpn);
		refuse(fd, SV_TCP_NO_QP, -EACCES);
		return;
	}
	if (t->conn == CONN_READY && p->epoch < t->epoch) {
		/* a call from before the connection we have (it waited at
		 * a slow door) */
		refuse(fd, SV_TCP_BUSY, -ESTALE);
		return;
	}
	if (t->conn == CONN_CONNECTING || t->conn == CONN_HELLO)
		drop_conn(t); /* (no call of ours starts while one waits) */
	epoch = (p->epoch > t->epoch ? p->epoch : t->epoch) + 1;
	take_call(l, fd, &t->pend_h, epoch, p->rx_recv, p->rsp_recv,
		  !t->pend_cookie);
}

int sv_tcp_take(struct sv_link *l, int fd, const struct sv_tcp_hello *h,
		uint32_t my_qpn, uint32_t expect)
{
	struct sv_tcp *t = l->tcp;
	bool cookie = h->flags & SV_TCP_HELLO_COOKIE;
	int err;

	if (!hello_ok(h) || h->dst_qpn != my_qpn || h->src_qpn > SV_PSN_MASK ||
	    !size_ok(h->rx_size, 4096) ||
	    !size_ok(h->rsp_size, SV_RSP_RING_MIN))
		return refuse(fd, SV_TCP_NO_QP, -EPROTO);
	/* a link on shared memory takes no TCP caller (and the other way
	 * round, shm.c): both sides must agree (SOFTVERBS_TRANSPORT).
	 * Every refusal below is answered as the door answers for a QP
	 * that does not exist: a stranger learns nothing. */
	if (!t || (expect != SV_QPN_ANY && h->src_qpn != expect) ||
	    h->src_qpn != t->peer_qpn)
		return refuse(fd, SV_TCP_NO_QP, -ECONNREFUSED);
	/* only from the QP's destination address, and from this host only
	 * of our user (as rxe's check_addr, and shared memory's
	 * SO_PEERCRED) */
	err = sv_peer_check(fd, &t->dst.sa);
	if (err) {
		sv_dbg("qp %06x: tcp: a caller refused: %s\n", my_qpn,
		       sv_peer_why(err));
		return refuse(fd, SV_TCP_NO_QP, -EACCES);
	}
	/* the door checked the secret, but it may be another process's
	 * door, of other settings */
	if (!hello_secret_ok(h, fd))
		return refuse(fd, SV_TCP_SECRET_REFUSED, -EACCES);
	/* a working link is replaced only by who proves its cookie; an
	 * unproven (first) call only until a frame came on the link's
	 * connection (tcp.h) */
	if ((cookie && !t->has_cookie) ||
	    (!cookie && t->has_cookie && t->got_frame)) {
		sv_dbg("qp %06x: tcp: a call %s the link's cookie: refused\n",
		       my_qpn, cookie ? "claiming" : "without");
		return refuse(fd, SV_TCP_NO_QP, -EACCES);
	}
	/* a call that waited at a silent door may reach us after its
	 * caller gave up on it and called again: it must not replace the
	 * newer connection (the caller sends nothing before our answer, so
	 * anything to read is its end) */
	{
		char c;
		ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

		if (n >= 0 || (errno != EAGAIN && errno != EINTR)) {
			close(fd);
			return -ECONNABORTED;
		}
	}
	if (t->conn == CONN_CONNECTING || t->conn == CONN_HELLO) {
		/* our calls crossed: the smaller (QPN, nonce) wins on both
		 * sides; the loser's call is answered BUSY */
		if (my_qpn < h->src_qpn ||
		    (my_qpn == h->src_qpn && t->nonce < h->nonce))
			return refuse(fd, SV_TCP_BUSY, -EBUSY);
		sv_dbg("qp %06x: tcp: our call crossed %06x's: we take its\n",
		       my_qpn, h->src_qpn);
		drop_conn(t);
	}
	if (cookie || sv_auth_on())
		return challenge(t, fd, h, cookie);
	/* a first call, unproven: its epoch and positions are ours to set
	 * (it never had the link up: it received nothing) */
	return take_call(l, fd, h, t->epoch + 1, 0, 0, true);
}

/* Writes a record (or a pad) the peer sent at position pos of our ring
 * r, as a sender on shared memory would (ring.h): the line after it
 * poisoned first if free, the seq word last. */
static int mirror(struct sv_ring *r, uint64_t recv, uint64_t pos,
		  const uint8_t *rec, uint32_t len, bool pad, uint32_t crc,
		  uint32_t want)
{
	uint64_t off = pos & (r->size - 1), end = pos + len;
	struct sv_pkt *dst = (struct sv_pkt *)(r->data + off);
	const uint32_t seq_at = offsetof(struct sv_pkt, seq);

	if (pos != recv || len < SV_REC_ALIGN || len % SV_REC_ALIGN ||
	    off + len > r->size || end - r->tail > r->size ||
	    (!pad && len > SV_MAX_REC) || (pad && off + len != r->size))
		return -EPROTO;
	if (end - r->tail < r->size)
		sv_ring_poison(r, end);
	if (pad) {
		memset(dst, 0, seq_at);
		dst->opcode = SV_OP_PAD;
	} else {
		/* checked as copied, in one pass: what fails its CRC is
		 * written where no reader looks until the release */
		crc = sv_crc32c_copy(crc, dst, rec, seq_at);
		crc = sv_crc32c(crc, rec + seq_at, sizeof(*dst) - seq_at);
		crc = sv_crc32c_copy(crc, (uint8_t *)dst + sizeof(*dst),
				     rec + sizeof(*dst), len - sizeof(*dst));
		if (crc != want)
			return -EBADMSG;
	}
	dst->rec_len = len;
	sv_ring_release(dst, pos);
	return 0;
}

/* A consumer index from the peer: it never goes back, nor past what we
 * sent. */
static int take_tail(struct sv_ring *r, uint64_t v, uint64_t sent)
{
	uint64_t old =
		atomic_load_explicit(&r->hdr->tail, memory_order_relaxed);

	if (v < old || v > sent)
		return -EPROTO;
	atomic_store_explicit(&r->hdr->tail, v, memory_order_release);
	return 0;
}

static int take_state(struct sv_link *l, const struct sv_tcp_state *s)
{
	struct sv_tcp *t = l->tcp;

	if (s->rnr > SV_RNR_ABORT ||
	    take_tail(&l->tx, s->rx_tail, t->tx_sent) ||
	    take_tail(&l->rsp_tx, s->rsp_tail, t->rsp_sent))
		return -EPROTO;
	/* the completer judges the word itself (comp.c) */
	atomic_store_explicit(&l->tx.hdr->ack, s->ack, memory_order_release);
	/* its handshake word, unless we gave up on that packet already */
	if (atomic_load(&l->tx.hdr->rnr) != SV_RNR_ABORT ||
	    s->rnr != SV_RNR_WAIT)
		atomic_store(&l->tx.hdr->rnr, s->rnr);
	return 0;
}

/* One frame from the peer; -EPROTO if it is not one. */
static int take_frame(struct sv_link *l, const struct sv_tcp_frame *f,
		      const uint8_t *body)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_state s;
	uint32_t expect = SV_RNR_WAIT;
	bool pad = f->type == SV_TF_PAD;
	struct sv_ring *r;
	uint64_t *recv;
	int err;

	switch (f->type) {
	case SV_TF_REC:
	case SV_TF_PAD:
		if (f->ring > SV_TR_RSP)
			return -EPROTO;
		r = f->ring == SV_TR_REQ ? &l->rx : &l->rsp_rx;
		recv = f->ring == SV_TR_REQ ? &t->rx_recv : &t->rsp_recv;
		err = mirror(r, *recv, f->pos, body, f->len, pad,
			     frame_crc(f, NULL, 0), f->crc);
		if (err)
			return err;
		*recv += f->len;
		return 0;
	case SV_TF_STATE:
		if (!l->tx_ready)
			return -EPROTO;
		memcpy(&s, body, sizeof(s));
		return take_state(l, &s);
	case SV_TF_RNR_ABORT:
		atomic_compare_exchange_strong(&l->rx.hdr->rnr, &expect,
					       SV_RNR_ABORT);
		return 0;
	case SV_TF_BYE:
		t->closed = true;
		return 0;
	}
	return -EPROTO;
}

/* Body bytes a frame header announces, or -1 if it is not a frame. */
static int64_t body_len(const struct sv_tcp_frame *f)
{
	switch (f->type) {
	case SV_TF_REC:
		return f->len <= SV_MAX_REC ? (int64_t)f->len : -1;
	case SV_TF_STATE:
		return f->len == sizeof(struct sv_tcp_state) ? (int64_t)f->len
							     : -1;
	case SV_TF_PAD:
	case SV_TF_RNR_ABORT:
	case SV_TF_BYE:
		return f->len == 0 || f->type == SV_TF_PAD ? 0 : -1;
	}
	return -1;
}

/* Reads and applies everything the peer sent so far: a read that does
 * not fill the buffer took all there was (what comes after is a new
 * event for the thread, or the app's next poll reads it), so no second
 * read to find EAGAIN.  No poll(2) before the read either: it spares
 * the socket's lock on an empty poll, but costs a system call on every
 * arrival (8 B ib_send_lat across namespaces: 3.70-3.81 µs typical one
 * way with it, 3.52-3.63 without). */
static void read_in(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;

	while (t->conn == CONN_READY && !t->closed) {
		uint32_t off, room;
		ssize_t n;

		/* a partial frame moves to the front only when a whole one
		 * might not fit behind it: not after every read (64 KiB
		 * records: up to one more copy of each) */
		if (t->ioff == t->ilen) {
			t->ioff = t->ilen = 0;
		} else if (IBUF_LEN - t->ilen < FRAME_MAX) {
			memmove(t->ibuf, t->ibuf + t->ioff, t->ilen - t->ioff);
			t->ilen -= t->ioff;
			t->ioff = 0;
		}
		room = IBUF_LEN - t->ilen;
		n = recv(t->fd, t->ibuf + t->ilen, room, MSG_DONTWAIT);
		count_call(t, tcp_reads);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) { /* hang-up: a call again, or it is gone */
			sv_dbg("qp %06x: tcp: the connection %s\n", t->my_qpn,
			       n ? strerror(errno) : "closed");
			close_conn(t, sv_now_ns());
			return;
		}
		t->ilen += (uint32_t)n;
		t->in_bytes += (uint64_t)n;
		for (off = t->ioff;;) {
			struct sv_tcp_frame f;
			const uint8_t *body;
			bool rec;
			int64_t b;
			int err;

			if (t->ilen - off < sizeof(f))
				break;
			memcpy(&f, t->ibuf + off, sizeof(f));
			b = body_len(&f);
			if (b < 0) { /* damaged (or junk): as a bad CRC */
				sv_dbg("qp %06x: tcp: no frame header\n",
				       t->my_qpn);
				close_conn(t, sv_now_ns());
				return;
			}
			if (t->ilen - off < sizeof(f) + b)
				break;
			/* a record's CRC is checked as it is copied into
			 * the ring (mirror), the rest here; whatever fails
			 * it is damage, not a broken protocol */
			body = t->ibuf + off + sizeof(f);
			rec = f.type == SV_TF_REC;
			err = rec || f.crc == frame_crc(&f, body, (uint32_t)b)
				      ? take_frame(l, &f, body)
				      : -EBADMSG;
			if (err && err != -EBADMSG && rec &&
			    f.crc != frame_crc(&f, body, (uint32_t)b))
				err = -EBADMSG;
			if (err == -EBADMSG) {
				/* damaged on the way: as a lost packet, the
				 * sender resends from where we got (its next
				 * connection's hello answer) */
				sv_dbg("qp %06x: tcp: frame fails its CRC\n",
				       t->my_qpn);
				close_conn(t, sv_now_ns());
				return;
			}
			if (err) {
				sv_dbg("qp %06x: tcp: bad frame type %u len %u "
				       "pos %llu\n",
				       t->my_qpn, f.type, f.len,
				       (unsigned long long)f.pos);
				t->proto_err = true;
				return;
			}
			/* the link works: from now on only a proven call
			 * replaces its connection */
			t->got_frame = true;
			off += sizeof(f) + (uint32_t)b;
		}
		t->ioff = off;
		if ((uint32_t)n < room)
			return;
	}
}

/* Bytes from p on go next: they extend the last piece if it ends
 * there. */
static void put_piece(struct sv_tcp *t, const void *p, uint32_t len)
{
	struct iovec *v = t->on ? &t->iov[t->on - 1] : NULL;

	if (v && (const uint8_t *)v->iov_base + v->iov_len == p)
		v->iov_len += len;
	else
		t->iov[t->on++] = (struct iovec){(void *)p, len};
}

/* Room for one more frame: in_obuf bytes of obuf and two pieces. */
static bool frame_room(const struct sv_tcp *t, uint32_t in_obuf)
{
	return t->on + 2 <= OIOV && OBUF_LEN - t->olen >= in_obuf;
}

/* A frame: its header and a small body in obuf (copy), or a record's
 * body where it is, in our ring, where it stays till the peer consumed
 * it (its consumer index, never past what we put here: take_tail). */
static void put_frame(struct sv_tcp *t, uint16_t type, uint16_t ring,
		      uint32_t len, uint64_t pos, const void *body,
		      uint32_t body_len, bool copy)
{
	struct sv_tcp_frame f = {
		.type = type, .ring = ring, .len = len, .pos = pos};
	uint8_t *h = t->obuf + t->olen;
	uint32_t n = sizeof(f);

	f.crc = frame_crc(&f, body, body_len);
	memcpy(h, &f, sizeof(f));
	if (copy && body_len) {
		memcpy(h + sizeof(f), body, body_len);
		n += body_len;
	}
	t->olen += n;
	put_piece(t, h, n);
	if (!copy && body_len) {
		put_piece(t, body, body_len);
		t->obytes += body_len;
	}
}

/* Appends the records published at *sent onwards while they fit. */
static void put_records(struct sv_tcp *t, struct sv_ring *r, uint16_t ring,
			uint64_t *sent)
{
	for (;;) {
		uint64_t off = *sent & (r->size - 1);
		struct sv_pkt *p = (struct sv_pkt *)(r->data + off);
		uint32_t len;

		/* acquire: as a receiver would (our own thread wrote it) */
		if (atomic_load_explicit((_Atomic uint32_t *)&p->seq,
					 memory_order_acquire) !=
		    sv_rec_seq(*sent))
			return;
		len = p->rec_len;
		if (!frame_room(t, sizeof(struct sv_tcp_frame)))
			return;
		if (p->opcode == SV_OP_PAD) {
			put_frame(t, SV_TF_PAD, ring, len, *sent, NULL, 0,
				  true);
		} else {
			if (t->obytes && t->obytes + len > OUT_MAX)
				return;
			put_frame(t, SV_TF_REC, ring, len, *sent, p, len,
				  false);
			count_call(t, tcp_records);
		}
		*sent += len;
	}
}

/* Our state (ACK word, consumer indexes, RNR) when it changed. */
static void put_state(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_state s = {
		.rx_tail = atomic_load(&l->rx.hdr->tail),
		.ack = atomic_load(&l->rx.hdr->ack),
		.rsp_tail = atomic_load(&l->rsp_rx.hdr->tail),
		.rnr = atomic_load(&l->rx.hdr->rnr),
	};

	if (t->sent_valid && !memcmp(&s, &t->sent, sizeof(s)))
		return;
	if (!frame_room(t, sizeof(struct sv_tcp_frame) + sizeof(s)))
		return;
	put_frame(t, SV_TF_STATE, 0, sizeof(s), 0, &s, sizeof(s), true);
	t->prev = t->sent;
	t->sent = s;
	t->sent_valid = true;
}

/*
 * Whether a state of ours, alone in the pieces, may wait in the kernel
 * (MSG_MORE) for the next frame to ride with: while the app's poll runs
 * the engine (lazy), a state that only moves on (an ACK, room in our
 * rings) waits for the reply a ping-pong posts at once, or
 * SV_TCP_ACK_DELAY_NS, after which the app's next poll or the progress
 * thread's look pushes it (sv_tcp_owed).  Each state alone costs a TCP
 * segment, and across hosts that was half of a small message's way (IBA
 * 9.7.5.1.1: a responder may coalesce ACKs).  Held by the kernel, not
 * by us, it still goes if the process ends right after its poll (the
 * socket's close sends what is queued): the peer's send completes as on
 * hardware (attack_peer_acks_then_dies: held in our memory instead, that
 * ACK was lost with the process).  An RNR change never waits, nor room
 * the peer may wait for.
 */
static bool state_may_wait(const struct sv_link *l)
{
	const struct sv_tcp *t = l->tcp;

	return t->lazy && t->prev_valid && t->sent.rnr == t->prev.rnr &&
	       t->on == 1 &&
	       t->olen == sizeof(struct sv_tcp_frame) +
				  sizeof(struct sv_tcp_state) &&
	       t->rx_recv - t->sent.rx_tail < l->rx.size / 4 &&
	       t->rsp_recv - t->sent.rsp_tail < l->rsp_rx.size / 4;
}

/* Sends what the kernel holds of ours (TCP_NODELAY pushes it). */
static void push_held(struct sv_tcp *t)
{
	int one = 1;

	t->owed_ns = 0;
	if (t->conn == CONN_READY)
		setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* n bytes of the pieces went. */
static void out_advance(struct sv_tcp *t, size_t n)
{
	while (n) {
		struct iovec *v = &t->iov[t->oi];

		if (n >= v->iov_len) {
			n -= v->iov_len;
			t->oi++;
		} else {
			v->iov_base = (uint8_t *)v->iov_base + n;
			v->iov_len -= n;
			n = 0;
		}
	}
}

void sv_tcp_flush(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;

	if (!t || t->conn != CONN_READY || !l->tx_ready || t->defer)
		return;
	for (;;) {
		if (t->oi < t->on) {
			struct msghdr m = {.msg_iov = t->iov + t->oi,
					   .msg_iovlen = t->on - t->oi};
			ssize_t n = sendmsg(t->fd, &m,
					    MSG_DONTWAIT | MSG_NOSIGNAL |
						    (t->omore ? MSG_MORE : 0));

			count_call(t, tcp_sends);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				/* what the peer said before it went (a NAK,
				 * goodbye) waits unread: ours first */
				read_in(l);
				if (t->conn == CONN_READY)
					close_conn(t, sv_now_ns());
				return;
			}
			if (n > 0)
				out_advance(t, (size_t)n);
			if (t->oi < t->on) {
				/* the thread comes back with room (or the
				 * app's next poll does) */
				if (!t->want_out)
					sv_progress_want_out(t->ctx, t->pfd,
							     true);
				t->want_out = true;
				return;
			}
			if (!t->omore)
				t->owed_ns = 0; /* it went with this */
			else if (!t->owed_ns)
				t->owed_ns = sv_now_ns();
		}
		if (t->want_out) {
			sv_progress_want_out(t->ctx, t->pfd, false);
			t->want_out = false;
		}
		out_reset(t);
		t->prev_valid = t->sent_valid;
		put_state(l);
		if (t->abort_pending) {
			put_frame(t, SV_TF_RNR_ABORT, 0, 0, 0, NULL, 0, true);
			t->abort_pending = false;
		}
		put_records(t, &l->tx, SV_TR_REQ, &t->tx_sent);
		put_records(t, &l->rsp_tx, SV_TR_RSP, &t->rsp_sent);
		if (!t->on)
			break;
		t->omore = state_may_wait(l);
	}
	t->omore = false;
	if (t->owed_ns &&
	    (!t->lazy || sv_now_ns() - t->owed_ns >= SV_TCP_ACK_DELAY_NS))
		push_held(t);
}

bool sv_tcp_rnr_abort(struct sv_link *l)
{
	uint32_t expect = SV_RNR_WAIT;
	bool defer;

	if (!atomic_compare_exchange_strong(&l->tx.hdr->rnr, &expect,
					    SV_RNR_ABORT))
		return false;
	/* out now, before the completion says it failed: a receive the
	 * responder gets after that must not take the message */
	l->tcp->abort_pending = true;
	defer = l->tcp->defer;
	l->tcp->defer = false;
	sv_tcp_flush(l);
	l->tcp->defer = defer;
	return true;
}

/* A path that is down looks like a slow peer to TCP, which retransmits
 * for minutes: our data unacknowledged by the peer's host for twice the
 * QP's ACK timeout breaks the connection instead.  A stopped peer process
 * is not that: its kernel still acknowledges. */
static void user_timeout(struct sv_tcp *t, uint64_t ack_timeout_ns)
{
	unsigned int ms = 0;

	if (ack_timeout_ns < UINT64_MAX / 4) {
		uint64_t v = 2 * ack_timeout_ns / 1000000;

		ms = v < 1000 ? 1000 : v > 600000 ? 600000 : (unsigned int)v;
	}
	if (ms == t->user_timeout_ms || t->conn != CONN_READY)
		return;
	setsockopt(t->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
	t->user_timeout_ms = ms;
}

enum sv_link_state sv_tcp_run(struct sv_link *l, uint32_t peer_qpn,
			      uint64_t ack_timeout_ns, uint64_t down_max_ns,
			      uint64_t now)
{
	struct sv_tcp *t = l->tcp;

	if (!now)
		now = sv_now_ns();
	if (t->down_since && sv_ns_since(now, t->down_since) > down_max_ns &&
	    !t->gone) {
		sv_dbg("qp %06x: tcp: no connection for %llu ms: the peer is "
		       "gone\n",
		       t->my_qpn,
		       (unsigned long long)(now - t->down_since) / 1000000);
		t->gone = true;
	}
	(void)peer_qpn; /* the link's since RTR (sv_tcp_prepare) */
	pend_step(l, now);
	if (t->conn < CONN_HELLO && !t->closed && !t->gone)
		connect_step(l, now); /* (again: not after a bye) */
	if (t->conn == CONN_HELLO)
		read_ack(l, now);
	if (t->conn == CONN_READY)
		user_timeout(t, ack_timeout_ns);
	read_in(l);
	sv_tcp_flush(l);
	if (t->proto_err || t->gone)
		return SV_LINK_DEAD;
	if (t->closed)
		return SV_LINK_CLOSED;
	if (t->conn == CONN_READY && l->tx_ready)
		return SV_LINK_UP;
	/* a peer QP that exists but does not answer (stopped, or its half
	 * of the set-up waits at a stopped door) is slow, not gone: its
	 * requests' timers wait for it, as for a stopped peer on shared
	 * memory (comp.c) */
	return t->alive ? SV_LINK_UP : SV_LINK_CONNECTING;
}

bool sv_tcp_setup_waits(const struct sv_link *l, uint64_t now)
{
	const struct sv_tcp *t = l->tcp;

	return t && !t->was_up && !t->turned_away && !t->closed && !t->gone &&
	       !t->proto_err && t->first_call_ns &&
	       sv_ns_since(now, t->first_call_ns) < SETUP_WAIT_MAX_NS;
}

void sv_tcp_retransmit(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;
	uint64_t now = sv_now_ns();

	if (!t || t->closed || t->gone || t->conn != CONN_READY)
		return;
	sv_dbg("qp %06x: tcp: ACK timeout: connecting again to resend\n",
	       t->my_qpn);
	close_conn(t, now);
	t->wait_ns = 0;
	if (t->first)
		t->next_ns = now; /* at once; the peer sees the close */
}

void sv_tcp_run_begin(struct sv_link *l)
{
	if (l->tcp)
		l->tcp->defer = true;
}

void sv_tcp_run_end(struct sv_link *l)
{
	if (!l->tcp)
		return;
	l->tcp->defer = false;
	sv_tcp_flush(l);
}

void sv_tcp_set_lazy(struct sv_link *l, bool lazy)
{
	if (l->tcp)
		l->tcp->lazy = lazy;
}

bool sv_tcp_owed(const struct sv_link *l, uint64_t now)
{
	const struct sv_tcp *t = l->tcp;

	/* (a challenged caller's proof is read by the thread too) */
	return t && ((t->owed_ns &&
		      sv_ns_since(now, t->owed_ns) >= SV_TCP_ACK_DELAY_NS) ||
		     t->pend_fd >= 0);
}

/* Bytes of the peer's wait unread in our socket. */
static bool unread(const struct sv_tcp *t)
{
	int n = 0;

	return t->conn == CONN_READY && !ioctl(t->fd, SIOCINQ, &n) && n > 0;
}

static void go_loud(struct sv_tcp *t, const char *why)
{
	sv_dbg("qp %06x: tcp: arrivals waited unread %s: the thread takes "
	       "each from now on\n",
	       t->my_qpn, why);
	t->loud = true;
}

bool sv_tcp_stalled(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;
	bool moved;

	if (!t || t->loud)
		return false;
	moved = t->in_bytes != t->seen_in_bytes;
	t->seen_in_bytes = t->in_bytes;
	if (moved || !unread(t))
		return false;
	go_loud(t, "while the app drives");
	return true;
}

void sv_tcp_quiet(struct sv_link *l, bool quiet)
{
	struct sv_tcp *t = l->tcp;

	if (!t)
		return;
	/* the app stopped driving it with something waiting: it drives it
	 * between waits of its own (on its memory, say) */
	if (!quiet && t->pfd->quiet && !t->loud && unread(t))
		go_loud(t, "till the app stopped driving");
	sv_progress_quiet(t->ctx, t->pfd, quiet && !t->loud);
}

int sv_tcp_fd(const struct sv_link *l)
{
	return l->tcp && l->tcp->conn == CONN_READY ? l->tcp->fd : -1;
}

uint64_t sv_tcp_next_ns(const struct sv_link *l)
{
	const struct sv_tcp *t = l->tcp;
	uint64_t next = UINT64_MAX;

	if (!t || t->closed || t->gone)
		return UINT64_MAX; /* no more calls: nothing to time */
	switch (t->conn) {
	case CONN_NONE:
		next = t->next_ns;
		break;
	case CONN_CONNECTING: /* or EPOLLOUT when it is made */
	case CONN_HELLO:
		next = t->deadline_ns;
		break;
	case CONN_READY:
		break;
	}
	/* a challenged caller's proof comes as an event, else it ends */
	if (t->pend_fd >= 0 && t->pend_deadline < next)
		next = t->pend_deadline;
	return next;
}

void sv_tcp_close(struct sv_link *l, bool bye)
{
	struct sv_tcp *t = l->tcp;

	if (!t)
		return;
	t->defer = false; /* an engine's run ends here (QP to ERROR) */
	t->lazy = false;
	if (bye && t->conn == CONN_READY) {
		sv_tcp_flush(l); /* what we acked, then goodbye */
		if (t->oi == t->on) {
			out_reset(t);
			put_frame(t, SV_TF_BYE, 0, 0, 0, NULL, 0, true);
			sv_tcp_flush(l);
		}
		/* a socket closed with bytes unread sends a reset, and the
		 * kernel drops what it has not sent yet: our last words (a
		 * NAK) would be lost.  The peer's bytes are for nobody now. */
		while (t->conn == CONN_READY &&
		       recv(t->fd, t->ibuf, IBUF_LEN, MSG_DONTWAIT) > 0)
			;
	}
	drop_conn(t);
	pend_forget(t, true);
	if (t->spare >= 0)
		close(t->spare);
	free(t->obuf);
	free(t->ibuf);
	free(t);
	l->tcp = NULL;
}

/*
 * The door: the context's listener on the well-known port.  A caller
 * must say hello within SV_HELLO_WAIT_NS; a full table of silent callers
 * loses its oldest, so a flood costs a few fds, never our progress.
 */
#define DOOR_PENDING 128

struct door_pend {
	struct sv_pfd pfd;
	uint64_t since;
	uint32_t got;
	struct sv_tcp_hello h;
};

struct sv_tcp_door {
	struct sv_pfd lfd;
	struct door_pend pend[DOOR_PENDING];
	int spare[2]; /* given up for an accept and a forward when the
		       * process is out of fds, so that callers are
		       * answered, not left waiting */
};

static void door_spares(struct sv_tcp_door *d)
{
	for (int i = 0; i < 2; i++)
		if (d->spare[i] < 0)
			d->spare[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* A spare fd given up, for a call that failed for want of one. */
static bool give_spare(struct sv_tcp_door *d, int i)
{
	if (errno != EMFILE || d->spare[i] < 0)
		return false;
	close(d->spare[i]);
	d->spare[i] = -1;
	return true;
}

/* The door's socket: IPv6 and IPv4 on one (dual-stack, IPV6_V6ONLY off:
 * an IPv4 caller arrives v4-mapped), or IPv4 only where the kernel has
 * no IPv6.  SO_REUSEPORT: every process of the user shares the port.
 * The fd, or -1 and errno. */
static int door_socket(void)
{
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons(sv_tcp_port()),
				  .sin6_addr = IN6ADDR_ANY_INIT};
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(sv_tcp_port()),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	int one = 1, off = 0, fd, err;
	bool v6 = true;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off))) {
		if (fd >= 0)
			close(fd);
		v6 = false;
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    0);
	}
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if ((v6 ? bind(fd, (struct sockaddr *)&a6, sizeof(a6))
		: bind(fd, (struct sockaddr *)&a, sizeof(a))) ||
	    listen(fd, SOMAXCONN)) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

static void door_event(struct sv_io *io, uint32_t revents);

void sv_tcp_door_open(struct sv_context *ctx)
{
	static atomic_bool said;
	struct sv_tcp_door *d;
	int fd;

	/* the secret read and its keys derived now (at RTR), not in the
	 * first set-up: 5-6 ms more for a first connection across two
	 * namespaces when they were (bench/tcp_trust.sh) */
	sv_auth_on();
	pthread_mutex_lock(&ctx->door_lock);
	if (atomic_load(&ctx->door) || ctx->door_failed)
		goto out;
	fd = door_socket();
	if (fd < 0)
		goto fail;
	d = calloc(1, sizeof(*d));
	if (!d) {
		close(fd);
		goto fail;
	}
	sv_pfd_set(&d->lfd, door_event, true);
	d->spare[0] = d->spare[1] = -1;
	door_spares(d);
	for (int i = 0; i < DOOR_PENDING; i++) {
		sv_pfd_set(&d->pend[i].pfd, door_event, true);
		d->pend[i].pfd.fd = -1;
	}
	atomic_store_explicit(&ctx->door, d, memory_order_release);
	sv_progress_add(ctx, &d->lfd, fd);
	goto out;
fail:
	ctx->door_failed = true;
	if (!atomic_exchange(&said, true))
		fprintf(stderr,
			"softverbs: cannot listen on TCP port %u (%s): QPs of "
			"this process cannot be reached from other hosts; "
			"another user's programs may hold it: set "
			"SOFTVERBS_TCP_PORT on both hosts\n",
			sv_tcp_port(), strerror(errno));
out:
	pthread_mutex_unlock(&ctx->door_lock);
}

static void pend_drop(struct sv_context *ctx, struct door_pend *p)
{
	int fd = p->pfd.fd;

	sv_progress_del(ctx, &p->pfd);
	if (fd >= 0)
		close(fd);
}

/* After the progress thread stopped (its epoll set is gone). */
void sv_tcp_door_close(struct sv_context *ctx)
{
	struct sv_tcp_door *d = atomic_load(&ctx->door);

	if (!d)
		return;
	for (int i = 0; i < DOOR_PENDING; i++)
		if (d->pend[i].pfd.fd >= 0)
			close(d->pend[i].pfd.fd);
	for (int i = 0; i < 2; i++)
		if (d->spare[i] >= 0)
			close(d->spare[i]);
	if (d->lfd.fd >= 0)
		close(d->lfd.fd);
	free(d);
	atomic_store(&ctx->door, NULL);
}

/* Passes a caller to the QP it asked for, through that QP's socket
 * (taken by shm.c's accept, SV_MSG_TCP); else answers why not.  Every
 * well-formed hello is answered PASSED first, and a QP that does not
 * exist then NO_QP: the same bytes a QP that refuses the caller sends
 * (sv_tcp_take), so the door tells nobody which QPs exist. */
static void forward(struct sv_tcp_door *d, int fd, const struct sv_tcp_hello *h)
{
	struct sv_hello m = {.magic = SV_HELLO_MAGIC,
			     .version = SV_HELLO_VERSION,
			     .type = SV_MSG_TCP,
			     .src_qpn = h->src_qpn,
			     .dst_qpn = h->dst_qpn};
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov[2] = {{&m, sizeof(m)}, {(void *)h, sizeof(*h)}};
	struct msghdr msg = {.msg_iov = iov,
			     .msg_iovlen = 2,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	struct sockaddr_un a;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	int s;

	answer(fd, SV_TCP_PASSED);
	s = socket(AF_UNIX, SV_SHM_SOCK | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0 && give_spare(d, 1))
		s = socket(AF_UNIX, SV_SHM_SOCK | SOCK_NONBLOCK | SOCK_CLOEXEC,
			   0);
	if (s < 0) {
		answer(fd, SV_TCP_BUSY);
		return;
	}
	if (connect(s, (struct sockaddr *)&a, sv_shm_qp_addr(&a, h->dst_qpn))) {
		answer(fd, errno == EAGAIN ? SV_TCP_BUSY : SV_TCP_NO_QP);
		goto out;
	}
	/* the name is anyone's: only a QP of our user gets our callers */
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len) ||
	    cr.uid != getuid()) {
		answer(fd, SV_TCP_NO_QP);
		goto out;
	}
	memset(&u, 0, sizeof(u));
	u.c.cmsg_level = SOL_SOCKET;
	u.c.cmsg_type = SCM_RIGHTS;
	u.c.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&u.c), &fd, sizeof(int));
	if (sendmsg(s, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		answer(fd, SV_TCP_BUSY);
out:
	close(s);
}

static void pend_read(struct sv_context *ctx, struct sv_tcp_door *d,
		      struct door_pend *p)
{
	ssize_t n = recv(p->pfd.fd, (uint8_t *)&p->h + p->got,
			 sizeof(p->h) - p->got, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		pend_drop(ctx, p);
		return;
	}
	p->got += (uint32_t)n;
	/* magic and version sit where every version has them: a caller of
	 * another version is told so, not left to wait for its answer */
	if (p->got >= 8 && p->h.magic == SV_TCP_MAGIC &&
	    p->h.version != SV_TCP_VERSION) {
		sv_dbg("tcp door: a hello of version %u: refused\n",
		       p->h.version);
		answer(p->pfd.fd, SV_TCP_VERSION_REFUSED);
		pend_drop(ctx, p);
		return;
	}
	if (p->got < sizeof(p->h))
		return;
	if (hello_ok(&p->h) && p->h.dst_qpn <= SV_PSN_MASK &&
	    p->h.src_qpn <= SV_PSN_MASK) {
		/* with a secret, a caller without it learns nothing more */
		if (hello_secret_ok(&p->h, p->pfd.fd))
			forward(d, p->pfd.fd, &p->h);
		else
			answer(p->pfd.fd, SV_TCP_SECRET_REFUSED);
	}
	pend_drop(ctx, p); /* the QP holds its own copy now */
}

static void door_accept(struct sv_context *ctx, struct sv_tcp_door *d)
{
	uint64_t now = sv_now_ns();
	int fd;

	for (;;) {
		struct door_pend *p = NULL;

		fd = accept4(d->lfd.fd, NULL, NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && give_spare(d, 0))
			fd = accept4(d->lfd.fd, NULL, NULL,
				     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;

		for (int i = 0; i < DOOR_PENDING; i++) {
			if (d->pend[i].pfd.fd < 0) {
				p = &d->pend[i];
				break;
			}
			if (!p || d->pend[i].since < p->since)
				p = &d->pend[i];
		}
		pend_drop(ctx, p); /* the oldest, if all are taken */
		p->since = now;
		p->got = 0;
		sv_progress_add(ctx, &p->pfd, fd);
		pend_read(ctx, d, p);
	}
	if (errno != EAGAIN && errno != EINTR)
		sv_dbg("tcp door: accept: %s\n", strerror(errno));
}

/* The door's callback in the progress thread's loop, for its listener
 * (callers) and each pending caller's socket (its hello). */
static void door_event(struct sv_io *io, uint32_t revents)
{
	struct sv_pfd *p = container_of(io, struct sv_pfd, io);
	struct sv_context *ctx = p->ctx;
	struct sv_tcp_door *d =
		atomic_load_explicit(&ctx->door, memory_order_acquire);

	(void)revents;

	if (!d)
		return;
	if (p == &d->lfd)
		door_accept(ctx, d);
	else if (p->fd >= 0)
		pend_read(ctx, d, container_of(p, struct door_pend, pfd));
	door_spares(d); /* what was given up, back */
}

uint64_t sv_tcp_door_next_ns(struct sv_context *ctx, uint64_t now)
{
	struct sv_tcp_door *d =
		atomic_load_explicit(&ctx->door, memory_order_acquire);
	uint64_t next = UINT64_MAX;

	if (!d)
		return next;
	for (int i = 0; i < DOOR_PENDING; i++) {
		struct door_pend *p = &d->pend[i];

		if (p->pfd.fd < 0)
			continue;
		if (sv_ns_since(now, p->since) >= SV_HELLO_WAIT_NS)
			pend_drop(ctx, p); /* silent too long */
		else if (p->since + SV_HELLO_WAIT_NS < next)
			next = p->since + SV_HELLO_WAIT_NS;
	}
	return next;
}
