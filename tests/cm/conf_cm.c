// SPDX-License-Identifier: MIT
/*
 * softverbs' librdmacm (rdmacm/) through its public API, between ids of
 * one process and with helper processes: every event kind the man pages
 * describe with its status and private data (the IBA limits enforced
 * with EINVAL), reject with private data, nobody listening, an address
 * nobody has, a listener or a peer killed, the acknowledgement rule of
 * rdma_destroy_id, many ids on one channel, UD's SIDR, XRC (an XRC_SEND
 * id sending to the passive id's XRC SRQ), the channel fd's
 * readiness and O_NONBLOCK, a channel destroyed under a waiting
 * thread, and hostile bytes or another uid on the CM's own sockets
 * (errors, never a crash or a hang).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "sv_test.h"

#define EV_MS 10000 /* an event that must come: generous on a loaded box */

/* Waits (poll on the channel's fd, with a deadline) for the next event
 * and checks its kind. */
static struct rdma_cm_event *expect_ev(struct rdma_event_channel *ch,
				       enum rdma_cm_event_type want)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	if (poll(&p, 1, EV_MS) != 1)
		sv_test_fail(__FILE__, __LINE__,
			     "no event in %d ms (wanted %s)", EV_MS,
			     rdma_event_str(want));
	ASSERT_OK(rdma_get_cm_event(ch, &ev));
	if (ev->event != want)
		sv_test_fail(__FILE__, __LINE__, "got %s status %d, wanted %s",
			     rdma_event_str(ev->event), ev->status,
			     rdma_event_str(want));
	return ev;
}

/* The next event, whatever it is (within EV_MS). */
static struct rdma_cm_event *expect_any(struct rdma_event_channel *ch)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	if (poll(&p, 1, EV_MS) != 1)
		sv_test_fail(__FILE__, __LINE__, "no event in %d ms", EV_MS);
	ASSERT_OK(rdma_get_cm_event(ch, &ev));
	return ev;
}

static void expect_ack(struct rdma_event_channel *ch,
		       enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev = expect_ev(ch, want);

	ASSERT_EQ(0, ev->status);
	ASSERT_OK(rdma_ack_cm_event(ev));
}

static struct sockaddr_in lo(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* A listener on 127.0.0.1, port picked by rdma_bind_addr (port 0). */
static struct rdma_cm_id *listener(struct rdma_event_channel *ch,
				   enum rdma_port_space ps, uint16_t *port)
{
	struct sockaddr_in a = lo(0);
	struct rdma_cm_id *l;

	ASSERT_OK(rdma_create_id(ch, &l, NULL, ps));
	ASSERT_OK(rdma_bind_addr(l, (struct sockaddr *)&a));
	*port = ntohs(rdma_get_src_port(l));
	ASSERT_NE(0, *port);
	ASSERT_OK(rdma_listen(l, 64));
	return l;
}

/* An active id on ch resolved to 127.0.0.1:port (both events checked). */
static struct rdma_cm_id *resolved(struct rdma_event_channel *ch,
				   enum rdma_port_space ps, uint16_t port)
{
	struct sockaddr_in a = lo(port);
	struct rdma_cm_id *id;

	ASSERT_OK(rdma_create_id(ch, &id, NULL, ps));
	ASSERT_OK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_NOT_NULL(id->verbs);
	ASSERT_EQ(1, id->port_num);
	ASSERT_OK(rdma_resolve_route(id, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	return id;
}

static void make_qp(struct rdma_cm_id *id, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a = {
		.cap = {.max_send_wr = 8,
			.max_recv_wr = 8,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.qp_type = t,
		.sq_sig_all = 1,
	};

	ASSERT_OK(rdma_create_qp(id, NULL, &a));
	ASSERT_NOT_NULL(id->qp);
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static struct ibv_wc poll_one(struct ibv_cq *cq)
{
	uint64_t end = sv_now_ms() + EV_MS;
	unsigned int us = 10;
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && sv_now_ms() < end)
		sv_backoff(&us);
	ASSERT_EQ(1, n);
	return wc;
}

/* The QPs the CM moved to RTS carry a message both ways' worth. */
static void send_one(struct rdma_cm_id *from, struct rdma_cm_id *to)
{
	uint8_t out[64], in[64] = {0};
	struct ibv_mr *mo, *mi;
	struct ibv_wc wc;

	fill(out, sizeof(out), 3);
	mi = rdma_reg_msgs(to, in, sizeof(in));
	mo = rdma_reg_msgs(from, out, sizeof(out));
	ASSERT_NOT_NULL(mi);
	ASSERT_NOT_NULL(mo);
	ASSERT_OK(rdma_post_recv(to, NULL, in, sizeof(in), mi));
	ASSERT_OK(rdma_post_send(from, NULL, out, sizeof(out), mo, 0));
	wc = poll_one(from->send_cq);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	wc = poll_one(to->recv_cq);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(sizeof(in), wc.byte_len);
	ASSERT_OK(memcmp(in, out, sizeof(in)));
	rdma_dereg_mr(mo);
	rdma_dereg_mr(mi);
}

/* The whole life of a connection, every event checked with its data. */
SV_TEST(cm_connect_accept_data_disconnect)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct pollfd p;
	uint8_t req[56], rep[196];
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	uint16_t port;

	ASSERT_NOT_NULL(sch);
	ASSERT_NOT_NULL(cch);
	l = listener(sch, RDMA_PS_TCP, &port);
	c = resolved(cch, RDMA_PS_TCP, port);
	ASSERT_EQ(htons(port), rdma_get_dst_port(c));
	make_qp(c, IBV_QPT_RC);

	/* nothing pending: the fd is not readable */
	p = (struct pollfd){.fd = sch->fd, .events = POLLIN};
	ASSERT_EQ(0, poll(&p, 1, 0));

	fill(req, sizeof(req), 1);
	cp.private_data = req;
	cp.private_data_len = sizeof(req);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	ASSERT_OK(rdma_connect(c, &cp));

	ev = expect_ev(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	ASSERT_EQ(0, ev->status);
	ASSERT_TRUE(ev->listen_id == l);
	s = ev->id;
	ASSERT_TRUE(s != l);
	ASSERT_EQ(56, ev->param.conn.private_data_len);
	ASSERT_OK(memcmp(ev->param.conn.private_data, req, sizeof(req)));
	ASSERT_EQ(c->qp->qp_num, ev->param.conn.qp_num);
	ASSERT_EQ(1, ev->param.conn.responder_resources);
	ASSERT_EQ(1, ev->param.conn.initiator_depth);
	ASSERT_OK(rdma_ack_cm_event(ev));
	ASSERT_EQ(htons(port), rdma_get_src_port(s));
	ASSERT_EQ(rdma_get_src_port(c), rdma_get_dst_port(s));
	/* addresses read back: each side's is the other's peer address */
	{
		struct sockaddr_in *cs = (void *)rdma_get_local_addr(c);
		struct sockaddr_in *cd = (void *)rdma_get_peer_addr(c);
		struct sockaddr_in *ss = (void *)rdma_get_local_addr(s);
		struct sockaddr_in *sd = (void *)rdma_get_peer_addr(s);

		ASSERT_EQ(AF_INET, cs->sin_family);
		ASSERT_EQ(AF_INET, sd->sin_family);
		ASSERT_EQ(htonl(INADDR_LOOPBACK), cs->sin_addr.s_addr);
		ASSERT_EQ(htonl(INADDR_LOOPBACK), cd->sin_addr.s_addr);
		ASSERT_EQ(htonl(INADDR_LOOPBACK), ss->sin_addr.s_addr);
		ASSERT_EQ(htonl(INADDR_LOOPBACK), sd->sin_addr.s_addr);
	}

	make_qp(s, IBV_QPT_RC);
	fill(rep, sizeof(rep), 9);
	cp.private_data = rep;
	cp.private_data_len = sizeof(rep);
	ASSERT_OK(rdma_accept(s, &cp));

	ev = expect_ev(cch, RDMA_CM_EVENT_ESTABLISHED);
	ASSERT_EQ(0, ev->status);
	ASSERT_EQ(196, ev->param.conn.private_data_len);
	ASSERT_OK(memcmp(ev->param.conn.private_data, rep, sizeof(rep)));
	ASSERT_EQ(s->qp->qp_num, ev->param.conn.qp_num);
	ASSERT_OK(rdma_ack_cm_event(ev));
	expect_ack(sch, RDMA_CM_EVENT_ESTABLISHED);

	send_one(c, s);
	send_one(s, c);

	ASSERT_OK(rdma_disconnect(c));
	expect_ack(cch, RDMA_CM_EVENT_DISCONNECTED);
	expect_ack(sch, RDMA_CM_EVENT_DISCONNECTED);
	ASSERT_OK(rdma_disconnect(s)); /* after DISCONNECTED: still 0 */

	rdma_destroy_qp(s);
	rdma_destroy_qp(c);
	ASSERT_OK(rdma_destroy_id(s));
	ASSERT_OK(rdma_destroy_id(c));
	ASSERT_OK(rdma_destroy_id(l));
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/*
 * The program destroys its QP while the CM thread answers the peer's DREQ
 * (rsockets' rclose does, as the peer closes too): the DREP names the
 * QP (msg_init reads id->qp) under cm_core.lock, and rdma_destroy_qp
 * cleared id->qp without it, a race TSan reported in a whole-conformance
 * run (test_conf_rsocket.tcp.rs_stream_several_mib_both_ways).  Here the
 * answer is known sent (DISCONNECTED queued after it: the channel's fd is
 * readable, looked at with poll, which orders nothing) before the QP is
 * destroyed, so under TSan the race shows every run without the lock.
 */
SV_TEST(cm_qp_destroyed_while_the_peer_disconnects)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_conn_param cp = {.retry_count = 7, .rnr_retry_count = 7};
	struct pollfd p;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	uint64_t end;
	uint16_t port;

	ASSERT_NOT_NULL(sch);
	ASSERT_NOT_NULL(cch);
	l = listener(sch, RDMA_PS_TCP, &port);
	c = resolved(cch, RDMA_PS_TCP, port);
	make_qp(c, IBV_QPT_RC);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	ASSERT_OK(rdma_ack_cm_event(ev));
	make_qp(s, IBV_QPT_RC);
	ASSERT_OK(rdma_accept(s, &cp));
	expect_ack(cch, RDMA_CM_EVENT_ESTABLISHED);
	expect_ack(sch, RDMA_CM_EVENT_ESTABLISHED);

	ASSERT_OK(rdma_disconnect(c));
	p = (struct pollfd){.fd = sch->fd, .events = POLLIN};
	end = sv_now_ms() + EV_MS;
	while (poll(&p, 1, 10) != 1)
		ASSERT_TRUE(sv_now_ms() < end);
	/* the DREP was made: its read of s->qp came first */
	rdma_destroy_qp(s);
	ASSERT_TRUE(s->qp == NULL);
	expect_ack(sch, RDMA_CM_EVENT_DISCONNECTED);
	expect_ack(cch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(c);
	ASSERT_OK(rdma_destroy_id(s));
	ASSERT_OK(rdma_destroy_id(c));
	ASSERT_OK(rdma_destroy_id(l));
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/*
 * The peer takes our message, sends its own and disconnects at once.  A
 * program that reads its non-blocking channel between CQ polls (libfabric's
 * ofi_rxm) must have polled both completions — our send the peer ACKed,
 * the peer's message — before it reads DISCONNECTED, as on an HCA, where
 * they are made when the ACK and the message arrive: at DISCONNECTED it
 * destroys the QP, and ibv_destroy_qp removes the completions not yet
 * polled.  Here the program reads the channel first, as ofi_rxm does when
 * it was preempted between an empty poll and its read.
 */
SV_TEST(cm_disconnected_after_the_peers_completions)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	uint8_t s_out[64], s_in[64] = {0}, c_out[64], c_in[64] = {0};
	struct ibv_mr *s_mo, *s_mi, *c_mo, *c_mi;
	bool sent = false, got = false, disconnected = false;
	struct pollfd p = {.events = POLLIN};
	struct rdma_conn_param cp = {.retry_count = 7, .rnr_retry_count = 7};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	struct epoll_event pe = {.events = EPOLLIN | EPOLLET};
	unsigned int eagain = 0;
	struct ibv_wc wc;
	uint64_t end;
	uint16_t port;
	int ep;

	ASSERT_NOT_NULL(sch);
	ASSERT_NOT_NULL(cch);
	l = listener(sch, RDMA_PS_TCP, &port);
	c = resolved(cch, RDMA_PS_TCP, port);
	make_qp(c, IBV_QPT_RC);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	ASSERT_OK(rdma_ack_cm_event(ev));
	make_qp(s, IBV_QPT_RC);
	ASSERT_OK(rdma_accept(s, &cp));
	expect_ack(cch, RDMA_CM_EVENT_ESTABLISHED);
	expect_ack(sch, RDMA_CM_EVENT_ESTABLISHED);

	fill(s_out, sizeof(s_out), 5);
	fill(c_out, sizeof(c_out), 11);
	s_mo = rdma_reg_msgs(s, s_out, sizeof(s_out));
	s_mi = rdma_reg_msgs(s, s_in, sizeof(s_in));
	c_mo = rdma_reg_msgs(c, c_out, sizeof(c_out));
	c_mi = rdma_reg_msgs(c, c_in, sizeof(c_in));
	ASSERT_NOT_NULL(s_mo);
	ASSERT_NOT_NULL(s_mi);
	ASSERT_NOT_NULL(c_mo);
	ASSERT_NOT_NULL(c_mi);
	ASSERT_OK(rdma_post_recv(s, NULL, s_in, sizeof(s_in), s_mi));
	ASSERT_OK(rdma_post_recv(c, NULL, c_in, sizeof(c_in), c_mi));

	/* our send; the peer takes it (its responder ACKs), answers and
	 * disconnects */
	ASSERT_OK(rdma_post_send(s, NULL, s_out, sizeof(s_out), s_mo, 0));
	wc = poll_one(c->recv_cq);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_OK(rdma_post_send(c, NULL, c_out, sizeof(c_out), c_mo, 0));
	wc = poll_one(c->send_cq);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_OK(rdma_disconnect(c));

	/* the DISCONNECTED is queued: then the program's loop, reading
	 * the channel first */
	p.fd = sch->fd;
	ASSERT_EQ(1, poll(&p, 1, EV_MS));
	/* a waiter edge-triggered (UCX's async thread) is woken again */
	ep = epoll_create1(EPOLL_CLOEXEC);
	ASSERT_GE(ep, 0);
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, sch->fd, &pe));
	ASSERT_EQ(1, epoll_wait(ep, &pe, 1, EV_MS));
	ASSERT_OK(
		fcntl(sch->fd, F_SETFL, fcntl(sch->fd, F_GETFL) | O_NONBLOCK));
	end = sv_now_ms() + EV_MS;
	while (!disconnected && sv_now_ms() < end) {
		if (rdma_get_cm_event(sch, &ev) == 0) {
			ASSERT_EQ(RDMA_CM_EVENT_DISCONNECTED, ev->event);
			ASSERT_OK(rdma_ack_cm_event(ev));
			disconnected = true;
			break;
		}
		ASSERT_EQ(EAGAIN, errno);
		eagain++;
		ASSERT_EQ(1, epoll_wait(ep, &pe, 1, EV_MS));
		while (ibv_poll_cq(s->send_cq, 1, &wc) == 1) {
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
			sent = true;
		}
		while (ibv_poll_cq(s->recv_cq, 1, &wc) == 1) {
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
			ASSERT_EQ(sizeof(c_out), wc.byte_len);
			got = true;
		}
	}
	ASSERT_TRUE(disconnected);
	close(ep);
	/* ofi_rxm's FI_SHUTDOWN: the QP goes, unpolled completions with it */
	rdma_destroy_qp(s);
	if (!sent || !got)
		sv_test_fail(__FILE__, __LINE__,
			     "DISCONNECTED read before %s%s%s (%u EAGAIN)",
			     sent ? "" : "our ACKed send's completion",
			     !sent && !got ? " and " : "",
			     got ? "" : "the peer's message", eagain);
	ASSERT_OK(memcmp(s_in, c_out, sizeof(c_out)));
	ASSERT_OK(memcmp(c_in, s_out, sizeof(s_out)));

	expect_ack(cch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(c);
	rdma_dereg_mr(s_mo);
	rdma_dereg_mr(s_mi);
	rdma_dereg_mr(c_mo);
	rdma_dereg_mr(c_mi);
	ASSERT_OK(rdma_destroy_id(s));
	ASSERT_OK(rdma_destroy_id(c));
	ASSERT_OK(rdma_destroy_id(l));
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/* IBA private data limits as rdma_cm gives them for IP: 56 / 196 / 148,
 * one byte more is EINVAL and nothing is sent. */
SV_TEST(cm_private_data_limits_einval)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint8_t big[255] = {0};
	struct rdma_conn_param cp = {.private_data = big,
				     .responder_resources = 1,
				     .initiator_depth = 1};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	uint16_t port;

	l = listener(ch, RDMA_PS_TCP, &port);
	c = resolved(ch, RDMA_PS_TCP, port);
	make_qp(c, IBV_QPT_RC);
	cp.private_data_len = 57;
	errno = 0;
	ASSERT_EQ(-1, rdma_connect(c, &cp));
	ASSERT_EQ(EINVAL, errno);
	cp.private_data_len = 56;
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	ASSERT_OK(rdma_ack_cm_event(ev));
	make_qp(s, IBV_QPT_RC);
	cp.private_data_len = 197;
	errno = 0;
	ASSERT_EQ(-1, rdma_accept(s, &cp));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_EQ(-1, rdma_reject(s, big, 149));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(rdma_reject(s, big, 148));
	ev = expect_ev(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(28, ev->status); /* IB_CM_REJ_CONSUMER_DEFINED */
	ASSERT_OK(rdma_ack_cm_event(ev));
	rdma_destroy_qp(s);
	rdma_destroy_qp(c);
	rdma_destroy_id(s);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

SV_TEST(cm_reject_carries_private_data)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint8_t req[20], rej[148];
	struct rdma_conn_param cp = {.private_data = req,
				     .private_data_len = sizeof(req)};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	uint16_t port;

	l = listener(ch, RDMA_PS_TCP, &port);
	c = resolved(ch, RDMA_PS_TCP, port);
	make_qp(c, IBV_QPT_RC);
	fill(req, sizeof(req), 5);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	ASSERT_OK(memcmp(ev->param.conn.private_data, req, sizeof(req)));
	/* the rest of IB's 56 bytes is zero */
	ASSERT_EQ(0, ((const uint8_t *)ev->param.conn.private_data)[55]);
	ASSERT_OK(rdma_ack_cm_event(ev));
	fill(rej, sizeof(rej), 77);
	ASSERT_OK(rdma_reject(s, rej, sizeof(rej)));
	errno = 0;
	ASSERT_EQ(-1, rdma_accept(s, NULL)); /* answered already */
	ev = expect_ev(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(28, ev->status);
	ASSERT_EQ(148, ev->param.conn.private_data_len);
	ASSERT_OK(memcmp(ev->param.conn.private_data, rej, sizeof(rej)));
	ASSERT_OK(rdma_ack_cm_event(ev));
	rdma_destroy_qp(c);
	rdma_destroy_id(s);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* A port with no listener: REJECTED, status 8 (IB's invalid service ID,
 * what rdma-core reports), at once, never a hang. */
SV_TEST(cm_connect_nobody_listens_rejected)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c;
	uint16_t port;

	l = listener(ch, RDMA_PS_TCP, &port);
	ASSERT_OK(rdma_destroy_id(l)); /* the port is free again */
	c = resolved(ch, RDMA_PS_TCP, port);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(8, ev->status);
	ASSERT_OK(rdma_ack_cm_event(ev));
	rdma_destroy_id(c);
	rdma_destroy_event_channel(ch);
}

/* A REQ of another QP type than the listener's (a UC id to an RC
 * listener) is REJECTED (28, consumer defined) as the kernel's cma
 * rejects it, without a CONNECT_REQUEST to the listener; an RC id
 * connecting afterwards gets through. */
SV_TEST(cm_connect_other_qp_type_rejected)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP,
				      .ai_qp_type = IBV_QPT_UC},
			     *res;
	struct rdma_conn_param cp = {.qp_num = 1};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	char service[8];
	uint16_t port;

	ASSERT_NOT_NULL(ch);
	l = listener(ch, RDMA_PS_TCP, &port);
	ASSERT_EQ(IBV_QPT_RC, l->qp_type);
	snprintf(service, sizeof(service), "%u", port);
	ASSERT_OK(rdma_getaddrinfo("127.0.0.1", service, &hints, &res));
	ASSERT_OK(rdma_create_ep(&c, res, NULL, NULL));
	rdma_freeaddrinfo(res);
	ASSERT_EQ(IBV_QPT_UC, c->qp_type);
	ASSERT_OK(rdma_migrate_id(c, ch));
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_TRUE(ev->id == c);
	ASSERT_EQ(28, ev->status);
	ASSERT_OK(rdma_ack_cm_event(ev));
	ASSERT_OK(rdma_destroy_id(c));

	c = resolved(ch, RDMA_PS_TCP, port);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	ASSERT_TRUE(ev->listen_id == l);
	s = ev->id;
	ASSERT_OK(rdma_ack_cm_event(ev));
	ASSERT_OK(rdma_reject(s, NULL, 0));
	ev = expect_ev(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_TRUE(ev->id == c);
	ASSERT_OK(rdma_ack_cm_event(ev));
	rdma_destroy_id(s);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* A port bound but not listening yet (a program that sends its port to
 * the peer before rdma_listen, as qperf does): the connect waits for the
 * listen instead of failing at once. */
SV_TEST(cm_connect_waits_for_bound_port_to_listen)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in a = lo(0);
	struct rdma_conn_param cp = {.qp_num = 1};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c;
	struct pollfd p;
	uint16_t port;

	ASSERT_OK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(l, (struct sockaddr *)&a));
	port = ntohs(rdma_get_src_port(l));
	c = resolved(ch, RDMA_PS_TCP, port);
	ASSERT_OK(rdma_connect(c, &cp));
	p = (struct pollfd){.fd = ch->fd, .events = POLLIN};
	ASSERT_EQ(0, poll(&p, 1, 0)); /* not rejected */
	ASSERT_OK(rdma_listen(l, 1));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	ASSERT_OK(rdma_reject(ev->id, NULL, 0));
	ASSERT_TRUE(ev->listen_id == l);
	{
		struct rdma_cm_id *s = ev->id;

		ASSERT_OK(rdma_ack_cm_event(ev));
		rdma_destroy_id(s);
	}
	ev = expect_ev(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(28, ev->status);
	ASSERT_OK(rdma_ack_cm_event(ev));
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* ... but a bound port that never listens is REJECTED (8) in the end. */
SV_TEST(cm_bound_port_never_listening_rejected)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in a = lo(0);
	struct rdma_conn_param cp = {.qp_num = 1};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c;

	ASSERT_OK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(l, (struct sockaddr *)&a));
	c = resolved(ch, RDMA_PS_TCP, ntohs(rdma_get_src_port(l)));
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(8, ev->status);
	ASSERT_OK(rdma_ack_cm_event(ev));
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/*
 * A loopback address names no device (the kernel's rdma_bind_addr finds
 * none): bound there, an id has no verbs until rdma_resolve_addr gives it
 * softverbs0; a wildcard or an interface address binds the device.
 * libfabric's verbs provider asks exactly this of "localhost" to learn
 * whether the device owns the address; a yes made it tell peers on other
 * hosts 127.0.0.1 (tests/netns/netns_mpi.sh).  A listener on 127.0.0.1
 * still takes connections (cm_connect_accept_data_disconnect).
 */
SV_TEST(cm_bind_loopback_names_no_device)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in a = lo(0), any = lo(0), dst;
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
	struct rdma_cm_id *l, *l6, *w, *c;
	uint16_t port;

	ASSERT_OK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(l, (struct sockaddr *)&a));
	ASSERT_TRUE(l->verbs == NULL);
	ASSERT_OK(rdma_listen(l, 4));
	port = ntohs(rdma_get_src_port(l));
	ASSERT_NE(0, port);

	a6.sin6_addr = in6addr_loopback;
	ASSERT_OK(rdma_create_id(ch, &l6, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(l6, (struct sockaddr *)&a6));
	ASSERT_TRUE(l6->verbs == NULL);

	any.sin_addr.s_addr = htonl(INADDR_ANY);
	ASSERT_OK(rdma_create_id(ch, &w, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(w, (struct sockaddr *)&any));
	ASSERT_NOT_NULL(w->verbs);

	/* a loopback source: the device comes with the resolution */
	a = lo(0);
	dst = lo(port);
	ASSERT_OK(rdma_create_id(ch, &c, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(c, (struct sockaddr *)&a,
				    (struct sockaddr *)&dst, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_NOT_NULL(c->verbs);
	ASSERT_EQ(1, c->port_num);
	rdma_destroy_id(c);
	rdma_destroy_id(w);
	rdma_destroy_id(l6);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* 192.0.2.1 (TEST-NET-1) is nobody's here: ADDR_ERROR, not a hang. */
SV_TEST(cm_address_nobody_has_addr_error)
{
	struct rdma_event_channel *ch;
	struct rdma_conn_param cp = {0};
	struct sockaddr_in a = lo(7);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;
	uint64_t t0 = sv_now_ms();

	/* TEST-NET-1: another host's address.  With no route to it,
	 * ADDR_ERROR at once; with one (a default route), the TCP
	 * rendezvous's connect ends in UNREACHABLE or REJECTED within its
	 * deadline (2 s here), as RoCE's CM retries end (within the REQ's
	 * response time, SOFTVERBS_CM_TIMEOUT_MS: 2 s here too).  Never a
	 * hang. */
	if (sv_test_roce())
		ASSERT_OK(setenv("SOFTVERBS_CM_TIMEOUT_MS", "2000", 1));
	ch = rdma_create_event_channel();
	inet_pton(AF_INET, "192.0.2.1", &a.sin_addr);
	ASSERT_OK(rdma_create_id(ch, &c, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(c, NULL, (struct sockaddr *)&a, 500));
	ev = expect_any(ch);
	if (ev->event == RDMA_CM_EVENT_ADDR_ERROR) {
		ASSERT_TRUE(ev->status < 0);
		ASSERT_OK(rdma_ack_cm_event(ev));
		errno = 0;
		ASSERT_EQ(-1, rdma_resolve_route(c, 500)); /* no address */
		ASSERT_EQ(EINVAL, errno);
	} else {
		ASSERT_EQ(RDMA_CM_EVENT_ADDR_RESOLVED, ev->event);
		ASSERT_OK(rdma_ack_cm_event(ev));
		ASSERT_OK(rdma_resolve_route(c, 500));
		expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
		ASSERT_OK(rdma_connect(c, &cp));
		ev = expect_any(ch);
		if (ev->event != RDMA_CM_EVENT_UNREACHABLE &&
		    ev->event != RDMA_CM_EVENT_REJECTED)
			sv_test_fail(__FILE__, __LINE__, "got %s",
				     rdma_event_str(ev->event));
		ASSERT_TRUE(ev->status != 0);
		ASSERT_OK(rdma_ack_cm_event(ev));
	}
	ASSERT_TRUE(sv_now_ms() - t0 < 5000);
	rdma_destroy_id(c);
	rdma_destroy_event_channel(ch);
}

/* A UD id toward another host's address (TEST-NET-3) resolves as an RC
 * id does (SIDR goes over the TCP rendezvous): both ADDR_RESOLVED from
 * the same source address where the host has a route, both ADDR_ERROR
 * where it has none; nothing is sent. */
SV_TEST(cm_ud_other_host_resolves_as_rc)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in a = lo(7174), src[2];
	enum rdma_cm_event_type got[2];
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;
	uint64_t t0 = sv_now_ms();

	inet_pton(AF_INET, "203.0.113.1", &a.sin_addr);
	for (int i = 0; i < 2; i++) {
		ASSERT_OK(rdma_create_id(ch, &c, NULL,
					 i ? RDMA_PS_UDP : RDMA_PS_TCP));
		ASSERT_OK(rdma_resolve_addr(c, NULL, (struct sockaddr *)&a,
					    2000));
		ASSERT_OK(rdma_get_cm_event(ch, &ev));
		got[i] = ev->event;
		ASSERT_TRUE(got[i] == RDMA_CM_EVENT_ADDR_RESOLVED ||
			    got[i] == RDMA_CM_EVENT_ADDR_ERROR);
		memcpy(&src[i], rdma_get_local_addr(c), sizeof(src[i]));
		src[i].sin_port = 0;
		ASSERT_OK(rdma_ack_cm_event(ev));
		rdma_destroy_id(c);
	}
	ASSERT_EQ(got[0], got[1]);
	if (got[0] == RDMA_CM_EVENT_ADDR_RESOLVED)
		ASSERT_OK(memcmp(&src[0].sin_addr, &src[1].sin_addr, 4));
	else
		printf("no route to 203.0.113.1: both ADDR_ERROR\n");
	ASSERT_TRUE(sv_now_ms() - t0 < 1000);
	rdma_destroy_event_channel(ch);
}

/* IPv6 loopback works as 127.0.0.1 does (the GID of ::1). */
SV_TEST(cm_ipv6_loopback_connects)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in6 a = {.sin6_family = AF_INET6,
				 .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	struct rdma_conn_param cp = {.responder_resources = 1,
				     .initiator_depth = 1};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;

	ASSERT_OK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(l, (struct sockaddr *)&a));
	ASSERT_OK(rdma_listen(l, 4));
	a.sin6_port = rdma_get_src_port(l);
	ASSERT_OK(rdma_create_id(ch, &c, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(c, NULL, (struct sockaddr *)&a, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_OK(rdma_resolve_route(c, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	make_qp(c, IBV_QPT_RC);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	ASSERT_EQ(AF_INET6, rdma_get_peer_addr(s)->sa_family);
	ASSERT_OK(rdma_ack_cm_event(ev));
	make_qp(s, IBV_QPT_RC);
	ASSERT_OK(rdma_accept(s, &cp));
	/* the two establish in either order on one channel */
	expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	send_one(c, s);
	rdma_destroy_qp(s);
	rdma_destroy_qp(c);
	rdma_destroy_id(s); /* the peer sees its end */
	expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* The index of raw in port 1's GID table, or -1. */
static int gid_index(struct ibv_context *ctx, const void *raw)
{
	struct ibv_port_attr pa;
	union ibv_gid g;

	ASSERT_OK(ibv_query_port(ctx, 1, &pa));
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		ASSERT_OK(ibv_query_gid(ctx, 1, i, &g));
		if (!memcmp(g.raw, raw, 16))
			return i;
	}
	return -1;
}

/* sa is AF_INET6 with address a (and port, unless 0). */
static void expect_in6(const struct sockaddr *sa, const struct in6_addr *a,
		       uint16_t port)
{
	const struct sockaddr_in6 *s6 = (const void *)sa;

	ASSERT_EQ(AF_INET6, sa->sa_family);
	ASSERT_OK(memcmp(&s6->sin6_addr, a, 16));
	if (port)
		ASSERT_EQ(port, s6->sin6_port);
}

/* One IPv6 address of this host: resolve_addr/route give softverbs0
 * port 1 and the address's own GID (its index in the table is the QP's
 * sgid_index); a connection's local and peer addresses read back as it,
 * AF_INET6, on both sides; data flows. */
static void ipv6_address_connects(const struct in6_addr *addr)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = *addr};
	struct rdma_conn_param cp = {.responder_resources = 1,
				     .initiator_depth = 1};
	char host[INET6_ADDRSTRLEN];
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	int gi;

	inet_ntop(AF_INET6, addr, host, sizeof(host));
	printf("IPv6 address %s\n", host);
	ASSERT_OK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(l, (struct sockaddr *)&a));
	ASSERT_OK(rdma_listen(l, 4));
	a.sin6_port = rdma_get_src_port(l);
	expect_in6(rdma_get_local_addr(l), addr, a.sin6_port);
	ASSERT_OK(rdma_create_id(ch, &c, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(c, NULL, (struct sockaddr *)&a, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_NOT_NULL(c->verbs);
	ASSERT_EQ(0,
		  strcmp("softverbs0", ibv_get_device_name(c->verbs->device)));
	ASSERT_EQ(1, c->port_num);
	expect_in6(rdma_get_local_addr(c), addr, 0);
	expect_in6(rdma_get_peer_addr(c), addr, a.sin6_port);
	gi = gid_index(c->verbs, addr);
	if (gi < 0)
		sv_test_fail(__FILE__, __LINE__, "%s not in the GID table",
			     host);
	ASSERT_OK(rdma_resolve_route(c, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	ASSERT_EQ(1, c->route.num_paths);
	ASSERT_OK(memcmp(c->route.path_rec->sgid.raw, addr, 16));
	ASSERT_OK(memcmp(c->route.path_rec->dgid.raw, addr, 16));
	make_qp(c, IBV_QPT_RC);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	expect_in6(rdma_get_local_addr(s), addr, a.sin6_port);
	expect_in6(rdma_get_peer_addr(s), addr, rdma_get_src_port(c));
	ASSERT_OK(rdma_ack_cm_event(ev));
	make_qp(s, IBV_QPT_RC);
	ASSERT_OK(rdma_accept(s, &cp));
	expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	/* both QPs address each other by the address's GID */
	ASSERT_OK(ibv_query_qp(c->qp, &qa, IBV_QP_AV, &ia));
	ASSERT_EQ(gi, qa.ah_attr.grh.sgid_index);
	ASSERT_OK(memcmp(qa.ah_attr.grh.dgid.raw, addr, 16));
	ASSERT_OK(ibv_query_qp(s->qp, &qa, IBV_QP_AV, &ia));
	ASSERT_EQ(gi, qa.ah_attr.grh.sgid_index);
	ASSERT_OK(memcmp(qa.ah_attr.grh.dgid.raw, addr, 16));
	send_one(c, s);
	send_one(s, c);
	rdma_destroy_qp(s);
	rdma_destroy_qp(c);
	rdma_destroy_id(s);
	expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* ::1, and every global (or ULA) IPv6 address this host has. */
SV_TEST(cm_ipv6_addresses_resolve_to_their_gid)
{
	struct ifaddrs *ifa;
	int n = 0;

	ASSERT_OK(getifaddrs(&ifa));
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		const struct in6_addr *a;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6)
			continue;
		a = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
		if (IN6_IS_ADDR_LINKLOCAL(a))
			continue;
		ipv6_address_connects(a);
		n++;
	}
	freeifaddrs(ifa);
	if (!n) {
		printf("SKIP: no IPv6 address on this host\n");
		exit(77);
	}
}

/* An IPv6 address nobody has (2001:db8::1, the documentation prefix):
 * ADDR_ERROR where there is no route, else UNREACHABLE or REJECTED by
 * the CM's connect deadline; and another host's link-local address
 * (a GID cannot name its scope): ADDR_ERROR at once.  Never a hang. */
SV_TEST(cm_ipv6_address_nobody_has_fails_in_time)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in6 a = {.sin6_family = AF_INET6,
				 .sin6_port = htons(7)};
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;
	uint64_t t0 = sv_now_ms();

	inet_pton(AF_INET6, "2001:db8::1", &a.sin6_addr);
	ASSERT_OK(rdma_create_id(ch, &c, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(c, NULL, (struct sockaddr *)&a, 500));
	ev = expect_any(ch);
	if (ev->event == RDMA_CM_EVENT_ADDR_ERROR) {
		ASSERT_TRUE(ev->status < 0);
		ASSERT_OK(rdma_ack_cm_event(ev));
		printf("no route to 2001:db8::1: ADDR_ERROR\n");
	} else {
		ASSERT_EQ(RDMA_CM_EVENT_ADDR_RESOLVED, ev->event);
		ASSERT_OK(rdma_ack_cm_event(ev));
		ASSERT_EQ(AF_INET6, rdma_get_local_addr(c)->sa_family);
		ASSERT_OK(rdma_resolve_route(c, 500));
		expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
		ASSERT_OK(rdma_connect(c, &cp));
		ev = expect_any(ch);
		if (ev->event != RDMA_CM_EVENT_UNREACHABLE &&
		    ev->event != RDMA_CM_EVENT_REJECTED)
			sv_test_fail(__FILE__, __LINE__, "got %s",
				     rdma_event_str(ev->event));
		ASSERT_TRUE(ev->status != 0);
		ASSERT_OK(rdma_ack_cm_event(ev));
	}
	ASSERT_TRUE(sv_now_ms() - t0 < 5000);
	rdma_destroy_id(c);

	t0 = sv_now_ms();
	inet_pton(AF_INET6, "fe80::5e:1", &a.sin6_addr);
	a.sin6_scope_id = 1; /* lo: any interface, the scope is refused */
	ASSERT_OK(rdma_create_id(ch, &c, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(c, NULL, (struct sockaddr *)&a, 500));
	ev = expect_ev(ch, RDMA_CM_EVENT_ADDR_ERROR);
	ASSERT_TRUE(ev->status < 0);
	ASSERT_OK(rdma_ack_cm_event(ev));
	ASSERT_TRUE(sv_now_ms() - t0 < 1000);
	rdma_destroy_id(c);
	rdma_destroy_event_channel(ch);
}

/* A listener on the IPv4 wildcard, not AFONLY (rdma_cm's default), takes
 * an IPv6 request too, as the kernel's rdma_cm does; its own address
 * reads back as the IPv4 wildcard it asked for. */
SV_TEST(cm_ipv4_wildcard_listener_takes_ipv6)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in any = {.sin_family = AF_INET};
	struct sockaddr_in6 a = {.sin6_family = AF_INET6,
				 .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	struct rdma_conn_param cp = {.responder_resources = 1,
				     .initiator_depth = 1};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;

	ASSERT_OK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(l, (struct sockaddr *)&any));
	ASSERT_OK(rdma_listen(l, 4));
	ASSERT_EQ(AF_INET, rdma_get_local_addr(l)->sa_family);
	ASSERT_EQ(htonl(INADDR_ANY),
		  ((struct sockaddr_in *)rdma_get_local_addr(l))
			  ->sin_addr.s_addr);
	a.sin6_port = rdma_get_src_port(l);
	ASSERT_NE(0, a.sin6_port);
	ASSERT_OK(rdma_create_id(ch, &c, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(c, NULL, (struct sockaddr *)&a, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_OK(rdma_resolve_route(c, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	make_qp(c, IBV_QPT_RC);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	expect_in6(rdma_get_peer_addr(s), &in6addr_loopback, 0);
	ASSERT_OK(rdma_ack_cm_event(ev));
	make_qp(s, IBV_QPT_RC);
	ASSERT_OK(rdma_accept(s, &cp));
	expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	send_one(c, s);
	rdma_destroy_qp(s);
	rdma_destroy_qp(c);
	rdma_destroy_id(s);
	expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* An empty channel whose fd the program made non-blocking: EAGAIN. */
SV_TEST(cm_channel_nonblocking_eagain)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;

	ASSERT_OK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK));
	errno = 0;
	ASSERT_EQ(-1, rdma_get_cm_event(ch, &ev));
	ASSERT_EQ(EAGAIN, errno);
	rdma_destroy_event_channel(ch);
}

struct cm_waiter {
	struct rdma_event_channel *ch;
	pid_t tid;
	int returned;
};

static void *cm_waiter_run(void *arg)
{
	struct cm_waiter *w = arg;
	struct rdma_cm_event *ev;

	__atomic_store_n(&w->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	rdma_get_cm_event(w->ch, &ev);
	__atomic_store_n(&w->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The system call thread `tid` of this process sleeps in, or -1 while it
 * runs (/proc/self/task/TID/syscall says "running"). */
static long task_syscall(pid_t tid)
{
	char path[64];
	long nr = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "r");
	ASSERT_TRUE(f != NULL);
	if (fscanf(f, "%ld", &nr) != 1)
		nr = -1;
	fclose(f);
	return nr;
}

static bool nr_is_poll(long nr)
{
#ifdef SYS_poll
	if (nr == SYS_poll)
		return true;
#endif
	return nr == SYS_ppoll;
}

static bool nr_is_pause(long nr)
{
#ifdef SYS_pause
	if (nr == SYS_pause)
		return true;
#endif
	return nr == SYS_rt_sigsuspend;
}

/* Waits (deadline EV_MS) until the waiter sleeps in a call `is` names;
 * fails at once if rdma_get_cm_event returned. */
static void wait_waiter_in(struct cm_waiter *w, bool (*is)(long),
			   const char *what)
{
	uint64_t end = sv_now_ms() + EV_MS;
	unsigned int us = 100;
	pid_t tid;

	while (!(tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE)))
		sv_backoff(&us);
	while (!is(task_syscall(tid))) {
		if (__atomic_load_n(&w->returned, __ATOMIC_ACQUIRE))
			sv_test_fail(__FILE__, __LINE__,
				     "rdma_get_cm_event returned (errno %d)",
				     errno);
		if (sv_now_ms() > end)
			sv_test_fail(__FILE__, __LINE__,
				     "waiter not in %s in %d ms (syscall %ld)",
				     what, EV_MS, task_syscall(tid));
		sv_backoff(&us);
	}
}

/*
 * rping destroys its event channel while its CM thread sits in
 * rdma_get_cm_event.  The kernel's waiter (a read of the rdma_ucm fd)
 * holds the file: it neither returns nor touches freed memory, and
 * exit() ends it.  Ours must do the same, whatever wakes it after the
 * destroy (an event queued just before it, a reused fd number): here a
 * write to a copy of the channel's fd wakes it.  Under ASan the old
 * channel.c read the freed channel (heap-use-after-free); returning an
 * error instead makes rping exit 255.
 */
SV_TEST(cm_channel_destroyed_under_waiter)
{
	struct cm_waiter w = {.ch = rdma_create_event_channel()};
	uint64_t one = 1;
	pthread_t t;
	int fd;

	ASSERT_TRUE(w.ch != NULL);
	ASSERT_OK(pthread_create(&t, NULL, cm_waiter_run, &w));
	ASSERT_OK(pthread_detach(t));
	wait_waiter_in(&w, nr_is_poll, "poll");
	fd = dup(w.ch->fd);
	ASSERT_TRUE(fd >= 0);
	rdma_destroy_event_channel(w.ch);
	ASSERT_EQ((ssize_t)sizeof(one), write(fd, &one, sizeof(one)));
	/* woken, it sleeps again for ever, holding nothing */
	wait_waiter_in(&w, nr_is_pause, "pause");
	ASSERT_EQ(0, __atomic_load_n(&w.returned, __ATOMIC_ACQUIRE));
	close(fd);
}

struct destroyer {
	struct rdma_cm_id *id;
	volatile int done;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;

	rdma_destroy_id(d->id);
	__atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* rdma_destroy_id(3): "blocks until related events have been
 * acknowledged". */
SV_TEST(cm_destroy_waits_for_ack)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in a = lo(9);
	struct destroyer d = {0};
	struct rdma_cm_event *ev;
	unsigned int us = 100;
	uint64_t end;
	pthread_t t;

	ASSERT_OK(rdma_create_id(ch, &d.id, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(d.id, NULL, (struct sockaddr *)&a, 500));
	ev = expect_ev(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_OK(pthread_create(&t, NULL, destroy_thread, &d));
	/* still blocked 300 ms later (a deadline on a condition) */
	end = sv_now_ms() + 300;
	while (sv_now_ms() < end && !__atomic_load_n(&d.done, __ATOMIC_ACQUIRE))
		sv_backoff(&us);
	ASSERT_EQ(0, __atomic_load_n(&d.done, __ATOMIC_ACQUIRE));
	ASSERT_OK(rdma_ack_cm_event(ev));
	ASSERT_OK(pthread_join(t, NULL));
	ASSERT_EQ(1, d.done);
	rdma_destroy_event_channel(ch);
}

/* 24 connections on one channel (no QPs: rdma_establish's path). */
SV_TEST(cm_many_ids_one_channel)
{
	enum { N = 24 };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = {.qp_num = 0x123, .private_data_len = 0};
	struct rdma_cm_id *l, *c[N], *s[N];
	struct rdma_cm_event *ev;
	int reqs = 0, resps = 0, est = 0, i;

	uint16_t port;

	l = listener(ch, RDMA_PS_TCP, &port);
	for (i = 0; i < N; i++)
		c[i] = resolved(ch, RDMA_PS_TCP, port);
	for (i = 0; i < N; i++) {
		cp.qp_num = 0x100 + i;
		ASSERT_OK(rdma_connect(c[i], &cp));
	}
	for (int seen = 0; seen < 3 * N;) {
		struct pollfd p = {.fd = ch->fd, .events = POLLIN};

		if (reqs + resps + est == 3 * N)
			break;
		ASSERT_EQ(1, poll(&p, 1, EV_MS));
		ASSERT_OK(rdma_get_cm_event(ch, &ev));
		ASSERT_EQ(0, ev->status);
		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			s[reqs++] = ev->id;
			ASSERT_OK(rdma_accept(ev->id, &cp));
			break;
		case RDMA_CM_EVENT_CONNECT_RESPONSE:
			ASSERT_OK(rdma_establish(ev->id));
			resps++;
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			est++;
			break;
		default:
			sv_test_fail(__FILE__, __LINE__, "unexpected %s",
				     rdma_event_str(ev->event));
		}
		ASSERT_OK(rdma_ack_cm_event(ev));
		seen++;
	}
	ASSERT_EQ(N, reqs);
	ASSERT_EQ(N, resps);
	ASSERT_EQ(N, est);
	for (i = 0; i < N; i++)
		ASSERT_OK(rdma_disconnect(c[i]));
	for (i = 0; i < 2 * N; i++)
		expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	for (i = 0; i < N; i++) {
		rdma_destroy_id(c[i]);
		rdma_destroy_id(s[i]);
	}
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* UD: SIDR gives the active side the passive QP's number and qkey. */
SV_TEST(cm_ud_sidr_qpn_and_qkey)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint8_t req[180];
	struct rdma_conn_param cp = {.private_data = req,
				     .private_data_len = sizeof(req)};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	uint16_t port;

	l = listener(ch, RDMA_PS_UDP, &port);
	c = resolved(ch, RDMA_PS_UDP, port);
	make_qp(c, IBV_QPT_UD);
	fill(req, sizeof(req), 4);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	ASSERT_EQ(180, ev->param.ud.private_data_len);
	ASSERT_OK(memcmp(ev->param.ud.private_data, req, sizeof(req)));
	ASSERT_OK(rdma_ack_cm_event(ev));
	make_qp(s, IBV_QPT_UD);
	ASSERT_OK(rdma_accept(s, NULL));
	ev = expect_ev(ch, RDMA_CM_EVENT_ESTABLISHED);
	ASSERT_EQ(s->qp->qp_num, ev->param.ud.qp_num);
	ASSERT_EQ(RDMA_UDP_QKEY, ev->param.ud.qkey);
	ASSERT_EQ(1, ev->param.ud.ah_attr.port_num);
	ASSERT_OK(rdma_ack_cm_event(ev));
	rdma_destroy_qp(s);
	rdma_destroy_qp(c);
	rdma_destroy_id(s);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/*
 * A REQ (RC) or SIDR REQ (UD) that reaches a listener whose program never
 * answers: the active side gets UNREACHABLE with -ETIMEDOUT once the CM's
 * response time (SOFTVERBS_CM_TIMEOUT_MS, here 300 ms) is spent, as the
 * kernel's IB CM does when its REQ retries run out, and not a moment
 * before; it used to wait for ever.  A late answer then finds the active
 * side gone and fails, and nothing hangs.
 */
static void req_unanswered(enum rdma_port_space ps, enum ibv_qp_type qpt)
{
	struct rdma_event_channel *lch, *ch;
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	uint64_t t0, dt;
	uint16_t port;

	ASSERT_OK(setenv("SOFTVERBS_CM_TIMEOUT_MS", "300", 1));
	lch = rdma_create_event_channel();
	ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(lch);
	ASSERT_NOT_NULL(ch);
	l = listener(lch, ps, &port);
	c = resolved(ch, ps, port);
	make_qp(c, qpt);
	t0 = sv_now_ms();
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(lch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	ASSERT_OK(rdma_ack_cm_event(ev)); /* and never answered in time */
	ev = expect_ev(ch, RDMA_CM_EVENT_UNREACHABLE);
	dt = sv_now_ms() - t0;
	ASSERT_EQ(-ETIMEDOUT, ev->status);
	ASSERT_OK(rdma_ack_cm_event(ev));
	if (dt < 300)
		sv_test_fail(__FILE__, __LINE__, "UNREACHABLE after %llu ms",
			     (unsigned long long)dt);
	/* the late answer: the active side is gone */
	make_qp(s, qpt);
	if (rdma_accept(s, NULL) == 0 && qpt != IBV_QPT_UD) {
		ev = expect_any(lch);
		ASSERT_NE(RDMA_CM_EVENT_ESTABLISHED, ev->event);
		ASSERT_OK(rdma_ack_cm_event(ev));
	}
	rdma_destroy_qp(s);
	rdma_destroy_id(s);
	rdma_destroy_qp(c);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(lch);
}

SV_TEST(cm_req_unanswered_unreachable)
{
	req_unanswered(RDMA_PS_TCP, IBV_QPT_RC);
}

SV_TEST(cm_sidr_req_unanswered_unreachable)
{
	req_unanswered(RDMA_PS_UDP, IBV_QPT_UD);
}

/* A UC QP on an rdma_cm id: the CM moves it with UC's attributes (the
 * kernel CM's: no RC-only ones, which the verbs refuse for UC), and a
 * send arrives. */
SV_TEST(cm_uc_connect_send)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	struct ibv_qp_attr qa;
	int mask;
	uint16_t port;

	l = listener(ch, RDMA_PS_TCP, &port);
	c = resolved(ch, RDMA_PS_TCP, port);
	make_qp(c, IBV_QPT_UC);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	ASSERT_OK(rdma_ack_cm_event(ev));
	make_qp(s, IBV_QPT_UC);
	qa.qp_state = IBV_QPS_RTR;
	ASSERT_OK(rdma_init_qp_attr(s, &qa, &mask));
	ASSERT_EQ(0, mask & (IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
	ASSERT_OK(rdma_accept(s, &cp));
	expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	qa.qp_state = IBV_QPS_RTS;
	ASSERT_OK(rdma_init_qp_attr(c, &qa, &mask));
	ASSERT_EQ(0, mask & (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC));
	send_one(c, s);
	send_one(s, c);
	ASSERT_OK(rdma_disconnect(c));
	expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(s);
	rdma_destroy_qp(c);
	ASSERT_OK(rdma_destroy_id(s));
	ASSERT_OK(rdma_destroy_id(c));
	ASSERT_OK(rdma_destroy_id(l));
	rdma_destroy_event_channel(ch);
}

/* An XRC send from c's XRC_SEND QP to SRQ number srqn; its completion. */
static struct ibv_wc xrc_send(struct rdma_cm_id *c, const uint8_t *out,
			      uint32_t len, struct ibv_mr *mr, uint32_t srqn)
{
	struct ibv_sge sg = {(uintptr_t)out, len, mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 5,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND},
			   *bad;

	wr.qp_type.xrc.remote_srqn = srqn;
	ASSERT_OK(ibv_post_send(c->qp, &wr, &bad));
	return poll_one(c->send_cq);
}

/*
 * XRC through rdma_cm (rdma_xserver/rdma_xclient -c x with event
 * channels): an XRC_SEND id connects to an RDMA_PS_IB listener; the
 * passive id makes an XRC SRQ (rdma_create_srq_ex: rdma_cm's domain and
 * a CQ for the id) and an XRC_RECV QP (rdma_create_qp: the same domain),
 * accepts with the SRQ's number as private data; the send naming it
 * completes on the SRQ's CQ with qp_num the XRC_RECV QP.  A number
 * nobody has is a remote invalid request.
 */
SV_TEST(cm_xrc_send_to_remote_srq)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct ibv_qp_init_attr ca = {
		.cap = {.max_send_wr = 4, .max_send_sge = 1},
		.qp_type = IBV_QPT_XRC_SEND,
		.sq_sig_all = 1};
	struct ibv_qp_init_attr ra = {.qp_type = IBV_QPT_XRC_RECV};
	struct ibv_srq_init_attr_ex sa = {.attr = {.max_wr = 4, .max_sge = 1},
					  .comp_mask = IBV_SRQ_INIT_ATTR_TYPE,
					  .srq_type = IBV_SRQT_XRC};
	struct rdma_conn_param cp = {0};
	uint8_t out[64], in[64] = {0};
	struct ibv_mr *mo, *mi;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	uint32_t srqn, be;
	struct ibv_wc wc;
	uint16_t port;

	ASSERT_NOT_NULL(sch);
	ASSERT_NOT_NULL(cch);
	l = listener(sch, RDMA_PS_IB, &port);
	c = resolved(cch, RDMA_PS_IB, port);
	ASSERT_OK(rdma_create_qp(c, NULL, &ca));
	ASSERT_EQ(IBV_QPT_XRC_SEND, c->qp->qp_type);
	ASSERT_NOT_NULL(c->send_cq);
	ASSERT_NULL(c->recv_cq); /* no receive side */
	ASSERT_OK(rdma_connect(c, &cp));

	ev = expect_ev(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	ASSERT_EQ(c->qp->qp_num, ev->param.conn.qp_num);
	ASSERT_OK(rdma_ack_cm_event(ev));
	ASSERT_OK(rdma_create_srq_ex(s, &sa));
	ASSERT_NOT_NULL(s->srq);
	ASSERT_NOT_NULL(s->recv_cq);
	ASSERT_TRUE(sa.cq == s->recv_cq);
	ASSERT_OK(ibv_get_srq_num(s->srq, &srqn));
	ASSERT_OK(rdma_create_qp(s, NULL, &ra));
	ASSERT_EQ(IBV_QPT_XRC_RECV, s->qp->qp_type);
	mi = rdma_reg_msgs(s, in, sizeof(in));
	ASSERT_NOT_NULL(mi);
	ASSERT_OK(rdma_post_recv(s, NULL, in, sizeof(in), mi)); /* the SRQ */
	be = htonl(srqn);
	cp.private_data = &be;
	cp.private_data_len = sizeof(be);
	ASSERT_OK(rdma_accept(s, &cp));

	ev = expect_ev(cch, RDMA_CM_EVENT_ESTABLISHED);
	ASSERT_EQ(0, ev->status);
	ASSERT_EQ(s->qp->qp_num, ev->param.conn.qp_num);
	ASSERT_OK(memcmp(ev->param.conn.private_data, &be, sizeof(be)));
	ASSERT_OK(rdma_ack_cm_event(ev));
	expect_ack(sch, RDMA_CM_EVENT_ESTABLISHED);

	fill(out, sizeof(out), 21);
	mo = rdma_reg_msgs(c, out, sizeof(out));
	ASSERT_NOT_NULL(mo);
	wc = xrc_send(c, out, sizeof(out), mo, srqn);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	wc = poll_one(s->recv_cq);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(IBV_WC_RECV, wc.opcode);
	ASSERT_EQ(sizeof(in), wc.byte_len);
	ASSERT_EQ(s->qp->qp_num, wc.qp_num);
	ASSERT_OK(memcmp(in, out, sizeof(in)));
	/* the number is what routes it: another one is nobody's */
	wc = xrc_send(c, out, sizeof(out), mo, srqn ^ 0x800000);
	ASSERT_EQ(IBV_WC_REM_INV_REQ_ERR, wc.status);

	ASSERT_OK(rdma_disconnect(c));
	expect_ack(cch, RDMA_CM_EVENT_DISCONNECTED);
	expect_ack(sch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_dereg_mr(mo);
	rdma_dereg_mr(mi);
	rdma_destroy_qp(s);
	ASSERT_NOT_NULL(s->recv_cq); /* the SRQ's: it goes with the SRQ */
	rdma_destroy_srq(s);
	ASSERT_NULL(s->recv_cq);
	rdma_destroy_qp(c);
	ASSERT_OK(rdma_destroy_id(s));
	ASSERT_OK(rdma_destroy_id(c));
	ASSERT_OK(rdma_destroy_id(l));
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/* rdma_xserver -c x's side with synchronous ids: rdma_create_ep (XRC_RECV,
 * RAI_PASSIVE), rdma_get_request making the XRC_RECV QP, rdma_create_srq
 * (an XRC SRQ: the id's type), the SRQ's number in rdma_accept's private
 * data, rdma_get_recv_comp. */
struct xrc_ep_server {
	int port_fd; /* pipe: the listener's port */
	int status;  /* the receive's, or -1 */
	uint32_t byte_len;
	uint8_t in[16];
};

static void *xrc_ep_server_thread(void *arg)
{
	struct xrc_ep_server *x = arg;
	struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE,
				      .ai_port_space = RDMA_PS_IB,
				      .ai_qp_type = IBV_QPT_XRC_RECV},
			     *res;
	struct ibv_qp_init_attr qa = {
		.cap = {.max_recv_wr = 1, .max_recv_sge = 1}};
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 1, .max_sge = 1}};
	struct rdma_conn_param cp = {0};
	struct rdma_cm_id *l, *id;
	uint32_t srqn, be;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint16_t port;

	x->status = -1;
	ASSERT_OK(rdma_getaddrinfo("127.0.0.1", "0", &hints, &res));
	ASSERT_OK(rdma_create_ep(&l, res, NULL, &qa));
	rdma_freeaddrinfo(res);
	ASSERT_OK(rdma_listen(l, 1));
	port = ntohs(rdma_get_src_port(l));
	ASSERT_EQ((ssize_t)sizeof(port),
		  write(x->port_fd, &port, sizeof(port)));
	ASSERT_OK(rdma_get_request(l, &id));
	ASSERT_NOT_NULL(id->qp);
	ASSERT_EQ(IBV_QPT_XRC_RECV, id->qp->qp_type);
	ASSERT_OK(rdma_create_srq(id, NULL, &sa));
	ASSERT_OK(ibv_get_srq_num(id->srq, &srqn));
	mr = rdma_reg_msgs(id, x->in, sizeof(x->in));
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(rdma_post_recv(id, NULL, x->in, sizeof(x->in), mr));
	be = htonl(srqn);
	cp.private_data = &be;
	cp.private_data_len = sizeof(be);
	ASSERT_OK(rdma_accept(id, &cp));
	ASSERT_EQ(1, rdma_get_recv_comp(id, &wc));
	x->status = wc.status;
	x->byte_len = wc.byte_len;
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(l);
	return NULL;
}

SV_TEST(cm_xrc_ep_sync_ids)
{
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_IB,
				      .ai_qp_type = IBV_QPT_XRC_SEND},
			     *res;
	struct ibv_qp_init_attr qa = {
		.cap = {.max_send_wr = 1, .max_send_sge = 1}, .sq_sig_all = 1};
	struct xrc_ep_server x = {0};
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint8_t out[16];
	char service[8];
	uint16_t port;
	pthread_t t;
	int fds[2];
	uint32_t srqn;

	ASSERT_OK(pipe(fds));
	x.port_fd = fds[1];
	ASSERT_OK(pthread_create(&t, NULL, xrc_ep_server_thread, &x));
	{
		struct pollfd p = {.fd = fds[0], .events = POLLIN};

		ASSERT_EQ(1, poll(&p, 1, EV_MS));
		ASSERT_EQ((ssize_t)sizeof(port),
			  read(fds[0], &port, sizeof(port)));
	}
	snprintf(service, sizeof(service), "%u", port);
	ASSERT_OK(rdma_getaddrinfo("127.0.0.1", service, &hints, &res));
	ASSERT_OK(rdma_create_ep(&id, res, NULL, &qa));
	rdma_freeaddrinfo(res);
	ASSERT_EQ(IBV_QPT_XRC_SEND, id->qp->qp_type);
	fill(out, sizeof(out), 60);
	mr = rdma_reg_msgs(id, out, sizeof(out));
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(rdma_connect(id, NULL));
	ASSERT_NOT_NULL(id->event);
	memcpy(&srqn, id->event->param.conn.private_data, sizeof(srqn));
	wc = xrc_send(id, out, sizeof(out), mr, ntohl(srqn));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_OK(pthread_join(t, NULL));
	ASSERT_EQ(IBV_WC_SUCCESS, x.status);
	ASSERT_EQ(sizeof(out), x.byte_len);
	ASSERT_OK(memcmp(x.in, out, sizeof(out)));
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	close(fds[0]);
	close(fds[1]);
}

/* rdma_server/rdma_client's calls over IPv6 (::1), synchronous ids:
 * rdma_getaddrinfo gives AF_INET6 addresses, rdma_create_ep binds and
 * resolves them, and both ids read their addresses back as ::1. */
struct ep6_server {
	int port_fd; /* pipe: the listener's port */
	int status;  /* the receive's, or -1 */
	int peer_family, local_family;
	uint8_t in[16];
};

static void *ep6_server_thread(void *arg)
{
	struct ep6_server *x = arg;
	struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE,
				      .ai_port_space = RDMA_PS_TCP},
			     *res;
	struct ibv_qp_init_attr qa = {.cap = {.max_send_wr = 1,
					      .max_recv_wr = 1,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};
	struct rdma_cm_id *l, *id;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint16_t port;

	x->status = -1;
	ASSERT_OK(rdma_getaddrinfo("::1", "0", &hints, &res));
	ASSERT_EQ(AF_INET6, res->ai_family);
	ASSERT_EQ(AF_INET6, res->ai_src_addr->sa_family);
	ASSERT_OK(rdma_create_ep(&l, res, NULL, &qa));
	rdma_freeaddrinfo(res);
	ASSERT_OK(rdma_listen(l, 1));
	port = ntohs(rdma_get_src_port(l));
	ASSERT_EQ((ssize_t)sizeof(port),
		  write(x->port_fd, &port, sizeof(port)));
	ASSERT_OK(rdma_get_request(l, &id));
	ASSERT_NOT_NULL(id->qp);
	x->peer_family = rdma_get_peer_addr(id)->sa_family;
	x->local_family = rdma_get_local_addr(id)->sa_family;
	mr = rdma_reg_msgs(id, x->in, sizeof(x->in));
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(rdma_post_recv(id, NULL, x->in, sizeof(x->in), mr));
	ASSERT_OK(rdma_accept(id, NULL));
	ASSERT_EQ(1, rdma_get_recv_comp(id, &wc));
	x->status = wc.status;
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(l);
	return NULL;
}

SV_TEST(cm_getaddrinfo_ep_ipv6)
{
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res;
	struct ibv_qp_init_attr qa = {.cap = {.max_send_wr = 1,
					      .max_recv_wr = 1,
					      .max_send_sge = 1,
					      .max_recv_sge = 1},
				      .sq_sig_all = 1};
	struct ep6_server x = {0};
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint8_t out[16];
	char service[8];
	uint16_t port;
	pthread_t t;
	int fds[2];

	ASSERT_OK(pipe(fds));
	x.port_fd = fds[1];
	ASSERT_OK(pthread_create(&t, NULL, ep6_server_thread, &x));
	{
		struct pollfd p = {.fd = fds[0], .events = POLLIN};

		ASSERT_EQ(1, poll(&p, 1, EV_MS));
		ASSERT_EQ((ssize_t)sizeof(port),
			  read(fds[0], &port, sizeof(port)));
	}
	snprintf(service, sizeof(service), "%u", port);
	ASSERT_OK(rdma_getaddrinfo("::1", service, &hints, &res));
	ASSERT_EQ(AF_INET6, res->ai_family);
	expect_in6(res->ai_dst_addr, &in6addr_loopback, htons(port));
	ASSERT_OK(rdma_create_ep(&id, res, NULL, &qa));
	rdma_freeaddrinfo(res);
	expect_in6(rdma_get_peer_addr(id), &in6addr_loopback, htons(port));
	expect_in6(rdma_get_local_addr(id), &in6addr_loopback, 0);
	fill(out, sizeof(out), 61);
	mr = rdma_reg_msgs(id, out, sizeof(out));
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(rdma_connect(id, NULL));
	ASSERT_OK(rdma_post_send(id, NULL, out, sizeof(out), mr, 0));
	ASSERT_EQ(1, rdma_get_send_comp(id, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_OK(pthread_join(t, NULL));
	ASSERT_EQ(IBV_WC_SUCCESS, x.status);
	ASSERT_EQ(AF_INET6, x.peer_family);
	ASSERT_EQ(AF_INET6, x.local_family);
	ASSERT_OK(memcmp(x.in, out, sizeof(out)));
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	close(fds[0]);
	close(fds[1]);
}

/* ---- helper processes ---- */

static void write_line(int fd, unsigned int v)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%u\n", v);

	if (write(fd, buf, (size_t)n) != n)
		_exit(90);
}

static unsigned int read_uint(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[32] = {0};

	ASSERT_EQ(1, poll(&p, 1, EV_MS));
	ASSERT_TRUE(read(fd, buf, sizeof(buf) - 1) > 0);
	return (unsigned int)strtoul(buf, NULL, 10);
}

/* Listens, writes its port to fd argv[0]; with argv[1] "accept" accepts
 * one connection and writes "1" once ESTABLISHED; then waits for ever
 * (the test kills it). */
SV_HELPER(cm_server)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	int fd = atoi(argv[0]);
	struct rdma_conn_param cp = {.responder_resources = 1,
				     .initiator_depth = 1};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l;
	uint16_t port;

	l = listener(ch, RDMA_PS_TCP, &port);
	write_line(fd, port);
	if (argc > 1 && !strcmp(argv[1], "accept")) {
		ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
		make_qp(ev->id, IBV_QPT_RC);
		ASSERT_OK(rdma_accept(ev->id, &cp));
		rdma_ack_cm_event(ev);
		expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
		write_line(fd, 1);
	}
	for (;;)
		pause();
	rdma_destroy_id(l); /* never reached: the test kills us */
	return 0;
}

static void start_server(struct sv_proc *p, int fds[2], const char *mode)
{
	char fdarg[16];
	char *args[] = {fdarg, (char *)mode, NULL};

	ASSERT_OK(pipe(fds));
	snprintf(fdarg, sizeof(fdarg), "%d", fds[1]);
	sv_proc_start_helper(p, "cm_server", args, NULL);
	close(fds[1]);
}

/* A listener that died: the next connect is REJECTED (nobody there). */
SV_TEST(cm_listener_killed_rejected)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;
	struct sv_proc p;
	int fds[2];
	uint16_t port;

	start_server(&p, fds, "listen");
	port = (uint16_t)read_uint(fds[0]);
	sv_proc_kill(&p);
	c = resolved(ch, RDMA_PS_TCP, port);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(8, ev->status);
	ASSERT_OK(rdma_ack_cm_event(ev));
	rdma_destroy_id(c);
	rdma_destroy_event_channel(ch);
	close(fds[0]);
	sv_proc_free(&p);
}

/* An RC connection to an "accept" server process, ESTABLISHED on both
 * sides (the server said so on fds[0]); the active id. */
static struct rdma_cm_id *established_with_server(struct rdma_event_channel *ch,
						  struct sv_proc *p, int fds[2])
{
	struct rdma_conn_param cp = {.responder_resources = 1,
				     .initiator_depth = 1};
	struct rdma_cm_id *c;

	start_server(p, fds, "accept");
	c = resolved(ch, RDMA_PS_TCP, (uint16_t)read_uint(fds[0]));
	make_qp(c, IBV_QPT_RC);
	ASSERT_OK(rdma_connect(c, &cp));
	expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	ASSERT_EQ(1, read_uint(fds[0]));
	return c;
}

/* A peer killed after ESTABLISHED: DISCONNECTED here, soon. */
SV_TEST(cm_peer_killed_after_established_disconnected)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *c;
	struct sv_proc p;
	int fds[2];

	c = established_with_server(ch, &p, fds);
	sv_proc_kill(&p);
	expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(c);
	rdma_destroy_id(c);
	rdma_destroy_event_channel(ch);
	close(fds[0]);
	sv_proc_free(&p);
}

/* rdma_disconnect toward a peer that never answers (stopped): its DREQ
 * waits CM_DREP_WAIT_MS (2 s) for a DREP, then the id is DISCONNECTED
 * anyway, as the IB CM's DREQ ends in timewait.  Before, the id waited in
 * DREQ_SENT for ever (ib_send_bw -R hung at its end over RoCE when the
 * server had gone first). */
SV_TEST(cm_disconnect_unanswered_still_disconnects)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *c;
	struct sv_proc p;
	uint64_t t0;
	int fds[2], st;

	c = established_with_server(ch, &p, fds);
	ASSERT_OK(kill(p.pid, SIGSTOP));
	/* stopped before our DREQ leaves, not as it arrives */
	ASSERT_EQ(p.pid, waitpid(p.pid, &st, WUNTRACED));
	ASSERT_TRUE(WIFSTOPPED(st));
	t0 = sv_now_ms();
	ASSERT_OK(rdma_disconnect(c));
	expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	ASSERT_TRUE(sv_now_ms() - t0 >= 1500); /* it did wait for a DREP */
	sv_proc_kill(&p);
	rdma_destroy_qp(c);
	rdma_destroy_id(c);
	rdma_destroy_event_channel(ch);
	close(fds[0]);
	sv_proc_free(&p);
}

/* ---- the CM's own sockets, attacked ---- */

/* The listener's abstract name (rdmacm/link.c's link_name). */
static socklen_t cm_name(struct sockaddr_un *un, int ps, uint16_t port)
{
	int n;

	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	n = snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1,
		     "softverbs-cm/%d/127.0.0.1/%u", ps, port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int raw_connect(uint16_t port)
{
	struct sockaddr_un un;
	socklen_t len = cm_name(&un, RDMA_PS_TCP, port);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(connect(fd, (struct sockaddr *)&un, len));
	return fd;
}

/* Waits for the CM to close a hostile connection (EOF), with a deadline. */
static void expect_closed(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char b[512];

	ASSERT_EQ(1, poll(&p, 1, EV_MS));
	ASSERT_TRUE(recv(fd, b, sizeof(b), MSG_DONTWAIT) <= 0);
}

/* Garbage, short, oversized and lying messages: each connection is
 * dropped, no CONNECT_REQUEST is reported, and the listener still
 * serves a real client afterwards. */
SV_TEST(cm_hostile_bytes_dropped)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	struct pollfd p;
	uint8_t msg[300], big[4096];
	uint16_t port;
	int fd;

	l = listener(ch, RDMA_PS_TCP, &port);
	/* a well-formed header with each field made wrong in turn */
	struct {
		size_t off, len;
		uint32_t val;
	} lies[] = {
		{0, 4, 0xdeadbeef}, /* magic */
		{4, 2, 99},	    /* version */
		{6, 1, 0},	    /* type */
		{6, 1, 200},	    /* type */
		{7, 1, 57},	    /* pdata_len over REQ's 56 */
		{8, 4, 0x1000000},  /* qpn over 24 bits */
		{20, 1, 10},	    /* qp type (XRC_RECV never asks) */
		{48, 2, 77},	    /* src family */
	};

	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		memset(msg, 0, sizeof(msg));
		*(uint32_t *)msg = 0x53564d43u;
		*(uint16_t *)(msg + 4) = 1;
		msg[6] = 1;  /* REQ */
		msg[20] = 2; /* RC */
		*(uint16_t *)(msg + 48) = AF_INET;
		*(uint16_t *)(msg + 72) = AF_INET;
		memcpy(msg + lies[i].off, &lies[i].val, lies[i].len);
		fd = raw_connect(port);
		ASSERT_EQ((ssize_t)sizeof(msg), send(fd, msg, sizeof(msg), 0));
		expect_closed(fd);
		close(fd);
	}
	/* short, long, empty-then-gone */
	fd = raw_connect(port);
	ASSERT_EQ(10, send(fd, msg, 10, 0));
	expect_closed(fd);
	close(fd);
	memset(big, 0xa5, sizeof(big));
	fd = raw_connect(port);
	ASSERT_EQ((ssize_t)sizeof(big), send(fd, big, sizeof(big), 0));
	expect_closed(fd);
	close(fd);
	fd = raw_connect(port);
	close(fd);

	p = (struct pollfd){.fd = ch->fd, .events = POLLIN};
	ASSERT_EQ(0, poll(&p, 1, 0)); /* nothing was reported */

	/* the same bytes with no lie are a REQ: the lies were refused */
	msg[6] = 1;
	memset(msg + 7, 0, 300 - 7);
	msg[20] = 2;
	*(uint16_t *)(msg + 48) = AF_INET;
	*(uint16_t *)(msg + 72) = AF_INET;
	fd = raw_connect(port);
	ASSERT_EQ((ssize_t)sizeof(msg), send(fd, msg, sizeof(msg), 0));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	rdma_ack_cm_event(ev);
	ASSERT_OK(rdma_reject(s, NULL, 0));
	rdma_destroy_id(s);
	close(fd);

	c = resolved(ch, RDMA_PS_TCP, port);
	cp.qp_num = 5;
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	ASSERT_OK(rdma_reject(ev->id, NULL, 0));
	s = ev->id;
	rdma_ack_cm_event(ev);
	rdma_destroy_id(s); /* after the ack: it waits for it */
	ev = expect_ev(ch, RDMA_CM_EVENT_REJECTED);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/*
 * rdma_cm ports are the kernel's own space, where a connection does not
 * hold its listener's port: a program may listen again on the port while
 * the first connection lives (perftest -R does).  The TCP rendezvous's
 * accepted connections hold it in the kernel's TCP space; they must not
 * keep it from the next rdma_bind_addr, while another id that holds the
 * port still does.
 */
SV_TEST(cm_listen_again_while_connected)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp = {.responder_resources = 1,
				     .initiator_depth = 1};
	struct rdma_cm_id *l, *c, *s, *l2, *other;
	struct rdma_cm_event *ev;
	struct sockaddr_in a;
	uint16_t port;

	l = listener(ch, RDMA_PS_TCP, &port);
	c = resolved(ch, RDMA_PS_TCP, port);
	make_qp(c, IBV_QPT_RC);
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	make_qp(s, IBV_QPT_RC);
	ASSERT_OK(rdma_accept(s, &cp));
	ASSERT_OK(rdma_ack_cm_event(ev));
	for (int n = 0; n < 2; n++) { /* both sides' ESTABLISHED */
		ev = expect_any(ch);
		ASSERT_EQ(RDMA_CM_EVENT_ESTABLISHED, ev->event);
		ASSERT_OK(rdma_ack_cm_event(ev));
	}
	ASSERT_OK(rdma_destroy_id(l));

	a = lo(port);
	ASSERT_OK(rdma_create_id(ch, &l2, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(l2, (struct sockaddr *)&a));
	ASSERT_OK(rdma_create_id(ch, &other, NULL, RDMA_PS_TCP));
	errno = 0;
	ASSERT_EQ(-1, rdma_bind_addr(other, (struct sockaddr *)&a));
	ASSERT_EQ(EADDRINUSE, errno);
	ASSERT_OK(rdma_listen(l2, 8));
	send_one(c, s); /* the first connection still carries data */

	ASSERT_OK(rdma_disconnect(c));
	for (int n = 0; n < 2; n++) {
		ev = expect_any(ch);
		ASSERT_EQ(RDMA_CM_EVENT_DISCONNECTED, ev->event);
		ASSERT_OK(rdma_ack_cm_event(ev));
	}
	rdma_destroy_qp(c);
	rdma_destroy_qp(s);
	ASSERT_OK(rdma_destroy_id(s));
	ASSERT_OK(rdma_destroy_id(c));
	ASSERT_OK(rdma_destroy_id(other));
	ASSERT_OK(rdma_destroy_id(l2));
	rdma_destroy_event_channel(ch);
}

/* ---- the TCP rendezvous (another host's ids), attacked ---- */

static int tcp_connect_to(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(connect(fd, (const struct sockaddr *)a, sizeof(*a)));
	return fd;
}

/* A well-formed REQ (RC, IPv4) with `gid` as its sender's GID. */
static void good_req(uint8_t msg[300], const uint8_t *gid)
{
	memset(msg, 0, 300);
	*(uint32_t *)msg = 0x53564d43u;
	*(uint16_t *)(msg + 4) = 1;
	msg[6] = 1;  /* REQ */
	msg[20] = 2; /* RC */
	*(uint16_t *)(msg + 48) = AF_INET;
	*(uint16_t *)(msg + 72) = AF_INET;
	if (gid)
		memcpy(msg + 32, gid, 16);
}

/* A non-loopback IPv4 address of this host, or 0 (none). */
static in_addr_t host_addr(void)
{
	struct ifaddrs *ifa, *i;
	in_addr_t found = 0;

	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && !found; i = i->ifa_next) {
		struct sockaddr_in *in = (void *)i->ifa_addr;

		if (in && in->sin_family == AF_INET &&
		    (ntohl(in->sin_addr.s_addr) >> 24) != 127)
			found = in->sin_addr.s_addr;
	}
	freeifaddrs(ifa);
	return found;
}

/*
 * Every listener's TCP port takes the rendezvous of other hosts' ids (no
 * SO_PEERCRED there): a record with each field made wrong in turn,
 * garbage, a short record then silence, silence alone, a record whose
 * GID is not the sender's address: each connection is dropped (the
 * silent ones after the CM's 3 s), nothing is reported, and the listener
 * then serves a plain REQ and a real client.
 */
SV_TEST(cm_hostile_tcp_bytes_dropped)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in any = lo(0), to;
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	uint8_t msg[300], big[4096], gid[16] = {0};
	int fd, quiet[2];
	in_addr_t host = host_addr();
	struct pollfd p;
	uint16_t port;
	struct {
		size_t off, len;
		uint32_t val;
	} lies[] = {
		{0, 4, 0xdeadbeef}, {4, 2, 99},	 {6, 1, 0},
		{6, 1, 200},	    {7, 1, 57},	 {8, 4, 0x1000000},
		{20, 1, 10},	    {48, 2, 77}, {72, 2, 0},
	};

	/* a wildcard listener: reached on 127.0.0.1 and the host's address */
	any.sin_addr.s_addr = htonl(INADDR_ANY);
	ASSERT_OK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_bind_addr(l, (struct sockaddr *)&any));
	port = ntohs(rdma_get_src_port(l));
	ASSERT_OK(rdma_listen(l, 64));
	to = lo(port);

	quiet[0] = tcp_connect_to(&to); /* silence */
	quiet[1] = tcp_connect_to(&to); /* a short record, then silence */
	good_req(msg, NULL);
	ASSERT_EQ(10, send(quiet[1], msg, 10, 0));
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		good_req(msg, NULL);
		memcpy(msg + lies[i].off, &lies[i].val, lies[i].len);
		fd = tcp_connect_to(&to);
		ASSERT_EQ((ssize_t)sizeof(msg), send(fd, msg, sizeof(msg), 0));
		expect_closed(fd);
		close(fd);
	}
	memset(big, 0xa5, sizeof(big));
	fd = tcp_connect_to(&to);
	ASSERT_EQ((ssize_t)sizeof(big),
		  send(fd, big, sizeof(big), MSG_NOSIGNAL));
	expect_closed(fd);
	close(fd);
	if (host) {
		/* from a non-loopback address the GID must be its own */
		to.sin_addr.s_addr = host;
		good_req(msg, gid);
		fd = tcp_connect_to(&to);
		ASSERT_EQ((ssize_t)sizeof(msg), send(fd, msg, sizeof(msg), 0));
		expect_closed(fd);
		close(fd);
		gid[10] = gid[11] = 0xff;
		gid[12] = 192; /* another host's */
		good_req(msg, gid);
		fd = tcp_connect_to(&to);
		ASSERT_EQ((ssize_t)sizeof(msg), send(fd, msg, sizeof(msg), 0));
		expect_closed(fd);
		close(fd);
	} else {
		printf("no non-loopback IPv4 address: GID lies not tried\n");
	}
	expect_closed(quiet[0]);
	expect_closed(quiet[1]);
	close(quiet[0]);
	close(quiet[1]);
	p = (struct pollfd){.fd = ch->fd, .events = POLLIN};
	ASSERT_EQ(0, poll(&p, 1, 0)); /* nothing was reported */

	/* a plain REQ is one: the lies were refused for their lies */
	if (host) {
		memcpy(&gid[12], &host, 4);
		good_req(msg, gid);
	} else {
		good_req(msg, NULL);
	}
	/* in two pieces: half a record is kept, not a request yet */
	fd = tcp_connect_to(&to);
	ASSERT_EQ(123, send(fd, msg, 123, 0));
	p = (struct pollfd){.fd = ch->fd, .events = POLLIN};
	ASSERT_EQ(0, poll(&p, 1, 100));
	ASSERT_EQ((ssize_t)sizeof(msg) - 123,
		  send(fd, msg + 123, sizeof(msg) - 123, 0));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	/* its addresses are the socket's, not the (zero) claims */
	ASSERT_EQ(port, ntohs(rdma_get_src_port(s)));
	ASSERT_EQ(
		host ? host : htonl(INADDR_LOOPBACK),
		((struct sockaddr_in *)rdma_get_peer_addr(s))->sin_addr.s_addr);
	rdma_ack_cm_event(ev);
	ASSERT_OK(rdma_reject(s, NULL, 0));
	rdma_destroy_id(s);
	ASSERT_EQ((ssize_t)sizeof(msg),
		  recv(fd, msg, sizeof(msg), MSG_WAITALL)); /* the REJ */
	ASSERT_EQ(4, msg[6]);
	close(fd);

	c = resolved(ch, RDMA_PS_TCP, port);
	cp.qp_num = 5;
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	ASSERT_OK(rdma_reject(ev->id, NULL, 0));
	s = ev->id;
	rdma_ack_cm_event(ev);
	rdma_destroy_id(s);
	ev = expect_ev(ch, RDMA_CM_EVENT_REJECTED);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/*
 * Issue 24: a listener keeps at most 64 silent callers waiting for their
 * first record, on an RC listener's TCP port and a UD listener's SIDR
 * socket alike: of 80 silent connections the 16 oldest are dropped at
 * once (before, all waited for the CM's 3 s deadline, and a flood took
 * every fd of the program), the 64 newest stay, and a REQ sent after
 * them is still reported.
 */
SV_TEST(cm_silent_tcp_callers_bounded)
{
	enum rdma_port_space spaces[] = {RDMA_PS_TCP, RDMA_PS_UDP};
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct pollfd p[64];
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *s;
	struct sockaddr_in to;
	uint8_t msg[300];
	uint64_t t0, took;
	uint16_t port;
	int fd[80], req;

	for (size_t k = 0; k < 2; k++) {
		l = listener(ch, spaces[k], &port);
		to = lo(port);
		t0 = sv_now_ms();
		for (int i = 0; i < 80; i++)
			fd[i] = tcp_connect_to(&to);
		for (int i = 0; i < 16; i++)
			expect_closed(fd[i]);
		took = sv_now_ms() - t0;
		printf("%s listener: the 16 oldest of 80 silent callers "
		       "dropped in %llu ms\n",
		       k ? "UD" : "RC", (unsigned long long)took);
		ASSERT_TRUE(took < 2500); /* not the 3 s deadline's doing */
		for (int i = 0; i < 64; i++)
			p[i] = (struct pollfd){.fd = fd[16 + i],
					       .events = POLLIN};
		ASSERT_EQ(0, poll(p, 64, 0)); /* the newest are held */
		if (spaces[k] == RDMA_PS_TCP) {
			good_req(msg, NULL);
			req = tcp_connect_to(&to);
			ASSERT_EQ((ssize_t)sizeof(msg),
				  send(req, msg, sizeof(msg), 0));
			ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
			ASSERT_OK(rdma_reject(ev->id, NULL, 0));
			s = ev->id;
			rdma_ack_cm_event(ev);
			rdma_destroy_id(s);
			close(req);
		}
		for (int i = 0; i < 80; i++)
			close(fd[i]);
		rdma_destroy_id(l);
	}
	rdma_destroy_event_channel(ch);
}

/* Another uid: connects as nobody and sends a valid-looking REQ; exits
 * 0 if the CM closed the connection without answering. */
SV_HELPER(cm_other_uid)
{
	uint16_t port = (uint16_t)atoi(argv[0]);
	uint8_t msg[300] = {0};
	struct pollfd p;
	int fd;

	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		return 80;
	fd = raw_connect(port);
	*(uint32_t *)msg = 0x53564d43u;
	*(uint16_t *)(msg + 4) = 1;
	msg[6] = 1;
	msg[20] = 2;
	*(uint16_t *)(msg + 48) = AF_INET;
	*(uint16_t *)(msg + 72) = AF_INET;
	send(fd, msg, sizeof(msg), MSG_NOSIGNAL);
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&p, 1, EV_MS) != 1)
		return 81;
	return recv(fd, msg, sizeof(msg), MSG_DONTWAIT) <= 0 ? 0 : 82;
}

/* SO_PEERCRED on the passive side: another uid gets nothing. */
/* A listener's, and helper (as another uid) calls it: the helper must
 * exit 0 (its call refused) and the listener hear nothing. */
static void other_uid_caller_refused(const char *helper)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *l;
	struct pollfd p;
	struct sv_proc h;
	char parg[16];
	char *args[] = {parg, NULL};
	uint16_t port;

	if (geteuid() != 0) {
		printf("SKIPPED: needs root to run a helper as another uid\n");
		exit(77);
	}
	l = listener(ch, RDMA_PS_TCP, &port);
	snprintf(parg, sizeof(parg), "%u", port);
	sv_proc_start_helper(&h, helper, args, NULL);
	sv_proc_wait(&h, EV_MS);
	ASSERT_TRUE(h.exited);
	ASSERT_EQ(0, h.code);
	p = (struct pollfd){.fd = ch->fd, .events = POLLIN};
	ASSERT_EQ(0, poll(&p, 1, 0));
	sv_proc_free(&h);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

SV_TEST(cm_other_uid_refused)
{
	other_uid_caller_refused("cm_other_uid");
}

/*
 * Issue 24: a program out of fds still answers a caller at once: the
 * CM's spare fd takes the connection only to close it (before, it sat in
 * the kernel's queue, unanswered, and the CM thread woke for it
 * without end).
 */
SV_TEST(cm_listener_out_of_fds_closes_callers)
{
	struct rlimit rl = {.rlim_cur = 512, .rlim_max = 512};
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l;
	struct sockaddr_in to;
	struct pollfd p;
	uint16_t port;
	int s, fds[4096], n = 0;
	char b[16];

	ASSERT_OK(setrlimit(RLIMIT_NOFILE, &rl));
	ch = rdma_create_event_channel();
	l = listener(ch, RDMA_PS_TCP, &port);
	to = lo(port);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_TRUE(s >= 0);
	while (n < 4096 && (fds[n] = dup(s)) >= 0)
		n++;
	ASSERT_TRUE(n < 4096); /* the limit reached (EMFILE) */
	ASSERT_OK(connect(s, (struct sockaddr *)&to, sizeof(to)));
	p = (struct pollfd){.fd = s, .events = POLLIN};
	ASSERT_EQ(1, poll(&p, 1, 2000));
	ASSERT_TRUE(recv(s, b, sizeof(b), MSG_DONTWAIT) <= 0);
	while (n)
		close(fds[--n]);
	close(s);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* As nobody: a TCP connection to 127.0.0.1:argv[0] and a sound REQ;
 * exits 0 if the CM closed the connection without answering. */
SV_HELPER(cm_tcp_other_uid)
{
	struct sockaddr_in to = lo((uint16_t)atoi(argv[0]));
	uint8_t msg[300];
	struct pollfd p;
	int fd;

	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		return 80;
	fd = tcp_connect_to(&to);
	good_req(msg, NULL);
	if (send(fd, msg, sizeof(msg), MSG_NOSIGNAL) != (ssize_t)sizeof(msg))
		return 83;
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 5000) != 1)
		return 81; /* still open: the REQ is waiting for the program */
	return recv(fd, msg, sizeof(msg), MSG_DONTWAIT) <= 0 ? 0 : 82;
}

/*
 * Issue 24: a CM stream over TCP from another user's socket on this host
 * is dropped at its first record (NETLINK_SOCK_DIAG's uid, provider/
 * peer.c), as the Unix link's SO_PEERCRED drops it: nothing reported.
 */
SV_TEST(cm_tcp_other_uid_caller_refused)
{
	other_uid_caller_refused("cm_tcp_other_uid");
}

/* As nobody: a TCP listener at 127.0.0.1:argv[0], ready said on fd
 * argv[1]; exits 0 if its one caller closed without sending a byte. */
SV_HELPER(cm_tcp_other_uid_listener)
{
	struct sockaddr_in at = lo((uint16_t)atoi(argv[0]));
	int ready = atoi(argv[1]), one = 1, lfd, fd;
	struct pollfd p;
	char b[300];

	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		return 80;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&at, sizeof(at)) ||
	    listen(lfd, 4) || write(ready, "r", 1) != 1)
		return 81;
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return 82;
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 5000) != 1)
		return 83;
	return recv(fd, b, sizeof(b), 0) == 0 ? 0 : 84; /* a REQ came: 84 */
}

/*
 * Issue 24: the side that connects checks the other end too: a TCP
 * listener of another user on this host (one that took the port) gets
 * no REQ, and rdma_connect ends UNREACHABLE with -EPERM at once.  Both
 * runs take the TCP rendezvous on 127.0.0.1 (SOFTVERBS_TRANSPORT=tcp,
 * set before the CM starts).
 */
SV_TEST(cm_tcp_other_uid_listener_refused)
{
	struct rdma_event_channel *ch;
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;
	struct pollfd p;
	struct sv_proc h;
	char parg[16], farg[16], r;
	char *args[] = {parg, farg, NULL};
	struct sockaddr_in a = lo(0);
	socklen_t alen = sizeof(a);
	uint64_t t0;
	int pfd[2], s;

	if (geteuid() != 0) {
		printf("SKIPPED: needs root to run a helper as another uid\n");
		exit(77);
	}
	setenv("SOFTVERBS_TRANSPORT", "tcp", 1);
	ch = rdma_create_event_channel();
	/* a free port for the helper */
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_OK(bind(s, (struct sockaddr *)&a, sizeof(a)));
	ASSERT_OK(getsockname(s, (struct sockaddr *)&a, &alen));
	close(s);
	ASSERT_OK(pipe(pfd));
	snprintf(parg, sizeof(parg), "%u", ntohs(a.sin_port));
	snprintf(farg, sizeof(farg), "%d", pfd[1]);
	sv_proc_start_helper(&h, "cm_tcp_other_uid_listener", args, NULL);
	close(pfd[1]);
	p = (struct pollfd){.fd = pfd[0], .events = POLLIN};
	ASSERT_EQ(1, poll(&p, 1, EV_MS));
	ASSERT_EQ(1, read(pfd[0], &r, 1));
	close(pfd[0]);

	c = resolved(ch, RDMA_PS_TCP, ntohs(a.sin_port));
	cp.qp_num = 5;
	t0 = sv_now_ms();
	ASSERT_OK(rdma_connect(c, &cp));
	ev = expect_ev(ch, RDMA_CM_EVENT_UNREACHABLE);
	ASSERT_EQ(-EPERM, ev->status);
	printf("refused in %llu ms\n", (unsigned long long)(sv_now_ms() - t0));
	ASSERT_TRUE(sv_now_ms() - t0 < 1000);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(c);
	sv_proc_wait(&h, EV_MS);
	ASSERT_TRUE(h.exited);
	ASSERT_EQ(0, h.code); /* no REQ reached it */
	sv_proc_free(&h);
	rdma_destroy_event_channel(ch);
}

/* A fresh secret file (0600, 32 random bytes) named in the environment
 * before the CM starts, and the TCP rendezvous forced: one process's ids
 * all prove it (issue 24, rdmacm/link_auth.c). */
static void secret_env(void)
{
	char path[] = "/tmp/sv_cm_secret_XXXXXX";
	uint8_t b[32];
	int fd = mkstemp(path);

	ASSERT_TRUE(fd >= 0);
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(rand() ^ (int)i ^ getpid());
	ASSERT_EQ((ssize_t)sizeof(b), write(fd, b, sizeof(b)));
	close(fd);
	setenv("SOFTVERBS_SECRET_FILE", path, 1);
	setenv("SOFTVERBS_TRANSPORT", "tcp", 1);
}

/* What fd's peer sends until it closes (within EV_MS): its length. */
static size_t read_to_eof(int fd, uint8_t *buf, size_t cap)
{
	size_t got = 0;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		ASSERT_EQ(1, poll(&p, 1, EV_MS));
		n = recv(fd, buf + got, cap - got, 0);
		if (n <= 0)
			return got;
		got += (size_t)n;
	}
}

/* Relays between a and b until `until` says an event is ready; what a
 * sent is kept in rec (at most cap bytes), what b sent in brec. */
static void relay(int a, int b, int until, uint8_t *rec, size_t cap,
		  size_t *len, uint8_t *brec, size_t bcap, size_t *blen)
{
	uint64_t end = sv_now_ms() + EV_MS;

	while (sv_now_ms() < end) {
		struct pollfd p[3] = {{.fd = a, .events = POLLIN},
				      {.fd = b, .events = POLLIN},
				      {.fd = until, .events = POLLIN}};
		uint8_t buf[1024];
		ssize_t n;

		ASSERT_TRUE(poll(p, 3, 100) >= 0);
		if (p[2].revents)
			return;
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			n = recv(p[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n <= 0)
				continue;
			if (i == 0 && *len + (size_t)n <= cap) {
				memcpy(rec + *len, buf, (size_t)n);
				*len += (size_t)n;
			}
			if (i == 1 && *blen + (size_t)n <= bcap) {
				memcpy(brec + *blen, buf, (size_t)n);
				*blen += (size_t)n;
			}
			ASSERT_EQ(n,
				  send(p[!i].fd, buf, (size_t)n, MSG_NOSIGNAL));
		}
	}
	sv_test_fail(__FILE__, __LINE__, "no event through the relay");
}

/*
 * Issue 24: with a secret, a TCP CM stream's first bytes are the secret's
 * handshake.  Through a relay of the test's, a real id connects to a real
 * listener (both with the secret): CONNECT_REQUEST.  Replayed to the
 * listener byte for byte, the active side's recorded handshake and REQ
 * are dropped unreported (the listener's nonce is a fresh one: its HELLO
 * differs from the recorded one), and so is a plain REQ with no
 * handshake (a peer without the secret).
 */
SV_TEST(cm_secret_handshake_not_replayable)
{
	struct rdma_event_channel *chl, *chc;
	struct sockaddr_in at = lo(0), to;
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	uint8_t rec[2048], brec[2048], brec2[2048], msg[300];
	size_t len = 0, blen = 0, blen2 = 0;
	socklen_t alen = sizeof(at);
	struct pollfd p;
	uint16_t port;
	int r, a, b;

	secret_env();
	chl = rdma_create_event_channel();
	chc = rdma_create_event_channel();
	l = listener(chl, RDMA_PS_TCP, &port);
	to = lo(port);
	r = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_OK(bind(r, (struct sockaddr *)&at, sizeof(at)));
	ASSERT_OK(getsockname(r, (struct sockaddr *)&at, &alen));
	ASSERT_OK(listen(r, 1));

	c = resolved(chc, RDMA_PS_TCP, ntohs(at.sin_port));
	cp.qp_num = 5;
	ASSERT_OK(rdma_connect(c, &cp));
	p = (struct pollfd){.fd = r, .events = POLLIN};
	ASSERT_EQ(1, poll(&p, 1, EV_MS));
	a = accept(r, NULL, NULL);
	b = tcp_connect_to(&to);
	relay(a, b, chl->fd, rec, sizeof(rec), &len, brec, sizeof(brec), &blen);
	ev = expect_ev(chl, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	rdma_ack_cm_event(ev);
	ASSERT_OK(rdma_reject(s, NULL, 0));
	rdma_destroy_id(s);
	rdma_destroy_id(c);
	close(a);
	close(b);
	close(r);
	printf("relayed: %zu bytes from the active side, %zu back\n", len,
	       blen);
	ASSERT_EQ(900, (int)len); /* HELLO, PROOF, REQ */

	/* the recorded bytes again: the listener's new HELLO differs, the
	 * old PROOF does not match it: closed, nothing reported */
	b = tcp_connect_to(&to);
	ASSERT_EQ((ssize_t)len, send(b, rec, len, MSG_NOSIGNAL));
	blen2 = read_to_eof(b, brec2, sizeof(brec2));
	close(b);
	ASSERT_TRUE(blen2 >= 300);
	ASSERT_TRUE(memcmp(brec, brec2, 300) != 0); /* a fresh HELLO */
	p = (struct pollfd){.fd = chl->fd, .events = POLLIN};
	ASSERT_EQ(0, poll(&p, 1, 200));

	/* a plain REQ, no handshake: closed, nothing reported */
	b = tcp_connect_to(&to);
	good_req(msg, NULL);
	ASSERT_EQ((ssize_t)sizeof(msg), send(b, msg, sizeof(msg), 0));
	ASSERT_EQ(300, (int)read_to_eof(b, brec2, sizeof(brec2))); /* HELLO */
	close(b);
	p = (struct pollfd){.fd = chl->fd, .events = POLLIN};
	ASSERT_EQ(0, poll(&p, 1, 200));

	rdma_destroy_id(l);
	rdma_destroy_event_channel(chl);
	rdma_destroy_event_channel(chc);
	unlink(getenv("SOFTVERBS_SECRET_FILE"));
}

/* Reads one 300-byte CM record from a TCP stream, with a deadline. */
static void read_record(int fd, uint8_t msg[300])
{
	size_t got = 0;

	while (got < 300) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		ASSERT_EQ(1, poll(&p, 1, EV_MS));
		n = recv(fd, msg + got, 300 - got, 0);
		ASSERT_TRUE(n > 0);
		got += (size_t)n;
	}
}

/* A SIDR REP (type 8, UD) with QPN qpn and qkey qkey. */
static void sidr_rep(uint8_t msg[300], uint32_t qpn, uint32_t qkey)
{
	good_req(msg, NULL);
	msg[6] = 8;  /* SIDR REP */
	msg[20] = 4; /* UD */
	memcpy(msg + 8, &qpn, 4);
	memcpy(msg + 16, &qkey, 4);
}

/*
 * SIDR between hosts goes over the TCP rendezvous: a UD listener also
 * listens on TCP at its (UDP) port's number.  As another host would: a
 * SIDR REQ sent there is a CONNECT_REQUEST with the REQ's QPN and the
 * socket's address, and rdma_accept answers a SIDR REP on that stream
 * with the QP's number and the qkey.  As the active side toward a
 * stranger (the .tcp. run, whose ids take the rendezvous on 127.0.0.1):
 * a SIDR REP naming QPN 0 or a controlled qkey is UNREACHABLE, a sound
 * one ESTABLISHED with what it says.
 */
SV_TEST(cm_ud_sidr_over_tcp_rendezvous)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	const char *t = getenv("SOFTVERBS_TRANSPORT");
	struct sockaddr_in to, peer;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *s, *c;
	uint32_t qpn = 0x1234, v;
	uint8_t msg[300];
	uint16_t port;
	int fd;

	l = listener(ch, RDMA_PS_UDP, &port);
	to = lo(port);
	fd = tcp_connect_to(&to);
	good_req(msg, NULL);
	msg[6] = 7;  /* SIDR REQ */
	msg[20] = 4; /* UD */
	memcpy(msg + 8, &qpn, 4);
	ASSERT_EQ(300, send(fd, msg, 300, 0));
	ev = expect_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	ASSERT_EQ(qpn, ev->param.ud.qp_num);
	memcpy(&peer, rdma_get_peer_addr(s), sizeof(peer));
	ASSERT_EQ(htonl(INADDR_LOOPBACK), peer.sin_addr.s_addr);
	ASSERT_OK(rdma_ack_cm_event(ev));
	make_qp(s, IBV_QPT_UD);
	ASSERT_OK(rdma_accept(s, NULL));
	read_record(fd, msg);
	ASSERT_EQ(8, msg[6]);
	memcpy(&v, msg + 8, 4);
	ASSERT_EQ(s->qp->qp_num, v);
	memcpy(&v, msg + 16, 4);
	ASSERT_EQ(RDMA_UDP_QKEY, v);
	ASSERT_EQ(0, msg[27]); /* status */
	close(fd);
	rdma_destroy_qp(s);
	rdma_destroy_id(s);
	rdma_destroy_id(l);

	if (!t || strcmp(t, "tcp")) {
		printf("the Unix link here: the active side is the .tcp. "
		       "run's\n");
		rdma_destroy_event_channel(ch);
		return;
	}
	for (int i = 0; i < 3; i++) {
		static const uint32_t qpns[] = {0, 0x4242, 0x4242};
		static const uint32_t qkeys[] = {RDMA_UDP_QKEY, 0x80000001u,
						 RDMA_UDP_QKEY};
		struct sockaddr_in any = lo(0);
		socklen_t len = sizeof(any);
		int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), afd;
		struct pollfd p = {.fd = lfd, .events = POLLIN};

		ASSERT_TRUE(lfd >= 0);
		ASSERT_OK(bind(lfd, (struct sockaddr *)&any, sizeof(any)));
		ASSERT_OK(listen(lfd, 1));
		ASSERT_OK(getsockname(lfd, (struct sockaddr *)&any, &len));
		c = resolved(ch, RDMA_PS_UDP, ntohs(any.sin_port));
		make_qp(c, IBV_QPT_UD);
		ASSERT_OK(rdma_connect(c, NULL));
		ASSERT_EQ(1, poll(&p, 1, EV_MS));
		afd = accept(lfd, NULL, NULL);
		ASSERT_TRUE(afd >= 0);
		read_record(afd, msg);
		ASSERT_EQ(7, msg[6]); /* the SIDR REQ */
		sidr_rep(msg, qpns[i], qkeys[i]);
		ASSERT_EQ(300, send(afd, msg, 300, MSG_NOSIGNAL));
		if (i < 2) {
			ev = expect_ev(ch, RDMA_CM_EVENT_UNREACHABLE);
		} else {
			ev = expect_ev(ch, RDMA_CM_EVENT_ESTABLISHED);
			ASSERT_EQ(0x4242, ev->param.ud.qp_num);
			ASSERT_EQ(RDMA_UDP_QKEY, ev->param.ud.qkey);
		}
		ASSERT_OK(rdma_ack_cm_event(ev));
		close(afd);
		close(lfd);
		rdma_destroy_qp(c);
		rdma_destroy_id(c);
	}
	rdma_destroy_event_channel(ch);
}

/*
 * rdma_getaddrinfo as rdma-core's: one answer; with neither node nor
 * service, the hints' own destination (libfabric's verbs provider asks
 * so for a peer whose address it holds: its RDM endpoints failed with
 * EINVAL); a source address in the hints is the answer's; EINVAL only
 * with nothing at all.
 */
SV_TEST(cm_getaddrinfo_as_rdma_core)
{
	struct sockaddr_in dst = lo(7471), src = lo(0);
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP,
				      .ai_qp_type = IBV_QPT_RC},
			     *res;

	errno = 0;
	ASSERT_EQ(-1, rdma_getaddrinfo(NULL, NULL, NULL, &res));
	ASSERT_EQ(EINVAL, errno);

	hints.ai_dst_addr = (struct sockaddr *)&dst;
	hints.ai_dst_len = sizeof(dst);
	ASSERT_OK(rdma_getaddrinfo(NULL, NULL, &hints, &res));
	ASSERT_NULL(res->ai_next);
	ASSERT_EQ(IBV_QPT_RC, res->ai_qp_type);
	ASSERT_EQ(RDMA_PS_TCP, res->ai_port_space);
	ASSERT_EQ(sizeof(dst), res->ai_dst_len);
	ASSERT_OK(memcmp(res->ai_dst_addr, &dst, sizeof(dst)));
	ASSERT_TRUE(res->ai_dst_addr != hints.ai_dst_addr); /* a copy */
	ASSERT_NULL(res->ai_src_addr);
	rdma_freeaddrinfo(res);

	/* a node: the resolver's first answer, the hints' source kept */
	hints.ai_dst_addr = NULL;
	hints.ai_dst_len = 0;
	src.sin_port = htons(5555);
	hints.ai_src_addr = (struct sockaddr *)&src;
	hints.ai_src_len = sizeof(src);
	ASSERT_OK(rdma_getaddrinfo("localhost", "7471", &hints, &res));
	ASSERT_NULL(res->ai_next);
	ASSERT_NOT_NULL(res->ai_dst_addr);
	ASSERT_TRUE(res->ai_family == AF_INET || res->ai_family == AF_INET6);
	ASSERT_EQ(res->ai_family, res->ai_dst_addr->sa_family);
	ASSERT_EQ(sizeof(src), res->ai_src_len);
	ASSERT_OK(memcmp(res->ai_src_addr, &src, sizeof(src)));
	ASSERT_EQ(0, res->ai_flags & RAI_PASSIVE);
	rdma_freeaddrinfo(res);

	/* passive: the address is the source; no QP type: RC, by TCP */
	hints = (struct rdma_addrinfo){.ai_flags = RAI_PASSIVE};
	ASSERT_OK(rdma_getaddrinfo(NULL, "7471", &hints, &res));
	ASSERT_NULL(res->ai_next);
	ASSERT_EQ(RAI_PASSIVE, res->ai_flags);
	ASSERT_NOT_NULL(res->ai_src_addr);
	ASSERT_NULL(res->ai_dst_addr);
	ASSERT_EQ(IBV_QPT_RC, res->ai_qp_type);
	ASSERT_EQ(RDMA_PS_TCP, res->ai_port_space);
	rdma_freeaddrinfo(res);
}

/* The signal mask of this process's thread named name, from
 * /proc/self/task/TID/status (SigBlk); fails the test if there is none. */
static unsigned long long blocked_of(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *t;
	unsigned long long mask = 0;
	bool found = false;

	ASSERT_NOT_NULL(d);
	while (!found && (t = readdir(d))) {
		char path[300], comm[64] = "", line[256];
		FILE *f;

		if (t->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 t->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
		comm[strcspn(comm, "\n")] = '\0';
		if (strcmp(comm, name))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
			 t->d_name);
		f = fopen(path, "r");
		ASSERT_NOT_NULL(f);
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "SigBlk: %llx", &mask) == 1)
				found = true;
		fclose(f);
	}
	closedir(d);
	if (!found)
		sv_test_fail(__FILE__, __LINE__, "no thread named %s", name);
	return mask;
}

/*
 * The connection manager's thread keeps the program's signals off but
 * not the faults of its own accesses: blocked, the kernel kills the
 * process at the first, and its writes to heap memory that ibv_reg_mr
 * is moving onto the arena fault and must wait in rmem's handler
 * (ucmatose's client died so, about once in 100 runs).
 */
SV_TEST(cm_thread_takes_its_faults)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	unsigned long long m;

	ASSERT_NOT_NULL(ch);
	/* a new thread starts with every signal blocked until glibc's
	 * start_thread sets the mask it was created with: look again */
	for (uint64_t until = sv_now_ms() + 5000;;) {
		m = blocked_of("softverbs-cm");
		if (!(m & (1ull << (SIGSEGV - 1))) || sv_now_ms() > until)
			break;
		sched_yield();
	}
	ASSERT_TRUE(m & (1ull << (SIGINT - 1))); /* the program's */
	ASSERT_TRUE(m & (1ull << (SIGTERM - 1)));
	ASSERT_EQ(0, m & (1ull << (SIGSEGV - 1))); /* its own faults */
	ASSERT_EQ(0, m & (1ull << (SIGBUS - 1)));
	rdma_destroy_event_channel(ch);
}

/*
 * softverbs_roce0 (docs/roce.md): the CM does not cover RoCE yet.  An
 * address of the RoCE device's interface resolves to softverbs0 (whose
 * connections go over softverbs' own wire), and a QP asked for on the
 * id with a PD of softverbs_roce0 is refused at once (EINVAL), with no
 * wait.  On a host where softverbs_roce0 is not listed: nothing to try.
 */
SV_TEST(cm_roce_device_not_resolved_its_pd_refused)
{
	struct ibv_qp_init_attr qa = {.cap = {1, 1, 1, 1, 0},
				      .qp_type = IBV_QPT_RC};
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in a = lo(0);
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *rctx;
	union ibv_gid g;
	struct rdma_cm_id *c;
	struct ibv_pd *pd;
	struct ibv_cq *cq;

	ASSERT_NOT_NULL(list);
	if (!list[1]) {
		printf("SKIP: softverbs_roce0 is not listed here\n");
		ibv_free_device_list(list);
		rdma_destroy_event_channel(ch);
		return;
	}
	ASSERT_STR_EQ("softverbs_roce0", ibv_get_device_name(list[1]));
	rctx = ibv_open_device(list[1]);
	ibv_free_device_list(list);
	ASSERT_NOT_NULL(rctx);
	/* its GID 1: the interface's first IPv4 address */
	ASSERT_OK(ibv_query_gid(rctx, 1, 1, &g));
	memcpy(&a.sin_addr, &g.raw[12], 4);
	ASSERT_OK(rdma_create_id(ch, &c, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(c, NULL, (struct sockaddr *)&a, 2000));
	expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_NOT_NULL(c->verbs);
	ASSERT_STR_EQ("softverbs0", ibv_get_device_name(c->verbs->device));
	ASSERT_NOT_NULL(pd = ibv_alloc_pd(rctx));
	ASSERT_NOT_NULL(cq = ibv_create_cq(rctx, 2, NULL, NULL, 0));
	qa.send_cq = qa.recv_cq = cq;
	errno = 0;
	ASSERT_EQ(-1, rdma_create_qp(c, pd, &qa));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_NULL(c->qp);
	rdma_destroy_id(c);
	ASSERT_OK(ibv_destroy_cq(cq));
	ASSERT_OK(ibv_dealloc_pd(pd));
	ASSERT_OK(ibv_close_device(rctx));
	rdma_destroy_event_channel(ch);
}
