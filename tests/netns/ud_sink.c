// SPDX-License-Identifier: MIT
/*
 * sv_ud_sink: the receiving end of netns_ud_secret.sh's forged, replayed
 * and changed datagrams (ud_forge.py sends them from another namespace):
 * a UD QP (Q_Key 0x11223344) that prints "qpn N pid P", then one line
 * "got PAYLOAD" per datagram it takes, until its stdin closes (the
 * script reads softverbs-stat first) or 60 s pass; then "received K".
 */
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QKEY  0x11223344u
#define GRH   40
#define MSG   256
#define SLOTS 64

static int die(const char *what)
{
	fprintf(stderr, "sv_ud_sink: %s\n", what);
	return 1;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static int post_recv(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *buf,
		     uint64_t slot)
{
	struct ibv_sge sg = {(uintptr_t)(buf + slot * (GRH + MSG)), GRH + MSG,
			     mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

int main(void)
{
	struct ibv_qp_init_attr ia = {.qp_type = IBV_QPT_UD,
				      .cap = {.max_send_wr = 1,
					      .max_recv_wr = SLOTS,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY};
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint64_t end = now_ms() + 60000;
	uint8_t *buf;
	int got = 0;

	if (!devs || !devs[0])
		return die("no device");
	ctx = ibv_open_device(devs[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = pd ? ibv_create_cq(ctx, SLOTS, NULL, NULL, 0) : NULL;
	buf = calloc(SLOTS, GRH + MSG);
	mr = cq && buf ? ibv_reg_mr(pd, buf, SLOTS * (GRH + MSG),
				    IBV_ACCESS_LOCAL_WRITE)
		       : NULL;
	if (!mr)
		return die("device, PD, CQ or MR");
	ia.send_cq = ia.recv_cq = cq;
	qp = ibv_create_qp(pd, &ia);
	if (!qp || ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					 IBV_QP_PORT | IBV_QP_QKEY))
		return die("UD QP");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return die("RTR");
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return die("RTS");
	for (int s = 0; s < SLOTS; s++)
		if (post_recv(qp, mr, buf, (uint64_t)s))
			return die("post_recv");
	printf("qpn %u pid %d\n", qp->qp_num, (int)getpid());
	fflush(stdout);
	while (now_ms() < end) {
		struct pollfd p = {.fd = 0, .events = POLLIN};
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);
		char line[MSG + 1];

		if (n < 0)
			return die("poll_cq");
		if (n == 0) {
			/* stdin closed: done (a 1 ms wait between polls) */
			if (poll(&p, 1, 1) == 1) {
				char c;

				if (read(0, &c, 1) <= 0)
					break;
			}
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS || wc.byte_len < GRH ||
		    wc.byte_len > GRH + MSG)
			return die("a receive completed in error");
		memcpy(line, buf + wc.wr_id * (GRH + MSG) + GRH,
		       wc.byte_len - GRH);
		line[wc.byte_len - GRH] = 0;
		printf("got %s\n", line);
		fflush(stdout);
		got++;
		if (post_recv(qp, mr, buf, wc.wr_id))
			return die("post_recv");
	}
	printf("received %d\n", got);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	free(buf);
	return 0;
}
