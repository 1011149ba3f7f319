// SPDX-License-Identifier: MIT
/*
 * softverbs_roce0, the RoCEv2 device (issue 26 item 1, issue 28 item 7):
 * listed beside softverbs0 when the host has a net interface with an
 * IPv4 address; its port Ethernet, its state and active MTU the
 * interface's; its GID table the interface's as rxe's (index 0 the
 * default GID fe80::EUI-64, then the IPv4-mapped addresses, all RoCE
 * v2, ndev the interface); every error of ibv_query_gid(_ex/_type/
 * _table) and ibv_query_port; an address vector without a GRH refused
 * (EINVAL), QP types other than RC, UC, UD and XRC refused (EOPNOTSUPP); a UD
 * send past the port's MTU completes with no packet (IBA C10-93.1.1).  Each
 * test works out the expected values from the interface itself (ioctl,
 * getifaddrs), not from the device.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pair.h"

#define ROCE_DEV "softverbs_roce0"

/* rdma-core's infiniband/driver.h (IBVERBS_PRIVATE_34), not shipped */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type);

struct roce {
	struct ibv_context *ctx;
	char ifname[IF_NAMESIZE];
	unsigned int ifindex;
	int mtu;
	bool up;
	uint8_t mac[6];
};

/* The interface softverbs_roce0 must bind: the lowest-index non-loopback
 * one with IPv4 (docs/roce.md).  Exit 77 if there is none. */
static void expect_netdev(struct roce *r)
{
	struct ifaddrs *ifa;
	struct ifreq q;
	int fd;

	memset(r, 0, sizeof(*r));
	ASSERT_OK(getifaddrs(&ifa));
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		unsigned int x;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK))
			continue;
		x = if_nametoindex(i->ifa_name);
		if (x && (!r->ifindex || x < r->ifindex)) {
			r->ifindex = x;
			snprintf(r->ifname, sizeof(r->ifname), "%s",
				 i->ifa_name);
		}
	}
	freeifaddrs(ifa);
	if (!r->ifindex) {
		printf("no net interface with IPv4 but loopback: "
		       "softverbs_roce0 is not listed here\n");
		exit(77);
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	ASSERT_GE(fd, 0);
	memset(&q, 0, sizeof(q));
	snprintf(q.ifr_name, sizeof(q.ifr_name), "%s", r->ifname);
	ASSERT_OK(ioctl(fd, SIOCGIFMTU, &q));
	r->mtu = q.ifr_mtu;
	ASSERT_OK(ioctl(fd, SIOCGIFFLAGS, &q));
	r->up = (q.ifr_flags & (IFF_UP | IFF_RUNNING)) ==
		(IFF_UP | IFF_RUNNING);
	ASSERT_OK(ioctl(fd, SIOCGIFHWADDR, &q));
	memcpy(r->mac, q.ifr_hwaddr.sa_data, 6);
	close(fd);
}

static void roce_open(struct roce *r)
{
	struct ibv_device **list;
	int n;

	expect_netdev(r);
	list = ibv_get_device_list(&n);
	ASSERT_NOT_NULL(list);
	ASSERT_EQ(2, n);
	ASSERT_STR_EQ("softverbs0", ibv_get_device_name(list[0]));
	ASSERT_STR_EQ(ROCE_DEV, ibv_get_device_name(list[1]));
	ASSERT_EQ(1, ibv_get_device_index(list[1]));
	ASSERT_NULL(list[2]);
	r->ctx = ibv_open_device(list[1]);
	ASSERT_NOT_NULL(r->ctx);
	ibv_free_device_list(list);
}

static void eui64(const uint8_t *mac, uint8_t *out)
{
	memcpy(out, mac, 3);
	out[3] = 0xff;
	out[4] = 0xfe;
	memcpy(out + 5, mac + 3, 3);
	out[0] ^= 2;
}

SV_TEST(roce_dev_listed_guid)
{
	struct ibv_device_attr da;
	struct ibv_device **list;
	struct roce r;
	uint8_t g[8];

	roce_open(&r);
	eui64(r.mac, g);
	ASSERT_OK(ibv_query_device(r.ctx, &da));
	ASSERT_OK(memcmp(&da.node_guid, g, 8)); /* rxe's: the MAC's EUI-64 */
	ASSERT_EQ(da.node_guid, da.sys_image_guid);
	ASSERT_EQ(1, da.phys_port_cnt);
	/* XRC (conf_xrc.c's tests run on it too), no multicast claimed */
	ASSERT_TRUE(da.device_cap_flags & IBV_DEVICE_XRC);
	ASSERT_EQ(0, da.max_mcast_grp);
	list = ibv_get_device_list(NULL);
	ASSERT_EQ(da.node_guid, ibv_get_device_guid(list[1]));
	ibv_free_device_list(list);
	ASSERT_OK(ibv_close_device(r.ctx));
}

SV_TEST(roce_dev_port)
{
	struct ibv_port_attr pa;
	struct roce r;
	int room;
	enum ibv_mtu want = IBV_MTU_256;

	roce_open(&r);
	memset(&pa, 0xa5, sizeof(pa));
	ASSERT_OK(ibv_query_port(r.ctx, 1, &pa));
	ASSERT_EQ(IBV_LINK_LAYER_ETHERNET, pa.link_layer);
	ASSERT_EQ(r.up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN, pa.state);
	ASSERT_EQ(r.up ? 5 : 3, pa.phys_state);
	ASSERT_EQ(IBV_MTU_4096, pa.max_mtu);
	/* iboe_get_mtu: the MTU less 96 bytes of RoCEv2 headers */
	room = r.mtu - 96;
	for (enum ibv_mtu m = IBV_MTU_4096; m >= IBV_MTU_256; m--)
		if (room >= 128 << m) {
			want = m;
			break;
		}
	ASSERT_EQ(want, pa.active_mtu);
	if (r.mtu == 1500)
		ASSERT_EQ(IBV_MTU_1024, pa.active_mtu);
	ASSERT_EQ(0, pa.lid); /* no LIDs on Ethernet */
	ASSERT_EQ(0, pa.sm_lid);
	ASSERT_GE(pa.gid_tbl_len, 2);
	ASSERT_EQ(1, pa.pkey_tbl_len);
	errno = 0;
	ASSERT_NE(0, ibv_query_port(r.ctx, 0, &pa));
	ASSERT_NE(0, ibv_query_port(r.ctx, 2, &pa));
	ASSERT_OK(ibv_close_device(r.ctx));

	/* softverbs0 keeps its InfiniBand port */
	{
		struct sv_end e;

		memset(&e, 0, sizeof(e));
		sv_end_open_ctx(&e);
		ASSERT_OK(ibv_query_port(e.ctx, 1, &pa));
		ASSERT_EQ(IBV_LINK_LAYER_INFINIBAND, pa.link_layer);
		ASSERT_OK(ibv_close_device(e.ctx));
	}
}

/* The interface's IPv4 addresses as GIDs, in getifaddrs' order. */
static int want_v4(const struct roce *r, union ibv_gid *g, int max)
{
	struct ifaddrs *ifa;
	int n = 0;

	ASSERT_OK(getifaddrs(&ifa));
	for (struct ifaddrs *i = ifa; i && n < max; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    strcmp(i->ifa_name, r->ifname))
			continue;
		memset(&g[n], 0, sizeof(g[n]));
		g[n].raw[10] = g[n].raw[11] = 0xff;
		memcpy(&g[n].raw[12],
		       &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
		n++;
	}
	freeifaddrs(ifa);
	return n;
}

SV_TEST(roce_dev_gid_table)
{
	struct ibv_gid_entry t[64], e;
	union ibv_gid v4[8], g, def = {.raw = {0xfe, 0x80}};
	enum ibv_gid_type_sysfs type;
	struct ibv_port_attr pa;
	struct roce r;
	ssize_t n;
	int n4;

	roce_open(&r);
	ASSERT_OK(ibv_query_port(r.ctx, 1, &pa));
	eui64(r.mac, &def.raw[8]);
	n4 = want_v4(&r, v4, 8);
	ASSERT_GE(n4, 1);
	n = ibv_query_gid_table(r.ctx, t, 64, 0);
	ASSERT_GE(n, 1 + n4);
	ASSERT_LE(n, pa.gid_tbl_len);
	ASSERT_OK(memcmp(&def, &t[0].gid, 16)); /* the default GID */
	for (int i = 0; i < n4; i++)
		ASSERT_OK(memcmp(&v4[i], &t[1 + i].gid, 16));
	for (int i = 0; i < n; i++) {
		ASSERT_EQ(i, t[i].gid_index);
		ASSERT_EQ(1, t[i].port_num);
		ASSERT_EQ(IBV_GID_TYPE_ROCE_V2, t[i].gid_type);
		ASSERT_EQ(r.ifindex, t[i].ndev_ifindex);
		ASSERT_OK(ibv_query_gid_ex(r.ctx, 1, i, &e, 0));
		ASSERT_OK(memcmp(&e, &t[i], sizeof(e)));
		ASSERT_OK(ibv_query_gid(r.ctx, 1, i, &g));
		ASSERT_OK(memcmp(&g, &t[i].gid, 16));
		ASSERT_OK(ibv_query_gid_type(r.ctx, 1, i, &type));
		ASSERT_EQ(IBV_GID_TYPE_SYSFS_ROCE_V2, type);
	}
	/* errors: the table's, each entry's */
	ASSERT_EQ(-EINVAL, ibv_query_gid_table(r.ctx, t, (size_t)n - 1, 0));
	ASSERT_EQ(-EINVAL, ibv_query_gid_table(r.ctx, t, 64, 1));
	ASSERT_EQ(EINVAL, ibv_query_gid_ex(r.ctx, 1, 0, &e, 1));
	/* an entry shorter than rdma-core 44's */
	ASSERT_EQ(EINVAL, _ibv_query_gid_ex(r.ctx, 1, 0, &e, 0, 8));
	ASSERT_EQ(-EINVAL, _ibv_query_gid_table(r.ctx, t, 64, 0, 8));
	ASSERT_EQ(EINVAL, ibv_query_gid_ex(r.ctx, 0, 0, &e, 0));
	ASSERT_EQ(EINVAL, ibv_query_gid_ex(r.ctx, 2, 0, &e, 0));
	ASSERT_EQ(EINVAL, ibv_query_gid_ex(r.ctx, 1, pa.gid_tbl_len, &e, 0));
	ASSERT_EQ(-1, ibv_query_gid(r.ctx, 1, pa.gid_tbl_len, &g));
	ASSERT_EQ(-1, ibv_query_gid(r.ctx, 1, -1, &g));
	ASSERT_EQ(-1, ibv_query_gid(r.ctx, 2, 0, &g));
	ASSERT_NE(0, ibv_query_gid_type(r.ctx, 2, 0, &type));
	ASSERT_NE(0, ibv_query_gid_type(r.ctx, 1, pa.gid_tbl_len, &type));
	if (n < pa.gid_tbl_len) { /* an empty entry: as rdma-core says */
		ASSERT_EQ(ENODATA,
			  ibv_query_gid_ex(r.ctx, 1, (uint32_t)n, &e, 0));
		ASSERT_OK(ibv_query_gid(r.ctx, 1, (int)n, &g));
		ASSERT_OK(memcmp(&g, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16));
		ASSERT_OK(ibv_query_gid_type(r.ctx, 1, (int)n, &type));
		ASSERT_EQ(IBV_GID_TYPE_SYSFS_IB_ROCE_V1, type);
	}
	ASSERT_OK(ibv_close_device(r.ctx));
}

SV_TEST(roce_dev_av_needs_grh)
{
	struct ibv_qp_init_attr qa = {.cap = {1, 1, 1, 1, 0}};
	union ibv_gid peer = {.raw = {[10] = 0xff, [11] = 0xff, 192, 0, 2, 77}};
	struct ibv_ah_attr ah = {.port_num = 1, .dlid = 1};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct roce r;

	roce_open(&r);
	ASSERT_NOT_NULL(pd = ibv_alloc_pd(r.ctx));
	ASSERT_NOT_NULL(cq = ibv_create_cq(r.ctx, 4, NULL, NULL, 0));
	errno = 0;
	ASSERT_NULL(ibv_create_ah(pd, &ah)); /* a LID: no GRH */
	ASSERT_EQ(EINVAL, errno);
	ah.is_global = 1;
	ah.grh.dgid = peer;
	ah.grh.sgid_index = 1;
	ah.grh.hop_limit = 64;
	struct ibv_ah *h = ibv_create_ah(pd, &ah);
	ASSERT_NOT_NULL(h);
	ASSERT_OK(ibv_destroy_ah(h));
	ah.grh.sgid_index = 15; /* past the table's entries */
	errno = 0;
	ASSERT_NULL(ibv_create_ah(pd, &ah));
	ASSERT_EQ(EINVAL, errno);

	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_UD; /* UD speaks RoCEv2 (transport/ud/roce_ud.c) */
	ASSERT_NOT_NULL(qp = ibv_create_qp(pd, &qa));
	ASSERT_OK(ibv_destroy_qp(qp));
	qa.qp_type = IBV_QPT_UC; /* UC speaks RoCEv2 (transport/roce/) */
	ASSERT_NOT_NULL(qp = ibv_create_qp(pd, &qa));
	ASSERT_OK(ibv_destroy_qp(qp));
	qa.qp_type = IBV_QPT_RC;
	ASSERT_NOT_NULL(qp = ibv_create_qp(pd, &qa));
	ASSERT_OK(ibv_modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS));
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = 0x11,
				 .max_dest_rd_atomic = 1,
				 .min_rnr_timer = 12,
				 .ah_attr = {.port_num = 1, .dlid = 1}};
	ASSERT_EQ(EINVAL,
		  ibv_modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER));
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_cq(cq));
	ASSERT_OK(ibv_dealloc_pd(pd));
	ASSERT_OK(ibv_close_device(r.ctx));
}

/* IBA C10-93.1.1, as rxe: a UD send longer than the port's active MTU
 * emits no packet and completes with success (not LOC_LEN_ERR). */
SV_TEST(roce_dev_ud_too_long)
{
	struct ibv_qp_init_attr qa = {.cap = {1, 1, 1, 1, 0},
				      .qp_type = IBV_QPT_UD};
	struct ibv_ah_attr aa = {.port_num = 1, .is_global = 1};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11};
	struct ibv_port_attr pa;
	struct ibv_send_wr w = {.opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED,
				.num_sge = 1},
			   *bad;
	struct ibv_sge sg;
	struct ibv_wc wc;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	static uint8_t buf[8192];
	struct roce r;

	roce_open(&r);
	ASSERT_OK(ibv_query_port(r.ctx, 1, &pa));
	ASSERT_NOT_NULL(pd = ibv_alloc_pd(r.ctx));
	ASSERT_NOT_NULL(cq = ibv_create_cq(r.ctx, 4, NULL, NULL, 0));
	ASSERT_NOT_NULL(mr = ibv_reg_mr(pd, buf, sizeof(buf), 0));
	qa.send_cq = qa.recv_cq = cq;
	ASSERT_NOT_NULL(qp = ibv_create_qp(pd, &qa));
	ASSERT_OK(ibv_modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_QKEY));
	a.qp_state = IBV_QPS_RTR;
	ASSERT_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE));
	a.qp_state = IBV_QPS_RTS;
	ASSERT_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
	/* TEST-NET-1: no packet may leave for it */
	aa.grh.dgid.raw[10] = aa.grh.dgid.raw[11] = 0xff;
	aa.grh.dgid.raw[12] = 192;
	aa.grh.dgid.raw[14] = 2;
	aa.grh.dgid.raw[15] = 77;
	aa.grh.sgid_index = 1;
	aa.grh.hop_limit = 64;
	ASSERT_NOT_NULL(ah = ibv_create_ah(pd, &aa));
	sg = (struct ibv_sge){(uintptr_t)buf, (128u << pa.active_mtu) + 1,
			      mr->lkey};
	w.sg_list = &sg;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = 0x12;
	w.wr.ud.remote_qkey = 0x11;
	ASSERT_OK(ibv_post_send(qp, &w, &bad));
	ASSERT_TRUE(sv_wc_poll(cq, &wc, 10000));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(IBV_WC_SEND, wc.opcode);
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_ah(ah));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_destroy_cq(cq));
	ASSERT_OK(ibv_dealloc_pd(pd));
	ASSERT_OK(ibv_close_device(r.ctx));
}
