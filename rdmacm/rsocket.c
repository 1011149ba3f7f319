// SPDX-License-Identifier: MIT
/*
 * rsockets: stream sockets over RDMA between softverbs processes, on the
 * public rdma_cm and verbs calls of our own libraries (rsocket_io.c has
 * the data path, rs_wire.h the protocol).  This file: the table of
 * rsocket numbers, socket/bind/listen/accept/connect as rdma_cm steps,
 * shutdown and close, options, rfcntl, rpoll/rselect.
 *
 * An rsocket's number is its rdma_cm event channel's fd (an eventfd), so
 * it never collides with a real fd.  Connecting walks the CM's events
 * (ADDR_RESOLVED, ROUTE_RESOLVED, ESTABLISHED) from rs_cm_progress, so a
 * non-blocking rconnect returns EINPROGRESS and rpoll finishes it; a
 * blocking one sleeps on the channel fd.  The REQ and REP carry each
 * side's hello (its ring).  raccept returns once it has sent the REP; the
 * new rsocket talks once ESTABLISHED arrives.
 *
 * SOCK_DGRAM rsockets are not implemented (EOPNOTSUPP, said on stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#include "cm.h"
#include "rs.h"

const char *const rs_state_names[RS_NSTATES] = {
	[RS_NEW] = "new",
	[RS_BOUND] = "bound",
	[RS_LISTENING] = "listening",
	[RS_RESOLVING_ADDR] = "resolving-addr",
	[RS_RESOLVING_ROUTE] = "resolving-route",
	[RS_CONNECTING] = "connecting",
	[RS_ACCEPTING] = "accepting",
	[RS_CONNECTED] = "connected",
	[RS_FAILED] = "failed",
	[RS_CLOSED] = "closed",
};

#define RS_MAX_FD     65536
#define RS_RESOLVE_MS 2000
#define RS_CLOSE_MS   5000 /* rclose waits that long for its sends */

static pthread_mutex_t tbl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rs *tbl[RS_MAX_FD];

static struct rs *lookup(int fd)
{
	struct rs *rs = NULL;

	if (fd < 0 || fd >= RS_MAX_FD)
		return NULL;
	pthread_mutex_lock(&tbl_lock);
	rs = tbl[fd];
	pthread_mutex_unlock(&tbl_lock);
	return rs;
}

struct rs *rs_get(int fd)
{
	struct rs *rs = lookup(fd);

	if (!rs) {
		errno = fcntl(fd, F_GETFD) < 0 ? EBADF : ENOTSOCK;
		return NULL;
	}
	pthread_mutex_lock(&rs->lock);
	return rs;
}

void rs_put(struct rs *rs)
{
	pthread_mutex_unlock(&rs->lock);
}

/* -errno to -1 and errno, as the socket calls return */
static int ret_err(struct rs *rs, int ret)
{
	if (rs)
		rs_put(rs);
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

void rs_fail(struct rs *rs, int err)
{
	if (rs->state == RS_FAILED)
		return;
	rs->state = RS_FAILED;
	rs->err = err;
	rs->err_reported = false;
	if (rs->qp)
		rdma_disconnect(rs->id); /* the peer sees DISCONNECTED */
}

static struct rs *rs_new(struct rdma_cm_id *id, struct rdma_event_channel *ch)
{
	struct rs *rs = calloc(1, sizeof(*rs));
	int fl;

	if (!rs)
		return NULL;
	pthread_mutex_init(&rs->lock, NULL);
	rs->ech = ch;
	rs->id = id;
	rs->fd = ch->fd;
	rs->iomapsize = RS_IOMAPS;
	rs->sqsize = RS_SQ_DEPTH;
	rs->rqsize = RS_RQ_DEPTH;
	fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	if (id)
		id->context = rs;
	return rs;
}

static int rs_insert(struct rs *rs)
{
	if (rs->fd < 0 || rs->fd >= RS_MAX_FD)
		return -EMFILE;
	pthread_mutex_lock(&tbl_lock);
	tbl[rs->fd] = rs;
	pthread_mutex_unlock(&tbl_lock);
	return 0;
}

static void rs_free(struct rs *rs)
{
	rs_io_teardown(rs);
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->ech)
		rdma_destroy_event_channel(rs->ech);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

CM_EXPORT int rsocket(int domain, int type, int protocol)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rs *rs;
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC), ret;

	if (domain != AF_INET && domain != AF_INET6)
		return cm_err(EAFNOSUPPORT);
	if (base != SOCK_STREAM) {
		static atomic_bool said;

		if (!atomic_exchange(&said, true))
			fprintf(stderr, "softverbs librdmacm: rsocket: only "
					"SOCK_STREAM rsockets are implemented "
					"(EOPNOTSUPP)\n");
		return cm_err(EOPNOTSUPP);
	}
	if (protocol && protocol != IPPROTO_TCP)
		return cm_err(EPROTONOSUPPORT);
	ch = rdma_create_event_channel();
	if (!ch)
		return -1;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		ret = errno;
		rdma_destroy_event_channel(ch);
		return cm_err(ret);
	}
	rs = rs_new(id, ch);
	if (!rs) {
		rdma_destroy_id(id);
		rdma_destroy_event_channel(ch);
		return cm_err(ENOMEM);
	}
	rs->domain = domain;
	rs->nonblock = type & SOCK_NONBLOCK;
	ret = rs_insert(rs);
	if (ret) {
		rs_free(rs);
		return cm_err(-ret);
	}
	return rs->fd;
}

static int addr_ok(const struct sockaddr *addr, socklen_t len)
{
	if (!addr)
		return -EFAULT;
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		return 0;
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		return 0;
	return addr->sa_family == AF_INET || addr->sa_family == AF_INET6
		       ? -EINVAL
		       : -EAFNOSUPPORT;
}

static int bind_locked(struct rs *rs, const struct sockaddr *addr)
{
	int v = rs->reuseaddr;

	if (v && rdma_set_option(rs->id, RDMA_OPTION_ID,
				 RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v)))
		return -errno;
	if (rdma_bind_addr(rs->id, (struct sockaddr *)addr))
		return -errno;
	rs->state = RS_BOUND;
	return 0;
}

CM_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rs *rs = rs_get(socket);
	int ret;

	if (!rs)
		return -1;
	ret = addr_ok(addr, addrlen);
	if (!ret && rs->state != RS_NEW)
		ret = -EINVAL;
	if (!ret)
		ret = bind_locked(rs, addr);
	return ret_err(rs, ret);
}

CM_EXPORT int rlisten(int socket, int backlog)
{
	struct rs *rs = rs_get(socket);
	int ret = 0;

	if (!rs)
		return -1;
	if (rs->state == RS_LISTENING)
		return ret_err(rs, 0);
	if (rs->state == RS_NEW) {
		struct sockaddr_storage any = {.ss_family = rs->domain};

		ret = bind_locked(rs, (struct sockaddr *)&any);
	}
	if (!ret && rs->state != RS_BOUND)
		ret = -EINVAL;
	if (!ret && rdma_listen(rs->id, backlog > 0 ? backlog : 1))
		ret = -errno;
	if (!ret)
		rs->state = RS_LISTENING;
	return ret_err(rs, ret);
}

static void copy_addr(struct sockaddr *dst, socklen_t *len,
		      const struct sockaddr *src)
{
	socklen_t n = src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						 : sizeof(struct sockaddr_in);

	if (!dst || !len)
		return;
	memcpy(dst, src, *len < n ? *len : n);
	*len = n;
}

static void inherit(struct rs *n, const struct rs *l)
{
	n->domain = l->domain;
	n->rcvbuf = l->rcvbuf;
	n->sndbuf = l->sndbuf;
	n->keepalive = l->keepalive;
	n->keepidle = l->keepidle;
	n->nodelay = l->nodelay;
	n->inline_size = l->inline_size;
	n->linger = l->linger;
}

/* One CONNECT_REQUEST: 0 and *out, or -errno (the request was refused). */
static int accept_one(struct rs *l, struct rdma_cm_event *ev, struct rs **out)
{
	struct rdma_cm_id *child = ev->id;
	uint8_t pdata[256];
	uint8_t plen = ev->param.conn.private_data_len;
	struct rdma_conn_param cp = {0};
	struct rdma_event_channel *ch;
	struct rs_hello h;
	struct rs *n;
	int ret;

	if (ev->param.conn.private_data && plen)
		memcpy(pdata, ev->param.conn.private_data, plen);
	rdma_ack_cm_event(ev);
	ch = rdma_create_event_channel();
	if (!ch) {
		ret = -errno;
		goto err_reject;
	}
	if (rdma_migrate_id(child, ch)) {
		ret = -errno;
		rdma_destroy_event_channel(ch);
		goto err_reject;
	}
	n = rs_new(child, ch);
	if (!n) {
		rdma_reject(child, NULL, 0);
		rdma_destroy_id(child);
		rdma_destroy_event_channel(ch);
		return -ENOMEM;
	}
	inherit(n, l);
	ret = rs_io_setup(n);
	if (ret)
		goto err_free;
	ret = rs_hello_take(n, pdata, plen);
	if (ret)
		goto err_free;
	rs_hello_fill(n, &h);
	cp.private_data = &h;
	cp.private_data_len = sizeof(h);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	cp.retry_count = 7;
	if (rdma_accept(child, &cp)) {
		ret = -errno;
		goto err_free;
	}
	n->state = RS_ACCEPTING;
	ret = rs_insert(n);
	if (ret) {
		rdma_disconnect(child);
		rs_free(n);
		return ret;
	}
	*out = n;
	return 0;

err_free:
	rdma_reject(child, NULL, 0);
	rs_free(n);
	return ret;
err_reject:
	rdma_reject(child, NULL, 0);
	rdma_destroy_id(child);
	return ret;
}

CM_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rs *l = rs_get(socket), *n = NULL;
	struct rdma_cm_event *ev;
	int ret;

	if (!l)
		return -1;
	if (l->state != RS_LISTENING)
		return ret_err(l, -EINVAL);
	for (;;) {
		if (rdma_get_cm_event(l->ech, &ev)) {
			struct pollfd p = {.fd = l->fd, .events = POLLIN};

			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return ret_err(l, -errno);
			if (l->nonblock)
				return ret_err(l, -EAGAIN);
			rs_put(l);
			ret = poll(&p, 1, -1);
			pthread_mutex_lock(&l->lock);
			if (ret < 0 && errno != EINTR)
				return ret_err(l, -errno);
			continue;
		}
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		ret = accept_one(l, ev, &n);
		if (ret == 0)
			break;
		/* a request that was not an rsocket's, or no memory: next */
		if (l->nonblock)
			return ret_err(l, ret == -EPROTO ? -EAGAIN : ret);
	}
	rs_put(l);
	copy_addr(addr, addrlen, rdma_get_peer_addr(n->id));
	return n->fd;
}

static int fail_connect(struct rs *rs, int err)
{
	rs->state = RS_FAILED;
	rs->err = err;
	rs->err_reported = false;
	return -err;
}

static int on_route(struct rs *rs)
{
	struct rdma_conn_param cp = {0};
	struct rs_hello h;
	int ret = rs_io_setup(rs);

	if (ret)
		return fail_connect(rs, -ret);
	rs_hello_fill(rs, &h);
	cp.private_data = &h;
	cp.private_data_len = sizeof(h);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	cp.retry_count = 7;
	if (rdma_connect(rs->id, &cp))
		return fail_connect(rs, errno);
	rs->state = RS_CONNECTING;
	return 0;
}

static void on_event(struct rs *rs, struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rs->state != RS_RESOLVING_ADDR)
			break;
		if (rdma_resolve_route(rs->id, RS_RESOLVE_MS))
			fail_connect(rs, errno);
		else
			rs->state = RS_RESOLVING_ROUTE;
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs->state == RS_RESOLVING_ROUTE)
			on_route(rs);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs->state == RS_CONNECTING) {
			int ret =
				rs_hello_take(rs, ev->param.conn.private_data,
					      ev->param.conn.private_data_len);

			if (ret) {
				fprintf(stderr,
					"softverbs rsocket %d: the listener "
					"is not an rsocket of softverbs\n",
					rs->fd);
				rdma_disconnect(rs->id);
				fail_connect(rs, ECONNREFUSED);
				break;
			}
			rs->state = RS_CONNECTED;
		} else if (rs->state == RS_ACCEPTING) {
			rs->state = RS_CONNECTED;
		}
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		fail_connect(rs, EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		fail_connect(rs, ev->status == -ETIMEDOUT ? ETIMEDOUT
							  : EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_REJECTED:
		fail_connect(rs, ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		if (rs->state == RS_CONNECTED)
			rs_fail(rs, ECONNRESET);
		else
			fail_connect(rs, ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rs->disconnected = true;
		if (rs->state == RS_ACCEPTING || rs->state == RS_CONNECTING)
			fail_connect(rs, ECONNRESET);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rs_fail(rs, ENODEV);
		break;
	default:
		break;
	}
}

int rs_cm_progress(struct rs *rs)
{
	struct rdma_cm_event *ev;
	int n = 0;

	if (!rs->ech || rs->state == RS_LISTENING)
		return 0;
	while (rdma_get_cm_event(rs->ech, &ev) == 0) {
		on_event(rs, ev);
		rdma_ack_cm_event(ev);
		n++;
	}
	return n;
}

static bool connect_done(const struct rs *rs)
{
	return rs->state == RS_CONNECTED || rs->state == RS_FAILED;
}

CM_EXPORT int rconnect(int socket, const struct sockaddr *addr,
		       socklen_t addrlen)
{
	struct rs *rs = rs_get(socket);
	int ret;

	if (!rs)
		return -1;
	ret = addr_ok(addr, addrlen);
	if (ret)
		return ret_err(rs, ret);
	switch (rs->state) {
	case RS_NEW:
	case RS_BOUND:
		break;
	case RS_CONNECTED:
		return ret_err(rs, -EISCONN);
	case RS_RESOLVING_ADDR:
	case RS_RESOLVING_ROUTE:
	case RS_CONNECTING:
		return ret_err(rs, -EALREADY);
	default:
		return ret_err(rs, -EINVAL);
	}
	if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr,
			      RS_RESOLVE_MS))
		return ret_err(rs, -errno);
	rs->state = RS_RESOLVING_ADDR;
	if (rs->nonblock) {
		rs_cm_progress(rs);
		if (rs->state == RS_CONNECTED)
			return ret_err(rs, 0);
		if (rs->state == RS_FAILED) {
			rs->err_reported = true;
			return ret_err(rs, -rs->err);
		}
		return ret_err(rs, -EINPROGRESS);
	}
	while (!connect_done(rs)) {
		rs_progress(rs);
		if (connect_done(rs))
			break;
		rs_wait(rs, -1);
	}
	if (rs->state == RS_FAILED) {
		rs->err_reported = true;
		return ret_err(rs, -rs->err);
	}
	return ret_err(rs, 0);
}

CM_EXPORT int rshutdown(int socket, int how)
{
	struct rs *rs = rs_get(socket);
	int ret = 0;

	if (!rs)
		return -1;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return ret_err(rs, -EINVAL);
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING &&
	    rs->state != RS_FAILED)
		return ret_err(rs, -ENOTCONN);
	if (how != SHUT_WR)
		rs->shut_rd = true;
	if (how != SHUT_RD && !rs->fin_sent) {
		uint64_t end;
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		end = ts.tv_sec * 1000ull + ts.tv_nsec / 1000000 + RS_CLOSE_MS;
		rs->shut_wr = true;
		for (;;) {
			rs_progress(rs);
			if (rs->state != RS_CONNECTED &&
			    rs->state != RS_ACCEPTING)
				break;
			if (rs->state == RS_CONNECTED && !rs->disconnected) {
				ret = rs_send_ctrl(rs, RS_CTRL_FIN, NULL);
				if (ret != -EAGAIN)
					break;
			}
			if (rs->disconnected)
				break;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			if (ts.tv_sec * 1000ull + ts.tv_nsec / 1000000 >= end) {
				ret = -ETIMEDOUT;
				break;
			}
			rs_wait(rs, 100);
		}
		if (!ret)
			rs->fin_sent = true;
		ret = 0; /* the peer left already: nothing to tell it */
	}
	return ret_err(rs, ret);
}

CM_EXPORT int rclose(int socket)
{
	struct rs *rs = lookup(socket);

	if (!rs)
		return cm_err(EBADF);
	pthread_mutex_lock(&tbl_lock);
	tbl[socket] = NULL;
	pthread_mutex_unlock(&tbl_lock);
	pthread_mutex_lock(&rs->lock);
	if (rs->state == RS_CONNECTED && !rs->disconnected) {
		bool abort = rs->linger.l_onoff && !rs->linger.l_linger;

		if (!abort) {
			if (!rs->fin_sent) {
				rs->shut_wr = true;
				if (rs_send_ctrl(rs, RS_CTRL_FIN, NULL) == 0)
					rs->fin_sent = true;
			}
			rs_drain(rs, RS_CLOSE_MS);
		}
	}
	if (rs->qp && (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING))
		rdma_disconnect(rs->id);
	pthread_mutex_unlock(&rs->lock);
	rs_free(rs);
	return 0;
}

/* One call of the data path, errno-style. */
static ssize_t do_io(int socket, const struct iovec *iov, int n, int flags,
		     bool send)
{
	struct rs *rs = rs_get(socket);
	ssize_t ret;

	if (!rs)
		return -1;
	ret = send ? rs_do_send(rs, iov, n, flags)
		   : rs_do_recv(rs, iov, n, flags);
	rs_put(rs);
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

static ssize_t do_recv(int socket, const struct iovec *iov, int n, int flags)
{
	return do_io(socket, iov, n, flags, false);
}

static ssize_t do_send(int socket, const struct iovec *iov, int n, int flags)
{
	return do_io(socket, iov, n, flags, true);
}

CM_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec v = {.iov_base = buf, .iov_len = len};

	return do_recv(socket, &v, 1, flags);
}

CM_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			    struct sockaddr *src_addr, socklen_t *addrlen)
{
	ssize_t ret = rrecv(socket, buf, len, flags);

	if (ret >= 0 && src_addr && addrlen) {
		struct rs *rs = rs_get(socket);

		if (rs) {
			copy_addr(src_addr, addrlen,
				  rdma_get_peer_addr(rs->id));
			rs_put(rs);
		}
	}
	return ret;
}

CM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (!msg || msg->msg_iovlen > IOV_MAX)
		return cm_err(EINVAL);
	msg->msg_controllen = 0;
	msg->msg_flags = 0;
	return do_recv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

CM_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};

	return do_send(socket, &v, 1, flags);
}

CM_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			  const struct sockaddr *dest_addr, socklen_t addrlen)
{
	/* a connected stream ignores the address, as TCP does */
	(void)dest_addr;
	(void)addrlen;
	return rsend(socket, buf, len, flags);
}

CM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (!msg || msg->msg_iovlen > IOV_MAX)
		return cm_err(EINVAL);
	if (msg->msg_controllen)
		return cm_err(EOPNOTSUPP);
	return do_send(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

CM_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

CM_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return cm_err(EINVAL);
	return do_recv(socket, iov, iovcnt, 0);
}

CM_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

CM_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return cm_err(EINVAL);
	return do_send(socket, iov, iovcnt, 0);
}

/* an rsocket's poll events now (after progress) */
static short rs_revents(struct rs *rs, short events)
{
	short r = 0;
	struct pollfd p = {.fd = rs->fd, .events = POLLIN};

	switch (rs->state) {
	case RS_LISTENING:
		if (poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
			r |= POLLIN;
		break;
	case RS_NEW:
	case RS_BOUND:
		r |= POLLOUT | POLLHUP;
		break;
	case RS_RESOLVING_ADDR:
	case RS_RESOLVING_ROUTE:
	case RS_CONNECTING:
		break;
	case RS_FAILED:
		r |= POLLERR | POLLHUP | POLLIN | POLLOUT;
		break;
	default:
		if (rs_readable(rs))
			r |= POLLIN;
		if (rs->state == RS_CONNECTED && rs_writable(rs))
			r |= POLLOUT;
		/* hung up once nothing is left to read: the peer's last
		 * bytes are POLLIN first, as a TCP socket's after its
		 * peer's close (rstream -T a takes POLLHUP for an error) */
		if ((rs->disconnected || rs->state == RS_CLOSED ||
		     (rs->fin_rcvd && rs->fin_sent)) &&
		    rs->rcvd == rs->consumed)
			r |= POLLHUP;
		break;
	}
	return r & (events | POLLERR | POLLHUP);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* rpoll's wake-up: the completion events of fds' rsockets consumed; their
 * CQs are armed again on the next pass. */
static void take_cq_events(struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++) {
		struct rs *rs = fds[i].fd >= 0 ? lookup(fds[i].fd) : NULL;
		struct ibv_cq *cq;
		void *ctx;

		if (!rs)
			continue;
		pthread_mutex_lock(&rs->lock);
		while (rs->cch && ibv_get_cq_event(rs->cch, &cq, &ctx) == 0) {
			ibv_ack_cq_events(cq, 1);
			rs->cq_armed = false;
		}
		pthread_mutex_unlock(&rs->lock);
	}
}

/*
 * Progress every rsocket, report what is ready; else arm their CQs and
 * sleep in poll() on their channel fds (CM and completions) and the
 * program's real fds together.
 */
CM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	uint64_t end = timeout > 0 ? mono_ms() + timeout : 0;
	struct pollfd *k;
	nfds_t i, nk;
	int ready, ret;

	if (nfds > RS_MAX_FD)
		return cm_err(EINVAL);
	k = calloc(2 * nfds + 1, sizeof(*k));
	if (!k)
		return cm_err(ENOMEM);
	for (bool armed = false;;) {
		ready = 0;
		nk = 0;
		for (i = 0; i < nfds; i++) {
			struct rs *rs =
				fds[i].fd >= 0 ? lookup(fds[i].fd) : NULL;

			fds[i].revents = 0;
			if (!rs) {
				if (fds[i].fd >= 0)
					k[nk++] = (struct pollfd){
						.fd = fds[i].fd,
						.events = fds[i].events};
				continue;
			}
			pthread_mutex_lock(&rs->lock);
			rs_progress(rs);
			fds[i].revents = rs_revents(rs, fds[i].events);
			if (!fds[i].revents && armed && rs->cq &&
			    !rs->cq_armed) {
				if (ibv_req_notify_cq(rs->cq, 0) == 0)
					rs->cq_armed = true;
				rs_progress(rs); /* what came before it */
				fds[i].revents = rs_revents(rs, fds[i].events);
			}
			k[nk++] =
				(struct pollfd){.fd = rs->fd, .events = POLLIN};
			if (rs->cch)
				k[nk++] = (struct pollfd){.fd = rs->cch->fd,
							  .events = POLLIN};
			pthread_mutex_unlock(&rs->lock);
			if (fds[i].revents)
				ready++;
		}
		/* the real fds' state too, without waiting */
		if (nk && poll(k, nk, 0) > 0) {
			nfds_t j = 0;

			for (i = 0; i < nfds; i++) {
				struct rs *rs = fds[i].fd >= 0
							? lookup(fds[i].fd)
							: NULL;

				if (rs) {
					j += rs->cch ? 2 : 1;
					continue;
				}
				if (fds[i].fd < 0)
					continue;
				fds[i].revents = k[j++].revents;
				if (fds[i].revents)
					ready++;
			}
		}
		if (ready || timeout == 0)
			break;
		if (!armed) {
			armed = true; /* one more pass arms the CQs */
			continue;
		}
		ret = poll(k, nk,
			   timeout < 0	     ? -1
			   : end > mono_ms() ? (int)(end - mono_ms())
					     : 0);
		if (ret < 0) {
			free(k);
			return -1;
		}
		/* consume the completion events, re-arm on the next pass */
		take_cq_events(fds, nfds);
		if (ret == 0 && timeout >= 0 && mono_ms() >= end) {
			/* one last look, then time out */
			timeout = 0;
		}
	}
	free(k);
	return ready;
}

CM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds,
		      fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *p;
	int i, n = 0, ret, to;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return cm_err(EINVAL);
	p = calloc(nfds ? nfds : 1, sizeof(*p));
	if (!p)
		return cm_err(ENOMEM);
	for (i = 0; i < nfds; i++) {
		short ev = 0;

		if (readfds && FD_ISSET(i, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(i, writefds))
			ev |= POLLOUT;
		if (exceptfds && FD_ISSET(i, exceptfds))
			ev |= POLLPRI;
		if (ev)
			p[n++] = (struct pollfd){.fd = i, .events = ev};
	}
	to = timeout ? (int)(timeout->tv_sec * 1000 +
			     (timeout->tv_usec + 999) / 1000)
		     : -1;
	ret = rpoll(p, n, to);
	if (ret < 0) {
		free(p);
		return -1;
	}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	ret = 0;
	for (i = 0; i < n; i++) {
		bool any = false;

		if (readfds && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    (p[i].events & POLLIN)) {
			FD_SET(p[i].fd, readfds);
			any = true;
		}
		if (writefds && (p[i].revents & (POLLOUT | POLLERR)) &&
		    (p[i].events & POLLOUT)) {
			FD_SET(p[i].fd, writefds);
			any = true;
		}
		if (exceptfds && (p[i].revents & POLLPRI)) {
			FD_SET(p[i].fd, exceptfds);
			any = true;
		}
		ret += any;
	}
	free(p);
	return ret;
}

CM_EXPORT int rgetpeername(int socket, struct sockaddr *addr,
			   socklen_t *addrlen)
{
	struct rs *rs = rs_get(socket);

	if (!rs)
		return -1;
	if (!addr || !addrlen)
		return ret_err(rs, -EFAULT);
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING)
		return ret_err(rs, -ENOTCONN);
	copy_addr(addr, addrlen, rdma_get_peer_addr(rs->id));
	return ret_err(rs, 0);
}

CM_EXPORT int rgetsockname(int socket, struct sockaddr *addr,
			   socklen_t *addrlen)
{
	struct rs *rs = rs_get(socket);
	struct sockaddr_storage any = {0};

	if (!rs)
		return -1;
	if (!addr || !addrlen)
		return ret_err(rs, -EFAULT);
	if (rs->state == RS_NEW) {
		any.ss_family = rs->domain;
		copy_addr(addr, addrlen, (struct sockaddr *)&any);
	} else {
		copy_addr(addr, addrlen, rdma_get_local_addr(rs->id));
	}
	return ret_err(rs, 0);
}

/* the int option at optval, or -EINVAL */
static int int_opt(const void *optval, socklen_t optlen, int *v)
{
	if (!optval || optlen < sizeof(int))
		return -EINVAL;
	memcpy(v, optval, sizeof(int));
	return 0;
}

CM_EXPORT int rsetsockopt(int socket, int level, int optname,
			  const void *optval, socklen_t optlen)
{
	struct rs *rs = rs_get(socket);
	int v = 0, ret = 0;

	if (!rs)
		return -1;
	if (level == SOL_SOCKET && optname == SO_LINGER) {
		if (!optval || optlen < sizeof(struct linger))
			return ret_err(rs, -EINVAL);
		memcpy(&rs->linger, optval, sizeof(rs->linger));
		return ret_err(rs, 0);
	}
	if (level == SOL_RDMA && optname == RDMA_ROUTE)
		return ret_err(rs, 0); /* the CM resolves the route itself */
	ret = int_opt(optval, optlen, &v);
	if (ret)
		return ret_err(rs, ret);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			rs->reuseaddr = !!v;
			break;
		case SO_KEEPALIVE:
			rs->keepalive = !!v; /* the CM sees a dead peer */
			break;
		case SO_SNDBUF:
			rs->sndbuf = v;
			break;
		case SO_RCVBUF:
			/* the ring is made at connect: later has no effect */
			rs->rcvbuf = v;
			break;
		default:
			ret = -ENOPROTOOPT;
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			rs->nodelay = !!v; /* every rsend goes at once */
			break;
		case TCP_KEEPIDLE:
			rs->keepidle = v;
			break;
		case TCP_MAXSEG:
			break;
		default:
			ret = -ENOPROTOOPT;
		}
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
		case RDMA_RQSIZE:
			/* fixed queues: kept for rgetsockopt only */
			if (v <= 0)
				ret = -EINVAL;
			else if (optname == RDMA_SQSIZE)
				rs->sqsize = v;
			else
				rs->rqsize = v;
			break;
		case RDMA_INLINE:
			rs->inline_size = v;
			break;
		case RDMA_IOMAPSIZE:
			if (v < 0)
				ret = -EINVAL;
			else
				rs->iomapsize = v < RS_IOMAPS ? v : RS_IOMAPS;
			break;
		default:
			ret = -ENOPROTOOPT;
		}
		break;
	default:
		ret = -ENOPROTOOPT;
	}
	return ret_err(rs, ret);
}

CM_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval,
			  socklen_t *optlen)
{
	struct rs *rs = rs_get(socket);
	int v = 0;

	if (!rs)
		return -1;
	if (!optval || !optlen)
		return ret_err(rs, -EFAULT);
	if (level == SOL_SOCKET && optname == SO_LINGER) {
		if (*optlen < sizeof(struct linger))
			return ret_err(rs, -EINVAL);
		memcpy(optval, &rs->linger, sizeof(rs->linger));
		*optlen = sizeof(rs->linger);
		return ret_err(rs, 0);
	}
	if (*optlen < sizeof(int))
		return ret_err(rs, -EINVAL);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			v = rs->reuseaddr;
			break;
		case SO_KEEPALIVE:
			v = rs->keepalive;
			break;
		case SO_SNDBUF:
			v = rs->ssize	 ? (int)rs->ssize
			    : rs->sndbuf ? rs->sndbuf
					 : (int)RS_RING_DEF;
			break;
		case SO_RCVBUF:
			v = rs->rsize ? (int)rs->rsize
				      : (int)(rs->rcvbuf ? rs->rcvbuf
							 : (int)RS_RING_DEF);
			break;
		case SO_ERROR:
			rs_progress(rs);
			if (rs->state == RS_FAILED && !rs->err_reported) {
				v = rs->err;
				rs->err_reported = true;
			}
			break;
		default:
			return ret_err(rs, -ENOPROTOOPT);
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			v = rs->nodelay;
			break;
		case TCP_KEEPIDLE:
			v = rs->keepidle;
			break;
		case TCP_MAXSEG:
			v = (int)(rs->peer_rsize ? rs->peer_rsize
						 : RS_RING_DEF);
			break;
		default:
			return ret_err(rs, -ENOPROTOOPT);
		}
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			v = rs->sqsize;
			break;
		case RDMA_RQSIZE:
			v = rs->rqsize;
			break;
		case RDMA_INLINE:
			v = rs->inline_size;
			break;
		case RDMA_IOMAPSIZE:
			v = rs->iomapsize;
			break;
		default:
			return ret_err(rs, -ENOPROTOOPT);
		}
		break;
	default:
		return ret_err(rs, -ENOPROTOOPT);
	}
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(v);
	return ret_err(rs, 0);
}

CM_EXPORT int rfcntl(int socket, int cmd, ...)
{
	struct rs *rs = rs_get(socket);
	va_list ap;
	int arg, ret = 0;

	if (!rs)
		return -1;
	switch (cmd) {
	case F_GETFL:
		ret = O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
		break;
	case F_SETFL:
		va_start(ap, cmd);
		arg = va_arg(ap, int);
		va_end(ap);
		rs->nonblock = arg & O_NONBLOCK;
		break;
	default:
		fprintf(stderr,
			"softverbs librdmacm: rfcntl: command %d is not "
			"implemented (only F_GETFL/F_SETFL)\n",
			cmd);
		ret = -EOPNOTSUPP;
	}
	return ret_err(rs, ret);
}

CM_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
		       off_t offset)
{
	struct rs *rs = rs_get(socket);
	off_t ret;

	if (!rs)
		return -1;
	if (prot != PROT_WRITE || flags) {
		rs_put(rs);
		return cm_err(EINVAL);
	}
	ret = rs_iomap_add(rs, buf, len, offset);
	rs_put(rs);
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

CM_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	struct rs *rs = rs_get(socket);

	if (!rs)
		return -1;
	return ret_err(rs, rs_iomap_del(rs, buf, len));
}

CM_EXPORT size_t riowrite(int socket, const void *buf, size_t count,
			  off_t offset, int flags)
{
	struct rs *rs = rs_get(socket);
	size_t ret;

	if (!rs)
		return (size_t)-1;
	ret = rs_iowrite(rs, buf, count, offset, flags);
	rs_put(rs);
	return ret;
}
