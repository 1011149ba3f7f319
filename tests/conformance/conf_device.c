// SPDX-License-Identifier: MIT
/*
 * The device as a program sees it: ibv_query_device, _ex and
 * ibv_query_port report values a real HCA could, consistent between the
 * three; every limit reported is enforced at create time (EINVAL beyond
 * it); ibv_resize_cq grows and shrinks a CQ with completions queued,
 * keeps their order, and is safe beside a poller.  Completions are made
 * without a peer: a receive posted to a QP in ERROR is flushed at once.
 */
#include <endian.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#include "objects.h"
#include "pair.h"

static void query(struct sv_end *e, struct ibv_device_attr *da)
{
	memset(da, 0xa5, sizeof(*da)); /* every field must be written */
	ASSERT_OK(ibv_query_device(e->ctx, da));
}

SV_TEST(device_attrs_sane)
{
	long page = sysconf(_SC_PAGESIZE);
	struct ibv_device_attr da;
	struct ibv_device **list;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	/* a vendor of nobody's: an OUI in the locally administered space */
	ASSERT_NE(0, da.vendor_id);
	ASSERT_TRUE(da.vendor_id <= 0xffffff);
	ASSERT_TRUE(da.vendor_id & 0x020000);
	ASSERT_NE(0x02c9, da.vendor_id); /* Mellanox: its paths are not ours */
	ASSERT_NE(0, da.vendor_part_id);
	ASSERT_NE(0, da.hw_ver);
	ASSERT_TRUE(da.fw_ver[0] != '\0');
	ASSERT_TRUE(memchr(da.fw_ver, '\0', sizeof(da.fw_ver)) != NULL);
	list = ibv_get_device_list(NULL);
	ASSERT_NOT_NULL(list);
	ASSERT_EQ(ibv_get_device_guid(list[0]), da.node_guid);
	ibv_free_device_list(list);
	ASSERT_EQ(da.node_guid, da.sys_image_guid);
	ASSERT_TRUE(da.page_size_cap & (uint64_t)page);

	/* what exists has room, what does not is zero */
	ASSERT_GE(da.max_qp, 1024);
	ASSERT_GE(da.max_qp_wr, 1024);
	ASSERT_GE(da.max_sge, 2);
	ASSERT_GE(da.max_sge, da.max_sge_rd);
	ASSERT_GE(da.max_sge_rd, 1);
	ASSERT_GE(da.max_cq, 1024);
	ASSERT_GE(da.max_cqe, da.max_qp_wr);
	ASSERT_GE(da.max_mr, 1024);
	ASSERT_GE(da.max_mr_size, 1ull << 32);
	ASSERT_GE(da.max_pd, 1024);
	ASSERT_GE(da.max_qp_rd_atom, 1);
	ASSERT_GE(da.max_qp_init_rd_atom, 1);
	ASSERT_GE(da.max_res_rd_atom, da.max_qp_rd_atom);
	ASSERT_EQ(IBV_ATOMIC_GLOB, da.atomic_cap);
	/* the SRQ engineer's limits (objects.h SV_MAX_SRQ_*) */
	ASSERT_GE(da.max_srq, 1);
	ASSERT_EQ(16384, da.max_srq_wr);
	ASSERT_EQ(32, da.max_srq_sge);
	ASSERT_EQ(0, da.max_ee);
	ASSERT_EQ(0, da.max_ee_rd_atom);
	ASSERT_EQ(0, da.max_ee_init_rd_atom);
	ASSERT_EQ(0, da.max_rdd);
	ASSERT_EQ(4095, da.max_mw); /* conf_mw.c enforces it */
	ASSERT_EQ(0, da.max_raw_ipv6_qp);
	ASSERT_EQ(0, da.max_raw_ethy_qp);
	/* multicast: conf_mcast.c enforces them */
	ASSERT_EQ(256, da.max_mcast_grp);
	ASSERT_EQ(56, da.max_mcast_qp_attach);
	ASSERT_EQ(1024, da.max_total_mcast_qp_attach);
	ASSERT_EQ(65536, da.max_ah); /* limit_ah_count enforces it */
	ASSERT_EQ(0, da.max_fmr);
	ASSERT_EQ(0, da.max_map_per_fmr);
	ASSERT_EQ(1, da.max_pkeys);
	ASSERT_LE(da.local_ca_ack_delay, 31);
	ASSERT_EQ(1, da.phys_port_cnt);

	/* only what is true */
	ASSERT_TRUE(da.device_cap_flags & IBV_DEVICE_RC_RNR_NAK_GEN);
	ASSERT_TRUE(da.device_cap_flags & IBV_DEVICE_SYS_IMAGE_GUID);
	ASSERT_TRUE(da.device_cap_flags & IBV_DEVICE_CURR_QP_STATE_MOD);
	/* memory windows, type 1 and 2B (conf_mw.c) */
	ASSERT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	ASSERT_FALSE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A);
	ASSERT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	ASSERT_TRUE(da.device_cap_flags & IBV_DEVICE_XRC); /* conf_xrc */
	ASSERT_FALSE(da.device_cap_flags & IBV_DEVICE_SHUTDOWN_PORT);
	ASSERT_FALSE(da.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS);
	ASSERT_FALSE(da.device_cap_flags & IBV_DEVICE_UD_IP_CSUM);
	ASSERT_FALSE(da.device_cap_flags & IBV_DEVICE_N_NOTIFY_CQ);
	ASSERT_FALSE(da.device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG);
	ASSERT_FALSE(da.device_cap_flags & IBV_DEVICE_BAD_PKEY_CNTR);
	ASSERT_FALSE(da.device_cap_flags & IBV_DEVICE_BAD_QKEY_CNTR);

	ASSERT_EQ(EINVAL, ibv_query_device(e.ctx, NULL));
	sv_end_close(&e);
}

SV_TEST(device_attrs_ex_consistent)
{
	struct ibv_query_device_ex_input in = {.comp_mask = 1};
	struct ibv_device_attr_ex ax;
	struct ibv_device_attr da;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	memset(&ax, 0xa5, sizeof(ax));
	ASSERT_OK(ibv_query_device_ex(e.ctx, NULL, &ax));
	ASSERT_OK(memcmp(&da, &ax.orig_attr, sizeof(da)));
	ASSERT_EQ(0, ax.comp_mask);
	ASSERT_EQ(da.device_cap_flags, ax.device_cap_flags_ex & 0xffffffffu);
	/* CQ timestamps are nanoseconds: a 1 GHz clock, all 64 bits */
	ASSERT_EQ(1000000, ax.hca_core_clock);
	ASSERT_EQ(~0ull, ax.completion_timestamp_mask);
	ASSERT_EQ(1, ax.phys_port_cnt_ex);
	/* ODP's caps: conf_odp.c.  No TSO, RSS, WQs, pacing, raw packets,
	 * TM, moderation */
	ASSERT_EQ(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE |
			  IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
			  IBV_ODP_SUPPORT_SRQ_RECV,
		  ax.xrc_odp_caps); /* conf_xrc_odp.c */
	ASSERT_EQ(0, ax.tso_caps.max_tso);
	ASSERT_EQ(0, ax.tso_caps.supported_qpts);
	ASSERT_EQ(0, ax.rss_caps.supported_qpts);
	ASSERT_EQ(0, ax.rss_caps.max_rwq_indirection_tables);
	ASSERT_EQ(0, ax.max_wq_type_rq);
	ASSERT_EQ(0, ax.packet_pacing_caps.qp_rate_limit_max);
	ASSERT_EQ(0, ax.packet_pacing_caps.supported_qpts);
	ASSERT_EQ(0, ax.raw_packet_caps);
	ASSERT_EQ(0, ax.tm_caps.max_num_tags);
	ASSERT_EQ(0, ax.cq_mod_caps.max_cq_count);
	ASSERT_EQ(256 << 10, ax.max_dm_size); /* device memory (conf_dm.c) */
	ASSERT_EQ(0, ax.pci_atomic_caps.fetch_add);
	ASSERT_EQ(0, ax.pci_atomic_caps.swap);
	ASSERT_EQ(0, ax.pci_atomic_caps.compare_swap);
	/* an input we do not know */
	ASSERT_EQ(EINVAL, ibv_query_device_ex(e.ctx, &in, &ax));
	sv_end_close(&e);
}

SV_TEST(port_attrs_sane_and_consistent)
{
	struct ibv_port_attr pa;
	struct ibv_device_attr da;
	union ibv_gid gid;
	__be16 pkey;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	memset(&pa, 0xa5, sizeof(pa));
	ASSERT_OK(ibv_query_port(e.ctx, 1, &pa));
	ASSERT_EQ(IBV_PORT_ACTIVE, pa.state);
	ASSERT_EQ(5, pa.phys_state); /* LinkUp */
	ASSERT_LE(pa.active_mtu, pa.max_mtu);
	ASSERT_GE(pa.active_mtu, IBV_MTU_256);
	ASSERT_EQ(IBV_LINK_LAYER_INFINIBAND, pa.link_layer);
	ASSERT_GE(pa.max_msg_sz, 1u << 30);
	ASSERT_NE(0, pa.lid);
	ASSERT_TRUE(pa.lid < 0xc000); /* unicast */
	ASSERT_EQ(pa.lid, pa.sm_lid); /* we are our own subnet manager */
	ASSERT_TRUE(pa.port_cap_flags & IBV_PORT_SM);
	ASSERT_EQ(0, pa.lmc);
	ASSERT_GE(pa.max_vl_num, 1);
	ASSERT_NE(0, pa.active_width);
	ASSERT_NE(0, pa.active_speed);
	ASSERT_EQ(0, pa.bad_pkey_cntr);
	ASSERT_EQ(0, pa.qkey_viol_cntr);
	/* the tables are as long as the port says, and no longer */
	ASSERT_EQ(da.max_pkeys, pa.pkey_tbl_len);
	ASSERT_OK(ibv_query_pkey(e.ctx, 1, 0, &pkey));
	ASSERT_EQ(0xffff, be16toh(pkey));
	ASSERT_EQ(-1, ibv_query_pkey(e.ctx, 1, pa.pkey_tbl_len, &pkey));
	ASSERT_GE(pa.gid_tbl_len, 1);
	for (int i = 0; i < pa.gid_tbl_len; i++)
		ASSERT_OK(ibv_query_gid(e.ctx, 1, i, &gid));
	errno = 0;
	ASSERT_EQ(-1, ibv_query_gid(e.ctx, 1, pa.gid_tbl_len, &gid));
	ASSERT_EQ(EINVAL, errno);
	/* ports are 1 .. phys_port_cnt */
	ASSERT_EQ(EINVAL, ibv_query_port(e.ctx, 0, &pa));
	ASSERT_EQ(EINVAL, ibv_query_port(e.ctx, da.phys_port_cnt + 1, &pa));
	errno = 0;
	ASSERT_EQ(-1, ibv_query_gid(e.ctx, 2, 0, &gid));
	ASSERT_EQ(EINVAL, errno);
	sv_end_close(&e);
}

/* CQs: cqe in [1, max_cqe]; ibv_create_cq_ex's arguments. */
SV_TEST(limit_cqe_at_create)
{
	struct ibv_cq_init_attr_ex ca;
	struct ibv_device_attr da;
	struct ibv_cq_ex *cqx;
	struct ibv_cq *cq;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	cq = ibv_create_cq(e.ctx, da.max_cqe, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	ASSERT_GE(cq->cqe, da.max_cqe);
	ASSERT_OK(ibv_destroy_cq(cq));
	for (int bad = -1; bad <= 0; bad++) {
		errno = 0;
		ASSERT_NULL(ibv_create_cq(e.ctx, bad, NULL, NULL, 0));
		ASSERT_EQ(EINVAL, errno);
	}
	errno = 0;
	ASSERT_NULL(ibv_create_cq(e.ctx, da.max_cqe + 1, NULL, NULL, 0));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(
		ibv_create_cq(e.ctx, 4, NULL, NULL, e.ctx->num_comp_vectors));
	ASSERT_EQ(EINVAL, errno);

	memset(&ca, 0, sizeof(ca));
	ca.cqe = (uint32_t)da.max_cqe + 1;
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EINVAL, errno);
	ca.cqe = 4;
	ca.comp_vector = (uint32_t)e.ctx->num_comp_vectors;
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EINVAL, errno);
	ca.comp_vector = 0;
	ca.comp_mask = 1u << 30; /* a comp_mask bit nobody defined */
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EINVAL, errno);
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN; /* we always report */
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EOPNOTSUPP, errno);
	ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED; /* a hint: fine */
	cqx = ibv_create_cq_ex(e.ctx, &ca);
	ASSERT_NOT_NULL(cqx);
	ASSERT_OK(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));
	ca.comp_mask = 0;
	ca.wc_flags = IBV_WC_EX_WITH_TM_INFO; /* a field we cannot give */
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EOPNOTSUPP, errno);
	sv_end_close(&e);
}

static struct ibv_qp *create_qp_cap(struct sv_end *e, struct ibv_cq *cq,
				    const struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap = *cap;
	return ibv_create_qp(e->pd, &ia);
}

/* Each QP capability at the device's limit works; one more is EINVAL. */
SV_TEST(limit_qp_caps_at_create)
{
	struct ibv_device_attr da;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_cap max, c;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct sv_end e;
	uint32_t *field[] = {&c.max_send_wr, &c.max_recv_wr, &c.max_send_sge,
			     &c.max_recv_sge, &c.max_inline_data};

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	cq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	/* the inline limit is no device attribute: the QP reports it */
	c = (struct ibv_qp_cap){1, 1, 1, 1, 1};
	qp = create_qp_cap(&e, cq, &c);
	ASSERT_NOT_NULL(qp);
	ASSERT_OK(ibv_query_qp(qp, &qa, IBV_QP_CAP, &ia));
	ASSERT_GE(qa.cap.max_inline_data, 1);
	ASSERT_OK(ibv_destroy_qp(qp));
	max = (struct ibv_qp_cap){
		.max_send_wr = (uint32_t)da.max_qp_wr,
		.max_recv_wr = (uint32_t)da.max_qp_wr,
		.max_send_sge = (uint32_t)da.max_sge,
		.max_recv_sge = (uint32_t)da.max_sge,
		.max_inline_data = qa.cap.max_inline_data,
	};
	c = max;
	qp = create_qp_cap(&e, cq, &c);
	ASSERT_NOT_NULL(qp);
	ASSERT_OK(ibv_destroy_qp(qp));
	for (size_t i = 0; i < sizeof(field) / sizeof(field[0]); i++) {
		c = max;
		(*field[i])++;
		errno = 0;
		ASSERT_NULL(create_qp_cap(&e, cq, &c));
		ASSERT_EQ(EINVAL, errno);
	}
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
}

/* max_mr_size: one byte more is EINVAL, before the memory is looked at. */
SV_TEST(limit_mr_size_at_reg)
{
	struct ibv_device_attr da;
	struct sv_end e;
	char *buf = aligned_alloc(4096, 4096);

	ASSERT_NOT_NULL(buf);
	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, buf, da.max_mr_size + 1, 0));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, buf, SIZE_MAX / 2, 0));
	ASSERT_EQ(EINVAL, errno);
	sv_end_close(&e);
	free(buf);
}

/* Objects counted against max_*: the next one is EINVAL, and freeing one
 * makes room again. */
SV_TEST(limit_pd_count)
{
	struct ibv_device_attr da;
	struct ibv_pd **pds;
	struct sv_end e;
	int n;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e); /* holds one PD */
	query(&e, &da);
	pds = calloc((size_t)da.max_pd, sizeof(*pds));
	ASSERT_NOT_NULL(pds);
	for (n = 0; n < da.max_pd - 1; n++) {
		pds[n] = ibv_alloc_pd(e.ctx);
		ASSERT_NOT_NULL(pds[n]);
	}
	errno = 0;
	ASSERT_NULL(ibv_alloc_pd(e.ctx));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_dealloc_pd(pds[--n]));
	pds[n] = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(pds[n]);
	for (n++; n > 0; n--)
		ASSERT_OK(ibv_dealloc_pd(pds[n - 1]));
	free(pds);
	sv_end_close(&e);
}

/* max_ah address handles per context, then ENOMEM (it was reported 0,
 * and nothing was counted). */
SV_TEST(limit_ah_count)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_ah_attr aa;
	struct ibv_ah **ahs;
	struct sv_end e;
	int n;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	ASSERT_OK(ibv_query_port(e.ctx, 1, &pa));
	ASSERT_GE(da.max_ah, 1024);
	aa = (struct ibv_ah_attr){.dlid = pa.lid, .port_num = 1};
	ahs = calloc((size_t)da.max_ah, sizeof(*ahs));
	ASSERT_NOT_NULL(ahs);
	for (n = 0; n < da.max_ah; n++) {
		ahs[n] = ibv_create_ah(e.pd, &aa);
		ASSERT_NOT_NULL(ahs[n]);
	}
	errno = 0;
	ASSERT_NULL(ibv_create_ah(e.pd, &aa));
	ASSERT_EQ(ENOMEM, errno);
	ASSERT_OK(ibv_destroy_ah(ahs[--n]));
	ahs[n] = ibv_create_ah(e.pd, &aa);
	ASSERT_NOT_NULL(ahs[n]);
	for (n++; n > 0; n--)
		ASSERT_OK(ibv_destroy_ah(ahs[n - 1]));
	free(ahs);
	sv_end_close(&e);
}

SV_TEST(limit_cq_count)
{
	struct ibv_device_attr da;
	struct ibv_cq **cqs;
	struct sv_end e;
	int n;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	cqs = calloc((size_t)da.max_cq, sizeof(*cqs));
	ASSERT_NOT_NULL(cqs);
	for (n = 0; n < da.max_cq; n++) {
		cqs[n] = ibv_create_cq(e.ctx, 1, NULL, NULL, 0);
		ASSERT_NOT_NULL(cqs[n]);
	}
	errno = 0;
	ASSERT_NULL(ibv_create_cq(e.ctx, 1, NULL, NULL, 0));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_destroy_cq(cqs[--n]));
	cqs[n] = ibv_create_cq(e.ctx, 1, NULL, NULL, 0);
	ASSERT_NOT_NULL(cqs[n]);
	for (n++; n > 0; n--)
		ASSERT_OK(ibv_destroy_cq(cqs[n - 1]));
	free(cqs);
	sv_end_close(&e);
}

SV_TEST(limit_mr_count)
{
	struct ibv_device_attr da;
	struct ibv_mr **mrs;
	struct sv_end e;
	char *buf = aligned_alloc(4096, 4096);
	int n;

	ASSERT_NOT_NULL(buf);
	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	mrs = calloc((size_t)da.max_mr, sizeof(*mrs));
	ASSERT_NOT_NULL(mrs);
	for (n = 0; n < da.max_mr; n++) {
		mrs[n] = ibv_reg_mr(e.pd, buf, 4096, 0);
		ASSERT_NOT_NULL(mrs[n]);
	}
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, buf, 4096, 0));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_dereg_mr(mrs[--n]));
	mrs[n] = ibv_reg_mr(e.pd, buf, 4096, 0);
	ASSERT_NOT_NULL(mrs[n]);
	for (n++; n > 0; n--)
		ASSERT_OK(ibv_dereg_mr(mrs[n - 1]));
	free(mrs);
	sv_end_close(&e);
	free(buf);
}

/* Each QP holds an fd: the test needs max_qp of them. */
SV_TEST(limit_qp_count)
{
	struct ibv_qp_cap cap = {1, 1, 1, 1, 0};
	struct ibv_device_attr da;
	struct rlimit rl;
	struct ibv_qp **qps;
	struct ibv_cq *cq;
	struct sv_end e;
	int n;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	ASSERT_OK(getrlimit(RLIMIT_NOFILE, &rl));
	rl.rlim_cur = rl.rlim_max;
	ASSERT_OK(setrlimit(RLIMIT_NOFILE, &rl));
	if (rl.rlim_cur < (rlim_t)da.max_qp + 256) {
		fprintf(stderr, "skipped: RLIMIT_NOFILE %llu < max_qp %d\n",
			(unsigned long long)rl.rlim_cur, da.max_qp);
		sv_end_close(&e);
		return;
	}
	cq = ibv_create_cq(e.ctx, 1, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	qps = calloc((size_t)da.max_qp, sizeof(*qps));
	ASSERT_NOT_NULL(qps);
	for (n = 0; n < da.max_qp; n++) {
		qps[n] = create_qp_cap(&e, cq, &cap);
		ASSERT_NOT_NULL(qps[n]);
	}
	errno = 0;
	ASSERT_NULL(create_qp_cap(&e, cq, &cap));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_destroy_qp(qps[--n]));
	qps[n] = create_qp_cap(&e, cq, &cap);
	ASSERT_NOT_NULL(qps[n]);
	for (n++; n > 0; n--)
		ASSERT_OK(ibv_destroy_qp(qps[n - 1]));
	free(qps);
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
}

/*
 * Creating and destroying a QP costs the same beside 4n QPs on its CQs as
 * beside n (issue 25: limit_qp_count's 16,384 QPs took O(n^2), a scan of
 * the CQ's QP set per attach and per detach).  Counted in the set's slots
 * that attach and detach visit, which load does not blur.
 */
static int ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* What a poller of cq sees: each live QP of qps[0, n) once, no other. */
static void check_set(struct ibv_cq *cq, struct ibv_qp **qps, int n)
{
	struct sv_qp_set *set = atomic_load(&to_scq(cq)->qps);
	uint32_t used = atomic_load(&set->n);
	uintptr_t *in = calloc((size_t)n + 1, sizeof(*in));
	uintptr_t *live = calloc((size_t)n + 1, sizeof(*live));
	uint32_t nlive = 0;

	ASSERT_NOT_NULL(in);
	ASSERT_NOT_NULL(live);
	for (int i = 0; i < n; i++)
		if (qps[i])
			live[nlive++] = (uintptr_t)to_sqp(qps[i]);
	ASSERT_EQ(nlive, used);
	for (uint32_t i = 0; i < used; i++)
		in[i] = (uintptr_t)atomic_load(&set->qp[i]);
	qsort(in, used, sizeof(*in), ptr_cmp);
	qsort(live, nlive, sizeof(*live), ptr_cmp);
	for (uint32_t i = 0; i < used; i++)
		ASSERT_EQ(live[i], in[i]);
	free(in);
	free(live);
}

static void destroy_slot(struct ibv_qp **qps, int i)
{
	ASSERT_OK(ibv_destroy_qp(qps[i]));
	qps[i] = NULL;
}

/* n QPs completing into scq and rcq, destroyed in an order that moves
 * slots (every other one from the oldest, then the rest newest first):
 * the slots visited, per QP. */
static uint64_t churn(struct sv_end *e, struct ibv_cq *scq, struct ibv_cq *rcq,
		      int n)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp **qps = calloc((size_t)n, sizeof(*qps));
	uint64_t before = to_scq(scq)->set_visits +
			  (rcq != scq ? to_scq(rcq)->set_visits : 0);
	uint64_t after;

	ASSERT_NOT_NULL(qps);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap = (struct ibv_qp_cap){1, 1, 1, 1, 0};
	for (int i = 0; i < n; i++) {
		qps[i] = ibv_create_qp(e->pd, &ia);
		ASSERT_NOT_NULL(qps[i]);
	}
	check_set(scq, qps, n);
	check_set(rcq, qps, n);
	for (int i = 0; i < n; i += 2)
		destroy_slot(qps, i);
	check_set(scq, qps, n);
	check_set(rcq, qps, n);
	for (int i = n - 1; i >= 0; i--)
		if (qps[i])
			destroy_slot(qps, i);
	check_set(scq, qps, n);
	check_set(rcq, qps, n);
	free(qps);
	after = to_scq(scq)->set_visits +
		(rcq != scq ? to_scq(rcq)->set_visits : 0);
	return (after - before) / (uint64_t)n;
}

SV_TEST(limit_qp_create_cost_flat_in_qps)
{
	const int n = 128;
	struct ibv_cq *cq, *cq2;
	struct rlimit rl;
	struct sv_end e;
	uint64_t one[2], four[2];

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	ASSERT_OK(getrlimit(RLIMIT_NOFILE, &rl));
	if (rl.rlim_cur < (rlim_t)(4 * n + 256)) {
		rl.rlim_cur = rl.rlim_max;
		ASSERT_OK(setrlimit(RLIMIT_NOFILE, &rl));
	}
	ASSERT_GE(rl.rlim_cur, (rlim_t)(4 * n + 256));
	cq = ibv_create_cq(e.ctx, 1, NULL, NULL, 0);
	cq2 = ibv_create_cq(e.ctx, 1, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	ASSERT_NOT_NULL(cq2);
	/* one CQ for both queues (in its set once), and two */
	one[0] = churn(&e, cq, cq, n);
	four[0] = churn(&e, cq, cq, 4 * n);
	one[1] = churn(&e, cq, cq2, n);
	four[1] = churn(&e, cq, cq2, 4 * n);
	fprintf(stderr,
		"slots visited per QP: one CQ %llu and %llu, two CQs "
		"%llu and %llu (%d and %d QPs)\n",
		(unsigned long long)one[0], (unsigned long long)four[0],
		(unsigned long long)one[1], (unsigned long long)four[1], n,
		4 * n);
	for (int i = 0; i < 2; i++) {
		ASSERT_GE(one[i], 1); /* the counter counts */
		ASSERT_EQ(one[i], four[i]);
		ASSERT_LE(four[i], 8);
	}
	ASSERT_OK(ibv_destroy_cq(cq2));
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
}

/* A QP in ERROR on cq: each receive posted to it is flushed into cq at
 * once, with its wr_id: completions on demand, in order. */
static struct ibv_qp *flush_qp(struct sv_end *e, struct ibv_cq *cq)
{
	struct ibv_qp_cap cap = {1, 64, 1, 1, 0};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	struct ibv_qp *qp = create_qp_cap(e, cq, &cap);

	ASSERT_NOT_NULL(qp);
	ASSERT_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE));
	return qp;
}

static void flush_recvs(struct ibv_qp *qp, uint64_t first, int n)
{
	struct ibv_recv_wr wr, *bad;

	for (int i = 0; i < n; i++) {
		wr = (struct ibv_recv_wr){.wr_id = first + (uint64_t)i};
		ASSERT_OK(ibv_post_recv(qp, &wr, &bad));
	}
}

/* Polls n completions: wr_ids first.. in order. */
static void expect_ids(struct ibv_cq *cq, uint64_t first, int n)
{
	struct ibv_wc wc[16];
	int got = 0;

	while (got < n) {
		int k = ibv_poll_cq(cq, n - got < 16 ? n - got : 16, wc);

		ASSERT_GE(k, 1);
		for (int i = 0; i < k; i++, got++) {
			ASSERT_EQ(first + (uint64_t)got, wc[i].wr_id);
			ASSERT_EQ(IBV_WC_WR_FLUSH_ERR, wc[i].status);
		}
	}
}

static void expect_empty(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, ibv_poll_cq(cq, 1, &wc));
}

SV_TEST(resize_cq_grow_shrink_invalid)
{
	struct ibv_device_attr da;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	query(&e, &da);
	cq = ibv_create_cq(e.ctx, 4, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	ASSERT_OK(ibv_resize_cq(cq, 100));
	ASSERT_GE(cq->cqe, 100);
	ASSERT_LE(cq->cqe, da.max_cqe);
	ASSERT_OK(ibv_resize_cq(cq, 2));
	ASSERT_GE(cq->cqe, 2);
	ASSERT_LE(cq->cqe, 99); /* it did shrink */
	ASSERT_OK(ibv_resize_cq(cq, da.max_cqe));
	ASSERT_GE(cq->cqe, da.max_cqe);
	ASSERT_EQ(EINVAL, ibv_resize_cq(cq, da.max_cqe + 1));
	ASSERT_EQ(EINVAL, ibv_resize_cq(cq, 0));
	ASSERT_EQ(EINVAL, ibv_resize_cq(cq, -1));
	ASSERT_GE(cq->cqe, da.max_cqe); /* failures change nothing */

	/* never below what is queued: 8 completions, 7 is too few */
	ASSERT_OK(ibv_resize_cq(cq, 8));
	qp = flush_qp(&e, cq);
	flush_recvs(qp, 1, 8);
	ASSERT_EQ(EINVAL, ibv_resize_cq(cq, 7));
	ASSERT_OK(ibv_resize_cq(cq, 8));
	ASSERT_GE(cq->cqe, 8);
	expect_ids(cq, 1, 8);
	expect_empty(cq);
	ASSERT_OK(ibv_resize_cq(cq, 1));
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
}

/* Completions queued across the array's end (tail and head wrapped)
 * keep their order through a grow and a shrink. */
SV_TEST(resize_cq_keeps_order)
{
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct sv_end e;
	uint64_t id = 1;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	cq = ibv_create_cq(e.ctx, 8, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(8, cq->cqe);
	qp = flush_qp(&e, cq);
	flush_recvs(qp, id, 6);
	expect_ids(cq, id, 6);
	expect_empty(cq);
	id += 6;
	flush_recvs(qp, id, 7); /* slots 6, 7, 0 .. 4 */
	ASSERT_OK(ibv_resize_cq(cq, 30));
	ASSERT_EQ(32, cq->cqe);
	flush_recvs(qp, id + 7, 20);
	ASSERT_OK(ibv_resize_cq(cq, 27));
	ASSERT_EQ(32, cq->cqe);
	expect_ids(cq, id, 5);
	id += 5;
	ASSERT_OK(ibv_resize_cq(cq, 22)); /* exactly what is queued */
	ASSERT_EQ(32, cq->cqe);
	expect_ids(cq, id, 10);
	id += 10;
	ASSERT_OK(ibv_resize_cq(cq, 12)); /* 12 queued, 16 slots */
	ASSERT_EQ(16, cq->cqe);
	flush_recvs(qp, id + 12, 4); /* full, not overrun */
	expect_ids(cq, id, 16);
	expect_empty(cq);
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
}

/* The extended CQ after a resize: the same completions, timestamps and
 * all, through start/next/end_poll. */
SV_TEST(resize_cq_ex_keeps_working)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 4,
		.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			    IBV_WC_EX_WITH_QP_NUM,
	};
	struct ibv_poll_cq_attr pa = {0};
	struct ibv_cq_ex *cqx;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct sv_end e;
	uint64_t ts = 0;
	int n = 0;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	cqx = ibv_create_cq_ex(e.ctx, &ca);
	ASSERT_NOT_NULL(cqx);
	cq = ibv_cq_ex_to_cq(cqx);
	qp = flush_qp(&e, cq);
	flush_recvs(qp, 100, 3);
	ASSERT_OK(ibv_resize_cq(cq, 64));
	ASSERT_EQ(64, cq->cqe);
	flush_recvs(qp, 103, 40);
	ASSERT_OK(ibv_start_poll(cqx, &pa));
	do {
		ASSERT_EQ(100 + n, cqx->wr_id);
		ASSERT_EQ(IBV_WC_WR_FLUSH_ERR, cqx->status);
		ASSERT_EQ(qp->qp_num, ibv_wc_read_qp_num(cqx));
		ASSERT_GE(ibv_wc_read_completion_ts(cqx), ts);
		ts = ibv_wc_read_completion_ts(cqx);
		n++;
	} while (ibv_next_poll(cqx) == 0);
	ibv_end_poll(cqx);
	ASSERT_EQ(43, n);
	ASSERT_NE(0, ts);
	ASSERT_EQ(ENOENT, ibv_start_poll(cqx, &pa));
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
}

/* The 1 GHz clock hca_core_clock promises: ibv_query_rt_values_ex reads
 * it, and completion timestamps are on it. */
SV_TEST(clock_rt_values_match_timestamps)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 4,
		.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
	};
	struct ibv_poll_cq_attr pa = {0};
	struct ibv_values_ex v0 = {.comp_mask = IBV_VALUES_MASK_RAW_CLOCK};
	struct ibv_values_ex v1 = v0;
	struct ibv_cq_ex *cqx;
	struct ibv_qp *qp;
	struct sv_end e;
	uint64_t ts;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	cqx = ibv_create_cq_ex(e.ctx, &ca);
	ASSERT_NOT_NULL(cqx);
	qp = flush_qp(&e, ibv_cq_ex_to_cq(cqx));
	ASSERT_OK(ibv_query_rt_values_ex(e.ctx, &v0));
	ASSERT_EQ(IBV_VALUES_MASK_RAW_CLOCK, v0.comp_mask);
	flush_recvs(qp, 1, 1);
	ASSERT_OK(ibv_query_rt_values_ex(e.ctx, &v1));
	ASSERT_OK(ibv_start_poll(cqx, &pa));
	ts = ibv_wc_read_completion_ts(cqx);
	ibv_end_poll(cqx);
	ASSERT_EQ(0, v0.raw_clock.tv_sec);
	ASSERT_LE((uint64_t)v0.raw_clock.tv_nsec, ts);
	ASSERT_LE(ts, (uint64_t)v1.raw_clock.tv_nsec);
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));
	sv_end_close(&e);
}

/* A poller thread drains the CQ while this thread makes completions and
 * resizes it up and down: every completion arrives once, in order. */
struct poller {
	struct ibv_cq *cq;
	_Atomic uint64_t got; /* completions polled */
	_Atomic bool stop;
	_Atomic bool bad; /* a wr_id out of order, or a poll error */
};

static void *poll_thread(void *arg)
{
	struct poller *p = arg;
	struct ibv_wc wc[8];

	while (!atomic_load(&p->stop)) {
		int k = ibv_poll_cq(p->cq, 8, wc);

		if (k < 0)
			atomic_store(&p->bad, true);
		for (int i = 0; i < k; i++) {
			uint64_t want = atomic_load(&p->got) + 1;

			if (wc[i].wr_id != want ||
			    wc[i].status != IBV_WC_WR_FLUSH_ERR)
				atomic_store(&p->bad, true);
			atomic_store(&p->got, want);
		}
	}
	return NULL;
}

SV_TEST(resize_cq_under_concurrent_poller)
{
	enum { K = 24, ROUNDS = 2000 };
	struct poller p = {0};
	pthread_t t;
	struct ibv_qp *qp;
	struct sv_end e;
	uint64_t id = 1;
	int sizes[] = {K, 4 * K, K + 3, 1000, 2 * K};

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	p.cq = ibv_create_cq(e.ctx, K, NULL, NULL, 0);
	ASSERT_NOT_NULL(p.cq);
	qp = flush_qp(&e, p.cq);
	ASSERT_OK(pthread_create(&t, NULL, poll_thread, &p));
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t t0 = sv_now_ms();

		/* at most K queued, every size >= K: never an overrun */
		flush_recvs(qp, id, K / 2);
		ASSERT_OK(ibv_resize_cq(p.cq, sizes[r % 5]));
		flush_recvs(qp, id + K / 2, K / 2);
		ASSERT_OK(ibv_resize_cq(p.cq, sizes[(r + 2) % 5]));
		id += K;
		while (atomic_load(&p.got) != id - 1) {
			ASSERT_FALSE(atomic_load(&p.bad));
			ASSERT_TRUE(sv_now_ms() - t0 < 10000);
			sched_yield();
		}
	}
	atomic_store(&p.stop, true);
	ASSERT_OK(pthread_join(t, NULL));
	ASSERT_FALSE(atomic_load(&p.bad));
	ASSERT_EQ(id - 1, atomic_load(&p.got));
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_cq(p.cq));
	sv_end_close(&e);
}
