// SPDX-License-Identifier: MIT
/*
 * Verbs steps of rc_pingpong, one function each, in the order the paper
 * takes them.  Each step prints its own failure, once, and --explain
 * narrates it.  pp_init_ctx() strings them together and unwinds in
 * reverse; pp_close_ctx() is the same unwinding for a finished run.
 */
#include "pingpong.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "explain.h"

struct ibv_device *pp_find_device(struct ibv_device **list, const char *name)
{
	if (!name) {
		if (!list[0])
			fprintf(stderr, "No IB devices found\n");
		return list[0];
	}
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			return list[i];
	fprintf(stderr, "IB device %s not found\n", name);
	return NULL;
}

/* The message buffer: page aligned, as registered memory likes it. */
static int alloc_buf(struct pp_context *ctx)
{
	void *p;

	if (posix_memalign(&p, (size_t)ctx->page_size, ctx->buf_size)) {
		fprintf(stderr, "Couldn't allocate work buf.\n");
		return -1;
	}
	ctx->buf = p;
	memset(ctx->buf, 0x7b, ctx->buf_size);
	return 0;
}

static int open_device(struct pp_context *ctx, struct ibv_device *dev)
{
	ctx->context = ibv_open_device(dev);
	if (!ctx->context) {
		fprintf(stderr, "Couldn't get context for %s\n",
			ibv_get_device_name(dev));
		return -1;
	}
	pp_explain(PP_STEP_OPEN_DEVICE, "ibv_open_device(%s) -> context %p",
		   ibv_get_device_name(dev), (void *)ctx->context);
	return 0;
}

static int create_comp_channel(struct pp_context *ctx)
{
	if (!ctx->opt->use_event)
		return 0;
	ctx->channel = ibv_create_comp_channel(ctx->context);
	if (!ctx->channel) {
		fprintf(stderr, "Couldn't create completion channel\n");
		return -1;
	}
	pp_explain(PP_STEP_CREATE_COMP_CHANNEL,
		   "ibv_create_comp_channel(context) -> fd %d",
		   ctx->channel->fd);
	return 0;
}

static int alloc_pd(struct pp_context *ctx)
{
	ctx->pd = ibv_alloc_pd(ctx->context);
	if (!ctx->pd) {
		fprintf(stderr, "Couldn't allocate PD\n");
		return -1;
	}
	pp_explain(PP_STEP_ALLOC_PD, "ibv_alloc_pd(context) -> pd handle %u",
		   ctx->pd->handle);
	return 0;
}

/* -o/-O/-t/-j need features a device may lack: check them all first. */
static int check_features(struct pp_context *ctx)
{
	const uint32_t rc_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
	const struct pp_options *opt = ctx->opt;
	struct ibv_device_attr_ex attrx;

	if (!opt->use_odp && !opt->use_ts && !opt->use_dm)
		return 0;
	if (ibv_query_device_ex(ctx->context, NULL, &attrx)) {
		fprintf(stderr, "Couldn't query device for its features\n");
		return -1;
	}
	pp_explain(PP_STEP_QUERY_DEVICE_EX,
		   "ibv_query_device_ex() -> odp general_caps 0x%" PRIx64
		   ", rc_odp_caps 0x%x, completion_timestamp_mask 0x%" PRIx64
		   ", max_dm_size %" PRIu64,
		   attrx.odp_caps.general_caps,
		   attrx.odp_caps.per_transport_caps.rc_odp_caps,
		   attrx.completion_timestamp_mask, attrx.max_dm_size);
	if (opt->use_odp) {
		if (!(attrx.odp_caps.general_caps & IBV_ODP_SUPPORT) ||
		    (attrx.odp_caps.per_transport_caps.rc_odp_caps & rc_caps) !=
			    rc_caps) {
			fprintf(stderr,
				"The device isn't ODP capable or does not "
				"support RC send and receive with ODP\n");
			return -1;
		}
		if (opt->implicit_odp &&
		    !(attrx.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT)) {
			fprintf(stderr,
				"The device doesn't support implicit ODP\n");
			return -1;
		}
	}
	if (opt->use_ts) {
		if (!attrx.completion_timestamp_mask) {
			fprintf(stderr, "The device isn't completion "
					"timestamp capable\n");
			return -1;
		}
		ctx->completion_timestamp_mask =
			attrx.completion_timestamp_mask;
	}
	if (opt->use_dm) {
		if (!attrx.max_dm_size) {
			fprintf(stderr,
				"Device doesn't support dm allocation\n");
			return -1;
		}
		if (attrx.max_dm_size < ctx->buf_size) {
			fprintf(stderr, "Device memory is insufficient\n");
			return -1;
		}
	}
	return 0;
}

static int alloc_dm(struct pp_context *ctx)
{
	struct ibv_alloc_dm_attr attr = {.length = ctx->buf_size};

	if (!ctx->opt->use_dm)
		return 0;
	ctx->dm = ibv_alloc_dm(ctx->context, &attr);
	if (!ctx->dm) {
		fprintf(stderr, "Dev mem allocation failed\n");
		return -1;
	}
	pp_explain(PP_STEP_ALLOC_DM, "ibv_alloc_dm(length %u) -> dm %p",
		   ctx->buf_size, (void *)ctx->dm);
	return 0;
}

/* Host buffer, device memory (zero based) or one implicit ODP region. */
static int reg_mr(struct pp_context *ctx)
{
	const struct pp_options *opt = ctx->opt;
	int access = IBV_ACCESS_LOCAL_WRITE;

	if (opt->use_odp)
		access |= IBV_ACCESS_ON_DEMAND;
	if (opt->implicit_odp) {
		ctx->mr = ibv_reg_mr(ctx->pd, NULL, SIZE_MAX, access);
	} else if (opt->use_dm) {
		access |= IBV_ACCESS_ZERO_BASED;
		ctx->mr = ibv_reg_dm_mr(ctx->pd, ctx->dm, 0, ctx->buf_size,
					access);
	} else {
		ctx->mr = ibv_reg_mr(ctx->pd, ctx->buf, ctx->buf_size, access);
	}
	if (!ctx->mr) {
		fprintf(stderr, "Couldn't register MR\n");
		return -1;
	}
	pp_explain(PP_STEP_REG_MR,
		   "ibv_reg_mr(pd, %s, %u bytes, access 0x%x) -> lkey 0x%x, "
		   "rkey 0x%x",
		   opt->implicit_odp ? "NULL (implicit)"
		   : opt->use_dm     ? "device memory"
				     : "buf",
		   ctx->buf_size, access, ctx->mr->lkey, ctx->mr->rkey);
	return 0;
}

/* A failed prefetch is only slower, so the run goes on (as upstream). */
static void prefetch_mr(struct pp_context *ctx)
{
	struct ibv_sge sge = {.addr = (uintptr_t)ctx->buf,
			      .length = ctx->buf_size,
			      .lkey = ctx->mr->lkey};
	int ret;

	if (!ctx->opt->prefetch_mr)
		return;
	ret = ibv_advise_mr(ctx->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			    IB_UVERBS_ADVISE_MR_FLAG_FLUSH, &sge, 1);
	if (ret)
		fprintf(stderr, "Couldn't prefetch MR(%d). Continue anyway\n",
			ret);
	pp_explain(PP_STEP_ADVISE_MR,
		   "ibv_advise_mr(PREFETCH_WRITE, %u bytes) -> %d",
		   ctx->buf_size, ret);
}

/* rx_depth receives plus the one send can be complete at once. */
static int create_cq(struct pp_context *ctx)
{
	int cqe = (int)ctx->rx_depth + 1;

	if (ctx->opt->use_ts) {
		struct ibv_cq_init_attr_ex attr = {
			.cqe = (uint32_t)cqe,
			.channel = ctx->channel,
			.comp_vector = 0,
			.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
		};

		ctx->cq_ex = ibv_create_cq_ex(ctx->context, &attr);
		if (ctx->cq_ex)
			ctx->cq = ibv_cq_ex_to_cq(ctx->cq_ex);
	} else {
		ctx->cq =
			ibv_create_cq(ctx->context, cqe, NULL, ctx->channel, 0);
	}
	if (!ctx->cq) {
		fprintf(stderr, "Couldn't create CQ\n");
		return -1;
	}
	pp_explain(PP_STEP_CREATE_CQ,
		   "%s(cqe %d, channel %s) -> cq with %d entries",
		   ctx->cq_ex ? "ibv_create_cq_ex" : "ibv_create_cq", cqe,
		   ctx->channel ? "yes" : "none", ctx->cq->cqe);
	return 0;
}

/* One send at a time, rx_depth receives, one SGE each; -N: ibv_wr_*. */
static int create_qp(struct pp_context *ctx)
{
	struct ibv_qp_init_attr init = {
		.send_cq = ctx->cq,
		.recv_cq = ctx->cq,
		.cap = {.max_send_wr = 1,
			.max_recv_wr = ctx->rx_depth,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};

	if (ctx->opt->use_new_send) {
		struct ibv_qp_init_attr_ex ex = {
			.send_cq = init.send_cq,
			.recv_cq = init.recv_cq,
			.cap = init.cap,
			.qp_type = init.qp_type,
			.comp_mask = IBV_QP_INIT_ATTR_PD |
				     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = ctx->pd,
			.send_ops_flags = IBV_QP_EX_WITH_SEND,
		};

		ctx->qp = ibv_create_qp_ex(ctx->context, &ex);
	} else {
		ctx->qp = ibv_create_qp(ctx->pd, &init);
	}
	if (!ctx->qp) {
		fprintf(stderr, "Couldn't create QP\n");
		return -1;
	}
	if (ctx->opt->use_new_send)
		ctx->qpx = ibv_qp_to_qp_ex(ctx->qp);
	pp_explain(PP_STEP_CREATE_QP,
		   "%s(RC, send_wr 1, recv_wr %u, sge 1/1) -> QPN 0x%06x",
		   ctx->qpx ? "ibv_create_qp_ex" : "ibv_create_qp",
		   ctx->rx_depth, ctx->qp->qp_num);
	return 0;
}

/* What the QP really got: its inline limit decides IBV_SEND_INLINE. */
static void query_inline(struct pp_context *ctx)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	memset(&init, 0, sizeof(init));
	if (ibv_query_qp(ctx->qp, &attr, IBV_QP_CAP, &init))
		init.cap.max_inline_data = 0;
	ctx->max_inline = init.cap.max_inline_data;
	pp_explain(PP_STEP_QUERY_QP,
		   "ibv_query_qp(IBV_QP_CAP) -> max_inline_data %u: %u-byte "
		   "messages go %s",
		   ctx->max_inline, ctx->size,
		   ctx->max_inline >= ctx->size && !ctx->opt->use_dm
			   ? "inline"
			   : "by DMA from the buffer");
}

static int qp_to_init(struct pp_context *ctx)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = (uint8_t)ctx->opt->ib_port,
		.qp_access_flags = 0,
	};

	if (ibv_modify_qp(ctx->qp, &attr,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS)) {
		fprintf(stderr, "Failed to modify QP to INIT\n");
		return -1;
	}
	pp_explain(PP_STEP_QP_INIT,
		   "ibv_modify_qp(state INIT, port %d, pkey_index 0) -> ok",
		   ctx->opt->ib_port);
	return 0;
}

int pp_init_ctx(struct pp_context *ctx, struct ibv_device *dev,
		const struct pp_options *opt)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->opt = opt;
	ctx->page_size = (unsigned int)sysconf(_SC_PAGESIZE);
	ctx->buf_size = pp_buf_size(opt);
	ctx->rx_depth = opt->rx_depth;
	ctx->size = opt->sweep_max ? 1 : opt->size;

	if (alloc_buf(ctx))
		return -1;
	if (open_device(ctx, dev))
		goto err_free_buf;
	if (create_comp_channel(ctx))
		goto err_close_device;
	if (alloc_pd(ctx))
		goto err_destroy_channel;
	if (check_features(ctx) || alloc_dm(ctx))
		goto err_dealloc_pd;
	if (reg_mr(ctx))
		goto err_free_dm;
	prefetch_mr(ctx);
	if (create_cq(ctx))
		goto err_dereg_mr;
	if (create_qp(ctx))
		goto err_destroy_cq;
	query_inline(ctx);
	pp_set_size(ctx, ctx->size);
	if (qp_to_init(ctx))
		goto err_destroy_qp;
	return 0;

err_destroy_qp:
	ibv_destroy_qp(ctx->qp);
err_destroy_cq:
	ibv_destroy_cq(ctx->cq);
err_dereg_mr:
	ibv_dereg_mr(ctx->mr);
err_free_dm:
	if (ctx->dm)
		ibv_free_dm(ctx->dm);
err_dealloc_pd:
	ibv_dealloc_pd(ctx->pd);
err_destroy_channel:
	if (ctx->channel)
		ibv_destroy_comp_channel(ctx->channel);
err_close_device:
	ibv_close_device(ctx->context);
err_free_buf:
	free(ctx->buf);
	return -1;
}

/* Reports a failed destroy once and remembers it; teardown goes on. */
static void teardown_step(int ret, const char *msg, enum pp_step step,
			  const char *call, int *err)
{
	if (ret) {
		fprintf(stderr, "%s\n", msg);
		*err = -1;
		return;
	}
	pp_explain(step, "%s -> ok", call);
}

int pp_close_ctx(struct pp_context *ctx)
{
	int err = 0;

	if (ctx->num_cq_events) {
		ibv_ack_cq_events(ctx->cq, ctx->num_cq_events);
		pp_explain(PP_STEP_ACK_CQ_EVENTS, "ibv_ack_cq_events(cq, %u)",
			   ctx->num_cq_events);
		ctx->num_cq_events = 0;
	}
	teardown_step(ibv_destroy_qp(ctx->qp), "Couldn't destroy QP",
		      PP_STEP_DESTROY_QP, "ibv_destroy_qp", &err);
	teardown_step(ibv_destroy_cq(ctx->cq), "Couldn't destroy CQ",
		      PP_STEP_DESTROY_CQ, "ibv_destroy_cq", &err);
	teardown_step(ibv_dereg_mr(ctx->mr), "Couldn't deregister MR",
		      PP_STEP_DEREG_MR, "ibv_dereg_mr", &err);
	if (ctx->dm)
		teardown_step(ibv_free_dm(ctx->dm), "Couldn't free DM",
			      PP_STEP_FREE_DM, "ibv_free_dm", &err);
	teardown_step(ibv_dealloc_pd(ctx->pd), "Couldn't deallocate PD",
		      PP_STEP_DEALLOC_PD, "ibv_dealloc_pd", &err);
	if (ctx->channel)
		teardown_step(ibv_destroy_comp_channel(ctx->channel),
			      "Couldn't destroy completion channel",
			      PP_STEP_DESTROY_COMP_CHANNEL,
			      "ibv_destroy_comp_channel", &err);
	teardown_step(ibv_close_device(ctx->context),
		      "Couldn't release context", PP_STEP_CLOSE_DEVICE,
		      "ibv_close_device", &err);
	free(ctx->buf);
	ctx->buf = NULL;
	return err;
}

int pp_local_dest(struct pp_context *ctx, struct pp_dest *d)
{
	const struct pp_options *opt = ctx->opt;
	union ibv_gid gid;

	if (ibv_query_port(ctx->context, (uint8_t)opt->ib_port,
			   &ctx->portinfo)) {
		fprintf(stderr, "Couldn't get port info\n");
		return -1;
	}
	pp_explain(PP_STEP_QUERY_PORT,
		   "ibv_query_port(port %d) -> LID 0x%04x, state %s, link "
		   "layer %s",
		   opt->ib_port, ctx->portinfo.lid,
		   ibv_port_state_str(ctx->portinfo.state),
		   ctx->portinfo.link_layer == IBV_LINK_LAYER_ETHERNET
			   ? "Ethernet"
			   : "InfiniBand");
	if (ctx->portinfo.link_layer != IBV_LINK_LAYER_ETHERNET &&
	    !ctx->portinfo.lid) {
		fprintf(stderr, "Couldn't get local LID\n");
		return -1;
	}
	memset(&gid, 0, sizeof(gid));
	if (opt->gidx >= 0) {
		if (ibv_query_gid(ctx->context, (uint8_t)opt->ib_port,
				  opt->gidx, &gid)) {
			fprintf(stderr, "can't read sgid of index %d\n",
				opt->gidx);
			return -1;
		}
		pp_explain(PP_STEP_QUERY_GID, "ibv_query_gid(index %d) -> ok",
			   opt->gidx);
	}
	d->lid = ctx->portinfo.lid;
	d->qpn = ctx->qp->qp_num;
	d->psn = (uint32_t)lrand48() & 0xffffff;
	memcpy(d->gid, gid.raw, sizeof(d->gid));
	pp_explain(PP_STEP_CHOOSE_PSN, "lrand48() & 0xffffff -> PSN 0x%06x",
		   d->psn);
	return 0;
}

/* RTR: where to send and what to expect.  A GID makes the path global. */
static int qp_to_rtr(struct pp_context *ctx, const struct pp_dest *rem)
{
	const struct pp_options *opt = ctx->opt;
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = opt->mtu == 256    ? IBV_MTU_256
			    : opt->mtu == 512  ? IBV_MTU_512
			    : opt->mtu == 2048 ? IBV_MTU_2048
			    : opt->mtu == 4096 ? IBV_MTU_4096
					       : IBV_MTU_1024,
		.dest_qp_num = rem->qpn,
		.rq_psn = rem->psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {.is_global = 0,
			    .dlid = (uint16_t)rem->lid,
			    .sl = (uint8_t)opt->sl,
			    .src_path_bits = 0,
			    .port_num = (uint8_t)opt->ib_port},
	};
	uint64_t iface;

	memcpy(&iface, rem->gid + 8, sizeof(iface));
	if (iface) {
		attr.ah_attr.is_global = 1;
		attr.ah_attr.grh.hop_limit = 1;
		memcpy(attr.ah_attr.grh.dgid.raw, rem->gid, 16);
		attr.ah_attr.grh.sgid_index = (uint8_t)opt->gidx;
	}
	if (ibv_modify_qp(ctx->qp, &attr,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER)) {
		fprintf(stderr, "Failed to modify QP to RTR\n");
		return -1;
	}
	pp_explain(PP_STEP_QP_RTR,
		   "ibv_modify_qp(state RTR, dlid 0x%04x, dest QPN 0x%06x, "
		   "rq_psn 0x%06x, mtu %d, %s) -> ok",
		   rem->lid, rem->qpn, rem->psn, opt->mtu,
		   iface ? "global route via GID" : "LID route");
	return 0;
}

/* RTS: retry forever on RNR (7), 7 transport retries, ~67 ms timeout. */
static int qp_to_rts(struct pp_context *ctx, uint32_t my_psn)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.sq_psn = my_psn,
		.max_rd_atomic = 1,
	};

	if (ibv_modify_qp(ctx->qp, &attr,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC)) {
		fprintf(stderr, "Failed to modify QP to RTS\n");
		return -1;
	}
	pp_explain(PP_STEP_QP_RTS,
		   "ibv_modify_qp(state RTS, sq_psn 0x%06x, timeout 14, "
		   "retry_cnt 7, rnr_retry 7) -> ok",
		   my_psn);
	return 0;
}

int pp_connect_qp(struct pp_context *ctx, const struct pp_dest *rem,
		  uint32_t my_psn)
{
	if (qp_to_rtr(ctx, rem) || qp_to_rts(ctx, my_psn))
		return -1;
	return 0;
}

/* Device memory is addressed from 0 through its zero-based MR. */
static uint64_t buf_addr(const struct pp_context *ctx)
{
	return ctx->dm ? 0 : (uintptr_t)ctx->buf;
}

int pp_post_recv(struct pp_context *ctx, int n)
{
	struct ibv_sge sge = {.addr = buf_addr(ctx),
			      .length = ctx->buf_size,
			      .lkey = ctx->mr->lkey};
	struct ibv_recv_wr wr = {
		.wr_id = PINGPONG_RECV_WRID, .sg_list = &sge, .num_sge = 1};
	struct ibv_recv_wr *bad;
	int i;

	for (i = 0; i < n; i++)
		if (ibv_post_recv(ctx->qp, &wr, &bad))
			break;
	return i;
}

int pp_post_send(struct pp_context *ctx)
{
	struct ibv_sge sge = {.addr = buf_addr(ctx),
			      .length = ctx->size,
			      .lkey = ctx->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = PINGPONG_SEND_WRID,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = ctx->send_flags};
	struct ibv_send_wr *bad;
	int ret;

	if (!ctx->qpx) {
		ret = ibv_post_send(ctx->qp, &wr, &bad);
	} else {
		ibv_wr_start(ctx->qpx);
		ctx->qpx->wr_id = PINGPONG_SEND_WRID;
		ctx->qpx->wr_flags = ctx->send_flags;
		ibv_wr_send(ctx->qpx);
		if (ctx->send_flags & IBV_SEND_INLINE)
			ibv_wr_set_inline_data(ctx->qpx, ctx->buf, ctx->size);
		else
			ibv_wr_set_sge(ctx->qpx, sge.lkey, sge.addr,
				       sge.length);
		ret = ibv_wr_complete(ctx->qpx);
	}
	pp_explain(PP_STEP_POST_SEND,
		   "%s(SEND, %u bytes%s, wr_id PINGPONG_SEND_WRID) -> %d",
		   ctx->qpx ? "ibv_wr_send+ibv_wr_complete" : "ibv_post_send",
		   ctx->size,
		   ctx->send_flags & IBV_SEND_INLINE ? ", INLINE" : "", ret);
	return ret;
}

void pp_set_size(struct pp_context *ctx, unsigned int size)
{
	ctx->size = size;
	ctx->send_flags = IBV_SEND_SIGNALED;
	if (ctx->max_inline >= size && !ctx->dm)
		ctx->send_flags |= IBV_SEND_INLINE;
}

/*
 * The original's pattern is "page i starts with i % sizeof(char)", which
 * is 0 for every page; we write and check the same, so a Debian peer
 * agrees with us in both roles.
 */
int pp_fill_buf(struct pp_context *ctx)
{
	for (unsigned int i = 0; i < ctx->buf_size; i += ctx->page_size)
		ctx->buf[i] = 0;
	if (ctx->dm && ibv_memcpy_to_dm(ctx->dm, 0, ctx->buf, ctx->buf_size)) {
		fprintf(stderr, "Copy to dm buffer failed\n");
		return -1;
	}
	return 0;
}

int pp_check_buf(struct pp_context *ctx, FILE *out)
{
	int bad = 0;

	if (ctx->dm && ibv_memcpy_from_dm(ctx->buf, ctx->dm, 0, ctx->size)) {
		fprintf(stderr, "Copy from DM buffer failed\n");
		return -1;
	}
	for (unsigned int i = 0; i < ctx->size; i += ctx->page_size) {
		if (ctx->buf[i] != 0) {
			fprintf(out, "invalid data in page %u\n",
				i / ctx->page_size);
			bad++;
		}
	}
	return bad;
}
