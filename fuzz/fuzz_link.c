// SPDX-License-Identifier: MIT
/*
 * The link set-up's socket messages (shm.c), as a hostile process of the
 * same user sends them: connections to a QP's listener carrying hellos
 * (every field, any length, 0..7 fds of any kind: rings whose header and
 * size lie, unsealed or short memfds, sockets, pipes, eventfds), then
 * sv_link_accept as the engine calls it; and the messages that follow on
 * an established connection (doorbells, goodbye, stray hellos with fds,
 * garbage, hang-ups) read by sv_link_check.  A ring
 * the victim accepts is then written to as a sender does, so a header
 * that passed validation must be one we can use.  Checked besides the
 * sanitizers: no fd is leaked, whatever was sent.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "env.h"

#define MAX_CMDS  48
#define MAX_CONNS 8
#define RING_SIZE 16384u

struct run {
	struct fz *f;
	struct sv_link vl; /* the victim's side, no QP behind it */
	uint32_t vqpn;
	uint32_t pqpn; /* the QPN the victim expects as its peer */
	int conns[MAX_CONNS];
	int nconns;
};

/* A ring memfd as a peer makes it, its header then tampered with. */
static int ring_fd(struct fz *f, uint32_t rx_qpn)
{
	struct sv_ring r;
	uint64_t size = 4096ull << fz_pick(f, 3);
	uint32_t ndesc = fz_pick(f, 2) ? 0 : 1u << fz_pick(f, 3);
	int fd;

	if (sv_ring_create(&r, size, ndesc, rx_qpn, &fd))
		return -1;
	switch (fz_pick(f, 12)) {
	case 0:
		r.hdr->magic = fz_u32(f);
		break;
	case 1:
		r.hdr->version = fz_u32(f);
		break;
	case 2:
		r.hdr->size = fz_pick(f, 2) ? fz_u64(f) : size << 1;
		break;
	case 3:
		r.hdr->data_off = fz_u64(f);
		break;
	case 4:
		r.hdr->ndesc = fz_u32(f);
		break;
	case 5:
		r.hdr->desc_off = fz_u64(f);
		break;
	case 6:
		r.hdr->rx_qpn = fz_u32(f);
		break;
	default:
		break;
	}
	sv_ring_unmap(&r);
	return fd;
}

static int other_fd(struct fz *f, int kind)
{
	int sv[2], fd = -1;

	switch (kind) {
	case 0: /* a memfd with no seals, of a ring's size */
		fd = memfd_create("fz", MFD_CLOEXEC);
		if (fd >= 0 && ftruncate(fd, SV_RING_DATA_OFF + RING_SIZE)) {
			close(fd);
			fd = -1;
		}
		return fd;
	case 1: /* a doorbell, or a stream socket */
	case 2:
		if (socketpair(AF_UNIX,
			       (kind == 1 ? SOCK_DGRAM : SOCK_STREAM) |
				       SOCK_CLOEXEC,
			       0, sv))
			return -1;
		close(sv[1]);
		return sv[0];
	case 3:
		if (pipe2(sv, O_CLOEXEC))
			return -1;
		close(sv[1]);
		return sv[0];
	case 4:
		return eventfd(0, EFD_CLOEXEC);
	default:
		(void)f;
		return open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
}

/* A hello, goodbye or anything, with fds, on socket s. */
static void send_message(struct run *r, int s)
{
	struct fz *f = r->f;
	uint8_t buf[48];
	struct sv_hello h = {
		.magic = SV_HELLO_MAGIC,
		.version = SV_HELLO_VERSION,
		.type = SV_MSG_HELLO,
		.src_qpn = r->pqpn,
		.dst_qpn = r->vqpn,
	};
	size_t len = sizeof(h);
	int fds[8] = {0}, nfds = 0, want;

	switch (fz_pick(f, 16)) {
	case 0:
		h.magic = fz_u32(f);
		break;
	case 1:
		h.version = fz_u16(f);
		break;
	case 2:
		h.type = fz_pick(f, 2) ? SV_MSG_BYE : fz_u16(f);
		break;
	case 3:
		h.src_qpn = fz_u32(f);
		break;
	case 4:
		h.dst_qpn = fz_u32(f);
		break;
	case 5:
		len = fz_pick(f, sizeof(buf) + 1);
		break;
	default:
		break;
	}
	h.pd_id = fz_u32(f);
	memcpy(buf, &h, sizeof(h));
	fz_take(f, buf + sizeof(h), sizeof(buf) - sizeof(h));
	want = fz_pick(f, 4) ? 2 : fz_pick(f, 8); /* mostly a hello's 2 */
	for (int i = 0; i < want; i++) {
		uint8_t k = fz_u8(f);
		int fd;

		if (k < 0x80) /* the right kind for the slot, mostly */
			k = 0xf0;
		fd = k == 0xf0	 ? ring_fd(f, h.src_qpn)
		     : k == 0xf1 ? other_fd(f, 1)
				 : other_fd(f, k % 6);
		if (fd >= 0)
			fds[nfds++] = fd;
	}
	fz_send_fds(s, buf, len, fds, nfds);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

static void cmd_connect(struct run *r)
{
	struct sockaddr_un a;
	int s;

	if (r->nconns == MAX_CONNS)
		return;
	s = socket(AF_UNIX, SV_LINK_SOCK | SOCK_CLOEXEC, 0);
	FZ_CHECK(s >= 0);
	if (connect(s, (struct sockaddr *)&a, sv_link_qp_addr(&a, r->vqpn))) {
		close(s); /* the backlog is full: a peer sees that too */
		return;
	}
	r->conns[r->nconns++] = s;
	if (fz_pick(r->f, 4))
		send_message(r, s);
}

/* The victim's accept, as link_step calls it; then its tx rings used. */
static void cmd_accept(struct run *r)
{
	struct fz *f = r->f;
	uint32_t expect = fz_pick(f, 4) ? r->pqpn : SV_QPN_ANY;
	int got = sv_link_accept(&r->vl, r->vqpn, expect);

	FZ_CHECK(got <= 1);
	if (getenv("FZ_TRACE"))
		fprintf(stderr, "accept: %d, tx %s\n", got,
			r->vl.tx_ready ? "mapped" : "none");
	if (!r->vl.tx_ready)
		return;
	FZ_CHECK(r->vl.tx.size >= 4096 &&
		 !(r->vl.tx.size & (r->vl.tx.size - 1)));
	for (int i = 0, n = 1 + fz_pick(f, 4); i < n; i++) {
		struct sv_ring *t = i & 1 ? &r->vl.rsp_tx : &r->vl.tx;
		uint32_t len = 32 + fz_u16(f) % 4096;
		int err = 0;
		struct sv_pkt *p = sv_ring_reserve(t, len, &err);

		if (!p)
			break;
		memset(p + 1, 0x3c, len - sizeof(*p));
		p->opcode = SV_OP_SEND;
		p->rec_len = t->last_rec;
		sv_ring_publish(t, p);
	}
	for (uint32_t i = 0; i < r->vl.tx.ndesc; i++) /* single copy reads */
		(void)atomic_load(&r->vl.tx.desc[i].seq);
	sv_shm_ring_peer(&r->vl);
}

/* Messages on an established connection, then sv_link_check. */
static void cmd_check(struct run *r)
{
	struct fz *f = r->f;
	int sv[2];
	bool hangup;
	enum sv_link_state st;

	FZ_CHECK(!socketpair(
		AF_UNIX, SV_LINK_SOCK | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv));
	for (int i = 0, n = fz_pick(f, 4); i < n; i++) {
		if (fz_pick(f, 2))
			send_message(r, sv[1]);
		else /* doorbells: 1-byte messages, and runs of them */
			for (int k = 0, m = 1 + fz_u8(f) % 80; k < m; k++)
				if (send(sv[1], "", 1, MSG_DONTWAIT) < 0)
					break;
	}
	hangup = fz_pick(f, 2);
	if (hangup)
		close(sv[1]);
	r->vl.state = SV_LINK_UP;
	st = sv_link_check(&r->vl, sv[0]);
	FZ_CHECK(st == SV_LINK_UP || st == SV_LINK_CLOSED ||
		 st == SV_LINK_DEAD);
	close(sv[0]);
	if (!hangup)
		close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = {data, size};
	struct run r = {.f = &f};
	int fds = fz_count_fds();

	sv_link_init(&r.vl);
	FZ_CHECK(sv_link_bind(&r.vl, SV_LINK_SOCK, &r.vqpn) == 0);
	FZ_CHECK(sv_link_prepare(
			 &r.vl, &sv_shm_link_ops,
			 &(struct sv_link_conf){.my_qpn = r.vqpn,
						.ring_size = RING_SIZE}) == 0);
	r.vl.state = SV_LINK_CONNECTING;
	r.pqpn = (r.vqpn + 1 + fz_u8(&f)) & SV_PSN_MASK;
	for (int i = 0; i < MAX_CMDS && !fz_empty(&f); i++) {
		uint32_t c = fz_pick(&f, 5);

		if (getenv("FZ_TRACE"))
			fprintf(stderr, "cmd %u, %d fds, %d conns\n", c,
				fz_count_fds(), r.nconns);
		switch (c) {
		case 0:
		case 1:
			cmd_connect(&r);
			break;
		case 2:
			cmd_accept(&r);
			break;
		case 3:
			if (r.nconns)
				send_message(&r,
					     r.conns[fz_pick(&f, r.nconns)]);
			break;
		case 4:
			cmd_check(&r);
			break;
		}
	}
	sv_link_close(&r.vl, r.vqpn, true);
	sv_link_unbind(&r.vl);
	for (int i = 0; i < r.nconns; i++)
		close(r.conns[i]);
	FZ_CHECK(fz_count_fds() == fds);
	return 0;
}
