// SPDX-License-Identifier: MIT
/*
 * Shared receive queues: create (classic and extended; basic and XRC,
 * whose domain side is xrc.c),
 * modify (resize, arming the limit), query, destroy, post_srq_recv, and
 * the responder's side: sv_srq_take moves one WQE into the QP that takes
 * it, and raises IBV_EVENT_SRQ_LIMIT_REACHED once per arming, as rxe's
 * rxe_srq.c and the IBA (10.2.9.4, 11.5.2.3) say.  QPs of one context
 * share it; the QPs hold a reference, so it outlives their responders.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sv.h"

static int alloc_queue(struct sv_srq *srq, uint32_t size)
{
	srq->q = calloc(size, sizeof(*srq->q));
	srq->sge = calloc((size_t)size * srq->max_sge, sizeof(*srq->sge));
	if (!srq->q || !srq->sge) {
		free(srq->q);
		free(srq->sge);
		return -ENOMEM;
	}
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
	if (alloc_queue(srq, sv_roundup_pow2(want))) {
		err = ENOMEM;
		goto err_free;
	}
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
	sv_pd_get(to_spd(ibpd));
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

	/* the WQEs lent to QPs are the SRQ's too (lend) */
	if (!max_wr || max_wr > SV_MAX_SRQ_WR || max_wr < n + srq->lent)
		return -EINVAL;
	if (alloc_queue(srq, sv_roundup_pow2(max_wr))) {
		srq->q = old.q;
		srq->sge = old.sge;
		return -ENOMEM;
	}
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
	free(old.q);
	free(old.sge);
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
	sv_pd_put(to_spd(ibsrq->pd));
	sv_obj_put(srq->ctx, SV_OBJ_SRQ);
	free(srq->q);
	free(srq->sge);
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
			sv_progress_visit(qp); /* the thread, soon */
			continue;
		}
		if (qp->resp_rnr && qp->link.tcp)
			sv_qp_run(qp, 0); /* what came meanwhile first */
		else if (qp->resp_rnr)
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

static void limit_reached(struct sv_srq *srq)
{
	struct ibv_async_event e = {.event_type = IBV_EVENT_SRQ_LIMIT_REACHED};

	e.element.srq = &srq->ibv;
	sv_async_event(srq->ctx, &e);
}

/* The SRQ's oldest WQE into the QP's RQ at rq_post.  Caller holds
 * srq->lock; the SRQ is not empty. */
static void move_oldest(struct sv_srq *srq, struct sv_qp *qp)
{
	uint32_t slot = srq->comp & (srq->size - 1);
	uint32_t to = qp->rq_post & (qp->rq_size - 1);

	qp->rq[to] = srq->q[slot];
	memcpy(&qp->rq_sge[(size_t)to * qp->max_recv_sge],
	       &srq->sge[(size_t)slot * srq->max_sge],
	       srq->q[slot].num_sge * sizeof(struct ibv_sge));
	srq->comp++;
	qp->rq_post++;
}

/* The QP's WQE i back at the SRQ's head (it was the oldest when lent:
 * returned newest first, the SRQ's order is kept).  There is room: the
 * lent WQEs count against max_wr.  Caller holds srq->lock. */
static void push_front(struct sv_srq *srq, struct sv_qp *qp, uint32_t i)
{
	uint32_t from = i & (qp->rq_size - 1);
	uint32_t slot = --srq->comp & (srq->size - 1);

	srq->q[slot] = qp->rq[from];
	memcpy(&srq->sge[(size_t)slot * srq->max_sge],
	       &qp->rq_sge[(size_t)from * qp->max_recv_sge],
	       qp->rq[from].num_sge * sizeof(struct ibv_sge));
}

/* Whether the peer may no longer place into the QP's lent WQE i: the
 * descriptor that shows it (post.c describe) still says i + 1, and we
 * take it back with a CAS, as the sender claims it with one (req.c
 * try_place), so exactly one side wins.  The peer may write the word
 * as it likes: that only decides which of its own sends are placed. */
static bool unshow(struct sv_qp *qp, uint32_t i)
{
	struct sv_rdesc *d = &qp->link.rx.desc[i & (qp->link.rx.ndesc - 1)];
	uint32_t expect = i + 1;

	return atomic_compare_exchange_strong(&d->seq, &expect, 0);
}

/* Keeps srq->lenders (the QPs holding lent WQEs) in step with qp's
 * count.  Caller holds srq->lock. */
static void lender_update(struct sv_srq *srq, struct sv_qp *qp, bool was)
{
	bool is = qp->rq_post != qp->rq_held;

	if (is && !was)
		sv_list_add_tail(&srq->lenders, &qp->srq_node);
	else if (!is && was)
		sv_list_del(&qp->srq_node);
}

/* The SRQ is empty but other QPs hold lent WQEs: takes back the newest
 * one of the first whose peer has not claimed it.  Their queues are
 * changed under srq->lock alone (their responders read rq_post and
 * rq_held only under it; rq_comp and the held WQE are theirs).  Caller
 * holds srq->lock. */
static bool steal(struct sv_srq *srq, struct sv_qp *qp)
{
	struct sv_list *n;

	sv_list_for_each(n, &srq->lenders)
	{
		struct sv_qp *o = container_of(n, struct sv_qp, srq_node);

		if (o == qp || !unshow(o, o->rq_post - 1))
			continue;
		push_front(srq, o, o->rq_post - 1);
		o->rq_post--;
		srq->lent--;
		lender_update(srq, o, true);
		return true;
	}
	return false;
}

/*
 * Single copy on an SRQ: which QP takes which WQE is known only at
 * arrival, so the SRQ *lends* each RC QP whose peer shares memory a few
 * WQEs ahead of its messages, in its own RQ, shown to the peer in its
 * ring's descriptors as an RQ's are; the sender places a send into the
 * one its message will take, claiming it first (req.c try_place).  A QP
 * holds at most its share: the WQEs not yet taken divided among the
 * attached QPs, within its RQ's slots; an empty SRQ takes unclaimed ones
 * back (steal), and a QP whose link closes returns them (sv_srq_return),
 * so no receive is stranded while another QP needs one.  Lent WQEs count
 * as the SRQ's for max_wr and the limit.  Caller holds srq->lock and
 * qp->lock.
 */
static void lend(struct sv_srq *srq, struct sv_qp *qp)
{
	uint32_t users =
		atomic_load_explicit(&srq->users, memory_order_relaxed);
	uint32_t share, from = qp->rq_post;
	bool was = qp->rq_post != qp->rq_held;

	if (!qp->link.rx_ready || !qp->link.rx.ndesc)
		return;
	share = (srq->post - srq->comp + srq->lent) / (users ? users : 1);
	while (srq->comp != srq->post && qp->rq_post - qp->rq_held < share &&
	       qp->rq_post - qp->rq_comp < qp->rq_size) {
		move_oldest(srq, qp);
		srq->lent++;
	}
	if (qp->rq_post != from)
		sv_rq_describe(qp, from);
	lender_update(srq, qp, was);
}

bool sv_srq_take(struct sv_srq *srq, struct sv_qp *qp)
{
	bool was, fire = false;

	sv_lock(&srq->lock);
	was = qp->rq_post != qp->rq_held;
	if (qp->rq_comp == qp->rq_post) {
		if (srq->comp == srq->post && !steal(srq, qp)) {
			/* inside the lock: a post after ours sees it and
			 * wakes us */
			atomic_store_explicit(&srq->rnr, true,
					      memory_order_relaxed);
			sv_unlock(&srq->lock);
			return false;
		}
		move_oldest(srq, qp);
		qp->rq_held = qp->rq_post;
	} else if (qp->rq_held == qp->rq_comp) {
		qp->rq_held++; /* the first lent WQE is this message's */
		srq->lent--;
	} /* else the QP holds one already (a dropped message's) */
	lender_update(srq, qp, was);
	lend(srq, qp);
	/* IBA 11.5.2.3: once below the limit, one event, then disarmed */
	if (srq->limit && srq->post - srq->comp + srq->lent < srq->limit) {
		srq->limit = 0;
		fire = true;
	}
	sv_unlock(&srq->lock);
	if (fire)
		limit_reached(srq);
	return true;
}

void sv_srq_return(struct sv_qp *qp)
{
	struct sv_srq *srq = qp->srq;
	uint32_t keep[SV_SRQ_LEND], k = 0;

	if (!srq || qp->rq_post == qp->rq_held)
		return;
	sv_lock(&srq->lock);
	srq->lent -= qp->rq_post - qp->rq_held;
	for (uint32_t i = qp->rq_post; i-- != qp->rq_held;) {
		if (unshow(qp, i))
			push_front(srq, qp, i);
		else /* claimed: the peer's send is on its way into it */
			keep[k++] = i;
	}
	/* the claimed stay the QP's, in order, flushed with it */
	for (uint32_t j = 0; j < k; j++) {
		uint32_t to = (qp->rq_held + j) & (qp->rq_size - 1);
		uint32_t from = keep[k - 1 - j] & (qp->rq_size - 1);

		qp->rq[to] = qp->rq[from];
		memmove(&qp->rq_sge[(size_t)to * qp->max_recv_sge],
			&qp->rq_sge[(size_t)from * qp->max_recv_sge],
			qp->max_recv_sge * sizeof(struct ibv_sge));
	}
	qp->rq_post = qp->rq_held = qp->rq_held + k;
	sv_list_del(&qp->srq_node);
	sv_unlock(&srq->lock);
}
