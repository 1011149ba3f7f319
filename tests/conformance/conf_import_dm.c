// SPDX-License-Identifier: MIT
/*
 * ibv_import_dm across processes (issue 28 item 6): a process that was
 * passed the owner's cmd_fd imports its device memory, and the bytes are
 * the owner's both ways (ibv_memcpy_to_dm / _from_dm on either side), an
 * MR the importer registers on the import (on the imported PD) takes a
 * third QP's RDMA write and read into the same memory.  The first import
 * is refused while the owner has MRs on the DM (EBUSY: the DM moves off
 * the arena, verbs/dm.c).  The owner's ibv_free_dm, or its death, makes
 * the importer's next memcpy and registration EINVAL and its MR's rkey a
 * remote access error.  An unknown handle is EINVAL; a lying owner's
 * answer (a memfd of the wrong size or seals, or no memfd, or fields we
 * never send) EPROTO, with no fd kept.
 *
 * The owner is a child forked before this process has any thread (each
 * SV_TEST is its own process), as in conf_import_revoke.c: it passes its
 * cmd_fd back with SCM_RIGHTS and does what the test says on a control
 * socket.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "import.h" /* the wire format, for the lying owner */
#include "pair.h"

#define DM_LEN 6000 /* not whole pages: its memfd has two */
#define DM_MAP 8192
#define DM_ACCESS                                         \
	(IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | \
	 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define RW_ACCESS                                           \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ)
#define BUF_LEN 16384
#define WAIT_MS 10000

struct hello {
	uint32_t pd, dm;
};

struct owner {
	pid_t pid;
	int ctl;    /* our end of the control socket */
	int cmd_fd; /* the owner's context's, passed to us */
	struct hello h;
};

/* Whether dm's [off, off+len) holds seed's pattern. */
static bool dm_is(struct ibv_dm *dm, uint64_t off, size_t len, uint32_t seed)
{
	uint8_t *b = malloc(len);
	bool ok = b && !ibv_memcpy_from_dm(b, dm, off, len) &&
		  sv_check(b, len, seed) == -1;

	free(b);
	return ok;
}

static int dm_fill(struct ibv_dm *dm, uint64_t off, size_t len, uint32_t seed)
{
	uint8_t *b = malloc(len);
	int err = b ? 0 : ENOMEM;

	if (b) {
		sv_fill(b, len, seed);
		err = ibv_memcpy_to_dm(dm, off, b, len);
	}
	free(b);
	return err;
}

/* The owner's commands: one byte each, its answer one byte ('e': not
 * as expected). */
static char owner_cmd(char cmd, struct ibv_pd *pd, struct ibv_dm *dm,
		      struct ibv_mr **mr)
{
	switch (cmd) {
	case 'D': /* its MR on the DM goes */
		return ibv_dereg_mr(*mr) ? 'e' : 'd';
	case 'C': /* what the importer wrote */
		return dm_is(dm, 4096, 1024, 82) ? 'c' : 'e';
	case 'W': /* new bytes for the importer to read */
		return dm_fill(dm, 0, 1024, 83) ? 'e' : 'w';
	case 'R': /* what the importer's peer wrote by RDMA */
		return dm_is(dm, 2048, 512, 84) ? 'r' : 'e';
	case 'M': /* moved off the arena: still registers, and is busy */
		*mr = ibv_reg_dm_mr(pd, dm, 0, DM_LEN, DM_ACCESS);
		if (!*mr || ibv_free_dm(dm) != EBUSY || ibv_dereg_mr(*mr))
			return 'e';
		return 'm';
	case 'F':
		return ibv_free_dm(dm) ? 'e' : 'f';
	default:
		return 'n';
	}
}

/* The owner's side: any failure is its exit code. */
static void owner_run(int ctl)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *c =
		list && list[0] ? ibv_open_device(list[0]) : NULL;
	struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;
	struct ibv_alloc_dm_attr da = {.length = DM_LEN};
	struct ibv_dm *dm = pd ? ibv_alloc_dm(c, &da) : NULL;
	struct ibv_mr *mr = NULL;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct hello h;
	struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	char cmd;

	if (!dm || dm_fill(dm, 0, DM_LEN, 81))
		_exit(2);
	/* an MR on it: the first import from another process is refused */
	mr = ibv_reg_dm_mr(pd, dm, 0, 4096, DM_ACCESS);
	if (!mr)
		_exit(2);
	h = (struct hello){pd->handle, dm->handle};
	memset(&u, 0, sizeof(u));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &c->cmd_fd, sizeof(int));
	if (sendmsg(ctl, &m, 0) != sizeof(h))
		_exit(3);
	while (read(ctl, &cmd, 1) == 1) {
		char ok;

		if (cmd == 'X')
			_exit(0); /* dies with its DM allocated */
		ok = owner_cmd(cmd, pd, dm, &mr);
		if (write(ctl, &ok, 1) != 1)
			_exit(4);
	}
	_exit(0);
}

/* Forks the owner (before any thread of ours) and takes its hello. */
static void owner_start(struct owner *o)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = &o->h, .iov_len = sizeof(o->h)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct pollfd p;
	int sp[2];

	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp));
	o->pid = fork();
	ASSERT_GE(o->pid, 0);
	if (!o->pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sp[0]);
		owner_run(sp[1]);
	}
	close(sp[1]);
	o->ctl = sp[0];
	p = (struct pollfd){.fd = o->ctl, .events = POLLIN};
	ASSERT_EQ(1, poll(&p, 1, WAIT_MS));
	ASSERT_EQ((ssize_t)sizeof(o->h), recvmsg(o->ctl, &m, MSG_CMSG_CLOEXEC));
	ASSERT_NOT_NULL(CMSG_FIRSTHDR(&m));
	memcpy(&o->cmd_fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
}

/* The owner does cmd; its answer, within WAIT_MS (0: it died). */
static char owner_do(struct owner *o, char cmd)
{
	struct pollfd p = {.fd = o->ctl, .events = POLLIN};
	char r = 0;
	ssize_t n;

	ASSERT_EQ(1, write(o->ctl, &cmd, 1));
	ASSERT_EQ(1, poll(&p, 1, WAIT_MS));
	n = read(o->ctl, &r, 1);
	ASSERT_GE(n, 0);
	return n ? r : 0;
}

static void owner_end(struct owner *o)
{
	int st;

	if (o->pid > 0) {
		kill(o->pid, SIGKILL);
		ASSERT_EQ(o->pid, waitpid(o->pid, &st, 0));
	}
	close(o->ctl);
}

/* This process's side: the imports, an MR on the imported DM, and a
 * pair of QPs (a on the imported PD, b on a PD of its own) whose b
 * reaches the DM's MR by RDMA. */
struct importer {
	struct ibv_context *ic;
	struct ibv_pd *ipd, *spare;
	struct ibv_dm *idm;
	struct ibv_mr *dmr, *amr, *bmr;
	uint8_t *abuf, *bbuf;
	struct sv_end a, b;
};

static void import_all(struct owner *o, struct importer *im)
{
	im->ic = ibv_import_device(o->cmd_fd);
	ASSERT_NOT_NULL(im->ic);
	im->ipd = ibv_import_pd(im->ic, o->h.pd);
	ASSERT_NOT_NULL(im->ipd);
	/* the owner has an MR on it: not yet */
	errno = 0;
	ASSERT_NULL(ibv_import_dm(im->ic, o->h.dm));
	ASSERT_EQ(EBUSY, errno);
	ASSERT_EQ('d', owner_do(o, 'D'));
	im->idm = ibv_import_dm(im->ic, o->h.dm);
	ASSERT_NOT_NULL(im->idm);
	ASSERT_EQ(o->h.dm, im->idm->handle);
	ASSERT_TRUE(im->idm->context == im->ic);
	/* no DM of the owner's has that handle */
	errno = 0;
	ASSERT_NULL(ibv_import_dm(im->ic, o->h.dm + 1000));
	ASSERT_EQ(EINVAL, errno);
	im->dmr = ibv_reg_dm_mr(im->ipd, im->idm, 0, DM_LEN, DM_ACCESS);
	ASSERT_NOT_NULL(im->dmr);
	im->spare = ibv_alloc_pd(im->ic);
	ASSERT_NOT_NULL(im->spare);
	im->abuf = aligned_alloc(4096, BUF_LEN);
	im->bbuf = aligned_alloc(4096, BUF_LEN);
	ASSERT_NOT_NULL(im->abuf);
	ASSERT_NOT_NULL(im->bbuf);
	im->amr = ibv_reg_mr(im->ipd, im->abuf, BUF_LEN, RW_ACCESS);
	im->bmr = ibv_reg_mr(im->spare, im->bbuf, BUF_LEN, RW_ACCESS);
	ASSERT_NOT_NULL(im->amr);
	ASSERT_NOT_NULL(im->bmr);
	sv_end_on_objects(&im->a, im->ic, im->ipd, im->amr, im->abuf);
	sv_end_on_objects(&im->b, im->ic, im->spare, im->bmr, im->bbuf);
	sv_end_connect(&im->a, im->b.qp->qp_num, im->b.o.psn);
	sv_end_connect(&im->b, im->a.qp->qp_num, im->a.o.psn);
}

static void import_end(struct importer *im)
{
	sv_end_off_objects(&im->a);
	sv_end_off_objects(&im->b);
	ASSERT_OK(ibv_dereg_mr(im->amr));
	ASSERT_OK(ibv_dereg_mr(im->bmr));
	ASSERT_OK(ibv_dealloc_pd(im->spare));
	ibv_unimport_pd(im->ipd);
	ASSERT_OK(ibv_close_device(im->ic));
	free(im->abuf);
	free(im->bbuf);
}

/* b's RDMA op of bbuf[boff, boff+len) and the DM's MR at dm_off (its
 * iova: zero-based), completing st; the status. */
static enum ibv_wc_status dm_rdma(struct importer *im, enum ibv_wr_opcode op,
				  uint32_t boff, uint32_t len, uint64_t dm_off,
				  uint64_t id)
{
	struct ibv_sge sg = {.addr = (uintptr_t)im->bbuf + boff,
			     .length = len,
			     .lkey = im->bmr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc w;

	wr.wr.rdma.remote_addr = dm_off;
	wr.wr.rdma.rkey = im->dmr->rkey;
	ASSERT_OK(ibv_post_send(im->b.qp, &wr, &bad));
	WAIT_WC(im->b.scq, &w, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(id, w.wr_id);
	return w.status;
}

/* The owner's bytes, both ways, through the import and by RDMA. */
static void works(struct owner *o, struct importer *im)
{
	uint8_t b[32];

	ASSERT_TRUE(dm_is(im->idm, 0, DM_LEN, 81));
	ASSERT_OK(dm_fill(im->idm, 4096, 1024, 82));
	ASSERT_EQ('c', owner_do(o, 'C'));
	ASSERT_EQ('w', owner_do(o, 'W'));
	ASSERT_TRUE(dm_is(im->idm, 0, 1024, 83));
	/* the DM's length, not its pages, bounds a copy */
	ASSERT_EQ(EFAULT, ibv_memcpy_to_dm(im->idm, DM_LEN - 16, b, 32));
	ASSERT_EQ(EFAULT, ibv_memcpy_from_dm(b, im->idm, DM_LEN - 16, 32));
	/* a third QP writes and reads the same memory */
	sv_fill(im->bbuf, 512, 84);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  dm_rdma(im, IBV_WR_RDMA_WRITE, 0, 512, 2048, 1));
	ASSERT_EQ('r', owner_do(o, 'R'));
	ASSERT_TRUE(dm_is(im->idm, 2048, 512, 84));
	ASSERT_EQ(IBV_WC_SUCCESS,
		  dm_rdma(im, IBV_WR_RDMA_READ, 4096, 1024, 0, 2));
	ASSERT_EQ(-1, sv_check(im->bbuf + 4096, 1024, 83));
}

/* Gone (freed or dead): every use of the import fails, cleanly. */
static void expect_gone(struct importer *im)
{
	uint8_t b[32] = {0};

	ASSERT_EQ(EINVAL, ibv_memcpy_from_dm(b, im->idm, 0, sizeof(b)));
	ASSERT_EQ(EINVAL, ibv_memcpy_to_dm(im->idm, 0, b, sizeof(b)));
	errno = 0;
	ASSERT_NULL(ibv_reg_dm_mr(im->ipd, im->idm, 0, 64, DM_ACCESS));
	ASSERT_EQ(EINVAL, errno);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

SV_TEST(import_dm_across_processes_both_ways)
{
	struct importer im;
	struct owner o;

	owner_start(&o);
	import_all(&o, &im);
	works(&o, &im);
	/* the owner's own MRs after the move: registered, and busy */
	ASSERT_EQ('m', owner_do(&o, 'M'));
	ASSERT_TRUE(dm_is(im.idm, 2048, 512, 84));
	/* the owner frees it: from its return on, our uses fail */
	ASSERT_EQ('f', owner_do(&o, 'F'));
	expect_gone(&im);
	sv_fill(im.bbuf, 64, 85);
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR,
		  dm_rdma(&im, IBV_WR_RDMA_WRITE, 0, 64, 0, 3));
	/* our handle: busy while our MR is on it; freed by the owner only */
	ASSERT_EQ(EBUSY, ibv_free_dm(im.idm));
	ibv_unimport_dm(im.idm); /* kept (said): our MR is on it */
	ASSERT_EQ(EINVAL, ibv_memcpy_to_dm(im.idm, 0, im.bbuf, 8));
	ASSERT_OK(ibv_dereg_mr(im.dmr));
	ASSERT_EQ(EOPNOTSUPP, ibv_free_dm(im.idm));
	ibv_unimport_dm(im.idm);
	/* and no import of it any more */
	errno = 0;
	ASSERT_NULL(ibv_import_dm(im.ic, o.h.dm));
	ASSERT_EQ(EINVAL, errno);
	import_end(&im);
	owner_end(&o);
}

SV_TEST(import_dm_revoked_when_owner_dies)
{
	struct importer im;
	struct owner o;
	int st;

	owner_start(&o);
	import_all(&o, &im);
	works(&o, &im);
	ASSERT_EQ(0, owner_do(&o, 'X'));
	ASSERT_EQ(o.pid, waitpid(o.pid, &st, 0));
	o.pid = 0;
	/* the memcpy ops look at the owner's socket: at once */
	expect_gone(&im);
	/* the MR: once our progress thread saw the socket hang up */
	for (uint64_t id = 10, t0 = now_ms();; id++) {
		enum ibv_wc_status s =
			dm_rdma(&im, IBV_WR_RDMA_WRITE, 0, 64, 0, id);

		if (s == IBV_WC_REM_ACCESS_ERR)
			break;
		ASSERT_EQ(IBV_WC_SUCCESS, s);
		ASSERT_LE(now_ms() - t0, (uint64_t)WAIT_MS);
	}
	ASSERT_OK(ibv_dereg_mr(im.dmr));
	ibv_unimport_dm(im.idm);
	errno = 0;
	ASSERT_NULL(ibv_import_dm(im.ic, o.h.dm));
	ASSERT_EQ(EIO, errno);
	import_end(&im);
	owner_end(&o);
}

/* ---- an owner that lies about its DM (wire/import.h) ---- */

/* The other end of a cmd_fd: answers HELLO and PD, and DM with rep and
 * the fds fds[0..nfds) (-1: none). */
struct liar {
	int fd;
	pthread_mutex_t lock;
	struct sv_imp_rep rep;
	int fds[3];
	size_t nfds;
	bool keep; /* keeps DM askers' sockets, as an owner (its own fds:
		    * not when the test counts ours) */
	int kept[32];
	size_t nkept;
};

static void liar_send(int fd, const struct sv_imp_rep *r, const int *fds,
		      size_t n)
{
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)r, .iov_len = sizeof(*r)};
	struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};

	if (n) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		h.msg_control = u.buf;
		h.msg_controllen = CMSG_SPACE(n * sizeof(int));
		c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	}
	(void)!sendmsg(fd, &h, MSG_NOSIGNAL);
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
		int fd, fds[3];
		bool keep = false;
		size_t n = 0;

		if (poll(&pf, 1, 10000) != 1 ||
		    recvmsg(l->fd, &h, MSG_CMSG_CLOEXEC) != sizeof(q))
			return NULL; /* the test closed its end: done */
		c = CMSG_FIRSTHDR(&h);
		if (!c)
			return NULL;
		memcpy(&fd, CMSG_DATA(c), sizeof(fd));
		if (q.op == SV_IMP_DM) {
			pthread_mutex_lock(&l->lock);
			keep = l->keep;
			r = l->rep;
			n = l->nfds;
			memcpy(fds, l->fds, sizeof(fds));
			pthread_mutex_unlock(&l->lock);
		}
		r.magic = SV_IMP_MAGIC;
		r.version = SV_IMP_VERSION;
		r.op = q.op;
		r.handle = q.handle;
		r.pid = (uint32_t)getpid();
		liar_send(fd, &r, fds, n);
		if (q.op == SV_IMP_DM && keep && l->nkept < 32)
			l->kept[l->nkept++] = fd; /* the import's lifeline */
		else
			close(fd);
	}
}

/* The liar's next DM answer: r with fds a, b, c (-1: fewer). */
static void liar_says(struct liar *l, const struct sv_imp_rep *r, int a, int b,
		      int c)
{
	pthread_mutex_lock(&l->lock);
	l->rep = *r;
	l->fds[0] = a;
	l->fds[1] = b;
	l->fds[2] = c;
	l->nfds = a < 0 ? 0 : b < 0 ? 1 : c < 0 ? 2 : 3;
	pthread_mutex_unlock(&l->lock);
}

static int memfd_sealed(size_t size, unsigned int seals)
{
	int fd = memfd_create("sv_dm_liar", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ASSERT_GE(fd, 0);
	ASSERT_OK(ftruncate(fd, (off_t)size));
	if (seals)
		ASSERT_OK(fcntl(fd, F_ADD_SEALS, seals));
	return fd;
}

static int count_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 4096; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

#define GOOD_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* The import fails with err, keeping no fd (the liar, a thread of ours,
 * closes its copy of our reply socket just after answering: a moment). */
static void import_fails(struct ibv_context *ic, int err)
{
	int before = count_fds();
	uint64_t t0;

	errno = 0;
	ASSERT_NULL(ibv_import_dm(ic, 7));
	ASSERT_EQ(err, errno);
	for (t0 = now_ms(); count_fds() != before; sched_yield())
		ASSERT_LE(now_ms() - t0, (uint64_t)WAIT_MS);
}

/*
 * One context's handles are one namespace (the kernel's ufile's): what
 * this process makes on the imported context never has the handle of
 * the owner's object, and an import verb there finds each by its own.
 * Both processes start their DM and PD numbers at the same place (the
 * owner is forked before any was made), so before SV_HANDLE_HERE our
 * own DM hid the owner's: ibv_import_dm of the owner's handle gave back
 * our own memory.
 */
SV_TEST(import_handles_apart_from_the_owners)
{
	struct ibv_alloc_dm_attr da = {.length = DM_LEN};
	struct ibv_pd *own_pd, *own_pd2, *ipd;
	struct ibv_dm *own_dm, *own_dm2, *idm;
	struct ibv_context *ic;
	struct ibv_mr *own_mr, *own_mr2;
	uint8_t *buf = aligned_alloc(4096, BUF_LEN);
	struct owner o;

	ASSERT_NOT_NULL(buf);
	owner_start(&o);
	ic = ibv_import_device(o.cmd_fd);
	ASSERT_NOT_NULL(ic);
	own_pd = ibv_alloc_pd(ic);
	own_dm = ibv_alloc_dm(ic, &da);
	ASSERT_NOT_NULL(own_pd);
	ASSERT_NOT_NULL(own_dm);
	ASSERT_OK(dm_fill(own_dm, 0, DM_LEN, 90));
	ASSERT_NE(o.h.pd, own_pd->handle);
	ASSERT_NE(o.h.dm, own_dm->handle);
	/* the owner's DM by its handle: the owner's bytes */
	ASSERT_EQ('d', owner_do(&o, 'D'));
	idm = ibv_import_dm(ic, o.h.dm);
	ASSERT_NOT_NULL(idm);
	ASSERT_EQ(o.h.dm, idm->handle);
	ASSERT_TRUE(dm_is(idm, 0, DM_LEN, 81));
	/* ours by its handle: a second handle of ours, not asked of the
	 * owner (which knows no such DM) */
	own_dm2 = ibv_import_dm(ic, own_dm->handle);
	ASSERT_NOT_NULL(own_dm2);
	ASSERT_TRUE(dm_is(own_dm2, 0, DM_LEN, 90));
	/* the same for PDs and MRs: ours is ours, the owner's the owner's */
	own_mr = ibv_reg_mr(own_pd, buf, BUF_LEN, RW_ACCESS);
	ASSERT_NOT_NULL(own_mr);
	own_pd2 = ibv_import_pd(ic, own_pd->handle);
	ASSERT_NOT_NULL(own_pd2);
	own_mr2 = ibv_import_mr(own_pd2, own_mr->handle);
	ASSERT_NOT_NULL(own_mr2);
	ASSERT_EQ(own_mr->lkey, own_mr2->lkey);
	ipd = ibv_import_pd(ic, o.h.pd);
	ASSERT_NOT_NULL(ipd);
	ASSERT_EQ(o.h.pd, ipd->handle);
	ASSERT_NE(own_pd->handle, ipd->handle);
	/* our MR is not on the owner's PD */
	errno = 0;
	ASSERT_NULL(ibv_import_mr(ipd, own_mr->handle));
	ASSERT_EQ(EINVAL, errno);
	ibv_unimport_mr(own_mr2);
	ASSERT_OK(ibv_dereg_mr(own_mr));
	ibv_unimport_pd(ipd);
	ibv_unimport_pd(own_pd2);
	ibv_unimport_dm(own_dm2);
	ibv_unimport_dm(idm);
	ASSERT_OK(ibv_free_dm(own_dm));
	ASSERT_OK(ibv_dealloc_pd(own_pd));
	ASSERT_OK(ibv_close_device(ic));
	owner_end(&o);
	free(buf);
}

SV_TEST(import_dm_lying_owner)
{
	struct liar l = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct sv_imp_rep good = {.length = DM_LEN, .word = 3}, r;
	int p[2], page, mem, bad, sp[2];
	struct ibv_context *ic;
	struct ibv_dm *dm;
	uint8_t b[64];
	pthread_t t;

	page = memfd_sealed(SV_IMP_PAGE, F_SEAL_SHRINK);
	mem = memfd_sealed(DM_MAP, GOOD_SEALS);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p));
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp));
	l.fd = p[1];
	liar_says(&l, &good, page, mem, -1);
	l.keep = true;
	ASSERT_OK(pthread_create(&t, NULL, liar_run, &l));
	ic = ibv_import_device(p[0]);
	ASSERT_NOT_NULL(ic);
	/* the truth: the memfd's bytes, both ways */
	dm = ibv_import_dm(ic, 7);
	ASSERT_NOT_NULL(dm);
	sv_fill(b, sizeof(b), 86);
	ASSERT_OK(ibv_memcpy_to_dm(dm, 100, b, sizeof(b)));
	memset(b, 0, sizeof(b));
	ASSERT_EQ((ssize_t)sizeof(b), pread(mem, b, sizeof(b), 100));
	ASSERT_EQ(-1, sv_check(b, sizeof(b), 86));
	ibv_unimport_dm(dm);
	pthread_mutex_lock(&l.lock);
	l.keep = false;
	pthread_mutex_unlock(&l.lock);

	/* the memfd: too small, too big, not sealed against shrinking, not
	 * sealed, write-sealed, not a file, missing, one fd too many */
	for (int i = 0; i < 8; i++) {
		bad = i == 0   ? memfd_sealed(4096, GOOD_SEALS)
		      : i == 1 ? memfd_sealed(3 * 4096, GOOD_SEALS)
		      : i == 2 ? memfd_sealed(DM_MAP, F_SEAL_GROW | F_SEAL_SEAL)
		      : i == 3 ? memfd_sealed(DM_MAP, 0)
		      : i == 4 ? memfd_sealed(DM_MAP,
					      GOOD_SEALS | F_SEAL_FUTURE_WRITE)
		      : i == 5 ? dup(sp[0])
			       : -1;
		if (i == 6)
			liar_says(&l, &good, page, -1, -1);
		else if (i == 7)
			liar_says(&l, &good, page, mem, mem);
		else
			liar_says(&l, &good, page, bad, -1);
		import_fails(ic, EPROTO);
		if (bad >= 0)
			close(bad);
	}
	/* the answer: lengths no DM has, fields we never send */
	for (int i = 0; i < 5; i++) {
		r = good;
		if (i == 0)
			r.length = 0;
		if (i == 1)
			r.length = (256 << 10) + 1;
		if (i == 2)
			r.lkey = 1;
		if (i == 3)
			r.word = SV_IMP_PAGE / 8;
		if (i == 4)
			r.zero = 1;
		liar_says(&l, &r, page, mem, -1);
		import_fails(ic, EPROTO);
	}
	/* no revocation page we can map (not sealed against shrinking) */
	bad = memfd_sealed(SV_IMP_PAGE, 0);
	liar_says(&l, &good, bad, mem, -1);
	import_fails(ic, EPROTO);
	close(bad);
	/* unknown to it: its errno, nothing kept */
	r = (struct sv_imp_rep){.status = EINVAL};
	liar_says(&l, &r, -1, -1, -1);
	import_fails(ic, EINVAL);
	/* and the truth again */
	liar_says(&l, &good, page, mem, -1);
	pthread_mutex_lock(&l.lock);
	l.keep = true;
	pthread_mutex_unlock(&l.lock);
	dm = ibv_import_dm(ic, 7);
	ASSERT_NOT_NULL(dm);
	ASSERT_TRUE(dm_is(dm, 100, sizeof(b), 86));
	/* the liar "frees" it: moves our word */
	{
		uint64_t *w = mmap(NULL, SV_IMP_PAGE, PROT_READ | PROT_WRITE,
				   MAP_SHARED, page, 0);

		ASSERT_TRUE(w != MAP_FAILED);
		w[3]++;
		ASSERT_EQ(EINVAL, ibv_memcpy_from_dm(b, dm, 0, sizeof(b)));
		ASSERT_OK(munmap(w, SV_IMP_PAGE));
	}
	ibv_unimport_dm(dm);
	ASSERT_OK(ibv_close_device(ic)); /* closes p[0]: the liar ends */
	ASSERT_OK(pthread_join(t, NULL));
	for (size_t i = 0; i < l.nkept; i++)
		close(l.kept[i]);
	close(p[1]);
	close(page);
	close(mem);
	close(sp[0]);
	close(sp[1]);
}

/* ---- the move while the owner writes ---- */

/* argv: sync socket, cmd_fd, DM handle.  Imports the DM (the owner moves
 * it meanwhile), says so, and once told sends back the DM's first word. */
SV_HELPER(import_dm_reader)
{
	int s = atoi(argv[0]), cfd = atoi(argv[1]);
	uint32_t h = (uint32_t)atoi(argv[2]);
	struct ibv_context *ic = ibv_import_device(cfd);
	struct ibv_dm *dm = ic ? ibv_import_dm(ic, h) : NULL;
	uint64_t v = 0;
	char c = 1;

	if (!dm)
		return 2;
	if (write(s, &c, 1) != 1 || read(s, &c, 1) != 1)
		return 3;
	if (ibv_memcpy_from_dm(&v, dm, 0, sizeof(v)) ||
	    write(s, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return 4;
	ibv_unimport_dm(dm);
	return ibv_close_device(ic) ? 5 : 0;
}

struct writer {
	struct ibv_dm *dm;
	atomic_bool stop;
	uint64_t last; /* read after the join */
	int err;
};

/* Writes 1, 2, 3... into the DM's first word until told to stop. */
static void *writer_run(void *arg)
{
	struct writer *w = arg;

	while (!atomic_load(&w->stop)) {
		uint64_t v = w->last + 1;

		w->err = ibv_memcpy_to_dm(w->dm, 0, &v, sizeof(v));
		if (w->err)
			break;
		w->last = v;
	}
	return NULL;
}

/* The owner's thread writes while another process's import moves the DM
 * off the arena: no write is lost, both sides see the last. */
SV_TEST(import_dm_moved_while_owner_writes)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_alloc_dm_attr da = {.length = DM_LEN};
	struct writer w = {0};
	char a0[16], a1[16], a2[16], c = 0;
	struct ibv_context *ctx;
	struct pollfd pf;
	struct sv_proc p;
	uint64_t v = 0, mine = 0;
	pthread_t t;
	int sp[2], d;

	ASSERT_NOT_NULL(list);
	ASSERT_NOT_NULL(list[0]);
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	ASSERT_NOT_NULL(ctx);
	w.dm = ibv_alloc_dm(ctx, &da);
	ASSERT_NOT_NULL(w.dm);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp));
	ASSERT_OK(fcntl(sp[0], F_SETFD, FD_CLOEXEC));
	d = dup(ctx->cmd_fd); /* no CLOEXEC: the helper inherits it */
	ASSERT_GE(d, 0);
	snprintf(a0, sizeof(a0), "%d", sp[1]);
	snprintf(a1, sizeof(a1), "%d", d);
	snprintf(a2, sizeof(a2), "%u", w.dm->handle);
	ASSERT_OK(pthread_create(&t, NULL, writer_run, &w));
	sv_proc_start_helper(&p, "import_dm_reader",
			     (char *[]){a0, a1, a2, NULL}, NULL);
	ASSERT_OK(close(sp[1]));
	ASSERT_OK(close(d));
	pf = (struct pollfd){.fd = sp[0], .events = POLLIN};
	ASSERT_EQ(1, poll(&pf, 1, 20000));
	ASSERT_EQ(1, read(sp[0], &c, 1)); /* imported: moved */
	atomic_store(&w.stop, true);
	ASSERT_OK(pthread_join(t, NULL));
	ASSERT_OK(w.err);
	ASSERT_TRUE(w.last > 0);
	ASSERT_EQ(1, write(sp[0], &c, 1));
	ASSERT_EQ(1, poll(&pf, 1, 20000));
	ASSERT_EQ((ssize_t)sizeof(v), read(sp[0], &v, sizeof(v)));
	sv_proc_wait(&p, 20000);
	if (!p.exited || p.code)
		fprintf(stderr, "helper said:\n%s%s", p.out, p.err);
	ASSERT_TRUE(p.exited);
	ASSERT_EQ(0, p.code);
	sv_proc_free(&p);
	ASSERT_OK(ibv_memcpy_from_dm(&mine, w.dm, 0, sizeof(mine)));
	ASSERT_EQ(w.last, mine);
	ASSERT_EQ(w.last, v);
	ASSERT_OK(ibv_free_dm(w.dm));
	ASSERT_OK(ibv_close_device(ctx));
	ASSERT_OK(close(sp[0]));
}
