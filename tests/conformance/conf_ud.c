// SPDX-License-Identifier: MIT
/*
 * Unreliable datagram QPs (IBA 9.8.4) and address handles: UD's state
 * machine masks, AH checks, sends addressed by AH + QPN + qkey with the
 * 40-byte GRH in front of every receive, immediate data, the drops of a
 * wire (wrong qkey, no receive) that never complete, a message longer
 * than the MTU failing at the sender, fan-in from 8 QPs with no set-up at
 * the receiver, and the reply path through ibv_create_ah_from_wc.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "objects.h"
#include "pair.h"
#include "shm.h"
#include "ud_end.h"
#include "wire.h"

#define LEN  (1 << 20)
#define QKEY 0x11111111u
#define GRH  40

static void ud_open(struct ud_end *u, uint32_t depth, bool ready)
{
	struct ud_end_opts o = ud_end_opts(depth, LEN, QKEY);

	o.sge = 2;
	o.ready = ready;
	ud_end_open(u, &o);
}

static struct ibv_ah *lid_ah(struct ud_end *u)
{
	struct ibv_ah_attr aa = {.dlid = u->e.lid, .port_num = 1};
	struct ibv_ah *ah = ibv_create_ah(u->e.pd, &aa);

	ASSERT_NOT_NULL(ah);
	return ah;
}

static struct ibv_ah *gid_ah(struct ud_end *u, union ibv_gid *gid)
{
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	struct ibv_ah *ah;

	ASSERT_OK(ibv_query_gid(u->e.ctx, 1, 0, gid));
	aa.grh.dgid = *gid;
	aa.grh.sgid_index = 0;
	aa.grh.hop_limit = 1;
	ah = ibv_create_ah(u->e.pd, &aa);
	ASSERT_NOT_NULL(ah);
	return ah;
}

static int post_recv(struct ud_end *u, uint64_t id, size_t off, uint32_t len)
{
	return ud_end_recv(u, u->qp, id, off, len);
}

static int send_ud(struct ud_end *u, uint64_t id, enum ibv_wr_opcode op,
		   size_t off, uint32_t len, struct ibv_ah *ah, uint32_t qpn,
		   uint32_t qkey)
{
	return ud_end_send(u, u->qp, id, op, off, len, ah, qpn, qkey);
}

static void wc_of(struct ibv_cq *cq, uint64_t id, enum ibv_wc_status st,
		  struct ibv_wc *wc)
{
	WAIT_WC(cq, wc, SV_WC_TIMEOUT_MS);
	if (wc->status != st)
		sv_test_fail(__FILE__, __LINE__,
			     "wr_id %" PRIu64 ": %s, not %s",
			     (uint64_t)wc->wr_id, ibv_wc_status_str(wc->status),
			     ibv_wc_status_str(st));
	ASSERT_EQ(id, wc->wr_id);
}

static enum ibv_qp_state state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	ASSERT_OK(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia));
	return a.qp_state;
}

/* UD's masks: qkey at INIT, nothing at RTR, SQ_PSN at RTS; no path. */
SV_TEST(ud_state_masks_and_query)
{
	struct ud_end u;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	struct ibv_qp_init_attr ia;
	int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	ud_open(&u, 16, false);
	ASSERT_EQ(EINVAL, ibv_modify_qp(u.qp, &a, init)); /* no qkey */
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ASSERT_EQ(EINVAL,
		  ibv_modify_qp(u.qp, &a,
				init | IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS));
	a.qkey = QKEY;
	ASSERT_OK(ibv_modify_qp(u.qp, &a, init | IBV_QP_QKEY));
	ASSERT_EQ(IBV_QPS_INIT, state(u.qp));

	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = 5,
				 .ah_attr = {.dlid = u.e.lid, .port_num = 1}};
	ASSERT_EQ(EINVAL, ibv_modify_qp(u.qp, &a, IBV_QP_STATE | IBV_QP_AV));
	ASSERT_EQ(EINVAL,
		  ibv_modify_qp(u.qp, &a, IBV_QP_STATE | IBV_QP_DEST_QPN));
	ASSERT_EQ(EINVAL,
		  ibv_modify_qp(u.qp, &a, IBV_QP_STATE | IBV_QP_PATH_MTU));
	ASSERT_OK(ibv_modify_qp(u.qp, &a, IBV_QP_STATE));
	ASSERT_EQ(IBV_QPS_RTR, state(u.qp));

	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS, .sq_psn = 9, .timeout = 14};
	ASSERT_EQ(EINVAL, ibv_modify_qp(u.qp, &a, IBV_QP_STATE));
	ASSERT_EQ(EINVAL,
		  ibv_modify_qp(u.qp, &a,
				IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT));
	ASSERT_OK(ibv_modify_qp(u.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
	a = (struct ibv_qp_attr){.qkey = 0x1234};
	ASSERT_OK(ibv_modify_qp(u.qp, &a, IBV_QP_QKEY)); /* RTS -> RTS */

	memset(&a, 0, sizeof(a));
	ASSERT_OK(ibv_query_qp(u.qp, &a, IBV_QP_STATE | IBV_QP_QKEY, &ia));
	ASSERT_EQ(IBV_QPS_RTS, a.qp_state);
	ASSERT_EQ(0x1234, a.qkey);
	ASSERT_EQ(IBV_QPT_UD, ia.qp_type);
	ASSERT_NE(0, u.qp->qp_num);
	ud_end_close(&u);
}

/* AHs name this host (port 1, our LID or GID); they hold their PD. */
SV_TEST(ud_ah_create_destroy)
{
	struct ud_end u;
	struct ibv_ah_attr aa = {.dlid = 0, .port_num = 1};
	union ibv_gid gid;
	struct ibv_ah *ah, *gah;

	ud_open(&u, 4, false);
	ah = lid_ah(&u);
	gah = gid_ah(&u, &gid);
	ASSERT_EQ(u.e.pd, ah->pd);

	aa.dlid = (uint16_t)(u.e.lid + 1);
	errno = 0;
	ASSERT_NULL(ibv_create_ah(u.e.pd, &aa)); /* another host's LID */
	ASSERT_EQ(EINVAL, errno);
	aa.dlid = u.e.lid;
	aa.port_num = 2;
	errno = 0;
	ASSERT_NULL(ibv_create_ah(u.e.pd, &aa)); /* no port 2 */
	ASSERT_EQ(EINVAL, errno);
	aa.port_num = 1;
	aa.is_global = 1;
	memset(&aa.grh.dgid, 0, sizeof(aa.grh.dgid));
	/* fe80::1, not ours: another host's link-local GID has no scope
	 * (2000::1 would be another host's IPv6 address: conf_ipv6.c) */
	aa.grh.dgid.raw[0] = 0xfe;
	aa.grh.dgid.raw[1] = 0x80;
	aa.grh.dgid.raw[15] = 1;
	errno = 0;
	ASSERT_NULL(ibv_create_ah(u.e.pd, &aa));
	ASSERT_EQ(EINVAL, errno);
	aa.grh.dgid = gid;
	aa.grh.sgid_index = 200;
	errno = 0;
	ASSERT_NULL(ibv_create_ah(u.e.pd, &aa)); /* no such sgid */
	ASSERT_EQ(EINVAL, errno);

	ASSERT_OK(ibv_destroy_qp(u.qp));
	ASSERT_OK(ibv_dereg_mr(u.mr));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(u.e.pd)); /* the AHs hold it */
	ASSERT_OK(ibv_destroy_ah(ah));
	ASSERT_OK(ibv_destroy_ah(gah));
	ASSERT_OK(ibv_destroy_cq(u.cq));
	free(u.buf);
	ASSERT_OK(ibv_dealloc_pd(u.e.pd));
	ASSERT_OK(ibv_close_device(u.e.ctx));
}

/* Without a GRH: payload after 40 bytes left alone, src_qp, slid. */
SV_TEST(ud_send_recv_no_grh)
{
	struct ud_end s, r;
	struct ibv_ah *ah;
	struct ibv_wc wc;

	ud_open(&s, 16, true);
	ud_open(&r, 16, true);
	ah = lid_ah(&s);
	sv_fill(s.buf, 1000, 7);
	memset(r.buf, 0xee, 4096);
	ASSERT_OK(post_recv(&r, 1, 0, 4096));
	ASSERT_OK(send_ud(&s, 2, IBV_WR_SEND, 0, 1000, ah, r.qp->qp_num, QKEY));
	wc_of(s.cq, 2, IBV_WC_SUCCESS, &wc);
	ASSERT_EQ(IBV_WC_SEND, wc.opcode);
	wc_of(r.cq, 1, IBV_WC_SUCCESS, &wc);
	ASSERT_EQ(IBV_WC_RECV, wc.opcode);
	ASSERT_EQ(GRH + 1000, wc.byte_len);
	ASSERT_EQ(s.qp->qp_num, wc.src_qp);
	ASSERT_EQ(r.qp->qp_num, wc.qp_num);
	ASSERT_EQ(s.e.lid, wc.slid);
	ASSERT_EQ(0, wc.pkey_index);
	ASSERT_EQ(0, wc.wc_flags & (IBV_WC_GRH | IBV_WC_WITH_IMM));
	ASSERT_EQ(0xee, r.buf[0]); /* no GRH: those bytes are not written */
	ASSERT_EQ(-1, sv_check(r.buf + GRH, 1000, 7));
	ASSERT_EQ(0xee, r.buf[GRH + 1000]);
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	ud_end_close(&r);
}

/* With a GRH: IPv6-like, the sender's GID as source, ours as dest; and
 * the payload scattered over two SGEs, the first shorter than the GRH. */
SV_TEST(ud_send_recv_grh)
{
	struct ud_end s, r;
	struct ibv_ah *ah;
	union ibv_gid gid;
	struct ibv_grh grh;
	struct ibv_wc wc;
	struct ibv_sge sg[2];
	struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = sg, .num_sge = 2};
	struct ibv_recv_wr *bad;

	ud_open(&s, 16, true);
	ud_open(&r, 16, true);
	ah = gid_ah(&s, &gid);
	sv_fill(s.buf, 3000, 9);
	sg[0] = (struct ibv_sge){(uintptr_t)r.buf, 24, r.mr->lkey};
	sg[1] = (struct ibv_sge){(uintptr_t)r.buf + 24, 4096, r.mr->lkey};
	ASSERT_OK(ibv_post_recv(r.qp, &wr, &bad));
	ASSERT_OK(send_ud(&s, 2, IBV_WR_SEND, 0, 3000, ah, r.qp->qp_num, QKEY));
	wc_of(s.cq, 2, IBV_WC_SUCCESS, &wc);
	wc_of(r.cq, 1, IBV_WC_SUCCESS, &wc);
	ASSERT_EQ(GRH + 3000, wc.byte_len);
	ASSERT_TRUE(wc.wc_flags & IBV_WC_GRH);
	memcpy(&grh, r.buf, sizeof(grh));
	ASSERT_EQ(6, ntohl(grh.version_tclass_flow) >> 28);
	ASSERT_EQ(0x1b, grh.next_hdr);
	ASSERT_OK(memcmp(&gid, &grh.sgid, 16));
	ASSERT_OK(memcmp(&gid, &grh.dgid, 16));
	ASSERT_EQ(-1, sv_check(r.buf + GRH, 3000, 9));
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	ud_end_close(&r);
}

SV_TEST(ud_send_with_imm)
{
	struct ud_end s, r;
	struct ibv_ah *ah;
	struct ibv_wc wc;

	ud_open(&s, 16, true);
	ud_open(&r, 16, true);
	ah = lid_ah(&s);
	ASSERT_OK(post_recv(&r, 1, 0, 4096));
	ASSERT_OK(send_ud(&s, 2, IBV_WR_SEND_WITH_IMM, 0, 8, ah, r.qp->qp_num,
			  QKEY));
	wc_of(s.cq, 2, IBV_WC_SUCCESS, &wc);
	wc_of(r.cq, 1, IBV_WC_SUCCESS, &wc);
	ASSERT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
	ASSERT_EQ(0xabcd1234, ntohl(wc.imm_data));
	ASSERT_EQ(GRH + 8, wc.byte_len);
	/* UD has no RDMA: refused at post */
	ASSERT_EQ(EINVAL, send_ud(&s, 3, IBV_WR_RDMA_WRITE, 0, 8, ah,
				  r.qp->qp_num, QKEY));
	ASSERT_EQ(EINVAL,
		  send_ud(&s, 3, IBV_WR_SEND, 0, 8, NULL, r.qp->qp_num, QKEY));
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	ud_end_close(&r);
}

/* IBA 10.2.5: a wrong qkey is dropped without a trace; a remote_qkey
 * with the high bit set sends the sender QP's own qkey. */
SV_TEST(ud_wrong_qkey_dropped)
{
	struct ud_end s, r;
	struct ibv_ah *ah;
	struct ibv_wc wc;

	ud_open(&s, 16, true);
	ud_open(&r, 16, true);
	ah = lid_ah(&s);
	sv_fill(s.buf, 64, 1);
	sv_fill(s.buf + 64, 64, 2);
	sv_fill(s.buf + 128, 64, 3);
	ASSERT_OK(post_recv(&r, 1, 0, 4096));
	ASSERT_OK(post_recv(&r, 2, 4096, 4096));
	ASSERT_OK(send_ud(&s, 10, IBV_WR_SEND, 0, 64, ah, r.qp->qp_num,
			  QKEY + 1));
	wc_of(s.cq, 10, IBV_WC_SUCCESS, &wc); /* UD: sent is done */
	ASSERT_OK(send_ud(&s, 11, IBV_WR_SEND, 64, 64, ah, r.qp->qp_num, QKEY));
	wc_of(s.cq, 11, IBV_WC_SUCCESS, &wc);
	ASSERT_OK(send_ud(&s, 12, IBV_WR_SEND, 128, 64, ah, r.qp->qp_num,
			  0x80000000u)); /* s's own qkey: QKEY */
	wc_of(s.cq, 12, IBV_WC_SUCCESS, &wc);
	wc_of(r.cq, 1, IBV_WC_SUCCESS, &wc);
	ASSERT_EQ(-1, sv_check(r.buf + GRH, 64, 2));
	wc_of(r.cq, 2, IBV_WC_SUCCESS, &wc);
	ASSERT_EQ(-1, sv_check(r.buf + 4096 + GRH, 64, 3));
	NO_WC(r.cq, 50);
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	ud_end_close(&r);
}

/* No receive posted: the datagram is gone, never completed later. */
SV_TEST(ud_no_recv_dropped)
{
	struct ud_end s, r;
	struct ibv_ah *ah;
	struct ibv_wc wc;

	ud_open(&s, 16, true);
	ud_open(&r, 16, true);
	ah = lid_ah(&s);
	sv_fill(s.buf, 64, 1);
	sv_fill(s.buf + 64, 64, 2);
	ASSERT_OK(send_ud(&s, 10, IBV_WR_SEND, 0, 64, ah, r.qp->qp_num, QKEY));
	wc_of(s.cq, 10, IBV_WC_SUCCESS, &wc);
	NO_WC(r.cq, 100); /* polling drives r: the datagram arrives */
	ASSERT_OK(post_recv(&r, 1, 0, 4096));
	NO_WC(r.cq, 50);
	ASSERT_OK(send_ud(&s, 11, IBV_WR_SEND, 64, 64, ah, r.qp->qp_num, QKEY));
	wc_of(s.cq, 11, IBV_WC_SUCCESS, &wc);
	wc_of(r.cq, 1, IBV_WC_SUCCESS, &wc);
	ASSERT_EQ(-1, sv_check(r.buf + GRH, 64, 2));
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	ud_end_close(&r);
}

/* A UD QP of the receiver's, on srq, ready. */
static struct ibv_qp *ud_on_srq(struct ud_end *r, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = r->cq,
		.recv_cq = r->cq,
		.srq = srq,
		.cap = {.max_send_wr = 4, .max_send_sge = 1},
		.qp_type = IBV_QPT_UD};
	struct ibv_qp *qp = ibv_create_qp(r->e.pd, &a);

	ASSERT_NOT_NULL(qp);
	ud_end_ready(qp, QKEY);
	return qp;
}

static void srq_recv(struct ud_end *r, struct ibv_srq *srq, uint64_t id,
		     size_t off)
{
	struct ibv_sge sg = {(uintptr_t)r->buf + off, 4096, r->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad;

	ASSERT_OK(ibv_post_srq_recv(srq, &wr, &bad));
}

/*
 * UD QPs on a shared receive queue (IBA 10.2.9; perftest -c UD
 * --use-srq, which failed with EOPNOTSUPP): two QPs take the SRQ's
 * receives in their order, each completion naming the QP that took it;
 * with the SRQ empty a datagram is dropped (UD has no RNR) and the next
 * receive posted takes the next one; the QPs have no receive queue of
 * their own; the SRQ's limit event fires; one QP to ERR leaves the
 * SRQ's receives to the other.
 */
SV_TEST(ud_qps_on_an_srq)
{
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	struct ibv_srq_attr lim = {.srq_limit = 2};
	struct ibv_recv_wr rwr = {0}, *rbad;
	struct ibv_async_event ev;
	struct ud_end s, r;
	struct ibv_qp *q[2];
	struct ibv_srq *srq;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct pollfd pf;

	ud_open(&s, 16, true);
	ud_open(&r, 16, true);
	srq = ibv_create_srq(r.e.pd, &sa);
	ASSERT_NOT_NULL(srq);
	q[0] = ud_on_srq(&r, srq);
	q[1] = ud_on_srq(&r, srq);
	ah = lid_ah(&s);
	ASSERT_EQ(EINVAL, ibv_post_recv(q[0], &rwr, &rbad));
	for (int i = 0; i < 3; i++)
		srq_recv(&r, srq, 1 + i, 4096 * (size_t)i);
	for (int i = 0; i < 3; i++) {
		sv_fill(s.buf + 4096 * (size_t)i, 100 + i, 20 + i);
		ASSERT_OK(send_ud(&s, 10 + i, IBV_WR_SEND, 4096 * (size_t)i,
				  100 + i, ah, q[i % 2]->qp_num, QKEY));
		wc_of(s.cq, 10 + i, IBV_WC_SUCCESS, &wc);
		wc_of(r.cq, 1 + i, IBV_WC_SUCCESS, &wc);
		ASSERT_EQ(IBV_WC_RECV, wc.opcode);
		ASSERT_EQ(q[i % 2]->qp_num, wc.qp_num);
		ASSERT_EQ(s.qp->qp_num, wc.src_qp);
		ASSERT_EQ(GRH + 100 + i, wc.byte_len);
		ASSERT_EQ(-1, sv_check(r.buf + 4096 * (size_t)i + GRH, 100 + i,
				       20 + i));
	}
	/* the SRQ is empty: dropped, never completed */
	ASSERT_OK(send_ud(&s, 20, IBV_WR_SEND, 0, 64, ah, q[1]->qp_num, QKEY));
	wc_of(s.cq, 20, IBV_WC_SUCCESS, &wc);
	NO_WC(r.cq, 100);
	/* three more, armed at 2: the second datagram takes it below */
	for (int i = 0; i < 3; i++)
		srq_recv(&r, srq, 4 + i, 4096 * (size_t)i);
	ASSERT_OK(ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT));
	for (int i = 0; i < 2; i++) {
		ASSERT_OK(send_ud(&s, 21 + i, IBV_WR_SEND, 0, 64, ah,
				  q[1]->qp_num, QKEY));
		wc_of(s.cq, 21 + i, IBV_WC_SUCCESS, &wc);
		wc_of(r.cq, 4 + i, IBV_WC_SUCCESS, &wc);
		ASSERT_EQ(q[1]->qp_num, wc.qp_num);
	}
	pf = (struct pollfd){.fd = r.e.ctx->async_fd, .events = POLLIN};
	ASSERT_EQ(1, poll(&pf, 1, SV_WC_TIMEOUT_MS));
	ASSERT_OK(ibv_get_async_event(r.e.ctx, &ev));
	ASSERT_EQ(IBV_EVENT_SRQ_LIMIT_REACHED, ev.event_type);
	ASSERT_TRUE(ev.element.srq == srq);
	ibv_ack_async_event(&ev);
	/* q[1] to ERR: the SRQ's last receive stays for q[0] (QP events
	 * of the error transition, if any, are left unread) */
	ASSERT_OK(ibv_modify_qp(q[1], &err, IBV_QP_STATE));
	ASSERT_OK(send_ud(&s, 23, IBV_WR_SEND, 0, 64, ah, q[0]->qp_num, QKEY));
	wc_of(s.cq, 23, IBV_WC_SUCCESS, &wc);
	wc_of(r.cq, 6, IBV_WC_SUCCESS, &wc);
	ASSERT_EQ(q[0]->qp_num, wc.qp_num);
	ASSERT_OK(ibv_destroy_ah(ah));
	ASSERT_OK(ibv_destroy_qp(q[0]));
	ASSERT_OK(ibv_destroy_qp(q[1]));
	ASSERT_OK(ibv_destroy_srq(srq));
	ud_end_close(&s);
	ud_end_close(&r);
}

/* Longer than the MTU fails at the sender (LOC_LEN_ERR, SQE; receives go
 * on; SQE -> RTS recovers); a receive shorter than GRH + payload
 * completes with LOC_LEN_ERR (rxe's class D for UD). */
SV_TEST(ud_too_long)
{
	struct ud_end s, r;
	struct ibv_ah *ah, *back;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS};
	struct ibv_wc wc;

	ud_open(&s, 16, true);
	ud_open(&r, 16, true);
	ah = lid_ah(&s);
	back = lid_ah(&r);
	ASSERT_OK(post_recv(&r, 1, 0, 8192));
	ASSERT_OK(post_recv(&s, 5, 0, 8192));
	ASSERT_OK(
		send_ud(&s, 10, IBV_WR_SEND, 0, 4097, ah, r.qp->qp_num, QKEY));
	wc_of(s.cq, 10, IBV_WC_LOC_LEN_ERR, &wc);
	ASSERT_EQ(IBV_QPS_SQE, state(s.qp));
	NO_WC(r.cq, 50);
	/* s still receives */
	ASSERT_OK(
		send_ud(&r, 20, IBV_WR_SEND, 0, 16, back, s.qp->qp_num, QKEY));
	wc_of(r.cq, 20, IBV_WC_SUCCESS, &wc);
	wc_of(s.cq, 5, IBV_WC_SUCCESS, &wc);
	ASSERT_OK(ibv_modify_qp(s.qp, &a, IBV_QP_STATE));
	ASSERT_OK(
		send_ud(&s, 11, IBV_WR_SEND, 0, 4096, ah, r.qp->qp_num, QKEY));
	wc_of(s.cq, 11, IBV_WC_SUCCESS, &wc);
	wc_of(r.cq, 1, IBV_WC_SUCCESS, &wc);
	ASSERT_EQ(GRH + 4096, wc.byte_len);
	/* a receive of 100 bytes for 64 of payload: 40 + 64 > 100 */
	ASSERT_OK(post_recv(&r, 2, 0, 100));
	ASSERT_OK(send_ud(&s, 12, IBV_WR_SEND, 0, 64, ah, r.qp->qp_num, QKEY));
	wc_of(s.cq, 12, IBV_WC_SUCCESS, &wc);
	wc_of(r.cq, 2, IBV_WC_LOC_LEN_ERR, &wc);
	ASSERT_EQ(IBV_QPS_RTS, state(r.qp));
	ASSERT_OK(ibv_destroy_ah(ah));
	ASSERT_OK(ibv_destroy_ah(back));
	ud_end_close(&s);
	ud_end_close(&r);
}

#define FAN_SENDERS 8
#define FAN_MSGS    64

/* 8 QPs send to one UD QP that did nothing but post receives: every
 * message arrives exactly once. */
SV_TEST(ud_fan_in_8_senders)
{
	struct ud_end s, r;
	struct ibv_qp *qp[FAN_SENDERS];
	uint8_t seen[FAN_SENDERS][FAN_MSGS] = {{0}};
	struct ibv_ah *ah;
	struct ibv_wc wc;
	uint32_t slots = FAN_SENDERS * FAN_MSGS;

	ud_open(&s, slots, false); /* CQ: every send completion */
	ud_open(&r, slots, true);
	ah = lid_ah(&s);
	for (int i = 0; i < FAN_SENDERS; i++) {
		qp[i] = i ? ud_end_qp(&s, IBV_QPT_UD, FAN_MSGS, 0) : s.qp;
		ud_end_ready(qp[i], QKEY);
	}
	for (uint32_t k = 0; k < slots; k++)
		ASSERT_OK(post_recv(&r, k, (size_t)k * 64, 64));
	for (int m = 0; m < FAN_MSGS; m++)
		for (int i = 0; i < FAN_SENDERS; i++) {
			uint8_t *p = s.buf + (size_t)(i * FAN_MSGS + m) * 8;

			p[0] = (uint8_t)i;
			p[1] = (uint8_t)m;
			ASSERT_OK(ud_end_send(&s, qp[i], (uint64_t)i << 32 | m,
					      IBV_WR_SEND, p - s.buf, 8, ah,
					      r.qp->qp_num, QKEY));
		}
	for (uint32_t k = 0; k < slots; k++) {
		WAIT_WC(s.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	}
	for (uint32_t k = 0; k < slots; k++) {
		const uint8_t *p;
		int i;

		WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(GRH + 8, wc.byte_len);
		p = r.buf + wc.wr_id * 64 + GRH;
		ASSERT_TRUE(p[0] < FAN_SENDERS && p[1] < FAN_MSGS);
		i = p[0];
		ASSERT_EQ(qp[i]->qp_num, wc.src_qp);
		ASSERT_EQ(0, seen[i][p[1]]);
		seen[i][p[1]] = 1;
	}
	NO_WC(r.cq, 50);
	for (int i = 1; i < FAN_SENDERS; i++)
		ASSERT_OK(ibv_destroy_qp(qp[i]));
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	ud_end_close(&r);
}

/* The server's way back: an AH made from the request's completion (and
 * its GRH when there is one), to wc.src_qp. */
SV_TEST(ud_reply_from_wc)
{
	struct ud_end s, r;
	struct ibv_ah *ah[2], *back;
	union ibv_gid gid;
	struct ibv_ah_attr aa;
	struct ibv_wc wc;

	ud_open(&s, 16, true);
	ud_open(&r, 16, true);
	ah[0] = lid_ah(&s);
	ah[1] = gid_ah(&s, &gid);
	for (int g = 0; g < 2; g++) {
		ASSERT_OK(post_recv(&r, 1, 0, 4096));
		ASSERT_OK(post_recv(&s, 2, 0, 4096));
		sv_fill(s.buf + 8192, 32, 5);
		ASSERT_OK(send_ud(&s, 3, IBV_WR_SEND, 8192, 32, ah[g],
				  r.qp->qp_num, QKEY));
		wc_of(s.cq, 3, IBV_WC_SUCCESS, &wc);
		wc_of(r.cq, 1, IBV_WC_SUCCESS, &wc);
		ASSERT_EQ(g, !!(wc.wc_flags & IBV_WC_GRH));
		ASSERT_OK(ibv_init_ah_from_wc(r.e.ctx, 1, &wc,
					      (struct ibv_grh *)r.buf, &aa));
		ASSERT_EQ(s.e.lid, aa.dlid);
		ASSERT_EQ(g, aa.is_global);
		if (g)
			ASSERT_OK(memcmp(&gid, &aa.grh.dgid, 16));
		back = ibv_create_ah_from_wc(r.e.pd, &wc,
					     (struct ibv_grh *)r.buf, 1);
		ASSERT_NOT_NULL(back);
		sv_fill(r.buf + 8192, 32, 6);
		ASSERT_OK(send_ud(&r, 4, IBV_WR_SEND, 8192, 32, back, wc.src_qp,
				  QKEY));
		wc_of(r.cq, 4, IBV_WC_SUCCESS, &wc);
		wc_of(s.cq, 2, IBV_WC_SUCCESS, &wc);
		ASSERT_EQ(r.qp->qp_num, wc.src_qp);
		ASSERT_EQ(g, !!(wc.wc_flags & IBV_WC_GRH));
		ASSERT_EQ(-1, sv_check(s.buf + GRH, 32, 6));
		ASSERT_OK(ibv_destroy_ah(back));
	}
	ASSERT_OK(ibv_destroy_ah(ah[0]));
	ASSERT_OK(ibv_destroy_ah(ah[1]));
	ud_end_close(&s);
	ud_end_close(&r);
}

/* What arrives on a UD QP's socket is validated: a bad magic, version,
 * flag, length, destination QP or qkey is dropped; a well-formed datagram
 * from a socket that is no QP of ours is taken, as a wire would. */
SV_TEST(ud_hostile_datagrams_dropped)
{
	struct ud_end r;
	struct sockaddr_un a;
	socklen_t alen;
	struct {
		struct sv_ud_hdr h;
		uint8_t data[64];
	} d, bad;
	struct ibv_wc wc;
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

	ASSERT_GE(fd, 0);
	ud_open(&r, 16, true);
	ASSERT_OK(post_recv(&r, 1, 0, 4096));
	alen = sv_link_qp_addr(&a, r.qp->qp_num);
	memset(&d, 0, sizeof(d));
	d.h = (struct sv_ud_hdr){.magic = SV_UD_MAGIC,
				 .version = SV_UD_VERSION,
				 .src_qpn = 0x123,
				 .dst_qpn = r.qp->qp_num,
				 .qkey = QKEY,
				 .len = 64};
	memset(d.data, 0x5a, sizeof(d.data));
	for (int i = 0; i < 7; i++) {
		size_t n = sizeof(d);

		bad = d;
		switch (i) {
		case 0:
			bad.h.magic ^= 1;
			break;
		case 1:
			bad.h.version++;
			break;
		case 2:
			bad.h.flags = 0x80;
			break;
		case 3:
			bad.h.len = 65;
			break;
		case 4:
			bad.h.dst_qpn ^= 1;
			break;
		case 5:
			bad.h.qkey ^= 1;
			break;
		case 6:
			n = sizeof(bad.h) - 1;
			break;
		}
		ASSERT_EQ((ssize_t)n,
			  sendto(fd, &bad, n, 0, (struct sockaddr *)&a, alen));
	}
	NO_WC(r.cq, 50);
	ASSERT_EQ((ssize_t)sizeof(d),
		  sendto(fd, &d, sizeof(d), 0, (struct sockaddr *)&a, alen));
	wc_of(r.cq, 1, IBV_WC_SUCCESS, &wc);
	ASSERT_EQ(0x123, wc.src_qp);
	ASSERT_EQ(GRH + 64, wc.byte_len);
	ASSERT_EQ(0x5a, r.buf[GRH + 63]);
	close(fd);
	ud_end_close(&r);
}

#define PROC_MSGS 32

/* One sender process: PROC_MSGS datagrams {index, seq} to QPN argv[0]. */
SV_HELPER(ud_sender)
{
	struct ud_end s;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	uint32_t qpn = (uint32_t)strtoul(argv[0], NULL, 16);
	int idx = atoi(argv[1]);

	(void)argc;
	ud_open(&s, PROC_MSGS, true);
	ah = lid_ah(&s);
	for (int m = 0; m < PROC_MSGS; m++) {
		s.buf[m * 8] = (uint8_t)idx;
		s.buf[m * 8 + 1] = (uint8_t)m;
		ASSERT_OK(send_ud(&s, (uint64_t)m, IBV_WR_SEND, (size_t)m * 8,
				  8, ah, qpn, QKEY));
	}
	for (int m = 0; m < PROC_MSGS; m++) {
		WAIT_WC(s.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	}
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	return 0;
}

/* 8 processes, none set up by the receiver, reach one UD QP: every
 * message arrives once, from 8 distinct source QPs. */
SV_TEST(ud_fan_in_8_processes)
{
	struct ud_end r;
	struct sv_proc p[FAN_SENDERS];
	uint8_t seen[FAN_SENDERS][PROC_MSGS] = {{0}};
	uint32_t src[FAN_SENDERS] = {0};
	uint32_t slots = FAN_SENDERS * PROC_MSGS;
	char qpn[16], idx[FAN_SENDERS][8], port[16];
	struct ibv_wc wc;

	/* over TCP, a UDP port of its own (the helpers inherit it): every
	 * process of the user with a UD QP listens on the default one, and
	 * another test's process that is killed meanwhile loses the share
	 * the kernel gave its listener, as on a wire (docs/tcp.md) */
	snprintf(port, sizeof(port), "%d", sv_free_port());
	ASSERT_OK(setenv("SOFTVERBS_TCP_PORT", port, 1));
	ud_open(&r, slots, true);
	for (uint32_t k = 0; k < slots; k++)
		ASSERT_OK(post_recv(&r, k, (size_t)k * 64, 64));
	snprintf(qpn, sizeof(qpn), "%x", r.qp->qp_num);
	for (int i = 0; i < FAN_SENDERS; i++) {
		snprintf(idx[i], sizeof(idx[i]), "%d", i);
		sv_proc_start_helper(&p[i], "ud_sender",
				     (char *const[]){qpn, idx[i], NULL}, NULL);
	}
	for (uint32_t k = 0; k < slots; k++) {
		const uint8_t *b;

		WAIT_WC(r.cq, &wc, 20000);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		b = r.buf + wc.wr_id * 64 + GRH;
		ASSERT_TRUE(b[0] < FAN_SENDERS && b[1] < PROC_MSGS);
		ASSERT_EQ(0, seen[b[0]][b[1]]);
		seen[b[0]][b[1]] = 1;
		if (!src[b[0]])
			src[b[0]] = wc.src_qp;
		ASSERT_EQ(src[b[0]], wc.src_qp);
	}
	for (int i = 0; i < FAN_SENDERS; i++) {
		sv_proc_wait(&p[i], 20000);
		ASSERT_EQ(0, p[i].status);
		sv_proc_free(&p[i]);
		for (int j = 0; j < i; j++)
			ASSERT_NE(src[i], src[j]);
	}
	NO_WC(r.cq, 50);
	ud_end_close(&r);
}

#define HELD_MSGS 32

/* Reads a QPN in hex (or any byte: 0) from fd, within 20 s. */
static uint32_t read_qpn(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char line[16] = {0};

	ASSERT_EQ(1, poll(&p, 1, 20000));
	ASSERT_TRUE(read(fd, line, sizeof(line) - 1) > 0);
	return (uint32_t)strtoul(line, NULL, 16);
}

/* A receiver: HELD_MSGS receives posted, its QPN written to fd argv[0];
 * exit 0 once each of HELD_MSGS datagrams arrived, once. */
SV_HELPER(ud_starved_receiver)
{
	uint8_t seen[HELD_MSGS] = {0};
	struct ud_end r;
	struct ibv_wc wc;
	char qpn[16];
	int fd = atoi(argv[0]);

	(void)argc;
	ud_open(&r, HELD_MSGS, true);
	for (uint32_t k = 0; k < HELD_MSGS; k++)
		ASSERT_OK(post_recv(&r, k, (size_t)k * 64, 64));
	snprintf(qpn, sizeof(qpn), "%x\n", r.qp->qp_num);
	ASSERT_EQ((ssize_t)strlen(qpn), write(fd, qpn, strlen(qpn)));
	for (int k = 0; k < HELD_MSGS; k++) {
		const uint8_t *b;

		WAIT_WC(r.cq, &wc, 10000);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		b = r.buf + wc.wr_id * 64 + GRH;
		ASSERT_TRUE(b[0] < HELD_MSGS);
		ASSERT_EQ(0, seen[b[0]]);
		seen[b[0]] = 1;
	}
	ud_end_close(&r);
	return 0;
}

/* A sender: HELD_MSGS datagrams to QPN argv[0]; when all completed, a
 * byte to fd argv[1]; exit once a byte comes on fd argv[2] (its UDP
 * listener is the one that holds what the receiver cannot take yet). */
SV_HELPER(ud_held_sender)
{
	uint32_t qpn = (uint32_t)strtoul(argv[0], NULL, 16);
	int sent = atoi(argv[1]), go = atoi(argv[2]);
	struct ud_end s;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	char b = 1;

	(void)argc;
	ud_open(&s, HELD_MSGS, true);
	ah = lid_ah(&s);
	for (int m = 0; m < HELD_MSGS; m++) {
		s.buf[m * 8] = (uint8_t)m;
		ASSERT_OK(send_ud(&s, (uint64_t)m, IBV_WR_SEND, (size_t)m * 8,
				  8, ah, qpn, QKEY));
	}
	for (int m = 0; m < HELD_MSGS; m++) {
		WAIT_WC(s.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	}
	ASSERT_EQ(1, write(sent, &b, 1));
	ASSERT_EQ(1, read(go, &b, 1));
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	return 0;
}

/*
 * A receiver with a receive posted for every datagram is not scheduled
 * for a second, while its socket is full (10 datagrams: the kernel's
 * max_dgram_qlen).  An HCA would have placed them all: each must arrive
 * once the receiver runs.  The stop stands for a starved process
 * (ud_fan_in_8_processes beside two busy loops: a receiver starved
 * 213 ms); a wait that gave up after 200 ms lost about five here.  Both
 * ends are helpers, started with `transport` (SOFTVERBS_TRANSPORT) and
 * UD lanes off, so a full socket is what they meet; over TCP each has
 * its own port, so the sender's UDP listener is the one that holds.
 */
static void starved_receiver(const char *transport)
{
	int p1 = sv_free_port(), p2 = sv_free_port();
	int qfd[2], sfd[2], gfd[2];
	char t[40], e1[40], e2[40], a[3][12], qpn[16];
	struct sv_proc r, s;
	char b = 1;

	while (p2 == p1)
		p2 = sv_free_port();
	ASSERT_OK(pipe(qfd));
	ASSERT_OK(pipe(sfd));
	ASSERT_OK(pipe(gfd));
	snprintf(t, sizeof(t), "SOFTVERBS_TRANSPORT=%s", transport);
	snprintf(e1, sizeof(e1), "SOFTVERBS_TCP_PORT=%d", p1);
	snprintf(e2, sizeof(e2), "SOFTVERBS_TCP_PORT=%d", p2);
	snprintf(a[0], sizeof(a[0]), "%d", qfd[1]);
	sv_proc_start_helper(
		&r, "ud_starved_receiver", (char *const[]){a[0], NULL},
		(char *const[]){t, e2, "SOFTVERBS_UD_LANES=0", NULL});
	snprintf(qpn, sizeof(qpn), "%x", read_qpn(qfd[0]));
	ASSERT_OK(kill(r.pid, SIGSTOP));
	snprintf(a[1], sizeof(a[1]), "%d", sfd[1]);
	snprintf(a[2], sizeof(a[2]), "%d", gfd[0]);
	sv_proc_start_helper(
		&s, "ud_held_sender", (char *const[]){qpn, a[1], a[2], NULL},
		(char *const[]){t, e1, "SOFTVERBS_UD_LANES=0", NULL});
	if (!strcmp(transport, "tcp"))
		read_qpn(sfd[0]); /* all sent */
	/* the starvation itself: a second without the CPU */
	usleep(1000 * 1000);
	ASSERT_OK(kill(r.pid, SIGCONT));
	sv_proc_wait(&r, 30000);
	if (r.status)
		printf("receiver said: %s\n", r.err ? r.err : "");
	ASSERT_EQ(0, r.status);
	if (strcmp(transport, "tcp"))
		read_qpn(sfd[0]); /* all sent */
	ASSERT_EQ(1, write(gfd[1], &b, 1));
	sv_proc_wait(&s, 30000);
	ASSERT_EQ(0, s.status);
	sv_proc_free(&r);
	sv_proc_free(&s);
	for (int i = 0; i < 2; i++) {
		close(qfd[i]);
		close(sfd[i]);
		close(gfd[i]);
	}
}

/* Over UDP: the sender's UDP listener holds what the receiver's socket
 * cannot take yet. */
SV_TEST(ud_listener_holds_for_a_starved_receiver)
{
	starved_receiver("tcp");
}

/* On this host's sockets: the sender's send waits for room. */
SV_TEST(ud_sender_waits_for_a_starved_receiver)
{
	starved_receiver("shm");
}

/* A receiver that stays stopped costs its sender one wait
 * (SV_UD_HOLD_NS, 2 s), not one per datagram: after the first is lost,
 * the rest to it are lost at once while its queue stays full
 * (qp->ud.stalled).  Waiting each time, the sender's 22 that find no
 * room would take 44 s. */
SV_TEST(ud_stopped_receiver_costs_one_wait)
{
	char *const env[] = {"SOFTVERBS_TRANSPORT=shm", "SOFTVERBS_UD_LANES=0",
			     NULL};
	int qfd[2], sfd[2], gfd[2];
	char a[3][12], qpn[16], b = 1;
	struct pollfd p = {.events = POLLIN};
	struct sv_proc r, s;
	uint64_t t0;

	ASSERT_OK(pipe(qfd));
	ASSERT_OK(pipe(sfd));
	ASSERT_OK(pipe(gfd));
	snprintf(a[0], sizeof(a[0]), "%d", qfd[1]);
	sv_proc_start_helper(&r, "ud_starved_receiver",
			     (char *const[]){a[0], NULL}, env);
	snprintf(qpn, sizeof(qpn), "%x", read_qpn(qfd[0]));
	ASSERT_OK(kill(r.pid, SIGSTOP));
	snprintf(a[1], sizeof(a[1]), "%d", sfd[1]);
	snprintf(a[2], sizeof(a[2]), "%d", gfd[0]);
	t0 = sv_now_ms();
	sv_proc_start_helper(&s, "ud_held_sender",
			     (char *const[]){qpn, a[1], a[2], NULL}, env);
	p.fd = sfd[0];
	ASSERT_EQ(1, poll(&p, 1, 15000)); /* all sent (or lost) */
	printf("32 sends to a stopped receiver: %llu ms\n",
	       (unsigned long long)(sv_now_ms() - t0));
	sv_proc_kill(&r);
	ASSERT_EQ(1, read(sfd[0], &b, 1));
	ASSERT_EQ(1, write(gfd[1], &b, 1));
	sv_proc_wait(&s, 30000);
	ASSERT_EQ(0, s.status);
	sv_proc_free(&r);
	sv_proc_free(&s);
	for (int i = 0; i < 2; i++) {
		close(qfd[i]);
		close(sfd[i]);
		close(gfd[i]);
	}
}

/* The extended post API on UD: ibv_wr_send + ibv_wr_set_ud_addr; a WR
 * with no address fails the batch; RDMA ops are refused at create. */
SV_TEST(ud_wr_api_set_ud_addr)
{
	struct ud_end s, r;
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_UD,
		.cap = {.max_send_wr = 16,
			.max_recv_wr = 16,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.comp_mask =
			IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags =
			IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
	};
	struct ibv_qp *qp;
	struct ibv_qp_ex *qx;
	struct ibv_ah *ah;
	struct ibv_wc wc;

	ud_open(&s, 16, false);
	ud_open(&r, 16, true);
	ia.pd = s.e.pd;
	ia.send_cq = ia.recv_cq = s.cq;
	ia.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE;
	errno = 0;
	ASSERT_NULL(ibv_create_qp_ex(s.e.ctx, &ia));
	ASSERT_EQ(EOPNOTSUPP, errno);
	ia.send_ops_flags &= ~(uint64_t)IBV_QP_EX_WITH_RDMA_WRITE;
	qp = ibv_create_qp_ex(s.e.ctx, &ia);
	ASSERT_NOT_NULL(qp);
	ud_end_ready(qp, QKEY);
	qx = ibv_qp_to_qp_ex(qp);
	ah = lid_ah(&s);
	sv_fill(s.buf, 100, 4);
	ASSERT_OK(post_recv(&r, 1, 0, 4096));

	ibv_wr_start(qx);
	qx->wr_id = 7;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, s.mr->lkey, (uintptr_t)s.buf, 100);
	ASSERT_EQ(EINVAL, ibv_wr_complete(qx)); /* no address */

	ibv_wr_start(qx);
	qx->wr_id = 8;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(qx, htonl(77));
	ibv_wr_set_ud_addr(qx, ah, r.qp->qp_num, QKEY);
	ibv_wr_set_sge(qx, s.mr->lkey, (uintptr_t)s.buf, 100);
	ASSERT_OK(ibv_wr_complete(qx));
	wc_of(s.cq, 8, IBV_WC_SUCCESS, &wc);
	wc_of(r.cq, 1, IBV_WC_SUCCESS, &wc);
	ASSERT_EQ(GRH + 100, wc.byte_len);
	ASSERT_EQ(qp->qp_num, wc.src_qp);
	ASSERT_EQ(77, ntohl(wc.imm_data));
	ASSERT_EQ(-1, sv_check(r.buf + GRH, 100, 4));
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	ud_end_close(&r);
}

/* CRC-32C (Castagnoli, reflected 0x82f63b78), bit by bit: the test's own,
 * to seal datagrams as the provider's table-driven one must. */
static uint32_t test_crc32c(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t c = 0xffffffffu;

	while (n--) {
		c ^= *b++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
	}
	return ~c;
}

/* The header of a datagram from QP 0x123 of another host to QP qpn, with
 * immediate imm and len bytes, as our sender makes it (unsealed). */
static struct sv_ud_hdr net_hdr(uint32_t qpn, uint32_t imm, uint32_t len)
{
	return (struct sv_ud_hdr){.magic = SV_UD_MAGIC,
				  .version = SV_UD_VERSION,
				  .flags = SV_UD_IMM,
				  .src_qpn = 0x123,
				  .dst_qpn = qpn,
				  .qkey = QKEY,
				  .imm = htonl(imm),
				  .len = len};
}

/* Between hosts a datagram goes over UDP to the well-known port, where any
 * process's listener checks it and passes it on by QPN.  Bytes that are
 * not a sealed datagram for a QP are dropped there, and the QP gets only
 * what a sender could have sent: here garbage, a short header, a bad
 * magic, a payload length that lies, a multicast QPN, a bad CRC, an
 * oversized datagram, then a well-made one with a wrong qkey (the QP
 * drops it), a well-made one (taken, with its immediate), and a real send
 * over UDP (SOFTVERBS_TRANSPORT=tcp): exactly two receives complete. */
SV_TEST(ud_udp_listener_checks_every_datagram)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct {
		struct sv_ud_hdr h;
		uint8_t data[SV_UD_MTU + 64];
	} d;
	struct ud_end s, r;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	int port = sv_free_port(), fd, got[2] = {0, 0};
	char v[16];

	/* a port of our own (no other test's listener takes a share), and
	 * every send over UDP: before the first verbs call */
	snprintf(v, sizeof(v), "%d", port);
	setenv("SOFTVERBS_TCP_PORT", v, 1);
	setenv("SOFTVERBS_TRANSPORT", "tcp", 1);
	to.sin_port = htons((uint16_t)port);
	ud_open(&s, 16, true);
	ud_open(&r, 16, true);
	for (uint32_t k = 0; k < 8; k++)
		ASSERT_OK(post_recv(&r, k, (size_t)k * 8192, 8192));
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	ASSERT_TRUE(fd >= 0);

#define SEND_RAW(len)                                      \
	ASSERT_EQ((ssize_t)(len), sendto(fd, &d, (len), 0, \
					 (struct sockaddr *)&to, sizeof(to)))
#define SEAL(len)                                  \
	do {                                       \
		d.h.rsvd = 0;                      \
		d.h.rsvd = test_crc32c(&d, (len)); \
	} while (0)
	memset(&d, 0, sizeof(d));
	memcpy(&d, "garbage", 7);
	SEND_RAW(7);
	/* a well-made datagram, then each thing wrong with it */
	d.h = net_hdr(r.qp->qp_num, 0x5eed, 100);
	memset(d.data, 0xab, 100);
	SEAL(sizeof(d.h) + 100);
	SEND_RAW(sizeof(d.h) - 1); /* short */
	d.h.magic ^= 1;
	SEAL(sizeof(d.h) + 100);
	SEND_RAW(sizeof(d.h) + 100); /* bad magic, sealed */
	d.h.magic ^= 1;
	d.h.len = 99;
	SEAL(sizeof(d.h) + 100);
	SEND_RAW(sizeof(d.h) + 100); /* its length lies */
	d.h.len = 100;
	d.h.dst_qpn = 0xffffff;
	SEAL(sizeof(d.h) + 100);
	SEND_RAW(sizeof(d.h) + 100); /* multicast from the network */
	d.h.dst_qpn = r.qp->qp_num;
	SEAL(sizeof(d.h) + 100);
	d.h.rsvd ^= 0x10000;
	SEND_RAW(sizeof(d.h) + 100); /* bad CRC */
	d.h.len = SV_UD_MTU + 64;
	SEAL(sizeof(d));
	SEND_RAW(sizeof(d)); /* longer than the MTU, sealed */
	d.h.len = 100;
	d.h.qkey = QKEY + 1;
	SEAL(sizeof(d.h) + 100);
	SEND_RAW(sizeof(d.h) + 100); /* wrong qkey: the QP drops it */
	d.h.qkey = QKEY;
	SEAL(sizeof(d.h) + 100);
	SEND_RAW(sizeof(d.h) + 100); /* good */
#undef SEND_RAW
#undef SEAL
	close(fd);
	/* and a send of softverbs' own, over UDP */
	ah = lid_ah(&s);
	memset(s.buf, 0xcd, 200);
	ASSERT_OK(ud_end_send(&s, s.qp, 9, IBV_WR_SEND, 0, 200, ah,
			      r.qp->qp_num, QKEY));
	WAIT_WC(s.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	for (int i = 0; i < 2; i++) {
		WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		if (wc.src_qp == 0x123) {
			ASSERT_EQ(GRH + 100, wc.byte_len);
			ASSERT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
			ASSERT_EQ(htonl(0x5eed), wc.imm_data);
			ASSERT_EQ(0xab, r.buf[wc.wr_id * 8192 + GRH + 99]);
			got[0]++;
		} else {
			ASSERT_EQ(s.qp->qp_num, wc.src_qp);
			ASSERT_EQ(GRH + 200, wc.byte_len);
			ASSERT_EQ(0xcd, r.buf[wc.wr_id * 8192 + GRH + 199]);
			got[1]++;
		}
	}
	ASSERT_EQ(1, got[0]);
	ASSERT_EQ(1, got[1]);
	NO_WC(r.cq, 100);
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	ud_end_close(&r);
}

/*
 * A burst from another host fills the QP's socket, which queues
 * max_dgram_qlen datagrams, and the listener holds the next.  It was
 * retried each millisecond only: ten datagrams a millisecond went on
 * while the UDP socket's buffer overflowed behind them, and ib_send_bw -c
 * UD between two hosts lost a quarter of its sends and waited for ever
 * (tests/netns/netns.sh ib_send_bw_ud fails without the fix).  Now
 * polls take on what comes while datagrams come (ud/door.c
 * sv_ud_door_poll): one empties the socket, the next passes on what is
 * held.  Here: a burst of four sockets' worth at once, then every
 * datagram comes, each once, as sent.
 */
SV_TEST(ud_udp_burst_goes_on_whole)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct {
		struct sv_ud_hdr h;
		uint8_t data[100];
	} d;
	static struct ibv_wc wc[256];
	const struct sv_qp_stats *st;
	struct sv_context *sc;
	int port = sv_free_port(), qlen = sv_unix_dgram_qlen(), n, fd, got = 0;
	bool seen[256] = {false};
	uint64_t end;
	struct ud_end r;
	char v[16];

	if (4 * qlen > 256) {
		printf("SKIP: max_dgram_qlen %d: a burst of 4 times it does "
		       "not fit this test\n",
		       qlen);
		exit(77);
	}
	n = 4 * qlen;
	snprintf(v, sizeof(v), "%d", port);
	setenv("SOFTVERBS_TCP_PORT", v, 1);
	setenv("SOFTVERBS_TRANSPORT", "tcp", 1);
	to.sin_port = htons((uint16_t)port);
	ud_open(&r, 256, true);
	sc = to_sctx(r.e.ctx);
	for (int k = 0; k < n; k++)
		ASSERT_OK(post_recv(&r, (uint64_t)k, (size_t)k * 256, 256));
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	ASSERT_TRUE(fd >= 0);
	for (int k = 0; k < n; k++) {
		d.h = net_hdr(r.qp->qp_num, (uint32_t)k, sizeof(d.data));
		memset(d.data, k, sizeof(d.data));
		d.h.rsvd = 0;
		d.h.rsvd = test_crc32c(&d, sizeof(d));
		ASSERT_EQ((ssize_t)sizeof(d),
			  sendto(fd, &d, sizeof(d), 0, (struct sockaddr *)&to,
				 sizeof(to)));
	}
	close(fd);
	st = __atomic_load_n(&sc->udoor_stats, __ATOMIC_ACQUIRE);
	ASSERT_NOT_NULL(st);
	end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	/* every one, each once, as sent */
	while (got < n && sv_now_ms() < end) {
		int k = ibv_poll_cq(r.cq, n - got, wc + got);

		ASSERT_TRUE(k >= 0);
		got += k;
	}
	ASSERT_EQ(n, got);
	/* said, not asserted: whether our polls or the thread's run of
	 * the QP read first, and so how often the listener held, is the
	 * scheduler's */
	printf("holds %llu\n", (unsigned long long)__atomic_load_n(
				       &st->ud_door_holds, __ATOMIC_RELAXED));
	for (int i = 0; i < n; i++) {
		uint32_t k = ntohl(wc[i].imm_data);

		ASSERT_EQ(IBV_WC_SUCCESS, wc[i].status);
		ASSERT_TRUE(k < (uint32_t)n && !seen[k]);
		seen[k] = true;
		ASSERT_EQ(GRH + sizeof(d.data), wc[i].byte_len);
		ASSERT_EQ((uint8_t)k, r.buf[wc[i].wr_id * 256 + GRH + 99]);
	}
	NO_WC(r.cq, 100);
	/* 100 ms of polls after the last datagram: the listener is quiet
	 * again, and polls read no clock for it (door.c sv_ud_door_poll) */
	ASSERT_EQ(0, atomic_load(&sc->udoor_busy_ns));
	ud_end_close(&r);
}
