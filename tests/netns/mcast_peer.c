// SPDX-License-Identifier: MIT
/*
 * sv_mcast_peer: one end of a verbs multicast exchange between hosts
 * (netns.sh): a UD QP in IPv4 group GROUP (MGID ::ffff:GROUP, as RoCE),
 * addressed from the GID at index GIDX (the namespace's own address).
 *
 *   sv_mcast_peer recv GROUP GIDX COUNT   attach, say "joined", then take
 *                                         COUNT multicasts (30 s at most)
 *                                         and check each: GRH dgid the
 *                                         group, sgid an IPv4-mapped
 *                                         address not ours, the payload
 *   sv_mcast_peer send GROUP GIDX COUNT   send COUNT multicasts (not
 *                                         attached)
 *
 * Exit 0 and a last line "received COUNT from a.b.c.d qp N" or "sent
 * COUNT"; else 1 with what went wrong.
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QKEY  0x11223344u
#define MLID  0xc001
#define GRH   40
#define MSG   1000
#define SLOTS 64

static int die(const char *what)
{
	fprintf(stderr, "sv_mcast_peer: %s\n", what);
	return 1;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static uint8_t pattern(uint32_t i, uint32_t k)
{
	return (uint8_t)(i * 7 + k * 13 + 1);
}

static int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY};

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
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

/* One received multicast in slot's buffer: 0 if it is the group's, from
 * another host, with message i's bytes. */
static int check(const struct ibv_wc *wc, const uint8_t *b,
		 const union ibv_gid *grp, const union ibv_gid *me, uint32_t *i,
		 char *from, size_t n)
{
	struct ibv_grh g;
	uint32_t k;

	if (wc->status != IBV_WC_SUCCESS || !(wc->wc_flags & IBV_WC_GRH) ||
	    wc->byte_len != GRH + MSG)
		return die("a receive completed in error or without a GRH");
	memcpy(&g, b, sizeof(g));
	if (memcmp(g.dgid.raw, grp->raw, 16))
		return die("the GRH's dgid is not the group");
	if (memcmp(g.sgid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) ||
	    !memcmp(g.sgid.raw, me->raw, 16))
		return die("the GRH's sgid is not another host's address");
	inet_ntop(AF_INET, &g.sgid.raw[12], from, (socklen_t)n);
	memcpy(i, b + GRH, 4);
	for (k = 4; k < MSG; k++)
		if (b[GRH + k] != pattern(*i, k))
			return die("payload corrupted");
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	struct ibv_qp_init_attr ia = {.qp_type = IBV_QPT_UD,
				      .cap = {.max_send_wr = SLOTS,
					      .max_recv_wr = SLOTS,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};
	struct ibv_ah_attr aa = {.is_global = 1, .dlid = MLID, .port_num = 1};
	union ibv_gid grp = {.raw = {[10] = 0xff, [11] = 0xff}}, me;
	struct in_addr in;
	uint8_t *buf;
	int gidx, count, got = 0, sent = 0;
	bool recv;
	char from[INET_ADDRSTRLEN] = "?";
	uint32_t src = 0;

	if (argc != 5 || inet_pton(AF_INET, argv[2], &in) != 1 ||
	    !IN_MULTICAST(ntohl(in.s_addr)))
		return die("usage: sv_mcast_peer recv|send GROUP GIDX COUNT");
	recv = !strcmp(argv[1], "recv");
	gidx = atoi(argv[3]);
	count = atoi(argv[4]);
	if (count < 1 || count > SLOTS)
		return die("COUNT: 1..64");
	memcpy(&grp.raw[12], &in, 4);
	devs = ibv_get_device_list(NULL);
	if (!devs || !devs[0])
		return die("no device");
	ctx = ibv_open_device(devs[0]);
	if (!ctx || ibv_query_gid(ctx, 1, gidx, &me))
		return die("open device / query GID");
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 2 * SLOTS, NULL, NULL, 0) : NULL;
	buf = calloc(SLOTS, GRH + MSG);
	mr = cq && buf ? ibv_reg_mr(pd, buf, SLOTS * (GRH + MSG),
				    IBV_ACCESS_LOCAL_WRITE)
		       : NULL;
	if (!mr)
		return die("PD, CQ or MR");
	ia.send_cq = ia.recv_cq = cq;
	qp = ibv_create_qp(pd, &ia);
	if (!qp || to_rts(qp))
		return die("UD QP");
	if (recv) {
		uint64_t end;

		for (int s = 0; s < count; s++)
			if (post_recv(qp, mr, buf, (uint64_t)s))
				return die("post_recv");
		if (ibv_attach_mcast(qp, &grp, MLID))
			return die("ibv_attach_mcast");
		printf("joined %s qp %u\n", argv[2], qp->qp_num);
		fflush(stdout);
		end = now_ms() + 30000;
		while (got < count && now_ms() < end) {
			struct ibv_wc wc;
			uint32_t i;
			int n = ibv_poll_cq(cq, 1, &wc);

			if (n < 0)
				return die("poll_cq");
			if (!n)
				continue;
			if (check(&wc, buf + wc.wr_id * (GRH + MSG), &grp, &me,
				  &i, from, sizeof(from)))
				return 1;
			if (i != (uint32_t)got)
				return die("out of order, twice or lost");
			src = wc.src_qp;
			got++;
		}
		if (got < count) {
			fprintf(stderr, "sv_mcast_peer: %d of %d in 30 s\n",
				got, count);
			return 1;
		}
		printf("received %d from %s qp %u\n", got, from, src);
		ibv_detach_mcast(qp, &grp, MLID);
	} else {
		aa.grh.dgid = grp;
		aa.grh.sgid_index = (uint8_t)gidx;
		aa.grh.hop_limit = 1;
		ah = ibv_create_ah(pd, &aa);
		if (!ah)
			return die("ibv_create_ah");
		for (uint32_t i = 0; i < (uint32_t)count; i++) {
			uint8_t *b = buf + (size_t)i * (GRH + MSG);
			struct ibv_sge sg = {(uintptr_t)b, MSG, mr->lkey};
			struct ibv_send_wr wr = {.wr_id = i,
						 .sg_list = &sg,
						 .num_sge = 1,
						 .opcode = IBV_WR_SEND,
						 .send_flags =
							 IBV_SEND_SIGNALED};
			struct ibv_send_wr *bad;
			struct ibv_wc wc;
			uint64_t end = now_ms() + 10000;
			int n = 0;

			memcpy(b, &i, 4);
			for (uint32_t k = 4; k < MSG; k++)
				b[k] = pattern(i, k);
			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = 0xffffff;
			wr.wr.ud.remote_qkey = QKEY;
			if (ibv_post_send(qp, &wr, &bad))
				return die("post_send");
			while (!n && now_ms() < end)
				n = ibv_poll_cq(cq, 1, &wc);
			if (n != 1 || wc.status != IBV_WC_SUCCESS)
				return die("send did not complete");
			sent++;
		}
		printf("sent %d\n", sent);
		ibv_destroy_ah(ah);
	}
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	free(buf);
	return 0;
}
