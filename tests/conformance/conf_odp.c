// SPDX-License-Identifier: MIT
/*
 * On-demand paging (issue 28 item 3) through the public verbs API, on
 * both transports: the caps, registration (a hole, a read-only range,
 * implicit ODP, every refusal), memory neither moved nor touched by
 * registration, pages never touched read as zeros, a range remapped
 * after registration served with its new contents, a range unmapped
 * under the MR completing in error, every RDMA operation and send on
 * ODP MRs, implicit ODP reaching any mapped address with the right
 * protection (and an error completion elsewhere), and ibv_advise_mr.
 */
#include "pair.h"
#include "ud_end.h"

#include <arpa/inet.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096
#define REMOTE_ALL                                          \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define ODP_ALL (REMOTE_ALL | IBV_ACCESS_ON_DEMAND)
#define QP_REMOTE_ALL                                       \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define BUF_LEN (256 * 1024)

/* --- building blocks ---------------------------------------------------- */

/* a initiates, b is the target; both ends' buffers on MRs of access. */
static void odp_pair(struct sv_pair *p, int access)
{
	struct sv_end_opts o = sv_end_opts_default();

	o.buf_len = BUF_LEN;
	o.mr_access = access;
	o.qp_access = QP_REMOTE_ALL;
	o.max_send_wr = o.max_recv_wr = 32;
	o.cqe = 128;
	sv_pair_open(p, &o, &o);
}

/*
 * n pages of fresh anonymous memory between two PROT_NONE pages, never
 * touched here, low in the address space (from 1 GiB up: under the
 * program, the heap and every mapping the kernel places top-down, in
 * ASan's and TSan's application range), so a hole a test makes in it
 * stays a hole: a 64 KiB hole near the other mappings was taken by the
 * next small mmap of another thread (TCP transport under ASan).
 */
static uint8_t *region(size_t n)
{
	static uintptr_t next = (uintptr_t)1 << 30;
	size_t len = (n + 2) * PAGE;
	uint8_t *p = MAP_FAILED;

	for (int i = 0; i < 64 && p == MAP_FAILED; i++) {
		p = mmap((void *)next, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
				 MAP_FIXED_NOREPLACE,
			 -1, 0);
		next += (len + (1 << 20)) & ~(uintptr_t)((1 << 20) - 1);
	}
	ASSERT_TRUE(p != MAP_FAILED);
	ASSERT_OK(mprotect(p, PAGE, PROT_NONE));
	ASSERT_OK(mprotect(p + (n + 1) * PAGE, PAGE, PROT_NONE));
	return p + PAGE;
}

static void region_free(uint8_t *r, size_t n)
{
	ASSERT_OK(munmap(r - PAGE, (n + 2) * PAGE));
}

/* Pages of [p, p + n pages) resident (mincore). */
static int resident(const uint8_t *p, size_t n)
{
	unsigned char v[64];
	int k = 0;

	ASSERT_TRUE(n <= sizeof(v));
	ASSERT_OK(mincore((void *)p, n * PAGE, v));
	for (size_t i = 0; i < n; i++)
		k += v[i] & 1;
	return k;
}

static int post_rdma(struct sv_end *e, uint64_t id, enum ibv_wr_opcode op,
		     void *local, uint32_t len, uint32_t lkey, uint64_t raddr,
		     uint32_t rkey)
{
	struct ibv_sge sg = {(uintptr_t)local, len, lkey};
	struct ibv_send_wr wr = {
		.wr_id = id,
		.sg_list = &sg,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {.remote_addr = raddr, .rkey = rkey},
	};
	struct ibv_send_wr *bad = NULL;

	if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htonl(0x0d0d0d0d);
	return ibv_post_send(e->qp, &wr, &bad);
}

/* One atomic; the old value lands at local (8 bytes of lkey's MR). */
static int post_atomic(struct sv_end *e, uint64_t id, enum ibv_wr_opcode op,
		       void *local, uint32_t lkey, uint64_t raddr,
		       uint32_t rkey, uint64_t compare_add, uint64_t swap)
{
	struct ibv_sge sg = {(uintptr_t)local, 8, lkey};
	struct ibv_send_wr wr = {
		.wr_id = id,
		.sg_list = &sg,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = {.remote_addr = raddr,
			      .compare_add = compare_add,
			      .swap = swap,
			      .rkey = rkey},
	};
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(e->qp, &wr, &bad);
}

static int post_send_sge(struct sv_end *e, uint64_t id, void *addr,
			 uint32_t len, uint32_t lkey)
{
	struct ibv_sge sg = {(uintptr_t)addr, len, lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	return ibv_post_send(e->qp, &wr, &bad);
}

static int post_recv_sge(struct sv_end *e, uint64_t id, void *addr,
			 uint32_t len, uint32_t lkey)
{
	struct ibv_sge sg = {(uintptr_t)addr, len, lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1},
			   *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

static void all_bytes(const char *file, int line, const uint8_t *buf,
		      size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != v)
			sv_test_fail(file, line,
				     "byte %zu of %zu: 0x%02x, expected 0x%02x",
				     i, len, buf[i], v);
}
#define ASSERT_ALL(buf, len, v) all_bytes(__FILE__, __LINE__, buf, len, v)

/* --- capabilities and registration -------------------------------------- */

/* ibv_query_device_ex: ODP and implicit ODP; per transport exactly what
 * this file and the program matrix's --odp rows show working. */
SV_TEST(odp_device_caps)
{
	struct ibv_device_attr_ex ax;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	ASSERT_OK(ibv_query_device_ex(e.ctx, NULL, &ax));
	ASSERT_EQ(IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT,
		  ax.odp_caps.general_caps);
	ASSERT_EQ(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
			  IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
			  IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV,
		  ax.odp_caps.per_transport_caps.rc_odp_caps);
	ASSERT_EQ(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
			  IBV_ODP_SUPPORT_WRITE,
		  ax.odp_caps.per_transport_caps.uc_odp_caps);
	ASSERT_EQ(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV,
		  ax.odp_caps.per_transport_caps.ud_odp_caps);
	/* XRC's: conf_xrc_odp.c */
	sv_end_close(&e);
}

/* What the kernel's ODP registration takes that a pinned one refuses (a
 * hole, a read-only range with write access), and what both refuse. */
SV_TEST(odp_reg_checks)
{
	struct ibv_device_attr da;
	uint8_t *r = region(18);
	struct ibv_mr *mr;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	ASSERT_OK(ibv_query_device(e.ctx, &da));
	/* a hole of 16 pages: no small mapping of another thread's (ASan's)
	 * lands on its second page meanwhile */
	ASSERT_OK(munmap(r + PAGE, 16 * PAGE));
	ASSERT_OK(mprotect(r + 17 * PAGE, PAGE, PROT_READ));
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, r + 2 * PAGE, PAGE, REMOTE_ALL));
	ASSERT_EQ(EFAULT, errno);
	mr = ibv_reg_mr(e.pd, r + 2 * PAGE, PAGE, ODP_ALL);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(mr->addr == r + 2 * PAGE && mr->length == PAGE);
	ASSERT_OK(ibv_dereg_mr(mr));
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, r + 17 * PAGE, PAGE, REMOTE_ALL));
	ASSERT_EQ(EFAULT, errno);
	mr = ibv_reg_mr(e.pd, r + 17 * PAGE, PAGE, ODP_ALL);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(ibv_dereg_mr(mr));

	/* refused as any registration */
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, r, 0, ODP_ALL));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(
		ibv_reg_mr(e.pd, (void *)(uintptr_t)-PAGE, 2 * PAGE, ODP_ALL));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, r, da.max_mr_size + 1, ODP_ALL));
	ASSERT_EQ(EINVAL, errno);
	errno = 0; /* page 0 is never mapped: refused as a pinned one */
	ASSERT_NULL(ibv_reg_mr(e.pd, NULL, PAGE, ODP_ALL));
	ASSERT_EQ(EFAULT, errno);
	errno = 0; /* IBA 10.6.3.1: remote write needs local write */
	ASSERT_NULL(ibv_reg_mr(e.pd, r, PAGE,
			       IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_WRITE));
	ASSERT_EQ(EINVAL, errno);

	/* implicit ODP: addr NULL, length SIZE_MAX, iova 0, ODP only */
	mr = ibv_reg_mr(e.pd, NULL, SIZE_MAX, ODP_ALL);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(!mr->addr && mr->length == SIZE_MAX);
	ASSERT_TRUE(mr->lkey && mr->lkey == mr->rkey);
	ASSERT_OK(ibv_dereg_mr(mr));
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, NULL, SIZE_MAX, REMOTE_ALL));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr_iova(e.pd, NULL, SIZE_MAX, PAGE, ODP_ALL));
	ASSERT_EQ(EINVAL, errno);
	sv_end_close(&e);
	/* what is left of the region: the hole may be another's by now */
	ASSERT_OK(munmap(r - PAGE, 2 * PAGE));
	ASSERT_OK(munmap(r + 17 * PAGE, 2 * PAGE));
}

/* Backed by a context's arena (rmem.c moved it): /proc/self/maps. */
static bool on_arena(const void *addr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];
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

/* A pinned MR made ODP by ibv_rereg_mr leaves the arena (over shared
 * memory it was moved there), and the other way round. */
SV_TEST(odp_rereg_to_and_from_odp)
{
	uint8_t *r = region(4);
	struct ibv_mr *mr;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	sv_end_share_memory(&e); /* non-ODP memory moves at once */
	memset(r, 0x3c, 4 * PAGE);
	mr = ibv_reg_mr(e.pd, r, 4 * PAGE, REMOTE_ALL);
	ASSERT_NOT_NULL(mr);
	if (!sv_test_wire())
		ASSERT_TRUE(on_arena(r));
	ASSERT_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       ODP_ALL));
	ASSERT_FALSE(on_arena(r));
	ASSERT_ALL(r, 4 * PAGE, 0x3c);
	ASSERT_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       REMOTE_ALL));
	if (!sv_test_wire())
		ASSERT_TRUE(on_arena(r));
	ASSERT_ALL(r, 4 * PAGE, 0x3c);
	ASSERT_OK(ibv_dereg_mr(mr));
	sv_end_close(&e);
	region_free(r, 4);
}

/* ibv_rereg_mr of ODP MRs: a new range that is not accessible is fine;
 * an implicit MR that would stop being ODP is refused. */
SV_TEST(odp_rereg)
{
	uint8_t *r = region(2);
	struct ibv_mr *mr, *imr;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	mr = ibv_reg_mr(e.pd, r, PAGE, ODP_ALL);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(mprotect(r + PAGE, PAGE, PROT_NONE));
	ASSERT_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			       r + PAGE, PAGE, 0));
	ASSERT_TRUE(mr->addr == r + PAGE);
	errno = 0; /* no longer ODP: then PROT_NONE is refused */
	ASSERT_EQ(IBV_REREG_MR_ERR_CMD,
		  ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       REMOTE_ALL));
	ASSERT_EQ(EFAULT, errno);
	ASSERT_OK(ibv_dereg_mr(mr));
	imr = ibv_reg_mr(e.pd, NULL, SIZE_MAX, ODP_ALL);
	ASSERT_NOT_NULL(imr);
	errno = 0;
	ASSERT_EQ(IBV_REREG_MR_ERR_CMD,
		  ibv_rereg_mr(imr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       REMOTE_ALL));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_dereg_mr(imr));
	sv_end_close(&e);
	region_free(r, 2);
}

/* --- memory: not moved, untouched, remapped, unmapped --------------------- */

/* Registration touches nothing (no page becomes resident, the range is
 * still our anonymous memory); a page never touched reads as zeros; a
 * remote write makes resident exactly the page it writes. */
SV_TEST(odp_untouched_pages_read_zero)
{
	uint8_t *r = region(16);
	struct ibv_mr *mr;
	struct sv_pair p;

	odp_pair(&p, ODP_ALL);
	mr = ibv_reg_mr(p.b.pd, r, 16 * PAGE, ODP_ALL);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(0, resident(r, 16));
	memset(p.a.buf, 0xff, 2 * PAGE);
	ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_READ, p.a.buf, 2 * PAGE,
			    p.a.mr->lkey, (uintptr_t)(r + 2 * PAGE), mr->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 1);
	ASSERT_ALL(p.a.buf, 2 * PAGE, 0);
	sv_fill(p.a.buf, PAGE, 5);
	ASSERT_OK(post_rdma(&p.a, 2, IBV_WR_RDMA_WRITE, p.a.buf, PAGE,
			    p.a.mr->lkey, (uintptr_t)(r + 9 * PAGE), mr->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	ASSERT_EQ(1, resident(r + 9 * PAGE, 1));
	ASSERT_EQ(0, resident(r + 10 * PAGE, 6));
	ASSERT_EQ(0, resident(r, 2));
	ASSERT_EQ(-1, sv_check(r + 9 * PAGE, PAGE, 5));
	ASSERT_OK(ibv_dereg_mr(mr));
	sv_pair_close(&p);
	region_free(r, 16);
}

/* A range remapped after registration is served with its new contents:
 * a file mapped over it, then fresh anonymous memory (zeros). */
SV_TEST(odp_remap_served_new_contents)
{
	uint8_t *r = region(2), *m, page[PAGE];
	struct ibv_mr *mr;
	struct sv_pair p;
	int fd;

	odp_pair(&p, ODP_ALL);
	memset(r, 0x11, 2 * PAGE);
	mr = ibv_reg_mr(p.b.pd, r, 2 * PAGE, ODP_ALL);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_READ, p.a.buf, 2 * PAGE,
			    p.a.mr->lkey, (uintptr_t)r, mr->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 1);
	ASSERT_ALL(p.a.buf, 2 * PAGE, 0x11);

	fd = memfd_create("sv-odp-test", 0);
	ASSERT_GE(fd, 0);
	ASSERT_OK(ftruncate(fd, 2 * PAGE));
	m = mmap(r, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 fd, 0);
	ASSERT_TRUE(m == r);
	memset(r, 0x22, 2 * PAGE);
	ASSERT_OK(post_rdma(&p.a, 2, IBV_WR_RDMA_READ, p.a.buf, 2 * PAGE,
			    p.a.mr->lkey, (uintptr_t)r, mr->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	ASSERT_ALL(p.a.buf, 2 * PAGE, 0x22);
	sv_fill(p.a.buf, PAGE, 9);
	ASSERT_OK(post_rdma(&p.a, 3, IBV_WR_RDMA_WRITE, p.a.buf, PAGE,
			    p.a.mr->lkey, (uintptr_t)(r + PAGE), mr->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 3);
	ASSERT_EQ(PAGE, pread(fd, page, PAGE, PAGE)); /* into the file */
	ASSERT_EQ(-1, sv_check(page, PAGE, 9));

	m = mmap(r, 2 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ASSERT_TRUE(m == r);
	memset(p.a.buf, 0xff, 2 * PAGE);
	ASSERT_OK(post_rdma(&p.a, 4, IBV_WR_RDMA_READ, p.a.buf, 2 * PAGE,
			    p.a.mr->lkey, (uintptr_t)r, mr->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 4);
	ASSERT_ALL(p.a.buf, 2 * PAGE, 0);
	close(fd);
	ASSERT_OK(ibv_dereg_mr(mr));
	sv_pair_close(&p);
	region_free(r, 2);
}

/* The target's range unmapped under its ODP MR: op completes with want
 * at the initiator, nothing at the target, never a signal. */
static void unmapped_target_case(enum ibv_wr_opcode op, enum ibv_wc_status want)
{
	uint8_t *r = region(16);
	struct ibv_mr *mr;
	struct sv_pair p;
	int rc;

	odp_pair(&p, ODP_ALL);
	mr = ibv_reg_mr(p.b.pd, r, 16 * PAGE, ODP_ALL);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(munmap(r, 16 * PAGE)); /* 16 pages: it stays a hole */
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		rc = post_atomic(&p.a, 1, op, p.a.buf, p.a.mr->lkey,
				 (uintptr_t)(r + PAGE), mr->rkey, 1, 0);
	else
		rc = post_rdma(&p.a, 1, op, p.a.buf, 2 * PAGE, p.a.mr->lkey,
			       (uintptr_t)(r + PAGE), mr->rkey);
	ASSERT_OK(rc);
	EXPECT_WC(p.a.scq, want, 1);
	NO_WC(p.b.rcq, 0);
	ASSERT_OK(ibv_dereg_mr(mr));
	sv_pair_close(&p);
	/* the guards around it are still ours to unmap */
	ASSERT_OK(munmap(r - PAGE, PAGE));
	ASSERT_OK(munmap(r + 16 * PAGE, PAGE));
}

SV_TEST(odp_unmapped_under_mr_remote)
{
	unmapped_target_case(IBV_WR_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR);
	unmapped_target_case(IBV_WR_RDMA_READ, IBV_WC_REM_ACCESS_ERR);
	unmapped_target_case(IBV_WR_ATOMIC_FETCH_AND_ADD,
			     IBV_WC_REM_ACCESS_ERR);
}

/* A send from, and a receive into, ODP memory unmapped under its MR:
 * the local protection error the guard gives pinned MRs. */
SV_TEST(odp_unmapped_under_mr_local)
{
	uint8_t *r = region(32);
	struct ibv_mr *mr;
	struct sv_pair p;

	odp_pair(&p, ODP_ALL);
	mr = ibv_reg_mr(p.a.pd, r, 16 * PAGE, ODP_ALL);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(munmap(r, 16 * PAGE)); /* a hole that stays one */
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 2 * PAGE));
	ASSERT_OK(post_send_sge(&p.a, 2, r, 2 * PAGE, mr->lkey));
	EXPECT_WC(p.a.scq, IBV_WC_LOC_PROT_ERR, 2);
	ASSERT_OK(ibv_dereg_mr(mr));
	sv_pair_close(&p);

	odp_pair(&p, ODP_ALL);
	mr = ibv_reg_mr(p.b.pd, r + 16 * PAGE, 16 * PAGE, ODP_ALL);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(munmap(r + 16 * PAGE, 16 * PAGE));
	ASSERT_OK(post_recv_sge(&p.b, 3, r + 16 * PAGE, 2 * PAGE, mr->lkey));
	ASSERT_OK(sv_end_send(&p.a, 4, 0, 1000, IBV_SEND_SIGNALED));
	EXPECT_WC(p.b.rcq, IBV_WC_LOC_PROT_ERR, 3);
	EXPECT_WC(p.a.scq, IBV_WC_REM_OP_ERR, 4);
	ASSERT_OK(ibv_dereg_mr(mr));
	sv_pair_close(&p);
	ASSERT_OK(munmap(r - PAGE, PAGE));
	ASSERT_OK(munmap(r + 32 * PAGE, PAGE));
}

/* --- the data path on ODP MRs ------------------------------------------- */

/* Every RC operation with ODP MRs on both sides, every byte checked;
 * the target's memory stays its own (not moved). */
SV_TEST(odp_rc_all_operations)
{
	const uint32_t len = 3 * PAGE + 123;
	struct ibv_wc wc;
	struct sv_pair p;
	uint64_t *word;

	odp_pair(&p, ODP_ALL);
	for (uint32_t n = 1; n <= 65536; n *= 16) { /* sends */
		sv_fill(p.a.buf, n, n);
		ASSERT_OK(sv_end_recv(&p.b, n, PAGE, n));
		ASSERT_OK(sv_end_send(&p.a, n + 1, 0, n, IBV_SEND_SIGNALED));
		EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, n + 1);
		EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, n);
		ASSERT_EQ(-1, sv_check(p.b.buf + PAGE, n, n));
	}
	sv_fill(p.a.buf, len, 3);
	ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_WRITE, p.a.buf, len,
			    p.a.mr->lkey, (uintptr_t)(p.b.buf + 100),
			    p.b.mr->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 1);
	ASSERT_EQ(-1, sv_check(p.b.buf + 100, len, 3));
	sv_fill(p.b.buf + 8 * PAGE, len, 4);
	ASSERT_OK(post_rdma(&p.a, 2, IBV_WR_RDMA_READ, p.a.buf + PAGE, len,
			    p.a.mr->lkey, (uintptr_t)(p.b.buf + 8 * PAGE),
			    p.b.mr->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	ASSERT_EQ(-1, sv_check(p.a.buf + PAGE, len, 4));
	ASSERT_OK(sv_end_recv(&p.b, 3, 0, 0));
	ASSERT_OK(post_rdma(&p.a, 4, IBV_WR_RDMA_WRITE_WITH_IMM, p.a.buf, 64,
			    p.a.mr->lkey, (uintptr_t)(p.b.buf + 32 * PAGE),
			    p.b.mr->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 4);
	WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
	ASSERT_EQ(htonl(0x0d0d0d0d), wc.imm_data);
	word = (uint64_t *)(p.b.buf + 40 * PAGE);
	*word = 41;
	ASSERT_OK(post_atomic(&p.a, 5, IBV_WR_ATOMIC_FETCH_AND_ADD,
			      p.a.buf + 16, p.a.mr->lkey, (uintptr_t)word,
			      p.b.mr->rkey, 1, 0));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 5);
	ASSERT_EQ(42, *word);
	ASSERT_EQ(41, *(uint64_t *)(p.a.buf + 16));
	ASSERT_OK(post_atomic(&p.a, 6, IBV_WR_ATOMIC_CMP_AND_SWP, p.a.buf + 24,
			      p.a.mr->lkey, (uintptr_t)word, p.b.mr->rkey, 42,
			      7));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 6);
	ASSERT_EQ(7, *word);
	ASSERT_EQ(42, *(uint64_t *)(p.a.buf + 24));
	sv_pair_close(&p);
}

/* UD sends and receives on ODP MRs. */
SV_TEST(odp_ud_send_recv)
{
	struct ud_end_opts o = ud_end_opts(8, 8192, 0x11111111);
	struct ud_end s, r;
	struct ibv_wc wc;

	o.ah = true;
	ud_end_open(&s, &o);
	ud_end_open(&r, &o);
	ASSERT_OK(ibv_dereg_mr(s.mr));
	ASSERT_OK(ibv_dereg_mr(r.mr));
	s.mr = ibv_reg_mr(s.e.pd, s.buf, o.len,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	r.mr = ibv_reg_mr(r.e.pd, r.buf, o.len,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	ASSERT_TRUE(s.mr && r.mr);
	sv_fill(s.buf, 2000, 77);
	ASSERT_OK(ud_end_recv(&r, r.qp, 1, 0, 4096));
	ASSERT_OK(ud_end_send(&s, s.qp, 2, IBV_WR_SEND, 0, 2000, s.ah,
			      r.qp->qp_num, o.qkey));
	WAIT_WC(s.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(UD_GRH + 2000, wc.byte_len);
	ASSERT_EQ(-1, sv_check(r.buf + UD_GRH, 2000, 77));
	ud_end_close(&s);
	ud_end_close(&r);
}

/* A UC QP of e's (its PD; one CQ for both queues) toward peer. */
static struct ibv_qp *uc_qp(struct sv_end *e, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {.send_cq = cq,
				      .recv_cq = cq,
				      .qp_type = IBV_QPT_UC,
				      .cap = {.max_send_wr = 8,
					      .max_recv_wr = 8,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);

	ASSERT_NOT_NULL(qp);
	return qp;
}

static void uc_connect(struct ibv_qp *qp, uint32_t dest, uint16_t dlid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};

	ASSERT_OK(ibv_modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS));
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = dest,
				 .rq_psn = 0x100,
				 .ah_attr = {.dlid = dlid, .port_num = 1}};
	ASSERT_OK(ibv_modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN));
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 0x100};
	ASSERT_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
}

/* UC sends and RDMA writes between ODP MRs (perftest refuses UC with
 * --odp, so the matrix cannot show it). */
SV_TEST(odp_uc_send_write)
{
	struct sv_end a, b;
	struct ibv_cq *ca, *cb;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *ma, *mb;
	uint8_t *ba = region(8), *bb = region(8);
	struct ibv_wc wc;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	sv_end_open_ctx(&a);
	sv_end_open_ctx(&b);
	ca = ibv_create_cq(a.ctx, 32, NULL, NULL, 0);
	cb = ibv_create_cq(b.ctx, 32, NULL, NULL, 0);
	ASSERT_TRUE(ca && cb);
	qa = uc_qp(&a, ca);
	qb = uc_qp(&b, cb);
	ma = ibv_reg_mr(a.pd, ba, 8 * PAGE, ODP_ALL);
	mb = ibv_reg_mr(b.pd, bb, 8 * PAGE, ODP_ALL);
	ASSERT_TRUE(ma && mb);
	uc_connect(qa, qb->qp_num, b.lid);
	uc_connect(qb, qa->qp_num, a.lid);

	sv_fill(ba, 5000, 21);
	for (uint64_t id = 1; id <= 2; id++) {
		struct ibv_sge rs = {(uintptr_t)bb, 8 * PAGE, mb->lkey};
		struct ibv_recv_wr rw = {.wr_id = id,
					 .sg_list = &rs,
					 .num_sge = 1},
				   *rbad;

		ASSERT_OK(ibv_post_recv(qb, &rw, &rbad));
	}
	struct sv_end s = {.qp = qa};

	ASSERT_OK(post_send_sge(&s, 3, ba, 5000, ma->lkey));
	WAIT_WC(ca, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	WAIT_WC(cb, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(5000, wc.byte_len);
	ASSERT_EQ(-1, sv_check(bb, 5000, 21));
	sv_fill(ba + PAGE, 3 * PAGE, 22);
	ASSERT_OK(post_rdma(&s, 4, IBV_WR_RDMA_WRITE, ba + PAGE, 3 * PAGE,
			    ma->lkey, (uintptr_t)(bb + 4 * PAGE), mb->rkey));
	WAIT_WC(ca, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	/* UC completes a write once sent; a send after it arrives after
	 * it (IBA 9.8: in order) */
	ASSERT_OK(post_send_sge(&s, 5, ba, 1, ma->lkey));
	WAIT_WC(ca, &wc, SV_WC_TIMEOUT_MS);
	WAIT_WC(cb, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(2, wc.wr_id);
	ASSERT_EQ(-1, sv_check(bb + 4 * PAGE, 3 * PAGE, 22));
	ASSERT_OK(ibv_destroy_qp(qa));
	ASSERT_OK(ibv_destroy_qp(qb));
	ASSERT_OK(ibv_dereg_mr(ma));
	ASSERT_OK(ibv_dereg_mr(mb));
	ASSERT_OK(ibv_destroy_cq(ca));
	ASSERT_OK(ibv_destroy_cq(cb));
	sv_end_close(&a);
	sv_end_close(&b);
	region_free(ba, 8);
	region_free(bb, 8);
}

/* --- implicit ODP ------------------------------------------------------- */

/* One implicit MR on each side: the initiator's lkey over any buffer of
 * its own, the target's rkey over any address of the process, memory
 * nobody registered otherwise (fresh pages, the heap, a static). */
SV_TEST(odp_implicit_remote_write_read_atomic)
{
	static uint64_t counter = 1000;
	struct ibv_mr *ia, *ib;
	uint8_t *r = region(8), *heap = malloc(3 * PAGE), *mine;
	struct sv_pair p;

	ASSERT_NOT_NULL(heap);
	odp_pair(&p, IBV_ACCESS_LOCAL_WRITE);
	ia = ibv_reg_mr(p.a.pd, NULL, SIZE_MAX, ODP_ALL);
	ib = ibv_reg_mr(p.b.pd, NULL, SIZE_MAX, ODP_ALL);
	ASSERT_TRUE(ia && ib);
	mine = malloc(4 * PAGE); /* the initiator's, never registered */
	ASSERT_NOT_NULL(mine);

	sv_fill(mine, 2 * PAGE + 7, 11);
	ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_WRITE, mine, 2 * PAGE + 7,
			    ia->lkey, (uintptr_t)(r + 3 * PAGE + 5), ib->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 1);
	ASSERT_EQ(-1, sv_check(r + 3 * PAGE + 5, 2 * PAGE + 7, 11));
	ASSERT_ALL(r, 3 * PAGE + 5, 0); /* nothing before it */

	sv_fill(heap, 3 * PAGE, 12);
	memset(mine, 0, 4 * PAGE);
	ASSERT_OK(post_rdma(&p.a, 2, IBV_WR_RDMA_READ, mine + 1, 3 * PAGE,
			    ia->lkey, (uintptr_t)heap, ib->rkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	ASSERT_EQ(-1, sv_check(mine + 1, 3 * PAGE, 12));

	ASSERT_OK(post_atomic(&p.a, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, mine,
			      ia->lkey, (uintptr_t)&counter, ib->rkey, 5, 0));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 3);
	ASSERT_EQ(1000, *(uint64_t *)mine);
	ASSERT_OK(post_atomic(&p.a, 4, IBV_WR_ATOMIC_CMP_AND_SWP, mine + 8,
			      ia->lkey, (uintptr_t)&counter, ib->rkey, 1005,
			      9));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 4);
	ASSERT_EQ(1005, *(uint64_t *)(mine + 8));
	ASSERT_EQ(9, __atomic_load_n(&counter, __ATOMIC_SEQ_CST));

	/* a send through the implicit lkey into a receive through it */
	sv_fill(mine, 3000, 13);
	ASSERT_OK(post_recv_sge(&p.b, 5, heap, 3 * PAGE, ib->lkey));
	ASSERT_OK(post_send_sge(&p.a, 6, mine, 3000, ia->lkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 6);
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 5);
	ASSERT_EQ(-1, sv_check(heap, 3000, 13));

	ASSERT_OK(ibv_dereg_mr(ia));
	ASSERT_OK(ibv_dereg_mr(ib));
	sv_pair_close(&p);
	free(mine);
	free(heap);
	region_free(r, 8);
}

/* An implicit rkey at an address not mapped with the access: op at
 * target completes want, the memory unchanged, nothing at the target. */
static void implicit_bad_case(enum ibv_wr_opcode op, int prot,
			      enum ibv_wc_status want)
{
	uint8_t *r = region(2);
	struct ibv_mr *ib;
	struct sv_pair p;
	int rc;

	memset(r, 0x5c, 2 * PAGE);
	ASSERT_OK(mprotect(r, 2 * PAGE, prot));
	odp_pair(&p, ODP_ALL);
	ib = ibv_reg_mr(p.b.pd, NULL, SIZE_MAX, ODP_ALL);
	ASSERT_NOT_NULL(ib);
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP)
		rc = post_atomic(&p.a, 1, op, p.a.buf, p.a.mr->lkey,
				 (uintptr_t)(r + 8), ib->rkey,
				 0x5c5c5c5c5c5c5c5cull, 1);
	else
		rc = post_rdma(&p.a, 1, op, p.a.buf, PAGE, p.a.mr->lkey,
			       (uintptr_t)(r + 100), ib->rkey);
	ASSERT_OK(rc);
	EXPECT_WC(p.a.scq, want, 1);
	NO_WC(p.b.rcq, 0);
	ASSERT_OK(ibv_dereg_mr(ib));
	sv_pair_close(&p);
	ASSERT_OK(mprotect(r, 2 * PAGE, PROT_READ));
	ASSERT_ALL(r, 2 * PAGE, 0x5c);
	region_free(r, 2);
}

SV_TEST(odp_implicit_bounds)
{
	/* read-only: readable, not writable */
	implicit_bad_case(IBV_WR_RDMA_WRITE, PROT_READ, IBV_WC_REM_ACCESS_ERR);
	implicit_bad_case(IBV_WR_ATOMIC_CMP_AND_SWP, PROT_READ,
			  IBV_WC_REM_ACCESS_ERR);
	implicit_bad_case(IBV_WR_RDMA_READ, PROT_READ, IBV_WC_SUCCESS);
	/* PROT_NONE: neither */
	implicit_bad_case(IBV_WR_RDMA_READ, PROT_NONE, IBV_WC_REM_ACCESS_ERR);
	implicit_bad_case(IBV_WR_RDMA_WRITE, PROT_NONE, IBV_WC_REM_ACCESS_ERR);
}

/* Page 0, the top of user space, non-canonical and kernel addresses: an
 * error completion, never a signal (the implicit MR covers them all). */
SV_TEST(odp_implicit_unmapped_addresses)
{
	static const uint64_t at[] = {0,
				      16,
				      0x800000000000ull - PAGE,
				      0x7ffffffffffff000ull,
				      0xffff800000000000ull,
				      0xfffffffffffff000ull};

	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		struct ibv_mr *ib;
		struct sv_pair p;

		odp_pair(&p, ODP_ALL);
		ib = ibv_reg_mr(p.b.pd, NULL, SIZE_MAX, ODP_ALL);
		ASSERT_NOT_NULL(ib);
		ASSERT_OK(post_rdma(
			&p.a, i, i % 2 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
			p.a.buf, 64, p.a.mr->lkey, at[i], ib->rkey));
		EXPECT_WC(p.a.scq, IBV_WC_REM_ACCESS_ERR, i);
		ASSERT_OK(ibv_dereg_mr(ib));
		sv_pair_close(&p);
	}
}

/* --- ibv_advise_mr ------------------------------------------------------ */

/* Prefetch makes pages present (write: writable) and changes no byte;
 * NO_FAULT faults nothing; without FLUSH the same, best effort. */
SV_TEST(odp_advise_mr_prefetch)
{
	uint8_t *r = region(16);
	struct ibv_mr *mr, *imr;
	struct ibv_sge sg;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	mr = ibv_reg_mr(e.pd, r, 16 * PAGE, ODP_ALL);
	imr = ibv_reg_mr(e.pd, NULL, SIZE_MAX, ODP_ALL);
	ASSERT_TRUE(mr && imr);
	memset(r, 0x77, 100);
	ASSERT_EQ(1, resident(r, 16));
	sg = (struct ibv_sge){(uintptr_t)r + 10, 4 * PAGE - 10, mr->lkey};
	ASSERT_OK(ibv_advise_mr(e.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1));
	ASSERT_EQ(4, resident(r, 4));
	ASSERT_ALL(r, 100, 0x77);
	ASSERT_ALL(r + 100, 4 * PAGE - 100, 0);
	sg = (struct ibv_sge){(uintptr_t)r + 4 * PAGE, 2 * PAGE, mr->lkey};
	ASSERT_OK(ibv_advise_mr(e.pd, IBV_ADVISE_MR_ADVICE_PREFETCH,
				IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1));
	ASSERT_EQ(2, resident(r + 4 * PAGE, 2));
	sg = (struct ibv_sge){(uintptr_t)r + 6 * PAGE, 2 * PAGE, mr->lkey};
	ASSERT_OK(ibv_advise_mr(e.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
				IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1));
	ASSERT_OK(ibv_advise_mr(e.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0,
				&sg, 1));
	ASSERT_EQ(0, resident(r + 6 * PAGE, 2));
	/* through the implicit MR, without FLUSH, two SGEs */
	struct ibv_sge two[2] = {{(uintptr_t)r + 8 * PAGE, PAGE, imr->lkey},
				 {(uintptr_t)r + 12 * PAGE, PAGE, mr->lkey}};
	ASSERT_OK(ibv_advise_mr(e.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0,
				two, 2));
	ASSERT_EQ(1, resident(r + 8 * PAGE, 1));
	ASSERT_EQ(1, resident(r + 12 * PAGE, 1));
	ASSERT_EQ(0, resident(r + 9 * PAGE, 3));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_dereg_mr(imr));
	sv_end_close(&e);
	region_free(r, 16);
}

/* Every refusal of ibv_advise_mr (its man page, mlx5's answers), and
 * memory that cannot be faulted in. */
SV_TEST(odp_advise_mr_errors)
{
	const uint32_t F = IBV_ADVISE_MR_FLAG_FLUSH;
	const enum ibv_advise_mr_advice
		PF = IBV_ADVISE_MR_ADVICE_PREFETCH,
		PW = IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
		NF = IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT;
	uint8_t *r = region(4), *r2 = region(1);
	struct ibv_mr *mr, *pinned, *ro, *other;
	struct ibv_pd *pd2;
	struct ibv_mw *mw;
	struct ibv_sge sg;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	pd2 = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(pd2);
	mr = ibv_reg_mr(e.pd, r, 4 * PAGE, ODP_ALL | IBV_ACCESS_MW_BIND);
	/* elsewhere: a pinned MR with local write moves its pages */
	pinned = ibv_reg_mr(e.pd, r2, PAGE, IBV_ACCESS_LOCAL_WRITE);
	ro = ibv_reg_mr(e.pd, r, 4 * PAGE,
			IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ);
	other = ibv_reg_mr(pd2, r, 4 * PAGE, ODP_ALL);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_TRUE(mr && pinned && ro && other && mw);
	sg = (struct ibv_sge){(uintptr_t)r, PAGE, mr->lkey};

	ASSERT_EQ(EINVAL, ibv_advise_mr(e.pd, PF, 2, &sg, 1)); /* flags */
	ASSERT_EQ(EINVAL, ibv_advise_mr(e.pd, PF, F | 4, &sg, 1));
	ASSERT_EQ(EOPNOTSUPP,
		  ibv_advise_mr(e.pd, (enum ibv_advise_mr_advice)3, F, &sg, 1));
	ASSERT_EQ(EINVAL, ibv_advise_mr(e.pd, PF, F, &sg, 0));
	ASSERT_EQ(EINVAL, ibv_advise_mr(e.pd, PF, F, NULL, 1));
	/* not an ODP MR of this PD: ENOENT synchronous, EINVAL queued */
	sg = (struct ibv_sge){(uintptr_t)r2, PAGE, pinned->lkey};
	ASSERT_EQ(ENOENT, ibv_advise_mr(e.pd, PF, F, &sg, 1));
	ASSERT_EQ(EINVAL, ibv_advise_mr(e.pd, PF, 0, &sg, 1));
	sg = (struct ibv_sge){(uintptr_t)r, PAGE, other->lkey};
	ASSERT_EQ(ENOENT, ibv_advise_mr(e.pd, PF, F, &sg, 1));
	sg.lkey = mr->lkey ^ 0x55aa0000;
	ASSERT_EQ(ENOENT, ibv_advise_mr(e.pd, NF, F, &sg, 1));
	sg.lkey = mw->rkey; /* a window's key */
	ASSERT_EQ(EINVAL, ibv_advise_mr(e.pd, PF, F, &sg, 1));
	/* write advice on an MR nobody may write */
	sg.lkey = ro->lkey;
	ASSERT_EQ(EPERM, ibv_advise_mr(e.pd, PW, F, &sg, 1));
	/* outside the MR */
	sg = (struct ibv_sge){(uintptr_t)r - 1, 2, mr->lkey};
	ASSERT_EQ(EFAULT, ibv_advise_mr(e.pd, PF, F, &sg, 1));
	sg = (struct ibv_sge){(uintptr_t)r + 3 * PAGE, PAGE + 1, mr->lkey};
	ASSERT_EQ(EFAULT, ibv_advise_mr(e.pd, PW, 0, &sg, 1));
	/* one bad SGE after a good one: nothing done */
	struct ibv_sge two[2] = {{(uintptr_t)r, PAGE, mr->lkey},
				 {(uintptr_t)r2, PAGE, pinned->lkey}};
	ASSERT_EQ(ENOENT, ibv_advise_mr(e.pd, PW, F, two, 2));
	ASSERT_EQ(0, resident(r, 4));
	sg = (struct ibv_sge){(uintptr_t)r, PAGE, ro->lkey};
	ASSERT_OK(ibv_advise_mr(e.pd, PF, F, &sg, 1)); /* reading is fine */
	/* memory that cannot be faulted in: EFAULT when synchronous */
	ASSERT_OK(mprotect(r, PAGE, PROT_READ));
	ASSERT_OK(mprotect(r + 2 * PAGE, PAGE, PROT_NONE));
	sg = (struct ibv_sge){(uintptr_t)r, PAGE, mr->lkey};
	ASSERT_OK(ibv_advise_mr(e.pd, PF, F, &sg, 1));
	ASSERT_EQ(EFAULT, ibv_advise_mr(e.pd, PW, F, &sg, 1));
	ASSERT_OK(ibv_advise_mr(e.pd, PW, 0, &sg, 1)); /* best effort */
	sg = (struct ibv_sge){(uintptr_t)r + PAGE, 2 * PAGE, mr->lkey};
	ASSERT_EQ(EFAULT, ibv_advise_mr(e.pd, PF, F, &sg, 1));
	ASSERT_OK(ibv_advise_mr(e.pd, PF, 0, &sg, 1));
	ASSERT_OK(ibv_advise_mr(e.pd, NF, F, &sg, 1)); /* faults nothing */
	ASSERT_EQ(1, resident(r + PAGE, 1));

	ASSERT_OK(ibv_dealloc_mw(mw));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_dereg_mr(pinned));
	ASSERT_OK(ibv_dereg_mr(ro));
	ASSERT_OK(ibv_dereg_mr(other));
	ASSERT_OK(ibv_dealloc_pd(pd2));
	sv_end_close(&e);
	ASSERT_OK(mprotect(r, PAGE, PROT_READ | PROT_WRITE));
	region_free(r, 4);
	region_free(r2, 1);
}
