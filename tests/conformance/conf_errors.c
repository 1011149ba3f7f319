// SPDX-License-Identifier: MIT
/*
 * Error semantics: completion statuses of local and remote errors, RNR
 * retries (counted and infinite), CQ overrun as IBV_EVENT_CQ_ERR, flush on
 * ERR, on the peer QP's destruction and on the peer process's death; the
 * counters softverbs-stat shows for them.
 */
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pair.h"
#include "stat.h"

/* Both QPs end in ERR; new WRs on them flush. */
static void check_flushes_after_error(struct sv_end *e)
{
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(e));
	ASSERT_OK(sv_end_recv(e, 900, 0, 64));
	EXPECT_WC(e->rcq, IBV_WC_WR_FLUSH_ERR, 900);
	ASSERT_OK(sv_end_send(e, 901, 0, 64, 0));
	EXPECT_WC(e->scq, IBV_WC_WR_FLUSH_ERR, 901);
}

/* A message longer than the receive: both sides' errors, then their
 * flushes: a LOC_LEN_ERR, a REM_INV_REQ_ERR and six flushes in all. */
static void recv_too_small(struct sv_pair *p)
{
	ASSERT_OK(sv_end_recv(&p->b, 1, 0, 100));
	ASSERT_OK(sv_end_recv(&p->b, 2, 100, 100)); /* flushed later */
	ASSERT_OK(sv_end_send(&p->a, 3, 0, 101, 0));
	ASSERT_OK(sv_end_send(&p->a, 4, 0, 10, 0)); /* flushed later */
	/* IBA 9.7.5.2.2: the responder sees a too-long message */
	EXPECT_WC(p->b.rcq, IBV_WC_LOC_LEN_ERR, 1);
	EXPECT_WC(p->b.rcq, IBV_WC_WR_FLUSH_ERR, 2);
	EXPECT_WC(p->a.scq, IBV_WC_REM_INV_REQ_ERR, 3);
	EXPECT_WC(p->a.scq, IBV_WC_WR_FLUSH_ERR, 4);
	check_flushes_after_error(&p->a);
	check_flushes_after_error(&p->b);
}

SV_TEST(status_recv_too_small)
{
	struct sv_pair p;

	sv_pair_open(&p, NULL, NULL);
	recv_too_small(&p);
	sv_pair_close(&p);
}

/* The counters' tables of our contexts (stat.h: a memfd each), each
 * waited for until refreshed after now, their totals summed by name into
 * names/v (n of them, at most max); the number of tables. */
static int stat_totals(char (*names)[SV_STAT_NAME_LEN], uint64_t *v, int max,
		       int *n)
{
	struct timespec t;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int tables = 0;

	ASSERT_TRUE(d != NULL);
	clock_gettime(CLOCK_REALTIME, &t);
	*n = 0;
	while ((e = readdir(d))) {
		uint64_t after = (uint64_t)t.tv_sec * 1000000000ull +
				 (uint64_t)t.tv_nsec;
		char p[300], l[128];
		const struct sv_stat_hdr *h;
		uint64_t tot[SV_STAT_MAX_CTR], seq;
		ssize_t k;
		int waited = 0;

		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		k = readlink(p, l, sizeof(l) - 1);
		if (k <= 0)
			continue;
		l[k] = 0;
		if (!strstr(l, "memfd:" SV_STAT_MEMFD))
			continue;
		h = mmap(NULL, SV_STAT_SIZE, PROT_READ, MAP_SHARED,
			 atoi(e->d_name), 0);
		ASSERT_TRUE(h != MAP_FAILED);
		ASSERT_TRUE(h->nctr <= SV_STAT_MAX_CTR);
		/* the progress thread refreshes every SV_STAT_PERIOD_NS */
		while (__atomic_load_n(&h->updated_ns, __ATOMIC_ACQUIRE) <=
		       after) {
			ASSERT_TRUE(waited++ < 1000); /* 10 s */
			usleep(10000);
		}
		/* the seqcount: acquire loads of the counters, so the seq
		 * read after them is read after them (no fence: TSan has
		 * none) */
		do {
			seq = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE);
			for (uint32_t i = 0; i < SV_STAT_MAX_CTR; i++)
				tot[i] = __atomic_load_n(&h->total[i],
							 __ATOMIC_ACQUIRE);
		} while ((seq & 1) ||
			 seq != __atomic_load_n(&h->seq, __ATOMIC_RELAXED));
		for (uint32_t i = 0; i < h->nctr; i++) {
			int j = 0;

			while (j < *n &&
			       strncmp(names[j], h->names[i], SV_STAT_NAME_LEN))
				j++;
			if (j == *n) {
				ASSERT_TRUE(*n < max);
				memcpy(names[(*n)++], h->names[i],
				       SV_STAT_NAME_LEN);
				v[j] = 0;
			}
			v[j] += tot[i];
		}
		munmap((void *)h, SV_STAT_SIZE);
		tables++;
	}
	closedir(d);
	return tables;
}

static uint64_t stat_of(char (*names)[SV_STAT_NAME_LEN], const uint64_t *v,
			int n, const char *name)
{
	for (int j = 0; j < n; j++)
		if (!strncmp(names[j], name, SV_STAT_NAME_LEN))
			return v[j];
	return UINT64_MAX;
}

/* softverbs-stat's counters of errors: each status under its own name,
 * err_wc their sum, and no name for a success (it is not counted) */
SV_TEST(stat_counts_errors_by_status)
{
	char names[SV_STAT_MAX_CTR * 2][SV_STAT_NAME_LEN];
	uint64_t v[SV_STAT_MAX_CTR * 2];
	struct sv_pair p;
	int n;

	sv_pair_open(&p, NULL, NULL);
	sv_pair_ping(&p); /* successes: counted nowhere */
	recv_too_small(&p);
	ASSERT_TRUE(stat_totals(names, v, SV_STAT_MAX_CTR * 2, &n) > 0);
	ASSERT_EQ(UINT64_MAX, stat_of(names, v, n, "wc_success"));
	ASSERT_EQ(1, stat_of(names, v, n, "wc_loc_len_err"));
	ASSERT_EQ(1, stat_of(names, v, n, "wc_rem_inv_req_err"));
	ASSERT_EQ(6, stat_of(names, v, n, "wc_wr_flush_err"));
	ASSERT_EQ(0, stat_of(names, v, n, "wc_loc_qp_op_err"));
	ASSERT_EQ(0, stat_of(names, v, n, "wc_other_err"));
	ASSERT_EQ(8, stat_of(names, v, n, "err_wc"));
	sv_pair_close(&p);
}

SV_TEST(status_send_bad_lkey)
{
	struct sv_pair p;
	struct ibv_sge sg;
	struct ibv_send_wr wr, *bad;

	sv_pair_open(&p, NULL, NULL);
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 4096));
	sg = (struct ibv_sge){(uintptr_t)p.a.buf, 64, p.a.mr->lkey + 0x1000};
	wr = (struct ibv_send_wr){.wr_id = 5,
				  .sg_list = &sg,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND};
	ASSERT_OK(ibv_post_send(p.a.qp, &wr, &bad));
	ASSERT_OK(sv_end_send(&p.a, 6, 0, 64, 0));
	EXPECT_WC(p.a.scq, IBV_WC_LOC_PROT_ERR, 5);
	EXPECT_WC(p.a.scq, IBV_WC_WR_FLUSH_ERR, 6);
	check_flushes_after_error(&p.a);
	/* nothing reached the responder */
	NO_WC(p.b.rcq, 50);

	/* an address outside the MR with a good lkey is the same error */
	sv_pair_close(&p);
	sv_pair_open(&p, NULL, NULL);
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 4096));
	sg = (struct ibv_sge){(uintptr_t)p.a.buf + p.a.o.buf_len - 8, 64,
			      p.a.mr->lkey};
	ASSERT_OK(ibv_post_send(p.a.qp, &wr, &bad));
	EXPECT_WC(p.a.scq, IBV_WC_LOC_PROT_ERR, 5);
	sv_pair_close(&p);
}

SV_TEST(status_recv_bad_lkey)
{
	struct sv_pair p;
	struct ibv_sge sg;
	struct ibv_recv_wr wr, *bad;

	sv_pair_open(&p, NULL, NULL);
	memset(p.b.buf, 0x11, p.b.o.buf_len);
	sg = (struct ibv_sge){(uintptr_t)p.b.buf, 256, p.b.mr->lkey ^ 0x100};
	wr = (struct ibv_recv_wr){.wr_id = 7, .sg_list = &sg, .num_sge = 1};
	ASSERT_OK(ibv_post_recv(p.b.qp, &wr, &bad));
	ASSERT_OK(sv_end_recv(&p.b, 8, 0, 256));
	sv_fill(p.a.buf, 64, 9);
	ASSERT_OK(sv_end_send(&p.a, 1, 0, 64, 0));
	EXPECT_WC(p.b.rcq, IBV_WC_LOC_PROT_ERR, 7);
	EXPECT_WC(p.b.rcq, IBV_WC_WR_FLUSH_ERR, 8);
	/* IBA 9.7.5.2.4 / table 43: the responder's local error is a
	 * Remote Operational Error NAK for the requester */
	EXPECT_WC(p.a.scq, IBV_WC_REM_OP_ERR, 1);
	ASSERT_EQ(0x11, p.b.buf[0]); /* nothing was written */
	check_flushes_after_error(&p.b);
	check_flushes_after_error(&p.a);
	sv_pair_close(&p);
}

SV_TEST(rnr_retry_exceeded)
{
	struct sv_end_opts oa = sv_end_opts_default(), ob;
	struct sv_pair p;
	uint64_t t0;

	oa.rnr_retry = 1;
	ob = sv_end_opts_default();
	ob.psn = 0x5678;
	ob.min_rnr_timer = 1; /* 0.01 ms */
	sv_pair_open(&p, &oa, &ob);
	t0 = sv_now_ms();
	ASSERT_OK(sv_end_send(&p.a, 1, 0, 64, 0));
	EXPECT_WC(p.a.scq, IBV_WC_RNR_RETRY_EXC_ERR, 1);
	ASSERT_LE(sv_now_ms() - t0, 1000);
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&p.a));
	/* the receive posted now must not see the abandoned message */
	ASSERT_OK(sv_end_recv(&p.b, 2, 0, 64));
	NO_WC(p.b.rcq, 50);
	sv_pair_close(&p);
}

SV_TEST(rnr_retry_infinite)
{
	struct sv_end_opts ob = sv_end_opts_default();
	struct sv_pair p;
	struct ibv_wc wc;

	ob.psn = 0x5678;
	ob.min_rnr_timer = 1;
	sv_pair_open(&p, NULL, &ob); /* a: rnr_retry = 7 */
	sv_fill(p.a.buf, 512, 4);
	ASSERT_OK(sv_end_send(&p.a, 1, 0, 512, 0));
	/* no receive: the sender keeps retrying, nothing completes */
	NO_WC(p.a.scq, 300);
	NO_WC(p.b.rcq, 10);
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&p.a));
	ASSERT_OK(sv_end_recv(&p.b, 2, 0, 4096));
	WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(2, wc.wr_id);
	ASSERT_EQ(512, wc.byte_len);
	ASSERT_EQ(-1, sv_check(p.b.buf, 512, 4));
	WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(1, wc.wr_id);
	NO_WC(p.b.rcq, 20); /* delivered once */
	sv_pair_close(&p);
}

SV_TEST(cq_overrun_async_event)
{
	struct sv_end_opts oa = sv_end_opts_default();
	struct sv_pair p;
	struct ibv_async_event ev;
	struct pollfd pfd;
	struct ibv_wc wc;
	int cqe;

	oa.cqe = 2;
	sv_pair_open(&p, &oa, NULL);
	cqe = p.a.scq->cqe; /* at least 2; may be rounded up */
	ASSERT_GE(cqe, 2);
	ASSERT_LE(cqe, 32);
	for (int i = 0; i < cqe + 2; i++)
		ASSERT_OK(sv_end_recv(&p.b, (uint64_t)i, 0, 64));
	for (int i = 0; i < cqe + 2; i++)
		ASSERT_OK(sv_end_send(&p.a, (uint64_t)i, 0, 64, 0));
	/* the receiver takes them all: the sends are all acknowledged */
	for (int i = 0; i < cqe + 2; i++) {
		WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	}
	/* never polled, a's send CQ overruns: IBA 11.4.2.1 async error */
	pfd = (struct pollfd){.fd = p.a.ctx->async_fd, .events = POLLIN};
	ASSERT_EQ(1, poll(&pfd, 1, SV_WC_TIMEOUT_MS));
	ASSERT_OK(ibv_get_async_event(p.a.ctx, &ev));
	ASSERT_EQ(IBV_EVENT_CQ_ERR, ev.event_type);
	ASSERT_TRUE(ev.element.cq == p.a.scq);
	ibv_ack_async_event(&ev);
	/* reported once, not once per lost completion */
	ASSERT_EQ(0, poll(&pfd, 1, 50));
	sv_pair_close(&p); /* destroying the CQ must not wait forever */
}

SV_TEST(flush_on_modify_to_err)
{
	struct sv_end_opts ob = sv_end_opts_default();
	struct sv_pair p;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	ob.psn = 0x5678;
	sv_pair_open(&p, NULL, &ob);
	for (int i = 0; i < 3; i++)
		ASSERT_OK(sv_end_recv(&p.a, 10 + (uint64_t)i, 0, 64));
	/* b posts no receive and a retries RNR forever: the sends stay */
	ASSERT_OK(sv_end_send(&p.a, 20, 0, 64, 0));
	ASSERT_OK(sv_end_send(&p.a, 21, 0, 64, 0));
	NO_WC(p.a.scq, 100);
	ASSERT_OK(ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE));
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&p.a));
	EXPECT_WC(p.a.scq, IBV_WC_WR_FLUSH_ERR, 20);
	EXPECT_WC(p.a.scq, IBV_WC_WR_FLUSH_ERR, 21);
	for (int i = 0; i < 3; i++)
		EXPECT_WC(p.a.rcq, IBV_WC_WR_FLUSH_ERR, 10 + (uint64_t)i);
	NO_WC(p.a.scq, 20);
	NO_WC(p.a.rcq, 20);
	/* posting in ERR completes at once with a flush */
	check_flushes_after_error(&p.a);
	sv_pair_close(&p);
}

/*
 * A send to a peer QP that is gone fails as on a wire: with
 * IBV_WC_RETRY_EXC_ERR once the ACK timer (4.096 us * 2^timeout, at least
 * 500 ms here) has run out retry_cnt + 1 times, not at once.
 */
SV_TEST(flush_on_peer_destroy)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct sv_pair p;
	struct ibv_wc wc;
	uint64_t t0;

	o.retry_cnt = 1;	/* two ACK timeouts: about a second */
	if (sv_test_roce())	/* RoCE's timer is the QP's own (comp.c): */
		o.timeout = 17; /* 537 ms */
	sv_pair_open(&p, &o, NULL);
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 64));
	ASSERT_OK(sv_end_send(&p.a, 1, 0, 64, 0));
	WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);

	ASSERT_OK(ibv_destroy_qp(p.b.qp));
	p.b.qp = NULL;
	t0 = sv_now_ms();
	ASSERT_OK(sv_end_recv(&p.a, 3, 0, 64));
	ASSERT_OK(sv_end_send(&p.a, 2, 0, 64, 0));
	NO_WC(p.a.scq, 300); /* the timer runs: no answer is not an error */
	EXPECT_WC(p.a.scq, IBV_WC_RETRY_EXC_ERR, 2);
	ASSERT_GE(sv_now_ms() - t0, 900);
	ASSERT_LE(sv_now_ms() - t0, 10000);
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&p.a));
	EXPECT_WC(p.a.rcq, IBV_WC_WR_FLUSH_ERR, 3);
	sv_pair_close(&p);
}

/* The peer process of peer_death: one QP, one receive, then it waits to
 * be killed (or exits when the parent's pipe closes). */
static void peer_child(int rd, int wr)
{
	struct sv_end e;
	uint32_t qpn, psn;
	char c = 'r';

	sv_end_open(&e, NULL);
	qpn = e.qp->qp_num;
	if (write(wr, &qpn, sizeof(qpn)) != sizeof(qpn) ||
	    read(rd, &qpn, sizeof(qpn)) != sizeof(qpn) ||
	    read(rd, &psn, sizeof(psn)) != sizeof(psn))
		_exit(2);
	sv_end_connect(&e, qpn, psn);
	if (sv_end_recv(&e, 1, 0, 4096))
		_exit(3);
	if (write(wr, &c, 1) != 1)
		_exit(4);
	while (read(rd, &c, 1) > 0) /* the progress thread does the work */
		;
	_exit(0);
}

SV_TEST(peer_death)
{
	int down[2], up[2], st;
	uint32_t peer_qpn, qpn, psn;
	struct sv_end e;
	struct ibv_async_event ev;
	struct ibv_wc wc;
	struct pollfd pfd;
	uint64_t t0;
	pid_t pid;
	char c;

	ASSERT_OK(pipe(down));
	ASSERT_OK(pipe(up));
	fflush(NULL);
	pid = fork(); /* before any verbs object exists in this process */
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		close(down[1]);
		close(up[0]);
		alarm(60);
		peer_child(down[0], up[1]);
	}
	close(down[0]);
	close(up[1]);

	sv_end_open(&e, NULL);
	ASSERT_EQ(sizeof(peer_qpn), read(up[0], &peer_qpn, sizeof(peer_qpn)));
	qpn = e.qp->qp_num;
	psn = e.o.psn;
	ASSERT_EQ(sizeof(qpn), write(down[1], &qpn, sizeof(qpn)));
	ASSERT_EQ(sizeof(psn), write(down[1], &psn, sizeof(psn)));
	sv_end_connect(&e, peer_qpn, sv_end_opts_default().psn);
	ASSERT_EQ(1, read(up[0], &c, 1));

	/* one message goes through: the link works across processes */
	ASSERT_OK(sv_end_send(&e, 1, 0, 100, 0));
	WAIT_WC(e.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	/* the second finds no receive and waits on RNR (rnr_retry 7) */
	for (int i = 0; i < 3; i++)
		ASSERT_OK(sv_end_recv(&e, 10 + (uint64_t)i, 0, 64));
	ASSERT_OK(sv_end_send(&e, 2, 0, 100, 0));
	NO_WC(e.scq, 100);

	ASSERT_OK(kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	t0 = sv_now_ms();
	WAIT_WC(e.scq, &wc, 5000);
	ASSERT_EQ(2, wc.wr_id);
	ASSERT_TRUE(wc.status == IBV_WC_RETRY_EXC_ERR ||
		    wc.status == IBV_WC_WR_FLUSH_ERR);
	for (int i = 0; i < 3; i++) {
		WAIT_WC(e.rcq, &wc, 5000);
		ASSERT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status);
		ASSERT_EQ(10 + i, wc.wr_id);
	}
	ASSERT_LE(sv_now_ms() - t0, 5000);
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&e));
	/* the QP's fatal error is also an async event; over RoCE, as with
	 * a NIC, the send's retries found the death: a completion error */
	pfd = (struct pollfd){.fd = e.ctx->async_fd, .events = POLLIN};
	if (!sv_test_roce()) {
		ASSERT_EQ(1, poll(&pfd, 1, SV_WC_TIMEOUT_MS));
		ASSERT_OK(ibv_get_async_event(e.ctx, &ev));
		ASSERT_EQ(IBV_EVENT_QP_FATAL, ev.event_type);
		ASSERT_TRUE(ev.element.qp == e.qp);
		ibv_ack_async_event(&ev);
	}
	close(down[1]);
	close(up[0]);
	sv_end_close(&e);
}

/*
 * ibv_qp.state is the program's copy: rdma-core's libibverbs writes it in
 * ibv_modify_qp and ibv_query_qp only, and programs read it (UCX asserts
 * it is RTS before each post).  A QP that the engine moves to ERROR (its
 * peer gone) keeps RTS there until the program queries.
 */
SV_TEST(qp_state_field_is_the_programs)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct sv_pair p;
	struct ibv_wc wc;

	o.retry_cnt = 0; /* one ACK timeout: half a second */
	sv_pair_open(&p, &o, NULL);
	ASSERT_EQ(IBV_QPS_RTS, p.a.qp->state);
	ASSERT_OK(ibv_destroy_qp(p.b.qp));
	p.b.qp = NULL;
	ASSERT_OK(sv_end_send(&p.a, 7, 0, 64, 0));
	WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_RETRY_EXC_ERR, wc.status);
	ASSERT_EQ(IBV_QPS_RTS, p.a.qp->state); /* not the program's doing */
	ASSERT_OK(ibv_query_qp(p.a.qp, &a, IBV_QP_STATE, &ia));
	ASSERT_EQ(IBV_QPS_ERR, a.qp_state);
	ASSERT_EQ(IBV_QPS_ERR, p.a.qp->state); /* the query caught it up */
	/* and a modify from the real state works */
	a.qp_state = IBV_QPS_RESET;
	ASSERT_OK(ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE));
	ASSERT_EQ(IBV_QPS_RESET, p.a.qp->state);
	sv_pair_close(&p);
}
