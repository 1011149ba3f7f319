// SPDX-License-Identifier: MIT
/*
 * rsockets' options (rsetsockopt/rgetsockopt: the ones rsockets take,
 * the rest refused with ENOPROTOOPT), rfcntl (F_GETFL/F_SETFL:
 * O_NONBLOCK) and the riomap calls, whose windows rsocket_io.c keeps.
 * Apart from rsocket.c: calls on an rsocket that change no connection.
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
			return rs_ret_err(rs, -EINVAL);
		memcpy(&rs->linger, optval, sizeof(rs->linger));
		return rs_ret_err(rs, 0);
	}
	if (level == SOL_RDMA && optname == RDMA_ROUTE)
		return rs_ret_err(rs, 0); /* the CM resolves the route itself */
	ret = int_opt(optval, optlen, &v);
	if (ret)
		return rs_ret_err(rs, ret);
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
			/* both rings are made at connect (rs_ring_size):
			 * later has no effect, as in rdma-core's rsockets */
			rs->sndbuf = v;
			break;
		case SO_RCVBUF:
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
	return rs_ret_err(rs, ret);
}

CM_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval,
			  socklen_t *optlen)
{
	struct rs *rs = rs_get(socket);
	int v = 0;

	if (!rs)
		return -1;
	if (!optval || !optlen)
		return rs_ret_err(rs, -EFAULT);
	if (level == SOL_SOCKET && optname == SO_LINGER) {
		if (*optlen < sizeof(struct linger))
			return rs_ret_err(rs, -EINVAL);
		memcpy(optval, &rs->linger, sizeof(rs->linger));
		*optlen = sizeof(rs->linger);
		return rs_ret_err(rs, 0);
	}
	if (*optlen < sizeof(int))
		return rs_ret_err(rs, -EINVAL);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			v = rs->reuseaddr;
			break;
		case SO_KEEPALIVE:
			v = rs->keepalive;
			break;
		case SO_SNDBUF: /* as Linux: the size in use, twice the value */
			v = (int)(rs->ssize ? rs->ssize
					    : rs_ring_size(rs->sndbuf));
			break;
		case SO_RCVBUF:
			v = (int)(rs->rsize ? rs->rsize
					    : rs_ring_size(rs->rcvbuf));
			break;
		case SO_ERROR:
			rs_progress(rs);
			if (rs->state == RS_FAILED && !rs->err_reported) {
				v = rs->err;
				rs->err_reported = true;
			}
			break;
		default:
			return rs_ret_err(rs, -ENOPROTOOPT);
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
			return rs_ret_err(rs, -ENOPROTOOPT);
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
			return rs_ret_err(rs, -ENOPROTOOPT);
		}
		break;
	default:
		return rs_ret_err(rs, -ENOPROTOOPT);
	}
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(v);
	return rs_ret_err(rs, 0);
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
	return rs_ret_err(rs, ret);
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
	return rs_ret_err(rs, rs_iomap_del(rs, buf, len));
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
