// SPDX-License-Identifier: MIT
/*
 * The TCP transport's connections (tcp.h says how they work): a link's
 * set-up at RTR (its rings, its socket), our calls to the peer (connect,
 * hello, the callee's answer or challenge, our proof), and the calls the
 * door passes us (take, challenge, the caller's proof), with the crossing
 * and epoch rules that keep one connection per link.
 */
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
#include "progress.h"
#include "tcp_priv.h"
#include "transport.h"

/* The counters of a link that has no QP's (fuzz_tcp.c's). */
static struct sv_qp_stats no_stats;

static int local_ring(struct sv_ring *r, uint64_t size, uint32_t qpn)
{
	int fd, err = sv_ring_create(r, size, 0, qpn, &fd);

	if (!err)
		close(fd); /* private: the mapping keeps it */
	return err;
}

/* Our copies of the peer's receive rings (the first connection makes
 * them; every later one must name the same peer and sizes).  -errno. */
static int peer_rings(struct sv_link *l, uint32_t qpn, uint64_t rx_size,
		      uint64_t rsp_size)
{
	struct sv_tcp *t = l->tcp;
	int err;

	if (!sv_tcp_size_ok(rx_size, 4096) ||
	    !sv_tcp_size_ok(rsp_size, SV_RSP_RING_MIN))
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

int sv_tcp_prepare(struct sv_link *l, const struct sv_link_conf *c)
{
	const union sv_sockaddr *dst = c->dst, *src = c->src;
	uint32_t my_qpn = c->my_qpn, peer_qpn = c->peer_qpn;
	uint64_t ring_size = c->ring_size;
	struct sv_tcp_ctx *tctx;
	struct sv_tcp *t;
	bool opened;
	int err = -ENOMEM;

	tctx = sv_tcp_door_open(c->ctx, &opened); /* the peer calls us there */
	if (!tctx)
		return -ENOMEM;
	t = calloc(1, sizeof(*t));
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
	t->ctx = c->ctx;
	t->tctx = tctx;
	t->pfd = c->pfd_conn;
	t->pend_pfd = c->pfd_acc;
	t->pend_fd = -1;
	t->fd = -1;
	t->stats = &no_stats;
	t->my_qpn = my_qpn;
	t->peer_qpn = peer_qpn;
	t->first = my_qpn <= peer_qpn;
	/* a door opened just now took none of the peer's calls: a peer at
	 * RTR before us was refused and backs off (1, 2, 4 ms ...), and we
	 * call it at once instead (ibv_rc_pingpong's server goes to RTR
	 * first: half its runs waited 1-4 ms more for the link) */
	t->next_ns =
		t->first || opened ? 0 : sv_now_ns() + SV_TCP_CALLEE_WAIT_NS;
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
	l->ops = &sv_tcp_link_ops;
	/* one connection: pfd_conn, which the loop drains; pfd_acc (shared
	 * memory's accepted connection) holds a caller that proves itself
	 * (pend_step); tcp_close gives them back */
	/* pfd_acc drained as the link's socket too: with the QP's doorbell
	 * callback, edge triggered, which pfd_conn has had since the QP was
	 * made (qp.c init_pfds; fuzz_tcp.c's own) and keeps */
	t->pend_cb = __atomic_load_n(&c->pfd_acc->io.cb, __ATOMIC_RELAXED);
	t->pend_edge = c->pfd_acc->edge;
	sv_pfd_set(c->pfd_acc,
		   __atomic_load_n(&c->pfd_conn->io.cb, __ATOMIC_RELAXED),
		   true);
	if (c->stats)
		t->stats = c->stats;
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

/* When we call next: after a backoff; the QP that does not call first
 * leaves its peer SV_TCP_CALLEE_WAIT_NS to call it. */
static void call_later(struct sv_tcp *t, uint64_t now)
{
	t->next_ns = sv_link_backoff(&t->wait_ns, now);
	if (!t->first && t->next_ns < now + SV_TCP_CALLEE_WAIT_NS)
		t->next_ns = now + SV_TCP_CALLEE_WAIT_NS;
}

/* Nothing to send: what was half sent on a connection is sent again
 * whole on the next (from where the peer says it got). */
void sv_tcp_out_reset(struct sv_tcp *t)
{
	t->olen = t->oi = t->on = t->obytes = 0;
	t->omore = false;
}

/* The socket's close is to send a reset (no FIN, no TIME_WAIT). */
static void close_with_reset(struct sv_tcp *t)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};

	if (t->fd >= 0)
		setsockopt(t->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

/* The connection (or our call) closed and forgotten, with what was
 * half read or half sent on it. */
void sv_tcp_drop_conn(struct sv_tcp *t)
{
	sv_tcp_call_leave(t);
	/* out of epoll before the number can be anyone's again */
	sv_progress_del(t->ctx, t->pfd);
	while (t->nsets) /* and out of the pollers' readiness sets */
		sv_readyset_leave(t->sets[--t->nsets], t->fd);
	t->unwatched = false;
	if (t->fd >= 0 && t->conn != CONN_READY)
		/* a call given up (no answer, crossed, refused) carries no
		 * link data: reset it, so that it leaves no TIME_WAIT behind.
		 * Thousands of those to the one door port make every later
		 * connect() walk them for a free source port */
		close_with_reset(t);
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	t->conn = CONN_NONE;
	sv_tcp_out_reset(t);
	t->owed_ns = 0;
	t->ack_got = 0;
	t->ioff = t->ilen = 0; /* a partial frame: the peer resends it whole */
	t->sent_valid = false;
	t->want_out = false;
	t->user_timeout_ms = 0;
}

/* The connection broke, or our call failed: we call again (or wait for
 * the peer's call) after a while. */
void sv_tcp_close_conn(struct sv_tcp *t, uint64_t now)
{
	/* till a door or the peer answers; but a connection that broke
	 * before a frame came on it was taken as the caller gave it up (a
	 * crossed call that waited at a busy door): not a peer gone, and
	 * no try of a request spent while we call again */
	if (t->was_up && !t->down_since && !t->redial_ns) {
		if (t->conn == CONN_READY && !t->conn_heard)
			t->redial_ns = now;
		else
			t->down_since = now;
	}
	/* a reset, not a FIN (which says our process or QP ended having
	 * read all it took: sv_tcp_peer_eof); unsent bytes go again on the
	 * next connection; calls not answered yet: sv_tcp_drop_conn */
	if (t->conn == CONN_READY)
		close_with_reset(t);
	sv_tcp_drop_conn(t);
	t->alive = false;
	if (t->spare < 0) /* the peer's next call needs a place */
		t->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	call_later(t, now);
}

/* A call that did not reach a door.  Refused again and again after the
 * peer answered once: nobody listens on its host any more (REFUSED_GONE).
 * No host at the address (no ARP answer: a LID of SOFTVERBS_SUBNET that
 * names no host) or no route to it is an answer too: the set-up does not
 * wait for one (sv_tcp_setup_waits), the requests' retries run out. */
static void call_failed(struct sv_tcp *t, int err)
{
	t->turned_away = err == ECONNREFUSED || err == EHOSTUNREACH ||
			 err == ENETUNREACH;
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

/* Our call's first step: a socket (made at RTR, the first time), bound
 * to the source GID's address, connecting to the peer's door; CONN_NONE
 * still when it is not time yet or the call failed. */
static void call_start(struct sv_tcp *t, uint64_t now)
{
	int one = 1, fd = t->fd; /* made at RTR, the first time */

	if (now < t->next_ns || t->pend_fd >= 0)
		return; /* (a caller of the peer's proves itself) */
	if (sv_auth_failed()) {
		t->proto_err = true; /* nothing can be trusted */
		return;
	}
	if (!t->first_call_ns)
		t->first_call_ns = now;
	if (!sv_tcp_call_admit(t)) {
		/* the doors have enough of ours: a place frees as one is
		 * passed on (a few ms each); not counted as a failure */
		count_call(t, tcp_calls_paced);
		/* an answer of the last call (NO_QP: the peer QP not at
		 * RTR yet when it came) says nothing of the next: the
		 * set-up waits for it (sv_tcp_setup_waits) */
		t->turned_away = false;
		t->next_ns = sv_link_backoff(&t->wait_ns, now);
		return;
	}
	t->fd = -1;
	if (fd < 0)
		fd = socket(t->dst.sa.sa_family,
			    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		sv_dbg("qp %06x: tcp socket: %s\n", t->my_qpn, strerror(errno));
		call_later(t, now);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* from the source GID's address: the one the peer's QP
	 * names (a host with several, or SOFTVERBS_TRANSPORT=tcp on
	 * one host between GIDs of two of its addresses).  The port is
	 * connect()'s to choose (IP_BIND_ADDRESS_NO_PORT): bind() alone
	 * would reserve an ephemeral port for this socket only, a search
	 * over every port in use that thousands of links make slow */
	if (t->src.sa.sa_family) {
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
			   sizeof(one));
		if (bind(fd, &t->src.sa, sv_sockaddr_len(&t->src)))
			sv_dbg("qp %06x: tcp: bind to the source GID's "
			       "address: %s\n",
			       t->my_qpn, strerror(errno));
	}
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

/* True once our connection is made and the callee, if on this host, is
 * our user's; false while it is being made, or when it failed (closed:
 * we call again later). */
static bool call_made(struct sv_tcp *t, uint64_t now)
{
	struct pollfd p = {.fd = t->fd, .events = POLLOUT};
	socklen_t len = sizeof(int);
	int err = 0;

	if (poll(&p, 1, 0) <= 0) {
		if (now >= t->deadline_ns)
			sv_tcp_close_conn(t, now);
		return false;
	}
	if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		sv_dbg("qp %06x: tcp connect to %06x: %s\n", t->my_qpn,
		       t->peer_qpn, strerror(err ? err : errno));
		call_failed(t, err ? err : errno);
		sv_tcp_close_conn(t, now);
		return false;
	}
	/* the callee, if on this host, must be our user's: another
	 * user may hold the port first */
	err = sv_peer_check_now(t->fd, &t->dst.sa);
	if (err == -EAGAIN) {
		/* a door of this host whose accept queue is full:
		 * busy; the thread does not wait for it (peer.h) */
		sv_dbg("qp %06x: tcp: the door is busy\n", t->my_qpn);
		t->turned_away = false;
		sv_tcp_close_conn(t, now);
		return false;
	}
	if (err == -ENOTCONN) {
		/* reset as it was made (a door's full queue on a loaded
		 * host): no answer about whose the door is; call again */
		sv_dbg("qp %06x: tcp: the call broke as it was made\n",
		       t->my_qpn);
		t->turned_away = false;
		sv_tcp_close_conn(t, now);
		return false;
	}
	if (err) {
		sv_dbg("qp %06x: tcp: the door at the peer's address "
		       "is not our peer's: %s\n",
		       t->my_qpn, sv_peer_why(err));
		t->turned_away = true;
		sv_tcp_close_conn(t, now);
		return false;
	}
	return true;
}

/* Our hello on the connection made (our nonce, and our proof with a
 * secret); then we wait for the door to pass it on (door_wait_ns). */
static void hello_send(struct sv_link *l, uint64_t now)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_hello h = {
		.magic = SV_TCP_MAGIC,
		.version = SV_TCP_VERSION,
		.src_qpn = t->my_qpn,
		.dst_qpn = t->peer_qpn,
		.rx_size = l->rx.size,
		.rsp_size = l->rsp_rx.size,
		.nonce = t->nonce,
	};
	int err = 0; /* (call_made left none) */

	sv_auth_random(t->cnonce, sizeof(t->cnonce));
	memcpy(h.cnonce, t->cnonce, sizeof(h.cnonce));
	t->call_cookie = t->has_cookie;
	t->proved = false;
	if (t->call_cookie)
		h.flags |= SV_TCP_HELLO_COOKIE;
	if (sv_auth_on()) {
		h.flags |= SV_TCP_HELLO_SECRET;
		sv_tcp_hello_mac(&h, h.mac);
	}
	sv_tcp_hello_seal(&h);
	if (send(t->fd, &h, sizeof(h), MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    sizeof(h)) {
		sv_dbg("qp %06x: tcp connect to %06x: %s\n", t->my_qpn,
		       t->peer_qpn, strerror(err ? err : errno));
		call_failed(t, err ? err : errno);
		sv_tcp_close_conn(t, now);
		return;
	}
	t->refused = 0;
	if (!t->door_wait_ns) {
		uint64_t lately =
			4 * atomic_load_explicit(&t->tctx->pass_ns,
						 memory_order_relaxed);

		t->door_wait_ns = lately < DOOR_WAIT_NS	      ? DOOR_WAIT_NS
				  : lately > DOOR_WAIT_MAX_NS ? DOOR_WAIT_MAX_NS
							      : lately;
	}
	t->hello_ns = now;
	t->deadline_ns = now + t->door_wait_ns;
	t->conn = CONN_HELLO;
	t->ack_got = 0;
	sv_progress_want_out(t->ctx, t->pfd, false);
	t->want_out = false;
}

/* Starts a connection to the peer's door and, once it is made, says
 * hello; the answer is read by read_ack. */
void sv_tcp_connect_step(struct sv_link *l, uint64_t now)
{
	struct sv_tcp *t = l->tcp;

	if (t->conn == CONN_NONE)
		call_start(t, now);
	if (t->conn == CONN_CONNECTING && call_made(t, now))
		hello_send(l, now);
}

/* Ours, the first time a connection is up: the fd held for the peer's
 * socket is not needed any more. */
static void conn_up(struct sv_tcp *t, uint32_t epoch, uint64_t tx_sent,
		    uint64_t rsp_sent)
{
	sv_tcp_call_leave(t);
	t->conn = CONN_READY;
	t->epoch = epoch;
	t->tx_sent = tx_sent;
	t->rsp_sent = rsp_sent;
	t->was_up = t->alive = true;
	t->down_since = 0;
	t->redial_ns = 0;
	t->conn_heard = false;
	t->heard_ns = sv_now_ns();
	t->wait_ns = 0;
	t->refused = 0;
	sv_tcp_out_reset(t);
	t->owed_ns = 0;
	t->ioff = t->ilen = 0;
	t->sent_valid = false;
	/* a new stream; the peer answered, so no FIN of before counts */
	t->out_put = t->out_sent = 0;
	t->replies = true;
	t->took_n = 0;
	t->eof_valid = false;
	if (t->spare >= 0) {
		close(t->spare);
		t->spare = -1;
	}
}

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
	    !sv_tcp_link_key(t->call_cookie ? t->cookie : NULL, key) ||
	    !sv_tcp_proof_mac(key, "callee", t->cnonce, a->nonce, t->my_qpn,
			      t->peer_qpn, NULL, 0, mac) ||
	    !sv_auth_equal(mac, a->mac, sizeof(mac)) ||
	    !sv_tcp_proof_mac(key, "caller", a->nonce, t->cnonce, t->my_qpn,
			      t->peer_qpn, &p,
			      offsetof(struct sv_tcp_proof, mac), p.mac)) {
		/* not our peer (it does not have the cookie, or the
		 * secret): as a refusal */
		sv_dbg("qp %06x: tcp: the callee does not prove the link's "
		       "key: refused\n",
		       t->my_qpn);
		t->turned_away = true;
		sv_tcp_close_conn(t, now);
		return;
	}
	sv_tcp_proof_seal(&p);
	if (send(t->fd, &p, sizeof(p), MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    sizeof(p)) {
		sv_tcp_close_conn(t, now);
		return;
	}
	t->proved = true;
	t->ack_got = 0;
	t->deadline_ns = now + CONNECT_WAIT_NS;
	sv_tcp_read_ack(l, now);
}

/* Reads more of the callee's answer into t->ack: true once it is whole;
 * false while it is not (or when the connection closed: no answer in
 * time, the peer's end, another protocol version). */
static bool ack_read(struct sv_tcp *t, uint64_t now)
{
	struct sv_tcp_hello_ack *a = &t->ack;
	static atomic_bool said;
	ssize_t n;

	n = recv(t->fd, (uint8_t *)a + t->ack_got, sizeof(*a) - t->ack_got,
		 MSG_DONTWAIT);
	count_call(t, tcp_reads);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		if (now < t->deadline_ns)
			return false;
		t->turned_away = false; /* no answer: still on its way */
		if (!t->alive) {	/* a silent door: call again, at once */
			sv_dbg("qp %06x: tcp: no door answered in %llu ms\n",
			       t->my_qpn,
			       (unsigned long long)t->door_wait_ns / 1000000);
			t->door_wait_ns = t->door_wait_ns * 2 > DOOR_WAIT_MAX_NS
						  ? DOOR_WAIT_MAX_NS
						  : t->door_wait_ns * 2;
			t->wait_ns = 0;
		}
		sv_tcp_close_conn(t, now);
		return false;
	}
	if (n <= 0) {
		sv_tcp_close_conn(t, now);
		return false;
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
		sv_tcp_close_conn(t, now);
		return false;
	}
	return t->ack_got >= sizeof(*a);
}

/* A host by its door's address, in 32 bits (a collision only lets one
 * host's progress stand for another's) */
static uint32_t host_key(const union sv_sockaddr *a)
{
	return a->sa.sa_family == AF_INET6
		       ? sv_crc32c(a->in6.sin6_port, &a->in6.sin6_addr,
				   sizeof(a->in6.sin6_addr))
		       : sv_crc32c(a->in.sin_port, &a->in.sin_addr,
				   sizeof(a->in.sin_addr));
}

static void host_passed(struct sv_tcp_ctx *tc, const union sv_sockaddr *a,
			uint64_t now)
{
	uint32_t key = host_key(a);

	atomic_store_explicit(&tc->passed[key % HOST_PASSES],
			      (uint64_t)key << 32 | (uint32_t)(now / 1000000),
			      memory_order_relaxed);
}

bool sv_tcp_host_passed(struct sv_tcp_ctx *tc, const union sv_sockaddr *a,
			uint64_t now, uint64_t within_ns)
{
	uint32_t key = host_key(a);
	uint64_t v = atomic_load_explicit(&tc->passed[key % HOST_PASSES],
					  memory_order_relaxed);

	/* milliseconds mod 2^32: ages below 49 days compare right */
	return v && (uint32_t)(v >> 32) == key &&
	       (uint32_t)(now / 1000000) - (uint32_t)v < within_ns / 1000000;
}

/* The door passed our hello on (SV_TCP_PASSED): the QP's own answer
 * comes next, on the same connection. */
static void ack_passed(struct sv_link *l, uint64_t now)
{
	struct sv_tcp *t = l->tcp;

	sv_tcp_call_leave(t); /* the door is done with it */
	t->alive = true;
	t->ack_got = 0;
	t->door_wait_ns = 0;
	t->down_since = 0;	 /* it exists: slow (stopped), not gone */
	if (now > t->hello_ns) { /* 7/8 old, 1/8 new; races: fine */
		_Atomic uint64_t *avg = &t->tctx->pass_ns;
		uint64_t v = atomic_load_explicit(avg, memory_order_relaxed);

		atomic_store_explicit(avg, v - v / 8 + (now - t->hello_ns) / 8,
				      memory_order_relaxed);
	}
	host_passed(t->tctx, &t->dst, now);
	/* the QP's process is alive (its door or itself passed us): its
	 * answer waits for its thread, which may be as busy as its door */
	t->deadline_ns = now + DOOR_WAIT_MAX_NS;
	sv_tcp_read_ack(l, now);
}

/* The callee's answer is neither OK nor a challenge: the connection
 * closes, and what the answer says of the peer is kept. */
static void ack_refused(struct sv_tcp *t, uint64_t now)
{
	struct sv_tcp_hello_ack *a = &t->ack;

	if (a->status == SV_TCP_SECRET_REFUSED) {
		char buf[INET6_ADDRSTRLEN];

		/* a setting, not a moment: the link cannot be */
		sv_tcp_say_secret(
			t->my_qpn,
			sv_peer_addr_str(&t->dst.sa, buf, sizeof(buf)),
			sv_auth_on() ? "refuses our proof: it has "
				       "another, or no shared secret"
				     : "wants a shared secret, and this "
				       "process has no shared secret");
		t->proto_err = true;
		sv_tcp_close_conn(t, now);
		return;
	}
	sv_dbg("qp %06x: tcp: QP %06x answers %u\n", t->my_qpn, t->peer_qpn,
	       a->status);
	t->turned_away = a->status != SV_TCP_BUSY;
	/* no such QP: not yet, or not any more once it answered
	 * (dead); refused by a QP that answered before: it left
	 * the connection (to ERROR, RESET), as a goodbye says */
	if (t->was_up && a->status == SV_TCP_NO_QP)
		t->gone = true;
	else if (t->was_up && a->status == SV_TCP_REFUSED)
		t->closed = true;
	sv_tcp_close_conn(t, now);
}

/* The callee's OK: the link resumes where it says, if the callee proved
 * itself and what it says fits the link. */
static void ack_ok(struct sv_link *l, uint64_t now)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_hello_ack *a = &t->ack;

	if ((t->call_cookie || sv_auth_on()) && !t->proved) {
		/* an OK that did not prove the callee: not our peer's */
		sv_dbg("qp %06x: tcp: an unproven callee: refused\n",
		       t->my_qpn);
		t->turned_away = true;
		sv_tcp_close_conn(t, now);
		return;
	}
	if (a->src_qpn != t->peer_qpn ||
	    peer_rings(l, a->src_qpn, a->rx_size, a->rsp_size) ||
	    !resume_ok(l, a->rx_recv, a->rsp_recv) || a->epoch <= t->epoch) {
		t->proto_err = true;
		sv_tcp_close_conn(t, now);
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

/* The callee's answer to our hello; then the link resumes where it
 * says. */
void sv_tcp_read_ack(struct sv_link *l, uint64_t now)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_hello_ack *a = &t->ack;

	if (!ack_read(t, now))
		return;
	if (!sv_tcp_ack_ok(a)) {
		sv_tcp_close_conn(t, now);
		return;
	}
	if (a->status == SV_TCP_PASSED) /* the QP's own answer next */
		ack_passed(l, now);
	else if (a->status == SV_TCP_CHALLENGE)
		answer_challenge(l, now);
	else if (a->status != SV_TCP_OK)
		ack_refused(t, now);
	else
		ack_ok(l, now);
}

/* A caller turned away: one answer (status alone, every other field
 * zero: the door's for a QP that does not exist is the same bytes), and
 * the socket closed. */
bool sv_tcp_answer(int fd, uint16_t status)
{
	struct sv_tcp_hello_ack a = {.magic = SV_TCP_MAGIC,
				     .version = SV_TCP_VERSION,
				     .status = status};

	sv_tcp_ack_seal(&a);
	return send(fd, &a, sizeof(a), MSG_DONTWAIT | MSG_NOSIGNAL) ==
	       (ssize_t)sizeof(a);
}

static int refuse(int fd, uint16_t status, int err)
{
	sv_tcp_answer(fd, status);
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
		sv_tcp_read_in(l);
	a.rx_recv = t->rx_recv;
	a.rsp_recv = t->rsp_recv;
	a.rx_size = l->rx.size;
	a.rsp_size = l->rsp_rx.size;
	a.epoch = epoch;
	if (first)
		sv_auth_random(a.nonce, sizeof(a.nonce));
	sv_tcp_ack_seal(&a);
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
	/* a newer connection replaces the older (reset: close_conn) and
	 * the socket we held to call with */
	if (t->conn == CONN_READY)
		close_with_reset(t);
	sv_tcp_drop_conn(t);
	t->fd = fd;
	conn_up(t, a.epoch, rx_recv, rsp_recv);
	sv_progress_add(t->ctx, t->pfd, fd);
	return 1;
}

/* The challenged caller, forgotten (its socket closed, or taken). */
void sv_tcp_pend_forget(struct sv_tcp *t, bool close_fd)
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
	if (!sv_tcp_link_key(cookie ? t->cookie : NULL, key) ||
	    !sv_tcp_proof_mac(key, "callee", h->cnonce, a.nonce, h->src_qpn,
			      t->my_qpn, NULL, 0, a.mac))
		return refuse(fd, SV_TCP_NO_QP, -EIO);
	sv_tcp_ack_seal(&a);
	if (send(fd, &a, sizeof(a), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(a)) {
		close(fd);
		return -EIO;
	}
	sv_tcp_pend_forget(t, true); /* one caller at a time: the newest */
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
void sv_tcp_pend_step(struct sv_link *l, uint64_t now)
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
			sv_tcp_pend_forget(t, true);
		return;
	}
	if (n <= 0) {
		sv_tcp_pend_forget(t, true);
		return;
	}
	t->pend_got += (uint32_t)n;
	if (t->pend_got < sizeof(*p))
		return;
	fd = t->pend_fd;
	sv_tcp_pend_forget(t, false);
	if (!sv_tcp_proof_ok(p) ||
	    !sv_tcp_link_key(t->pend_cookie ? t->cookie : NULL, key) ||
	    !sv_tcp_proof_mac(key, "caller", t->pend_nonce, t->pend_h.cnonce,
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
		sv_tcp_drop_conn(
			t); /* (no call of ours starts while one waits) */
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

	if (!sv_tcp_hello_ok(h) || h->dst_qpn != my_qpn ||
	    h->src_qpn > SV_PSN_MASK || !sv_tcp_size_ok(h->rx_size, 4096) ||
	    !sv_tcp_size_ok(h->rsp_size, SV_RSP_RING_MIN))
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
	if (!sv_tcp_hello_secret_ok(h, fd))
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
		sv_tcp_drop_conn(t);
	}
	if (cookie || sv_auth_on())
		return challenge(t, fd, h, cookie);
	/* a first call, unproven: its epoch and positions are ours to set
	 * (it never had the link up: it received nothing) */
	return take_call(l, fd, h, t->epoch + 1, 0, 0, true);
}
