// SPDX-License-Identifier: MIT
/*
 * Calls into build/lib/libibverbs.so.1 loaded with dlopen(RTLD_NOW): the
 * pure functions answer as rdma-core's, the unsupported verbs and the
 * IBVERBS_1.0 / PRIVATE_34 symbols fail honestly, and the hardware
 * providers perftest links load against us.  No device is needed.
 */
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>

#include "abi_lib.h"
#include "sv_test.h"

static void *lib(void)
{
	void *h = dlopen(abi_lib_path(), RTLD_NOW | RTLD_LOCAL);

	if (!h)
		sv_test_fail(__FILE__, __LINE__, "dlopen: %s", dlerror());
	return h;
}

/* The default (@@) definition of `name`. */
static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p)
		sv_test_fail(__FILE__, __LINE__, "dlsym %s: %s", name,
			     dlerror());
	return p;
}

/* name@node, which may be a non-default (compat) version. */
static void *vsym(void *h, const char *name, const char *node)
{
	void *p = dlvsym(h, name, node);

	if (!p)
		sv_test_fail(__FILE__, __LINE__, "dlvsym %s@%s: %s", name, node,
			     dlerror());
	return p;
}

SV_TEST(status_and_enum_strings)
{
	void *h = lib();
	const char *(*wc_str)(enum ibv_wc_status) = sym(h, "ibv_wc_status_str");
	const char *(*ev_str)(enum ibv_event_type) =
		sym(h, "ibv_event_type_str");
	const char *(*node_str)(enum ibv_node_type) =
		sym(h, "ibv_node_type_str");
	const char *(*port_str)(enum ibv_port_state) =
		sym(h, "ibv_port_state_str");

	ASSERT_STR_EQ("success", wc_str(IBV_WC_SUCCESS));
	ASSERT_STR_EQ("Work Request Flushed Error",
		      wc_str(IBV_WC_WR_FLUSH_ERR));
	ASSERT_STR_EQ("transport retry counter exceeded",
		      wc_str(IBV_WC_RETRY_EXC_ERR));
	ASSERT_STR_EQ("TM software rendezvous",
		      wc_str(IBV_WC_TM_RNDV_INCOMPLETE));
	ASSERT_STR_EQ("unknown", wc_str((enum ibv_wc_status)999));
	ASSERT_STR_EQ("unknown", wc_str((enum ibv_wc_status) - 1));
	ASSERT_STR_EQ("port active", ev_str(IBV_EVENT_PORT_ACTIVE));
	ASSERT_STR_EQ("WQ fatal", ev_str(IBV_EVENT_WQ_FATAL));
	ASSERT_STR_EQ("unknown", ev_str((enum ibv_event_type)100));
	ASSERT_STR_EQ("InfiniBand channel adapter", node_str(IBV_NODE_CA));
	ASSERT_STR_EQ("unknown", node_str(IBV_NODE_UNKNOWN));
	ASSERT_STR_EQ("active", port_str(IBV_PORT_ACTIVE));
	ASSERT_STR_EQ("unknown", port_str((enum ibv_port_state)42));
	dlclose(h);
}

SV_TEST(rate_conversions)
{
	void *h = lib();
	int (*to_mult)(enum ibv_rate) =
		vsym(h, "ibv_rate_to_mult", "IBVERBS_1.0");
	enum ibv_rate (*from_mult)(int) =
		vsym(h, "mult_to_ibv_rate", "IBVERBS_1.0");
	int (*to_mbps)(enum ibv_rate) = sym(h, "ibv_rate_to_mbps");
	enum ibv_rate (*from_mbps)(int) = sym(h, "mbps_to_ibv_rate");

	ASSERT_EQ(4, to_mult(IBV_RATE_10_GBPS));
	ASSERT_EQ(-1, to_mult(IBV_RATE_100_GBPS)); /* not a multiple */
	ASSERT_EQ(-1, to_mult(IBV_RATE_MAX));
	ASSERT_EQ(IBV_RATE_40_GBPS, from_mult(16));
	ASSERT_EQ(IBV_RATE_MAX, from_mult(0));
	ASSERT_EQ(IBV_RATE_MAX, from_mult(3));
	ASSERT_EQ(103125, to_mbps(IBV_RATE_100_GBPS));
	ASSERT_EQ(14062, to_mbps(IBV_RATE_14_GBPS));
	ASSERT_EQ(-1, to_mbps((enum ibv_rate)99));
	ASSERT_EQ(IBV_RATE_56_GBPS, from_mbps(56250));
	ASSERT_EQ(IBV_RATE_MAX, from_mbps(100000));
	for (int r = IBV_RATE_2_5_GBPS; r <= IBV_RATE_1200_GBPS; r++)
		ASSERT_EQ(r, from_mbps(to_mbps((enum ibv_rate)r)));
	dlclose(h);
}

/* Missing features fail per contract, and touch none of their arguments. */
SV_TEST(unsupported_verbs_fail_honestly)
{
	void *h = lib();
	struct ibv_ah *(*create_ah)(struct ibv_pd *, struct ibv_ah_attr *) =
		sym(h, "ibv_create_ah");
	int (*resize_cq)(struct ibv_cq *, int) = sym(h, "ibv_resize_cq");
	int (*attach)(struct ibv_qp *, const union ibv_gid *, uint16_t) =
		sym(h, "ibv_attach_mcast");
	int (*rereg)(struct ibv_mr *, int, struct ibv_pd *, void *, size_t,
		     int) = sym(h, "ibv_rereg_mr");
	struct ibv_context *(*import_dev)(int) = sym(h, "ibv_import_device");
	int (*in_order)(struct ibv_qp *, enum ibv_wr_opcode, uint32_t) =
		sym(h, "ibv_query_qp_data_in_order");

	/* implemented (ah.c, conf_ud.c): no PD is an invalid argument */
	errno = 0;
	ASSERT_NULL(create_ah(NULL, NULL));
	ASSERT_EQ(EINVAL, errno);
	/* implemented (import.c, conf_import.c): no fd is an invalid
	 * argument, as rdma-core says */
	errno = 0;
	ASSERT_NULL(import_dev(-1));
	ASSERT_EQ(EINVAL, errno);
	/* implemented (cq.c, conf_device.c): no CQ is an invalid argument,
	 * no longer a missing feature */
	ASSERT_EQ(EINVAL, resize_cq(NULL, 16));
	/* implemented (mcast.c, conf_mcast.c): no QP is an invalid argument */
	ASSERT_EQ(EINVAL, attach(NULL, NULL, 0));
	/* implemented (mr.c): no MR is an input error, the old MR intact */
	ASSERT_EQ(IBV_REREG_MR_ERR_INPUT, rereg(NULL, 0, NULL, NULL, 0, 0));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(0, in_order(NULL, IBV_WR_RDMA_WRITE, 0));
	dlclose(h);
}

/*
 * Memory windows have no exported symbol: ibv_alloc_mw, ibv_dealloc_mw
 * and ibv_bind_mw are verbs.h inlines compiled into the program, reading
 * context->ops at rdma-core 44's offsets (alloc_mw is checked for NULL,
 * the other two are called blind).  Through the dlopen'd library: every
 * op is there, and each inline lands in it with the right answer.
 */
SV_TEST(mw_inline_ops_land_in_provider)
{
	void *h = lib();
	struct ibv_device **(*get_list)(int *) = sym(h, "ibv_get_device_list");
	void (*free_list)(struct ibv_device **) =
		sym(h, "ibv_free_device_list");
	struct ibv_context *(*open_dev)(struct ibv_device *) =
		sym(h, "ibv_open_device");
	int (*close_dev)(struct ibv_context *) = sym(h, "ibv_close_device");
	struct ibv_pd *(*alloc_pd)(struct ibv_context *) =
		sym(h, "ibv_alloc_pd");
	int (*dealloc_pd)(struct ibv_pd *) = sym(h, "ibv_dealloc_pd");
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mw *m1, *m2;
	struct ibv_mw_bind b = {0};
	int n = 0;

	list = get_list(&n);
	ASSERT_NOT_NULL(list);
	ASSERT_GE(n, 1);
	ctx = open_dev(list[0]);
	ASSERT_NOT_NULL(ctx);
	ASSERT_NOT_NULL(ctx->ops.alloc_mw);
	ASSERT_NOT_NULL(ctx->ops.bind_mw);
	ASSERT_NOT_NULL(ctx->ops.dealloc_mw);
	pd = alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	m1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	m2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(m1);
	ASSERT_NOT_NULL(m2);
	ASSERT_TRUE(m1->context == ctx && m1->pd == pd);
	errno = 0;
	ASSERT_NULL(ibv_alloc_mw(pd, (enum ibv_mw_type)7));
	ASSERT_EQ(EINVAL, errno);
	/* the inline refuses a type 2 window; the provider a QP-less bind
	 * of a type 1 one is never reached: ops.bind_mw with no QP state
	 * would need a QP, so only the inline's own checks are here */
	ASSERT_EQ(EINVAL, ibv_bind_mw(NULL, m2, &b));
	b.bind_info.length = 1; /* a range with no MR */
	ASSERT_EQ(EINVAL, ibv_bind_mw(NULL, m1, &b));
	ASSERT_EQ(EBUSY, dealloc_pd(pd)); /* windows live on it */
	ASSERT_EQ(0, ibv_dealloc_mw(m1));
	ASSERT_EQ(0, ibv_dealloc_mw(m2));
	ASSERT_EQ(0, dealloc_pd(pd));
	ASSERT_EQ(0, close_dev(ctx));
	free_list(list);
	dlclose(h);
}

/*
 * Device memory has no exported symbol either: ibv_alloc_dm, ibv_free_dm
 * and ibv_reg_dm_mr are inlines that find their ops in the verbs_context
 * through verbs_get_ctx_op (sz and abi_compat checked: without them the
 * inline says EOPNOTSUPP), ibv_memcpy_to_dm/from_dm call the dm's own
 * pointers.  Each lands in the provider with the right answer.
 */
SV_TEST(dm_inline_ops_land_in_provider)
{
	void *h = lib();
	struct ibv_device **(*get_list)(int *) = sym(h, "ibv_get_device_list");
	void (*free_list)(struct ibv_device **) =
		sym(h, "ibv_free_device_list");
	struct ibv_context *(*open_dev)(struct ibv_device *) =
		sym(h, "ibv_open_device");
	int (*close_dev)(struct ibv_context *) = sym(h, "ibv_close_device");
	struct ibv_pd *(*alloc_pd)(struct ibv_context *) =
		sym(h, "ibv_alloc_pd");
	int (*dealloc_pd)(struct ibv_pd *) = sym(h, "ibv_dealloc_pd");
	int (*dereg_mr)(struct ibv_mr *) = sym(h, "ibv_dereg_mr");
	struct ibv_alloc_dm_attr attr = {.length = 4096};
	struct ibv_device_attr_ex ax;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_dm *dm;
	struct ibv_mr *mr;
	char out[6] = "";
	int n = 0;

	list = get_list(&n);
	ASSERT_NOT_NULL(list);
	ASSERT_GE(n, 1);
	ctx = open_dev(list[0]);
	ASSERT_NOT_NULL(ctx);
	ASSERT_NOT_NULL(verbs_get_ctx_op(ctx, alloc_dm));
	ASSERT_NOT_NULL(verbs_get_ctx_op(ctx, free_dm));
	ASSERT_NOT_NULL(verbs_get_ctx_op(ctx, reg_dm_mr));
	/* the inline's own op (its fallback is an export we do not link) */
	ASSERT_OK(verbs_get_ctx_op(ctx, query_device_ex)
			  ->query_device_ex(ctx, NULL, &ax, sizeof(ax)));
	ASSERT_EQ(256 << 10, ax.max_dm_size);
	pd = alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	dm = ibv_alloc_dm(ctx, &attr);
	ASSERT_NOT_NULL(dm);
	ASSERT_TRUE(dm->context == ctx);
	ASSERT_OK(ibv_memcpy_to_dm(dm, 10, "hello", 6));
	ASSERT_OK(ibv_memcpy_from_dm(out, dm, 10, 6));
	ASSERT_STR_EQ("hello", out);
	ASSERT_EQ(EFAULT, ibv_memcpy_to_dm(dm, 4092, "hello", 6));
	errno = 0;
	ASSERT_NULL(ibv_reg_dm_mr(pd, dm, 0, 4096, IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(EINVAL, errno);
	mr = ibv_reg_dm_mr(pd, dm, 0, 4096,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(EBUSY, ibv_free_dm(dm));
	ASSERT_EQ(0, dereg_mr(mr));
	ASSERT_EQ(0, ibv_free_dm(dm));
	attr.length = (256 << 10) + 1;
	errno = 0;
	ASSERT_NULL(ibv_alloc_dm(ctx, &attr));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(0, dealloc_pd(pd));
	ASSERT_EQ(0, close_dev(ctx));
	free_list(list);
	dlclose(h);
}

/* The shared-object verbs (issue 28 item 6) through the dlopen'd
 * library: each lands in the provider and round-trips (import.c;
 * conf_import.c has their behaviour). */
SV_TEST(import_verbs_land_in_provider)
{
	void *h = lib();
	struct ibv_device **(*get_list)(int *) = sym(h, "ibv_get_device_list");
	void (*free_list)(struct ibv_device **) =
		sym(h, "ibv_free_device_list");
	struct ibv_context *(*open_dev)(struct ibv_device *) =
		sym(h, "ibv_open_device");
	int (*close_dev)(struct ibv_context *) = sym(h, "ibv_close_device");
	struct ibv_pd *(*alloc_pd)(struct ibv_context *) =
		sym(h, "ibv_alloc_pd");
	int (*dealloc_pd)(struct ibv_pd *) = sym(h, "ibv_dealloc_pd");
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int) =
		sym(h, "ibv_reg_mr");
	int (*dereg_mr)(struct ibv_mr *) = sym(h, "ibv_dereg_mr");
	struct ibv_context *(*import_dev)(int) = sym(h, "ibv_import_device");
	struct ibv_pd *(*import_pd)(struct ibv_context *, uint32_t) =
		sym(h, "ibv_import_pd");
	struct ibv_mr *(*import_mr)(struct ibv_pd *, uint32_t) =
		sym(h, "ibv_import_mr");
	void (*unimport_pd)(struct ibv_pd *) = sym(h, "ibv_unimport_pd");
	void (*unimport_mr)(struct ibv_mr *) = sym(h, "ibv_unimport_mr");
	struct ibv_dm *(*import_dm)(struct ibv_context *, uint32_t) =
		sym(h, "ibv_import_dm");
	static char buf[4096];
	struct ibv_device **list = get_list(NULL);
	struct ibv_context *ctx, *ic;
	struct ibv_pd *pd, *ipd;
	struct ibv_mr *mr, *imr;

	ASSERT_NOT_NULL(list);
	ctx = open_dev(list[0]);
	ASSERT_NOT_NULL(ctx);
	pd = alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	mr = reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ic = import_dev(dup(ctx->cmd_fd));
	ASSERT_NOT_NULL(ic);
	ipd = import_pd(ic, pd->handle);
	ASSERT_NOT_NULL(ipd);
	imr = import_mr(ipd, mr->handle);
	ASSERT_NOT_NULL(imr);
	ASSERT_EQ(mr->lkey, imr->lkey);
	errno = 0;
	ASSERT_NULL(import_dm(ic, 0)); /* no DM has handle 0 */
	ASSERT_EQ(EINVAL, errno);
	{
		void (*unimport_dm)(struct ibv_dm *) =
			sym(h, "ibv_unimport_dm");
		struct ibv_alloc_dm_attr da = {.length = 4096};
		struct ibv_dm *dm = ibv_alloc_dm(ctx, &da), *idm;

		ASSERT_NOT_NULL(dm);
		idm = import_dm(ic, dm->handle);
		ASSERT_NOT_NULL(idm);
		ASSERT_EQ(dm->handle, idm->handle);
		unimport_dm(idm);
		ASSERT_EQ(0, ibv_free_dm(dm));
	}
	unimport_mr(imr);
	unimport_pd(ipd);
	ASSERT_EQ(0, close_dev(ic));
	ASSERT_EQ(0, dereg_mr(mr));
	ASSERT_EQ(0, dealloc_pd(pd));
	ASSERT_EQ(0, close_dev(ctx));
	free_list(list);
	dlclose(h);
}

/* Old binaries reach the 1.0 symbols: they fail, they do not crash. */
/*
 * ibv_advise_mr has no exported symbol either: a verbs.h inline that
 * finds verbs_context.advise_mr through verbs_get_ctx_op (the context's
 * sz must reach it, else the inline answers EOPNOTSUPP itself).  Through
 * the dlopen'd library: the op is there, and the inline's answers are
 * the provider's (an ODP MR prefetched, a pinned one ENOENT, bad flags
 * EINVAL, an unknown advice EOPNOTSUPP from the provider).
 */
SV_TEST(advise_mr_inline_lands_in_provider)
{
	void *h = lib();
	struct ibv_device **(*get_list)(int *) = sym(h, "ibv_get_device_list");
	void (*free_list)(struct ibv_device **) =
		sym(h, "ibv_free_device_list");
	struct ibv_context *(*open_dev)(struct ibv_device *) =
		sym(h, "ibv_open_device");
	int (*close_dev)(struct ibv_context *) = sym(h, "ibv_close_device");
	struct ibv_pd *(*alloc_pd)(struct ibv_context *) =
		sym(h, "ibv_alloc_pd");
	int (*dealloc_pd)(struct ibv_pd *) = sym(h, "ibv_dealloc_pd");
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int) =
		sym(h, "ibv_reg_mr");
	int (*dereg_mr)(struct ibv_mr *) = sym(h, "ibv_dereg_mr");
	static uint8_t buf[8192] __attribute__((aligned(4096)));
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_mr *odp, *pinned;
	struct ibv_sge sg;
	struct ibv_pd *pd;
	int n = 0;

	list = get_list(&n);
	ASSERT_NOT_NULL(list);
	ASSERT_GE(n, 1);
	ctx = open_dev(list[0]);
	ASSERT_NOT_NULL(ctx);
	ASSERT_NOT_NULL(verbs_get_ctx_op(ctx, advise_mr));
	pd = alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	odp = reg_mr(pd, buf, 4096,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	pinned = reg_mr(pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_TRUE(odp && pinned);
	sg = (struct ibv_sge){(uintptr_t)buf, 4096, odp->lkey};
	ASSERT_EQ(0, ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				   IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1));
	ASSERT_EQ(EINVAL,
		  ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, &sg, 1));
	ASSERT_EQ(EOPNOTSUPP,
		  ibv_advise_mr(pd, (enum ibv_advise_mr_advice)9, 0, &sg, 1));
	sg = (struct ibv_sge){(uintptr_t)buf + 4096, 4096, pinned->lkey};
	ASSERT_EQ(ENOENT, ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH,
					IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1));
	ASSERT_EQ(0, dereg_mr(odp));
	ASSERT_EQ(0, dereg_mr(pinned));
	ASSERT_EQ(0, dealloc_pd(pd));
	ASSERT_EQ(0, close_dev(ctx));
	free_list(list);
	dlclose(h);
}

/*
 * Thread and parent domains have no exported symbol either: ibv_alloc_td,
 * ibv_dealloc_td and ibv_alloc_parent_domain are verbs.h inlines that
 * find their op in struct verbs_context (checked against vctx->sz); the
 * parent domain goes with the exported ibv_dealloc_pd.  ibv_modify_cq's
 * op is absent on purpose: its inline answers EOPNOTSUPP.
 */
SV_TEST(td_inline_ops_land_in_provider)
{
	void *h = lib();
	struct ibv_device **(*get_list)(int *) = sym(h, "ibv_get_device_list");
	void (*free_list)(struct ibv_device **) =
		sym(h, "ibv_free_device_list");
	struct ibv_context *(*open_dev)(struct ibv_device *) =
		sym(h, "ibv_open_device");
	int (*close_dev)(struct ibv_context *) = sym(h, "ibv_close_device");
	struct ibv_pd *(*alloc_pd)(struct ibv_context *) =
		sym(h, "ibv_alloc_pd");
	int (*dealloc_pd)(struct ibv_pd *) = sym(h, "ibv_dealloc_pd");
	struct ibv_td_init_attr ta = {0};
	struct ibv_parent_domain_init_attr pa = {0};
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pdom;
	struct ibv_td *td;
	int n = 0;

	list = get_list(&n);
	ASSERT_NOT_NULL(list);
	ASSERT_GE(n, 1);
	ctx = open_dev(list[0]);
	ASSERT_NOT_NULL(ctx);
	ASSERT_NOT_NULL(verbs_get_ctx_op(ctx, alloc_td));
	ASSERT_NOT_NULL(verbs_get_ctx_op(ctx, dealloc_td));
	ASSERT_NOT_NULL(verbs_get_ctx_op(ctx, alloc_parent_domain));
	ASSERT_NULL(verbs_get_ctx_op(ctx, modify_cq));
	pd = alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	td = ibv_alloc_td(ctx, &ta);
	ASSERT_NOT_NULL(td);
	pa.pd = pd;
	pa.td = td;
	pdom = ibv_alloc_parent_domain(ctx, &pa);
	ASSERT_NOT_NULL(pdom);
	ASSERT_EQ(EBUSY, ibv_dealloc_td(td));
	ASSERT_EQ(EBUSY, dealloc_pd(pd));
	ASSERT_EQ(0, dealloc_pd(pdom));
	ASSERT_EQ(0, ibv_dealloc_td(td));
	ASSERT_EQ(0, dealloc_pd(pd));
	ASSERT_EQ(0, close_dev(ctx));
	free_list(list);
	dlclose(h);
}

SV_TEST(compat_1_0_symbols_fail_honestly)
{
	void *h = lib();
	struct ibv_device **(*list_1_0)(int *) =
		vsym(h, "ibv_get_device_list", "IBVERBS_1.0");
	void *(*open_1_0)(void *) = vsym(h, "ibv_open_device", "IBVERBS_1.0");
	int (*dealloc_1_0)(void *) = vsym(h, "ibv_dealloc_pd", "IBVERBS_1.0");
	int num = 7;

	ASSERT_TRUE((void *)list_1_0 != sym(h, "ibv_get_device_list"));
	errno = 0;
	ASSERT_NULL(list_1_0(&num));
	ASSERT_EQ(0, num);
	ASSERT_EQ(ENOSYS, errno);
	errno = 0;
	ASSERT_NULL(open_1_0(NULL));
	ASSERT_EQ(EOPNOTSUPP, errno);
	ASSERT_EQ(EOPNOTSUPP, dealloc_1_0(NULL));
	/* Compat-only: reachable by version, never by a plain lookup. */
	ASSERT_NULL(dlsym(h, "ibv_register_driver"));
	vsym(h, "ibv_register_driver", "IBVERBS_1.1");
	dlclose(h);
}

SV_TEST(private34_symbols_are_harmless)
{
	void *h = lib();
	int (*destroy_cq)(void *) =
		vsym(h, "ibv_cmd_destroy_cq", "IBVERBS_PRIVATE_34");
	void *(*open_dev)(void *, void *) =
		vsym(h, "verbs_open_device", "IBVERBS_PRIVATE_34");
	void (*reg)(const void *) =
		vsym(h, "verbs_register_driver_34", "IBVERBS_PRIVATE_34");
	bool *allow = vsym(h, "verbs_allow_disassociate_destroy",
			   "IBVERBS_PRIVATE_34");

	ASSERT_EQ(EOPNOTSUPP, destroy_cq(NULL));
	errno = 0;
	ASSERT_NULL(open_dev(NULL, NULL));
	ASSERT_EQ(EOPNOTSUPP, errno);
	reg(NULL);
	ASSERT_FALSE(*allow);
	dlclose(h);
}

/*
 * perftest's providers bind to us at load time (their constructors call
 * verbs_register_driver_34).  Ours is already loaded under the soname
 * libibverbs.so.1, so ld.so resolves their NEEDED entry to it.
 */
SV_TEST(hardware_providers_load_against_us)
{
	static const char *const providers[] = {"libmlx5.so.1", "libefa.so.1",
						"librdmacm.so.1"};
	void *h = lib();

	for (size_t i = 0; i < sizeof(providers) / sizeof(providers[0]); i++) {
		void *p = dlopen(providers[i], RTLD_NOW | RTLD_LOCAL);

		if (!p) {
			const char *e = dlerror();

			/* Absent is fine; present but unresolved is not. */
			if (e && strstr(e, "cannot open shared object"))
				continue;
			sv_test_fail(__FILE__, __LINE__, "%s: %s", providers[i],
				     e);
		}
		dlclose(p);
	}
	dlclose(h);
}

/* The historical kernel-struct translations are real copies. */
SV_TEST(path_rec_round_trip)
{
	void *h = lib();
	void (*to_kern)(struct ib_user_path_rec *, struct ibv_sa_path_rec *) =
		sym(h, "ibv_copy_path_rec_to_kern");
	void (*from_kern)(struct ibv_sa_path_rec *, struct ib_user_path_rec *) =
		sym(h, "ibv_copy_path_rec_from_kern");
	struct ibv_sa_path_rec a = {0}, b = {0};
	struct ib_user_path_rec k;

	memset(a.dgid.raw, 0xab, sizeof(a.dgid.raw));
	a.sgid.raw[15] = 1;
	a.dlid = htobe16(7);
	a.pkey = htobe16(0xffff);
	a.mtu = IBV_MTU_4096;
	a.sl = 3;
	a.packet_life_time_selector = 2;
	memset(&k, 0x5a, sizeof(k));
	to_kern(&k, &a);
	ASSERT_EQ(0xab, k.dgid[3]);
	ASSERT_EQ(htobe16(7), k.dlid);
	from_kern(&b, &k);
	ASSERT_OK(memcmp(&a, &b, sizeof(a)));
	dlclose(h);
}

/* Without a GRH, the address comes from the completion alone. */
SV_TEST(init_ah_from_wc_without_grh)
{
	void *h = lib();
	int (*init_ah)(struct ibv_context *, uint8_t, struct ibv_wc *,
		       struct ibv_grh *, struct ibv_ah_attr *) =
		sym(h, "ibv_init_ah_from_wc");
	struct ibv_wc wc = {.slid = 0x12, .sl = 5, .dlid_path_bits = 1};
	struct ibv_ah_attr ah;

	memset(&ah, 0xff, sizeof(ah));
	ASSERT_OK(init_ah(NULL, 1, &wc, NULL, &ah));
	ASSERT_EQ(0x12, ah.dlid);
	ASSERT_EQ(5, ah.sl);
	ASSERT_EQ(1, ah.src_path_bits);
	ASSERT_EQ(1, ah.port_num);
	ASSERT_EQ(0, ah.is_global);
	dlclose(h);
}

/*
 * The sysfs entry points answer as rdma-core's: the root is $SYSFS_PATH
 * without trailing slashes, else "/sys" -- never NULL, which librdmacm
 * passes straight on (it crashed every program that loads it) -- and
 * the readers refuse NULL instead of dereferencing it.
 */
SV_TEST(sysfs_entry_points)
{
	void *h;
	const char *(*path)(void);
	int (*read_file)(const char *, const char *, char *, size_t);
	char buf[64];

	ASSERT_OK(setenv("SYSFS_PATH", "/nonexistent/sysfs//", 1));
	h = lib();
	path = sym(h, "ibv_get_sysfs_path");
	read_file = sym(h, "ibv_read_sysfs_file");
	ASSERT_STR_EQ("/nonexistent/sysfs", path());
	ASSERT_TRUE(path() == path()); /* one string for the process */
	errno = 0;
	ASSERT_EQ(-1, read_file(path(), "class/misc/rdma_cm/abi_version", buf,
				sizeof(buf)));
	ASSERT_EQ(ENOENT, errno);
	errno = 0;
	ASSERT_EQ(-1, read_file(NULL, "abi_version", buf, sizeof(buf)));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(-1, read_file("/sys", NULL, buf, sizeof(buf)));
	ASSERT_EQ(-1, read_file("/sys", "x", NULL, sizeof(buf)));
	/* softverbs0's own files, under the device's ibdev_path */
	ASSERT_EQ(9, read_file("/sys/class/infiniband/softverbs0", "board_id",
			       buf, sizeof(buf)));
	ASSERT_STR_EQ("SOFTVERBS", buf);
	dlclose(h);
}

SV_TEST(sysfs_path_default)
{
	void *h;
	const char *(*path)(void);

	ASSERT_OK(unsetenv("SYSFS_PATH"));
	h = lib();
	path = sym(h, "ibv_get_sysfs_path");
	ASSERT_STR_EQ("/sys", path());
	dlclose(h);
}

/*
 * The system's librdmacm on a machine without the RDMA CM, loaded against
 * us: its start-up succeeds and its calls fail cleanly (this crashed in
 * strcmp(NULL) while ibv_get_sysfs_path() returned NULL).
 */
SV_TEST(system_librdmacm_fails_cleanly)
{
	void *h = lib(), *cm = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL);
	void *(*create_channel)(void);
	struct ibv_context **(*get_devices)(int *);
	void (*free_devices)(struct ibv_context **);
	struct ibv_context **list;
	int n = -1;

	if (!cm) {
		printf("SKIP: librdmacm.so.1 is not installed (%s)\n",
		       dlerror());
		dlclose(h);
		return;
	}
	create_channel = sym(cm, "rdma_create_event_channel");
	get_devices = sym(cm, "rdma_get_devices");
	free_devices = sym(cm, "rdma_free_devices");
	errno = 0;
	ASSERT_NULL(create_channel()); /* no /dev/infiniband/rdma_cm */
	ASSERT_NE(0, errno);
	/* the verbs side is there: it lists softverbs0's context, and
	 * softverbs_roce0's on a host with a net interface (docs/roce.md) */
	list = get_devices(&n);
	ASSERT_NOT_NULL(list);
	ASSERT_TRUE(n == 1 || n == 2);
	ASSERT_STR_EQ("softverbs0", list[0]->device->name);
	if (n == 2)
		ASSERT_STR_EQ("softverbs_roce0", list[1]->device->name);
	free_devices(list);
	/* no dlclose: librdmacm keeps softverbs0's context open until exit,
	 * and with it our progress thread, which runs our code */
}
