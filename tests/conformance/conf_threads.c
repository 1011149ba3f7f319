// SPDX-License-Identifier: MIT
/*
 * Thread safety as libibverbs providers give it: in one context, three
 * threads each post sends on their own QP and poll their own send CQ,
 * while a fourth polls the receive CQ all the receiving QPs share.
 * Counts, order per QP and payloads are checked.  Runs under TSan too.
 */
#include <pthread.h>

#include "pair.h"

#define NTHREADS 3
#define NMSG	 400
#define WINDOW	 8
#define MSG	 64

struct conf_thr {
	struct sv_end *e;   /* shared context, PD, MR */
	struct ibv_qp *sqp; /* our sending QP */
	struct ibv_cq *scq; /* our send CQ */
	uint32_t id;
	uint8_t *buf; /* WINDOW slots of MSG bytes */
	const char *err;
};

static void *sender(void *arg)
{
	struct conf_thr *t = arg;
	uint32_t posted = 0, done = 0;
	uint64_t end = sv_now_ms() + 20000;

	while (done < NMSG && !t->err) {
		struct ibv_wc wc;
		int n;

		if (posted < NMSG && posted - done < WINDOW) {
			uint8_t *m = t->buf + (posted % WINDOW) * MSG;
			struct ibv_sge sg = {(uintptr_t)m, MSG, t->e->mr->lkey};
			struct ibv_send_wr wr = {.wr_id = posted,
						 .sg_list = &sg,
						 .num_sge = 1,
						 .opcode = IBV_WR_SEND},
					   *bad;

			sv_fill(m, MSG, t->id << 16 | posted);
			if (ibv_post_send(t->sqp, &wr, &bad))
				t->err = "post_send failed";
			posted++;
		}
		n = ibv_poll_cq(t->scq, 1, &wc);
		if (n < 0)
			t->err = "poll_cq failed";
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS)
				t->err = "send completed with an error";
			else if (wc.wr_id != done)
				t->err = "send completions out of order";
			done++;
		}
		if (sv_now_ms() > end)
			t->err = "sender deadline";
	}
	return NULL;
}

struct conf_rcv {
	struct ibv_cq *rcq;
	struct ibv_qp *rqp[NTHREADS];
	uint8_t *buf; /* per thread: NMSG slots of MSG bytes */
	uint32_t got[NTHREADS];
	const char *err;
};

static void *receiver(void *arg)
{
	struct conf_rcv *r = arg;
	uint32_t total = 0;
	uint64_t end = sv_now_ms() + 20000;

	while (total < NTHREADS * NMSG && !r->err) {
		struct ibv_wc wc[8];
		int n = ibv_poll_cq(r->rcq, 8, wc);

		if (n < 0)
			r->err = "poll_cq failed";
		for (int i = 0; i < n; i++) {
			uint32_t t = (uint32_t)(wc[i].wr_id / NMSG);
			uint32_t s = (uint32_t)(wc[i].wr_id % NMSG);

			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].byte_len != MSG)
				r->err = "bad receive completion";
			else if (t >= NTHREADS ||
				 wc[i].qp_num != r->rqp[t]->qp_num)
				r->err = "receive on the wrong QP";
			else if (s != r->got[t])
				r->err = "receives out of order";
			else if (sv_check(r->buf + wc[i].wr_id * MSG, MSG,
					  t << 16 | s) != -1)
				r->err = "payload corrupted";
			else
				r->got[t]++;
			total++;
		}
		if (sv_now_ms() > end)
			r->err = "receiver deadline";
	}
	return NULL;
}

SV_TEST(threads_post_and_poll)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct sv_end e; /* the context, PD, MR and shared receive CQ */
	struct conf_thr thr[NTHREADS];
	struct conf_rcv rcv;
	struct ibv_cq *scq[NTHREADS];
	pthread_t tid[NTHREADS + 1];

	o.buf_len = (size_t)NTHREADS * (NMSG + WINDOW) * MSG;
	o.cqe = NTHREADS * NMSG;
	o.max_recv_wr = NMSG;
	o.max_send_wr = WINDOW;
	o.shared_cq = true;
	sv_end_open(&e, &o); /* its QP receives nothing: unused */
	memset(&rcv, 0, sizeof(rcv));
	rcv.rcq = e.rcq;
	rcv.buf = e.buf;
	for (uint32_t t = 0; t < NTHREADS; t++) {
		struct ibv_qp_init_attr ia = {
			.recv_cq = e.rcq,
			.qp_type = IBV_QPT_RC,
			.sq_sig_all = 1,
			.cap = {.max_send_wr = WINDOW,
				.max_recv_wr = NMSG,
				.max_send_sge = 1,
				.max_recv_sge = 1},
		};
		struct sv_end s = e, r = e;

		scq[t] = ibv_create_cq(e.ctx, WINDOW * 2, NULL, NULL, 0);
		ASSERT_NOT_NULL(scq[t]);
		ia.send_cq = scq[t];
		s.qp = ibv_create_qp(e.pd, &ia);
		ASSERT_NOT_NULL(s.qp);
		ia.send_cq = e.rcq;
		r.qp = ibv_create_qp(e.pd, &ia);
		ASSERT_NOT_NULL(r.qp);
		sv_end_connect(&s, r.qp->qp_num, e.o.psn);
		sv_end_connect(&r, s.qp->qp_num, e.o.psn);
		for (uint32_t i = 0; i < NMSG; i++)
			ASSERT_OK(sv_end_recv(&r, t * NMSG + i,
					      (size_t)(t * NMSG + i) * MSG,
					      MSG));
		rcv.rqp[t] = r.qp;
		thr[t] = (struct conf_thr){
			.e = &e,
			.sqp = s.qp,
			.scq = scq[t],
			.id = t,
			.buf = e.buf + (size_t)NTHREADS * NMSG * MSG +
			       (size_t)t * WINDOW * MSG,
		};
	}
	ASSERT_OK(pthread_create(&tid[NTHREADS], NULL, receiver, &rcv));
	for (int t = 0; t < NTHREADS; t++)
		ASSERT_OK(pthread_create(&tid[t], NULL, sender, &thr[t]));
	for (int t = 0; t <= NTHREADS; t++)
		ASSERT_OK(pthread_join(tid[t], NULL));
	if (rcv.err) /* first: a receiver failure stalls the senders */
		sv_test_fail(__FILE__, __LINE__, "receiver: %s", rcv.err);
	for (int t = 0; t < NTHREADS; t++) {
		if (thr[t].err)
			sv_test_fail(__FILE__, __LINE__, "sender %d: %s", t,
				     thr[t].err);
	}
	for (int t = 0; t < NTHREADS; t++)
		ASSERT_EQ(NMSG, rcv.got[t]);
	for (int t = 0; t < NTHREADS; t++) {
		ASSERT_OK(ibv_destroy_qp(thr[t].sqp));
		ASSERT_OK(ibv_destroy_qp(rcv.rqp[t]));
		ASSERT_OK(ibv_destroy_cq(scq[t]));
	}
	sv_end_close(&e);
}
