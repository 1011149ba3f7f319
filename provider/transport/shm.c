// SPDX-License-Identifier: MIT
/*
 * The shared-memory transport (sv_shm_link_ops): how two QPs of one host
 * set up their link (link.h).  Each QP holds an abstract Unix socket
 * named after its QPN (link.c).  At RTR a QP connects to its peer's socket and
 * passes, with SCM_RIGHTS, the sealed memfds of its receive rings.  The two
 * connections of a link (ours to the peer's listener, the peer's to ours) are
 * SOCK_SEQPACKET, and they are the doorbells too: a peer rings us with a 1-byte
 * message on the connection we made to it, which our progress thread watches
 * from the moment we connect; we ring it on the one it made to us.  (Not the
 * other way: the connection a peer made sits unwatched in our pending list
 * until we read its hello, and a doorbell there would wake nobody.)  So a
 * connected QP holds 3 fds (listener, two connections).  Doorbells are rung
 * with send(MSG_DONTWAIT): a per-call flag on our own socket, so nothing a peer
 * does (not reading, a full queue) can block us.  The kernel vouches for the
 * peer (SO_PEERCRED) on both sides, before anything is sent or mapped: same
 * user only (-EACCES otherwise). The sockets stay open: a hang-up without a
 * goodbye means the peer died. Everything a link needs is made at RTR
 * (prepare), so running out of fds is modify_qp's error, not a later
 * silent failure.
 */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "progress.h"
#include "rmem.h"
#include "util.h"

/* The link's shared-memory state, in its priv (link.h). */
struct shm_link {
	int conn_sock;		  /* made at RTR, connected on a try */
	int conn_fd;		  /* ours to the peer's listener: the
				   * peer rings our doorbell on it */
	int acc_fd;		  /* the peer's to our listener: we
				   * ring the peer's doorbell on it */
	int rx_fd;		  /* memfd of rx, until our hello has it */
	int rsp_rx_fd;		  /* memfd of rsp_rx, likewise */
	int peer_arena_fd;	  /* the peer's shared memory (rmem.c), */
	int peer_table_fd;	  /* and its key table, until taken */
	uint32_t peer_pd;	  /* the peer QP's PD id in that table */
	uint64_t next_connect_ns; /* retry time for a failed connect */
	uint64_t connect_wait_ns; /* backoff: doubles, capped */
	struct sv_context *ctx;
	struct sv_pfd *pfd_conn, *pfd_acc; /* watches of conn_fd, acc_fd */
	uint32_t pd_id;			   /* ours, offered in the hello */
	bool share_mem;			   /* offer our registered memory */
};

static_assert(sizeof(struct shm_link) <= sizeof(((struct sv_link *)0)->priv),
	      "SV_LINK_PRIV_WORDS");

static struct shm_link *shm(const struct sv_link *l)
{
	return (struct shm_link *)&l->priv;
}

/* The link goes on shared memory (at RTR, or at a peer's early hello). */
static void adopt(struct sv_link *l)
{
	struct shm_link *s = shm(l);

	if (l->ops == &sv_shm_link_ops)
		return;
	memset(s, 0, sizeof(*s));
	s->conn_sock = s->conn_fd = s->acc_fd = -1;
	s->rx_fd = s->rsp_rx_fd = -1;
	s->peer_arena_fd = s->peer_table_fd = -1;
	l->ops = &sv_shm_link_ops;
}

static int send_msg(int fd, uint16_t type, uint32_t src, uint32_t dst,
		    uint32_t pd_id, const int *fds, int nfds)
{
	struct sv_hello h = {
		.magic = SV_HELLO_MAGIC,
		.version = SV_HELLO_VERSION,
		.type = type,
		.src_qpn = src,
		.dst_qpn = dst,
		.pd_id = pd_id,
	};
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(SV_HELLO_FDS * sizeof(int))];
	} u;
	struct iovec iov = {&h, sizeof(h)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (nfds) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		u.c.cmsg_level = SOL_SOCKET;
		u.c.cmsg_type = SCM_RIGHTS;
		u.c.cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(&u.c), fds, nfds * sizeof(int));
	}
	n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	return n == sizeof(h) ? 0 : -EPROTO;
}

static int prepare(struct sv_link *l, const struct sv_link_conf *c)
{
	struct shm_link *s;
	int err;

	adopt(l);
	s = shm(l);
	s->ctx = c->ctx;
	s->pfd_conn = c->pfd_conn;
	s->pfd_acc = c->pfd_acc;
	s->pd_id = c->pd_id;
	s->share_mem = c->share_mem;
	/* the peer will map our arena: what waited moves now, before the
	 * receives posted so far are described (verbs/qp.c); if there is
	 * no arena, the hello offers none either */
	if (s->share_mem)
		(void)sv_rmem_share(c->ctx);
	s->next_connect_ns = s->connect_wait_ns = 0;
	l->train_max = SV_MAX_TRAIN;
	if (!l->rx_ready) {
		err = sv_ring_create(&l->rx, c->ring_size, c->ndesc, c->my_qpn,
				     &s->rx_fd);
		if (err)
			return err;
		/* answers to our reads: a quarter of the request ring is
		 * as fast, reads being few and long; but room for trains
		 * of the largest MTU */
		err = sv_ring_create(&l->rsp_rx,
				     c->ring_size / 4 < SV_RSP_RING_MIN
					     ? SV_RSP_RING_MIN
					     : c->ring_size / 4,
				     0, c->my_qpn, &s->rsp_rx_fd);
		if (err) {
			sv_ring_unmap(&l->rx);
			close(s->rx_fd);
			s->rx_fd = -1;
			return err;
		}
		l->rx_ready = true;
	}
	if (s->conn_sock < 0 && s->conn_fd < 0) {
		s->conn_sock = socket(AF_UNIX, SV_LINK_SOCK | SOCK_CLOEXEC, 0);
		if (s->conn_sock < 0)
			return -errno;
	}
	return 0;
}

int sv_shm_connect(struct sv_link *l, uint32_t my_qpn, uint32_t dest_qpn,
		   const struct sv_shm_share *share)
{
	struct shm_link *s = shm(l);
	struct sockaddr_un a;
	char what[80];
	int fds[SV_HELLO_FDS], nfds = 2, err, fd;

	if (s->conn_sock < 0) { /* the RTR one failed after connecting */
		s->conn_sock = socket(AF_UNIX, SV_LINK_SOCK | SOCK_CLOEXEC, 0);
		if (s->conn_sock < 0)
			return -errno;
	}
	fd = s->conn_sock;
	if (connect(fd, (struct sockaddr *)&a, sv_link_qp_addr(&a, dest_qpn))) {
		err = -errno;
		/* no such QP (yet): the requester's timers decide; a
		 * refused AF_UNIX connect leaves the socket reusable */
		if (err == -ECONNREFUSED || err == -ENOENT)
			return -EAGAIN;
		return err;
	}
	s->conn_sock = -1;
	/* nothing leaves us before the kernel says who listens there */
	snprintf(what, sizeof(what),
		 "to connect to QP %06x: its socket belongs to", dest_qpn);
	err = sv_link_check_peer(l, fd, my_qpn, what);
	if (err)
		goto err_close;
	fds[0] = s->rx_fd;
	fds[1] = s->rsp_rx_fd;
	if (share && share->arena_fd >= 0 && share->table_fd >= 0) {
		fds[2] = share->arena_fd;
		fds[3] = share->table_fd;
		nfds = 4;
	}
	err = send_msg(fd, SV_MSG_HELLO, my_qpn, dest_qpn,
		       share ? share->pd_id : 0, fds, nfds);
	if (err)
		goto err_close;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	s->conn_fd = fd;
	/* the peer holds them now; the mappings keep our rings */
	close(s->rx_fd);
	close(s->rsp_rx_fd);
	s->rx_fd = s->rsp_rx_fd = -1;
	return 0;

err_close:
	close(fd);
	return err;
}

static void drop_tx(struct sv_link *l);

/* A peer's hello on our socket (link.c): maps its rings. */
static int take(struct sv_link *l, int sock, const struct sv_hello *h, int *fds,
		int nfds, const void *body, uint32_t my_qpn, uint32_t expect)
{
	struct sv_ring tx, rsp;
	struct shm_link *s;
	int err;

	(void)body;
	/* a link on TCP takes no shared-memory peer (nor the other way
	 * round): SOFTVERBS_TRANSPORT must agree on both sides */
	if ((l->ops && l->ops != &sv_shm_link_ops) ||
	    (nfds != 2 && nfds != 4) || h->dst_qpn != my_qpn ||
	    h->src_qpn > SV_PSN_MASK)
		return -EPROTO;
	if (expect != SV_QPN_ANY && h->src_qpn != expect)
		return -ECONNREFUSED; /* someone else's QP: not our peer */
	err = sv_ring_attach(&tx, fds[0], h->src_qpn);
	if (err)
		return err;
	err = sv_ring_attach(&rsp, fds[1], h->src_qpn);
	if (err) {
		sv_ring_unmap(&tx);
		return err;
	}
	adopt(l);
	s = shm(l);
	if (l->tx_ready) /* a newer hello replaces an older one */
		drop_tx(l);
	l->tx = tx;
	l->rsp_tx = rsp;
	l->tx_ready = true;
	l->peer_qpn = h->src_qpn;
	s->acc_fd = sock;
	close(fds[0]); /* the mappings keep the rings */
	close(fds[1]);
	fds[0] = fds[1] = -1;
	if (nfds == 4) { /* validated by whoever maps them (rmem.c) */
		s->peer_arena_fd = fds[2];
		s->peer_table_fd = fds[3];
		s->peer_pd = h->pd_id;
		fds[2] = fds[3] = -1;
	}
	return 1;
}

static void drop_tx(struct sv_link *l)
{
	struct shm_link *s = shm(l);

	sv_ring_unmap(&l->tx);
	sv_ring_unmap(&l->rsp_tx);
	l->tx_ready = false;
	if (s->peer_arena_fd >= 0)
		close(s->peer_arena_fd);
	if (s->peer_table_fd >= 0)
		close(s->peer_table_fd);
	s->peer_arena_fd = s->peer_table_fd = -1;
	if (s->acc_fd >= 0)
		close(s->acc_fd);
	s->acc_fd = -1;
}

static uint64_t next_ns(const struct sv_link *l, uint64_t now)
{
	const struct shm_link *s = shm(l);

	(void)now;
	if (l->state == SV_LINK_CONNECTING && s->conn_fd < 0)
		return s->next_connect_ns; /* the peer QP was not there */
	return UINT64_MAX;
}

/* Registers the link's connection sockets: for hang-up detection, and
 * ours to the peer for its doorbell (from the moment we connect). */
static void watch(struct shm_link *s)
{
	if (!s->pfd_conn) /* a fuzzer's peer: nobody watches */
		return;
	if (s->conn_fd >= 0 && s->pfd_conn->fd != s->conn_fd) {
		sv_progress_del(s->ctx, s->pfd_conn);
		sv_progress_add(s->ctx, s->pfd_conn, s->conn_fd);
	}
	if (s->acc_fd >= 0 && s->pfd_acc->fd != s->acc_fd) {
		sv_progress_del(s->ctx, s->pfd_acc);
		sv_progress_add(s->ctx, s->pfd_acc, s->acc_fd);
	}
}

/* Connects to the peer's socket (again, with backoff, if it was not
 * there yet), and the link is up once the peer's hello came too. */
static int step(struct sv_link *l, int got, uint32_t qpn, uint32_t expect,
		uint64_t now)
{
	struct shm_link *s = shm(l);
	int err = 0;

	if (got > 0 && l->peer_qpn != expect && expect != SV_QPN_ANY)
		drop_tx(l);
	if (got < 0 && l->state == SV_LINK_CONNECTING && !l->tx_ready)
		return got; /* our peer's hello is lost or cannot be taken */
	if (expect == SV_QPN_ANY)
		return 0;
	if (l->tx_ready && l->peer_qpn != expect)
		drop_tx(l); /* an early hello from someone else */
	if (s->conn_fd < 0 && l->state == SV_LINK_CONNECTING) {
		if (now >= s->next_connect_ns) {
			struct sv_shm_share sh = {.pd_id = s->pd_id};

			/* our registered memory, for the peer's one-sided
			 * operations; without it they reach our responder
			 * (always, for XRC_RECV: the PD is each SRQ's) */
			if (!s->share_mem ||
			    sv_rmem_fds(s->ctx, &sh.arena_fd, &sh.table_fd))
				sh.arena_fd = sh.table_fd = -1;
			err = sv_shm_connect(l, qpn, expect, &sh);
		}
		if (err == -EACCES)
			return err;
		if (err)
			s->next_connect_ns =
				sv_link_backoff(&s->connect_wait_ns, now);
		if (err && err != -EAGAIN)
			sv_dbg("qp %06x: connect to %06x: %s\n", qpn, expect,
			       strerror(-err));
	}
	if (l->state == SV_LINK_CONNECTING && s->conn_fd >= 0 && l->tx_ready) {
		l->state = SV_LINK_UP;
		/* what we acked before we could ring: the peer may sleep */
		sv_link_ring_doorbell(s->acc_fd);
	}
	watch(s);
	return 0;
}

static int peer_memory(struct sv_link *l, int *arena_fd, int *table_fd,
		       uint32_t *pd)
{
	struct shm_link *s = shm(l);

	if (!l->tx_ready || s->peer_arena_fd < 0)
		return 0;
	*arena_fd = s->peer_arena_fd;
	*table_fd = s->peer_table_fd;
	*pd = s->peer_pd;
	s->peer_arena_fd = s->peer_table_fd = -1;
	return 1;
}

/*
 * Reads what waits on one connection socket, to its end: doorbells (the
 * wake-up was the point), a goodbye, or the end of the stream.  Bounded
 * (a peer that rings without end cannot hold us here) well above what a
 * queue can hold: the sender's socket buffer takes a few hundred of them,
 * so the queue is always emptied and the peer's next ring is an edge.
 */
static enum sv_link_state read_conn(int fd, enum sv_link_state st)
{
	for (int i = 0; i < 4096; i++) {
		struct sv_hello h;
		/* fds a peer attached to anything here are not taken: the
		 * kernel closes them with the message */
		ssize_t n = recv(fd, &h, sizeof(h), MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return st;
		if (n <= 0)
			return SV_LINK_DEAD; /* hang-up without goodbye */
		if (n == sizeof(h) && h.magic == SV_HELLO_MAGIC &&
		    h.version == SV_HELLO_VERSION && h.type == SV_MSG_BYE)
			return SV_LINK_CLOSED;
		/* a doorbell, or nothing we expect: ignore it */
	}
	return st;
}

static enum sv_link_state check(struct sv_link *l, int fd)
{
	struct shm_link *s = shm(l);
	enum sv_link_state st;
	int other;

	if (fd < 0)
		fd = s->conn_fd; /* the doorbell */
	if (fd < 0)
		return l->state;
	st = read_conn(fd, l->state);
	other = fd == s->conn_fd ? s->acc_fd : s->conn_fd;

	/* the peer says goodbye on both sockets before it closes either, so
	 * a hang-up here with a goodbye waiting on the other is a close */
	if (st == SV_LINK_DEAD && other >= 0 &&
	    read_conn(other, l->state) == SV_LINK_CLOSED)
		return SV_LINK_CLOSED;
	return st;
}

static void shm_close(struct sv_link *l, uint32_t my_qpn, bool bye)
{
	struct shm_link *s = shm(l);

	if (bye && s->conn_fd >= 0)
		send_msg(s->conn_fd, SV_MSG_BYE, my_qpn, l->peer_qpn, 0, NULL,
			 0);
	if (bye && s->acc_fd >= 0)
		send_msg(s->acc_fd, SV_MSG_BYE, my_qpn, l->peer_qpn, 0, NULL,
			 0);
	drop_tx(l);
	if (s->conn_fd >= 0)
		close(s->conn_fd);
	if (s->rx_fd >= 0)
		close(s->rx_fd);
	if (s->rsp_rx_fd >= 0)
		close(s->rsp_rx_fd);
	if (s->conn_sock >= 0)
		close(s->conn_sock);
	s->conn_fd = s->rx_fd = s->rsp_rx_fd = s->conn_sock = -1;
	s->next_connect_ns = s->connect_wait_ns = 0;
}

void sv_shm_ring_peer(struct sv_link *l)
{
	sv_link_ring_doorbell(shm(l)->acc_fd);
}

/* Flushing a shared ring is a wake-up: link.h's inline calls do it, and
 * a shared-memory link never takes this path. */
static void flush(struct sv_link *l)
{
	(void)l;
}

static bool rnr_abort(struct sv_link *l)
{
	uint32_t expect = SV_RNR_WAIT;

	return atomic_compare_exchange_strong(&l->tx.hdr->rnr, &expect,
					      SV_RNR_ABORT);
}

const struct sv_link_ops sv_shm_link_ops = {
	.name = "shm",
	.msg_type = SV_MSG_HELLO,
	.msg_body = 0,
	.prepare = prepare,
	.take = take,
	.step = step,
	.peer_memory = peer_memory,
	.check = check,
	.flush = flush,
	.rnr_abort = rnr_abort,
	.next_ns = next_ns,
	.close = shm_close,
};
