// SPDX-License-Identifier: MIT
/*
 * IPv6 GIDs: the table lists every IPv6 address of the host that is not
 * link-local (the address itself, as the kernel's RoCE table), after the
 * IPv4-mapped entries; an RC QP and a UD AH addressed by the GID of ::1
 * work (over TCP/IPv6 and UDP/IPv6 in the .tcp. run, which this file
 * checks in /proc/net/tcp6); another host's link-local GID is refused.
 * Across namespaces: tests/netns (root).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "pair.h"

#define GRH 40

/* The index of gid in port 1's table, or -1. */
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

/* The index of ::1's GID; the test skips (exit 77) on a host without
 * ::1 (IPv6 off), and fails if the host has it and the table does not. */
static int loopback6_index(struct ibv_context *ctx)
{
	struct ifaddrs *ifa;
	bool have = false;
	int i;

	ASSERT_OK(getifaddrs(&ifa));
	for (struct ifaddrs *j = ifa; j; j = j->ifa_next)
		if (j->ifa_addr && j->ifa_addr->sa_family == AF_INET6 &&
		    IN6_IS_ADDR_LOOPBACK(
			    &((struct sockaddr_in6 *)j->ifa_addr)->sin6_addr))
			have = true;
	freeifaddrs(ifa);
	if (!have) {
		printf("SKIP: no ::1 on this host (IPv6 off)\n");
		exit(77);
	}
	i = gid_index(ctx, &in6addr_loopback);
	if (i < 0)
		sv_test_fail(__FILE__, __LINE__, "::1 is not in the GID table");
	return i;
}

SV_TEST(gid_table_lists_ipv6_addresses)
{
	struct ifaddrs *ifa;
	struct sv_end e;
	int last_v4 = 0, first_v6 = 1 << 30, n6 = 0;
	union ibv_gid g;
	struct ibv_port_attr pa;

	sv_end_open_ctx(&e);
	ASSERT_OK(getifaddrs(&ifa));
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		const struct in6_addr *a;
		int k;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6)
			continue;
		a = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
		k = gid_index(e.ctx, a);
		if (IN6_IS_ADDR_LINKLOCAL(a)) {
			/* a scope a GID cannot carry: not in the table */
			ASSERT_EQ(-1, k);
			continue;
		}
		if (k < 0)
			sv_test_fail(__FILE__, __LINE__,
				     "IPv6 address of %s not in the GID table",
				     i->ifa_name);
		first_v6 = k < first_v6 ? k : first_v6;
		n6++;
	}
	freeifaddrs(ifa);
	ASSERT_OK(ibv_query_port(e.ctx, 1, &pa));
	for (int i = 1; i < pa.gid_tbl_len; i++) {
		ASSERT_OK(ibv_query_gid(e.ctx, 1, i, &g));
		if (!memcmp(g.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12))
			last_v4 = i;
		/* the host's link-local GID is entry 0 only */
		ASSERT_FALSE(g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80);
	}
	if (n6)
		ASSERT_TRUE(last_v4 < first_v6); /* IPv4 indexes stay put */
	/* the extended query says the same, RoCE-style type */
	if (n6) {
		struct ibv_gid_entry ge;

		ASSERT_OK(ibv_query_gid_ex(e.ctx, 1, first_v6, &ge, 0));
		ASSERT_OK(ibv_query_gid(e.ctx, 1, first_v6, &g));
		ASSERT_OK(memcmp(&ge.gid, &g, 16));
		ASSERT_EQ(first_v6, ge.gid_index);
	}
	printf("%d IPv6 GID(s) from index %d; last IPv4 entry %d\n", n6,
	       n6 ? first_v6 : -1, last_v4);
	ASSERT_OK(ibv_dealloc_pd(e.pd));
	ASSERT_OK(ibv_close_device(e.ctx));
}

/* An RTR whose AV names the GID at index gi (ours: ::1) as both sides'. */
static int to_rtr_gid(struct sv_end *e, uint32_t dest_qpn, uint32_t rq_psn,
		      int gi, const union ibv_gid *dgid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = e->o.mtu,
		.dest_qp_num = dest_qpn,
		.rq_psn = rq_psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = e->o.min_rnr_timer,
		.ah_attr = {.is_global = 1,
			    .port_num = 1,
			    .grh = {.dgid = *dgid,
				    .sgid_index = (uint8_t)gi,
				    .hop_limit = 64}},
	};

	return ibv_modify_qp(e->qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
}

/* An established TCP connection to [::1]:port in /proc/net/tcp6 (an
 * IPv6 one: a v4-mapped ::ffff:127.0.0.1 does not count). */
static bool tcp6_loopback_to(int port)
{
	char line[512], rem[33];
	unsigned int rport, st;
	bool found = false;
	FILE *f = fopen("/proc/net/tcp6", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*d: %*32[0-9A-F]:%*x %32[0-9A-F]:%x %x", rem,
			   &rport, &st) == 3 &&
		    st == 1 && (int)rport == port &&
		    !strcmp(rem, "00000000000000000000000001000000"))
			found = true;
	fclose(f);
	return found;
}

/* RC between two QPs addressed by the GID of ::1: shared memory on one
 * host; with SOFTVERBS_TRANSPORT=tcp the link is a TCP connection to
 * the door at [::1] (the dual-stack listener), which must be there. */
SV_TEST(rc_over_ipv6_loopback_gid)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct sv_pair p;
	union ibv_gid g;
	int gi;
	const char *dp = getenv("SOFTVERBS_TCP_CONNECT_PORT");

	if (!dp)
		dp = getenv("SOFTVERBS_TCP_PORT");

	sv_end_open(&p.a, &o);
	sv_end_open(&p.b, &o);
	gi = loopback6_index(p.a.ctx);
	ASSERT_OK(ibv_query_gid(p.a.ctx, 1, gi, &g));
	ASSERT_OK(memcmp(g.raw, &in6addr_loopback, 16));
	ASSERT_OK(sv_end_to_init(&p.a));
	ASSERT_OK(sv_end_to_init(&p.b));
	ASSERT_OK(to_rtr_gid(&p.a, p.b.qp->qp_num, o.psn, gi, &g));
	ASSERT_OK(to_rtr_gid(&p.b, p.a.qp->qp_num, o.psn, gi, &g));
	ASSERT_OK(sv_end_to_rts(&p.a));
	ASSERT_OK(sv_end_to_rts(&p.b));
	for (int i = 0; i < 10; i++)
		sv_pair_ping(&p);
	if (sv_test_wire() && !sv_test_roce()) /* RoCE: UDP, no door */
		ASSERT_TRUE(tcp6_loopback_to(dp ? atoi(dp) : 4791));
	sv_pair_close(&p);
}

/* UD to the GID of ::1: the datagram arrives with a GRH whose sgid is
 * the sender's ::1 GID (over UDP/IPv6 in the .tcp. run). */
SV_TEST(ud_over_ipv6_loopback_gid)
{
	struct ibv_qp_init_attr ia = {.qp_type = IBV_QPT_UD,
				      .cap = {.max_send_wr = 4,
					      .max_recv_wr = 4,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x1234};
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	uint8_t buf[2][GRH + 64] = {{0}};
	struct ibv_qp *qp[2];
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_wc wc;
	struct sv_end e;
	int gi;

	sv_end_open_ctx(&e);
	gi = loopback6_index(e.ctx);
	cq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	ia.send_cq = ia.recv_cq = cq;
	mr = ibv_reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	for (int i = 0; i < 2; i++) {
		qp[i] = ibv_create_qp(e.pd, &ia);
		ASSERT_NOT_NULL(qp[i]);
		a = (struct ibv_qp_attr){.qp_state = IBV_QPS_INIT,
					 .port_num = 1,
					 .qkey = 0x1234};
		ASSERT_OK(ibv_modify_qp(qp[i], &a,
					IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						IBV_QP_PORT | IBV_QP_QKEY));
		a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
		ASSERT_OK(ibv_modify_qp(qp[i], &a, IBV_QP_STATE));
		a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS};
		ASSERT_OK(
			ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
	}
	memcpy(aa.grh.dgid.raw, &in6addr_loopback, 16);
	aa.grh.sgid_index = (uint8_t)gi;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(e.pd, &aa);
	ASSERT_NOT_NULL(ah);
	{
		struct ibv_sge rs = {(uintptr_t)buf[1], sizeof(buf[1]),
				     mr->lkey};
		struct ibv_recv_wr rw = {.wr_id = 2,
					 .sg_list = &rs,
					 .num_sge = 1},
				   *rbad;
		struct ibv_sge ss = {(uintptr_t)buf[0] + GRH, 64, mr->lkey};
		struct ibv_send_wr sw = {.wr_id = 1,
					 .sg_list = &ss,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED,
					 .wr.ud = {.ah = ah,
						   .remote_qpn = qp[1]->qp_num,
						   .remote_qkey = 0x1234}},
				   *sbad;

		memset(buf[0] + GRH, 0x5a, 64);
		ASSERT_OK(ibv_post_recv(qp[1], &rw, &rbad));
		ASSERT_OK(ibv_post_send(qp[0], &sw, &sbad));
	}
	for (int got = 0; got < 2;) {
		WAIT_WC(cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		if (wc.wr_id == 2) {
			ASSERT_EQ(GRH + 64, wc.byte_len);
			ASSERT_TRUE(wc.wc_flags & IBV_WC_GRH);
			ASSERT_EQ(qp[0]->qp_num, wc.src_qp);
		}
		got++;
	}
	ASSERT_OK(memcmp(buf[1] + GRH, buf[0] + GRH, 64));
	/* GRH: sgid at bytes 8..23, dgid at 24..39 */
	ASSERT_OK(memcmp(buf[1] + 8, &in6addr_loopback, 16));
	ASSERT_OK(memcmp(buf[1] + 24, &in6addr_loopback, 16));
	ASSERT_OK(ibv_destroy_ah(ah));
	for (int i = 0; i < 2; i++)
		ASSERT_OK(ibv_destroy_qp(qp[i]));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_destroy_cq(cq));
	ASSERT_OK(ibv_dealloc_pd(e.pd));
	ASSERT_OK(ibv_close_device(e.ctx));
}

/* Another host's link-local GID (fe80::/10 other than ours) names no
 * address the transports can reach (a GID has no scope): EINVAL for an
 * RC AV and an AH.  Another host's global IPv6 GID (2001:db8::1, the
 * documentation prefix) is accepted: it would be reached over TCP/UDP. */
SV_TEST(ipv6_gid_of_other_host_checked)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	union ibv_gid ll = {.raw = {0xfe, 0x80, [15] = 0x42}}, gl;
	struct ibv_ah *ah;
	struct sv_end e;

	inet_pton(AF_INET6, "2001:db8::1", gl.raw);
	sv_end_open(&e, &o);
	ASSERT_OK(sv_end_to_init(&e));
	ASSERT_EQ(EINVAL, to_rtr_gid(&e, 0x123, 0, 0, &ll));
	ASSERT_EQ(IBV_QPS_INIT, sv_end_state(&e));
	aa.grh.dgid = ll;
	errno = 0;
	ASSERT_NULL(ibv_create_ah(e.pd, &aa));
	ASSERT_EQ(EINVAL, errno);
	aa.grh.dgid = gl;
	ah = ibv_create_ah(e.pd, &aa);
	ASSERT_NOT_NULL(ah);
	ASSERT_OK(ibv_destroy_ah(ah));
	ASSERT_OK(to_rtr_gid(&e, 0x123, 0, 0, &gl));
	ASSERT_EQ(IBV_QPS_RTR, sv_end_state(&e));
	sv_end_close(&e);
}
