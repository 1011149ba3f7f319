// SPDX-License-Identifier: MIT
/*
 * A hostile peer's side of the shared-memory connection protocol: see
 * peer.h.
 */
#include "peer.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sv_test.h"

struct sv_hello sv_peer_hello(uint32_t src_qpn, uint32_t dst_qpn)
{
	return (struct sv_hello){.magic = SV_HELLO_MAGIC,
				 .version = SV_HELLO_VERSION,
				 .type = SV_MSG_HELLO,
				 .src_qpn = src_qpn,
				 .dst_qpn = dst_qpn};
}

int sv_peer_ring(uint32_t rx_qpn, uint32_t magic, bool seal, bool asleep)
{
	uint64_t size = 65536;
	int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct sv_ring_hdr h = {.magic = magic,
				.version = SV_RING_VERSION,
				.size = size,
				.data_off = SV_RING_DATA_OFF,
				.rx_qpn = rx_qpn};

	ASSERT_TRUE(fd >= 0);
	h.rx_sleep = asleep; /* the victim then rings us on every batch */
	ASSERT_OK(ftruncate(fd, SV_RING_DATA_OFF + size));
	ASSERT_EQ(sizeof(h), pwrite(fd, &h, sizeof(h), 0));
	if (seal)
		ASSERT_OK(fcntl(fd, F_ADD_SEALS,
				F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
	return fd;
}

int sv_peer_connect(uint32_t qpn)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(connect(fd, (struct sockaddr *)&a, sv_shm_qp_addr(&a, qpn)));
	return fd;
}

int sv_peer_listen(uint32_t qpn)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sv_shm_qp_addr(&a, qpn)) ||
	    listen(fd, 4)) {
		close(fd);
		return -1;
	}
	return fd;
}

ssize_t sv_peer_send(int fd, const void *buf, size_t len, const int *fds,
		     int nfds)
{
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(SV_HELLO_FDS * sizeof(int))];
	} u;
	struct iovec iov = {(void *)buf, len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	memset(&u, 0, sizeof(u));
	if (nfds) {
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		u.c.cmsg_level = SOL_SOCKET;
		u.c.cmsg_type = SCM_RIGHTS;
		u.c.cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(&u.c), fds, nfds * sizeof(int));
	}
	return sendmsg(fd, &m, MSG_NOSIGNAL);
}

void sv_send_fds(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
	ASSERT_EQ((ssize_t)len, sv_peer_send(fd, buf, len, fds, nfds));
}

ssize_t sv_peer_recv(int fd, struct sv_hello *h, int fds[SV_HELLO_FDS],
		     int *nfds)
{
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(SV_HELLO_FDS * sizeof(int))];
	} u;
	struct iovec iov = {h, sizeof(*h)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c;
	ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);

	*nfds = 0;
	if (n < 0)
		return n;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		int k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (k > SV_HELLO_FDS - *nfds)
			k = SV_HELLO_FDS - *nfds;
		memcpy(fds + *nfds, CMSG_DATA(c), k * sizeof(int));
		*nfds += k;
	}
	return n;
}
