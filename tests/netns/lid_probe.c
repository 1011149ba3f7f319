// SPDX-License-Identifier: MIT
/*
 * sv_lid_probe: what a LID that names no reachable host does
 * (netns_lid.sh).  "rc DLID": an RC QP whose AV is that LID alone sends
 * 8 bytes; "ud DLID [QPN]": an AH of that LID, and a UD send through it
 * (to QPN, or to none).  It prints one line: "rc: modify EINVAL" or "rc:
 * status NAME after N ms", "ud: create_ah EINVAL" or "ud: status NAME
 * after N ms".  "serve": a UD QP that prints "qpn N", then takes one
 * datagram and prints "slid 0xL src_qp 0xQ".  Exit 0 when it printed an
 * outcome, 1 on a setup failure, 2 when no completion came within 60 s
 * (a hang).
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEADLINE_MS 60000
#define GRH	    40

static uint32_t ud_qpn = 0x123456;

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static int die(const char *what)
{
	fprintf(stderr, "sv_lid_probe: %s: %s\n", what, strerror(errno));
	return 1;
}

/* RESET -> INIT -> RTR (only a DLID) -> RTS: 0, or the errno of the
 * transition that failed ("modify" said). */
static int rc_connect(struct ibv_qp *qp, uint16_t dlid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	int err;

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0x123456;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = 1;
	err = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				    IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14; /* ibv_rc_pingpong's: 67 ms a try */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

static int ud_ready(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11};

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY))
		return errno;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return errno;
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* Posts one send (through ah for UD) and waits for its completion. */
static int send_one(const char *kind, struct ibv_qp *qp, struct ibv_cq *cq,
		    struct ibv_mr *mr, struct ibv_ah *ah)
{
	struct ibv_sge sg = {(uintptr_t)mr->addr, 8, mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	uint64_t t0 = now_ms();
	int n;

	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = ud_qpn;
		wr.wr.ud.remote_qkey = 0x11;
	}
	if (ibv_post_send(qp, &wr, &bad)) {
		errno = errno ? errno : EINVAL;
		return die("ibv_post_send");
	}
	while (!(n = ibv_poll_cq(cq, 1, &wc)) && now_ms() - t0 < DEADLINE_MS)
		;
	if (n < 0)
		return die("ibv_poll_cq");
	if (!n) {
		printf("%s: no completion in %d ms\n", kind, DEADLINE_MS);
		return 2;
	}
	printf("%s: status %s after %llu ms\n", kind,
	       ibv_wc_status_str(wc.status),
	       (unsigned long long)(now_ms() - t0));
	return 0;
}

/* "serve": one datagram, and who sent it (wc.slid, wc.src_qp). */
static int serve(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr)
{
	struct ibv_sge sg = {(uintptr_t)mr->addr, GRH + 8, mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sg, .num_sge = 1}, *bad;
	struct ibv_wc wc;
	uint64_t t0 = now_ms();
	int n;

	if (ibv_post_recv(qp, &wr, &bad))
		return die("ibv_post_recv");
	printf("qpn 0x%06x\n", qp->qp_num);
	fflush(stdout);
	while (!(n = ibv_poll_cq(cq, 1, &wc)) && now_ms() - t0 < DEADLINE_MS)
		;
	if (n <= 0 || wc.status != IBV_WC_SUCCESS) {
		printf("serve: no datagram\n");
		return 2;
	}
	printf("slid 0x%04x src_qp 0x%06x\n", wc.slid, wc.src_qp);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_qp_init_attr ia = {.cap = {.max_send_wr = 1,
					      .max_recv_wr = 1,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};
	struct ibv_ah_attr aa = {.port_num = 1};
	struct ibv_device **devs;
	struct ibv_context *ctx;
	static char buf[64];
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	bool rc;
	int err;

	if (argc == 2 && !strcmp(argv[1], "serve")) {
		rc = false;
	} else if (argc >= 3 && argc <= 4 &&
		   (!strcmp(argv[1], "rc") || !strcmp(argv[1], "ud"))) {
		rc = !strcmp(argv[1], "rc");
		aa.dlid = (uint16_t)strtoul(argv[2], NULL, 0);
		if (argc == 4)
			ud_qpn = (uint32_t)strtoul(argv[3], NULL, 0);
	} else {
		fprintf(stderr, "usage: sv_lid_probe rc DLID | ud DLID [QPN] "
				"| serve\n");
		return 1;
	}
	devs = ibv_get_device_list(NULL);
	if (!devs || !devs[0])
		return die("no device");
	ctx = ibv_open_device(devs[0]);
	if (!ctx)
		return die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	mr = cq ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE)
		: NULL;
	if (!mr)
		return die("pd, cq or mr");
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = rc ? IBV_QPT_RC : IBV_QPT_UD;
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		return die("ibv_create_qp");
	if (rc) {
		err = rc_connect(qp, aa.dlid);
		if (err) {
			printf("rc: modify %s\n",
			       err == EINVAL ? "EINVAL" : strerror(err));
			return 0;
		}
		return send_one("rc", qp, cq, mr, NULL);
	}
	err = ud_ready(qp);
	if (err) {
		errno = err;
		return die("UD QP to RTS");
	}
	if (argc == 2)
		return serve(qp, cq, mr);
	ah = ibv_create_ah(pd, &aa);
	if (!ah) {
		printf("ud: create_ah %s\n",
		       errno == EINVAL ? "EINVAL" : strerror(errno));
		return 0;
	}
	return send_one("ud", qp, cq, mr, ah);
}
