// SPDX-License-Identifier: MIT
/*
 * What every transport of a connected QP shares (link.h): the QP's socket
 * and the messages that come through it, the choice of a transport at RTR,
 * and the life of a link around its transport's ops.
 *
 * Each QP holds an abstract Unix socket named after its QPN, so QPNs are
 * unique per host (network namespace) with no daemon and no files, and
 * vanish with the process.  It is a listener: a shared-memory peer
 * connects to it with its hello (shm.c), and our user's TCP door passes
 * a network caller's socket to it (tcp/door.c).  Each message names its
 * transport (enum sv_msg_type), whose take() has it.  The kernel vouches
 * for who connects (SO_PEERCRED): our user only.
 *
 * The registry below is the one place that lists the transports: a new
 * one is a directory under transport/, an ops table, and a row here.
 */
#include "link.h"
#include "progress.h"
#include "roce_link.h"
#include "shm.h"
#include "tcp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "env.h"
#include "util.h"

const char *const sv_link_state_names[] = {
	[SV_LINK_IDLE] = "IDLE", [SV_LINK_CONNECTING] = "CONNECTING",
	[SV_LINK_UP] = "UP",	 [SV_LINK_CLOSED] = "CLOSED",
	[SV_LINK_DEAD] = "DEAD",
};

/* Every transport; each takes the messages of its msg_type. */
static const struct sv_link_ops *const transports[] = {
	&sv_shm_link_ops,
	&sv_tcp_link_ops,
	&sv_roce_link_ops,
};

#define N_TRANSPORTS (sizeof(transports) / sizeof(transports[0]))

static const struct sv_link_ops *transport_of(uint16_t msg_type)
{
	for (size_t i = 0; i < N_TRANSPORTS; i++)
		if (transports[i]->msg_type == msg_type)
			return transports[i];
	return NULL;
}

void sv_link_init(struct sv_link *l)
{
	memset(l, 0, sizeof(*l));
	l->listen_fd = -1;
	for (int i = 0; i < SV_LINK_PENDING; i++)
		l->pend_fd[i] = -1;
}

int sv_link_bind(struct sv_link *l, int type, uint32_t *qpn)
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
		if (bind(fd, (struct sockaddr *)&a, sv_link_qp_addr(&a, n)) ==
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

void sv_link_unbind(struct sv_link *l)
{
	if (l->listen_fd >= 0)
		close(l->listen_fd);
	l->listen_fd = -1;
}

int sv_link_check_peer(struct sv_link *l, int fd, uint32_t my_qpn,
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

static void close_fds(int *fds, int nfds)
{
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Reads one message (a hello and its transport's body) and up to
 * SV_HELLO_FDS fds; -EAGAIN if none is there yet. */
static int recv_msg(int fd, struct sv_hello *h, int fds[SV_HELLO_FDS],
		    int *nfds, void *body)
{
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE((SV_HELLO_FDS + 2) * sizeof(int))];
	} u;
	struct iovec iov[2] = {{h, sizeof(*h)}, {body, SV_HELLO_BODY}};
	struct msghdr m = {.msg_iov = iov,
			   .msg_iovlen = 2,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	const struct sv_link_ops *t;
	struct cmsghdr *c;
	ssize_t n, want;

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
		close_fds(fds, *nfds);
		*nfds = 0;
		return -ECONNRESET;
	}
	t = n >= (ssize_t)sizeof(*h) ? transport_of(h->type) : NULL;
	want = (ssize_t)sizeof(*h) + (t ? (ssize_t)t->msg_body : 0);
	if (t && n == want && (m.msg_flags & MSG_CTRUNC) &&
	    !(m.msg_flags & MSG_TRUNC) && h->magic == SV_HELLO_MAGIC) {
		/* our buffer holds more fds than a hello has: the kernel
		 * could not install them (RLIMIT_NOFILE) */
		close_fds(fds, *nfds);
		*nfds = 0;
		return -EMFILE;
	}
	if (!t || (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) ||
	    h->magic != SV_HELLO_MAGIC || h->version != SV_HELLO_VERSION ||
	    n != want) {
		close_fds(fds, *nfds);
		*nfds = 0;
		return -EPROTO;
	}
	return 0;
}

/* Reads the message on an accepted socket and has its transport take
 * it: 1 if it did (the socket is the transport's now). */
static int take_msg(struct sv_link *l, int fd, uint32_t my_qpn, uint32_t expect)
{
	_Alignas(8) uint8_t body[SV_HELLO_BODY];
	struct sv_hello h;
	int fds[SV_HELLO_FDS], nfds, err;

	err = recv_msg(fd, &h, fds, &nfds, body);
	if (err == -EMFILE && h.src_qpn != expect)
		err = -EPROTO; /* not our peer's hello: just drop it */
	if (err)
		return err;
	err = transport_of(h.type)->take(l, fd, &h, fds, nfds, body, my_qpn,
					 expect);
	close_fds(fds, nfds); /* what the transport did not keep */
	return err;
}

/*
 * Whether the loop watches pending connection i (on), so that its hello,
 * when it comes, steps the link at once.  A peer connects, then sends its
 * hello, and the listener's event may have us accept in between: unwatched,
 * that hello waited for the next look at the QP, 10 ms later, or longer
 * while the app drives it (5-16 ms of each TCP link's set-up, the door's
 * pass to the QP).  Off before the fd is closed or handed on.
 */
static void pend_watch(struct sv_link *l, int i, bool on)
{
	struct sv_pfd *p = l->pend_pfd ? &l->pend_pfd[i] : NULL;

	if (!p || !l->ctx)
		return;
	if (on && p->fd < 0)
		sv_progress_add(l->ctx, p, l->pend_fd[i]);
	else if (!on && p->fd >= 0)
		sv_progress_del(l->ctx, p);
}

/* Reads the message of pending connection i; 1 if the link took it,
 * -EMFILE if our peer's hello came but its fds could not be taken. */
static int try_pending(struct sv_link *l, int i, uint32_t my_qpn,
		       uint32_t expect, uint64_t now)
{
	int fd = l->pend_fd[i], err;

	/* unwatched first: the transport may watch the fd itself */
	pend_watch(l, i, false);
	err = take_msg(l, fd, my_qpn, expect);
	if (err == -EAGAIN &&
	    sv_ns_since(now, l->pend_ns[i]) < SV_HELLO_WAIT_NS) {
		pend_watch(l, i, true);
		return 0; /* connected, hello still coming */
	}
	l->pend_fd[i] = -1;
	if (err < 0) {
		sv_dbg("qp %06x: dropped a peer: %s\n", my_qpn,
		       err == -EAGAIN ? "no hello" : strerror(-err));
		close(fd);
		return err == -EMFILE ? err : 0;
	}
	return 1;
}

bool sv_link_has_pending(const struct sv_link *l)
{
	if (l->next_accept_ns ||
	    atomic_load_explicit(&l->accept_due, memory_order_relaxed))
		return true;
	for (int i = 0; i < SV_LINK_PENDING; i++)
		if (l->pend_fd[i] >= 0)
			return true;
	return false;
}

uint64_t sv_link_next_ns(const struct sv_link *l, uint64_t now)
{
	uint64_t next = UINT64_MAX, t; /* a peer's connect wakes us */

	for (int i = 0; i < SV_LINK_PENDING; i++)
		if (l->pend_fd[i] >= 0)
			next = now + 10000000; /* a hello is late: look again */
	if (l->next_accept_ns && l->next_accept_ns < next)
		next = l->next_accept_ns;
	if (l->ops && l->ops->next_ns) {
		t = l->ops->next_ns(l, now);
		if (t < next)
			next = t;
	}
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
	pend_watch(l, oldest, false);
	close(l->pend_fd[oldest]);
	l->pend_fd[oldest] = -1;
	return oldest;
}

uint64_t sv_link_backoff(uint64_t *wait_ns, uint64_t now)
{
	/* 1 ms, doubling to 100 ms: never a busy loop on a failure */
	*wait_ns = *wait_ns ? *wait_ns * 2 : 1000000;
	if (*wait_ns > 100000000)
		*wait_ns = 100000000;
	return now + *wait_ns;
}

int sv_link_accept(struct sv_link *l, uint32_t my_qpn, uint32_t expect)
{
	uint64_t now = sv_now_ns(), wait = 0;
	int got = 0, fd, r;

	if (l->next_accept_ns > now)
		return 0; /* out of fds a moment ago: the listener is edge
			   * triggered, so we come back on the timer */
	/* before the accepts: a caller after them raises a new edge */
	atomic_store_explicit(&l->accept_due, false, memory_order_relaxed);
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

		if (sv_link_check_peer(l, fd, my_qpn, "a connection from")) {
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
		l->next_accept_ns = sv_link_backoff(&wait, now);
		return r;
	}
	l->next_accept_ns = 0;
	return got;
}

int sv_link_step(struct sv_link *l, uint32_t my_qpn, uint32_t expect)
{
	int got;

	if (l->ops && l->ops->spare)
		l->ops->spare(l, false); /* room for a caller's socket */
	got = sv_link_accept(l, my_qpn, expect);
	if (l->ops && l->ops->spare)
		l->ops->spare(l, true);
	if (!l->ops) /* before RTR, no peer's hello yet */
		return 0;
	return l->ops->step(l, got, my_qpn, expect, sv_now_ns());
}

int sv_link_prepare(struct sv_link *l, const struct sv_link_ops *ops,
		    const struct sv_link_conf *c)
{
	if (l->ops && l->ops != ops) {
		/* an early hello of another transport's peer: a link on one
		 * transport takes no peer of another (SOFTVERBS_TRANSPORT
		 * must agree on both sides) */
		l->ops->close(l, c->my_qpn, false);
		l->ops = NULL;
	}
	return ops->prepare(l, c);
}

void sv_link_close(struct sv_link *l, uint32_t my_qpn, bool bye)
{
	if (l->ops)
		l->ops->close(l, my_qpn, bye);
	if (l->tx_ready) {
		sv_ring_unmap(&l->tx);
		sv_ring_unmap(&l->rsp_tx);
	}
	for (int i = 0; i < SV_LINK_PENDING; i++) {
		pend_watch(l, i, false);
		if (l->pend_fd[i] >= 0)
			close(l->pend_fd[i]);
		l->pend_fd[i] = -1;
	}
	if (l->rx_ready) {
		sv_ring_unmap(&l->rx);
		sv_ring_unmap(&l->rsp_rx);
	}
	l->tx_ready = l->rx_ready = false;
	l->next_accept_ns = 0;
	l->ops = NULL;
	l->state = SV_LINK_IDLE;
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

bool sv_link_sleeping(const struct sv_link *l)
{
	return l->rx_ready &&
	       atomic_load_explicit(&l->rx.hdr->rx_sleep, memory_order_relaxed);
}

int sv_readyset_open(void)
{
	int fd = epoll_create1(EPOLL_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

bool sv_readyset_join(int set, int fd, struct sv_link *l)
{
	/* level triggered: bytes a run left unread (its buffer was full)
	 * are found again by the next poll */
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = l};

	if (!epoll_ctl(set, EPOLL_CTL_ADD, fd, &ev) || errno == EEXIST)
		return true;
	sv_dbg("readiness set %d: fd %d: %s: every poll runs its link\n", set,
	       fd, strerror(errno));
	return false;
}

void sv_readyset_leave(int set, int fd)
{
	epoll_ctl(set, EPOLL_CTL_DEL, fd, NULL);
}

int sv_readyset_wait(int set, struct sv_link **out, int max)
{
	struct epoll_event ev[SV_READYSET_MAX];
	int n;

	if (max > SV_READYSET_MAX)
		max = SV_READYSET_MAX;
	n = epoll_wait(set, ev, max, 0);
	for (int i = 0; i < n; i++)
		out[i] = ev[i].data.ptr;
	return n < 0 ? -errno : n;
}

int sv_transport_mode(void)
{
	return (int)sv_env_uint(SV_ENV_TRANSPORT); /* enum sv_transport */
}

uint16_t sv_transport_port(void)
{
	return (uint16_t)sv_env_uint(SV_ENV_TCP_PORT);
}

uint16_t sv_transport_connect_port(void)
{
	uint64_t v = sv_env_uint(SV_ENV_TCP_CONNECT_PORT);

	return v ? (uint16_t)v : sv_transport_port(); /* 0: unset */
}

const struct sv_link_ops *sv_transport_for(bool local)
{
	int mode = sv_transport_mode();

	if (mode == SV_TRANSPORT_ROCE)
		return &sv_roce_link_ops; /* every peer, this host's too */
	/* sv_av_check refused what neither can reach */
	if (mode == SV_TRANSPORT_SHM || (local && mode != SV_TRANSPORT_TCP))
		return &sv_shm_link_ops;
	return &sv_tcp_link_ops;
}

void sv_transport_ctx_close(struct sv_context *ctx)
{
	for (size_t i = 0; i < N_TRANSPORTS; i++)
		if (transports[i]->ctx_close)
			transports[i]->ctx_close(ctx);
}

/* The context-level fds of every transport (a door) next need a look. */
uint64_t sv_transport_door_next_ns(struct sv_context *ctx, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	for (size_t i = 0; i < N_TRANSPORTS; i++) {
		uint64_t t;

		if (!transports[i]->door_next_ns)
			continue;
		t = transports[i]->door_next_ns(ctx, now);
		if (t < next)
			next = t;
	}
	return next;
}
