// SPDX-License-Identifier: MIT
/*
 * A hostile peer's side of the shared-memory connection protocol: see
 * peer.h.
 */
#include "peer.h"

#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
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

static int make_ring(uint32_t rx_qpn, uint32_t magic, bool seal, bool asleep,
		     uint32_t ndesc)
{
	uint64_t size = SV_PEER_RING_SIZE;
	int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct sv_ring_hdr h = {.magic = magic,
				.version = SV_RING_VERSION,
				.size = size,
				.data_off = SV_RING_DATA_OFF,
				.rx_qpn = rx_qpn,
				.ndesc = ndesc,
				.desc_off = SV_RING_DATA_OFF + size};

	ASSERT_TRUE(fd >= 0);
	h.rx_sleep = asleep; /* the victim then rings us on every batch */
	ASSERT_OK(ftruncate(fd, SV_RING_DATA_OFF + size +
					ndesc * sizeof(struct sv_rdesc)));
	ASSERT_EQ(sizeof(h), pwrite(fd, &h, sizeof(h), 0));
	if (seal)
		ASSERT_OK(fcntl(fd, F_ADD_SEALS,
				F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
	return fd;
}

int sv_peer_ring(uint32_t rx_qpn, uint32_t magic, bool seal, bool asleep)
{
	return make_ring(rx_qpn, magic, seal, asleep, 0);
}

int sv_peer_ring_desc(uint32_t rx_qpn, uint32_t ndesc)
{
	return make_ring(rx_qpn, SV_RING_MAGIC, true, false, ndesc);
}

int sv_peer_connect(uint32_t qpn)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SV_LINK_SOCK | SOCK_CLOEXEC, 0);

	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(connect(fd, (struct sockaddr *)&a, sv_link_qp_addr(&a, qpn)));
	return fd;
}

int sv_peer_listen(uint32_t qpn)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SV_LINK_SOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sv_link_qp_addr(&a, qpn)) ||
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

void sv_fake_bind(struct sv_fake *f)
{
	sv_test_needs_shm("a fake peer on the shared-memory rings");
	memset(f, 0, sizeof(*f));
	f->afd = f->cfd = f->arena_fd = f->table_fd = -1;
	for (int i = 0; i < 100; i++) {
		ASSERT_EQ(sizeof(f->qpn),
			  getrandom(&f->qpn, sizeof(f->qpn), 0));
		f->qpn = (f->qpn & 0xffffff) | 2;
		f->lfd = sv_peer_listen(f->qpn);
		if (f->lfd >= 0)
			return;
	}
	sv_test_fail(__FILE__, __LINE__, "no free QPN");
}

/* Maps a ring the victim handed us, for writing records into it. */
static void map_tx(struct sv_peer_tx *t, int fd)
{
	struct sv_ring_hdr h;
	void *map;

	ASSERT_EQ(sizeof(h), pread(fd, &h, sizeof(h), 0));
	ASSERT_EQ(SV_RING_MAGIC, h.magic);
	t->size = h.size;
	t->ndesc = h.ndesc;
	t->map_len = SV_RING_DATA_OFF + h.size +
		     (size_t)h.ndesc * sizeof(struct sv_rdesc);
	map = mmap(NULL, t->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_TRUE(map != MAP_FAILED);
	t->hdr = map;
	t->data = (uint8_t *)map + SV_RING_DATA_OFF;
	t->desc = h.ndesc ? (struct sv_rdesc *)(t->data + h.size) : NULL;
	t->head = 0;
}

void sv_fake_accept(struct sv_fake *f, uint32_t victim_qpn)
{
	struct pollfd pl = {.fd = f->lfd, .events = POLLIN};
	struct sv_hello h;
	int fds[SV_HELLO_FDS], nfds;

	ASSERT_EQ(1, poll(&pl, 1, 5000));
	f->afd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
	ASSERT_TRUE(f->afd >= 0);
	ASSERT_EQ(sizeof(h), sv_peer_recv(f->afd, &h, fds, &nfds));
	ASSERT_EQ(SV_HELLO_MAGIC, h.magic);
	ASSERT_EQ(victim_qpn, h.src_qpn);
	ASSERT_EQ(f->qpn, h.dst_qpn);
	/* request ring, response ring, [arena, key table] */
	ASSERT_TRUE(nfds == 2 || nfds == 4);
	map_tx(&f->rx, fds[0]);
	map_tx(&f->rsp, fds[1]);
	close(fds[0]);
	close(fds[1]);
	if (nfds == 4) {
		f->arena_fd = fds[2];
		f->table_fd = fds[3];
	}
	f->pd_id = h.pd_id;
}

void sv_fake_hello(struct sv_fake *f, uint32_t victim_qpn, const int *fds,
		   int nfds, uint32_t pd_id)
{
	struct sv_hello h = sv_peer_hello(f->qpn, victim_qpn);

	h.pd_id = pd_id;
	f->cfd = sv_peer_connect(victim_qpn);
	sv_send_fds(f->cfd, &h, sizeof(h), fds, nfds);
}

uint32_t sv_peer_rec_len(uint32_t plen)
{
	return (uint32_t)((sizeof(struct sv_pkt) + plen + SV_REC_ALIGN - 1) &
			  ~(SV_REC_ALIGN - 1));
}

void sv_fake_put(struct sv_fake *f, struct sv_peer_tx *t,
		 const struct sv_pkt *pkt, const void *payload, uint32_t plen,
		 uint64_t advance)
{
	uint8_t *at = t->data + (t->head & (t->size - 1));
	char bell = 0;

	memcpy(at, pkt, offsetof(struct sv_pkt, seq));
	if (plen)
		memcpy(at + sizeof(*pkt), payload, plen);
	/* release: the record before its seq, as sv_ring_release */
	atomic_store_explicit((_Atomic uint32_t *)&((struct sv_pkt *)at)->seq,
			      sv_rec_seq(t->head), memory_order_release);
	t->head += advance;
	/* the doorbell; a full queue means rung already */
	ASSERT_TRUE(send(f->afd, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 ||
		    errno == EAGAIN);
}

static void unmap_tx(struct sv_peer_tx *t)
{
	if (t->hdr)
		munmap(t->hdr, t->map_len);
	t->hdr = NULL;
}

void sv_fake_close(struct sv_fake *f)
{
	int *fds[] = {&f->lfd, &f->afd, &f->cfd, &f->arena_fd, &f->table_fd};

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	unmap_tx(&f->rx);
	unmap_tx(&f->rsp);
	memset(f, 0, sizeof(*f));
}
