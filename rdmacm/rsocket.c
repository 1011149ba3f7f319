// SPDX-License-Identifier: MIT
/*
 * rsockets: stream sockets over RDMA between softverbs processes, on the
 * public rdma_cm and verbs calls of our own libraries (rsocket_io.c has
 * the data path, rs_wire.h the protocol).  This file: the table of
 * rsocket numbers, socket/bind/listen/accept/connect as rdma_cm steps,
 * shutdown and close, the send and receive calls, the socket's names;
 * rsocket_poll.c has rpoll/rselect, rsocket_opt.c the options, rfcntl
 * and the riomap calls.
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

#define RS_RESOLVE_MS 2000
#define RS_CLOSE_MS   5000 /* rclose waits that long for its sends */

static pthread_mutex_t tbl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rs *tbl[RS_MAX_FD];

struct rs *rs_lookup(int fd)
{
	if (fd < 0 || fd >= RS_MAX_FD)
		return NULL;
	/* no lock: every rsend/rrecv (and a spinning rrecv's every try)
	 * looks here; the writers store under tbl_lock */
	return __atomic_load_n(&tbl[fd], __ATOMIC_ACQUIRE);
}

struct rs *rs_get(int fd)
{
	struct rs *rs = rs_lookup(fd);

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
int rs_ret_err(struct rs *rs, int ret)
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
	rs->inline_size = RS_INLINE_DEF;
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
	__atomic_store_n(&tbl[rs->fd], rs, __ATOMIC_RELEASE);
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
	return rs_ret_err(rs, ret);
}

CM_EXPORT int rlisten(int socket, int backlog)
{
	struct rs *rs = rs_get(socket);
	int ret = 0;

	if (!rs)
		return -1;
	if (rs->state == RS_LISTENING)
		return rs_ret_err(rs, 0);
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
	return rs_ret_err(rs, ret);
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
	/* before the REP: the active side may write on it once it has ours
	 * (no lane, and a hello that says so, if it cannot be) */
	rs_lane_connect(n);
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
		return rs_ret_err(l, -EINVAL);
	for (;;) {
		/* nothing queued: no lock, no system call (rstream's server
		 * spins here until its client comes) */
		if (l->nonblock && !cm_channel_pending(l->ech))
			return rs_ret_err(l, -EAGAIN);
		if (rdma_get_cm_event(l->ech, &ev)) {
			struct pollfd p = {.fd = l->fd, .events = POLLIN};

			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return rs_ret_err(l, -errno);
			if (l->nonblock)
				return rs_ret_err(l, -EAGAIN);
			rs_put(l);
			ret = poll(&p, 1, -1);
			pthread_mutex_lock(&l->lock);
			if (ret < 0 && errno != EINTR)
				return rs_ret_err(l, -errno);
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
			return rs_ret_err(l, ret == -EPROTO ? -EAGAIN : ret);
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
			/* the passive side's lane took RTR before its REP */
			if (rs_lane_connect(rs)) {
				rs->zc = true;
				/* its lane may carry the other way too; if this
				 * cannot go now, it only copies */
				rs_send_ctrl(rs, RS_CTRL_LANE, NULL);
			}
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

	if (!rs->ech || rs->state == RS_LISTENING ||
	    !cm_channel_pending(rs->ech))
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
		return rs_ret_err(rs, ret);
	switch (rs->state) {
	case RS_NEW:
	case RS_BOUND:
		break;
	case RS_CONNECTED:
		return rs_ret_err(rs, -EISCONN);
	case RS_RESOLVING_ADDR:
	case RS_RESOLVING_ROUTE:
	case RS_CONNECTING:
		return rs_ret_err(rs, -EALREADY);
	default:
		return rs_ret_err(rs, -EINVAL);
	}
	if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr,
			      RS_RESOLVE_MS))
		return rs_ret_err(rs, -errno);
	rs->state = RS_RESOLVING_ADDR;
	if (rs->nonblock) {
		rs_cm_progress(rs);
		if (rs->state == RS_CONNECTED)
			return rs_ret_err(rs, 0);
		if (rs->state == RS_FAILED) {
			rs->err_reported = true;
			return rs_ret_err(rs, -rs->err);
		}
		return rs_ret_err(rs, -EINPROGRESS);
	}
	while (!connect_done(rs)) {
		rs_progress(rs);
		if (connect_done(rs))
			break;
		rs_wait(rs, -1);
	}
	if (rs->state == RS_FAILED) {
		rs->err_reported = true;
		return rs_ret_err(rs, -rs->err);
	}
	return rs_ret_err(rs, 0);
}

CM_EXPORT int rshutdown(int socket, int how)
{
	struct rs *rs = rs_get(socket);
	int ret = 0;

	if (!rs)
		return -1;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return rs_ret_err(rs, -EINVAL);
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING &&
	    rs->state != RS_FAILED)
		return rs_ret_err(rs, -ENOTCONN);
	if (how != SHUT_WR)
		rs->shut_rd = true;
	if (how != SHUT_RD && !rs->fin_sent) {
		uint64_t end = cm_now_ms() + RS_CLOSE_MS;

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
			if (cm_now_ms() >= end) {
				ret = -ETIMEDOUT;
				break;
			}
			rs_wait(rs, 100);
		}
		if (!ret)
			rs->fin_sent = true;
		ret = 0; /* the peer left already: nothing to tell it */
	}
	return rs_ret_err(rs, ret);
}

CM_EXPORT int rclose(int socket)
{
	struct rs *rs = rs_lookup(socket);

	if (!rs)
		return cm_err(EBADF);
	pthread_mutex_lock(&tbl_lock);
	__atomic_store_n(&tbl[socket], NULL, __ATOMIC_RELEASE);
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

CM_EXPORT int rgetpeername(int socket, struct sockaddr *addr,
			   socklen_t *addrlen)
{
	struct rs *rs = rs_get(socket);

	if (!rs)
		return -1;
	if (!addr || !addrlen)
		return rs_ret_err(rs, -EFAULT);
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING)
		return rs_ret_err(rs, -ENOTCONN);
	copy_addr(addr, addrlen, rdma_get_peer_addr(rs->id));
	return rs_ret_err(rs, 0);
}

CM_EXPORT int rgetsockname(int socket, struct sockaddr *addr,
			   socklen_t *addrlen)
{
	struct rs *rs = rs_get(socket);
	struct sockaddr_storage any = {0};

	if (!rs)
		return -1;
	if (!addr || !addrlen)
		return rs_ret_err(rs, -EFAULT);
	if (rs->state == RS_NEW) {
		any.ss_family = rs->domain;
		copy_addr(addr, addrlen, (struct sockaddr *)&any);
	} else {
		copy_addr(addr, addrlen, rdma_get_local_addr(rs->id));
	}
	return rs_ret_err(rs, 0);
}
