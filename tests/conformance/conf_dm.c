// SPDX-License-Identifier: MIT
/*
 * Device memory (issue 28 item 4): ibv_alloc_dm, ibv_free_dm,
 * ibv_memcpy_to_dm / ibv_memcpy_from_dm and ibv_reg_dm_mr, every error
 * as rdma-core, mlx5 and the kernel give it, and RDMA into and out of a
 * DM: sends from it, receives into it (small ones through the ring, large
 * ones placed by the sender), writes, reads and atomics on it.  An MR on
 * a DM is zero-based: its iova 0 is byte dm_offset of the DM, so the
 * tests give every MR a dm_offset and check the bytes where they land.
 */
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "objects.h"
#include "pair.h"

#define MAX_DM (256u << 10) /* max_dm_size */
#define DM_LEN (128u << 10)
#define DM_OFF 4096u /* where the MRs start in their DM */
#define MR_LEN (64u << 10)

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

#define REMOTE                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_dm *alloc_dm(struct ibv_context *ctx, uint64_t len)
{
	struct ibv_alloc_dm_attr attr = {.length = len};

	return ibv_alloc_dm(ctx, &attr);
}

/* Allocation fails with errno err. */
static void alloc_fails(struct ibv_context *ctx, struct ibv_alloc_dm_attr a,
			int err)
{
	errno = 0;
	ASSERT_NULL(ibv_alloc_dm(ctx, &a));
	ASSERT_EQ(err, errno);
}

static void reg_fails(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t off,
		      size_t len, unsigned int access, int err)
{
	errno = 0;
	ASSERT_NULL(ibv_reg_dm_mr(pd, dm, off, len, access));
	ASSERT_EQ(err, errno);
}

SV_TEST(dm_caps_alloc_free)
{
	struct ibv_device_attr_ex ax;
	struct sv_end e = {0};
	struct ibv_dm *dm;

	sv_end_open_ctx(&e);
	ASSERT_OK(ibv_query_device_ex(e.ctx, NULL, &ax));
	ASSERT_EQ(MAX_DM, ax.max_dm_size);
	dm = alloc_dm(e.ctx, 4096);
	ASSERT_NOT_NULL(dm);
	ASSERT_TRUE(dm->context == e.ctx);
	ASSERT_NOT_NULL(dm->memcpy_to_dm);
	ASSERT_NOT_NULL(dm->memcpy_from_dm);
	ASSERT_EQ(0, dm->comp_mask);
	ASSERT_OK(ibv_free_dm(dm));
	/* the whole of max_dm_size, at any length and alignment it allows */
	dm = alloc_dm(e.ctx, MAX_DM);
	ASSERT_NOT_NULL(dm);
	ASSERT_OK(ibv_free_dm(dm));
	dm = ibv_alloc_dm(e.ctx, &(struct ibv_alloc_dm_attr){
					 .length = 3, .log_align_req = 12});
	ASSERT_NOT_NULL(dm);
	ASSERT_OK(ibv_free_dm(dm));
	sv_end_close(&e);
}

SV_TEST(dm_alloc_errors)
{
	struct sv_end e = {0};
	struct ibv_dm *d1, *d2;

	sv_end_open_ctx(&e);
	errno = 0;
	ASSERT_NULL(ibv_alloc_dm(e.ctx, NULL));
	ASSERT_EQ(EINVAL, errno);
	/* a comp_mask we do not know (mlx5: EINVAL) */
	alloc_fails(e.ctx,
		    (struct ibv_alloc_dm_attr){.length = 64, .comp_mask = 1},
		    EINVAL);
	alloc_fails(e.ctx, (struct ibv_alloc_dm_attr){.length = 0}, EINVAL);
	/* past max_dm_size (mlx5's check: EINVAL) */
	alloc_fails(e.ctx, (struct ibv_alloc_dm_attr){.length = MAX_DM + 1},
		    EINVAL);
	alloc_fails(e.ctx, (struct ibv_alloc_dm_attr){.length = ~0ull}, EINVAL);
	/* an alignment beyond the page the bytes start on */
	alloc_fails(
		e.ctx,
		(struct ibv_alloc_dm_attr){.length = 64, .log_align_req = 13},
		EINVAL);
	alloc_fails(
		e.ctx,
		(struct ibv_alloc_dm_attr){.length = 64, .log_align_req = 40},
		EINVAL);
	/* the context's device memory used up: ENOMEM, until some is freed;
	 * it is counted in pages (a 4-byte DM takes one) */
	d1 = alloc_dm(e.ctx, MAX_DM / 2);
	d2 = alloc_dm(e.ctx, MAX_DM / 2);
	ASSERT_NOT_NULL(d1);
	ASSERT_NOT_NULL(d2);
	alloc_fails(e.ctx, (struct ibv_alloc_dm_attr){.length = 4}, ENOMEM);
	ASSERT_OK(ibv_free_dm(d1));
	d1 = alloc_dm(e.ctx, 4);
	ASSERT_NOT_NULL(d1);
	alloc_fails(e.ctx, (struct ibv_alloc_dm_attr){.length = MAX_DM / 2},
		    ENOMEM);
	ASSERT_OK(ibv_free_dm(d1));
	ASSERT_OK(ibv_free_dm(d2));
	for (int i = 0; i < (int)(MAX_DM / 4096); i++)
		ASSERT_NOT_NULL(alloc_dm(e.ctx, 1)); /* freed at close */
	alloc_fails(e.ctx, (struct ibv_alloc_dm_attr){.length = 1}, ENOMEM);
	ASSERT_OK(ibv_dealloc_pd(e.pd));
	ASSERT_OK(ibv_close_device(e.ctx));
}

SV_TEST(dm_memcpy_bounds)
{
	uint8_t in[256], out[256];
	struct sv_end e = {0};
	struct ibv_dm *dm;

	sv_end_open_ctx(&e);
	dm = alloc_dm(e.ctx, 1000); /* not a page: the bound is the length */
	ASSERT_NOT_NULL(dm);
	sv_fill(in, sizeof(in), 5);
	ASSERT_OK(ibv_memcpy_to_dm(dm, 744, in, 256));
	memset(out, 0, sizeof(out));
	ASSERT_OK(ibv_memcpy_from_dm(out, dm, 744, 256));
	ASSERT_OK(memcmp(in, out, 256));
	ASSERT_OK(ibv_memcpy_to_dm(dm, 1000, in, 0));
	ASSERT_OK(ibv_memcpy_from_dm(out, dm, 0, 0));
	/* one byte past the end, an offset past it, and wrapping sums */
	ASSERT_EQ(EFAULT, ibv_memcpy_to_dm(dm, 745, in, 256));
	ASSERT_EQ(EFAULT, ibv_memcpy_to_dm(dm, 1001, in, 0));
	ASSERT_EQ(EFAULT, ibv_memcpy_to_dm(dm, ~0ull, in, 2));
	ASSERT_EQ(EFAULT, ibv_memcpy_to_dm(dm, 8, in, SIZE_MAX));
	ASSERT_EQ(EFAULT, ibv_memcpy_from_dm(out, dm, 745, 256));
	ASSERT_EQ(EFAULT, ibv_memcpy_from_dm(out, dm, ~0ull - 1, 4));
	ASSERT_EQ(EFAULT, ibv_memcpy_from_dm(out, dm, 0, 1001));
	/* nothing was written by the refused copies */
	memset(out, 0, sizeof(out));
	ASSERT_OK(ibv_memcpy_from_dm(out, dm, 744, 256));
	ASSERT_OK(memcmp(in, out, 256));
	ASSERT_OK(ibv_free_dm(dm));
	sv_end_close(&e);
}

/* A host buffer the program cannot read or write: EFAULT, not a crash
 * (guarded copies, as the engine's; not under TSan, whose memcpy
 * interceptor faults outside the guard). */
SV_TEST(dm_memcpy_unmapped_host_buffer)
{
	struct sv_end e = {0};
	struct ibv_dm *dm;
	uint8_t *hole;

	sv_end_open_ctx(&e);
	dm = alloc_dm(e.ctx, 4096);
	ASSERT_NOT_NULL(dm);
	hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(hole != MAP_FAILED);
	ASSERT_EQ(EFAULT, ibv_memcpy_to_dm(dm, 0, hole, 64));
	ASSERT_EQ(EFAULT, ibv_memcpy_from_dm(hole, dm, 0, 64));
	munmap(hole, 4096);
	ASSERT_OK(ibv_free_dm(dm));
	sv_end_close(&e);
}

SV_TEST(dm_reg_mr_errors_and_busy)
{
	const unsigned int zb = IBV_ACCESS_ZERO_BASED;
	struct sv_end e = {0}, other = {0};
	struct ibv_dm *dm;
	struct ibv_mr *mr, *mr2;

	sv_end_open_ctx(&e);
	sv_end_open_ctx(&other);
	dm = alloc_dm(e.ctx, DM_LEN);
	ASSERT_NOT_NULL(dm);
	/* rdma-core: DM MRs are zero-based */
	reg_fails(e.pd, dm, 0, 64, IBV_ACCESS_LOCAL_WRITE, EINVAL);
	/* mlx5: local write, remote write/read/atomic, zero-based only */
	reg_fails(e.pd, dm, 0, 64, zb | IBV_ACCESS_MW_BIND, EINVAL);
	reg_fails(e.pd, dm, 0, 64, zb | IBV_ACCESS_ON_DEMAND, EINVAL);
	/* IBA: remote write or atomic needs local write */
	reg_fails(e.pd, dm, 0, 64, zb | IBV_ACCESS_REMOTE_WRITE, EINVAL);
	reg_fails(e.pd, dm, 0, 64, zb | IBV_ACCESS_REMOTE_ATOMIC, EINVAL);
	/* the range inside the DM */
	reg_fails(e.pd, dm, 0, 0, zb, EINVAL);
	reg_fails(e.pd, dm, 0, DM_LEN + 1, zb, EINVAL);
	reg_fails(e.pd, dm, DM_LEN, 1, zb, EINVAL);
	reg_fails(e.pd, dm, ~0ull, 2, zb, EINVAL);
	/* a PD of another context */
	reg_fails(other.pd, dm, 0, 64, zb, EINVAL);
	/* the whole DM, and an overlapping piece; optional bits ignored */
	mr = ibv_reg_dm_mr(e.pd, dm, 0, DM_LEN, zb | REMOTE);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(mr->pd == e.pd && mr->context == e.ctx);
	ASSERT_EQ(DM_LEN, mr->length);
	ASSERT_NE(0, mr->lkey);
	mr2 = ibv_reg_dm_mr(e.pd, dm, DM_LEN - 8, 8,
			    zb | IBV_ACCESS_RELAXED_ORDERING);
	ASSERT_NOT_NULL(mr2);
	/* the kernel's usecnt: not while MRs are on it, nor their PD */
	ASSERT_EQ(EBUSY, ibv_free_dm(dm));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(e.pd));
	/* uverbs refuses rereg of an MR on device memory; it stays whole */
	errno = 0;
	ASSERT_EQ(IBV_REREG_MR_ERR_CMD,
		  ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_EQ(EBUSY, ibv_free_dm(dm));
	ASSERT_OK(ibv_dereg_mr(mr2));
	ASSERT_OK(ibv_free_dm(dm));
	sv_end_close(&other);
	sv_end_close(&e);
}

/* Bytes of the DM, read back with ibv_memcpy_from_dm. */
static void dm_expect(struct ibv_dm *dm, uint64_t off, size_t len,
		      uint32_t seed)
{
	uint8_t *b = malloc(len);

	ASSERT_NOT_NULL(b);
	ASSERT_OK(ibv_memcpy_from_dm(b, dm, off, len));
	ASSERT_EQ(-1, sv_check(b, len, seed));
	free(b);
}

struct dm_pair {
	struct sv_pair p;
	struct ibv_dm *da, *db;
	struct ibv_mr *ma, *mb; /* [DM_OFF, DM_OFF + MR_LEN) of each DM */
};

static void dm_open(struct dm_pair *dp)
{
	struct sv_end_opts o = sv_end_opts_default();

	o.buf_len = 2 * MR_LEN;
	o.qp_access = REMOTE;
	o.mr_access = REMOTE;
	sv_pair_open(&dp->p, &o, &o);
	dp->da = alloc_dm(dp->p.a.ctx, DM_LEN);
	dp->db = alloc_dm(dp->p.b.ctx, DM_LEN);
	ASSERT_NOT_NULL(dp->da);
	ASSERT_NOT_NULL(dp->db);
	dp->ma = ibv_reg_dm_mr(dp->p.a.pd, dp->da, DM_OFF, MR_LEN,
			       REMOTE | IBV_ACCESS_ZERO_BASED);
	dp->mb = ibv_reg_dm_mr(dp->p.b.pd, dp->db, DM_OFF, MR_LEN,
			       REMOTE | IBV_ACCESS_ZERO_BASED);
	ASSERT_NOT_NULL(dp->ma);
	ASSERT_NOT_NULL(dp->mb);
}

static void dm_close(struct dm_pair *dp)
{
	ASSERT_OK(ibv_dereg_mr(dp->ma));
	ASSERT_OK(ibv_dereg_mr(dp->mb));
	ASSERT_OK(ibv_free_dm(dp->da));
	ASSERT_OK(ibv_free_dm(dp->db));
	sv_pair_close(&dp->p);
}

static int post(struct sv_end *e, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;

	wr->send_flags |= IBV_SEND_SIGNALED;
	return ibv_post_send(e->qp, wr, &bad);
}

/* A send of len bytes from a's DM (MR address src) into b's (dst). */
static void send_dm_to_dm(struct dm_pair *dp, uint64_t src, uint64_t dst,
			  uint32_t len, uint32_t seed)
{
	uint8_t *fill = malloc(len);
	struct ibv_sge ss = {.addr = src, .length = len, .lkey = dp->ma->lkey};
	struct ibv_sge rs = {.addr = dst, .length = len, .lkey = dp->mb->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &rs, .num_sge = 1};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &ss,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND};
	struct ibv_recv_wr *rbad;
	struct ibv_wc wc;

	ASSERT_NOT_NULL(fill);
	sv_fill(fill, len, seed);
	ASSERT_OK(ibv_memcpy_to_dm(dp->da, DM_OFF + src, fill, len));
	free(fill);
	ASSERT_OK(ibv_post_recv(dp->p.b.qp, &rwr, &rbad));
	ASSERT_OK(post(&dp->p.a, &wr));
	EXPECT_WC(dp->p.a.scq, IBV_WC_SUCCESS, 1);
	WAIT_WC(dp->p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(len, wc.byte_len);
	dm_expect(dp->db, DM_OFF + dst, len, seed);
}

SV_TEST(dm_send_from_and_receive_into_dm)
{
	struct dm_pair dp;

	dm_open(&dp);
	/* small: through the ring; large: placed by the sender (shm) */
	send_dm_to_dm(&dp, 100, 5000, 300, 7);
	send_dm_to_dm(&dp, 0, 0, MR_LEN, 8);
	send_dm_to_dm(&dp, 8192, 16384, 32768, 9);
	dm_close(&dp);
}

/* A large send into a receive on device memory is placed by the sender
 * (single copy; the QP's placed_sends counts it), from device memory. */
SV_TEST(dm_send_placed_by_the_sender)
{
	sv_test_needs_shm("single-copy sends");
	struct dm_pair dp;
	struct ibv_sge ss = {.addr = 0, .length = 32768};
	struct ibv_sge rs = {.addr = 4096, .length = 32768};
	struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &rs, .num_sge = 1};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &ss,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND};
	struct ibv_recv_wr *rbad;
	uint8_t *fill = malloc(32768);
	struct ibv_wc wc;
	uint64_t placed;

	ASSERT_NOT_NULL(fill);
	dm_open(&dp);
	/* one message first: the link is up (connecting is asynchronous) */
	send_dm_to_dm(&dp, 0, 0, 64, 1);
	ss.lkey = dp.ma->lkey;
	rs.lkey = dp.mb->lkey;
	sv_fill(fill, 32768, 4);
	ASSERT_OK(ibv_memcpy_to_dm(dp.da, DM_OFF, fill, 32768));
	placed = LOAD(to_sqp(dp.p.a.qp)->stats.placed_sends);
	ASSERT_OK(ibv_post_recv(dp.p.b.qp, &rwr, &rbad));
	ASSERT_OK(post(&dp.p.a, &wr));
	EXPECT_WC(dp.p.a.scq, IBV_WC_SUCCESS, 1);
	ASSERT_EQ(placed + 1, LOAD(to_sqp(dp.p.a.qp)->stats.placed_sends));
	dm_expect(dp.db, DM_OFF + 4096, 32768, 4);
	WAIT_WC(dp.p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(32768, wc.byte_len);
	free(fill);
	dm_close(&dp);
}

SV_TEST(dm_one_sided_write_read_atomics)
{
	struct dm_pair dp;
	struct ibv_sge sg = {.length = 2000};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sg, .num_sge = 1};
	uint64_t v = 40, got;

	dm_open(&dp);
	/* write: a's registered buffer to b's DM at MR address 1000 */
	sg.addr = (uintptr_t)dp.p.a.buf;
	sg.lkey = dp.p.a.mr->lkey;
	sv_fill(dp.p.a.buf, 2000, 3);
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = 1000;
	wr.wr.rdma.rkey = dp.mb->rkey;
	ASSERT_OK(post(&dp.p.a, &wr));
	EXPECT_WC(dp.p.a.scq, IBV_WC_SUCCESS, 1);
	dm_expect(dp.db, DM_OFF + 1000, 2000, 3);
	/* read it back into a's DM at MR address 20000 */
	sg.addr = 20000;
	sg.lkey = dp.ma->lkey;
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_READ;
	ASSERT_OK(post(&dp.p.a, &wr));
	EXPECT_WC(dp.p.a.scq, IBV_WC_SUCCESS, 2);
	dm_expect(dp.da, DM_OFF + 20000, 2000, 3);
	/* fetch-and-add on b's DM, the old value into a's DM */
	ASSERT_OK(ibv_memcpy_to_dm(dp.db, DM_OFF + 64, &v, 8));
	sg.addr = 8;
	sg.length = 8;
	wr.wr_id = 3;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = 64;
	wr.wr.atomic.rkey = dp.mb->rkey;
	wr.wr.atomic.compare_add = 2;
	ASSERT_OK(post(&dp.p.a, &wr));
	EXPECT_WC(dp.p.a.scq, IBV_WC_SUCCESS, 3);
	ASSERT_OK(ibv_memcpy_from_dm(&got, dp.da, DM_OFF + 8, 8));
	ASSERT_EQ(40, got);
	ASSERT_OK(ibv_memcpy_from_dm(&got, dp.db, DM_OFF + 64, 8));
	ASSERT_EQ(42, got);
	/* compare-and-swap 42 -> 7 */
	wr.wr_id = 4;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 42;
	wr.wr.atomic.swap = 7;
	ASSERT_OK(post(&dp.p.a, &wr));
	EXPECT_WC(dp.p.a.scq, IBV_WC_SUCCESS, 4);
	ASSERT_OK(ibv_memcpy_from_dm(&got, dp.db, DM_OFF + 64, 8));
	ASSERT_EQ(7, got);
	/* on one host the initiator did all four in b's DM itself */
	if (!sv_test_wire())
		ASSERT_EQ(4, LOAD(to_sqp(dp.p.a.qp)->stats.direct_ops));
	dm_close(&dp);
}

/* The MR's bounds are its own, not the DM's: zero-based, length MR_LEN. */
SV_TEST(dm_remote_access_outside_mr_refused)
{
	struct dm_pair dp;
	struct ibv_sge sg = {.length = 16};
	struct ibv_send_wr wr = {.wr_id = 5,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE};
	uint8_t before[64], after[64];

	dm_open(&dp);
	sg.addr = (uintptr_t)dp.p.a.buf;
	sg.lkey = dp.p.a.mr->lkey;
	memset(dp.p.a.buf, 0x5a, 16);
	ASSERT_OK(ibv_memcpy_from_dm(before, dp.db, DM_OFF + MR_LEN, 64));
	/* the DM goes on past the MR: still out of bounds */
	wr.wr.rdma.remote_addr = MR_LEN - 8;
	wr.wr.rdma.rkey = dp.mb->rkey;
	ASSERT_OK(post(&dp.p.a, &wr));
	EXPECT_WC(dp.p.a.scq, IBV_WC_REM_ACCESS_ERR, 5);
	ASSERT_OK(ibv_memcpy_from_dm(after, dp.db, DM_OFF + MR_LEN, 64));
	ASSERT_OK(memcmp(before, after, 64));
	dm_close(&dp);
}

/* A DM MR's lkey names MR addresses, never the bytes' own address. */
SV_TEST(dm_local_address_is_zero_based)
{
	struct dm_pair dp;
	struct ibv_sge sg = {.length = 64};
	struct ibv_send_wr wr = {.wr_id = 6,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE};

	dm_open(&dp);
	sg.addr = (uintptr_t)dp.ma->addr; /* mlx5's mapping of the bytes */
	sg.lkey = dp.ma->lkey;
	wr.wr.rdma.remote_addr = 0;
	wr.wr.rdma.rkey = dp.mb->rkey;
	ASSERT_OK(post(&dp.p.a, &wr));
	EXPECT_WC(dp.p.a.scq, IBV_WC_LOC_PROT_ERR, 6);
	dm_close(&dp);
}

/* The mapping holding addr is the context's arena (/proc/self/maps). */
static bool on_arena(const void *addr)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");
	bool on = false;

	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 &&
		    (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			on = strstr(line, "/memfd:softverbs-arena") != NULL;
			break;
		}
	}
	fclose(f);
	return on;
}

/*
 * Device memory is on the context's arena from allocation, all of it:
 * MRs on it are shared with peers on this host whatever their access
 * and however they overlap (an MR over pages partly on another's
 * segment would not be re-backed on its own), so peers reach them with
 * one copy (conf_rdma.c rdma_target_stopped_completes_on_dm).
 */
SV_TEST(dm_is_on_the_arena)
{
	struct sv_end e = {0};
	struct ibv_dm *dm;
	struct ibv_mr *m1, *m2, *m3;

	sv_end_open_ctx(&e);
	dm = alloc_dm(e.ctx, DM_LEN);
	ASSERT_NOT_NULL(dm);
	m1 = ibv_reg_dm_mr(e.pd, dm, 0, 8192, IBV_ACCESS_ZERO_BASED | REMOTE);
	m2 = ibv_reg_dm_mr(e.pd, dm, 4096, 16384,
			   IBV_ACCESS_ZERO_BASED | REMOTE);
	m3 = ibv_reg_dm_mr(e.pd, dm, 65536, 4096, IBV_ACCESS_ZERO_BASED);
	ASSERT_NOT_NULL(m1);
	ASSERT_NOT_NULL(m2);
	ASSERT_NOT_NULL(m3);
	ASSERT_TRUE(on_arena(m1->addr));
	ASSERT_TRUE(on_arena((uint8_t *)m2->addr + 16383));
	ASSERT_TRUE(on_arena(m3->addr));
	ASSERT_OK(ibv_dereg_mr(m1));
	ASSERT_OK(ibv_dereg_mr(m2));
	ASSERT_OK(ibv_dereg_mr(m3));
	ASSERT_OK(ibv_free_dm(dm));
	sv_end_close(&e);
}

/* fork: the child gets a private copy of device memory (as of any
 * memory on the arena), and freeing it there leaves the parent's be. */
SV_TEST(dm_fork_child_private_copy)
{
	struct sv_end e = {0};
	struct ibv_dm *dm;
	struct ibv_mr *mr;
	char got[4];
	pid_t pid;
	int st;

	sv_end_open_ctx(&e);
	dm = alloc_dm(e.ctx, DM_LEN);
	ASSERT_NOT_NULL(dm);
	mr = ibv_reg_dm_mr(e.pd, dm, 0, DM_LEN, IBV_ACCESS_ZERO_BASED | REMOTE);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(ibv_memcpy_to_dm(dm, 100, "AAAA", 4));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		ASSERT_OK(ibv_memcpy_from_dm(got, dm, 100, 4));
		ASSERT_OK(memcmp(got, "AAAA", 4));
		ASSERT_OK(ibv_memcpy_to_dm(dm, 100, "BBBB", 4));
		ASSERT_OK(ibv_dereg_mr(mr));
		ASSERT_OK(ibv_free_dm(dm));
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(0, WEXITSTATUS(st));
	ASSERT_OK(ibv_memcpy_from_dm(got, dm, 100, 4));
	ASSERT_OK(memcmp(got, "AAAA", 4));
	ASSERT_TRUE(on_arena(mr->addr));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_free_dm(dm));
	sv_end_close(&e);
}

/* ibv_close_device with DMs left frees them (ASan sees no leak), and
 * with an MR still on one (in a child: the PD is left too) it does not
 * crash. */
SV_TEST(dm_close_device_frees_what_is_left)
{
	struct sv_end e = {0};
	struct ibv_dm *dm;
	pid_t pid;
	int st;

	sv_end_open_ctx(&e);
	dm = alloc_dm(e.ctx, DM_LEN);
	ASSERT_NOT_NULL(dm);
	ASSERT_NOT_NULL(alloc_dm(e.ctx, 100));
	ASSERT_OK(ibv_memcpy_to_dm(dm, 0, "left", 4));
	ASSERT_OK(ibv_dealloc_pd(e.pd));
	ASSERT_OK(ibv_close_device(e.ctx));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		memset(&e, 0, sizeof(e));
		sv_end_open_ctx(&e);
		dm = alloc_dm(e.ctx, DM_LEN);
		ASSERT_NOT_NULL(dm);
		ASSERT_NOT_NULL(ibv_reg_dm_mr(e.pd, dm, 0, 4096,
					      IBV_ACCESS_ZERO_BASED | REMOTE));
		ASSERT_OK(ibv_close_device(e.ctx));
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(0, WEXITSTATUS(st));
}
