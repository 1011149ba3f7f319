// SPDX-License-Identifier: MIT
/*
 * Shared objects (issue 28 item 6): ibv_import_device, ibv_import_pd,
 * ibv_import_mr and their unimports, in one process (rdma-core's
 * tests/test_shared_pd.py flow: a QP of the imported context on the
 * imported PD moves data through the imported MR, both ways) and in a
 * process that was passed the cmd_fd with SCM_RIGHTS (its PD registers
 * memory and its QP talks to a QP of the original context); every error
 * (bad fd, not ours, bad handles, closed original) and hostile requests
 * on the cmd_fd (wire/import.h).
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "import.h" /* the wire format, for the hostile requests */
#include "pair.h"

#define RW_ACCESS                                           \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ)

static struct ibv_context *open_dev(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *c;

	ASSERT_NOT_NULL(list);
	ASSERT_NOT_NULL(list[0]);
	c = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	ASSERT_NOT_NULL(c);
	return c;
}

static int count_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 4096; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static void reset(struct sv_end *e)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};

	ASSERT_OK(ibv_modify_qp(e->qp, &a, IBV_QP_STATE));
}

static void connect_ends(struct sv_end *a, struct sv_end *b)
{
	sv_end_connect(a, b->qp->qp_num, b->o.psn);
	sv_end_connect(b, a->qp->qp_num, a->o.psn);
}

static void rdma_write(struct sv_end *e, uint32_t off, uint32_t len,
		       uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sg = {.addr = (uintptr_t)e->buf + off,
			     .length = len,
			     .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 7,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	ASSERT_OK(ibv_post_send(e->qp, &wr, &bad));
	EXPECT_WC(e->scq, IBV_WC_SUCCESS, 7);
}

/* a sends len bytes of its buffer to b's buffer at off, both complete */
static void send_recv(struct sv_end *a, struct sv_end *b, uint32_t off,
		      uint32_t len)
{
	ASSERT_OK(sv_end_recv(b, 2, off, len));
	ASSERT_OK(sv_end_send(a, 1, off, len, 0));
	EXPECT_WC(a->scq, IBV_WC_SUCCESS, 1);
	EXPECT_WC(b->rcq, IBV_WC_SUCCESS, 2);
}

/* test_shared_pd.py's flow in one process: the server's context, PD and
 * MR imported; a QP of the import's on the imported PD moves data both
 * ways through the imported MR, and the original keeps working. */
SV_TEST(import_in_process_rdma_both_ways)
{
	struct sv_end orig, imp, client;
	struct ibv_context *ic;
	struct ibv_pd *ipd;
	struct ibv_mr *imr;
	struct sv_end_opts o = sv_end_opts_default();

	o.mr_access = RW_ACCESS;
	o.qp_access = RW_ACCESS;
	sv_end_open(&orig, &o);
	sv_end_open(&client, &o);
	ic = ibv_import_device(dup(orig.ctx->cmd_fd));
	ASSERT_NOT_NULL(ic);
	ASSERT_TRUE(ic != orig.ctx);
	ASSERT_TRUE(ic->device == orig.ctx->device);
	ASSERT_GE(ic->cmd_fd, 0);
	ASSERT_NE(ic->cmd_fd, orig.ctx->cmd_fd);
	ipd = ibv_import_pd(ic, orig.pd->handle);
	ASSERT_NOT_NULL(ipd);
	ASSERT_TRUE(ipd != orig.pd);
	ASSERT_TRUE(ipd->context == ic);
	ASSERT_EQ(orig.pd->handle, ipd->handle);
	imr = ibv_import_mr(ipd, orig.mr->handle);
	ASSERT_NOT_NULL(imr);
	ASSERT_TRUE(imr->pd == ipd && imr->context == ic);
	ASSERT_EQ(orig.mr->handle, imr->handle);
	ASSERT_EQ(orig.mr->lkey, imr->lkey);
	ASSERT_EQ(orig.mr->rkey, imr->rkey);
	ASSERT_TRUE(imr->addr == orig.mr->addr);
	ASSERT_EQ(orig.mr->length, imr->length);

	sv_end_on_objects(&imp, ic, ipd, imr, orig.buf);
	connect_ends(&imp, &client);
	/* the client writes into the imported MR (the original's memory) */
	sv_fill(client.buf, 4096, 11);
	rdma_write(&client, 0, 4096, (uintptr_t)imr->addr + 8192, imr->rkey);
	ASSERT_EQ(-1, sv_check(orig.buf + 8192, 4096, 11));
	/* the import sends from it, by the imported lkey */
	sv_fill(orig.buf + 16384, 1000, 12);
	send_recv(&imp, &client, 16384, 1000);
	ASSERT_EQ(-1, sv_check(client.buf + 16384, 1000, 12));
	/* and writes out of it */
	sv_fill(orig.buf, 512, 13);
	rdma_write(&imp, 0, 512, (uintptr_t)client.mr->addr + 32768,
		   client.mr->rkey);
	ASSERT_EQ(-1, sv_check(client.buf + 32768, 512, 13));
	/* the PD is the original's: it cannot go while the QP uses it */
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(orig.pd));
	sv_end_off_objects(&imp);
	ibv_unimport_mr(imr);
	ibv_unimport_pd(ipd);
	ASSERT_OK(ibv_close_device(ic));
	/* the original is whole */
	reset(&client);
	connect_ends(&orig, &client);
	sv_pair_ping(&(struct sv_pair){.a = orig, .b = client});
	sv_end_close(&client);
	sv_end_close(&orig);
}

/* One PD through two handles: an MR registered through either serves a
 * QP made on the other; objects on the import keep the PD alive. */
SV_TEST(import_pd_is_the_same_pd)
{
	struct sv_end a, b, peer;
	struct ibv_context *c = open_dev(), *ic;
	struct ibv_pd *pd, *ipd;
	struct ibv_mr *mr_i, *mr_o;
	uint8_t *buf = aligned_alloc(4096, 65536), *buf2;

	buf2 = aligned_alloc(4096, 65536);
	ASSERT_NOT_NULL(buf);
	ASSERT_NOT_NULL(buf2);
	pd = ibv_alloc_pd(c);
	ASSERT_NOT_NULL(pd);
	ic = ibv_import_device(dup(c->cmd_fd));
	ASSERT_NOT_NULL(ic);
	ipd = ibv_import_pd(ic, pd->handle);
	ASSERT_NOT_NULL(ipd);
	/* registered through the import, used by the original's QP */
	mr_i = ibv_reg_mr(ipd, buf, 65536, RW_ACCESS);
	ASSERT_NOT_NULL(mr_i);
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(pd));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(ipd));
	mr_o = ibv_reg_mr(pd, buf2, 65536, RW_ACCESS);
	ASSERT_NOT_NULL(mr_o);
	sv_end_on_objects(&a, c, pd, mr_i, buf);
	sv_end_on_objects(&b, ic, ipd, mr_o, buf2);
	sv_end_open(&peer, NULL);
	connect_ends(&a, &peer);
	sv_fill(buf, 256, 21);
	send_recv(&a, &peer, 0, 256);
	ASSERT_EQ(-1, sv_check(peer.buf, 256, 21));
	reset(&peer);
	connect_ends(&b, &peer);
	sv_fill(buf2, 300, 22);
	send_recv(&b, &peer, 0, 300);
	ASSERT_EQ(-1, sv_check(peer.buf, 300, 22));
	sv_end_off_objects(&a);
	sv_end_off_objects(&b);
	sv_end_close(&peer);
	ASSERT_OK(ibv_dereg_mr(mr_i));
	ASSERT_OK(ibv_dereg_mr(mr_o));
	/* free now: deallocated through the import, gone for both */
	ASSERT_OK(ibv_dealloc_pd(ipd));
	errno = 0;
	ASSERT_NULL(ibv_import_pd(ic, pd->handle));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_dealloc_pd(pd)); /* the original's handle: freed */
	ASSERT_OK(ibv_close_device(ic));
	ASSERT_OK(ibv_close_device(c));
	free(buf);
	free(buf2);
}

/* The kernel's ufile lives while any of its contexts does: the import
 * outlives the original's ibv_close_device, and works. */
SV_TEST(import_outlives_original)
{
	struct ibv_context *c, *ic;
	struct ibv_pd *pd, *ipd;
	struct sv_end e, peer;
	uint8_t *buf = aligned_alloc(4096, 65536);
	struct ibv_mr *mr;
	uint32_t h;
	int before;

	ASSERT_NOT_NULL(buf);
	ASSERT_OK(ibv_close_device(open_dev()));
	before = count_fds();
	c = open_dev();
	pd = ibv_alloc_pd(c);
	ASSERT_NOT_NULL(pd);
	h = pd->handle;
	ic = ibv_import_device(dup(c->cmd_fd));
	ASSERT_NOT_NULL(ic);
	ASSERT_OK(ibv_close_device(c));
	ipd = ibv_import_pd(ic, h);
	ASSERT_NOT_NULL(ipd);
	mr = ibv_reg_mr(ipd, buf, 65536, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	sv_end_on_objects(&e, ic, ipd, mr, buf);
	sv_end_open(&peer, NULL);
	connect_ends(&e, &peer);
	sv_fill(buf, 100, 31);
	send_recv(&e, &peer, 0, 100);
	ASSERT_EQ(-1, sv_check(peer.buf, 100, 31));
	sv_end_off_objects(&e);
	sv_end_close(&peer);
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_dealloc_pd(ipd));
	ASSERT_OK(ibv_close_device(ic));
	ASSERT_EQ(before, count_fds()); /* both cmd_fds, the socket pair */
	free(buf);
}

/* A stranger on the other end of a datagram socket pair: takes the
 * request's reply socket and answers garbage (or nothing) on it. */
struct stranger {
	int fd;
	bool answer;
};

static void *stranger_run(void *arg)
{
	struct stranger *st = arg;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	uint8_t req[64], junk[48] = {1, 2, 3};
	struct iovec iov = {.iov_base = req, .iov_len = sizeof(req)};
	struct msghdr h = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(st->fd, &h, MSG_CMSG_CLOEXEC) <= 0)
		return NULL;
	c = CMSG_FIRSTHDR(&h);
	if (!c)
		return NULL;
	memcpy(&fd, CMSG_DATA(c), sizeof(fd));
	if (st->answer)
		(void)!send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
	close(fd);
	return NULL;
}

/* Not softverbs on the other end: EINVAL, whether it answers garbage or
 * closes the reply socket unanswered. */
SV_TEST(import_stranger_socket)
{
	for (int answer = 0; answer < 2; answer++) {
		struct stranger st = {.answer = answer};
		pthread_t t;
		int p[2];

		ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				     p));
		st.fd = p[1];
		ASSERT_OK(pthread_create(&t, NULL, stranger_run, &st));
		errno = 0;
		ASSERT_NULL(ibv_import_device(p[0]));
		ASSERT_EQ(EINVAL, errno);
		ASSERT_OK(pthread_join(t, NULL));
		ASSERT_OK(close(p[0]));
		ASSERT_OK(close(p[1]));
	}
}

/* Every refusal, with rdma-core's errno and nothing changed. */
SV_TEST(import_errors)
{
	struct ibv_context *c = open_dev(), *c2 = open_dev(), *ic;
	struct ibv_pd *pd = ibv_alloc_pd(c), *pd2 = ibv_alloc_pd(c), *ipd;
	uint8_t buf[256];
	struct ibv_mr *mr;
	int p[2], fd, d;

	ASSERT_NOT_NULL(pd);
	ASSERT_NOT_NULL(pd2);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	/* not a cmd_fd: none, closed, a pipe, a file, a stream socket */
	errno = 0;
	ASSERT_NULL(ibv_import_device(-1));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(pipe(p));
	ASSERT_OK(close(p[1]));
	errno = 0;
	ASSERT_NULL(ibv_import_device(p[1]));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_import_device(p[0]));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(close(p[0]));
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	errno = 0;
	ASSERT_NULL(ibv_import_device(fd));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(close(fd));
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p));
	errno = 0;
	ASSERT_NULL(ibv_import_device(p[0]));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(close(p[0]));
	ASSERT_OK(close(p[1]));
	/* a datagram socket pair nobody answers on: closed, EIO */
	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p));
	ASSERT_OK(close(p[1]));
	errno = 0;
	ASSERT_NULL(ibv_import_device(p[0]));
	ASSERT_EQ(EIO, errno);
	ASSERT_OK(close(p[0]));
	/* closed original: its dup'd fd leads nowhere */
	d = dup(c2->cmd_fd);
	ASSERT_OK(ibv_close_device(c2));
	errno = 0;
	ASSERT_NULL(ibv_import_device(d));
	ASSERT_EQ(EIO, errno);
	ASSERT_OK(close(d));

	ic = ibv_import_device(dup(c->cmd_fd));
	ASSERT_NOT_NULL(ic);
	/* PD handles: none, unknown, freed */
	errno = 0;
	ASSERT_NULL(ibv_import_pd(NULL, pd->handle));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_import_pd(ic, 0));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_import_pd(ic, pd->handle + 1000));
	ASSERT_EQ(EINVAL, errno);
	{
		uint32_t h2 = pd2->handle;

		ASSERT_OK(ibv_dealloc_pd(pd2));
		errno = 0;
		ASSERT_NULL(ibv_import_pd(ic, h2));
		ASSERT_EQ(EINVAL, errno);
	}
	ipd = ibv_import_pd(ic, pd->handle);
	ASSERT_NOT_NULL(ipd);
	/* MR handles: none, out of range, unknown, of another PD, freed */
	errno = 0;
	ASSERT_NULL(ibv_import_mr(NULL, mr->handle));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_import_mr(ipd, 0xffffffffu));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_import_mr(ipd, mr->handle ^ 1));
	ASSERT_EQ(EINVAL, errno);
	{
		struct ibv_pd *other = ibv_alloc_pd(ic);

		ASSERT_NOT_NULL(other);
		errno = 0;
		ASSERT_NULL(ibv_import_mr(other, mr->handle));
		ASSERT_EQ(EINVAL, errno);
		ASSERT_OK(ibv_dealloc_pd(other));
	}
	{
		struct ibv_mr *imr = ibv_import_mr(ipd, mr->handle);
		uint32_t h = mr->handle;

		ASSERT_NOT_NULL(imr);
		/* a copy cannot be re-registered */
		ASSERT_EQ(IBV_REREG_MR_ERR_INPUT,
			  ibv_rereg_mr(imr, IBV_REREG_MR_CHANGE_ACCESS, NULL,
				       NULL, 0, IBV_ACCESS_LOCAL_WRITE));
		ASSERT_EQ(EOPNOTSUPP, errno);
		/* deregistered through the import: gone for both */
		ASSERT_OK(ibv_dereg_mr(imr));
		ASSERT_EQ(EINVAL, ibv_dereg_mr(mr));
		errno = 0;
		ASSERT_NULL(ibv_import_mr(ipd, h));
		ASSERT_EQ(EINVAL, errno);
	}
	/* no DM has that handle (conf_import_mem.c imports DMs) */
	errno = 0;
	ASSERT_NULL(ibv_import_dm(ic, 0));
	ASSERT_EQ(EINVAL, errno);
	/* unimport of what was not imported: said, nothing freed */
	ibv_unimport_pd(pd);
	ibv_unimport_pd(NULL);
	ibv_unimport_mr(NULL);
	ibv_unimport_pd(ipd);
	ASSERT_OK(ibv_dealloc_pd(pd));
	ASSERT_OK(ibv_close_device(ic));
	ASSERT_OK(ibv_close_device(c));
}

/* ---- across processes: the cmd_fd passed with SCM_RIGHTS ---- */

/* What the test and its helper tell each other on their socket. */
struct imp_msg {
	uint32_t pd_handle, mr_handle; /* test -> helper */
	uint32_t qpn, psn;	       /* the sender's QP */
	uint16_t lid;
	uint32_t rkey; /* helper -> test: its MR */
	uint64_t addr;
};

static void msg_send(int s, const struct imp_msg *m, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
	struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		h.msg_control = u.buf;
		h.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ASSERT_EQ(sizeof(*m), sendmsg(s, &h, MSG_NOSIGNAL));
}

/* One message (and the fd it carries, else -1), within 10 s. */
static int msg_recv(int s, struct imp_msg *m)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
	struct msghdr h = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct pollfd p = {.fd = s, .events = POLLIN};
	struct cmsghdr *c;
	int fd = -1;

	ASSERT_EQ(1, poll(&p, 1, 10000));
	ASSERT_EQ(sizeof(*m), recvmsg(s, &h, MSG_CMSG_CLOEXEC));
	c = CMSG_FIRSTHDR(&h);
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* The other process: imports the context and PD it was given, registers
 * its own memory on that PD, and talks to the original's QP. */
SV_HELPER(import_child)
{
	int s = atoi(argv[0]), fd, fd2;
	struct ibv_context *ic, *ic2;
	struct ibv_pd *ipd, *ipd2, *spare;
	struct imp_msg m, me = {0};
	uint8_t *buf = aligned_alloc(4096, 65536);
	struct ibv_mr *mr;
	struct sv_end e;

	ASSERT_NOT_NULL(buf);
	fd = msg_recv(s, &m);
	ASSERT_GE(fd, 0);
	ic = ibv_import_device(fd);
	ASSERT_NOT_NULL(ic);
	ASSERT_EQ(fd, ic->cmd_fd);
	/* a PD of its own first: the import's local id is not its handle */
	spare = ibv_alloc_pd(ic);
	ASSERT_NOT_NULL(spare);
	errno = 0;
	ASSERT_NULL(ibv_import_pd(ic, m.pd_handle + 1000));
	ASSERT_EQ(EINVAL, errno);
	ipd = ibv_import_pd(ic, m.pd_handle);
	ASSERT_NOT_NULL(ipd);
	ASSERT_EQ(m.pd_handle, ipd->handle);
	/* the original's MR is its process's memory: out of reach here */
	errno = 0;
	ASSERT_NULL(ibv_import_mr(ipd, m.mr_handle));
	ASSERT_EQ(EOPNOTSUPP, errno);
	errno = 0;
	ASSERT_NULL(ibv_import_mr(ipd, m.mr_handle ^ 1));
	ASSERT_EQ(EINVAL, errno);
	/* imported again here: the same context */
	fd2 = dup(fd);
	ic2 = ibv_import_device(fd2);
	ASSERT_NOT_NULL(ic2);
	ipd2 = ibv_import_pd(ic2, m.pd_handle);
	ASSERT_NOT_NULL(ipd2);
	ibv_unimport_pd(ipd2);
	ASSERT_OK(ibv_close_device(ic2));
	ASSERT_EQ(-1, fcntl(fd2, F_GETFD)); /* closed with its context */

	mr = ibv_reg_mr(ipd, buf, 65536, RW_ACCESS);
	ASSERT_NOT_NULL(mr);
	sv_end_on_objects(&e, ic, ipd, mr, buf);
	sv_end_connect(&e, m.qpn, m.psn);
	ASSERT_OK(sv_end_recv(&e, 2, 0, 1000));
	me.qpn = e.qp->qp_num;
	me.psn = e.o.psn;
	me.lid = e.lid;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	msg_send(s, &me, -1);
	/* the test wrote 4096 bytes at 8192, then sent 1000 */
	EXPECT_WC(e.rcq, IBV_WC_SUCCESS, 2);
	(void)msg_recv(s, &m);
	ASSERT_EQ(-1, sv_check(buf, 1000, 41));
	ASSERT_EQ(-1, sv_check(buf + 8192, 4096, 42));
	sv_fill(buf + 16384, 777, 43);
	ASSERT_OK(sv_end_send(&e, 1, 16384, 777, 0));
	EXPECT_WC(e.scq, IBV_WC_SUCCESS, 1);
	(void)msg_recv(s, &m); /* the test has it: done */
	sv_end_off_objects(&e);
	ASSERT_OK(ibv_dereg_mr(mr));
	ibv_unimport_pd(ipd);
	ASSERT_OK(ibv_dealloc_pd(spare));
	ASSERT_OK(ibv_close_device(ic));
	free(buf);
	return 0;
}

SV_TEST(import_across_processes_scm_rights)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct imp_msg m = {0}, h;
	struct sv_proc p;
	struct sv_end orig;
	char arg[16];
	int ch[2];

	o.mr_access = RW_ACCESS;
	o.qp_access = RW_ACCESS;
	sv_end_open(&orig, &o);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, ch));
	ASSERT_OK(fcntl(ch[0], F_SETFD, FD_CLOEXEC));
	snprintf(arg, sizeof(arg), "%d", ch[1]);
	sv_proc_start_helper(&p, "import_child", (char *[]){arg, NULL}, NULL);
	ASSERT_OK(close(ch[1]));
	m.pd_handle = orig.pd->handle;
	m.mr_handle = orig.mr->handle;
	m.qpn = orig.qp->qp_num;
	m.psn = orig.o.psn;
	m.lid = orig.lid;
	{
		int d = dup(orig.ctx->cmd_fd);

		msg_send(ch[0], &m, d);
		ASSERT_OK(close(d));
	}
	ASSERT_EQ(-1, msg_recv(ch[0], &h));
	sv_end_connect(&orig, h.qpn, h.psn);
	/* the write first: the send after it is what the helper's thread
	 * sees complete (RC order), so it reads both after that (TSan) */
	sv_fill(orig.buf + 8192, 4096, 42);
	rdma_write(&orig, 8192, 4096, h.addr + 8192, h.rkey);
	sv_fill(orig.buf, 1000, 41);
	ASSERT_OK(sv_end_send(&orig, 1, 0, 1000, 0));
	EXPECT_WC(orig.scq, IBV_WC_SUCCESS, 1);
	ASSERT_OK(sv_end_recv(&orig, 2, 16384, 777));
	msg_send(ch[0], &m, -1);
	EXPECT_WC(orig.rcq, IBV_WC_SUCCESS, 2);
	ASSERT_EQ(-1, sv_check(orig.buf + 16384, 777, 43));
	msg_send(ch[0], &m, -1);
	sv_proc_wait(&p, 20000);
	if (!p.exited || p.code)
		fprintf(stderr, "helper said:\n%s%s", p.out, p.err);
	ASSERT_TRUE(p.exited);
	ASSERT_EQ(0, p.code);
	sv_proc_free(&p);
	ASSERT_OK(close(ch[0]));
	sv_end_close(&orig);
}

/* ---- hostile requests on the cmd_fd (wire/import.h) ---- */

static void raw_send(int d, const void *buf, size_t len, const int *fds,
		     int nfds)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};

	if (nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		h.msg_control = u.buf;
		h.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	/* d is non-blocking (the context's cmd_fd is): a full queue waits
	 * for the server to drain it */
	while (sendmsg(d, &h, MSG_NOSIGNAL) != (ssize_t)len) {
		struct pollfd p = {.fd = d, .events = POLLOUT};

		ASSERT_EQ(EAGAIN, errno);
		ASSERT_EQ(1, poll(&p, 1, 5000));
	}
}

/* What comes back on s within 5 s: the answer's length, 0 for a close
 * with no answer. */
static ssize_t answer(int s, struct sv_imp_rep *r)
{
	struct pollfd p = {.fd = s, .events = POLLIN};
	uint8_t buf[sizeof(*r) + 8];
	ssize_t n;

	ASSERT_EQ(1, poll(&p, 1, 5000));
	n = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
	ASSERT_GE(n, 0);
	if (n == (ssize_t)sizeof(*r))
		memcpy(r, buf, sizeof(*r));
	return n;
}

/* A request with a fresh reply socket: what it gets back. */
static ssize_t ask(int d, const struct sv_imp_req *q, size_t len,
		   struct sv_imp_rep *r)
{
	int sp[2];
	ssize_t n;

	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp));
	raw_send(d, q, len, &sp[1], 1);
	ASSERT_OK(close(sp[1]));
	n = answer(sp[0], r);
	ASSERT_OK(close(sp[0]));
	return n;
}

SV_TEST(import_hostile_requests)
{
	struct sv_imp_req good = {.magic = SV_IMP_MAGIC,
				  .version = SV_IMP_VERSION,
				  .op = SV_IMP_HELLO};
	struct ibv_context *c;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct sv_imp_rep r;
	uint8_t buf[64];
	int before, d, sp[2], p2[2], n;

	ASSERT_OK(ibv_close_device(open_dev()));
	before = count_fds();
	c = open_dev();
	pd = ibv_alloc_pd(c);
	ASSERT_NOT_NULL(pd);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	d = dup(c->cmd_fd);
	ASSERT_GE(d, 0);
	/* a good one, answered: then each field wrong, dropped unanswered */
	ASSERT_EQ(sizeof(r), ask(d, &good, sizeof(good), &r));
	ASSERT_EQ(SV_IMP_MAGIC, r.magic);
	ASSERT_EQ(SV_IMP_HELLO, r.op);
	ASSERT_EQ(0, r.status);
	ASSERT_EQ(getpid(), r.pid);
	{
		struct sv_imp_req q[6];

		for (int i = 0; i < 6; i++)
			q[i] = good;
		q[0].magic ^= 1;
		q[1].version = SV_IMP_VERSION + 1;
		q[2].op = 0;
		q[3].op = 99;
		q[4].zero = 1;
		q[5].handle = 5; /* HELLO names nothing */
		for (int i = 0; i < 5; i++)
			ASSERT_EQ(0, ask(d, &q[i], sizeof(q[i]), &r));
		ASSERT_EQ(sizeof(r), ask(d, &q[5], sizeof(q[5]), &r));
		ASSERT_EQ(EINVAL, r.status);
	}
	/* short, long */
	ASSERT_EQ(0, ask(d, &good, 8, &r));
	{
		uint8_t big[sizeof(good) + 1] = {0};

		memcpy(big, &good, sizeof(good));
		ASSERT_EQ(0, ask(d, (void *)big, sizeof(big), &r));
	}
	/* no fd; two fds (both closed); a pipe, not a socket (closed) */
	raw_send(d, &good, sizeof(good), NULL, 0);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp));
	ASSERT_OK(pipe2(p2, O_CLOEXEC));
	raw_send(d, &good, sizeof(good), (int[]){sp[1], p2[1]}, 2);
	ASSERT_OK(close(sp[1]));
	ASSERT_OK(close(p2[1]));
	ASSERT_EQ(0, answer(sp[0], &r));
	ASSERT_OK(close(sp[0]));
	{
		struct pollfd pp = {.fd = p2[0], .events = POLLIN};

		ASSERT_EQ(1, poll(&pp, 1, 5000));
		ASSERT_EQ(0,
			  read(p2[0], buf, 1)); /* EOF: the server closed it */
	}
	ASSERT_OK(close(p2[0]));
	ASSERT_OK(pipe2(p2, O_CLOEXEC));
	raw_send(d, &good, sizeof(good), &p2[1], 1);
	ASSERT_OK(close(p2[1]));
	{
		struct pollfd pp = {.fd = p2[0], .events = POLLIN};

		ASSERT_EQ(1, poll(&pp, 1, 5000));
		ASSERT_EQ(0, read(p2[0], buf, 1));
	}
	ASSERT_OK(close(p2[0]));
	/* a reply socket nobody reads any more: the server does not die */
	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp));
	ASSERT_OK(close(sp[0]));
	raw_send(d, &good, sizeof(good), &sp[1], 1);
	ASSERT_OK(close(sp[1]));
	/* a flood with no fds, until the queue is full: never blocks us,
	 * and the server drains it */
	n = 0;
	for (;;) {
		if (send(d, &good, sizeof(good), MSG_DONTWAIT | MSG_NOSIGNAL) <
		    0) {
			ASSERT_EQ(EAGAIN, errno);
			break;
		}
		ASSERT_LE(++n, 1 << 20);
	}
	ASSERT_GE(n, 1);
	/* handles: a live PD, an unknown one; an MR's keys */
	{
		struct sv_imp_req q = good;

		q.op = SV_IMP_PD;
		q.handle = pd->handle;
		ASSERT_EQ(sizeof(r), ask(d, &q, sizeof(q), &r));
		ASSERT_EQ(0, r.status);
		q.handle = pd->handle + 77;
		ASSERT_EQ(sizeof(r), ask(d, &q, sizeof(q), &r));
		ASSERT_EQ(EINVAL, r.status);
		q.op = SV_IMP_MR;
		q.handle = mr->handle;
		ASSERT_EQ(sizeof(r), ask(d, &q, sizeof(q), &r));
		ASSERT_EQ(0, r.status);
		ASSERT_EQ(mr->lkey, r.lkey);
		ASSERT_EQ(mr->rkey, r.rkey);
		ASSERT_EQ((uintptr_t)buf, r.addr);
		ASSERT_EQ(sizeof(buf), r.length);
		q.handle = 1u << 30;
		ASSERT_EQ(sizeof(r), ask(d, &q, sizeof(q), &r));
		ASSERT_EQ(EINVAL, r.status);
	}
	ASSERT_OK(close(d));
	/* the context is whole */
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_dealloc_pd(pd));
	ASSERT_OK(ibv_close_device(c));
	ASSERT_EQ(before, count_fds()); /* every fd passed was closed */
}

/* The owner's progress thread answers (PD and MR lists, under their
 * locks) while a thread registers and frees MRs and PDs, and this one
 * imports them in process: every answer well-formed, no race (TSan). */
struct churn {
	struct ibv_context *c;
	struct ibv_pd *pd;
	_Atomic int stop;
};

static void *churn_run(void *arg)
{
	struct churn *ch = arg;
	static uint8_t buf[8192];

	while (!atomic_load(&ch->stop)) {
		struct ibv_pd *pd = ibv_alloc_pd(ch->c);
		struct ibv_mr *mr;

		if (!pd)
			abort();
		mr = ibv_reg_mr(ch->pd, buf, sizeof(buf),
				IBV_ACCESS_LOCAL_WRITE);
		if (!mr || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd))
			abort();
	}
	return NULL;
}

SV_TEST(import_answers_beside_churn)
{
	struct sv_imp_req q = {.magic = SV_IMP_MAGIC,
			       .version = SV_IMP_VERSION};
	struct churn ch = {.c = open_dev()};
	struct ibv_context *ic;
	struct sv_imp_rep r;
	pthread_t t;
	int d;

	ch.pd = ibv_alloc_pd(ch.c);
	ASSERT_NOT_NULL(ch.pd);
	ic = ibv_import_device(dup(ch.c->cmd_fd));
	ASSERT_NOT_NULL(ic);
	d = dup(ch.c->cmd_fd);
	ASSERT_OK(pthread_create(&t, NULL, churn_run, &ch));
	for (int i = 0; i < 300; i++) {
		struct ibv_pd *ipd;
		struct ibv_mr *imr;

		q.op = i & 1 ? SV_IMP_MR : SV_IMP_PD;
		q.handle = (uint32_t)(i % 8);
		ASSERT_EQ(sizeof(r), ask(d, &q, sizeof(q), &r));
		ASSERT_TRUE(r.status == 0 || r.status == EINVAL);
		ASSERT_EQ(q.handle, r.handle);
		/* in process: whatever is live at that moment, or EINVAL */
		ipd = ibv_import_pd(ic, ch.pd->handle + (uint32_t)(i % 3));
		if (ipd) {
			imr = ibv_import_mr(ipd, (uint32_t)(i % 8));
			if (imr)
				ibv_unimport_mr(imr);
			ibv_unimport_pd(ipd);
		} else {
			ASSERT_EQ(EINVAL, errno);
		}
	}
	atomic_store(&ch.stop, 1);
	ASSERT_OK(pthread_join(t, NULL));
	ASSERT_OK(close(d));
	ASSERT_OK(ibv_close_device(ic));
	ASSERT_OK(ibv_dealloc_pd(ch.pd));
	ASSERT_OK(ibv_close_device(ch.c));
}

/* A child forked with the context (no exec) has a copy of the process's
 * registry, naming a context whose threads stayed in the parent: its
 * import asks the parent on the fd, as any other process does. */
static struct ibv_context *fork_ctx;
static uint32_t fork_pd, fork_mr;

static int import_in_child(void)
{
	struct ibv_context *ic = ibv_import_device(dup(fork_ctx->cmd_fd));
	struct ibv_pd *ipd;

	if (!ic)
		return 2;
	ipd = ibv_import_pd(ic, fork_pd);
	if (!ipd)
		return 3;
	/* the other process's memory: refused, so the answer came from
	 * the parent, not from the registry's copy */
	if (ibv_import_mr(ipd, fork_mr) || errno != EOPNOTSUPP)
		return 4;
	ibv_unimport_pd(ipd);
	return ibv_close_device(ic) ? 5 : 0;
}

SV_TEST(import_in_forked_child_asks_parent)
{
	char lines[4][SV_CHILD_LINE];
	uint8_t buf[64];
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	int n = 0;

	sv_skip_forked_child_under_sanitizer();
	fork_ctx = open_dev();
	pd = ibv_alloc_pd(fork_ctx);
	ASSERT_NOT_NULL(pd);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	fork_pd = pd->handle;
	fork_mr = mr->handle;
	ASSERT_EQ(0, sv_child_env("SV_IMPORT_CHILD", "1", import_in_child,
				  lines, 4, &n));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_dealloc_pd(pd));
	ASSERT_OK(ibv_close_device(fork_ctx));
}
