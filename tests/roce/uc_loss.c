// SPDX-License-Identifier: MIT
/*
 * uc_loss: UC over a lossy RoCEv2 link (issue 26 item 2, IBA 9.8.3).  A
 * sender posts N sends of S bytes (several packets each) on a UC QP; the
 * receiver's side loses datagrams (SOFTVERBS_FAULTS drop on a UC RoCE
 * link drops them on arrival, a true PSN gap).  A message that lost a
 * packet is lost whole and the next FIRST or ONLY starts afresh: every
 * receive that completes holds exactly one message, whole and in order,
 * and messages keep arriving after the losses.
 *   uc_loss send|recv DIR GID_INDEX PEER_IPV4 N S
 * The two exchange QPNs through files in DIR (the namespaces share the
 * file system).  Exit 0 and "received R of N" when all holds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "exchange.h"

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "uc_loss: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* The number in DIR/NAME, waiting for it (20 s at most). */
static unsigned need(const char *dir, const char *name)
{
	long v = sv_x_get(dir, name, 20);

	if (v < 0) {
		fprintf(stderr, "uc_loss: no %s/%s\n", dir, name);
		exit(1);
	}
	return (unsigned)v;
}

static uint8_t pattern(uint32_t msg, uint32_t j)
{
	return (uint8_t)(msg * 131 + j * 7 + (j >> 8));
}

static void connect_qp(struct ibv_qp *qp, int gid, const char *peer,
		       unsigned peer_qpn)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer_qpn;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
	if (inet_pton(AF_INET, peer, &a.ah_attr.grh.dgid.raw[12]) != 1) {
		fprintf(stderr, "uc_loss: bad address %s\n", peer);
		exit(2);
	}
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		die("RTR");
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("RTS");
}

static int run_send(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
		    uint8_t *buf, uint32_t n, uint32_t s)
{
	for (uint32_t i = 0; i < n; i++) {
		struct ibv_sge sge = {(uintptr_t)buf, s, mr->lkey};
		struct ibv_send_wr wr = {.wr_id = i,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		struct ibv_wc wc;
		double end = sv_x_now() + 10;
		int got;

		memcpy(buf, &i, 4);
		for (uint32_t j = 4; j < s; j++)
			buf[j] = pattern(i, j);
		if (ibv_post_send(qp, &wr, &bad))
			die("post_send");
		while ((got = ibv_poll_cq(cq, 1, &wc)) == 0 && sv_x_now() < end)
			;
		if (got != 1 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "uc_loss: send %u: %s\n", i,
				got == 1 ? ibv_wc_status_str(wc.status)
					 : "no completion");
			return 1;
		}
	}
	printf("sent %u\n", n);
	return 0;
}

/* Each completed receive k holds one whole message, later than the one
 * before; the sender's "done" and 2 s of quiet end it. */
static int run_recv(const char *dir, struct ibv_cq *cq, uint8_t *buf,
		    uint32_t n, uint32_t s)
{
	uint32_t got = 0, last = 0;
	double quiet = 0;
	char p[512];

	snprintf(p, sizeof(p), "%s/done", dir);
	for (;;) {
		struct ibv_wc wc;
		int r = ibv_poll_cq(cq, 1, &wc);
		const uint8_t *m = buf + (size_t)got * s;
		uint32_t idx;

		if (r < 0)
			die("poll_cq");
		if (r == 0) {
			if (!quiet && !access(p, F_OK))
				quiet = sv_x_now() + 2;
			if (quiet && sv_x_now() > quiet)
				break;
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != got ||
		    wc.byte_len != s) {
			fprintf(stderr,
				"uc_loss: receive %u: %s, wr %llu, %u bytes\n",
				got, ibv_wc_status_str(wc.status),
				(unsigned long long)wc.wr_id, wc.byte_len);
			return 1;
		}
		memcpy(&idx, m, 4);
		if (idx >= n || (got && idx <= last)) {
			fprintf(stderr,
				"uc_loss: receive %u holds message %u after "
				"%u\n",
				got, idx, last);
			return 1;
		}
		for (uint32_t j = 4; j < s; j++)
			if (m[j] != pattern(idx, j)) {
				fprintf(stderr,
					"uc_loss: message %u byte %u bad\n",
					idx, j);
				return 1;
			}
		last = idx;
		got++;
	}
	printf("received %u of %u, the last message %u\n", got, n, last);
	/* lost ones there were (the fault), and the link went on after */
	if (got == n || got < n / 2 || last < n - n / 8) {
		fprintf(stderr, "uc_loss: expected losses and recovery\n");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **l;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	bool send;
	uint32_t n, s;
	int gid;

	if (argc != 7 || (strcmp(argv[1], "send") && strcmp(argv[1], "recv"))) {
		fprintf(stderr,
			"usage: uc_loss send|recv DIR GID_INDEX PEER N S\n");
		return 2;
	}
	send = !strcmp(argv[1], "send");
	gid = atoi(argv[3]);
	n = (uint32_t)atoi(argv[5]);
	s = (uint32_t)atoi(argv[6]);
	if (n < 8 || n > 4096 || s < 8 || s > 65536)
		return 2;
	l = ibv_get_device_list(NULL);
	if (!l || !l[0] || !(ctx = ibv_open_device(l[0])))
		die("open device");
	buf = calloc(n, s);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, (int)n + 1, NULL, NULL, 0);
	mr = buf && pd ? ibv_reg_mr(pd, buf, (size_t)n * s,
				    IBV_ACCESS_LOCAL_WRITE)
		       : NULL;
	if (!cq || !mr)
		die("pd/cq/mr");
	struct ibv_qp_init_attr ia = {.send_cq = cq,
				      .recv_cq = cq,
				      .cap = {.max_send_wr = 4,
					      .max_recv_wr = n,
					      .max_send_sge = 1,
					      .max_recv_sge = 1},
				      .qp_type = IBV_QPT_UC};
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("create_qp");
	sv_x_put("uc_loss", argv[2], send ? "send.qpn" : "recv.qpn",
		 qp->qp_num);
	connect_qp(qp, gid, argv[4],
		   need(argv[2], send ? "recv.qpn" : "send.qpn"));
	if (send) {
		need(argv[2], "ready");
		int rc = run_send(qp, cq, mr, buf, n, s);

		sv_x_put("uc_loss", argv[2], "done", 1);
		return rc;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct ibv_sge sge = {(uintptr_t)(buf + (size_t)i * s), s,
				      mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = i,
					 .sg_list = &sge,
					 .num_sge = 1},
				   *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			die("post_recv");
	}
	sv_x_put("uc_loss", argv[2], "ready", 1);
	return run_recv(argv[2], cq, buf, n, s);
}
