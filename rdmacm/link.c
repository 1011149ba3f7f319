// SPDX-License-Identifier: MIT
/*
 * The CM's link between processes of one host: SOCK_SEQPACKET Unix
 * sockets in the abstract namespace (one per network namespace, nothing
 * on disk), a listener named after (port space, address, port), one
 * connection per connecting id.  SO_PEERCRED is checked on both sides
 * (the same uid, or nothing is read); every socket is non-blocking and
 * one thread per process (epoll) reads them and drives conn.c.  A TCP
 * rendezvous between hosts would be a second implementation of the four
 * cm_link_* calls.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cm.h"

#define CM_LINK_BACKLOG 4096

/* "\0softverbs-cm<kind>/<ps>/<address or any>/<port>"; returns its
 * length.  kind "" is a listener, "-bound" an id's explicit bind. */
static socklen_t name_of(struct sockaddr_un *un, const char *kind,
			 enum rdma_port_space ps, const struct sockaddr *sa,
			 bool any)
{
	char host[INET6_ADDRSTRLEN] = "any";
	struct in6_addr a6;
	uint16_t port;
	int n;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		port = ntohs(in->sin_port);
		if (!any && in->sin_addr.s_addr != htonl(INADDR_ANY))
			inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
	} else {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		port = ntohs(in6->sin6_port);
		a6 = in6->sin6_addr;
		if (!any && !IN6_IS_ADDR_UNSPECIFIED(&a6)) {
			if (IN6_IS_ADDR_V4MAPPED(&a6))
				inet_ntop(AF_INET, &a6.s6_addr[12], host,
					  sizeof(host));
			else
				inet_ntop(AF_INET6, &a6, host, sizeof(host));
		}
	}
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	n = snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1,
		     "softverbs-cm%s/%d/%s/%u", kind, (int)ps, host, port);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

static socklen_t link_name(struct sockaddr_un *un, enum rdma_port_space ps,
			   const struct sockaddr *sa, bool any)
{
	return name_of(un, "", ps, sa, any);
}

uint64_t cm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Lock held.  An explicitly bound id holds a datagram socket named after
 * its address: a connect that finds no listener but this name knows the
 * port is taken by an id that may listen in a moment (rdma_bind_addr,
 * port sent to the peer, then rdma_listen: qperf -cm1), and retries.
 */
int cm_link_mark_bound(struct cm_id *c)
{
	struct sockaddr_un un;
	socklen_t len = name_of(&un, "-bound", c->id.ps,
				&c->id.route.addr.src_addr, false);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&un, len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	c->bound_fd = fd;
	return 0;
}

/* Lock held: is c's destination (or its port's wildcard) bound by an id? */
bool cm_link_dst_bound(struct cm_id *c)
{
	struct sockaddr_un un;
	bool bound = false;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return false;
	for (int any = 0; any < 2 && !bound; any++) {
		socklen_t len = name_of(&un, "-bound", c->id.ps,
					&c->id.route.addr.dst_addr, any);

		bound = !connect(fd, (struct sockaddr *)&un, len);
	}
	close(fd);
	return bound;
}

void cm_link_kick(void)
{
	uint64_t one = 1;

	if (write(cm_core.wake_fd, &one, sizeof(one)) != sizeof(one))
		cm_log("CM thread wake-up failed (%d)\n", errno);
}

/* The peer must be us (the same uid): SO_PEERCRED, not a claim. */
static int peer_ok(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return -errno;
	if (cr.uid != geteuid()) {
		cm_log("CM peer pid %d uid %u is not our uid %u: refused\n",
		       cr.pid, cr.uid, geteuid());
		return -EACCES;
	}
	return 0;
}

static int watch(struct cm_id *c)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
				 .data.u64 = c->serial};

	return epoll_ctl(cm_core.epfd, EPOLL_CTL_ADD, c->sock, &ev) ? -errno
								    : 0;
}

int cm_link_listen(struct cm_id *c, int backlog)
{
	struct sockaddr_un un;
	socklen_t len =
		link_name(&un, c->id.ps, &c->id.route.addr.src_addr, false);
	int fd, ret;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&un, len) ||
	    listen(fd, CM_LINK_BACKLOG)) {
		ret = errno == EADDRINUSE ? -EADDRINUSE : -errno;
		close(fd);
		return ret;
	}
	(void)backlog; /* conn.c counts the program's backlog */
	c->sock = fd;
	ret = watch(c);
	/* last, once connects can succeed: the IP port listens too, as a
	 * TCP listener would (tools that wait for the port see ours);
	 * nobody is accepted there */
	if (!ret && c->id.ps != RDMA_PS_UDP && listen(c->port_fd, 1))
		ret = -errno;
	if (ret)
		cm_link_close(c);
	return ret;
}

/* Lock held.  Connects c to the listener of its destination (the exact
 * address, then the wildcard of its port); -ECONNREFUSED when nobody
 * listens there. */
int cm_link_connect(struct cm_id *c)
{
	struct sockaddr_un un;
	int fd, ret = -ECONNREFUSED;

	for (int any = 0; any < 2 && ret == -ECONNREFUSED; any++) {
		socklen_t len = link_name(&un, c->id.ps,
					  &c->id.route.addr.dst_addr, any);

		fd = socket(AF_UNIX,
			    SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&un, len)) {
			ret = errno == ENOENT ? -ECONNREFUSED : -errno;
			/* EAGAIN: its queue is full (a flood): say busy */
			close(fd);
			continue;
		}
		ret = peer_ok(fd);
		if (ret) {
			close(fd);
			return ret;
		}
	}
	if (ret)
		return ret;
	c->sock = fd;
	ret = watch(c);
	if (ret)
		cm_link_close(c);
	return ret;
}

int cm_link_send(struct cm_id *c, const struct cm_msg *m)
{
	ssize_t n;

	if (c->sock < 0)
		return -ENOTCONN;
	/* never block on a peer: a peer that does not read its few CM
	 * messages is a dead one */
	n = send(c->sock, m, sizeof(*m), MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n != (ssize_t)sizeof(*m))
		return n < 0 ? -errno : -EPIPE;
	return 0;
}

/* Lock held: c's link is the accepted socket `fd`. */
int cm_link_adopt(struct cm_id *c, int fd)
{
	c->sock = fd;
	return watch(c);
}

void cm_link_close(struct cm_id *c)
{
	if (c->sock < 0)
		return;
	epoll_ctl(cm_core.epfd, EPOLL_CTL_DEL, c->sock, NULL);
	close(c->sock);
	c->sock = -1;
}

/* Lock held: takes every waiting connection of listener l. */
static void accept_all(struct cm_id *l)
{
	for (;;) {
		int fd = accept4(l->sock, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR)
				cm_log("accept on listener %p: %d\n", (void *)l,
				       errno);
			if (errno == EINTR)
				continue;
			return;
		}
		if (peer_ok(fd)) {
			close(fd);
			continue;
		}
		cm_conn_incoming(l, fd);
	}
}

/* Lock held: every message c's peer has sent, then its end. */
static void read_all(struct cm_id *c)
{
	struct cm_msg m;

	while (c->sock >= 0) {
		ssize_t n =
			recv(c->sock, &m, sizeof(m), MSG_DONTWAIT | MSG_TRUNC);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			cm_conn_lost(c);
			return;
		}
		if (cm_msg_check(&m, n)) {
			cm_log("id %p: malformed CM message (%zd bytes): "
			       "dropping the connection\n",
			       (void *)c, n);
			cm_conn_lost(c);
			return;
		}
		if (cm_conn_recv(c, &m))
			return; /* c is gone */
	}
}

static void *cm_thread(void *arg)
{
	struct epoll_event evs[32];

	bool retrying = false;
	uint64_t v;

	(void)arg;
	for (;;) {
		/* ids waiting for a listener retry every millisecond */
		int n = epoll_wait(cm_core.epfd, evs, 32, retrying ? 1 : -1);

		pthread_mutex_lock(&cm_core.lock);
		for (int i = 0; i < n; i++) {
			struct cm_id *c;

			if (!evs[i].data.u64) { /* cm_link_kick */
				if (read(cm_core.wake_fd, &v, sizeof(v)) < 0)
					cm_log("wake-up read: %d\n", errno);
				continue;
			}
			c = cm_id_find(evs[i].data.u64);

			if (!c || c->sock < 0)
				continue; /* closed since epoll_wait */
			if (c->state == CM_LISTEN)
				accept_all(c);
			else
				read_all(c);
		}
		retrying = cm_conn_retry_all();
		pthread_mutex_unlock(&cm_core.lock);
	}
	return NULL;
}

/* Lock held; once per process. */
int cm_thread_start(void)
{
	pthread_attr_t a;
	sigset_t all, old;
	int ret;

	if (cm_core.thread_started)
		return 0;
	struct epoll_event wake = {.events = EPOLLIN, .data.u64 = 0};

	cm_core.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (cm_core.epfd < 0)
		return -errno;
	cm_core.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cm_core.wake_fd < 0 ||
	    epoll_ctl(cm_core.epfd, EPOLL_CTL_ADD, cm_core.wake_fd, &wake)) {
		ret = -errno;
		close(cm_core.epfd);
		cm_core.epfd = -1;
		return ret;
	}
	/* the program's signals are for its own threads */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&cm_core.thread, &a, cm_thread, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		close(cm_core.epfd);
		cm_core.epfd = -1;
		return -ret;
	}
	cm_core.thread_started = true;
	return 0;
}
