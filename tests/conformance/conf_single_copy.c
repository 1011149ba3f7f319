// SPDX-License-Identifier: MIT
/*
 * Single-copy send/receive: a send of at least 1 KiB whose receive buffer
 * lies in the receiver's shared memory is placed there by the sender
 * (req.c try_place); only its header goes through the ring.  Checked: it
 * really is placed (the bytes are in the receive buffer before the
 * receiver has run any verb), every byte, multi-SGE receives, the cases
 * that must take the ring's way (too many pieces, memory that cannot be
 * shared, a receive too small, small sends, SOFTVERBS_SINGLE_COPY=0),
 * receives posted before the connection, immediates and interleaving
 * with ring sends, and which sends up to 8 KiB are placed: into a warm
 * buffer or for a busy receiver, not into a cold one for an idle one.
 */
#include <arpa/inet.h>
#include <sys/mman.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#include "objects.h"
#include "pair.h"

#define BUF (1 << 20)

static void sc_pair(struct sv_pair *p)
{
	struct sv_end_opts o = sv_end_opts_default();

	o.buf_len = BUF;
	o.max_recv_wr = 64;
	o.max_send_wr = 64;
	o.max_recv_sge = 16;
	o.max_send_sge = 16;
	o.cqe = 256;
	sv_pair_open(p, &o, &o);
}

static int post_recv_list(struct sv_end *e, uint64_t wr_id, struct ibv_sge *sg,
			  int n)
{
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = sg, .num_sge = n};
	struct ibv_recv_wr *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

static void expect_recv(struct sv_end *e, uint64_t wr_id, uint32_t len)
{
	struct ibv_wc wc;

	WAIT_WC(e->rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(wr_id, wc.wr_id);
	ASSERT_EQ(IBV_WC_RECV, wc.opcode);
	ASSERT_EQ(len, wc.byte_len);
}

/* Posting the send puts the bytes in b's buffer at once: b has run no
 * verb since posting the receive, so no one but the sender copied. */
SV_TEST(single_copy_is_placed_by_the_sender)
{
	sv_test_needs_shm("single-copy sends");
	struct sv_pair p;

	sc_pair(&p);
	/* one message first: the link is up (connecting is asynchronous) */
	ASSERT_OK(sv_end_recv(&p.b, 9, 0, 64));
	ASSERT_OK(sv_end_send(&p.a, 8, 0, 64, 0));
	expect_recv(&p.b, 9, 64);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 8);
	memset(p.b.buf, 0, BUF);
	ASSERT_OK(sv_end_recv(&p.b, 1, 4096, 65536));
	sv_fill(p.a.buf, 65536, 3);
	ASSERT_OK(sv_end_send(&p.a, 2, 0, 65536, 0));
	ASSERT_EQ(-1, sv_check(p.b.buf + 4096, 65536, 3));
	expect_recv(&p.b, 1, 65536);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	ASSERT_EQ(0, p.b.buf[4095]);
	ASSERT_EQ(0, p.b.buf[4096 + 65536]);
	sv_pair_close(&p);
}

/* Sizes around the threshold and the MTU, into multi-SGE receives of
 * up to 7 pieces (placed) and 9 pieces (the ring's way). */
SV_TEST(single_copy_sizes_and_pieces)
{
	static const uint32_t sizes[] = {1023, 1024,  1025,  4095,
					 4097, 65537, 300000};
	struct sv_pair p;

	sc_pair(&p);
	for (int pieces = 1; pieces <= 9; pieces += 2) {
		for (size_t k = 0; k < ARRAY_SIZE(sizes); k++) {
			uint32_t len = sizes[k], each = len / pieces + 1;
			struct ibv_sge sg[16];
			uint32_t seed = (uint32_t)(pieces * 100 + k);
			size_t off = 0;

			memset(p.b.buf, 0xee, BUF);
			for (int i = 0; i < pieces; i++) {
				sg[i].addr = (uintptr_t)p.b.buf + off;
				sg[i].length = each;
				sg[i].lkey = p.b.mr->lkey;
				off += each + 64; /* gaps stay untouched */
			}
			ASSERT_OK(post_recv_list(&p.b, seed, sg, pieces));
			sv_fill(p.a.buf, len, seed);
			ASSERT_OK(sv_end_send(&p.a, seed, 0, len, 0));
			expect_recv(&p.b, seed, len);
			EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, seed);
			/* gather the pieces back and check */
			for (uint32_t i = 0, done = 0; done < len; i++) {
				uint32_t n =
					len - done < each ? len - done : each;
				uint8_t *at = (uint8_t *)(uintptr_t)sg[i].addr;

				for (uint32_t j = 0; j < n; j++)
					ASSERT_EQ(p.a.buf[done + j], at[j]);
				ASSERT_EQ(0xee, at[each + 1]);
				done += n;
			}
		}
	}
	sv_pair_close(&p);
}

/* A receive buffer that cannot be shared (a MAP_SHARED mapping): the
 * ring's way, same result. */
SV_TEST(single_copy_unshareable_buffer_uses_ring)
{
	uint8_t *m = mmap(NULL, 65536, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct ibv_sge sg = {.addr = (uintptr_t)m, .length = 65536};
	struct ibv_mr *mr;
	struct sv_pair p;

	ASSERT_TRUE(m != MAP_FAILED);
	sc_pair(&p);
	mr = ibv_reg_mr(p.b.pd, m, 65536, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	sg.lkey = mr->lkey;
	ASSERT_OK(post_recv_list(&p.b, 1, &sg, 1));
	sv_fill(p.a.buf, 50000, 9);
	ASSERT_OK(sv_end_send(&p.a, 2, 0, 50000, 0));
	expect_recv(&p.b, 1, 50000);
	ASSERT_EQ(-1, sv_check(m, 50000, 9));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	ASSERT_OK(ibv_dereg_mr(mr));
	sv_pair_close(&p);
	ASSERT_OK(munmap(m, 65536));
}

/* A receive too small is the responder's to refuse, as without single
 * copy: LOC_LEN_ERR there, REM_INV_REQ_ERR here, nothing written past
 * the receive. */
SV_TEST(single_copy_receive_too_small)
{
	struct sv_pair p;

	sc_pair(&p);
	memset(p.b.buf, 0xee, BUF);
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 4096));
	ASSERT_OK(sv_end_send(&p.a, 2, 0, 8192, 0));
	EXPECT_WC(p.b.rcq, IBV_WC_LOC_LEN_ERR, 1);
	EXPECT_WC(p.a.scq, IBV_WC_REM_INV_REQ_ERR, 2);
	for (size_t i = 4096; i < BUF; i++)
		ASSERT_EQ(0xee, p.b.buf[i]);
	sv_pair_close(&p);
}

/* Receives posted in INIT are described once the link exists; placed,
 * ring and small sends interleave in order, immediates included. */
SV_TEST(single_copy_posted_before_connect_and_mixed)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sg;
	struct sv_end a, b;
	struct ibv_wc wc;
	static const uint32_t lens[] = {8, 5000, 100, 70000, 1024, 0, 4096};

	o.buf_len = BUF;
	o.max_recv_wr = 16;
	o.cqe = 64;
	sv_end_open(&a, &o);
	o.psn = 0x777;
	sv_end_open(&b, &o);
	ASSERT_OK(sv_end_to_init(&b));
	for (uint32_t i = 0; i < ARRAY_SIZE(lens); i++)
		ASSERT_OK(sv_end_recv(&b, 100 + i, (size_t)i * 100000, 80000));
	sv_end_connect(&b, a.qp->qp_num, a.o.psn);
	sv_end_connect(&a, b.qp->qp_num, b.o.psn);
	for (uint32_t i = 0; i < ARRAY_SIZE(lens); i++) {
		sv_fill(a.buf + (size_t)i * 100000, lens[i], i + 1);
		sg = (struct ibv_sge){.addr = (uintptr_t)a.buf + i * 100000,
				      .length = lens[i],
				      .lkey = a.mr->lkey};
		wr = (struct ibv_send_wr){.wr_id = i,
					  .sg_list = &sg,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND_WITH_IMM,
					  .send_flags = IBV_SEND_SIGNALED,
					  .imm_data = htonl(0xabc0 + i)};
		ASSERT_OK(ibv_post_send(a.qp, &wr, &bad));
	}
	for (uint32_t i = 0; i < ARRAY_SIZE(lens); i++) {
		WAIT_WC(b.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(100 + i, wc.wr_id);
		ASSERT_EQ(lens[i], wc.byte_len);
		ASSERT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
		ASSERT_EQ(htonl(0xabc0 + i), wc.imm_data);
		ASSERT_EQ(-1,
			  sv_check(b.buf + (size_t)i * 100000, lens[i], i + 1));
		EXPECT_WC(a.scq, IBV_WC_SUCCESS, i);
	}
	sv_end_close(&a);
	sv_end_close(&b);
}

/* SOFTVERBS_SINGLE_COPY=0: receive buffers stay private, sends go
 * through the ring (nothing in b's buffer until b's engine runs: the
 * send is seen only once b polls). */
SV_TEST(single_copy_off)
{
	struct sv_pair p;

	setenv("SOFTVERBS_SINGLE_COPY", "0", 1); /* read at first use */
	sc_pair(&p);
	memset(p.b.buf, 0, BUF);
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 65536));
	sv_fill(p.a.buf, 65536, 4);
	ASSERT_OK(sv_end_send(&p.a, 2, 0, 65536, 0));
	expect_recv(&p.b, 1, 65536);
	ASSERT_EQ(-1, sv_check(p.b.buf, 65536, 4));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	sv_pair_close(&p);
}

/* An inline send at the single-copy size into a receive of several
 * pieces: every byte where it belongs. */
SV_TEST(single_copy_inline_into_pieces)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_sge rs[3], ss;
	struct ibv_send_wr wr, *bad;
	struct sv_pair p;
	uint8_t data[1024];

	o.buf_len = BUF;
	o.max_recv_sge = 4;
	o.max_inline = 1024;
	sv_pair_open(&p, &o, &o);
	for (int i = 0; i < 3; i++)
		rs[i] = (struct ibv_sge){.addr = (uintptr_t)p.b.buf + i * 8192,
					 .length = 400,
					 .lkey = p.b.mr->lkey};
	ASSERT_OK(post_recv_list(&p.b, 1, rs, 3));
	sv_fill(data, sizeof(data), 5);
	ss = (struct ibv_sge){.addr = (uintptr_t)data, .length = 1024};
	wr = (struct ibv_send_wr){.wr_id = 2,
				  .sg_list = &ss,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags =
					  IBV_SEND_INLINE | IBV_SEND_SIGNALED};
	ASSERT_OK(ibv_post_send(p.a.qp, &wr, &bad));
	expect_recv(&p.b, 1, 1024);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	ASSERT_EQ(0, memcmp(p.b.buf, data, 400));
	ASSERT_EQ(0, memcmp(p.b.buf + 8192, data + 400, 400));
	ASSERT_EQ(0, memcmp(p.b.buf + 16384, data + 800, 224));
	sv_pair_close(&p);
}

static uint64_t stat_of(struct sv_end *e, size_t off)
{
	const uint8_t *s = (const uint8_t *)&to_sqp(e->qp)->stats;

	return __atomic_load_n((const uint64_t *)(s + off), __ATOMIC_RELAXED);
}
#define PLACED(e) stat_of(e, offsetof(struct sv_qp_stats, placed_sends))
#define COLD(e)	  stat_of(e, offsetof(struct sv_qp_stats, cold_sends))
#define WARMED(e) stat_of(e, offsetof(struct sv_qp_stats, warmed_recvs))

/* One 4 KiB send into the receive at off, waited for, bytes checked. */
static void one_4k(struct sv_pair *p, size_t off, uint32_t seed)
{
	ASSERT_OK(sv_end_recv(&p->b, seed, off, 4096));
	sv_fill(p->a.buf, 4096, seed);
	ASSERT_OK(sv_end_send(&p->a, seed, 0, 4096, 0));
	expect_recv(&p->b, seed, 4096);
	EXPECT_WC(p->a.scq, IBV_WC_SUCCESS, seed);
	ASSERT_EQ(-1, sv_check(p->b.buf + off, 4096, seed));
}

/*
 * req.c place_pays: a send of at most 8 KiB into a buffer the receiver
 * has not shown us lately (cold), with the receiver idle (nothing queued
 * behind it, the ring consumed), goes the ring's way; into one of the
 * last 8 buffers (warm), or with sends queued behind it, or larger, it
 * is placed.  Counted per QP (placed_sends, cold_sends).
 */
SV_TEST(single_copy_cold_buffer_idle_receiver_uses_ring)
{
	sv_test_needs_shm("single-copy sends");
	struct ibv_send_wr wr[16], *bad;
	struct ibv_sge sg[16];
	struct sv_pair p;
	uint64_t placed, cold;

	sc_pair(&p);
	ASSERT_OK(sv_end_recv(&p.b, 9, 0, 64)); /* the link is up */
	ASSERT_OK(sv_end_send(&p.a, 9, 0, 64, 0));
	expect_recv(&p.b, 9, 64);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 9);
	placed = PLACED(&p.a);
	cold = COLD(&p.a);
	/* 16 buffers, each new: cold; one at a time: the receiver idle */
	for (uint32_t i = 0; i < 16; i++)
		one_4k(&p, 16384 + (size_t)i * 8192, 100 + i);
	ASSERT_EQ(cold + 16, COLD(&p.a));
	ASSERT_EQ(placed, PLACED(&p.a));
	/* the last one again, warm: placed while b runs no verb */
	for (uint32_t i = 0; i < 4; i++) {
		size_t off = 16384 + 15 * 8192;

		memset(p.b.buf + off, 0, 4096);
		ASSERT_OK(sv_end_recv(&p.b, 200 + i, off, 4096));
		sv_fill(p.a.buf, 4096, 200 + i);
		ASSERT_OK(sv_end_send(&p.a, 200 + i, 0, 4096, 0));
		ASSERT_EQ(-1, sv_check(p.b.buf + off, 4096, 200 + i));
		expect_recv(&p.b, 200 + i, 4096);
		EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 200 + i);
	}
	ASSERT_EQ(placed + 4, PLACED(&p.a));
	ASSERT_EQ(cold + 16, COLD(&p.a));
	/* 16 new buffers, 16 sends posted at once: all but the last have
	 * sends behind them */
	for (uint32_t i = 0; i < 16; i++) {
		ASSERT_OK(sv_end_recv(&p.b, 300 + i, 300000 + (size_t)i * 8192,
				      4096));
		sv_fill(p.a.buf + (size_t)i * 4096, 4096, 300 + i);
		sg[i] = (struct ibv_sge){.addr = (uintptr_t)p.a.buf + i * 4096,
					 .length = 4096,
					 .lkey = p.a.mr->lkey};
		wr[i] = (struct ibv_send_wr){.wr_id = 300 + i,
					     .sg_list = &sg[i],
					     .num_sge = 1,
					     .opcode = IBV_WR_SEND,
					     .next = i < 15 ? &wr[i + 1]
							    : NULL};
	}
	ASSERT_OK(ibv_post_send(p.a.qp, wr, &bad));
	for (uint32_t i = 0; i < 16; i++) {
		expect_recv(&p.b, 300 + i, 4096);
		EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 300 + i);
		ASSERT_EQ(-1, sv_check(p.b.buf + 300000 + (size_t)i * 8192,
				       4096, 300 + i));
	}
	ASSERT_TRUE(PLACED(&p.a) >= placed + 4 + 15);
	ASSERT_TRUE(COLD(&p.a) <= cold + 17);
	/* larger than 8 KiB: placed into a new buffer all the same */
	placed = PLACED(&p.a);
	cold = COLD(&p.a);
	ASSERT_OK(sv_end_recv(&p.b, 400, 600000, 16384));
	sv_fill(p.a.buf, 16384, 400);
	ASSERT_OK(sv_end_send(&p.a, 400, 0, 16384, 0));
	expect_recv(&p.b, 400, 16384);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 400);
	ASSERT_EQ(-1, sv_check(p.b.buf + 600000, 16384, 400));
	ASSERT_EQ(placed + 1, PLACED(&p.a));
	ASSERT_EQ(cold, COLD(&p.a));
	sv_pair_close(&p);
}

/* Polls e's receive CQ, expecting nothing, until its warmed_recvs
 * reaches want (the harness's deadline bounds it); the count then. */
static uint64_t idle_until_warmed(struct sv_end *e, uint64_t want)
{
	struct ibv_wc wc;

	while (WARMED(e) < want)
		ASSERT_EQ(0, ibv_poll_cq(e->rcq, 1, &wc));
	return WARMED(e);
}

/*
 * resp.c warm_next: while the receiver polls with nothing arriving, it
 * reads the buffer of its next receive ahead (as long as the last
 * message, at most 8 KiB), once per receive; after a larger message, or
 * one the sender placed, it does not.
 */
SV_TEST(single_copy_idle_receiver_reads_next_buffer_ahead)
{
	sv_test_needs_shm("single-copy sends");
	struct ibv_wc wc;
	struct sv_pair p;
	uint64_t w, placed;

	sc_pair(&p);
	ASSERT_OK(sv_end_recv(&p.b, 9, 0, 64)); /* the link is up */
	ASSERT_OK(sv_end_send(&p.a, 9, 0, 64, 0));
	expect_recv(&p.b, 9, 64);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 9);
	one_4k(&p, 16384, 100);
	w = WARMED(&p.b);
	/* idle with no receive posted: nothing to read */
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(0, ibv_poll_cq(p.b.rcq, 1, &wc));
	ASSERT_EQ(w, WARMED(&p.b));
	/* the next receive, posted: idle polls read it ahead, once */
	ASSERT_OK(sv_end_recv(&p.b, 101, 65536, 8192));
	ASSERT_EQ(w + 1, idle_until_warmed(&p.b, w + 1));
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(0, ibv_poll_cq(p.b.rcq, 1, &wc));
	ASSERT_EQ(w + 1, WARMED(&p.b));
	sv_fill(p.a.buf, 4096, 101);
	ASSERT_OK(sv_end_send(&p.a, 101, 0, 4096, 0));
	expect_recv(&p.b, 101, 4096);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 101);
	ASSERT_EQ(-1, sv_check(p.b.buf + 65536, 4096, 101));
	/* the same buffer again: warm, the sender places into it; then
	 * nothing is read ahead (it writes the next one itself) */
	ASSERT_OK(sv_end_recv(&p.b, 104, 65536, 8192));
	placed = PLACED(&p.a);
	sv_fill(p.a.buf, 4096, 104);
	ASSERT_OK(sv_end_send(&p.a, 104, 0, 4096, 0));
	expect_recv(&p.b, 104, 4096);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 104);
	ASSERT_EQ(placed + 1, PLACED(&p.a));
	w = WARMED(&p.b);
	ASSERT_OK(sv_end_recv(&p.b, 105, 65536, 8192));
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(0, ibv_poll_cq(p.b.rcq, 1, &wc));
	ASSERT_EQ(w, WARMED(&p.b));
	sv_fill(p.a.buf, 4096, 105);
	ASSERT_OK(sv_end_send(&p.a, 105, 0, 4096, 0));
	expect_recv(&p.b, 105, 4096);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 105);
	/* after 16 KiB: nothing read ahead */
	ASSERT_OK(sv_end_recv(&p.b, 102, 131072, 16384));
	sv_fill(p.a.buf, 16384, 102);
	ASSERT_OK(sv_end_send(&p.a, 102, 0, 16384, 0));
	expect_recv(&p.b, 102, 16384);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 102);
	w = WARMED(&p.b);
	ASSERT_OK(sv_end_recv(&p.b, 103, 196608, 16384));
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(0, ibv_poll_cq(p.b.rcq, 1, &wc));
	ASSERT_EQ(w, WARMED(&p.b));
	sv_pair_close(&p);
}
