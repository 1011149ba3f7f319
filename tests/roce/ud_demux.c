// SPDX-License-Identifier: MIT
/*
 * ud_demux: UD over RoCEv2 on softverbs_roce0 (issue 26), port 4791
 * shared by several processes of one host.
 *   ud_demux recv DIR NAME N QKEY PEER_IPV4
 *       a UD QP; its QPN into DIR/NAME; takes exactly N datagrams, each
 *       naming this QPN and with its bytes right, a GRH area holding the
 *       IPv4 header from PEER_IPV4 (rxe's layout); then keeps polling
 *       until DIR/end appears: any other datagram fails it.  Writes
 *       DIR/NAME.done once it has its N.
 *   ud_demux send DIR GID NQP K QKEY PEER_IPV4 NAME...
 *       NQP UD QPs (NQP UDP source ports, so the kernel spreads them over
 *       the receivers' listeners), K datagrams to each NAME's QPN, sizes
 *       8..1024, round robin over the QPs.
 *   ud_demux hostile DIR QKEY PEER_IPV4 NAME
 *       no softverbs: one UDP socket sends NAME's QPN a good datagram,
 *       then a wrong Q_Key, a QPN nobody has, a short one, a bad ICRC,
 *       an RC opcode, and a good one again (the receiver takes 2).
 * Exit 0 when all holds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>

#include "exchange.h"
#include "roce.h"

#define MAXSZ 1024
#define SLOT  (40 + MAXSZ)

static void die(const char *what)
{
	fprintf(stderr, "ud_demux: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint8_t pattern(uint32_t qpn, uint32_t seq, uint32_t j)
{
	return (uint8_t)(qpn * 7 + seq * 131 + j * 13 + (j >> 8));
}

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void open_dev(struct dev *d, size_t len)
{
	struct ibv_device **l = ibv_get_device_list(NULL);

	for (int i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), "softverbs_roce0"))
			d->ctx = ibv_open_device(l[i]);
	if (!d->ctx)
		die("softverbs_roce0");
	d->pd = ibv_alloc_pd(d->ctx);
	d->cq = ibv_create_cq(d->ctx, 4096, NULL, NULL, 0);
	d->buf = calloc(1, len);
	if (!d->pd || !d->cq || !d->buf)
		die("pd/cq");
	d->mr = ibv_reg_mr(d->pd, d->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!d->mr)
		die("mr");
}

static struct ibv_qp *ud_qp(struct dev *d, uint32_t qkey, uint32_t rwr)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.cap = {.max_send_wr = 64,
			.max_recv_wr = rwr,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_UD,
	};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.pkey_index = 0,
				.port_num = 1,
				.qkey = qkey};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);

	if (!qp || ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					 IBV_QP_PORT | IBV_QP_QKEY))
		die("create/init UD QP");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("RTS");
	return qp;
}

static int do_recv(char **av)
{
	const char *dir = av[0], *name = av[1];
	uint32_t n = (uint32_t)atoi(av[2]),
		 qkey = (uint32_t)strtoul(av[3], 0, 0);
	struct in_addr peer;
	uint32_t got = 0, rwr = n + 16;
	struct dev d = {0};
	struct ibv_qp *qp;
	char done[300];
	double end;

	if (inet_pton(AF_INET, av[4], &peer) != 1)
		die("PEER_IPV4");
	open_dev(&d, (size_t)rwr * SLOT);
	qp = ud_qp(&d, qkey, rwr);
	for (uint32_t i = 0; i < rwr; i++) {
		struct ibv_sge s = {(uintptr_t)d.buf + (size_t)i * SLOT, SLOT,
				    d.mr->lkey};
		struct ibv_recv_wr w = {.wr_id = i,
					.sg_list = &s,
					.num_sge = 1},
				   *bad;

		if (ibv_post_recv(qp, &w, &bad))
			die("post_recv");
	}
	sv_x_put("ud_demux", dir, name, qp->qp_num);
	snprintf(done, sizeof(done), "%s.done", name);
	end = sv_x_now() + 60;
	while (sv_x_get(dir, "end", 0) < 0) {
		struct ibv_wc wc;
		int k = ibv_poll_cq(d.cq, 1, &wc);
		const uint8_t *b, *ip;
		uint32_t dq, seq, len;

		if (sv_x_now() > end) {
			fprintf(stderr, "ud_demux %s: %u of %u, no end\n", name,
				got, n);
			return 1;
		}
		if (k < 0)
			die("poll_cq");
		if (k == 0)
			continue;
		b = d.buf + (size_t)wc.wr_id * SLOT;
		ip = b + 20;
		len = wc.byte_len - 40;
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
		    !(wc.wc_flags & IBV_WC_GRH) || wc.byte_len < 48 ||
		    wc.byte_len > SLOT) {
			fprintf(stderr, "ud_demux %s: bad completion %d %u\n",
				name, wc.status, wc.byte_len);
			return 1;
		}
		for (int i = 0; i < 20; i++)
			if (b[i]) {
				fprintf(stderr, "ud_demux %s: GRH byte %d\n",
					name, i);
				return 1;
			}
		if (ip[0] != 0x45 || ip[9] != IPPROTO_UDP ||
		    memcmp(ip + 12, &peer, 4)) {
			fprintf(stderr,
				"ud_demux %s: not an IPv4 header "
				"from the peer in the GRH\n",
				name);
			return 1;
		}
		memcpy(&dq, b + 40, 4);
		memcpy(&seq, b + 44, 4);
		if (dq != qp->qp_num) {
			fprintf(stderr, "ud_demux %s: a datagram for %06x\n",
				name, dq);
			return 1;
		}
		for (uint32_t j = 8; j < len; j++)
			if (b[40 + j] != pattern(dq, seq, j)) {
				fprintf(stderr, "ud_demux %s: byte %u of %u\n",
					name, j, seq);
				return 1;
			}
		if (++got > n) {
			fprintf(stderr, "ud_demux %s: more than %u\n", name, n);
			return 1;
		}
		if (got == n)
			sv_x_put("ud_demux", dir, done, got);
	}
	if (got != n) {
		fprintf(stderr, "ud_demux %s: %u of %u\n", name, got, n);
		return 1;
	}
	printf("%s: received %u, all its own\n", name, got);
	return 0;
}

static int do_send(char **av, int ac)
{
	const char *dir = av[0];
	int gid = atoi(av[1]), nqp = atoi(av[2]), k = atoi(av[3]);
	uint32_t qkey = (uint32_t)strtoul(av[4], 0, 0);
	int nr = ac - 6;
	struct ibv_qp *qps[16];
	struct ibv_ah *ah;
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	uint32_t dst[16];
	struct in_addr peer;
	struct dev d = {0};
	uint32_t seq = 0;

	if (nqp < 1 || nqp > 16 || nr < 1 || nr > 16 ||
	    inet_pton(AF_INET, av[5], &peer) != 1)
		die("arguments");
	for (int i = 0; i < nr; i++) {
		long v = sv_x_get(dir, av[6 + i], 20);

		if (v < 0)
			die(av[6 + i]);
		dst[i] = (uint32_t)v;
	}
	open_dev(&d, MAXSZ);
	for (int i = 0; i < nqp; i++)
		qps[i] = ud_qp(&d, qkey, 1);
	aa.grh.sgid_index = (uint8_t)gid;
	aa.grh.hop_limit = 64;
	aa.grh.dgid.raw[10] = aa.grh.dgid.raw[11] = 0xff;
	memcpy(&aa.grh.dgid.raw[12], &peer, 4);
	ah = ibv_create_ah(d.pd, &aa);
	if (!ah)
		die("create_ah");
	for (int r = 0; r < k; r++)
		for (int i = 0; i < nr; i++, seq++) {
			uint32_t len = 8 + (seq * 37) % (MAXSZ - 7);
			struct ibv_sge s = {(uintptr_t)d.buf, len, d.mr->lkey};
			struct ibv_send_wr w = {.sg_list = &s,
						.num_sge = 1,
						.opcode = IBV_WR_SEND,
						.send_flags =
							IBV_SEND_SIGNALED},
					   *bad;
			struct ibv_wc wc;
			double end = sv_x_now() + 10;
			int got;

			w.wr.ud.ah = ah;
			w.wr.ud.remote_qpn = dst[i];
			w.wr.ud.remote_qkey = qkey;
			memcpy(d.buf, &dst[i], 4);
			memcpy(d.buf + 4, &seq, 4);
			for (uint32_t j = 8; j < len; j++)
				d.buf[j] = pattern(dst[i], seq, j);
			if (ibv_post_send(qps[seq % nqp], &w, &bad))
				die("post_send");
			while ((got = ibv_poll_cq(d.cq, 1, &wc)) == 0 &&
			       sv_x_now() < end)
				;
			if (got != 1 || wc.status != IBV_WC_SUCCESS)
				die("send completion");
		}
	printf("sent %u datagrams from %d QPs\n", seq, nqp);
	return 0;
}

/* One packet to dqpn from our socket: good, or spoiled as asked. */
static void hostile_one(int fd, const struct sv_roce_ip *ip, uint8_t opcode,
			uint32_t dqpn, uint32_t qkey, int seq, bool bad_icrc,
			size_t cut)
{
	uint8_t data[64], pkt[256];
	struct sv_roce_pkt p = {.opcode = opcode,
				.pkey = 0xffff,
				.dqpn = dqpn,
				.psn = (uint32_t)seq,
				.qkey = qkey,
				.src_qpn = 0x123,
				.payload = data,
				.len = sizeof(data)};
	int n;

	memcpy(data, &dqpn, 4);
	memcpy(data + 4, &seq, 4);
	for (uint32_t j = 8; j < sizeof(data); j++)
		data[j] = pattern(dqpn, (uint32_t)seq, j);
	n = sv_roce_build(pkt, sizeof(pkt), &p, ip);
	if (n < 0)
		die("sv_roce_build");
	if (bad_icrc)
		pkt[n - 1] ^= 0x5a;
	if (send(fd, pkt, cut ? cut : (size_t)n, 0) < 0)
		die("send");
}

static int do_hostile(char **av)
{
	const char *dir = av[0];
	uint32_t qkey = (uint32_t)strtoul(av[1], 0, 0), q;
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(SV_ROCE_PORT)},
			   me;
	socklen_t ml = sizeof(me);
	struct sv_roce_ip ip = {.dport = SV_ROCE_PORT};
	long v = sv_x_get(dir, av[3], 20);
	int fd = socket(AF_INET, SOCK_DGRAM, 0), pmtu = IP_PMTUDISC_DO;
	uint8_t ud = SV_IB_UD | SV_IB_SEND_ONLY;

	if (v < 0 || fd < 0 || inet_pton(AF_INET, av[2], &to.sin_addr) != 1)
		die("arguments");
	q = (uint32_t)v;
	/* connected, IP ID 0 (DF): our ICRC is right */
	if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to)) ||
	    getsockname(fd, (struct sockaddr *)&me, &ml))
		die("socket");
	ip.src[10] = ip.src[11] = ip.dst[10] = ip.dst[11] = 0xff;
	memcpy(ip.src + 12, &me.sin_addr, 4);
	memcpy(ip.dst + 12, &to.sin_addr, 4);
	ip.sport = ntohs(me.sin_port);
	hostile_one(fd, &ip, ud, q, qkey, 0, false, 0);	       /* good */
	hostile_one(fd, &ip, ud, q, qkey ^ 1, 1, false, 0);    /* Q_Key */
	hostile_one(fd, &ip, ud, 0xfffffe, qkey, 2, false, 0); /* QPN */
	hostile_one(fd, &ip, ud, q, qkey, 3, false, 10);       /* short */
	hostile_one(fd, &ip, ud, q, qkey, 4, true, 0);	       /* ICRC */
	hostile_one(fd, &ip, SV_IB_RC | SV_IB_SEND_ONLY, q, qkey, 5, false,
		    0);					/* RC op */
	hostile_one(fd, &ip, ud, q, qkey, 6, false, 0); /* good */
	printf("hostile: 7 datagrams sent to %06x\n", q);
	return 0;
}

int main(int ac, char **av)
{
	if (ac == 7 && !strcmp(av[1], "recv"))
		return do_recv(av + 2);
	if (ac >= 9 && !strcmp(av[1], "send"))
		return do_send(av + 2, ac - 2);
	if (ac == 6 && !strcmp(av[1], "hostile"))
		return do_hostile(av + 2);
	fprintf(stderr, "usage: ud_demux recv DIR NAME N QKEY PEER_IPV4 | "
			"send DIR GID NQP K QKEY PEER_IPV4 NAME... | "
			"hostile DIR QKEY PEER_IPV4 NAME\n");
	return 2;
}
