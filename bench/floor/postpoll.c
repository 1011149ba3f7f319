// SPDX-License-Identifier: MIT
/*
 * postpoll: the verbs API's own floor for one small one-sided operation
 * (issue 27 item 5): one ibv_post_send of a signaled RDMA READ, RDMA
 * WRITE or FETCH_AND_ADD on an RC QP, then ibv_poll_cq until its
 * completion, repeated.  The target is a QP of a forked peer process
 * (as ib_read_lat's server), which only waits: on softverbs a one-sided
 * operation into memory the peer shares is done by the initiator
 * (req.c try_direct), so the figure is what a post and a poll cost, with
 * nothing of a benchmark's own (perftest's time stamps per iteration,
 * its result array).  Linked with softverbs' libibverbs (the build's
 * provider, not the system's): it measures softverbs.
 *
 *   postpoll_read | postpoll_write | postpoll_fadd  [floor options]
 *
 * The operation is the program's (one executable each, so bench/run runs
 * them as floor programs); -s sizes apply to read and write (a fetch-add
 * is 8 bytes).  Prints "size=N rtt_us=X best_us=B cpu_us=Y iters=N"
 * (rtt_us: one post and its completion, in µs of wall time, the mean;
 * best_us: the same in the fastest block of 1,024 cycles, and cpu_us:
 * of this thread's CPU time, which a loaded machine's preemptions do
 * not inflate).  A completion that is not IBV_WC_SUCCESS, or a
 * fetch-add whose old value is not the count so far, fails the run.
 */
#include "floor.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef POSTPOLL_OP
#define POSTPOLL_OP IBV_WR_RDMA_READ
#endif

/* What the two processes tell each other, in shared memory. */
struct ends {
	alignas(FLOOR_LINE) _Atomic uint32_t ready[2]; /* [i]: side i set */
	uint32_t qpn[2];
	uint16_t lid[2];
	uint32_t rkey;	   /* the peer's buffer */
	uint64_t addr;	   /* the peer's buffer */
	_Atomic int error; /* either side failed */
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

struct run {
	struct side s;
	struct ends *e;
	uint64_t added;	 /* fetch-adds so far: the next old value */
	uint64_t cpu_ns; /* this thread's CPU time in cycles() */
	uint64_t cpu_n;	 /* and the cycles it ran */
	double best;	 /* the fastest block of POSTPOLL_BLOCK, s a cycle */
};

/* Cycles timed together for best_us: a block a preemption missed. */
#define POSTPOLL_BLOCK 1024

static uint64_t cpu_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void fail(struct ends *e, const char *what)
{
	atomic_store(&e->error, 1);
	floor_die(what);
}

static void open_side(struct side *s, struct ends *e, size_t len)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = {.qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 16,
					      .max_recv_wr = 16,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};

	if (!list || !list[0])
		fail(e, "no verbs device (is this softverbs' libibverbs?)");
	s->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!s->ctx)
		fail(e, "ibv_open_device");
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = s->pd ? ibv_create_cq(s->ctx, 16, NULL, NULL, 0) : NULL;
	if (!s->cq)
		fail(e, "ibv_alloc_pd/ibv_create_cq");
	qa.send_cq = qa.recv_cq = s->cq;
	s->qp = ibv_create_qp(s->pd, &qa);
	s->buf = floor_alloc(len < 8 ? 8 : len);
	memset(s->buf, 0, len < 8 ? 8 : len);
	s->mr = s->qp ? ibv_reg_mr(s->pd, s->buf, len < 8 ? 8 : len,
				   IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ |
					   IBV_ACCESS_REMOTE_ATOMIC)
		      : NULL;
	if (!s->mr)
		fail(e, "ibv_create_qp/ibv_reg_mr");
}

/* INIT, RTR towards the other side's QP, RTS. */
static void connect_side(struct side *s, struct ends *e, int me)
{
	struct ibv_port_attr pa;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_ATOMIC};
	uint64_t t0 = floor_now_ns();

	if (ibv_query_port(s->ctx, 1, &pa))
		fail(e, "ibv_query_port");
	e->qpn[me] = s->qp->qp_num;
	e->lid[me] = pa.lid;
	if (me == 1) {
		e->rkey = s->mr->rkey;
		e->addr = (uintptr_t)s->buf;
	}
	atomic_store(&e->ready[me], 1);
	while (!atomic_load(&e->ready[!me])) {
		if (atomic_load(&e->error) ||
		    floor_now_ns() - t0 > 30000000000ull)
			fail(e, "the other side never came");
		floor_relax();
	}
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		fail(e, "modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = e->qpn[!me];
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = e->lid[!me];
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		fail(e, "modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		fail(e, "modify to RTS");
}

/* n blocks of POSTPOLL_BLOCK cycles of one post and its completion: a
 * batch is never shorter than a block, even when floor_measure sizes its
 * batches on a first run a preemption made long (it then stays at n = 1:
 * with a cycle a batch, the clocks read around each were the figure). */
static double cycles(void *arg, size_t size, uint64_t n)
{
	struct run *r = arg;
	struct ibv_sge sge = {.addr = (uintptr_t)r->s.buf,
			      .length = (uint32_t)size,
			      .lkey = r->s.mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = POSTPOLL_OP,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	uint64_t t0, c0, tb;

	if (POSTPOLL_OP == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		sge.length = 8;
		wr.wr.atomic.remote_addr = r->e->addr;
		wr.wr.atomic.rkey = r->e->rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = r->e->addr;
		wr.wr.rdma.rkey = r->e->rkey;
	}
	n *= POSTPOLL_BLOCK;
	c0 = cpu_now_ns();
	t0 = floor_now_ns();
	tb = t0;
	for (uint64_t i = 0; i < n; i++) {
		int got;

		wr.wr_id = i;
		if (ibv_post_send(r->s.qp, &wr, &bad))
			fail(r->e, "ibv_post_send");
		while ((got = ibv_poll_cq(r->s.cq, 1, &wc)) == 0)
			;
		if (got < 0 || wc.status != IBV_WC_SUCCESS || wc.wr_id != i) {
			fprintf(stderr, "postpoll: completion %d: %s\n", got,
				got < 0 ? "poll failed"
					: ibv_wc_status_str(wc.status));
			fail(r->e, "completion");
		}
		if ((i + 1) % POSTPOLL_BLOCK == 0) { /* a block done */
			uint64_t now = floor_now_ns();
			double per = (double)(now - tb) * 1e-9 / POSTPOLL_BLOCK;

			if (!r->best || per < r->best)
				r->best = per;
			tb = now;
		}
	}
	t0 = floor_now_ns() - t0;
	r->cpu_ns += cpu_now_ns() - c0;
	r->cpu_n += n;
	/* the fetch-adds happened, each once, in the peer's memory: our
	 * buffer holds the old value of the last one */
	if (POSTPOLL_OP == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		uint64_t old;

		memcpy(&old, r->s.buf, 8);
		if (n && old != r->added + n - 1) {
			fprintf(stderr,
				"postpoll: fetch-add gave %llu, "
				"expected %llu\n",
				(unsigned long long)old,
				(unsigned long long)(r->added + n - 1));
			fail(r->e, "fetch-add");
		}
		r->added += n;
	}
	return (double)t0 * 1e-9;
}

int main(int argc, char **argv)
{
	struct floor_opts o;
	struct run r = {0};
	int stop[2];
	pid_t pid;

	floor_parse(argc, argv, "8", &o);
	if (POSTPOLL_OP == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		o.nsizes = 1; /* a fetch-add is 8 bytes */
		o.sizes[0] = o.max_size = 8;
	}
	floor_banner(&o, "one ibv_post_send of a signaled one-sided "
			 "operation and ibv_poll_cq until its completion, "
			 "on an RC QP to a forked peer's QP");
	r.e = floor_shared(sizeof(*r.e));
	if (pipe(stop))
		floor_die("pipe");
	pid = floor_fork(&o);
	if (pid == 0) {
		struct side s;
		char c;

		close(stop[1]);
		open_side(&s, r.e, o.max_size);
		connect_side(&s, r.e, 1);
		/* the target takes no part: it sleeps until we are done */
		while (read(stop[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(stop[0]);
	open_side(&r.s, r.e, o.max_size);
	connect_side(&r.s, r.e, 0);
	for (int i = 0; i < o.nsizes; i++) {
		uint64_t iters;
		double t;

		r.cpu_ns = r.cpu_n = 0;
		r.best = 0;
		t = floor_measure(&o, cycles, &r, o.sizes[i], &iters);
		/* cpu_us: this thread's CPU time a cycle (warm-up included);
		 * best_us: the fastest block of POSTPOLL_BLOCK cycles: what a
		 * loaded machine's preemptions do not inflate */
		printf("size=%zu rtt_us=%.4f best_us=%.4f cpu_us=%.4f "
		       "iters=%llu\n",
		       o.sizes[i], t * 1e6 / POSTPOLL_BLOCK, r.best * 1e6,
		       (double)r.cpu_ns / (double)r.cpu_n * 1e-3,
		       (unsigned long long)iters * POSTPOLL_BLOCK);
		fflush(stdout);
	}
	close(stop[1]);
	return floor_reap(&o, pid);
}
