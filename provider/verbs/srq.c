// SPDX-License-Identifier: MIT
/*
 * Shared receive queues: create (classic and extended; basic and XRC,
 * whose domain side is xrc.c), modify (resize, arming the limit), query,
 * destroy, post_srq_recv; the responder's side (sv_srq_take, the limit
 * event) is engine/srq.c.  QPs of one context share it; the QPs hold a
 * reference, so it outlives their responders.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "progress.h"
#include "verbs.h"

/* q and sge of one queue, from pd's allocator if it is a parent domain
 * with one (domain.c); custom: buf_custom's bits for them. */
static void free_queue(struct ibv_pd *pd, struct sv_rwqe *q,
		       struct ibv_sge *sge, uint8_t custom)
{
	sv_dom_free(pd, q, SV_RES_SRQ, custom & 1);
	sv_dom_free(pd, sge, SV_RES_SRQ, custom & 2);
}

/* 0 or -errno: ENOMEM, or EINVAL from a parent domain's misaligned
 * alloc.  On failure srq's queue is untouched. */
static int alloc_queue(struct sv_srq *srq, struct ibv_pd *pd, uint32_t size)
{
	bool cq, cs = false;
	struct sv_rwqe *q;
	struct ibv_sge *sge = NULL;

	q = sv_dom_alloc(pd, size, sizeof(*q), SV_RES_SRQ, &cq);
	if (q)
		sge = sv_dom_alloc(pd, (size_t)size * srq->max_sge,
				   sizeof(*sge), SV_RES_SRQ, &cs);
	if (!sge) {
		int err = -errno;

		if (q)
			free_queue(pd, q, NULL, cq);
		return err;
	}
	srq->q = q;
	srq->sge = sge;
	srq->buf_custom = (uint8_t)(cq | cs << 1);
	srq->size = size;
	return 0;
}

/* ibv_create_srq(3): EINVAL past the device's limits (max_srq_wr,
 * max_srq_sge); srq_limit is ignored.  attr gets what we give: max_wr
 * rounded up to the queue's size, as hardware providers report. */
static struct ibv_srq *create_srq(struct ibv_pd *ibpd, void *srq_context,
				  struct ibv_srq_attr *attr)
{
	struct sv_context *ctx = to_sctx(ibpd->context);
	struct sv_srq *srq;
	uint32_t want;
	int err;

	if (attr->max_wr > SV_MAX_SRQ_WR || attr->max_sge > SV_MAX_SRQ_SGE) {
		err = EINVAL;
		goto err_out;
	}
	err = -sv_obj_get(ctx, SV_OBJ_SRQ); /* max_srq live: EINVAL */
	if (err)
		goto err_out;
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		err = ENOMEM;
		goto err_count;
	}
	want = attr->max_wr ? attr->max_wr : 1;
	srq->max_sge = attr->max_sge ? attr->max_sge : 1;
	err = -alloc_queue(srq, ibpd, sv_roundup_pow2(want));
	if (err)
		goto err_free;
	srq->max = srq->size;
	srq->ctx = ctx;
	sv_list_init(&srq->lenders);
	srq->sock = -1;
	srq->ibv.context = ibpd->context;
	srq->ibv.srq_context = srq_context;
	srq->ibv.pd = ibpd;
	srq->ibv.handle = (uint32_t)(uintptr_t)srq;
	pthread_mutex_init(&srq->ibv.mutex, NULL);
	pthread_cond_init(&srq->ibv.cond, NULL);
	sv_pd_hold(ibpd);
	attr->max_wr = srq->max;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = 0;
	return &srq->ibv;

err_free:
	free(srq);
err_count:
	sv_obj_put(ctx, SV_OBJ_SRQ);
err_out:
	errno = err;
	return NULL;
}

struct ibv_srq *sv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	return create_srq(pd, attr->srq_context, &attr->attr);
}

/* An XRC SRQ (xrc.c): of a domain, completing on its own CQ, named by a
 * number senders put in their work requests, reachable from the other
 * processes of the domain through a socket of that name. */
/* An XRC SRQ's socket, in the progress thread's loop: sends forwarded to
 * it arrived.  It may be gone since epoll_wait: only one still on the
 * context's list is run. */
static void xsrq_event(struct sv_io *io, uint32_t revents)
{
	struct sv_pfd *p = container_of(io, struct sv_pfd, io);
	struct sv_context *ctx = p->ctx;
	struct sv_list *n;

	(void)revents;
	pthread_mutex_lock(&ctx->xsrq_lock);
	sv_list_for_each(n, &ctx->xsrqs)
	{
		if (container_of(n, struct sv_srq, ctx_node) == p->srq) {
			sv_xsrq_recv_run(p->srq);
			break;
		}
	}
	pthread_mutex_unlock(&ctx->xsrq_lock);
}

static struct ibv_srq *create_xsrq(struct ibv_context *c,
				   struct ibv_srq_init_attr_ex *a)
{
	const uint32_t need = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	struct sv_context *ctx = to_sctx(c);
	struct ibv_srq *ibsrq;
	struct sv_srq *srq;
	int err;

	if ((a->comp_mask & need) != need || !a->xrcd || !a->cq ||
	    a->xrcd->context != c || a->cq->context != c) {
		errno = EINVAL;
		return NULL;
	}
	ibsrq = create_srq(a->pd, a->srq_context, &a->attr);
	if (!ibsrq)
		return NULL;
	srq = to_ssrq(ibsrq);
	srq->xrcd = to_sxrcd(a->xrcd);
	srq->cq = to_scq(a->cq);
	err = -sv_xsrq_bind(srq);
	if (err) {
		srq->xrcd = NULL;
		sv_destroy_srq(ibsrq);
		errno = err;
		return NULL;
	}
	atomic_fetch_add(&srq->xrcd->users, 1);
	atomic_fetch_add(&srq->cq->srqs, 1);
	srq->pfd = (struct sv_pfd){.fd = -1, .srq = srq};
	sv_pfd_set(&srq->pfd, xsrq_event, true);
	pthread_mutex_lock(&ctx->xsrq_lock);
	sv_list_add_tail(&ctx->xsrqs, &srq->ctx_node);
	pthread_mutex_unlock(&ctx->xsrq_lock);
	sv_progress_add(ctx, &srq->pfd, srq->sock);
	return ibsrq;
}

/* What ibv_create_srq_ex does not pass to ibv_create_srq itself: XRC
 * SRQs; tag-matching ones we do not have (EOPNOTSUPP). */
struct ibv_srq *sv_create_srq_ex(struct ibv_context *c,
				 struct ibv_srq_init_attr_ex *a)
{
	uint32_t known = IBV_SRQ_INIT_ATTR_RESERVED - 1;

	if ((a->comp_mask & ~known) || !(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) ||
	    !a->pd || a->pd->context != c) {
		errno = EINVAL;
		return NULL;
	}
	if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    a->srq_type != IBV_SRQT_BASIC && a->srq_type != IBV_SRQT_XRC) {
		errno = a->srq_type <= IBV_SRQT_TM ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (a->comp_mask & IBV_SRQ_INIT_ATTR_TM) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    a->srq_type == IBV_SRQT_XRC)
		return create_xsrq(c, a);
	return create_srq(a->pd, a->srq_context, &a->attr);
}

/* IBV_SRQ_MAX_WR: the queue moves to a new array (the responders copy
 * out under srq->lock, so nothing points into it); never below what is
 * posted and not taken.  Caller holds srq->lock. */
static int resize(struct sv_srq *srq, uint32_t max_wr)
{
	struct sv_srq old = *srq;
	uint32_t n = srq->post - srq->comp;
	int err;

	/* the WQEs lent to QPs are the SRQ's too (lend) */
	if (!max_wr || max_wr > SV_MAX_SRQ_WR || max_wr < n + srq->lent)
		return -EINVAL;
	err = alloc_queue(srq, srq->ibv.pd, sv_roundup_pow2(max_wr));
	if (err)
		return err;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t from = (old.comp + i) & (old.size - 1);

		srq->q[i] = old.q[from];
		memcpy(&srq->sge[(size_t)i * srq->max_sge],
		       &old.sge[(size_t)from * srq->max_sge],
		       srq->max_sge * sizeof(*srq->sge));
	}
	srq->comp = 0;
	srq->post = n;
	srq->max = srq->size;
	free_queue(srq->ibv.pd, old.q, old.sge, old.buf_custom);
	return 0;
}

/* ibv_modify_srq(3): the limit must be below max_wr (the new one, if it
 * changes too); a failed modify changes nothing. */
int sv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct sv_srq *srq = to_ssrq(ibsrq);
	int err = 0;

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) || !mask)
		return EINVAL;
	sv_lock(&srq->lock);
	if ((mask & IBV_SRQ_LIMIT) &&
	    attr->srq_limit >
		    ((mask & IBV_SRQ_MAX_WR) ? attr->max_wr : srq->max)) {
		err = -EINVAL;
		goto out;
	}
	if (mask & IBV_SRQ_MAX_WR) {
		err = resize(srq, attr->max_wr);
		if (err)
			goto out;
		attr->max_wr = srq->max;
	}
	if (mask & IBV_SRQ_LIMIT)
		srq->limit = attr->srq_limit;
out:
	sv_unlock(&srq->lock);
	return -err;
}

int sv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct sv_srq *srq = to_ssrq(ibsrq);

	sv_lock(&srq->lock);
	attr->max_wr = srq->max;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->limit;
	sv_unlock(&srq->lock);
	return 0;
}

/* EBUSY while a QP is attached (its responder may take from it). */
int sv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sv_srq *srq = to_ssrq(ibsrq);

	/* acquire: the detached QPs' last accesses happen before the free */
	if (atomic_load_explicit(&srq->users, memory_order_acquire))
		return EBUSY;
	if (srq->xrcd) {
		/* off the lists first: no responder or progress thread
		 * finds it after this */
		pthread_mutex_lock(&srq->ctx->xsrq_lock);
		sv_list_del(&srq->ctx_node);
		sv_progress_del(srq->ctx, &srq->pfd);
		pthread_mutex_unlock(&srq->ctx->xsrq_lock);
		if (atomic_load_explicit(&srq->users, memory_order_acquire)) {
			/* a responder bound it meanwhile */
			pthread_mutex_lock(&srq->ctx->xsrq_lock);
			sv_list_add_tail(&srq->ctx->xsrqs, &srq->ctx_node);
			sv_progress_add(srq->ctx, &srq->pfd, srq->sock);
			pthread_mutex_unlock(&srq->ctx->xsrq_lock);
			return EBUSY;
		}
		sv_xsrq_unbind(srq);
		atomic_fetch_sub(&srq->xrcd->users, 1);
		atomic_fetch_sub(&srq->cq->srqs, 1);
	}
	sv_async_forget(srq->ctx, ibsrq);
	pthread_mutex_lock(&ibsrq->mutex);
	while (ibsrq->events_completed != srq->async_got)
		pthread_cond_wait(&ibsrq->cond, &ibsrq->mutex);
	pthread_mutex_unlock(&ibsrq->mutex);
	sv_obj_put(srq->ctx, SV_OBJ_SRQ);
	free_queue(ibsrq->pd, srq->q, srq->sge, srq->buf_custom);
	sv_pd_drop(ibsrq->pd);
	free(srq);
	return 0;
}

/* A responder NAKed RNR for want of a WQE: run the attached QPs waiting
 * so, now that there is one (as post_recv does for its own QP).  A QP
 * whose lock is taken may be past its look at the SRQ: the progress
 * thread is asked to look at it again (else an XRC_RECV QP, which no poll
 * drives, would wait for the thread's next look, 5 ms). */
static void wake_rnr(struct sv_srq *srq)
{
	struct sv_context *ctx = srq->ctx;
	struct sv_list *n;

	pthread_rwlock_rdlock(&ctx->qp_lock);
	sv_list_for_each(n, &ctx->qps)
	{
		struct sv_qp *qp = container_of(n, struct sv_qp, ctx_node);

		if (qp->srq != srq)
			continue;
		if (!sv_trylock(&qp->lock)) {
			sv_qp_visit(qp); /* the thread, soon */
			continue;
		}
		if (qp->resp.rnr && sv_link_runs(&qp->link))
			sv_qp_run(qp, 0); /* what came meanwhile first */
		else if (qp->resp.rnr)
			sv_resp_run(qp);
		sv_unlock(&qp->lock);
	}
	pthread_rwlock_unlock(&ctx->qp_lock);
}

static int post_one(struct sv_srq *srq, const struct ibv_recv_wr *wr)
{
	uint32_t slot = srq->post & (srq->size - 1);
	struct sv_rwqe *r = &srq->q[slot];

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > srq->max_sge)
		return EINVAL;
	if (srq->post - srq->comp + srq->lent >= srq->max)
		return ENOMEM;
	sv_rwqe_fill(r, &srq->sge[(size_t)slot * srq->max_sge], wr);
	srq->post++;
	return 0;
}

int sv_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad)
{
	struct sv_srq *srq = to_ssrq(ibsrq);
	int err = 0;

	sv_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		err = post_one(srq, wr);
		if (err) {
			*bad = wr;
			break;
		}
	}
	sv_unlock(&srq->lock);
	if (atomic_load_explicit(&srq->rnr, memory_order_relaxed) &&
	    atomic_exchange(&srq->rnr, false))
		wake_rnr(srq);
	if (srq->xrcd) /* sends forwarded to us wait for WQEs */
		sv_xsrq_recv_run(srq);
	return err;
}

/* Tag-matching operations need a tag-matching SRQ, which we cannot
 * create: EINVAL for ours, as mlx5 answers for a basic SRQ. */
int sv_post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *op,
		    struct ibv_ops_wr **bad)
{
	(void)srq;
	*bad = op;
	return EINVAL;
}

/* The SRQ number XRC senders name (xrc.c); a basic SRQ has none, and
 * answers with its handle. */
int sv_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct sv_srq *srq = to_ssrq(ibsrq);

	*srq_num = srq->xrcd ? srq->srqn : ibsrq->handle;
	return 0;
}
