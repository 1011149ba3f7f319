// SPDX-License-Identifier: MIT
/*
 * ibv_import_mr across processes (issue 28 item 6), rdma-core's
 * tests/test_shared_pd.py flow with the importer a forked child: the
 * parent registers MRs, the child imports the device, the PD and the MR
 * on memory both map shared (MAP_SHARED, inherited), and its QP on the
 * imported PD uses the MR: the lkey in its own sends, the rkey for a
 * peer's RDMA write and read, which the parent then sees.  Every error:
 * private memory (the child's copy is not the parent's memory), an
 * unknown handle, the MR of another PD, a PD that is not the import,
 * the same MR twice, rereg; and unimport gives the keys back.
 * ibv_import_dm: in one process a handle of the same DM (bytes, MRs,
 * free through any handle, unimport); another process's: mapped
 * (conf_import_dm.c).
 * The same with another program that was passed the cmd_fd and a memfd
 * and maps it at the same address (not at another offset).  A lying
 * owner (wire/import.h) gets nothing the importer does not map.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "import.h" /* the wire format, for the lying owner */
#include "pair.h"

#define RW_ACCESS                                           \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ)
#define SHARED_LEN 65536

/* One RDMA write or read of e: its buf[off, off+len) and raddr. */
static void rdma(struct sv_end *e, enum ibv_wr_opcode op, uint32_t off,
		 uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sg = {.addr = (uintptr_t)e->buf + off,
			     .length = len,
			     .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 9,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	ASSERT_OK(ibv_post_send(e->qp, &wr, &bad));
	EXPECT_WC(e->scq, IBV_WC_SUCCESS, 9);
}

/* The parent's objects, as the forked child sees them (copies). */
static struct ibv_context *par_ctx;
static struct ibv_pd *par_pd, *par_pd2;
static struct ibv_mr *par_shared_mr, *par_priv_mr, *par_other_mr;
static struct ibv_dm *par_dm;
static uint8_t *shared; /* MAP_SHARED: the same pages in both */

static void expect_import_fails(struct ibv_pd *pd, uint32_t handle, int err)
{
	errno = 0;
	ASSERT_NULL(ibv_import_mr(pd, handle));
	ASSERT_EQ(err, errno);
}

static int child_imports(void)
{
	struct ibv_context *ic = ibv_import_device(dup(par_ctx->cmd_fd));
	struct ibv_pd *ipd, *ipd2, *spare;
	struct ibv_mr *imr, *imr2, *bmr;
	uint8_t *bbuf = aligned_alloc(4096, SHARED_LEN);
	struct sv_end a, b;

	ASSERT_NOT_NULL(ic);
	ASSERT_NOT_NULL(bbuf);
	ipd = ibv_import_pd(ic, par_pd->handle);
	ASSERT_NOT_NULL(ipd);
	ipd2 = ibv_import_pd(ic, par_pd2->handle);
	ASSERT_NOT_NULL(ipd2);
	spare = ibv_alloc_pd(ic);
	ASSERT_NOT_NULL(spare);

	/* the errors, before and after the import */
	expect_import_fails(ipd, par_priv_mr->handle, EOPNOTSUPP);
	expect_import_fails(ipd, par_other_mr->handle, EINVAL);
	expect_import_fails(ipd, par_shared_mr->handle ^ 1, EINVAL);
	expect_import_fails(ipd2, par_shared_mr->handle, EINVAL);
	expect_import_fails(spare, par_shared_mr->handle, EINVAL);
	/* the parent's device memory: its own memfd, mapped here
	 * (conf_import_dm.c tries it whole) */
	{
		struct ibv_dm *idm = ibv_import_dm(ic, par_dm->handle);
		uint8_t bytes[64];

		ASSERT_NOT_NULL(idm);
		ASSERT_OK(ibv_memcpy_from_dm(bytes, idm, 0, sizeof(bytes)));
		ASSERT_EQ(-1, sv_check(bytes, sizeof(bytes), 64));
		ibv_unimport_dm(idm);
	}
	errno = 0;
	ASSERT_NULL(ibv_import_dm(ic, par_dm->handle + 1000));
	ASSERT_EQ(EINVAL, errno);
	imr = ibv_import_mr(ipd, par_shared_mr->handle);
	ASSERT_NOT_NULL(imr);
	ASSERT_EQ(par_shared_mr->lkey, imr->lkey);
	ASSERT_EQ(par_shared_mr->rkey, imr->rkey);
	ASSERT_EQ((uintptr_t)shared, (uintptr_t)imr->addr);
	ASSERT_EQ(SHARED_LEN, imr->length);
	ASSERT_EQ(par_shared_mr->handle, imr->handle);
	ASSERT_TRUE(imr->pd == ipd);
	expect_import_fails(ipd, par_shared_mr->handle, EBUSY);
	/* the other PD's import takes its MR */
	imr2 = ibv_import_mr(ipd2, par_other_mr->handle);
	ASSERT_NOT_NULL(imr2);
	ASSERT_TRUE(imr2->pd == ipd2);
	ibv_unimport_mr(imr2);
	errno = 0;
	ASSERT_TRUE(ibv_rereg_mr(imr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				 IBV_ACCESS_LOCAL_WRITE) != 0);
	ASSERT_EQ(EOPNOTSUPP, errno);

	/* a QP on the imported PD with the MR, a peer on a PD of its own */
	bmr = ibv_reg_mr(spare, bbuf, SHARED_LEN, RW_ACCESS);
	ASSERT_NOT_NULL(bmr);
	sv_end_on_objects(&a, ic, ipd, imr, shared);
	sv_end_on_objects(&b, ic, spare, bmr, bbuf);
	sv_end_connect(&a, b.qp->qp_num, b.o.psn);
	sv_end_connect(&b, a.qp->qp_num, a.o.psn);
	/* the lkey: a sends the parent's bytes from the shared pages */
	ASSERT_OK(sv_end_recv(&b, 2, 0, 1000));
	ASSERT_OK(sv_end_send(&a, 1, 0, 1000, 0));
	EXPECT_WC(a.scq, IBV_WC_SUCCESS, 1);
	EXPECT_WC(b.rcq, IBV_WC_SUCCESS, 2);
	ASSERT_EQ(-1, sv_check(bbuf, 1000, 61));
	/* the rkey: the peer writes and reads the parent's memory */
	sv_fill(bbuf + 8192, 4096, 62);
	rdma(&b, IBV_WR_RDMA_WRITE, 8192, 4096, (uintptr_t)imr->addr + 8192,
	     imr->rkey);
	ASSERT_EQ(-1, sv_check(shared + 8192, 4096, 62));
	rdma(&b, IBV_WR_RDMA_READ, 16384, 2048, (uintptr_t)imr->addr + 16384,
	     imr->rkey);
	ASSERT_EQ(-1, sv_check(bbuf + 16384, 2048, 63));
	/* out of the MR: the peer's request is refused */
	{
		struct ibv_sge sg = {.addr = (uintptr_t)bbuf,
				     .length = 64,
				     .lkey = bmr->lkey};
		struct ibv_send_wr wr = {.wr_id = 10,
					 .sg_list = &sg,
					 .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE},
				   *bad;

		wr.wr.rdma.remote_addr = (uintptr_t)imr->addr + SHARED_LEN - 32;
		wr.wr.rdma.rkey = imr->rkey;
		ASSERT_OK(ibv_post_send(b.qp, &wr, &bad));
		EXPECT_WC(b.scq, IBV_WC_REM_ACCESS_ERR, 10);
	}
	sv_end_off_objects(&a);
	sv_end_off_objects(&b);

	/* unimport gives the key back: imported again, then deregistered */
	ibv_unimport_mr(imr);
	imr2 = ibv_import_mr(ipd, par_shared_mr->handle);
	ASSERT_NOT_NULL(imr2);
	ASSERT_EQ(par_shared_mr->rkey, imr2->rkey);
	ASSERT_OK(ibv_dereg_mr(imr2));

	ASSERT_OK(ibv_dereg_mr(bmr));
	ibv_unimport_pd(ipd);
	ibv_unimport_pd(ipd2);
	ASSERT_OK(ibv_dealloc_pd(spare));
	ASSERT_OK(ibv_close_device(ic));
	free(bbuf);
	return 0;
}

SV_TEST(import_mr_shared_memory_in_forked_child)
{
	char lines[8][SV_CHILD_LINE];
	uint8_t *priv = aligned_alloc(4096, 8192), *other;
	int n = 0;

	sv_skip_forked_child_under_sanitizer();
	ASSERT_NOT_NULL(priv);
	shared = mmap(NULL, SHARED_LEN, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(shared != MAP_FAILED);
	other = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(other != MAP_FAILED);
	sv_fill(shared, 1000, 61);
	sv_fill(shared + 16384, 2048, 63);
	{
		struct ibv_device **list = ibv_get_device_list(NULL);

		ASSERT_NOT_NULL(list);
		ASSERT_NOT_NULL(list[0]);
		par_ctx = ibv_open_device(list[0]);
		ibv_free_device_list(list);
		ASSERT_NOT_NULL(par_ctx);
	}
	par_pd = ibv_alloc_pd(par_ctx);
	par_pd2 = ibv_alloc_pd(par_ctx);
	ASSERT_NOT_NULL(par_pd);
	ASSERT_NOT_NULL(par_pd2);
	par_shared_mr = ibv_reg_mr(par_pd, shared, SHARED_LEN, RW_ACCESS);
	ASSERT_NOT_NULL(par_shared_mr);
	/* remote access: moved onto the arena, which the child forgets */
	par_priv_mr = ibv_reg_mr(par_pd, priv, 8192, RW_ACCESS);
	ASSERT_NOT_NULL(par_priv_mr);
	/* shared too, on the other PD: imported on that PD's import only */
	par_other_mr = ibv_reg_mr(par_pd2, other, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(par_other_mr);
	{
		struct ibv_alloc_dm_attr da = {.length = 4096};

		uint8_t b[64];

		par_dm = ibv_alloc_dm(par_ctx, &da);
		ASSERT_NOT_NULL(par_dm);
		sv_fill(b, sizeof(b), 64);
		ASSERT_OK(ibv_memcpy_to_dm(par_dm, 0, b, sizeof(b)));
	}
	ASSERT_EQ(0, sv_child_env("SV_IMPORT_MEM_CHILD", "1", child_imports,
				  lines, 8, &n));
	/* what the child's peer wrote through the imported rkey */
	ASSERT_EQ(-1, sv_check(shared + 8192, 4096, 62));
	/* the original is untouched by the child's unimport and dereg */
	ASSERT_OK(ibv_dereg_mr(par_shared_mr));
	ASSERT_OK(ibv_dereg_mr(par_priv_mr));
	ASSERT_OK(ibv_dereg_mr(par_other_mr));
	ASSERT_OK(ibv_free_dm(par_dm));
	ASSERT_OK(ibv_dealloc_pd(par_pd));
	ASSERT_OK(ibv_dealloc_pd(par_pd2));
	ASSERT_OK(ibv_close_device(par_ctx));
	ASSERT_OK(munmap(shared, SHARED_LEN));
	ASSERT_OK(munmap(other, 4096));
	free(priv);
}

/* ---- another program: the cmd_fd and a memfd passed, mapped there ---- */

/* The memfd mapped at addr (MAP_FIXED_NOREPLACE), from offset off. */
static uint8_t *map_at(int mfd, uintptr_t addr, off_t off)
{
	void *p = mmap((void *)addr, SHARED_LEN, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_FIXED_NOREPLACE, mfd, off);

	if (p != MAP_FAILED && p != (void *)addr) { /* flag not known */
		munmap(p, SHARED_LEN);
		p = MAP_FAILED;
	}
	return p == MAP_FAILED ? NULL : p;
}

/* argv: sync socket, cmd_fd, memfd, address, PD and MR handles. */
SV_HELPER(import_mem_helper)
{
	int s = atoi(argv[0]), cfd = atoi(argv[1]), mfd = atoi(argv[2]);
	uintptr_t addr = strtoull(argv[3], NULL, 0);
	uint32_t pdh = (uint32_t)atoi(argv[4]), mrh = (uint32_t)atoi(argv[5]);
	uint8_t *bbuf = aligned_alloc(4096, SHARED_LEN), *m;
	struct ibv_context *ic = ibv_import_device(cfd);
	struct ibv_pd *ipd, *spare;
	struct ibv_mr *imr, *bmr;
	struct sv_end a, b;
	char done = 1;

	ASSERT_NOT_NULL(ic);
	ASSERT_NOT_NULL(bbuf);
	ipd = ibv_import_pd(ic, pdh);
	ASSERT_NOT_NULL(ipd);
	/* not mapped here yet: out of reach */
	expect_import_fails(ipd, mrh, EOPNOTSUPP);
	/* mapped there, but another part of the memfd: out of reach */
	m = map_at(mfd, addr, 4096);
	ASSERT_NOT_NULL(m);
	expect_import_fails(ipd, mrh, EOPNOTSUPP);
	ASSERT_OK(munmap(m, SHARED_LEN));
	/* the same pages at the same address: the MR */
	m = map_at(mfd, addr, 0);
	ASSERT_NOT_NULL(m);
	imr = ibv_import_mr(ipd, mrh);
	ASSERT_NOT_NULL(imr);
	ASSERT_EQ(addr, (uintptr_t)imr->addr);
	spare = ibv_alloc_pd(ic);
	ASSERT_NOT_NULL(spare);
	bmr = ibv_reg_mr(spare, bbuf, SHARED_LEN, RW_ACCESS);
	ASSERT_NOT_NULL(bmr);
	sv_end_on_objects(&a, ic, ipd, imr, m);
	sv_end_on_objects(&b, ic, spare, bmr, bbuf);
	sv_end_connect(&a, b.qp->qp_num, b.o.psn);
	sv_end_connect(&b, a.qp->qp_num, a.o.psn);
	ASSERT_OK(sv_end_recv(&b, 2, 0, 3000));
	ASSERT_OK(sv_end_send(&a, 1, 0, 3000, 0));
	EXPECT_WC(a.scq, IBV_WC_SUCCESS, 1);
	EXPECT_WC(b.rcq, IBV_WC_SUCCESS, 2);
	ASSERT_EQ(-1, sv_check(bbuf, 3000, 91));
	sv_fill(bbuf + 32768, 8192, 92);
	rdma(&b, IBV_WR_RDMA_WRITE, 32768, 8192, addr + 32768, imr->rkey);
	sv_end_off_objects(&a);
	sv_end_off_objects(&b);
	ASSERT_OK(ibv_dereg_mr(imr));
	ASSERT_OK(ibv_dereg_mr(bmr));
	ibv_unimport_pd(ipd);
	ASSERT_OK(ibv_dealloc_pd(spare));
	ASSERT_OK(ibv_close_device(ic));
	ASSERT_EQ(1, write(s, &done, 1));
	free(bbuf);
	return 0;
}

SV_TEST(import_mr_memfd_in_other_program)
{
	struct ibv_context *c = NULL;
	struct ibv_device **list = ibv_get_device_list(NULL);
	char a0[16], a1[16], a2[16], a3[32], a4[16], a5[16], done = 0;
	uintptr_t addr = (uintptr_t)3 << 29; /* 1.5 GiB */
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct sv_proc p;
	uint8_t *m = NULL;
	int sp[2], mfd, d;

	ASSERT_NOT_NULL(list);
	ASSERT_NOT_NULL(list[0]);
	c = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	ASSERT_NOT_NULL(c);
	pd = ibv_alloc_pd(c);
	ASSERT_NOT_NULL(pd);
	/* no CLOEXEC: the helper inherits it */
	mfd = memfd_create("sv_import_mem", 0);
	ASSERT_GE(mfd, 0);
	ASSERT_OK(ftruncate(mfd, 2 * SHARED_LEN));
	/* low in the address space (as conf_odp.c's regions: under 2 GiB,
	 * in ASan's and TSan's application range, where nothing is placed
	 * top-down): free in the helper too, which maps it at the same
	 * address */
	for (int i = 0; i < 64 && !m; i++) {
		m = map_at(mfd, addr, 0);
		if (!m)
			addr += 1 << 22;
	}
	ASSERT_NOT_NULL(m);
	sv_fill(m, 3000, 91);
	mr = ibv_reg_mr(pd, m, SHARED_LEN, RW_ACCESS);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp));
	ASSERT_OK(fcntl(sp[0], F_SETFD, FD_CLOEXEC));
	d = dup(c->cmd_fd); /* no CLOEXEC */
	ASSERT_GE(d, 0);
	snprintf(a0, sizeof(a0), "%d", sp[1]);
	snprintf(a1, sizeof(a1), "%d", d);
	snprintf(a2, sizeof(a2), "%d", mfd);
	snprintf(a3, sizeof(a3), "%#lx", (unsigned long)addr);
	snprintf(a4, sizeof(a4), "%u", pd->handle);
	snprintf(a5, sizeof(a5), "%u", mr->handle);
	sv_proc_start_helper(&p, "import_mem_helper",
			     (char *[]){a0, a1, a2, a3, a4, a5, NULL}, NULL);
	ASSERT_OK(close(sp[1]));
	ASSERT_OK(close(d));
	{
		struct pollfd pf = {.fd = sp[0], .events = POLLIN};

		ASSERT_EQ(1, poll(&pf, 1, 20000));
		(void)!read(sp[0], &done, 1);
	}
	sv_proc_wait(&p, 20000);
	if (!p.exited || p.code)
		fprintf(stderr, "helper said:\n%s%s", p.out, p.err);
	ASSERT_TRUE(p.exited);
	ASSERT_EQ(0, p.code);
	ASSERT_EQ(1, done);
	sv_proc_free(&p);
	/* what the helper's peer wrote through the imported rkey */
	ASSERT_EQ(-1, sv_check(m + 32768, 8192, 92));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_dealloc_pd(pd));
	ASSERT_OK(ibv_close_device(c));
	ASSERT_OK(munmap(m, SHARED_LEN));
	ASSERT_OK(close(mfd));
	ASSERT_OK(close(sp[0]));
}

/* ---- ibv_import_dm in one process ---- */

#define DM_ACCESS                                         \
	(IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | \
	 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

SV_TEST(import_dm_in_process)
{
	struct ibv_alloc_dm_attr da = {.length = 8192};
	struct sv_end_opts o = sv_end_opts_default();
	uint8_t in[256], out[256];
	struct ibv_dm *dm, *idm, *dm2, *idm2;
	struct ibv_context *ic;
	struct ibv_mr *dmr;
	struct sv_pair p;

	o.qp_access = RW_ACCESS;
	sv_pair_open(&p, &o, &o);
	dm = ibv_alloc_dm(p.b.ctx, &da);
	ASSERT_NOT_NULL(dm);
	ic = ibv_import_device(dup(p.b.ctx->cmd_fd));
	ASSERT_NOT_NULL(ic);
	/* errors */
	errno = 0;
	ASSERT_NULL(ibv_import_dm(ic, dm->handle + 1000));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_import_dm(NULL, dm->handle));
	ASSERT_EQ(EINVAL, errno);
	idm = ibv_import_dm(ic, dm->handle);
	ASSERT_NOT_NULL(idm);
	ASSERT_EQ(dm->handle, idm->handle);
	ASSERT_TRUE(idm->context == ic);
	/* the same bytes through either handle, the same bounds */
	sv_fill(in, sizeof(in), 81);
	ASSERT_OK(ibv_memcpy_to_dm(idm, 100, in, sizeof(in)));
	ASSERT_OK(ibv_memcpy_from_dm(out, dm, 100, sizeof(out)));
	ASSERT_OK(memcmp(in, out, sizeof(in)));
	ASSERT_EQ(EFAULT, ibv_memcpy_to_dm(idm, 8192 - 8, in, 16));
	/* an MR on the import: a peer writes into it, the original reads */
	dmr = ibv_reg_dm_mr(p.b.pd, idm, 0, 4096, DM_ACCESS);
	ASSERT_NOT_NULL(dmr);
	sv_fill(p.a.buf, 512, 82);
	rdma(&p.a, IBV_WR_RDMA_WRITE, 0, 512, 1024, dmr->rkey);
	ASSERT_OK(ibv_memcpy_from_dm(out, dm, 1024, 256));
	ASSERT_EQ(-1, sv_check(out, 256, 82));
	/* busy through every handle while an MR is on it */
	ASSERT_EQ(EBUSY, ibv_free_dm(idm));
	ASSERT_EQ(EBUSY, ibv_free_dm(dm));
	ASSERT_OK(ibv_dereg_mr(dmr));
	/* unimport of the original: said, nothing freed */
	ibv_unimport_dm(dm);
	ibv_unimport_dm(NULL);
	ASSERT_OK(ibv_memcpy_from_dm(out, dm, 100, sizeof(out)));
	/* freed through the import: gone for both */
	ASSERT_OK(ibv_free_dm(idm));
	errno = 0;
	ASSERT_NULL(ibv_import_dm(ic, dm->handle));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(EINVAL, ibv_memcpy_from_dm(out, dm, 0, 16));
	errno = 0;
	ASSERT_NULL(ibv_reg_dm_mr(p.b.pd, dm, 0, 4096, DM_ACCESS));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_free_dm(dm)); /* the last handle: the memory goes */
	/* unimport frees the handle only */
	dm2 = ibv_alloc_dm(p.b.ctx, &da);
	ASSERT_NOT_NULL(dm2);
	idm2 = ibv_import_dm(ic, dm2->handle);
	ASSERT_NOT_NULL(idm2);
	ibv_unimport_dm(idm2);
	ASSERT_OK(ibv_memcpy_to_dm(dm2, 0, in, sizeof(in)));
	ASSERT_OK(ibv_free_dm(dm2));
	ASSERT_OK(ibv_close_device(ic));
	sv_pair_close(&p);
}

/* ---- an owner that lies about its MR (wire/import.h) ---- */

/* The other end of a cmd_fd: answers HELLO and PD, and MR with rep and
 * the fd page (its revocation page; none if -1). */
struct liar {
	int fd;
	pthread_mutex_t lock;
	struct sv_imp_rep rep; /* the MR answer: the test sets it */
	int page;
};

/* What the liar's MR answers carry, with SCM_RIGHTS if page >= 0. */
static void liar_send(int fd, const struct sv_imp_rep *r, int page)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)r, .iov_len = sizeof(*r)};
	struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};

	if (page >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		h.msg_control = u.buf;
		h.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &page, sizeof(int));
	}
	(void)!sendmsg(fd, &h, MSG_NOSIGNAL);
}

/* A revocation page as an owner makes one (import.c): a memfd of
 * SV_IMP_PAGE bytes sealed against shrinking, unless the test says. */
static int liar_page(size_t size, unsigned int seals)
{
	int fd = memfd_create("sv_liar_page", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ASSERT_GE(fd, 0);
	ASSERT_OK(ftruncate(fd, (off_t)size));
	if (seals)
		ASSERT_OK(fcntl(fd, F_ADD_SEALS, seals));
	return fd;
}

static void *liar_run(void *arg)
{
	struct liar *l = arg;

	for (;;) {
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct sv_imp_req q;
		struct iovec iov = {.iov_base = &q, .iov_len = sizeof(q)};
		struct msghdr h = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = u.buf,
				   .msg_controllen = sizeof(u.buf)};
		struct pollfd pf = {.fd = l->fd, .events = POLLIN};
		struct sv_imp_rep r = {0};
		struct cmsghdr *c;
		int fd, page = -1;

		if (poll(&pf, 1, 10000) != 1 ||
		    recvmsg(l->fd, &h, MSG_CMSG_CLOEXEC) != sizeof(q))
			return NULL; /* the test closed its end: done */
		c = CMSG_FIRSTHDR(&h);
		if (!c)
			return NULL;
		memcpy(&fd, CMSG_DATA(c), sizeof(fd));
		if (q.op == SV_IMP_MR) {
			pthread_mutex_lock(&l->lock);
			r = l->rep;
			page = l->page;
			pthread_mutex_unlock(&l->lock);
		}
		r.magic = SV_IMP_MAGIC;
		r.version = SV_IMP_VERSION;
		r.op = q.op;
		r.handle = q.handle;
		r.pid = (uint32_t)getpid();
		liar_send(fd, &r, page);
		close(fd);
	}
}

static void liar_says(struct liar *l, const struct sv_imp_rep *r)
{
	pthread_mutex_lock(&l->lock);
	l->rep = *r;
	pthread_mutex_unlock(&l->lock);
}

static void liar_passes(struct liar *l, int page)
{
	pthread_mutex_lock(&l->lock);
	l->page = page;
	pthread_mutex_unlock(&l->lock);
}

SV_TEST(import_mr_lying_owner)
{
	uint8_t *priv = aligned_alloc(4096, 8192), *m;
	struct liar l = {.lock = PTHREAD_MUTEX_INITIALIZER, .page = -1};
	struct sv_imp_rep good = {0}, r;
	struct ibv_context *ic;
	struct ibv_mr *mr, *own;
	struct ibv_pd *ipd;
	struct stat st;
	pthread_t t;
	int p[2], mfd, page, other;
	uint64_t *rp;

	ASSERT_NOT_NULL(priv);
	/* memory this process maps shared: a memfd */
	mfd = memfd_create("sv_import_liar", MFD_CLOEXEC);
	ASSERT_GE(mfd, 0);
	ASSERT_OK(ftruncate(mfd, 16384));
	m = mmap(NULL, 16384, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ASSERT_TRUE(m != MAP_FAILED);
	ASSERT_OK(fstat(mfd, &st));
	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p));
	l.fd = p[1];
	ASSERT_OK(pthread_create(&t, NULL, liar_run, &l));
	ic = ibv_import_device(p[0]);
	ASSERT_NOT_NULL(ic);
	ipd = ibv_import_pd(ic, 5);
	ASSERT_NOT_NULL(ipd);
	good.lkey = good.rkey = 0x1234567;
	good.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	good.addr = (uintptr_t)m + 4096;
	good.iova = good.addr;
	good.length = 8192;
	good.pd_handle = 5;
	good.shared = 1;
	good.dev_major = major(st.st_dev);
	good.dev_minor = minor(st.st_dev);
	good.ino = st.st_ino;
	good.offset = 4096;

	page = liar_page(SV_IMP_PAGE, F_SEAL_SHRINK);
	liar_passes(&l, page);
	/* nonsense: EINVAL */
	for (int i = 0; i < 9; i++) {
		r = good;
		switch (i) {
		case 0:
			r.rkey ^= 1;
			break;
		case 1:
			r.length = 0;
			break;
		case 2:
			r.length = UINT64_MAX - 100;
			break;
		case 3:
			r.lkey = r.rkey = 0x80000001u;
			break; /* a window's */
		case 4:
			r.access |= 1u << 30;
			break;
		case 5:
			r.shared = 7;
			break;
		case 6:
			r.pd_handle = 6;
			break; /* not the imported PD's */
		case 7:	       /* past the revocation page */
			r.word = SV_IMP_PAGE / sizeof(uint64_t);
			break;
		case 8:
			r.zero = 1;
			break;
		}
		liar_says(&l, &r);
		errno = 0;
		ASSERT_NULL(ibv_import_mr(ipd, 9));
		ASSERT_EQ(EINVAL, errno);
	}
	/* memory this process does not map as said: EOPNOTSUPP */
	for (int i = 0; i < 5; i++) {
		r = good;
		switch (i) {
		case 0:
			r.shared = 0;
			break;
		case 1:
			r.offset = 0;
			break;
		case 2:
			r.ino ^= 1;
			break;
		case 3:
			r.dev_minor ^= 1;
			break;
		case 4: /* private memory here, whatever is claimed */
			r.addr = r.iova = (uintptr_t)priv;
			break;
		}
		liar_says(&l, &r);
		errno = 0;
		ASSERT_NULL(ibv_import_mr(ipd, 9));
		ASSERT_EQ(EOPNOTSUPP, errno);
	}
	/* no revocation page, or one we could fault on: EPROTO */
	liar_says(&l, &good);
	for (int i = 0; i < 4; i++) {
		int bad = i == 0   ? -1
			  : i == 1 ? liar_page(SV_IMP_PAGE, 0)
			  : i == 2 ? liar_page(SV_IMP_PAGE / 2, F_SEAL_SHRINK)
				   : socket(AF_UNIX, SOCK_DGRAM, 0);

		liar_passes(&l, bad);
		errno = 0;
		ASSERT_NULL(ibv_import_mr(ipd, 9));
		ASSERT_EQ(EPROTO, errno);
		if (bad >= 0)
			close(bad);
	}
	/* the truth: its memory here, under the keys it names, alive while
	 * its word holds gen */
	liar_passes(&l, page);
	good.word = 3;
	good.gen = 77;
	rp = mmap(NULL, SV_IMP_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, page,
		  0);
	ASSERT_TRUE(rp != MAP_FAILED);
	rp[3] = 77;
	liar_says(&l, &good);
	mr = ibv_import_mr(ipd, 9);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(good.lkey, mr->lkey);
	ASSERT_EQ(good.addr, (uintptr_t)mr->addr);
	ASSERT_OK(ibv_dereg_mr(mr));
	/* one owner, one page: another one is refused */
	other = liar_page(SV_IMP_PAGE, F_SEAL_SHRINK);
	liar_passes(&l, other);
	errno = 0;
	ASSERT_NULL(ibv_import_mr(ipd, 9));
	ASSERT_EQ(EPROTO, errno);
	ASSERT_OK(close(other));
	liar_passes(&l, page);
	/* a key whose slot is taken here by one of this process's: EBUSY */
	own = ibv_reg_mr(ipd, priv, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(own);
	r = good;
	r.lkey = r.rkey =
		(own->lkey & 0x1ffff) | ((own->lkey ^ 0x20000) & 0x7ffe0000);
	liar_says(&l, &r);
	errno = 0;
	ASSERT_NULL(ibv_import_mr(ipd, 9));
	ASSERT_EQ(EBUSY, errno);
	/* read-only here, while the MR writes: refused as a registration */
	ASSERT_OK(mprotect(m, 16384, PROT_READ));
	liar_says(&l, &good);
	errno = 0;
	ASSERT_NULL(ibv_import_mr(ipd, 9));
	ASSERT_EQ(EFAULT, errno);
	ASSERT_OK(ibv_dereg_mr(own));
	ibv_unimport_pd(ipd);
	ASSERT_OK(ibv_close_device(ic)); /* closes p[0]: the liar ends */
	ASSERT_OK(pthread_join(t, NULL));
	ASSERT_OK(close(p[1]));
	ASSERT_OK(munmap(m, 16384));
	ASSERT_OK(close(mfd));
	ASSERT_OK(munmap(rp, SV_IMP_PAGE));
	ASSERT_OK(close(page));
	free(priv);
}
