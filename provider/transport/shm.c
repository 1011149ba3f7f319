// SPDX-License-Identifier: MIT
/*
 * The shared-memory transport: how two QPs of one host find each other
 * and set up their link (link.h).  Each QP holds an abstract Unix socket
 * named after its QPN, so QPNs are unique per host (network namespace)
 * with no daemon and no files, and vanish with the process.  At RTR a QP
 * connects to its peer's socket and passes, with SCM_RIGHTS, the sealed
 * memfds of its receive rings.  The two connections of a link (ours to the
 * peer's listener, the peer's to ours) are SOCK_SEQPACKET, and they are the
 * doorbells too: a peer rings us with a 1-byte message on the connection
 * we made to it, which our progress thread watches from the moment we
 * connect; we ring it on the one it made to us.  (Not the other way: the
 * connection a peer made sits unwatched in our pending list until we read
 * its hello, and a doorbell there would wake nobody.)  So a connected
 * QP holds 3 fds (listener, two connections).  Doorbells are rung with
 * send(MSG_DONTWAIT): a per-call flag on our own socket, so nothing a peer
 * does (not reading, a full queue) can block us.  The kernel vouches for the
 * peer (SO_PEERCRED) on both sides, before anything is sent or mapped: same
 * user only (-EACCES otherwise). The sockets stay open: a hang-up without a
 * goodbye means the peer died. Everything a link needs is made at RTR
 * (sv_shm_prepare), so running out of fds is modify_qp's error, not a later
 * silent failure.
 */
#include "shm.h"
#include "tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

const char *const sv_link_state_names[] = {
	[SV_LINK_IDLE] = "IDLE", [SV_LINK_CONNECTING] = "CONNECTING",
	[SV_LINK_UP] = "UP",	 [SV_LINK_CLOSED] = "CLOSED",
	[SV_LINK_DEAD] = "DEAD",
};

void sv_link_init(struct sv_link *l)
{
	memset(l, 0, sizeof(*l));
	l->listen_fd = l->conn_fd = l->acc_fd = -1;
	for (int i = 0; i < SV_LINK_PENDING; i++)
		l->pend_fd[i] = -1;
	l->conn_sock = l->rx_fd = -1;
	l->rsp_rx_fd = l->peer_arena_fd = l->peer_table_fd = -1;
}

int sv_shm_bind(struct sv_link *l, int type, uint32_t *qpn)
{
	int fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	for (int tries = 0; tries < 1000; tries++) {
		struct sockaddr_un a;
		uint32_t n;

		if (getrandom(&n, sizeof(n), 0) != sizeof(n))
			n = (uint32_t)sv_now_ns() * 2654435761u;
		n &= SV_PSN_MASK;
		if (n < 2) /* QPN 0 and 1 are the special QPs */
			continue;
		if (bind(fd, (struct sockaddr *)&a, sv_shm_qp_addr(&a, n)) ==
		    0) {
			if (type != SOCK_DGRAM && listen(fd, 16)) {
				int err = -errno;

				close(fd);
				return err;
			}
			l->listen_fd = fd;
			*qpn = n;
			return 0;
		}
		if (errno != EADDRINUSE) {
			int err = -errno;

			close(fd);
			return err;
		}
	}
	close(fd);
	return -ENOSPC;
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

int sv_shm_prepare(struct sv_link *l, uint32_t my_qpn, uint64_t ring_size,
		   uint32_t ndesc)
{
	int err;

	l->train_max = SV_MAX_TRAIN;
	if (!l->rx_ready) {
		err = sv_ring_create(&l->rx, ring_size, ndesc, my_qpn,
				     &l->rx_fd);
		if (err)
			return err;
		/* answers to our reads: a quarter of the request ring is
		 * as fast, reads being few and long; but room for trains
		 * of the largest MTU */
		err = sv_ring_create(&l->rsp_rx,
				     ring_size / 4 < SV_RSP_RING_MIN
					     ? SV_RSP_RING_MIN
					     : ring_size / 4,
				     0, my_qpn, &l->rsp_rx_fd);
		if (err) {
			sv_ring_unmap(&l->rx);
			close(l->rx_fd);
			l->rx_fd = -1;
			return err;
		}
		l->rx_ready = true;
	}
	if (l->conn_sock < 0 && l->conn_fd < 0) {
		l->conn_sock = socket(AF_UNIX, SV_SHM_SOCK | SOCK_CLOEXEC, 0);
		if (l->conn_sock < 0)
			return -errno;
	}
	return 0;
}

/* The kernel's word on who holds the other end; -EACCES, said on stderr
 * once per link, if it is not our user. */
static int check_peer(struct sv_link *l, int fd, uint32_t my_qpn,
		      const char *what)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return -errno;
	if (cr.uid == getuid())
		return 0;
	if (!l->refused_noted)
		fprintf(stderr,
			"softverbs: qp %06x: refused %s pid %d uid %u, and we "
			"are pid %d uid %u; softverbs links processes of one "
			"user only: run both as the same user\n",
			my_qpn, what, (int)cr.pid, (unsigned)cr.uid,
			(int)getpid(), (unsigned)getuid());
	l->refused_noted = true;
	return -EACCES;
}

int sv_shm_connect(struct sv_link *l, uint32_t my_qpn, uint32_t dest_qpn,
		   const struct sv_shm_share *share)
{
	struct sockaddr_un a;
	char what[80];
	int fds[SV_HELLO_FDS], nfds = 2, err, fd;

	if (l->conn_sock < 0) { /* the RTR one failed after connecting */
		l->conn_sock = socket(AF_UNIX, SV_SHM_SOCK | SOCK_CLOEXEC, 0);
		if (l->conn_sock < 0)
			return -errno;
	}
	fd = l->conn_sock;
	if (connect(fd, (struct sockaddr *)&a, sv_shm_qp_addr(&a, dest_qpn))) {
		err = -errno;
		/* no such QP (yet): the requester's timers decide; a
		 * refused AF_UNIX connect leaves the socket reusable */
		if (err == -ECONNREFUSED || err == -ENOENT)
			return -EAGAIN;
		return err;
	}
	l->conn_sock = -1;
	/* nothing leaves us before the kernel says who listens there */
	snprintf(what, sizeof(what),
		 "to connect to QP %06x: its socket belongs to", dest_qpn);
	err = check_peer(l, fd, my_qpn, what);
	if (err)
		goto err_close;
	fds[0] = l->rx_fd;
	fds[1] = l->rsp_rx_fd;
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
	l->conn_fd = fd;
	/* the peer holds them now; the mappings keep our rings */
	close(l->rx_fd);
	close(l->rsp_rx_fd);
	l->rx_fd = l->rsp_rx_fd = -1;
	return 0;

err_close:
	close(fd);
	return err;
}

/* Reads one message and up to SV_HELLO_FDS fds; -EAGAIN if none is
 * there yet. */
static int recv_msg(int fd, struct sv_hello *h, int fds[SV_HELLO_FDS],
		    int *nfds, struct sv_tcp_hello *th)
{
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE((SV_HELLO_FDS + 2) * sizeof(int))];
	} u;
	struct iovec iov[2] = {{h, sizeof(*h)}, {th, sizeof(*th)}};
	struct msghdr m = {.msg_iov = iov,
			   .msg_iovlen = 2,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c;
	ssize_t n;

	*nfds = 0;
	n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		int k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			if (*nfds < SV_HELLO_FDS)
				fds[(*nfds)++] = f;
			else
				close(f); /* more than we asked for */
		}
	}
	if (n == 0) {
		/* a hang-up, or an empty SOCK_SEQPACKET message, which can
		 * carry fds all the same: ours to close */
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return -ECONNRESET;
	}
	if ((n == sizeof(*h) ||
	     (n == sizeof(*h) + sizeof(*th) && h->type == SV_MSG_TCP)) &&
	    (m.msg_flags & MSG_CTRUNC) && !(m.msg_flags & MSG_TRUNC) &&
	    h->magic == SV_HELLO_MAGIC) {
		/* our buffer holds more fds than a hello has: the kernel
		 * could not install them (RLIMIT_NOFILE) */
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return -EMFILE;
	}
	if (n < (ssize_t)sizeof(*h) ||
	    (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) ||
	    h->magic != SV_HELLO_MAGIC || h->version != SV_HELLO_VERSION ||
	    n != (ssize_t)(h->type == SV_MSG_TCP ? sizeof(*h) + sizeof(*th)
						 : sizeof(*h))) {
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return -EPROTO;
	}
	return 0;
}

/* Reads the hello on an accepted socket and maps the peer's rings. */
static int take_hello(struct sv_link *l, int fd, uint32_t my_qpn,
		      uint32_t expect)
{
	struct sv_tcp_hello th;
	struct sv_hello h;
	int fds[SV_HELLO_FDS], nfds, err;
	struct sv_ring tx, rsp;

	err = recv_msg(fd, &h, fds, &nfds, &th);
	if (err == -EMFILE && h.src_qpn != expect)
		err = -EPROTO; /* not our peer's hello: just drop it */
	if (err)
		return err;
	if (h.type == SV_MSG_TCP && nfds == 1 && h.dst_qpn == my_qpn) {
		/* a caller from the network, passed on by a door of our
		 * user (tcp.c); the Unix connection has done its part */
		if (sv_tcp_take(l, fds[0], &th, my_qpn, expect) < 0)
			return -EPROTO; /* answered; ours closes fd */
		close(fd);
		return 1;
	}
	err = -EPROTO;
	/* a link on TCP takes no shared-memory peer (tcp.c: nor the other
	 * way round): SOFTVERBS_TRANSPORT must agree on both sides */
	if (h.type != SV_MSG_HELLO || l->tcp || (nfds != 2 && nfds != 4) ||
	    h.dst_qpn != my_qpn || h.src_qpn > SV_PSN_MASK)
		goto out;
	if (expect != SV_QPN_ANY && h.src_qpn != expect) {
		err = -ECONNREFUSED; /* someone else's QP: not our peer */
		goto out;
	}
	err = sv_ring_attach(&tx, fds[0], h.src_qpn);
	if (err)
		goto out;
	err = sv_ring_attach(&rsp, fds[1], h.src_qpn);
	if (err) {
		sv_ring_unmap(&tx);
		goto out;
	}
	if (l->tx_ready) /* a newer hello replaces an older one */
		sv_shm_drop_tx(l);
	l->tx = tx;
	l->rsp_tx = rsp;
	l->tx_ready = true;
	l->peer_qpn = h.src_qpn;
	l->acc_fd = fd;
	close(fds[0]); /* the mappings keep the rings */
	close(fds[1]);
	if (nfds == 4) { /* validated by whoever maps them (rmem.c) */
		l->peer_arena_fd = fds[2];
		l->peer_table_fd = fds[3];
		l->peer_pd = h.pd_id;
	}
	return 1;
out:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	return err;
}

void sv_shm_drop_tx(struct sv_link *l)
{
	sv_ring_unmap(&l->tx);
	sv_ring_unmap(&l->rsp_tx);
	l->tx_ready = false;
	if (l->peer_arena_fd >= 0)
		close(l->peer_arena_fd);
	if (l->peer_table_fd >= 0)
		close(l->peer_table_fd);
	l->peer_arena_fd = l->peer_table_fd = -1;
	if (l->acc_fd >= 0)
		close(l->acc_fd);
	l->acc_fd = -1;
}

/* Reads the hello of pending connection i; 1 if a ring was mapped,
 * -EMFILE if our peer's hello came but its fds could not be taken. */
static int try_pending(struct sv_link *l, int i, uint32_t my_qpn,
		       uint32_t expect, uint64_t now)
{
	int fd = l->pend_fd[i], err;

	err = take_hello(l, fd, my_qpn, expect);
	if (err == -EAGAIN &&
	    sv_ns_since(now, l->pend_ns[i]) < SV_HELLO_WAIT_NS)
		return 0; /* connected, hello still coming */
	l->pend_fd[i] = -1;
	if (err < 0) {
		sv_dbg("qp %06x: dropped a peer: %s\n", my_qpn,
		       err == -EAGAIN ? "no hello" : strerror(-err));
		close(fd);
		return err == -EMFILE ? err : 0;
	}
	return 1;
}

bool sv_shm_has_pending(const struct sv_link *l)
{
	if (l->next_accept_ns)
		return true;
	for (int i = 0; i < SV_LINK_PENDING; i++)
		if (l->pend_fd[i] >= 0)
			return true;
	return false;
}

uint64_t sv_shm_next_ns(const struct sv_link *l, uint64_t now)
{
	uint64_t next = UINT64_MAX; /* a peer's connect wakes our listener */

	for (int i = 0; i < SV_LINK_PENDING; i++)
		if (l->pend_fd[i] >= 0)
			next = now + 10000000; /* a hello is late: look again */
	if (l->next_accept_ns && l->next_accept_ns < next)
		next = l->next_accept_ns;
	if (l->state == SV_LINK_CONNECTING && l->conn_fd < 0 && !l->tcp &&
	    l->next_connect_ns < next)
		next = l->next_connect_ns; /* the peer QP was not there */
	return next;
}

/* A free pending slot, closing the oldest connection if none is. */
static int pending_slot(struct sv_link *l)
{
	int oldest = 0;

	for (int i = 0; i < SV_LINK_PENDING; i++) {
		if (l->pend_fd[i] < 0)
			return i;
		if (l->pend_ns[i] < l->pend_ns[oldest])
			oldest = i;
	}
	close(l->pend_fd[oldest]);
	l->pend_fd[oldest] = -1;
	return oldest;
}

uint64_t sv_shm_backoff(uint64_t *wait_ns, uint64_t now)
{
	/* 1 ms, doubling to 100 ms: never a busy loop on a failure */
	*wait_ns = *wait_ns ? *wait_ns * 2 : 1000000;
	if (*wait_ns > 100000000)
		*wait_ns = 100000000;
	return now + *wait_ns;
}

int sv_shm_accept(struct sv_link *l, uint32_t my_qpn, uint32_t expect)
{
	uint64_t now = sv_now_ns(), wait = 0;
	int got = 0, fd, r;

	if (l->next_accept_ns > now)
		return 0; /* out of fds a moment ago: the listener is edge
			   * triggered, so we come back on the timer */
	for (int i = 0; i < SV_LINK_PENDING; i++) {
		if (l->pend_fd[i] < 0)
			continue;
		r = try_pending(l, i, my_qpn, expect, now);
		if (r < 0)
			return r;
		got |= r;
	}
	while ((fd = accept4(l->listen_fd, NULL, NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		int i;

		if (check_peer(l, fd, my_qpn, "a connection from")) {
			close(fd);
			continue;
		}
		i = pending_slot(l);
		l->pend_fd[i] = fd;
		l->pend_ns[i] = now;
		r = try_pending(l, i, my_qpn, expect, now);
		if (r < 0)
			return r;
		got |= r;
	}
	if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
	    errno == ENOMEM) {
		/* a connection waits that we cannot take yet */
		r = -errno;
		l->next_accept_ns = sv_shm_backoff(&wait, now);
		return r;
	}
	l->next_accept_ns = 0;
	return got;
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

enum sv_link_state sv_shm_check(struct sv_link *l, int fd)
{
	enum sv_link_state st = read_conn(fd, l->state);
	int other = fd == l->conn_fd ? l->acc_fd : l->conn_fd;

	/* the peer says goodbye on both sockets before it closes either, so
	 * a hang-up here with a goodbye waiting on the other is a close */
	if (st == SV_LINK_DEAD && other >= 0 &&
	    read_conn(other, l->state) == SV_LINK_CLOSED)
		return SV_LINK_CLOSED;
	return st;
}

void sv_shm_close(struct sv_link *l, uint32_t my_qpn, bool bye)
{
	if (bye && l->conn_fd >= 0)
		send_msg(l->conn_fd, SV_MSG_BYE, my_qpn, l->peer_qpn, 0, NULL,
			 0);
	if (bye && l->acc_fd >= 0)
		send_msg(l->acc_fd, SV_MSG_BYE, my_qpn, l->peer_qpn, 0, NULL,
			 0);
	sv_shm_drop_tx(l);
	if (l->conn_fd >= 0)
		close(l->conn_fd);
	for (int i = 0; i < SV_LINK_PENDING; i++) {
		if (l->pend_fd[i] >= 0)
			close(l->pend_fd[i]);
		l->pend_fd[i] = -1;
	}
	if (l->rx_ready) {
		sv_ring_unmap(&l->rx);
		sv_ring_unmap(&l->rsp_rx);
	}
	if (l->rx_fd >= 0)
		close(l->rx_fd);
	if (l->rsp_rx_fd >= 0)
		close(l->rsp_rx_fd);
	l->rsp_rx_fd = -1;
	if (l->conn_sock >= 0)
		close(l->conn_sock);
	l->conn_fd = l->rx_fd = l->conn_sock = -1;
	l->rx_ready = false;
	l->next_accept_ns = l->next_connect_ns = l->connect_wait_ns = 0;
}

bool sv_shm_sender_ok(struct msghdr *m)
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

void sv_link_ring_doorbell(int fd)
{
	char b = 0;

	/* EAGAIN: its queue is full, so it is rung already */
	if (fd >= 0 && send(fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
	    errno != EAGAIN)
		sv_dbg("doorbell: %s\n", strerror(errno));
}

/* Stores only what changes: these lines are read after every packet. */
static void set_flag(_Atomic uint32_t *f, uint32_t v)
{
	if (atomic_load_explicit(f, memory_order_relaxed) != v)
		atomic_store(f, v);
}

void sv_link_set_sleep(struct sv_link *l, bool sleep)
{
	if (l->rx_ready) {
		set_flag(&l->rx.hdr->rx_sleep, sleep);
		set_flag(&l->rsp_rx.hdr->rx_sleep, sleep);
	}
	if (l->tx_ready) {
		set_flag(&l->tx.hdr->tx_sleep, sleep);
		set_flag(&l->rsp_tx.hdr->tx_sleep, sleep);
	}
}
