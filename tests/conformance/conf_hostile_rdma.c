// SPDX-License-Identifier: MIT
/*
 * A hostile peer against one-sided RDMA (issue 9, acceptance 4): a fake
 * QP that speaks our wire format (peer.h) and a victim QP in RTS whose
 * target MR sits between PROT_NONE pages with canary bytes around it.
 * (1) Forged requests on the victim's request ring: the right NAK in the
 *     ack word, the victim's QP in ERROR, not a byte of its memory moved.
 * (2) Forged responses on the victim's response ring: IBV_EVENT_QP_FATAL,
 *     ERROR, nothing outside the read's SGEs.
 * (3) Forged receive descriptors in our own ring (we are the receiver):
 *     the victim's sends land inside our arena or go the ring's way.
 * (4) A forged placed send longer than the receive: IBV_WC_LOC_LEN_ERR.
 * Each positive control shows the forgery is well formed but for its
 * defect.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pair.h"
#include "peer.h"
#include "rmem.h"

#define PAGE   0x1000
#define CANARY 0xc5	     /* bytes around the MR, same pages */
#define FILL   0x3c	     /* the MR's bytes */
#define MR_LEN (8192u + 24u) /* the target MR */
#define RPSN   0x100u	     /* the victim's rq_psn: our first PSN */
#define VPSN   0x1234u	     /* the victim's sq_psn (pair.c default) */
#define ARENA  (1u << 20)    /* our fake arena (case 3) */
#define NDESC  16u	     /* our receive descriptors (case 3) */
#define MAX_WC 64

#define REMOTE_ALL                                          \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define QP_REMOTE_ALL                                       \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* The victim's target memory: a PROT_NONE page on each side, CANARY
 * bytes around the MR inside its first and last pages, and a snapshot
 * of all of it to compare with. */
struct zone {
	uint8_t *map, *data, *at, *snap;
	size_t maplen, datalen, len;
	struct ibv_mr *mr;
};

static void zone_open(struct zone *z, struct ibv_pd *pd, int access)
{
	z->len = MR_LEN;
	z->datalen = (z->len + 128 + PAGE - 1) / PAGE * PAGE;
	z->maplen = z->datalen + 2 * PAGE;
	z->map = mmap(NULL, z->maplen, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(z->map != MAP_FAILED);
	ASSERT_OK(mprotect(z->map, PAGE, PROT_NONE));
	ASSERT_OK(mprotect(z->map + PAGE + z->datalen, PAGE, PROT_NONE));
	z->data = z->map + PAGE;
	memset(z->data, CANARY, z->datalen);
	z->at = z->data + 64;
	memset(z->at, FILL, z->len);
	z->mr = ibv_reg_mr(pd, z->at, z->len, access);
	ASSERT_NOT_NULL(z->mr);
	z->snap = malloc(z->datalen);
	ASSERT_NOT_NULL(z->snap);
}

static void zone_close(struct zone *z)
{
	ASSERT_OK(ibv_dereg_mr(z->mr));
	ASSERT_OK(munmap(z->map, z->maplen));
	free(z->snap);
}

/* Fails at the caller unless data[from, to) equals the snapshot. */
static void same_at(const char *file, int line, const uint8_t *now,
		    const uint8_t *was, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (now[i] != was[i])
			sv_test_fail(file, line,
				     "byte %zu changed: %#x, was %#x", i,
				     now[i], was[i]);
}

struct hr {
	struct sv_end v;  /* the victim */
	struct sv_fake f; /* us, with the victim's rings */
	struct zone z;	  /* the victim's target MR */
	uint8_t *vsnap;	  /* the victim's other buffer, as it was */
	int my_ring, my_rsp;
	struct view { /* our mapping of a ring we handed over */
		uint8_t *map, *data;
		struct sv_ring_hdr *hdr;
		struct sv_rdesc *desc;
		size_t len;
		uint64_t tail;
	} req, rsp;
	int arena_fd, table_fd; /* ours (case 3), -1 if not shared */
	uint8_t *arena;
	struct ibv_wc wc[MAX_WC]; /* completions polled while driving */
	int nwc;
};

static void view_map(struct view *w, int fd, uint32_t ndesc)
{
	w->len = SV_RING_DATA_OFF + SV_PEER_RING_SIZE +
		 ndesc * sizeof(struct sv_rdesc);
	w->map = mmap(NULL, w->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_TRUE(w->map != MAP_FAILED);
	w->hdr = (struct sv_ring_hdr *)w->map;
	w->data = w->map + SV_RING_DATA_OFF;
	w->desc = (struct sv_rdesc *)(w->data + SV_PEER_RING_SIZE);
	w->tail = 0;
}

/* Our arena and key table (rmem.h's layout), sealed as rmem.c makes
 * them; the table describes no MR. */
static void make_shared(struct hr *H)
{
	struct sv_rkey_hdr h = {.magic = SV_RKEY_MAGIC,
				.version = SV_RKEY_VERSION,
				.entry_size = sizeof(struct sv_rkey_entry),
				.nentries = 1,
				.entries_off = SV_RKEY_HDR_BYTES,
				.arena_size = ARENA};
	int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

	H->arena_fd = memfd_create("hostile-arena", MFD_ALLOW_SEALING);
	H->table_fd = memfd_create("hostile-keys", MFD_ALLOW_SEALING);
	ASSERT_TRUE(H->arena_fd >= 0 && H->table_fd >= 0);
	ASSERT_OK(ftruncate(H->arena_fd, ARENA));
	ASSERT_OK(ftruncate(H->table_fd, SV_RKEY_HDR_BYTES + PAGE));
	ASSERT_EQ(sizeof(h), pwrite(H->table_fd, &h, sizeof(h), 0));
	ASSERT_OK(fcntl(H->arena_fd, F_ADD_SEALS, seals));
	ASSERT_OK(fcntl(H->table_fd, F_ADD_SEALS, seals));
	H->arena = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_SHARED,
			H->arena_fd, 0);
	ASSERT_TRUE(H->arena != MAP_FAILED);
}

/*
 * The victim: QP with remote access in RTS toward our fake QP, target MR
 * in guarded memory (zone_access), a 64 KiB buffer of its own; ndesc
 * receive descriptors in the ring we hand it, and with share our arena
 * and key table in our hello.
 */
static void hr_open(struct hr *H, int zone_access, uint32_t ndesc, bool share)
{
	struct sv_end_opts o = sv_end_opts_default();

	memset(H, 0, sizeof(*H));
	H->arena_fd = H->table_fd = -1;
	sv_fake_bind(&H->f);
	o.qp_access = QP_REMOTE_ALL;
	o.psn = VPSN;
	sv_end_open(&H->v, &o);
	sv_fill(H->v.buf, o.buf_len, 0x77);
	zone_open(&H->z, H->v.pd, zone_access);
	ASSERT_OK(sv_end_to_init(&H->v));
	ASSERT_OK(sv_end_to_rtr(&H->v, H->f.qpn, RPSN));
	ASSERT_OK(sv_end_to_rts(&H->v));
	sv_fake_accept(&H->f, H->v.qp->qp_num);

	H->my_ring = sv_peer_ring_desc(H->f.qpn, ndesc);
	H->my_rsp = sv_peer_ring(H->f.qpn, SV_RING_MAGIC, true, false);
	view_map(&H->req, H->my_ring, ndesc);
	view_map(&H->rsp, H->my_rsp, 0);
	if (share)
		make_shared(H);
	memcpy(H->z.snap, H->z.data, H->z.datalen);
	H->vsnap = malloc(o.buf_len);
	ASSERT_NOT_NULL(H->vsnap);
	memcpy(H->vsnap, H->v.buf, o.buf_len);
}

/* Our hello: the victim maps the rings we give it (and our memory). */
static void hr_hello(struct hr *H)
{
	int fds[4] = {H->my_ring, H->my_rsp, H->arena_fd, H->table_fd};

	sv_fake_hello(&H->f, H->v.qp->qp_num, fds, H->arena_fd >= 0 ? 4 : 2, 1);
}

static void hr_setup(struct hr *H, int zone_access, uint32_t ndesc, bool share)
{
	hr_open(H, zone_access, ndesc, share);
	hr_hello(H);
}

static void hr_close(struct hr *H)
{
	munmap(H->req.map, H->req.len);
	munmap(H->rsp.map, H->rsp.len);
	if (H->arena)
		munmap(H->arena, ARENA);
	if (H->arena_fd >= 0)
		close(H->arena_fd);
	if (H->table_fd >= 0)
		close(H->table_fd);
	close(H->my_ring);
	close(H->my_rsp);
	sv_fake_close(&H->f);
	zone_close(&H->z);
	sv_end_close(&H->v);
	free(H->vsnap);
}

/* The victim's memory: the guarded zone but [skip_from, skip_to) (zone
 * offsets), and its own buffer, unchanged. */
#define UNTOUCHED_BUT(H, from, to)                                          \
	do {                                                                \
		same_at(__FILE__, __LINE__, (H)->z.data, (H)->z.snap, 0,    \
			(from));                                            \
		same_at(__FILE__, __LINE__, (H)->z.data, (H)->z.snap, (to), \
			(H)->z.datalen);                                    \
		same_at(__FILE__, __LINE__, (H)->v.buf, (H)->vsnap, 0,      \
			(H)->v.o.buf_len);                                  \
	} while (0)
#define UNTOUCHED(H) UNTOUCHED_BUT(H, 0, 0)

/* Lets the victim run (its app thread drives its engine in poll) and
 * keeps what it completes. */
static void drive(struct hr *H)
{
	struct ibv_cq *cq[2] = {H->v.scq, H->v.rcq};
	struct ibv_wc wc;

	for (int i = 0; i < 2; i++) {
		while (ibv_poll_cq(cq[i], 1, &wc) == 1) {
			ASSERT_TRUE(H->nwc < MAX_WC);
			H->wc[H->nwc++] = wc;
		}
	}
}

/* The completion of wr_id, driving the victim until it comes. */
static struct ibv_wc *wc_of(struct hr *H, uint64_t wr_id)
{
	uint64_t end = sv_now_ms() + SV_WC_TIMEOUT_MS;

	for (;;) {
		for (int i = 0; i < H->nwc; i++)
			if (H->wc[i].wr_id == wr_id)
				return &H->wc[i];
		ASSERT_TRUE(sv_now_ms() < end);
		drive(H);
	}
}

/* The victim's ack word once it carries a syndrome other than none. */
static uint64_t wait_ack(struct hr *H)
{
	uint64_t end = sv_now_ms() + SV_WC_TIMEOUT_MS, ack;

	for (;;) {
		ack = atomic_load(&H->f.rx.hdr->ack);
		if (SV_ACK_SYN(ack) != SV_ACK_SYN(SV_ACK_NONE))
			return ack;
		ASSERT_TRUE(sv_now_ms() < end);
		drive(H);
	}
}

static void wait_state_err(struct hr *H)
{
	uint64_t end = sv_now_ms() + SV_WC_TIMEOUT_MS;

	while (sv_end_state(&H->v) != IBV_QPS_ERR) {
		ASSERT_TRUE(sv_now_ms() < end);
		drive(H);
	}
}

/* The victim's next async event, with a deadline: of this type, on its
 * QP. */
static void expect_async(struct hr *H, enum ibv_event_type type)
{
	struct pollfd p = {.fd = H->v.ctx->async_fd, .events = POLLIN};
	struct ibv_async_event ev;

	ASSERT_EQ(1, poll(&p, 1, SV_WC_TIMEOUT_MS));
	ASSERT_OK(ibv_get_async_event(H->v.ctx, &ev));
	if (ev.event_type != type)
		sv_test_fail(__FILE__, __LINE__, "async event %s, expected %s",
			     ibv_event_type_str(ev.event_type),
			     ibv_event_type_str(type));
	ASSERT_TRUE(ev.element.qp == H->v.qp);
	ibv_ack_async_event(&ev);
}

/* The next record the victim put in a ring we handed it (pads skipped);
 * consumed (the tail published) before it returns. */
static struct sv_pkt next_rec(struct hr *H, struct view *w, uint8_t *payload,
			      uint32_t max)
{
	uint64_t end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	struct sv_pkt p;

	for (;;) {
		const uint8_t *at =
			w->data + (w->tail & (SV_PEER_RING_SIZE - 1));

		if (atomic_load(
			    (_Atomic uint32_t *)(at + offsetof(struct sv_pkt,
							       seq))) !=
		    sv_rec_seq(w->tail)) {
			ASSERT_TRUE(sv_now_ms() < end);
			drive(H);
			continue;
		}
		memcpy(&p, at, sizeof(p));
		ASSERT_TRUE(p.rec_len >= 64 && p.rec_len % 64 == 0);
		w->tail += p.rec_len;
		if (p.opcode == SV_OP_PAD)
			continue;
		ASSERT_TRUE(p.len <= max);
		memcpy(payload, at + sizeof(p), p.len);
		atomic_store(&w->hdr->tail, w->tail);
		return p;
	}
}

/* --- (1) forged requests ------------------------------------------------ */

/* One request record at our next PSN: ext then data as its payload. */
static void put_req(struct hr *H, struct sv_pkt p, const void *ext,
		    uint32_t ext_len, const void *data, uint32_t len)
{
	static uint8_t buf[SV_MAX_REC];

	if (ext_len)
		memcpy(buf, ext, ext_len);
	if (len)
		memcpy(buf + ext_len, data, len);
	if (!p.rec_len)
		p.rec_len = sv_peer_rec_len(ext_len + len);
	sv_fake_put(&H->f, &H->f.rx, &p, buf, p.rec_len - sizeof(p), p.rec_len);
}

static uint32_t npsn_of(uint32_t len)
{
	return len ? (len + 1023) / 1024 : 1;
}

static const uint8_t junk[8192] = {[0 ... 8191] = 0xee};

/* An RDMA WRITE of len bytes of junk (len <= sizeof(junk)). */
static void forge_write(struct hr *H, uint32_t rkey, uint64_t va,
			uint32_t dma_len, uint32_t len)
{
	struct sv_reth r = {.va = va, .rkey = rkey, .dma_len = dma_len};
	struct sv_pkt p = {.opcode = SV_OP_WRITE,
			   .seg = SV_SEG_ONLY,
			   .psn = RPSN,
			   .npsn = npsn_of(len),
			   .len = len,
			   .msg_len = len};

	put_req(H, p, &r, sizeof(r), junk, len);
}

static void forge_read(struct hr *H, uint32_t rkey, uint64_t va, uint32_t len,
		       uint32_t npsn, uint32_t attached)
{
	struct sv_reth r = {.va = va, .rkey = rkey, .dma_len = len};
	struct sv_pkt p = {.opcode = SV_OP_READ_REQ,
			   .seg = SV_SEG_ONLY,
			   .psn = RPSN,
			   .npsn = npsn,
			   .len = attached,
			   .msg_len = len};

	put_req(H, p, &r, sizeof(r), junk, attached);
}

static void forge_atomic(struct hr *H, uint8_t op, uint32_t rkey, uint64_t va)
{
	struct sv_atometh a = {.va = va,
			       .rkey = rkey,
			       .swap_add = 0x1111111111111111ull,
			       .compare = 0x3c3c3c3c3c3c3c3cull};
	struct sv_pkt p = {.opcode = op,
			   .seg = SV_SEG_ONLY,
			   .psn = RPSN,
			   .npsn = 1,
			   .msg_len = 8};

	put_req(H, p, &a, sizeof(a), NULL, 0);
}

/*
 * The victim refused our request: NAK syn for its PSN in the ack word,
 * its QP in ERROR with the async event the IBA gives, no read response
 * sent us, not a byte of its memory changed.
 */
static void refused(struct hr *H, enum sv_syndrome syn)
{
	uint64_t ack = wait_ack(H);

	if (SV_ACK_SYN(ack) != syn)
		sv_test_fail(__FILE__, __LINE__, "syndrome %u, expected %u",
			     SV_ACK_SYN(ack), syn);
	ASSERT_EQ(RPSN, SV_ACK_PSN(ack));
	wait_state_err(H);
	expect_async(H, syn == SV_NAK_REM_ACCESS ? IBV_EVENT_QP_ACCESS_ERR
						 : IBV_EVENT_QP_REQ_ERR);
	ASSERT_EQ(0, atomic_load((_Atomic uint32_t *)(H->rsp.data +
						      offsetof(struct sv_pkt,
							       seq))));
	UNTOUCHED(H);
}

static uint64_t iova(struct hr *H)
{
	return (uintptr_t)H->z.at;
}

/* An MR over the zone's bytes, then taken away: its rkey. */
static uint32_t dereg_rkey(struct hr *H)
{
	struct ibv_mr *mr = ibv_reg_mr(H->v.pd, H->z.at, H->z.len, REMOTE_ALL);
	uint32_t rkey;

	ASSERT_NOT_NULL(mr);
	rkey = mr->rkey;
	ASSERT_OK(ibv_dereg_mr(mr));
	return rkey;
}

/* Control: the same forgery, well formed, lands where it says. */
SV_TEST(hostile_rdma_write_control)
{
	struct hr H;
	uint64_t ack;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_write(&H, H.z.mr->rkey, iova(&H) + 100, 64, 64);
	ack = wait_ack(&H);
	ASSERT_EQ(SV_ACK, SV_ACK_SYN(ack));
	ASSERT_EQ(RPSN, SV_ACK_PSN(ack));
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&H.v));
	for (int i = 0; i < 64; i++)
		ASSERT_EQ(0xee, H.z.at[100 + i]);
	UNTOUCHED_BUT(&H, 64 + 100, 64 + 100 + 64);
	hr_close(&H);
}

SV_TEST(hostile_rdma_write_bad_rkey)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_write(&H, H.z.mr->rkey ^ 0x5a5a00, iova(&H), 64, 64);
	refused(&H, SV_NAK_REM_ACCESS);
	hr_close(&H);
}

SV_TEST(hostile_rdma_write_dereg_rkey)
{
	struct hr H;
	uint32_t rkey;

	hr_setup(&H, REMOTE_ALL, 0, false);
	rkey = dereg_rkey(&H);
	memcpy(H.z.snap, H.z.data, H.z.datalen);
	forge_write(&H, rkey, iova(&H), 64, 64);
	refused(&H, SV_NAK_REM_ACCESS);
	hr_close(&H);
}

SV_TEST(hostile_rdma_write_other_pd)
{
	struct ibv_mr *mr;
	struct ibv_pd *pd2;
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	pd2 = ibv_alloc_pd(H.v.ctx);
	ASSERT_NOT_NULL(pd2);
	mr = ibv_reg_mr(pd2, H.z.at, H.z.len, REMOTE_ALL);
	ASSERT_NOT_NULL(mr);
	forge_write(&H, mr->rkey, iova(&H), 64, 64);
	refused(&H, SV_NAK_REM_ACCESS);
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_dealloc_pd(pd2));
	hr_close(&H);
}

SV_TEST(hostile_rdma_write_one_byte_past)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_write(&H, H.z.mr->rkey, iova(&H) + MR_LEN - 63, 64, 64);
	refused(&H, SV_NAK_REM_ACCESS);
	hr_close(&H);
}

SV_TEST(hostile_rdma_write_before_start)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_write(&H, H.z.mr->rkey, iova(&H) - 1, 64, 64);
	refused(&H, SV_NAK_REM_ACCESS);
	hr_close(&H);
}

/* va + len wraps around 2^64 (into low addresses). */
SV_TEST(hostile_rdma_write_va_wraps)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_write(&H, H.z.mr->rkey, UINT64_MAX - 15, 64, 64);
	refused(&H, SV_NAK_REM_ACCESS);
	hr_close(&H);
}

/* The RETH says more than the message (and the MR has room). */
SV_TEST(hostile_rdma_write_dma_len_differs)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_write(&H, H.z.mr->rkey, iova(&H), 128, 64);
	refused(&H, SV_NAK_INV_REQ);
	hr_close(&H);
}

/* The FIRST train's record too short for its RETH and payload. */
SV_TEST(hostile_rdma_write_reth_cut_short)
{
	struct sv_reth r;
	struct sv_pkt p = {.opcode = SV_OP_WRITE,
			   .seg = SV_SEG_ONLY,
			   .psn = RPSN,
			   .npsn = 1,
			   .len = 32,
			   .msg_len = 32,
			   .rec_len = 64}; /* 32 bytes: RETH + 16 */
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	r = (struct sv_reth){
		.va = iova(&H), .rkey = H.z.mr->rkey, .dma_len = 32};
	put_req(&H, p, &r, sizeof(r), junk, 16);
	refused(&H, SV_NAK_INV_REQ);
	hr_close(&H);
}

/* MIDDLE and LAST trains (no RETH) of a write never begun. */
SV_TEST(hostile_rdma_write_middle_without_first)
{
	struct sv_pkt p = {.opcode = SV_OP_WRITE,
			   .seg = 0,
			   .psn = RPSN,
			   .npsn = 1,
			   .len = 1024,
			   .msg_len = 4096};
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	put_req(&H, p, NULL, 0, junk, 1024);
	refused(&H, SV_NAK_INV_REQ);
	hr_close(&H);

	hr_setup(&H, REMOTE_ALL, 0, false);
	p.seg = SV_SEG_LAST;
	put_req(&H, p, NULL, 0, junk, 1024);
	refused(&H, SV_NAK_INV_REQ);
	hr_close(&H);
}

/* Control: a well-formed read is answered on our response ring. */
SV_TEST(hostile_rdma_read_control)
{
	struct sv_pkt *r;
	struct hr H;
	uint64_t end;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_read(&H, H.z.mr->rkey, iova(&H) + 8, 2000, 2, 0);
	r = (struct sv_pkt *)H.rsp.data;
	end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	while (atomic_load((_Atomic uint32_t *)&r->seq) != sv_rec_seq(0)) {
		ASSERT_TRUE(sv_now_ms() < end);
		drive(&H);
	}
	ASSERT_EQ(SV_OP_READ_RESP, r->opcode);
	ASSERT_EQ(SV_SEG_ONLY, r->seg);
	ASSERT_EQ(RPSN, r->psn);
	ASSERT_EQ(2000, r->len);
	for (int i = 0; i < 2000; i++)
		ASSERT_EQ(FILL, ((uint8_t *)(r + 1))[i]);
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&H.v));
	UNTOUCHED(&H);
	hr_close(&H);
}

SV_TEST(hostile_rdma_read_bad_rkey)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_read(&H, H.z.mr->rkey + 0x100, iova(&H), 64, 1, 0);
	refused(&H, SV_NAK_REM_ACCESS);
	hr_close(&H);
}

SV_TEST(hostile_rdma_read_out_of_bounds)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_read(&H, H.z.mr->rkey, iova(&H) + 64, MR_LEN - 63, 9, 0);
	refused(&H, SV_NAK_REM_ACCESS);
	hr_close(&H);
}

SV_TEST(hostile_rdma_read_va_wraps)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_read(&H, H.z.mr->rkey, UINT64_MAX - 7, 64, 1, 0);
	refused(&H, SV_NAK_REM_ACCESS);
	hr_close(&H);
}

/*
 * A read of 4 KiB (4 PSNs at MTU 1024) that claims 1 PSN, or 100.  Our
 * wire format carries npsn where the IBA has the responder compute it;
 * the responder trusts it (a mismatch only misnumbers the liar's own
 * answers): the answers stay inside the PSNs claimed, carry exactly the
 * bytes asked for, and nothing is written.
 */
static void read_npsn(uint32_t npsn)
{
	static uint8_t buf[SV_MAX_REC];
	uint32_t got = 0;
	struct sv_pkt p;
	struct hr H;
	uint64_t ack;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_read(&H, H.z.mr->rkey, iova(&H), 4096, npsn, 0);
	do {
		p = next_rec(&H, &H.rsp, buf, sizeof(buf));
		ASSERT_EQ(SV_OP_READ_RESP, p.opcode);
		ASSERT_TRUE(sv_psn_diff(p.psn, RPSN) >= 0);
		ASSERT_TRUE(sv_psn_diff(p.psn, RPSN) < (int32_t)npsn);
		ASSERT_TRUE(p.len <= 4096 - got);
		for (uint32_t i = 0; i < p.len; i++)
			ASSERT_EQ(FILL, buf[i]);
		got += p.len;
	} while (!(p.seg & SV_SEG_LAST));
	ASSERT_EQ(4096, got);
	ack = wait_ack(&H);
	ASSERT_EQ(SV_ACK, SV_ACK_SYN(ack));
	ASSERT_EQ(sv_psn_add(RPSN, npsn - 1), SV_ACK_PSN(ack));
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&H.v));
	UNTOUCHED(&H);
	hr_close(&H);
}

SV_TEST(hostile_rdma_read_npsn_mismatch)
{
	read_npsn(1);
	read_npsn(100);
}

/*
 * A peer has our hello as soon as it accepted our call, and can send
 * before its own hello is out of our listener's queue: a read (or an
 * atomic) then has no response ring to be answered on yet.  It waits in
 * our ring, however often the app polls, and is answered when the hello
 * comes, by the progress thread with no poll needed.  Before, the
 * responder wrote into the unmapped ring and crashed.
 */
static void answered_after_hello(bool atomic)
{
	static uint8_t buf[SV_MAX_REC];
	_Atomic uint32_t *seq;
	struct sv_pkt p;
	uint64_t end;
	struct hr H;

	hr_open(&H, REMOTE_ALL, 0, false);
	if (atomic)
		forge_atomic(&H, SV_OP_FETCH_ADD, H.z.mr->rkey, iova(&H) + 64);
	else
		forge_read(&H, H.z.mr->rkey, iova(&H), 64, 1, 0);
	for (int i = 0; i < 1000; i++)
		drive(&H);
	seq = (_Atomic uint32_t *)(H.rsp.data + offsetof(struct sv_pkt, seq));
	ASSERT_EQ(0, atomic_load(seq));
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&H.v));
	hr_hello(&H);
	end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	while (atomic_load(seq) != sv_rec_seq(0))
		ASSERT_TRUE(sv_now_ms() < end); /* no poll: the progress
						 * thread answers */
	p = next_rec(&H, &H.rsp, buf, sizeof(buf));
	ASSERT_EQ(atomic ? SV_OP_ATOMIC_RESP : SV_OP_READ_RESP, p.opcode);
	ASSERT_EQ(RPSN, p.psn);
	if (atomic) {
		UNTOUCHED_BUT(&H, 64 + 64, 64 + 72);
	} else {
		ASSERT_EQ(64, p.len);
		for (uint32_t i = 0; i < p.len; i++)
			ASSERT_EQ(FILL, buf[i]);
		UNTOUCHED(&H);
	}
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&H.v));
	hr_close(&H);
}

SV_TEST(hostile_rdma_read_before_hello)
{
	answered_after_hello(false);
}

SV_TEST(hostile_rdma_atomic_before_hello)
{
	answered_after_hello(true);
}

SV_TEST(hostile_rdma_read_with_payload)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_read(&H, H.z.mr->rkey, iova(&H), 64, 1, 64);
	refused(&H, SV_NAK_INV_REQ);
	hr_close(&H);
}

/* Control: a well-formed fetch-and-add is executed and answered. */
SV_TEST(hostile_rdma_atomic_control)
{
	struct sv_pkt *r;
	struct sv_atomack a;
	struct hr H;
	uint64_t end, v;

	hr_setup(&H, REMOTE_ALL, 0, false);
	forge_atomic(&H, SV_OP_FETCH_ADD, H.z.mr->rkey, iova(&H) + 64);
	r = (struct sv_pkt *)H.rsp.data;
	end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	while (atomic_load((_Atomic uint32_t *)&r->seq) != sv_rec_seq(0)) {
		ASSERT_TRUE(sv_now_ms() < end);
		drive(&H);
	}
	ASSERT_EQ(SV_OP_ATOMIC_RESP, r->opcode);
	memcpy(&a, r + 1, sizeof(a));
	ASSERT_EQ(0x3c3c3c3c3c3c3c3cull, a.orig);
	memcpy(&v, H.z.at + 64, 8);
	ASSERT_EQ(0x4d4d4d4d4d4d4d4dull, v);
	UNTOUCHED_BUT(&H, 64 + 64, 64 + 72);
	hr_close(&H);
}

SV_TEST(hostile_rdma_atomic_misaligned)
{
	static const uint8_t op[] = {SV_OP_FETCH_ADD, SV_OP_CMP_SWAP};
	struct hr H;

	for (int i = 0; i < 2; i++) {
		hr_setup(&H, REMOTE_ALL, 0, false);
		forge_atomic(&H, op[i], H.z.mr->rkey, iova(&H) + 4);
		refused(&H, SV_NAK_INV_REQ);
		hr_close(&H);
	}
}

SV_TEST(hostile_rdma_atomic_out_of_bounds)
{
	static const uint8_t op[] = {SV_OP_FETCH_ADD, SV_OP_CMP_SWAP};
	struct hr H;

	for (int i = 0; i < 2; i++) {
		hr_setup(&H, REMOTE_ALL, 0, false);
		forge_atomic(&H, op[i], H.z.mr->rkey, iova(&H) + MR_LEN);
		refused(&H, SV_NAK_REM_ACCESS);
		hr_close(&H);
		hr_setup(&H, REMOTE_ALL, 0, false);
		forge_atomic(&H, op[i], H.z.mr->rkey, UINT64_MAX - 7);
		refused(&H, SV_NAK_REM_ACCESS);
		hr_close(&H);
	}
}

SV_TEST(hostile_rdma_atomic_without_access)
{
	struct hr H;

	hr_setup(&H,
		 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_READ,
		 0, false);
	forge_atomic(&H, SV_OP_FETCH_ADD, H.z.mr->rkey, iova(&H));
	refused(&H, SV_NAK_REM_ACCESS);
	hr_close(&H);
}

/* --- (2) forged responses ----------------------------------------------- */

#define RD_OFF 128 /* the victim's read lands at zone.at + RD_OFF */
#define RD_LEN 64

/* The victim posts an RDMA read of RD_LEN bytes (wr_id 5) into its
 * zone; we see its request.  Its PSN. */
static uint32_t victim_reads(struct hr *H)
{
	struct ibv_sge sg = {.addr = iova(H) + RD_OFF,
			     .length = RD_LEN,
			     .lkey = H->z.mr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = 5,
		.sg_list = &sg,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_READ,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {.remote_addr = 0x10000, .rkey = 0x1234}};
	struct ibv_send_wr *bad;
	static uint8_t buf[SV_MAX_REC];
	struct sv_pkt p;

	ASSERT_OK(ibv_post_send(H->v.qp, &wr, &bad));
	p = next_rec(H, &H->req, buf, sizeof(buf));
	ASSERT_EQ(SV_OP_READ_REQ, p.opcode);
	ASSERT_EQ(VPSN, p.psn);
	ASSERT_EQ(1, p.npsn);
	return p.psn;
}

/* A response record on the victim's response ring. */
static void put_rsp(struct hr *H, uint8_t op, uint8_t seg, uint32_t psn,
		    const void *payload, uint32_t len, uint32_t msg_len)
{
	struct sv_pkt p = {.opcode = op,
			   .seg = seg,
			   .psn = psn,
			   .npsn = npsn_of(len),
			   .len = len,
			   .msg_len = msg_len,
			   .rec_len = sv_peer_rec_len(len)};

	sv_fake_put(&H->f, &H->f.rsp, &p, payload, len, p.rec_len);
}

/* The victim took our response as the protocol error it is: QP_FATAL,
 * ERROR, its WR wr_id completed in error, and in its memory only the
 * read's SGE [RD_OFF, RD_OFF + got) may have changed. */
static void rsp_fatal(struct hr *H, uint64_t wr_id, uint32_t got)
{
	wait_state_err(H);
	expect_async(H, IBV_EVENT_QP_FATAL);
	ASSERT_NE(IBV_WC_SUCCESS, wc_of(H, wr_id)->status);
	UNTOUCHED_BUT(H, 64 + RD_OFF, 64 + RD_OFF + got);
}

SV_TEST(hostile_rdma_read_resp_control)
{
	struct hr H;
	uint32_t psn;

	hr_setup(&H, REMOTE_ALL, 0, false);
	psn = victim_reads(&H);
	put_rsp(&H, SV_OP_READ_RESP, SV_SEG_ONLY, psn, junk, RD_LEN, RD_LEN);
	ASSERT_EQ(IBV_WC_SUCCESS, wc_of(&H, 5)->status);
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&H.v));
	for (int i = 0; i < RD_LEN; i++)
		ASSERT_EQ(0xee, H.z.at[RD_OFF + i]);
	UNTOUCHED_BUT(&H, 64 + RD_OFF, 64 + RD_OFF + RD_LEN);
	hr_close(&H);
}

/* A response with no read or atomic outstanding (a send is). */
SV_TEST(hostile_rdma_resp_unsolicited)
{
	static const uint8_t op[] = {SV_OP_READ_RESP, SV_OP_ATOMIC_RESP};
	struct hr H;

	for (int i = 0; i < 2; i++) {
		hr_setup(&H, REMOTE_ALL, 0, false);
		put_rsp(&H, op[i], SV_SEG_ONLY, VPSN, junk,
			op[i] == SV_OP_READ_RESP ? RD_LEN : 16,
			op[i] == SV_OP_READ_RESP ? RD_LEN : 8);
		ASSERT_OK(sv_end_send(&H.v, 6, 0, 64, 0));
		rsp_fatal(&H, 6, 0);
		hr_close(&H);
	}
}

SV_TEST(hostile_rdma_read_resp_too_long)
{
	struct hr H;
	uint32_t psn;

	hr_setup(&H, REMOTE_ALL, 0, false);
	psn = victim_reads(&H);
	put_rsp(&H, SV_OP_READ_RESP, SV_SEG_ONLY, psn, junk, RD_LEN + 64,
		RD_LEN + 64);
	rsp_fatal(&H, 5, 0);
	hr_close(&H);
}

/* A first train inside the read, then a last one past its end: the
 * first half lands, nothing else. */
SV_TEST(hostile_rdma_read_resp_overrun_in_second_train)
{
	struct hr H;
	uint32_t psn;

	hr_setup(&H, REMOTE_ALL, 0, false);
	psn = victim_reads(&H);
	put_rsp(&H, SV_OP_READ_RESP, SV_SEG_FIRST, psn, junk, RD_LEN / 2,
		RD_LEN);
	put_rsp(&H, SV_OP_READ_RESP, SV_SEG_LAST, psn, junk, RD_LEN, RD_LEN);
	rsp_fatal(&H, 5, RD_LEN / 2);
	hr_close(&H);
}

SV_TEST(hostile_rdma_read_resp_psn_outside)
{
	static const int32_t d[] = {1, -1, 0x800000};
	struct hr H;
	uint32_t psn;

	for (int i = 0; i < 3; i++) {
		hr_setup(&H, REMOTE_ALL, 0, false);
		psn = victim_reads(&H);
		put_rsp(&H, SV_OP_READ_RESP, SV_SEG_ONLY,
			sv_psn_add(psn, (uint32_t)d[i]), junk, RD_LEN, RD_LEN);
		rsp_fatal(&H, 5, 0);
		hr_close(&H);
	}
}

/* A request opcode, and an atomic's answer to a read, on the response
 * ring. */
SV_TEST(hostile_rdma_resp_wrong_opcode)
{
	static const uint8_t op[] = {SV_OP_SEND, SV_OP_ATOMIC_RESP, SV_OP_WRITE,
				     0x42};
	struct hr H;
	uint32_t psn;

	for (int i = 0; i < 4; i++) {
		hr_setup(&H, REMOTE_ALL, 0, false);
		psn = victim_reads(&H);
		put_rsp(&H, op[i], SV_SEG_ONLY, psn, junk, RD_LEN, RD_LEN);
		rsp_fatal(&H, 5, 0);
		hr_close(&H);
	}
}

/* --- (3) forged receive descriptors ------------------------------------- */

#define SLEN 4096u /* the victim's sends: single copy from 1 KiB */

struct rdesc_case {
	const char *what;
	uint32_t seq_delta; /* seq = i + 1 + this */
	uint32_t nsge, length;
	struct {
		uint64_t off, len;
	} sge[SV_RDESC_SGE];
	bool placed; /* expected: in our arena, or on the ring */
};

static const struct rdesc_case rdesc_cases[] = {
	{"control: one piece in the arena", 0, 1, SLEN, {{8192, SLEN}}, true},
	{"control: three pieces",
	 0,
	 3,
	 SLEN,
	 {{0, 1000}, {65536, 96}, {ARENA - 3000, 3000}},
	 true},
	{"piece longer than the message",
	 0,
	 1,
	 SLEN,
	 {{4096, UINT64_MAX}},
	 true},
	{"offset at the arena's end", 0, 1, SLEN, {{ARENA, SLEN}}, false},
	{"piece crosses the arena's end",
	 0,
	 1,
	 SLEN,
	 {{ARENA - 100, SLEN}},
	 false},
	{"offset + length wraps",
	 0,
	 1,
	 SLEN,
	 {{UINT64_MAX - 100, SLEN}},
	 false},
	{"huge offset", 0, 1, SLEN, {{1ull << 62, SLEN}}, false},
	{"second piece outside", 0, 2, SLEN, {{0, 1000}, {ARENA, SLEN}}, false},
	{"pieces shorter than length",
	 0,
	 2,
	 SLEN,
	 {{0, 1000}, {4096, 1000}},
	 false},
	{"length below the message", 0, 1, 100, {{0, SLEN}}, false},
	{"nsge huge", 0, 1000, SLEN, {{0, SLEN}}, false},
	{"nsge 8", 0, SV_RDESC_SGE + 1, SLEN, {{0, SLEN}}, false},
	{"nsge 0", 0, 0, SLEN, {{0, SLEN}}, false},
	{"stale seq", 16, 1, SLEN, {{0, SLEN}}, false},
	{"control again", 0, 1, SLEN, {{ARENA - SLEN, SLEN}}, true},
};

/* Our arena: what case c may have placed (its pieces inside the arena,
 * as the victim clips them to the message) is the message or zero;
 * everything else zero.  Zeroes it again. */
static void arena_check(struct hr *H, const struct rdesc_case *c,
			const uint8_t *msg, bool placed)
{
	uint64_t done = 0;
	uint32_t n = c->nsge < SV_RDESC_SGE ? c->nsge : SV_RDESC_SGE;

	for (uint32_t k = 0; k < n && done < SLEN; k++) {
		uint64_t off = c->sge[k].off, len = c->sge[k].len;

		if (len > SLEN - done)
			len = SLEN - done;
		if (off > ARENA || len > ARENA - off)
			break;
		for (uint64_t i = 0; i < len; i++) {
			uint8_t b = H->arena[off + i];

			if (placed ? b != msg[done + i]
				   : b && b != msg[done + i])
				sv_test_fail(__FILE__, __LINE__,
					     "%s: arena byte %llu", c->what,
					     (unsigned long long)(off + i));
		}
		memset(H->arena + off, 0, len);
		done += len;
	}
	for (uint32_t i = 0; i < ARENA; i++)
		if (H->arena[i])
			sv_test_fail(__FILE__, __LINE__,
				     "%s: arena byte %u written", c->what, i);
}

/*
 * We are the receiver and describe our receive buffers to the victim's
 * sends ourselves (ring.h: struct sv_rdesc), as we please: the victim
 * places a send only inside the arena we handed it, else sends it on
 * the ring, whole and right; never a crash, never its own memory.
 */
SV_TEST(hostile_rdma_forged_rdesc)
{
	static uint8_t payload[SV_MAX_REC];
	struct hr H;
	uint32_t n = sizeof(rdesc_cases) / sizeof(rdesc_cases[0]);

	unsetenv("SOFTVERBS_SINGLE_COPY");
	unsetenv("SOFTVERBS_SINGLE_COPY_MIN");
	/* placed although cold (req.c place_pays) */
	setenv("SOFTVERBS_SINGLE_COPY_COLD", "0", 1);
	hr_setup(&H, REMOTE_ALL, NDESC, true);
	for (uint32_t i = 0; i < n; i++) {
		const struct rdesc_case *c = &rdesc_cases[i];
		struct sv_rdesc *d = &H.req.desc[i & (NDESC - 1)];
		const uint8_t *msg = H.v.buf + (i % 8) * SLEN;
		struct sv_pkt p;

		d->nsge = c->nsge;
		d->length = c->length;
		memcpy(d->sge, c->sge, sizeof(d->sge));
		atomic_store(&d->seq, i + 1 + c->seq_delta);
		ASSERT_OK(sv_end_send(&H.v, 100 + i, (i % 8) * SLEN, SLEN, 0));
		p = next_rec(&H, &H.req, payload, sizeof(payload));
		if (p.opcode != SV_OP_SEND ||
		    !!(p.flags & SV_PKT_PLACED) != c->placed)
			sv_test_fail(__FILE__, __LINE__,
				     "%s: opcode %u flags %#x", c->what,
				     p.opcode, p.flags);
		ASSERT_EQ(SLEN, p.msg_len);
		ASSERT_EQ(c->placed ? 0 : SLEN, p.len);
		if (!c->placed && memcmp(payload, msg, SLEN))
			sv_test_fail(__FILE__, __LINE__,
				     "%s: the ring's payload differs", c->what);
		arena_check(&H, c, msg, c->placed);
		ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&H.v));
		UNTOUCHED(&H);
	}
	hr_close(&H);
}

/* --- (4) a forged placed send ------------------------------------------- */

#define RB 256 /* the victim's receive: v.buf[RB, 2 * RB) */

static void forge_placed(struct hr *H, uint32_t msg_len, uint32_t len)
{
	struct sv_pkt p = {.opcode = SV_OP_SEND,
			   .seg = SV_SEG_ONLY,
			   .flags = SV_PKT_PLACED,
			   .psn = RPSN,
			   .npsn = npsn_of(msg_len),
			   .len = len,
			   .msg_len = msg_len};

	put_req(H, p, NULL, 0, junk, len);
}

/* Control: a placed send the receive holds completes with no copy. */
SV_TEST(hostile_rdma_placed_send_control)
{
	struct ibv_wc *wc;
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	ASSERT_OK(sv_end_recv(&H.v, 77, RB, RB));
	forge_placed(&H, RB, 0);
	wc = wc_of(&H, 77);
	ASSERT_EQ(IBV_WC_SUCCESS, wc->status);
	ASSERT_EQ(RB, wc->byte_len);
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&H.v));
	UNTOUCHED(&H);
	hr_close(&H);
}

SV_TEST(hostile_rdma_placed_send_too_long)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	ASSERT_OK(sv_end_recv(&H.v, 77, RB, RB));
	forge_placed(&H, 4096, 0);
	ASSERT_EQ(IBV_WC_LOC_LEN_ERR, wc_of(&H, 77)->status);
	refused(&H, SV_NAK_INV_REQ);
	hr_close(&H);
}

/* A placed send that also carries payload, or is not ONLY. */
SV_TEST(hostile_rdma_placed_send_malformed)
{
	struct hr H;

	hr_setup(&H, REMOTE_ALL, 0, false);
	ASSERT_OK(sv_end_recv(&H.v, 77, RB, RB));
	forge_placed(&H, 64, 64);
	refused(&H, SV_NAK_INV_REQ);
	hr_close(&H);
}
