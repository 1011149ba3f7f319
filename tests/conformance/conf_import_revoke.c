// SPDX-License-Identifier: MIT
/*
 * An MR imported by another process dies with the owner's MR (issue 28):
 * after the owner's ibv_dereg_mr returns, or once the owner is dead, the
 * importer's use of the lkey completes IBV_WC_LOC_PROT_ERR and a peer's
 * RDMA with the rkey IBV_WC_REM_ACCESS_ERR, as on hardware.  And a
 * hostile importer costs the owner a bounded number of fds, never keeps
 * the owner's MR alive and never makes its dereg wait.
 *
 * The owner is a child forked before this process has any thread (every
 * SV_TEST is its own process); it registers an MR on MAP_SHARED memory
 * made before the fork, so both map the same pages at the same address,
 * passes its cmd_fd back with SCM_RIGHTS and then does what the test
 * says on a control socket: deregister, re-register, or die.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "import.h" /* the wire format, for the hostile importer */
#include "pair.h"

#define RW_ACCESS                                           \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ)
#define LEN	65536
#define HELD	64 /* SV_IMP_HELD (objects.h) */
#define WAIT_MS 10000
#define SLACK	4 /* fds the owner may open meanwhile (over TCP, its own) */

struct hello {
	uint32_t pd, mr, key;
};

struct owner {
	pid_t pid;
	int ctl;    /* our end of the control socket */
	int cmd_fd; /* the owner's context's, passed to us */
	struct hello h;
	uint8_t *mem; /* MAP_SHARED, in both */
};

/* The owner's side: any failure is its exit code. */
static void owner_run(int ctl, uint8_t *mem)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *c =
		list && list[0] ? ibv_open_device(list[0]) : NULL;
	struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, mem, LEN, RW_ACCESS) : NULL;
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

	if (!mr)
		_exit(2);
	h = (struct hello){pd->handle, mr->handle, mr->lkey};
	memset(&u, 0, sizeof(u));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &c->cmd_fd, sizeof(int));
	if (sendmsg(ctl, &m, 0) != sizeof(h))
		_exit(3);
	while (read(ctl, &cmd, 1) == 1) {
		char ok = 'n';

		if (cmd == 'X')
			_exit(0); /* dies with everything registered */
		if (cmd == 'D')
			ok = ibv_dereg_mr(mr) ? 'e' : 'd';
		if (cmd == 'A') /* the same MR, its access again */
			ok = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL,
					  NULL, 0, RW_ACCESS)
				     ? 'e'
				     : 'a';
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

	o->mem = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(o->mem != MAP_FAILED);
	sv_fill(o->mem, LEN, 41);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp));
	o->pid = fork();
	ASSERT_GE(o->pid, 0);
	if (!o->pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sp[0]);
		owner_run(sp[1], o->mem);
	}
	close(sp[1]);
	o->ctl = sp[0];
	p = (struct pollfd){.fd = o->ctl, .events = POLLIN};
	ASSERT_EQ(1, poll(&p, 1, WAIT_MS));
	ASSERT_EQ((ssize_t)sizeof(o->h), recvmsg(o->ctl, &m, MSG_CMSG_CLOEXEC));
	ASSERT_NOT_NULL(CMSG_FIRSTHDR(&m));
	memcpy(&o->cmd_fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
}

/* The owner does cmd; its answer, within WAIT_MS (never blocked by us). */
static char owner_do(struct owner *o, char cmd)
{
	struct pollfd p = {.fd = o->ctl, .events = POLLIN};
	char r = 0;

	ssize_t n;

	ASSERT_EQ(1, write(o->ctl, &cmd, 1));
	ASSERT_EQ(1, poll(&p, 1, WAIT_MS));
	n = read(o->ctl, &r, 1);
	ASSERT_GE(n, 0);
	return n ? r : 0; /* 0: it died */
}

static void owner_end(struct owner *o)
{
	int st;

	kill(o->pid, SIGKILL);
	ASSERT_EQ(o->pid, waitpid(o->pid, &st, 0));
	close(o->ctl);
	ASSERT_OK(munmap(o->mem, LEN));
}

/* This process's side: the imports, and two pairs of QPs (a on the
 * imported PD with the imported MR, b on a PD of its own). */
struct importer {
	struct ibv_context *ic;
	struct ibv_pd *ipd, *spare;
	struct ibv_mr *imr, *bmr;
	uint8_t *bbuf;
	struct sv_end a[2], b[2];
};

static void import_all(struct owner *o, struct importer *im)
{
	im->ic = ibv_import_device(o->cmd_fd);
	ASSERT_NOT_NULL(im->ic);
	im->ipd = ibv_import_pd(im->ic, o->h.pd);
	ASSERT_NOT_NULL(im->ipd);
	im->imr = ibv_import_mr(im->ipd, o->h.mr);
	ASSERT_NOT_NULL(im->imr);
	ASSERT_EQ(o->h.key, im->imr->lkey);
	im->spare = ibv_alloc_pd(im->ic);
	ASSERT_NOT_NULL(im->spare);
	im->bbuf = aligned_alloc(4096, LEN);
	ASSERT_NOT_NULL(im->bbuf);
	im->bmr = ibv_reg_mr(im->spare, im->bbuf, LEN, RW_ACCESS);
	ASSERT_NOT_NULL(im->bmr);
	for (int i = 0; i < 2; i++) {
		struct sv_end *a = &im->a[i], *b = &im->b[i];

		sv_end_on_objects(a, im->ic, im->ipd, im->imr, o->mem);
		sv_end_on_objects(b, im->ic, im->spare, im->bmr, im->bbuf);
		sv_end_connect(a, b->qp->qp_num, b->o.psn);
		sv_end_connect(b, a->qp->qp_num, a->o.psn);
	}
}

static void import_end(struct importer *im)
{
	for (int i = 0; i < 2; i++) {
		sv_end_off_objects(&im->a[i]);
		sv_end_off_objects(&im->b[i]);
	}
	ASSERT_OK(ibv_dereg_mr(im->bmr));
	ASSERT_OK(ibv_dealloc_pd(im->spare));
	ibv_unimport_pd(im->ipd);
	ASSERT_OK(ibv_close_device(im->ic));
	free(im->bbuf);
}

/* b's RDMA WRITE of 256 bytes at the imported MR's offset off. */
static void write_imported(struct importer *im, int i, uint64_t id,
			   enum ibv_wc_status st)
{
	struct ibv_sge sg = {.addr = (uintptr_t)im->bbuf,
			     .length = 256,
			     .lkey = im->bmr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)im->imr->addr + 4096;
	wr.wr.rdma.rkey = im->imr->rkey;
	ASSERT_OK(ibv_post_send(im->b[i].qp, &wr, &bad));
	EXPECT_WC(im->b[i].scq, st, id);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Both keys work before; after the owner's MR is gone, the lkey's use is
 * a local protection error and the rkey's a remote access error. */
static void works_then_revoked(struct owner *o, char cmd, char answer)
{
	struct importer im;

	import_all(o, &im);
	/* alive: a sends the owner's bytes, b writes into them */
	ASSERT_OK(sv_end_recv(&im.b[0], 2, 0, 1000));
	ASSERT_OK(sv_end_send(&im.a[0], 1, 0, 1000, 0));
	EXPECT_WC(im.a[0].scq, IBV_WC_SUCCESS, 1);
	EXPECT_WC(im.b[0].rcq, IBV_WC_SUCCESS, 2);
	ASSERT_EQ(-1, sv_check(im.bbuf, 1000, 41));
	sv_fill(im.bbuf, 256, 42);
	write_imported(&im, 1, 3, IBV_WC_SUCCESS);
	ASSERT_EQ(-1, sv_check(o->mem + 4096, 256, 42));

	ASSERT_EQ(answer, owner_do(o, cmd));
	if (cmd == 'X') {
		int st;

		ASSERT_EQ(o->pid, waitpid(o->pid, &st, 0));
		o->pid = 0;
	}
	/* gone: the lkey in our own send, the rkey in a peer's write; at
	 * once after a dereg or rereg returned (the owner's word moved),
	 * a moment after a death (our progress thread sees its socket hang
	 * up): sends until then succeed */
	ASSERT_OK(sv_end_recv(&im.b[0], 6, 0, 1000));
	for (uint64_t id = 4, t0 = now_ms();; id += 10) {
		struct ibv_wc w;

		ASSERT_OK(sv_end_send(&im.a[0], id, 0, 1000, 0));
		WAIT_WC(im.a[0].scq, &w, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(id, w.wr_id);
		if (w.status == IBV_WC_LOC_PROT_ERR)
			break;
		ASSERT_EQ(IBV_WC_SUCCESS, w.status);
		ASSERT_EQ('X', cmd);
		ASSERT_LE(now_ms() - t0, (uint64_t)WAIT_MS);
		EXPECT_WC(im.b[0].rcq, IBV_WC_SUCCESS, 6);
		ASSERT_OK(sv_end_recv(&im.b[0], 6, 0, 1000));
	}
	sv_fill(im.bbuf, 256, 43);
	write_imported(&im, 1, 5, IBV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(-1, sv_check(o->mem + 4096, 256, 42));
	/* the import is a handle: dropping it is still fine */
	ASSERT_OK(ibv_dereg_mr(im.imr));
	errno = 0;
	im.imr = ibv_import_mr(im.ipd, o->h.mr);
	if (cmd == 'A') { /* re-registered: importable again */
		ASSERT_NOT_NULL(im.imr);
		ASSERT_OK(ibv_dereg_mr(im.imr));
	} else {
		ASSERT_NULL(im.imr);
		ASSERT_EQ(cmd == 'X' ? EIO : EINVAL, errno);
	}
	import_end(&im);
}

SV_TEST(import_mr_revoked_at_owner_dereg)
{
	struct owner o;

	owner_start(&o);
	works_then_revoked(&o, 'D', 'd');
	owner_end(&o);
}

/* A rereg may move the MR (translation, PD, access): its imports go. */
SV_TEST(import_mr_revoked_at_owner_rereg)
{
	struct owner o;

	owner_start(&o);
	works_then_revoked(&o, 'A', 'a');
	owner_end(&o);
}

SV_TEST(import_mr_revoked_when_owner_dies)
{
	struct owner o;

	owner_start(&o);
	works_then_revoked(&o, 'X', 0);
	close(o.ctl);
	ASSERT_OK(munmap(o.mem, LEN));
}

/* ---- a hostile importer ---- */

/* One raw SV_IMP_MR request for handle on fd, with a socket of ours to
 * answer on, which we keep (never read until told): that socket. */
static int raw_ask(int fd, uint32_t handle)
{
	struct sv_imp_req q = {.magic = SV_IMP_MAGIC,
			       .version = SV_IMP_VERSION,
			       .op = SV_IMP_MR,
			       .handle = handle};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = &q, .iov_len = sizeof(q)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	int sp[2];

	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp));
	memset(&u, 0, sizeof(u));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &sp[1], sizeof(int));
	ASSERT_EQ((ssize_t)sizeof(q), sendmsg(fd, &m, 0));
	close(sp[1]);
	return sp[0];
}

/* The answer on s (peeked: it stays for later), within WAIT_MS. */
static uint32_t raw_status(int s)
{
	struct pollfd p = {.fd = s, .events = POLLIN};
	struct sv_imp_rep r;

	ASSERT_EQ(1, poll(&p, 1, WAIT_MS));
	ASSERT_EQ((ssize_t)sizeof(r), recv(s, &r, sizeof(r), MSG_PEEK));
	ASSERT_EQ(SV_IMP_MAGIC, r.magic);
	return r.status;
}

static int fds_of(pid_t pid)
{
	char path[64];
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	ASSERT_NOT_NULL(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/*
 * An importer that asks for the MR 3 * HELD times and never lets go: the
 * owner keeps HELD of its sockets (ENOSPC past them, for anyone), drops
 * those whose importer hung up when it needs room, and its dereg neither
 * waits for the importer nor is kept from freeing the MR: every socket
 * it kept says so (a byte, then the end), and the honest import is
 * revoked.
 */
SV_TEST(import_mr_hostile_importer_bounded)
{
	struct ibv_context *ic;
	struct ibv_pd *ipd;
	struct ibv_mr *imr;
	struct owner o;
	int s[3 * HELD], base, ok = 0, full = 0;

	owner_start(&o);
	ic = ibv_import_device(o.cmd_fd);
	ASSERT_NOT_NULL(ic);
	ipd = ibv_import_pd(ic, o.h.pd);
	ASSERT_NOT_NULL(ipd);
	base = fds_of(o.pid);
	for (int i = 0; i < 3 * HELD; i++) {
		uint32_t st;

		s[i] = raw_ask(ic->cmd_fd, o.h.mr);
		st = raw_status(s[i]);
		ASSERT_TRUE(st == 0 || st == ENOSPC);
		ok += !st;
		full += st == ENOSPC;
	}
	ASSERT_EQ(HELD, ok);
	ASSERT_EQ(2 * HELD, full);
	ASSERT_LE(fds_of(o.pid), base + SLACK + HELD);
	/* full: an honest import is refused too */
	errno = 0;
	ASSERT_NULL(ibv_import_mr(ipd, o.h.mr));
	ASSERT_EQ(ENOSPC, errno);
	/* some hang up: their room is taken again */
	for (int i = 0; i < 8; i++)
		close(s[i]);
	imr = ibv_import_mr(ipd, o.h.mr);
	ASSERT_NOT_NULL(imr);
	ASSERT_LE(fds_of(o.pid), base + SLACK + HELD);
	/* the dereg answers at once, with HELD sockets nobody reads */
	ASSERT_EQ('d', owner_do(&o, 'D'));
	ASSERT_LE(fds_of(o.pid), base + SLACK);
	for (int i = 8; i < 3 * HELD; i++) {
		struct sv_imp_rep r;
		char b[2];

		if (i < HELD) {
			/* kept: the answer, then the notice, then the end */
			ASSERT_EQ((ssize_t)sizeof(r),
				  recv(s[i], &r, sizeof(r), MSG_DONTWAIT));
			ASSERT_EQ(1, recv(s[i], b, sizeof(b), MSG_DONTWAIT));
			ASSERT_EQ('R', b[0]);
			ASSERT_EQ(0, recv(s[i], b, sizeof(b), MSG_DONTWAIT));
		}
		close(s[i]);
	}
	ASSERT_OK(ibv_dereg_mr(imr));
	ibv_unimport_pd(ipd);
	ASSERT_OK(ibv_close_device(ic));
	owner_end(&o);
}

/* ---- the revocation page (one load per lookup) ---- */

/*
 * The importer's recv(MSG_PEEK)s all say "nothing there" (seccomp), as
 * if it never looked at its socket: the owner's dereg still revokes the
 * import at once after it returned, since the importer's lookups load
 * the owner's word, not the socket.
 */
SV_TEST(import_mr_revoked_with_socket_unread)
{
#if defined(__x86_64__)
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_recvfrom, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, args[3])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MSG_PEEK, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAGAIN),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	struct owner o;
	char c;

	owner_start(&o); /* the owner is not filtered */
	ASSERT_OK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	ASSERT_OK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog));
	/* the filter works: a byte there is not seen */
	{
		int sp[2];

		ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp));
		ASSERT_EQ(1, write(sp[1], "x", 1));
		errno = 0;
		ASSERT_EQ(-1, recv(sp[0], &c, 1, MSG_PEEK | MSG_DONTWAIT));
		ASSERT_EQ(EAGAIN, errno);
		close(sp[0]);
		close(sp[1]);
	}
	works_then_revoked(&o, 'D', 'd');
	owner_end(&o);
#else
	fprintf(stderr, "skip: a seccomp filter for x86_64 only\n");
	exit(77);
#endif
}

/*
 * What a hostile importer gets with an MR's answer: the owner's
 * revocation page, which it can read (its word holds gen while the MR
 * lives, and has moved once the owner's dereg returned) but never write,
 * map writable, resize or unseal.
 */
SV_TEST(import_mr_revocation_page_read_only)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct sv_imp_rep r;
	struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct ibv_context *ic;
	struct pollfd p;
	struct owner o;
	struct stat st;
	uint64_t *page;
	int s, fd;

	owner_start(&o);
	ic = ibv_import_device(o.cmd_fd);
	ASSERT_NOT_NULL(ic);
	s = raw_ask(ic->cmd_fd, o.h.mr);
	p = (struct pollfd){.fd = s, .events = POLLIN};
	ASSERT_EQ(1, poll(&p, 1, WAIT_MS));
	ASSERT_EQ((ssize_t)sizeof(r), recvmsg(s, &m, MSG_CMSG_CLOEXEC));
	ASSERT_EQ(0u, r.status);
	ASSERT_EQ(1u, r.shared);
	ASSERT_NOT_NULL(CMSG_FIRSTHDR(&m));
	ASSERT_EQ(CMSG_LEN(sizeof(int)), CMSG_FIRSTHDR(&m)->cmsg_len);
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	ASSERT_OK(fstat(fd, &st));
	ASSERT_EQ((off_t)SV_IMP_PAGE, st.st_size);
	ASSERT_LE(r.word, SV_IMP_PAGE / sizeof(uint64_t) - 1);
	/* no way to write it */
	errno = 0;
	ASSERT_EQ(-1, write(fd, "x", 1));
	ASSERT_EQ(EPERM, errno);
	errno = 0;
	ASSERT_EQ(-1, ftruncate(fd, 0));
	ASSERT_EQ(EPERM, errno);
	errno = 0;
	ASSERT_EQ(-1, fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE));
	ASSERT_EQ(EPERM, errno);
	errno = 0;
	ASSERT_TRUE(mmap(NULL, SV_IMP_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
			 fd, 0) == MAP_FAILED);
	ASSERT_EQ(EPERM, errno);
	page = mmap(NULL, SV_IMP_PAGE, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_TRUE(page != MAP_FAILED);
	errno = 0;
	ASSERT_EQ(-1, mprotect(page, SV_IMP_PAGE, PROT_READ | PROT_WRITE));
	ASSERT_EQ(EACCES, errno);
	/* its word: gen while the MR lives, moved once the dereg returned */
	ASSERT_EQ(r.gen, __atomic_load_n(&page[r.word], __ATOMIC_ACQUIRE));
	ASSERT_EQ('d', owner_do(&o, 'D'));
	ASSERT_NE(r.gen, __atomic_load_n(&page[r.word], __ATOMIC_ACQUIRE));
	ASSERT_OK(munmap(page, SV_IMP_PAGE));
	close(fd);
	close(s);
	ASSERT_OK(ibv_close_device(ic));
	owner_end(&o);
}
