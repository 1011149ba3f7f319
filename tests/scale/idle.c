// SPDX-License-Identifier: MIT
/*
 * sv_idle: a wake-up of the progress thread costs what happened, not the
 * number of QPs (issue 25).  One context holds K idle RC QPs, connected in
 * pairs and never used, and one pair that ping-pongs N messages driven by
 * completion events (each message wakes the progress thread).  The
 * context's counters (softverbs-stat's memfd: progress_looks, the thread's
 * looks at a QP) say how often the thread looked at the idle QPs during
 * the ping-pong: it must not, beyond a few stray timers; a thread that
 * walks every QP per wake-up looks 2 x N x K times (checked once: with
 * such a walk added back after each epoll_wait, this fails).  Also prints the
 * round trip.  With "poll" as third argument (issue 27) the busy pair
 * shares the idle QPs' CQ and polls it, and the counter is poll_runs (the
 * polls' runs of a QP's engine): a poll that runs every QP's engine runs
 * the idle ones >= 2 x N x K times; it must not run them at all.  Over
 * TCP (SOFTVERBS_TRANSPORT=tcp) the count adds tcp_reads, the recv(2)s on
 * the idle QPs' sockets: a poll that runs every TCP QP reads each socket
 * (checked: 500 idle TCP QPs, before drive.c runs_idle and the CQs'
 * readiness sets: tcp_reads 76,977 in 200 round trips, 149,000-217,000
 * in 500; a poll stops at the first QP that completes something).  In
 * "poll" mode each idle pair first exchanges one message, so that its
 * links are up (over TCP they are called through the doors, paced).  With
 * "ack" (issue 27, ibv_srq_pingpong -q N's case): K QPs on one CQ, each
 * with a send on its way to a peer in a child process that is stopped
 * (SIGSTOP) before it can acknowledge; N polls of the CQ must not run
 * those QPs' engines (they wait for the peer's ACK word and nothing
 * else): a poll that runs every QP with a send outstanding runs them
 * N x K times (checked: 12,800 for 64 QPs and 200 polls without
 * drive.c acked_only).  Then the child goes on and every send
 * completes.  Exit 0 on success, 1 on failure.
 */
#include <dirent.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stat.h"

static void die(const char *what, int err)
{
	fprintf(stderr, "sv_idle: %s: %s\n", what, strerror(err));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct ctx {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char buf[64];
	uint16_t lid;
};

static struct ibv_qp *make_qp(struct ctx *c, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = {.max_send_wr = 4,
			.max_recv_wr = 4,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	struct ibv_qp *qp = ibv_create_qp(c->pd, &ia);

	if (!qp)
		die("ibv_create_qp", errno);
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		die("ibv_modify_qp INIT", errno);
	return qp;
}

static void to_rts(struct ctx *c, struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {.dlid = c->lid, .port_num = 1},
	};
	int err = ibv_modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER);

	if (err)
		die("ibv_modify_qp RTR", err);
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
				 .timeout = 14,
				 .retry_cnt = 7,
				 .rnr_retry = 7,
				 .max_rd_atomic = 1};
	err = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				    IBV_QP_MAX_QP_RD_ATOMIC);
	if (err)
		die("ibv_modify_qp RTS", err);
}

static void post_recv(struct ctx *c, struct ibv_qp *qp)
{
	struct ibv_sge sg = {(uintptr_t)c->buf, 8, c->mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sg, .num_sge = 1}, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv", EIO);
}

static void post_send(struct ctx *c, struct ibv_qp *qp)
{
	struct ibv_sge sg = {(uintptr_t)c->buf + 32, 8, c->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send", EIO);
}

/* Waits for `want` completions on cq, by events only. */
static void wait_cq(struct ibv_comp_channel *ch, struct ibv_cq *cq, int want)
{
	while (want > 0) {
		struct ibv_wc wc[4];
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		int n;

		if (ibv_req_notify_cq(cq, 0))
			die("ibv_req_notify_cq", EIO);
		n = ibv_poll_cq(cq, 4, wc);
		if (n == 0) {
			if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
				die("ibv_get_cq_event", errno);
			ibv_ack_cq_events(ev_cq, 1);
			n = ibv_poll_cq(cq, 4, wc);
		}
		if (n < 0)
			die("ibv_poll_cq", EIO);
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				die(ibv_wc_status_str(wc[i].status), EIO);
		want -= n;
	}
}

/* Waits for `want` completions on cq, by polling it (mode "poll"). */
static void spin_cq(struct ibv_cq *cq, int want)
{
	uint64_t deadline = now_ns() + 30000000000ull;

	do {
		struct ibv_wc wc[4];
		int n = ibv_poll_cq(cq, 4, wc);

		if (n < 0)
			die("ibv_poll_cq", EIO);
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				die(ibv_wc_status_str(wc[i].status), EIO);
		want -= n;
		if (!n && want > 0 && now_ns() > deadline)
			die("no completion in 30 s", ETIME);
	} while (want > 0);
}

/* Our context's counters (stat.h): the memfd among our fds. */
static const struct sv_stat_hdr *stat_map(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	const struct sv_stat_hdr *h = NULL;

	while (d && (e = readdir(d))) {
		char p[300], t[128];
		ssize_t n;

		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		n = readlink(p, t, sizeof(t) - 1);
		if (n <= 0)
			continue;
		t[n] = 0;
		if (!strstr(t, "memfd:" SV_STAT_MEMFD))
			continue;
		h = mmap(NULL, SV_STAT_SIZE, PROT_READ, MAP_SHARED,
			 atoi(e->d_name), 0);
		if (h == MAP_FAILED)
			h = NULL;
		break;
	}
	if (d)
		closedir(d);
	if (!h)
		die("no softverbs-stat memfd (run under softverbs-run)", 0);
	return h;
}

/* Counters names[0..nn) (the thread's looks, the polls' runs, the TCP
 * links' reads) each summed over the QPs other than the two busy ones, into
 * v[], from one fresh refresh of the table (it refreshes every
 * SV_STAT_PERIOD_NS); false if the provider lacks one.  keep: a CQ polled
 * meanwhile (NULL: none), so that the app still drives its QPs while it
 * waits: the thread looks at the QPs of a CQ nobody polls, as it must. */
static bool idle_counts(const struct sv_stat_hdr *h, const char *const *names,
			int nn, uint32_t a, uint32_t b, uint64_t *v,
			struct ibv_cq *keep)
{
	const struct sv_stat_slot *sl = (const void *)(h + 1);
	uint64_t upd = __atomic_load_n(&h->updated_ns, __ATOMIC_ACQUIRE);
	/* a refresh that never comes, not a slow one: a walk of 2,000
	 * QPs on a loaded machine may be preempted, and the next waits
	 * four walks' time (provider/lib/stat.c) */
	uint64_t deadline = now_ns() + 30000000000ull;
	int k[4];

	for (int j = 0; j < nn && j < 4; j++) {
		k[j] = -1;
		for (uint32_t i = 0; i < h->nctr; i++)
			if (!strcmp(h->names[i], names[j]))
				k[j] = (int)i;
		if (k[j] < 0)
			return false; /* an older provider: round trips only */
	}
	/* wait for the next refresh, then copy under its seqcount */
	while (__atomic_load_n(&h->updated_ns, __ATOMIC_ACQUIRE) == upd)
		if (now_ns() > deadline)
			die("the counters were not refreshed in 30 s", ETIME);
		else if (keep)
			spin_cq(keep, 0);
		else
			usleep(10000);
	for (;;) {
		uint64_t s = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE);

		for (int j = 0; j < nn && j < 4; j++) {
			v[j] = h->total[k[j]];
			for (uint32_t i = 0; i < h->nqps; i++)
				if (sl[i].qpn == a || sl[i].qpn == b)
					v[j] -= sl[i].c[k[j]];
		}
		atomic_thread_fence(memory_order_acquire);
		if (!(s & 1) && s == __atomic_load_n(&h->seq, __ATOMIC_RELAXED))
			return true;
	}
}

/* One counter (idle_counts); UINT64_MAX if the provider lacks it. */
static uint64_t idle_count(const struct sv_stat_hdr *h, const char *name,
			   uint32_t a, uint32_t b)
{
	uint64_t v;

	return idle_counts(h, &name, 1, a, b, &v, NULL) ? v : UINT64_MAX;
}

static void xfer(int fd, void *p, size_t n, bool wr)
{
	ssize_t r = wr ? write(fd, p, n) : read(fd, p, n);

	if (r != (ssize_t)n)
		die(wr ? "pipe write" : "pipe read", r < 0 ? errno : EPIPE);
}

static struct ctx *open_ctx(struct ctx *c)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;

	if (!l || !l[0])
		die("no RDMA device (run under softverbs-run)", ENODEV);
	c->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!c->ctx || !(c->pd = ibv_alloc_pd(c->ctx)))
		die("ibv_open_device", errno);
	c->mr = ibv_reg_mr(c->pd, c->buf, sizeof(c->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr || ibv_query_port(c->ctx, 1, &pa))
		die("ibv_reg_mr", errno);
	c->lid = pa.lid;
	return c;
}

/* K QPs of one context, one of the two sides of "ack" mode: the child
 * (!parent) receives two messages on each and polls until it has them;
 * the parent sends them.  QPNs are swapped over the pipes. */
static struct ibv_qp **ack_side(struct ctx *c, struct ibv_cq **cq, int k,
				int rd, int wr, bool parent)
{
	struct ibv_qp **q = calloc((size_t)k, sizeof(*q));
	uint32_t *mine = calloc((size_t)k, sizeof(*mine));
	uint32_t *theirs = calloc((size_t)k, sizeof(*theirs));
	struct ibv_mr *mr;
	char *rb;

	open_ctx(c);
	*cq = ibv_create_cq(c->ctx, 2 * k + 8, NULL, NULL, 0);
	if (!q || !mine || !theirs || !*cq)
		die("ibv_create_cq", errno);
	for (int i = 0; i < k; i++) {
		q[i] = make_qp(c, *cq);
		mine[i] = q[i]->qp_num;
	}
	xfer(wr, mine, k * sizeof(*mine), true);
	xfer(rd, theirs, k * sizeof(*theirs), false);
	/* the child's receives, each its own 8 bytes: two QPs' messages
	 * are scattered at once (by the poll and the progress thread) */
	rb = parent ? MAP_FAILED
		    : mmap(NULL, (size_t)k * 16, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mr = rb != MAP_FAILED ? ibv_reg_mr(c->pd, rb, (size_t)k * 16,
					   IBV_ACCESS_LOCAL_WRITE)
			      : NULL;
	if (!parent && !mr)
		die("ibv_reg_mr", errno);
	for (int i = 0; i < k; i++) {
		to_rts(c, q[i], theirs[i]);
		for (int j = 0; !parent && j < 2; j++) {
			struct ibv_sge sg = {(uintptr_t)(rb + (2 * i + j) * 8),
					     8, mr->lkey};
			struct ibv_recv_wr rw = {.sg_list = &sg, .num_sge = 1};
			struct ibv_recv_wr *bad;

			if (ibv_post_recv(q[i], &rw, &bad))
				die("ibv_post_recv", EIO);
		}
	}
	free(mine);
	free(theirs);
	return q;
}

/* Mode "ack": see the head of the file. */
static int ack_mode(int k, int n)
{
	const struct sv_stat_hdr *h;
	int up[2], down[2], st;
	struct ibv_qp **q;
	struct ibv_cq *cq;
	uint64_t before, after;
	struct ctx c;
	char go = 1;
	pid_t pid;

	/* before any device or thread of ours: the child is a clean one */
	if (pipe(up) || pipe(down))
		die("pipe", errno);
	pid = fork();
	if (pid < 0)
		die("fork", errno);
	if (pid == 0) {
		q = ack_side(&c, &cq, k, down[0], up[1], false);
		xfer(up[1], &go, 1, true); /* receives posted */
		spin_cq(cq, 2 * k);	   /* stopped meanwhile, for a while */
		_exit(0);
	}
	q = ack_side(&c, &cq, k, up[0], down[1], true);
	xfer(up[0], &go, 1, false);
	/* one message each: the links are up, the peer answers */
	for (int i = 0; i < k; i++)
		post_send(&c, q[i]);
	spin_cq(cq, k);
	if (kill(pid, SIGSTOP) || waitpid(pid, &st, WUNTRACED) != pid ||
	    !WIFSTOPPED(st))
		die("stopping the peer", errno);
	for (int i = 0; i < k; i++)
		post_send(&c, q[i]);
	h = stat_map();
	before = idle_count(h, "poll_runs", 0, 0);
	for (int i = 0; i < n; i++)
		spin_cq(cq, 0); /* nothing can complete: no ACK comes */
	after = idle_count(h, "poll_runs", 0, 0);
	if (kill(pid, SIGCONT))
		die("SIGCONT", errno);
	spin_cq(cq, k); /* the second sends, acknowledged now */
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		die("the peer failed", EIO);
	for (int i = 0; i < k; i++)
		if (ibv_destroy_qp(q[i]))
			die("ibv_destroy_qp", EIO);
	free(q);
	if (ibv_destroy_cq(cq) || ibv_dereg_mr(c.mr) || ibv_dealloc_pd(c.pd) ||
	    ibv_close_device(c.ctx))
		die("closing the context", EIO);
	if (before == UINT64_MAX || after == UINT64_MAX) {
		printf("sv_idle: no poll_runs counter\n");
		return 77;
	}
	printf("sv_idle: %d QPs each waiting for an ACK, %d polls: "
	       "poll_runs %llu meanwhile\n",
	       k, n, (unsigned long long)(after - before));
	/* a poll that runs every QP with a send outstanding: n x k */
	if (after - before > (uint64_t)k + 16) {
		fprintf(stderr,
			"sv_idle: FAIL: poll_runs %llu in %d polls of %d "
			"QPs that only wait for an ACK (a poll runs each)\n",
			(unsigned long long)(after - before), n, k);
		return 1;
	}
	return 0;
}

/* One message on each idle pair q[i] -> q[i + 1], into a receive buffer of
 * its own: two QPs' messages are scattered at once (by the poll and the
 * progress thread). */
static void greet_pairs(struct ctx *c, struct ibv_qp **q, int k,
			struct ibv_cq *cq)
{
	char *rb = calloc((size_t)k + 1, 8);
	struct ibv_mr *mr = rb ? ibv_reg_mr(c->pd, rb, ((size_t)k + 1) * 8,
					    IBV_ACCESS_LOCAL_WRITE)
			       : NULL;

	if (!mr)
		die("ibv_reg_mr", errno);
	for (int i = 0; i + 1 < k; i += 2) {
		struct ibv_sge sg = {(uintptr_t)(rb + i * 8), 8, mr->lkey};
		struct ibv_recv_wr wr = {.sg_list = &sg, .num_sge = 1}, *bad;

		if (ibv_post_recv(q[i + 1], &wr, &bad))
			die("ibv_post_recv", EIO);
		post_send(c, q[i]);
	}
	spin_cq(cq, k / 2 * 2); /* every receive is done with rb */
	if (ibv_dereg_mr(mr))
		die("ibv_dereg_mr", EIO);
	free(rb);
}

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 2000;
	int n = argc > 2 ? atoi(argv[2]) : 200;
	/* "poll": the busy pair shares the idle QPs' CQ and polls it; the
	 * polls' runs of the idle QPs' engines are counted (issue 27), and
	 * over TCP their recv(2)s (a run reads the link's socket) */
	bool poll = argc > 3 && !strcmp(argv[3], "poll");
	const char *ctr[4] = {poll ? "poll_runs" : "progress_looks",
			      "tcp_reads", "progress_looks", "progress_swept"};
	int nctr = poll ? 4 : 1;
	struct ibv_device **l;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq_a, *cq_b, *idle_cq;
	struct ibv_qp *a, *b, **q;
	const struct sv_stat_hdr *h;
	struct ibv_port_attr pa;
	uint64_t before[4], after[4], t0, t1;
	struct ctx c;

	/* "ack": QPs waiting for an ACK are not run by a poll (issue 27) */
	if (argc > 3 && !strcmp(argv[3], "ack"))
		return ack_mode(k, n);
	l = ibv_get_device_list(NULL);
	if (!l || !l[0])
		die("no RDMA device (run under softverbs-run)", ENODEV);
	c.ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!c.ctx || !(c.pd = ibv_alloc_pd(c.ctx)))
		die("ibv_open_device", errno);
	c.mr = ibv_reg_mr(c.pd, c.buf, sizeof(c.buf), IBV_ACCESS_LOCAL_WRITE);
	if (!c.mr || ibv_query_port(c.ctx, 1, &pa))
		die("ibv_reg_mr", errno);
	c.lid = pa.lid;
	ch = ibv_create_comp_channel(c.ctx);
	cq_a = ibv_create_cq(c.ctx, 8, NULL, ch, 0);
	cq_b = ibv_create_cq(c.ctx, 8, NULL, ch, 0);
	idle_cq = ibv_create_cq(c.ctx, poll ? 2 * k + 8 : 8, NULL, NULL, 0);
	q = calloc((size_t)k + 1, sizeof(*q));
	if (!ch || !cq_a || !cq_b || !idle_cq || !q)
		die("ibv_create_cq", errno);
	/* the busy pair first: the first slots of the table are theirs */
	a = make_qp(&c, poll ? idle_cq : cq_a);
	b = make_qp(&c, poll ? idle_cq : cq_b);
	to_rts(&c, a, b->qp_num);
	to_rts(&c, b, a->qp_num);
	for (int i = 0; i < k; i++)
		q[i] = make_qp(&c, idle_cq);
	if (poll && (ibv_destroy_cq(cq_a) || ibv_destroy_cq(cq_b) ||
		     ibv_destroy_comp_channel(ch)))
		die("ibv_destroy_cq", EIO); /* unused: events only */
	for (int i = 0; i + 1 < k; i += 2) {
		to_rts(&c, q[i], q[i + 1]->qp_num);
		to_rts(&c, q[i + 1], q[i]->qp_num);
	}
	/* "poll": one message on each idle pair, so that its link is up
	 * (over TCP, calls through the doors, paced: seconds for hundreds
	 * of links on a loaded host, which a quiet refresh period below
	 * did not always outlast); then they are idle */
	if (poll)
		greet_pairs(&c, q, k, idle_cq);
	h = stat_map();
	/* the idle QPs' links settle (calls answered, hellos read): until
	 * a whole refresh period passes without a look at them */
	if (!idle_counts(h, ctr, nctr, a->qp_num, b->qp_num, before,
			 poll ? idle_cq : NULL))
		before[0] = UINT64_MAX;
	t0 = now_ns();
	for (; before[0] != UINT64_MAX;) {
		uint64_t v[4];

		/* polls run the QPs whose links are not up yet */
		for (int i = 0; poll && i < 100; i++)
			spin_cq(idle_cq, 0);
		idle_counts(h, ctr, nctr, a->qp_num, b->qp_num, v,
			    poll ? idle_cq : NULL);
		if (!memcmp(v, before, nctr * sizeof(v[0])))
			break;
		memcpy(before, v, sizeof(v));
		if (now_ns() - t0 > 10000000000ull)
			break; /* never still: the count below says so */
	}
	t0 = now_ns();
	for (int i = 0; i < n; i++) {
		post_recv(&c, b);
		post_recv(&c, a);
		post_send(&c, a);
		if (poll) {
			spin_cq(idle_cq, 2); /* a's send, b's receive */
			post_send(&c, b);
			spin_cq(idle_cq, 2); /* b's send, a's receive */
			continue;
		}
		wait_cq(ch, cq_b, 1); /* b's receive */
		post_send(&c, b);
		wait_cq(ch, cq_a, 2); /* a's send, and its receive */
		wait_cq(ch, cq_b, 1); /* b's send */
	}
	t1 = now_ns();
	free(q); /* the QPs stay: the process ends */
	if (before[0] == UINT64_MAX ||
	    !idle_counts(h, ctr, nctr, a->qp_num, b->qp_num, after,
			 poll ? idle_cq : NULL)) {
		printf("sv_idle: %d idle QPs, %d %s round trips: "
		       "%.1f us each (no %s counter)\n",
		       k, n, poll ? "polled" : "event-driven",
		       (double)(t1 - t0) / n / 1000.0, ctr[0]);
		return 77;
	}
	printf("sv_idle: %d idle QPs, %d %s round trips: %.1f us "
	       "each; %s of idle QPs %llu meanwhile (%.2f per round trip)",
	       k, n, poll ? "polled" : "event-driven",
	       (double)(t1 - t0) / n / 1000.0, ctr[0],
	       (unsigned long long)(after[0] - before[0]),
	       (double)(after[0] - before[0]) / n);
	if (poll)
		printf("; %s %llu; %s %llu (%s %llu)", ctr[1],
		       (unsigned long long)(after[1] - before[1]), ctr[2],
		       (unsigned long long)(after[2] - before[2]), ctr[3],
		       (unsigned long long)(after[3] - before[3]));
	printf("\n");
	/* a thread that walks every QP per wake-up, or a poll that runs
	 * every QP's engine: >= 2 x n x k */
	if (after[0] - before[0] > (uint64_t)k / 10 + 16) {
		fprintf(stderr,
			"sv_idle: FAIL: %s of idle QPs %llu in %d round "
			"trips (a %s costs the number of QPs)\n",
			ctr[0], (unsigned long long)(after[0] - before[0]), n,
			poll ? "poll" : "wake-up");
		return 1;
	}
	/* the idle QPs of a CQ the app keeps polling are left to its polls
	 * (drive.c park): a thread that looks at each once per check period
	 * to see that the app still drives it looked 7,701 times at 500
	 * idle TCP QPs in 2,000 round trips (0.5 s).  Allowed: the looks
	 * of a sweep (progress_swept), when this thread was off its CPU for
	 * a whole check period (a loaded host) and the progress thread took
	 * the QPs over, as it must, and a look at most at each one's peer
	 * for each (a QP taken over over TCP tells its peer, whose socket
	 * then has bytes: under a busy loop, 282 beside 281 swept); and up
	 * to one look per idle QP besides (a clean-clone CI run: 183 with
	 * none swept; idle, 148 in one run of three: QPs on their way to
	 * being parked when the polls paused).  Without parking it is a
	 * look per QP per check period: 8 or more each in 200 round trips */
	if (poll && (after[2] - before[2]) - (after[3] - before[3]) >
			    (uint64_t)k + 16 + 2 * (after[3] - before[3])) {
		fprintf(stderr,
			"sv_idle: FAIL: %s of idle QPs %llu (%llu swept) in "
			"%d polled round trips (the thread looks at each QP "
			"the app drives)\n",
			ctr[2], (unsigned long long)(after[2] - before[2]),
			(unsigned long long)(after[3] - before[3]), n);
		return 1;
	}
	/* over TCP, a poll that reads every link's socket: ~n x k
	 * recv(2)s.  A few remain, none of them a poll's (poll_runs 0):
	 * 0-330 in 200-2,000 round trips of 500 QPs at load 4-12, the
	 * progress thread's (it takes a QP the app has not driven for
	 * 5 ms, on a loaded host that preempts it, and runs it once) */
	if (poll && after[1] - before[1] > (uint64_t)n * k / 10 + 16) {
		fprintf(stderr,
			"sv_idle: FAIL: %s of idle QPs %llu in %d round "
			"trips (a poll reads every TCP link)\n",
			ctr[1], (unsigned long long)(after[1] - before[1]), n);
		return 1;
	}
	return 0;
}
