// SPDX-License-Identifier: MIT
/*
 * The shared-memory transport: how two QPs of one host find each other
 * and set up their link (link.h).  Each QP holds an abstract Unix socket
 * named after its QPN, so QPNs are unique per host (network namespace)
 * with no daemon and no files, and vanish with the process.  At RTR a QP
 * connects to its peer's socket and passes, with SCM_RIGHTS, the sealed
 * memfd of its receive ring and its context's doorbell eventfd.  The
 * kernel vouches for the peer (SO_PEERCRED): same user only.  The sockets
 * stay open: a hang-up without a goodbye means the peer died.
 */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

#define SV_HELLO_MAGIC	 0x5356686cu /* "SVhl" */
#define SV_HELLO_VERSION 1

enum sv_msg_type {
	SV_MSG_HELLO = 1, /* carries [ring memfd, doorbell eventfd] */
	SV_MSG_BYE = 2,	  /* orderly close: the peer QP is going */
};

struct sv_hello {
	uint32_t magic;	  /* SV_HELLO_MAGIC */
	uint16_t version; /* SV_HELLO_VERSION */
	uint16_t type;	  /* enum sv_msg_type */
	uint32_t src_qpn; /* the sender's QPN */
	uint32_t dst_qpn; /* the QPN it believes it talks to */
	uint64_t rsvd;
};
static_assert(sizeof(struct sv_hello) == 24, "wire ABI");

const char *const sv_link_state_names[] = {
	[SV_LINK_IDLE] = "IDLE", [SV_LINK_CONNECTING] = "CONNECTING",
	[SV_LINK_UP] = "UP",	 [SV_LINK_CLOSED] = "CLOSED",
	[SV_LINK_DEAD] = "DEAD",
};

static socklen_t qp_addr(struct sockaddr_un *a, uint32_t qpn)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* sun_path[0] = 0: the abstract namespace, per network namespace */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "softverbs/qp/%06x", qpn);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

void sv_link_init(struct sv_link *l)
{
	memset(l, 0, sizeof(*l));
	l->listen_fd = l->conn_fd = l->acc_fd = l->peer_db = -1;
	for (int i = 0; i < SV_LINK_PENDING; i++)
		l->pend_fd[i] = -1;
	l->rx_fd = -1;
}

int sv_shm_bind(struct sv_link *l, uint32_t *qpn)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

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
		if (bind(fd, (struct sockaddr *)&a, qp_addr(&a, n)) == 0) {
			if (listen(fd, 16)) {
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
		    const int *fds, int nfds)
{
	struct sv_hello h = {
		.magic = SV_HELLO_MAGIC,
		.version = SV_HELLO_VERSION,
		.type = type,
		.src_qpn = src,
		.dst_qpn = dst,
	};
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(2 * sizeof(int))];
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

int sv_shm_connect(struct sv_link *l, uint32_t my_qpn, uint32_t dest_qpn,
		   int db_fd, uint64_t ring_size)
{
	struct sockaddr_un a;
	int fds[2], err, fd;

	if (!l->rx_ready) {
		err = sv_ring_create(&l->rx, ring_size, my_qpn, &l->rx_fd);
		if (err)
			return err;
		l->rx_ready = true;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, qp_addr(&a, dest_qpn))) {
		err = -errno;
		close(fd);
		/* no such QP (yet): the requester's timers decide */
		if (err == -ECONNREFUSED || err == -ENOENT)
			return -EAGAIN;
		return err;
	}
	fds[0] = l->rx_fd;
	fds[1] = db_fd;
	err = send_msg(fd, SV_MSG_HELLO, my_qpn, dest_qpn, fds, 2);
	if (err) {
		close(fd);
		return err;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	l->conn_fd = fd;
	return 0;
}

/* Reads one message and up to two fds; -EAGAIN if none is there yet. */
static int recv_msg(int fd, struct sv_hello *h, int fds[2], int *nfds)
{
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} u;
	struct iovec iov = {h, sizeof(*h)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
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
			if (*nfds < 2)
				fds[(*nfds)++] = f;
			else
				close(f); /* more than we asked for */
		}
	}
	if (n == 0)
		return -ECONNRESET;
	if (n != sizeof(*h) || (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) ||
	    h->magic != SV_HELLO_MAGIC || h->version != SV_HELLO_VERSION) {
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return -EPROTO;
	}
	return 0;
}

static bool is_eventfd(int fd)
{
	char path[64], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = 0;
	return strcmp(target, "anon_inode:[eventfd]") == 0;
}

static bool same_user(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
	       cr.uid == getuid();
}

/* Reads the hello on an accepted socket and maps the peer's ring. */
static int take_hello(struct sv_link *l, int fd, uint32_t my_qpn,
		      uint32_t expect)
{
	struct sv_hello h;
	int fds[2], nfds, err;
	struct sv_ring tx;

	err = recv_msg(fd, &h, fds, &nfds);
	if (err)
		return err;
	err = -EPROTO;
	if (h.type != SV_MSG_HELLO || nfds != 2 || h.dst_qpn != my_qpn ||
	    h.src_qpn > SV_PSN_MASK)
		goto out;
	if (expect != SV_QPN_ANY && h.src_qpn != expect) {
		err = -ECONNREFUSED; /* someone else's QP: not our peer */
		goto out;
	}
	if (!is_eventfd(fds[1]))
		goto out;
	err = sv_ring_attach(&tx, fds[0], h.src_qpn);
	if (err)
		goto out;
	if (l->tx_ready) /* a newer hello replaces an older one */
		sv_shm_drop_tx(l);
	l->tx = tx;
	l->tx_ready = true;
	l->peer_qpn = h.src_qpn;
	l->peer_db = fds[1];
	l->acc_fd = fd;
	close(fds[0]); /* the mapping keeps the ring */
	return 1;
out:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	return err;
}

void sv_shm_drop_tx(struct sv_link *l)
{
	sv_ring_unmap(&l->tx);
	l->tx_ready = false;
	if (l->peer_db >= 0)
		close(l->peer_db);
	if (l->acc_fd >= 0)
		close(l->acc_fd);
	l->peer_db = l->acc_fd = -1;
}

/* Reads the hello of pending connection i; 1 if a ring was mapped. */
static int try_pending(struct sv_link *l, int i, uint32_t my_qpn,
		       uint32_t expect, uint64_t now)
{
	int fd = l->pend_fd[i], err;

	err = take_hello(l, fd, my_qpn, expect);
	if (err == -EAGAIN && now - l->pend_ns[i] < SV_HELLO_WAIT_NS)
		return 0; /* connected, hello still coming */
	l->pend_fd[i] = -1;
	if (err < 0) {
		sv_dbg("qp %06x: dropped a peer: %s\n", my_qpn,
		       err == -EAGAIN ? "no hello" : strerror(-err));
		close(fd);
		return 0;
	}
	return 1;
}

bool sv_shm_has_pending(const struct sv_link *l)
{
	for (int i = 0; i < SV_LINK_PENDING; i++)
		if (l->pend_fd[i] >= 0)
			return true;
	return false;
}

uint64_t sv_shm_next_ns(const struct sv_link *l, uint64_t now)
{
	if (sv_shm_has_pending(l))
		return now + 10000000; /* a hello is late: look again */
	if (l->state == SV_LINK_CONNECTING && l->conn_fd < 0)
		return l->next_connect_ns; /* the peer QP was not there */
	return UINT64_MAX; /* a peer's connect wakes our listener */
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

int sv_shm_accept(struct sv_link *l, uint32_t my_qpn, uint32_t expect)
{
	uint64_t now = sv_now_ns();
	int got = 0, fd;

	for (int i = 0; i < SV_LINK_PENDING; i++)
		if (l->pend_fd[i] >= 0)
			got |= try_pending(l, i, my_qpn, expect, now);
	while ((fd = accept4(l->listen_fd, NULL, NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		int i;

		if (!same_user(fd)) {
			sv_dbg("qp %06x: refused a peer of another user\n",
			       my_qpn);
			close(fd);
			continue;
		}
		i = pending_slot(l);
		l->pend_fd[i] = fd;
		l->pend_ns[i] = now;
		got |= try_pending(l, i, my_qpn, expect, now);
	}
	return got;
}

enum sv_link_state sv_shm_check(struct sv_link *l, int fd)
{
	struct sv_hello h;
	int fds[2], nfds, err;

	for (;;) {
		err = recv_msg(fd, &h, fds, &nfds);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (err == -EAGAIN)
			return l->state;
		if (err == 0 && h.type == SV_MSG_BYE)
			return SV_LINK_CLOSED;
		if (err == 0)
			continue;    /* nothing else is expected; ignore it */
		return SV_LINK_DEAD; /* hang-up without goodbye */
	}
}

void sv_shm_close(struct sv_link *l, uint32_t my_qpn, bool bye)
{
	if (bye && l->conn_fd >= 0)
		send_msg(l->conn_fd, SV_MSG_BYE, my_qpn, l->peer_qpn, NULL, 0);
	if (bye && l->acc_fd >= 0)
		send_msg(l->acc_fd, SV_MSG_BYE, my_qpn, l->peer_qpn, NULL, 0);
	sv_shm_drop_tx(l);
	if (l->conn_fd >= 0)
		close(l->conn_fd);
	for (int i = 0; i < SV_LINK_PENDING; i++) {
		if (l->pend_fd[i] >= 0)
			close(l->pend_fd[i]);
		l->pend_fd[i] = -1;
	}
	if (l->rx_ready)
		sv_ring_unmap(&l->rx);
	if (l->rx_fd >= 0)
		close(l->rx_fd);
	l->conn_fd = l->rx_fd = -1;
	l->rx_ready = false;
}

void sv_link_ring_doorbell(int fd)
{
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
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
	if (l->rx_ready)
		set_flag(&l->rx.hdr->rx_sleep, sleep);
	if (l->tx_ready)
		set_flag(&l->tx.hdr->tx_sleep, sleep);
}
