// SPDX-License-Identifier: MIT
/*
 * Issue 27 item 2: a QP the CM connects is the QP a program connects by
 * hand.  What the CM sets (rdma_init_qp_attr, the kernel CM's values) is
 * what perftest and ibv_rc_pingpong set for RC: the port's MTU, ACK
 * timeout 14, 7 retries, RNR timer 12, the read/atomic depths the two
 * sides asked for; the program's CQs, inline size and sq_sig_all stay
 * its own.  And while a connection lives, the CM's thread sleeps: no
 * timer of its own wakes it (it would steal the CPU a polling program
 * spins on).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "proc_thread.h"
#include "sv_test.h"

#define ATTR_EV_MS 10000

static struct rdma_cm_event *attr_ev(struct rdma_event_channel *ch,
				     enum rdma_cm_event_type want)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	if (poll(&p, 1, ATTR_EV_MS) != 1)
		sv_test_fail(__FILE__, __LINE__, "no event (wanted %s)",
			     rdma_event_str(want));
	ASSERT_OK(rdma_get_cm_event(ch, &ev));
	if (ev->event != want || ev->status)
		sv_test_fail(__FILE__, __LINE__, "got %s status %d, wanted %s",
			     rdma_event_str(ev->event), ev->status,
			     rdma_event_str(want));
	return ev;
}

struct attr_side {
	struct rdma_cm_id *id;
	struct ibv_cq *scq, *rcq;
};

/* The program's own CQs (no channel), 64 bytes inline, unsignaled. */
static void attr_qp(struct attr_side *s)
{
	struct ibv_qp_init_attr a = {
		.cap = {.max_send_wr = 4,
			.max_recv_wr = 16,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = 64},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};

	s->scq = ibv_create_cq(s->id->verbs, 4, NULL, NULL, 0);
	s->rcq = ibv_create_cq(s->id->verbs, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(s->scq);
	ASSERT_NOT_NULL(s->rcq);
	a.send_cq = s->scq;
	a.recv_cq = s->rcq;
	ASSERT_OK(rdma_create_qp(s->id, NULL, &a));
	ASSERT_TRUE(s->id->qp->send_cq == s->scq &&
		    s->id->qp->recv_cq == s->rcq);
}

/* s's QP against what a program connecting it by hand to peer would set. */
static void attr_check(struct attr_side *s, struct attr_side *peer)
{
	struct ibv_qp_attr q, pq;
	struct ibv_qp_init_attr i, pi;
	struct ibv_port_attr pa;

	ASSERT_OK(ibv_query_port(s->id->verbs, 1, &pa));
	ASSERT_OK(ibv_query_qp(s->id->qp, &q, 0x1fffff, &i));
	ASSERT_OK(ibv_query_qp(peer->id->qp, &pq, 0x1fffff, &pi));
	ASSERT_EQ(IBV_QPS_RTS, q.qp_state);
	ASSERT_EQ(pa.active_mtu, q.path_mtu);
	ASSERT_EQ(peer->id->qp->qp_num, q.dest_qp_num);
	ASSERT_EQ(pq.sq_psn, q.rq_psn);
	ASSERT_EQ(14, q.timeout);
	ASSERT_EQ(7, q.retry_cnt);
	ASSERT_EQ(7, q.rnr_retry);
	ASSERT_EQ(12, q.min_rnr_timer);
	ASSERT_EQ(1, q.max_rd_atomic);
	ASSERT_EQ(1, q.max_dest_rd_atomic);
	ASSERT_EQ(1, q.port_num);
	ASSERT_EQ(pa.lid, q.ah_attr.dlid);
	ASSERT_TRUE(q.qp_access_flags & IBV_ACCESS_REMOTE_WRITE);
	ASSERT_TRUE(i.cap.max_inline_data >= 64);
	ASSERT_EQ(0, i.sq_sig_all);
	ASSERT_TRUE(i.send_cq == s->scq && i.recv_cq == s->rcq);
	ASSERT_TRUE(i.srq == NULL);
}

/* An inline, unsignaled-but-one send from a to b arrives. */
static void attr_send(struct attr_side *a, struct attr_side *b)
{
	uint8_t out[8] = {1, 2, 3, 4, 5, 6, 7, 8}, in[8] = {0};
	struct ibv_mr *mi = rdma_reg_msgs(b->id, in, sizeof(in));
	struct ibv_sge sg = {(uintptr_t)out, sizeof(out), 0};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags =
					 IBV_SEND_INLINE | IBV_SEND_SIGNALED},
			   *bad;
	uint64_t end = sv_now_ms() + ATTR_EV_MS;
	unsigned int us = 10;
	struct ibv_wc wc;
	int n;

	ASSERT_NOT_NULL(mi);
	ASSERT_OK(rdma_post_recv(b->id, NULL, in, sizeof(in), mi));
	ASSERT_OK(ibv_post_send(a->id->qp, &wr, &bad));
	while ((n = ibv_poll_cq(b->rcq, 1, &wc)) == 0 && sv_now_ms() < end)
		sv_backoff(&us);
	ASSERT_EQ(1, n);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_OK(memcmp(in, out, sizeof(in)));
	while ((n = ibv_poll_cq(a->scq, 1, &wc)) == 0 && sv_now_ms() < end)
		sv_backoff(&us);
	ASSERT_EQ(1, n);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	rdma_dereg_mr(mi);
}

/* The voluntary context switches of this process's thread named name
 * ("softverbs-cm"), or -1 if there is none. */
static long thread_switches(const char *name)
{
	char v[32];

	if (sv_thread_status(name, "voluntary_ctxt_switches", v, sizeof(v)))
		return -1;
	return atol(v);
}

SV_TEST(cm_rc_qp_as_connected_by_hand)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = {.responder_resources = 1,
				     .initiator_depth = 1,
				     .retry_count = 7,
				     .rnr_retry_count = 7};
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct attr_side c = {0}, s = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l;
	struct timespec ts = {0, 300 * 1000000L};
	long before, after;

	ASSERT_NOT_NULL(ch);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_OK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(l, (struct sockaddr *)&a));
	ASSERT_OK(rdma_listen(l, 4));
	a.sin_port = rdma_get_src_port(l);
	ASSERT_OK(rdma_create_id(ch, &c.id, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(c.id, NULL, (struct sockaddr *)&a, 2000));
	ASSERT_OK(rdma_ack_cm_event(attr_ev(ch, RDMA_CM_EVENT_ADDR_RESOLVED)));
	ASSERT_OK(rdma_resolve_route(c.id, 2000));
	ASSERT_OK(rdma_ack_cm_event(attr_ev(ch, RDMA_CM_EVENT_ROUTE_RESOLVED)));
	attr_qp(&c);
	ASSERT_OK(rdma_connect(c.id, &cp));
	ev = attr_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s.id = ev->id;
	ASSERT_OK(rdma_ack_cm_event(ev));
	attr_qp(&s);
	ASSERT_OK(rdma_accept(s.id, &cp));
	ASSERT_OK(rdma_ack_cm_event(attr_ev(ch, RDMA_CM_EVENT_ESTABLISHED)));
	ASSERT_OK(rdma_ack_cm_event(attr_ev(ch, RDMA_CM_EVENT_ESTABLISHED)));
	attr_check(&c, &s);
	attr_check(&s, &c);
	attr_send(&c, &s);
	attr_send(&s, &c);
	/* connected and idle: the CM thread is asleep in epoll_wait (a
	 * 1 ms retry timer left running would wake it 300 times) */
	before = thread_switches("softverbs-cm");
	ASSERT_TRUE(before >= 0);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	after = thread_switches("softverbs-cm");
	if (after - before > 3)
		sv_test_fail(__FILE__, __LINE__,
			     "the CM thread woke %ld times in 300 ms of an "
			     "idle connection",
			     after - before);
	ASSERT_OK(rdma_disconnect(c.id));
	ASSERT_OK(rdma_ack_cm_event(attr_ev(ch, RDMA_CM_EVENT_DISCONNECTED)));
	ASSERT_OK(rdma_ack_cm_event(attr_ev(ch, RDMA_CM_EVENT_DISCONNECTED)));
	rdma_destroy_qp(s.id);
	rdma_destroy_qp(c.id);
	ASSERT_OK(ibv_destroy_cq(s.scq));
	ASSERT_OK(ibv_destroy_cq(s.rcq));
	ASSERT_OK(ibv_destroy_cq(c.scq));
	ASSERT_OK(ibv_destroy_cq(c.rcq));
	ASSERT_OK(rdma_destroy_id(s.id));
	ASSERT_OK(rdma_destroy_id(c.id));
	ASSERT_OK(rdma_destroy_id(l));
	rdma_destroy_event_channel(ch);
}
