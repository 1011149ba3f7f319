// SPDX-License-Identifier: MIT
/*
 * Memory regions registered with ibv_reg_mr_iova/iova2 are addressed by
 * their iova, never by where the bytes are in the process: locally (send
 * gather, receive scatter, read and atomic results) and remotely (the
 * remote_addr of writes, reads and atomics).  The iovas here are far from
 * any mapping, so treating one as a pointer cannot pass by luck.
 */
#include "pair.h"

#define IOVA_A 0x3000000000000ull /* not a user address on x86-64 */
#define IOVA_B 0x5000000000000ull
#define LEN    65536
#define OFF    4096 /* the MRs start one page into each end's buffer */

#define REMOTE                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

struct iova_pair {
	struct sv_pair p;
	struct ibv_mr *ma, *mb; /* iova MRs over a.buf+OFF, b.buf+OFF */
};

static void allow_remote(struct sv_end *e)
{
	struct ibv_qp_attr attr = {.qp_access_flags = REMOTE};

	ASSERT_OK(ibv_modify_qp(e->qp, &attr, IBV_QP_ACCESS_FLAGS));
}

static void iova_open(struct iova_pair *ip)
{
	struct sv_end_opts o = sv_end_opts_default();

	o.buf_len = 4 * LEN;
	sv_pair_open(&ip->p, &o, &o);
	allow_remote(&ip->p.a);
	allow_remote(&ip->p.b);
	ip->ma = ibv_reg_mr_iova(ip->p.a.pd, ip->p.a.buf + OFF, LEN, IOVA_A,
				 REMOTE);
	ASSERT_NOT_NULL(ip->ma);
	ip->mb = ibv_reg_mr_iova2(ip->p.b.pd, ip->p.b.buf + OFF, LEN, IOVA_B,
				  REMOTE);
	ASSERT_NOT_NULL(ip->mb);
}

static void iova_close(struct iova_pair *ip)
{
	ASSERT_OK(ibv_dereg_mr(ip->ma));
	ASSERT_OK(ibv_dereg_mr(ip->mb));
	sv_pair_close(&ip->p);
}

static int post(struct sv_end *e, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;

	wr->send_flags |= IBV_SEND_SIGNALED;
	return ibv_post_send(e->qp, wr, &bad);
}

SV_TEST(iova_send_and_receive)
{
	struct iova_pair ip;
	struct ibv_sge ss = {.addr = IOVA_A + 100, .length = 3000};
	struct ibv_sge rs = {.addr = IOVA_B + 5000, .length = 4000};
	struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &rs, .num_sge = 1};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &ss,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND};
	struct ibv_recv_wr *rbad;
	struct ibv_wc wc;

	iova_open(&ip);
	ss.lkey = ip.ma->lkey;
	rs.lkey = ip.mb->lkey;
	sv_fill(ip.p.a.buf + OFF + 100, 3000, 7);
	ASSERT_OK(ibv_post_recv(ip.p.b.qp, &rwr, &rbad));
	ASSERT_OK(post(&ip.p.a, &wr));
	EXPECT_WC(ip.p.a.scq, IBV_WC_SUCCESS, 1);
	WAIT_WC(ip.p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(3000, wc.byte_len);
	ASSERT_EQ(-1, sv_check(ip.p.b.buf + OFF + 5000, 3000, 7));
	iova_close(&ip);
}

SV_TEST(iova_one_sided)
{
	struct iova_pair ip;
	struct ibv_sge sg = {.addr = IOVA_A + 256, .length = 2000};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sg, .num_sge = 1};
	uint64_t v = 40, got;

	iova_open(&ip);
	sg.lkey = ip.ma->lkey;
	/* write: a's iova 256.. to b's iova 1000.. */
	sv_fill(ip.p.a.buf + OFF + 256, 2000, 3);
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = IOVA_B + 1000;
	wr.wr.rdma.rkey = ip.mb->rkey;
	ASSERT_OK(post(&ip.p.a, &wr));
	EXPECT_WC(ip.p.a.scq, IBV_WC_SUCCESS, 1);
	ASSERT_EQ(-1, sv_check(ip.p.b.buf + OFF + 1000, 2000, 3));
	/* read it back into a's iova 20000.. */
	sg.addr = IOVA_A + 20000;
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_READ;
	ASSERT_OK(post(&ip.p.a, &wr));
	EXPECT_WC(ip.p.a.scq, IBV_WC_SUCCESS, 2);
	ASSERT_EQ(-1, sv_check(ip.p.a.buf + OFF + 20000, 2000, 3));
	/* fetch-and-add at b's iova 64, the old value to a's iova 8 */
	memcpy(ip.p.b.buf + OFF + 64, &v, 8);
	sg.addr = IOVA_A + 8;
	sg.length = 8;
	wr.wr_id = 3;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = IOVA_B + 64;
	wr.wr.atomic.rkey = ip.mb->rkey;
	wr.wr.atomic.compare_add = 2;
	ASSERT_OK(post(&ip.p.a, &wr));
	EXPECT_WC(ip.p.a.scq, IBV_WC_SUCCESS, 3);
	memcpy(&got, ip.p.a.buf + OFF + 8, 8);
	ASSERT_EQ(40, got);
	memcpy(&got, ip.p.b.buf + OFF + 64, 8);
	ASSERT_EQ(42, got);
	iova_close(&ip);
}

/* The bytes' own address is not an address of an iova MR. */
SV_TEST(iova_pointer_is_not_an_address)
{
	struct iova_pair ip;
	struct ibv_sge sg = {.length = 64};
	struct ibv_send_wr wr = {.wr_id = 9,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE};

	iova_open(&ip);
	sg.addr = (uintptr_t)ip.p.a.buf + OFF;
	sg.lkey = ip.ma->lkey;
	wr.wr.rdma.remote_addr = IOVA_B;
	wr.wr.rdma.rkey = ip.mb->rkey;
	ASSERT_OK(post(&ip.p.a, &wr));
	EXPECT_WC(ip.p.a.scq, IBV_WC_LOC_PROT_ERR, 9);
	iova_close(&ip);
}

/* ... nor remotely: the target's pointer with its rkey is out of bounds. */
SV_TEST(iova_remote_pointer_is_not_an_address)
{
	struct iova_pair ip;
	struct ibv_sge sg = {.addr = IOVA_A, .length = 64};
	struct ibv_send_wr wr = {.wr_id = 10,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE};

	iova_open(&ip);
	sg.lkey = ip.ma->lkey;
	memset(ip.p.b.buf, 0x5a, 4 * LEN);
	wr.wr.rdma.remote_addr = (uintptr_t)ip.p.b.buf + OFF;
	wr.wr.rdma.rkey = ip.mb->rkey;
	ASSERT_OK(post(&ip.p.a, &wr));
	EXPECT_WC(ip.p.a.scq, IBV_WC_REM_ACCESS_ERR, 10);
	for (size_t i = 0; i < 4 * LEN; i++)
		ASSERT_EQ(0x5a, ip.p.b.buf[i]);
	iova_close(&ip);
}
