// SPDX-License-Identifier: MIT
/*
 * rsockets are not implemented on softverbs yet: every call fails with
 * ENOSYS (riowrite, whose size_t cannot say -1 apart, returns 0 with
 * errno ENOSYS) and the process is told once on stderr.  Nothing here
 * pretends to work.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>

#include <rdma/rsocket.h>

#include "cm.h"

static int unsupported(const char *call)
{
	static atomic_bool said;

	if (!atomic_exchange(&said, true))
		fprintf(stderr,
			"softverbs librdmacm: %s: rsockets are not "
			"implemented on softverbs (ENOSYS); use the "
			"rdma_cm calls\n",
			call);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rsocket(int domain, int type, int protocol)
{
	return unsupported(__func__);
}

CM_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return unsupported(__func__);
}

CM_EXPORT int rlisten(int socket, int backlog)
{
	return unsupported(__func__);
}

CM_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return unsupported(__func__);
}

CM_EXPORT int rconnect(int socket, const struct sockaddr *addr,
		       socklen_t addrlen)
{
	return unsupported(__func__);
}

CM_EXPORT int rshutdown(int socket, int how)
{
	return unsupported(__func__);
}

CM_EXPORT int rclose(int socket)
{
	return unsupported(__func__);
}

CM_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	return unsupported(__func__);
}

CM_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			    struct sockaddr *src_addr, socklen_t *addrlen)
{
	return unsupported(__func__);
}

CM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	return unsupported(__func__);
}

CM_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	return unsupported(__func__);
}

CM_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			  const struct sockaddr *dest_addr, socklen_t addrlen)
{
	return unsupported(__func__);
}

CM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	return unsupported(__func__);
}

CM_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return unsupported(__func__);
}

CM_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return unsupported(__func__);
}

CM_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return unsupported(__func__);
}

CM_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return unsupported(__func__);
}

CM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return unsupported(__func__);
}

CM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds,
		      fd_set *exceptfds, struct timeval *timeout)
{
	return unsupported(__func__);
}

CM_EXPORT int rgetpeername(int socket, struct sockaddr *addr,
			   socklen_t *addrlen)
{
	return unsupported(__func__);
}

CM_EXPORT int rgetsockname(int socket, struct sockaddr *addr,
			   socklen_t *addrlen)
{
	return unsupported(__func__);
}

CM_EXPORT int rsetsockopt(int socket, int level, int optname,
			  const void *optval, socklen_t optlen)
{
	return unsupported(__func__);
}

CM_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval,
			  socklen_t *optlen)
{
	return unsupported(__func__);
}

CM_EXPORT int rfcntl(int socket, int cmd, ...)
{
	return unsupported(__func__);
}

CM_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
		       off_t offset)
{
	return unsupported(__func__);
}

CM_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	return unsupported(__func__);
}

CM_EXPORT size_t riowrite(int socket, const void *buf, size_t count,
			  off_t offset, int flags)
{
	unsupported(__func__);
	return 0;
}
