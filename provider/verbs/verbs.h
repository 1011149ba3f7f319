/* SPDX-License-Identifier: MIT */
/*
 * The verbs objects (verbs/, layer 1): what they offer each other and
 * the context's ops tables, beyond the entry points the ABI layer calls
 * (entry.h, included here).  Nothing below verbs/ includes this header.
 */
#ifndef SV_VERBS_H
#define SV_VERBS_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "entry.h"
#include "objects.h"

/* What each kind of object may count to (device.c; SV_MAX_*). */
extern const uint32_t sv_obj_max[SV_OBJ_NUM];

/* Counts one more object of kind k in the context: 0, or -EINVAL when
 * the device's max_* of that kind are already live (rxe's pool limit). */
static inline int sv_obj_get(struct sv_context *ctx, enum sv_obj k)
{
	if (atomic_fetch_add_explicit(&ctx->nobj[k], 1, memory_order_relaxed) >=
	    sv_obj_max[k]) {
		atomic_fetch_sub_explicit(&ctx->nobj[k], 1,
					  memory_order_relaxed);
		return -EINVAL;
	}
	return 0;
}

static inline void sv_obj_put(struct sv_context *ctx, enum sv_obj k)
{
	atomic_fetch_sub_explicit(&ctx->nobj[k], 1, memory_order_relaxed);
}

/* Removes every completion of QP qpn not polled yet (ibv_destroy_qp). */
void sv_cq_clean(struct sv_cq *cq, uint32_t qpn);
int sv_cq_attach_qp(struct sv_cq *cq, struct sv_qp *qp);
void sv_cq_detach_qp(struct sv_cq *cq, struct sv_qp *qp);

/* Async events (channel.c; core.h's sv_async_event queues them).  Drops
 * the queued events of a CQ or QP being destroyed. */
void sv_async_forget(struct sv_context *ctx, void *obj);
int sv_evq_init(struct sv_evq *q);
void sv_evq_destroy(struct sv_evq *q);

/* Device (device.c).  An address vector this host can reach (port 1 or
 * unset; our LID, or a GID of our table): 0, or EINVAL said once on
 * stderr, as who. */
/* An address vector's check (EINVAL, said on stderr); tcp_ok: another
 * host's IP address GID (sv_gid_sockaddr) is fine (a connected QP's, over TCP).
 */
int sv_av_check(const struct ibv_ah_attr *a, const char *who, bool tcp_ok);
int sv_port_mtu_bytes(enum ibv_mtu mtu);

/* Import (import.c, import_wire.c; wire/import.h).  After
 * ibv_open_device, the context is found by its cmd_fd's inode and
 * answers other processes on cmd_peer (the progress thread). */
struct sv_imp_req;
struct sv_imp_rep;
void sv_import_serve(struct sv_context *ctx);
/* ibv_open_device for ibv_import_device of another process's cmd_fd:
 * the context holds that fd (context.c). */
struct ibv_context *sv_open_imported(struct ibv_device *dev, int cmd_fd);
void sv_import_serve_start(struct sv_context *ctx);
/* Drops a handle of the real context: true if it was the last. */
bool sv_import_put(struct sv_context *ctx);
/* Frees an in-process import's own handle and its cmd_fd. */
void sv_import_close(struct sv_context *h);
uint32_t sv_import_answer(struct sv_context *ctx, const struct sv_imp_req *q,
			  struct sv_imp_rep *r);
int sv_imp_ask(int fd, uint16_t op, uint32_t handle, struct sv_imp_rep *r);
int sv_import_mr_dereg(struct sv_mr *m);
/* ibv_unimport_pd: drops handle h of its PD (context.c). */
void sv_pd_handle_drop(struct sv_pd *h);

/* QP (qp.c). */
void sv_qp_free_all(struct sv_context *ctx);
/* ibv_close_device: every QP still open is torn down (BYE to peers). */
void sv_qp_close_all(struct sv_context *ctx);

/* Memory windows (mw.c): the ops ibv_alloc_mw, ibv_dealloc_mw and
 * ibv_bind_mw (verbs.h's inlines) call; ibv_close_device frees them. */
struct ibv_mw *sv_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int sv_dealloc_mw(struct ibv_mw *mw);
int sv_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
void sv_mw_free_all(struct sv_context *ctx);
/* ibv_destroy_qp: the type 2 windows bound to QP qpn are invalid (a
 * later QP with its number must not reach them). */
void sv_mw_qp_gone(struct sv_context *ctx, uint32_t qpn);

/* Multicast (verbs/mcast.c). */
/* ibv_destroy_qp, ibv_close_device: the QP leaves every group (uverbs
 * detaches a destroyed QP).  Caller holds no QP lock. */
void sv_mcast_detach_all(struct sv_qp *qp);

/* XRC (xrc.c). */
struct ibv_xrcd *sv_open_xrcd(struct ibv_context *c,
			      struct ibv_xrcd_init_attr *attr);
int sv_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_qp *sv_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *attr);
/* An XRC SRQ's number and socket; 0 or -errno. */
int sv_xsrq_bind(struct sv_srq *srq);
void sv_xsrq_unbind(struct sv_srq *srq);
/* Takes the forwarded sends waiting on the SRQ's socket while it has
 * WQEs.  Caller holds no SRQ lock. */
void sv_xsrq_recv_run(struct sv_srq *srq);
/* XRC_RECV QPs: joining and leaving the process's list (ibv_open_qp). */
void sv_xrc_qp_add(struct sv_qp *qp);
void sv_xrc_qp_del(struct sv_qp *qp);

/* Data path entry points, installed in context ops. */
int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad);
int sv_post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *op,
		    struct ibv_ops_wr **bad);
int sv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
struct ibv_srq *sv_create_srq_ex(struct ibv_context *c,
				 struct ibv_srq_init_attr_ex *attr);
int sv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *c,
				  struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *sv_create_qp_ex(struct ibv_context *c,
			       struct ibv_qp_init_attr_ex *attr);
int sv_query_device_ex(struct ibv_context *c,
		       const struct ibv_query_device_ex_input *in,
		       struct ibv_device_attr_ex *attr, size_t attr_size);
int sv_query_rt_values(struct ibv_context *c, struct ibv_values_ex *values);

#endif
