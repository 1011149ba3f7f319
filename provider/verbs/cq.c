// SPDX-License-Identifier: MIT
/*
 * Completion queues: the classic ibv_poll_cq and the extended
 * start/next/end_poll API over one array of completions, arming and
 * solicited-only events, and overrun reported as IBV_EVENT_CQ_ERR (never
 * a silent drop).  Polling first drives the engine of the QPs that
 * complete into this CQ, in turn, until one completes something (idle
 * ones are skipped, engine/drive.c): that is the fast path's progress.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "progress.h"
#include "transport.h"
#include "verbs.h"

#define SV_CQ_WC_FLAGS                                                         \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |                        \
	 IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | \
	 IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS |                   \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |                                 \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

void sv_cq_clean(struct sv_cq *cq, uint32_t qpn)
{
	uint32_t keep;

	sv_lock(&cq->lock);
	/* newest to oldest, the kept ones slide towards head, in order */
	keep = cq->head;
	for (uint32_t i = cq->head; i != cq->tail;) {
		struct sv_cqe *e = &cq->q[--i & (cq->size - 1)];

		if (e->wc.qp_num == qpn)
			continue;
		if (--keep != i)
			cq->q[keep & (cq->size - 1)] = *e;
	}
	atomic_store_explicit(&cq->tail, keep, memory_order_relaxed);
	sv_unlock(&cq->lock);
}

static bool cq_empty(struct sv_cq *cq)
{
	return atomic_load_explicit(&cq->head, memory_order_acquire) ==
	       atomic_load_explicit(&cq->tail, memory_order_relaxed);
}

/* The CQ's readiness set (transport/link.h), made now if it has none:
 * its fd, or -2 if none could be made (its polls run every TCP link, as
 * they did before it had one). */
static int ready_set(struct sv_cq *cq)
{
	struct sv_context *ctx = cq->ctx;
	/* acquire: a set another poller made (stored under the lock) */
	int rs = atomic_load_explicit(&cq->ready_set, memory_order_acquire);
	int mine;

	if (rs != -1)
		return rs;
	pthread_mutex_lock(&ctx->vctx.context.mutex);
	rs = atomic_load(&cq->ready_set); /* another poller's, maybe */
	if (rs == -1) {
		mine = sv_readyset_open();
		if (mine < 0)
			sv_dbg("cq: no readiness set (%s): its polls run "
			       "every TCP link\n",
			       strerror(-mine));
		else
			sv_list_add_tail(&ctx->ready_cqs, &cq->ready_node);
		rs = mine < 0 ? -2 : mine;
		atomic_store(&cq->ready_set, rs);
	}
	pthread_mutex_unlock(&ctx->vctx.context.mutex);
	return rs;
}

void sv_cq_close_ready_sets(struct sv_context *ctx)
{
	pthread_mutex_lock(&ctx->vctx.context.mutex);
	while (!sv_list_empty(&ctx->ready_cqs)) {
		struct sv_cq *cq = container_of(ctx->ready_cqs.next,
						struct sv_cq, ready_node);

		sv_list_del(&cq->ready_node);
		close(atomic_exchange(&cq->ready_set, -2));
	}
	pthread_mutex_unlock(&ctx->vctx.context.mutex);
}

/*
 * Runs the engine of the QPs feeding this CQ, in turn from where the
 * last poll stopped, until one has put a completion here (or all ran):
 * with many QPs busy (ibv_srq_pingpong -q 64) a poll that finds work
 * does not run the others' engines first, and each is still run within
 * n polls.  No lock: the set's slots change in place under ctx->qp_lock
 * (sv_cq_attach_qp), so a pass may miss a QP attached meanwhile or drive
 * one twice or one just detached; QPs are type-stable, so a QP destroyed
 * meanwhile is merely found dead (sv_qp_drive).  The cursor is a hint:
 * pollers on several threads may race on it.
 */
static void drive(struct sv_cq *cq)
{
	struct sv_qp_set *set;
	uint32_t n, i;
	int rs = -1;

	/* acquire: a grown set's slots and n, copied before it was
	 * published; then n's release covers slots [0, n) */
	set = atomic_load_explicit(&cq->qps, memory_order_acquire);
	n = atomic_load_explicit(&set->n, memory_order_acquire);
	if (!n)
		return;
	/* polled: the progress thread leaves its idle QPs to us (drive.c
	 * park) while this moves */
	atomic_store_explicit(
		&cq->polls,
		atomic_load_explicit(&cq->polls, memory_order_relaxed) + 1,
		memory_order_relaxed);
	/* TCP links: one epoll_wait says which have bytes waiting, and the
	 * idle rest are skipped (drive.c runs_idle).  Not for one QP: its
	 * run's one recv(2) answers as well, and the call would be one
	 * more on the single pair's round trip */
	if (n > 1 &&
	    atomic_load_explicit(&cq->links_idle, memory_order_relaxed))
		rs = ready_set(cq);
	if (rs >= 0 && !sv_drive_ready(rs, n))
		rs = -1;
	i = atomic_load_explicit(&cq->drive_from, memory_order_relaxed);
	if (i >= n)
		i = 0;
	for (uint32_t k = 0; k < n; k++) {
		sv_qp_drive(
			atomic_load_explicit(&set->qp[i], memory_order_acquire),
			rs);
		if (++i == n)
			i = 0;
		if (!cq_empty(cq))
			break;
	}
	atomic_store_explicit(&cq->drive_from, i, memory_order_relaxed);
}

/* The CQ was armed: its QPs are the progress thread's now (flags up,
 * peers ring us), so it looks at each at once, as drive() finds them. */
static void hand_over(struct sv_cq *cq)
{
	struct sv_qp_set *set;
	uint32_t n;

	set = atomic_load_explicit(&cq->qps, memory_order_acquire);
	n = atomic_load_explicit(&set->n, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++)
		sv_qp_visit(atomic_load_explicit(&set->qp[i],
						 memory_order_acquire));
}

int sv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sv_cq *cq = to_scq(ibcq);
	uint32_t t, h;
	int i = 0;

	/* completions already there are answered first; the engine runs
	 * when the application has taken them all (a QP lock less per
	 * completion when a post completes at once, as direct RDMA does) */
	if (cq_empty(cq)) {
		drive(cq);
		if (cq_empty(cq)) /* the common answer, without the lock */
			return 0;
	}
	sv_lock(&cq->lock);
	t = cq->tail;
	h = cq->head;
	for (; i < n && t != h; i++, t++)
		wc[i] = cq->q[t & (cq->size - 1)].wc;
	atomic_store_explicit(&cq->tail, t, memory_order_relaxed);
	sv_unlock(&cq->lock);
	return i;
}

int sv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sv_cq *cq = to_scq(ibcq);
	bool newly;

	sv_lock(&cq->lock);
	newly = cq->armed == 0;
	cq->armed = solicited_only ? 2 : 1;
	sv_unlock(&cq->lock);
	if (newly) /* its QPs are the progress thread's now: tell it */
		hand_over(cq);
	return 0;
}

static struct sv_qp_set *set_alloc(uint32_t cap)
{
	struct sv_qp_set *s = calloc(1, sizeof(*s) + cap * sizeof(s->qp[0]));

	if (s)
		s->cap = cap;
	return s;
}

/*
 * A set twice as large, published in place of old; old is kept until the
 * CQ goes, as a poller may still be reading it.  Only growth allocates,
 * so what a CQ ever retired is less than its largest set: O(QPs), not a
 * copy per attach.  Caller holds ctx->qp_lock for writing.
 */
static struct sv_qp_set *grow(struct sv_cq *cq, struct sv_qp_set *old)
{
	uint32_t n = atomic_load_explicit(&old->n, memory_order_relaxed);
	struct sv_qp_set *set = set_alloc(old->cap * 2);

	if (!set)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		atomic_init(&set->qp[i],
			    atomic_load_explicit(&old->qp[i],
						 memory_order_relaxed));
	atomic_init(&set->n, n);
	/* release: the copied slots and n before pollers switch to set */
	atomic_store_explicit(&cq->qps, set, memory_order_release);
	old->next_retired = cq->retired;
	cq->retired = old;
	return set;
}

/* Where qp keeps its slot in cq's set.  A QP is in its send CQ's set
 * and in its receive CQ's, once if they are one CQ (cq_slot[0] then). */
static uint32_t *slot_of(struct sv_cq *cq, struct sv_qp *qp)
{
	return cq == qp->scq ? &qp->cq_slot[0] : &qp->cq_slot[1];
}

/* O(1): the QP's slot says whether it is in the set already (a QP whose
 * send and receive CQ are one), so there is no scan for a duplicate. */
static int attach(struct sv_cq *cq, struct sv_qp *qp)
{
	struct sv_qp_set *set = atomic_load(&cq->qps);
	uint32_t n = atomic_load_explicit(&set->n, memory_order_relaxed);
	uint32_t *slot = slot_of(cq, qp);

	if (*slot != SV_NO_SLOT)
		return 0;
	if (n == set->cap) {
		set = grow(cq, set);
		if (!set)
			return -ENOMEM;
	}
	cq->set_visits++;
	/* release: the QP is initialized before a poller can reach it */
	atomic_store_explicit(&set->qp[n], qp, memory_order_release);
	/* release: slot n is written before pollers count it */
	atomic_store_explicit(&set->n, n + 1, memory_order_release);
	*slot = n;
	return 0;
}

/* O(1): the last slot moves into qp's, and its QP learns its new slot.
 * A poller that read the old n still finds a live QP (or qp itself) in
 * every slot it reads.  No allocation. */
static void detach(struct sv_cq *cq, struct sv_qp *qp)
{
	struct sv_qp_set *set = atomic_load(&cq->qps);
	uint32_t n = atomic_load_explicit(&set->n, memory_order_relaxed);
	uint32_t *slot = slot_of(cq, qp);
	uint32_t i = *slot;
	struct sv_qp *last;

	if (i == SV_NO_SLOT)
		return;
	cq->set_visits += 2;
	if (i >= n ||
	    atomic_load_explicit(&set->qp[i], memory_order_relaxed) != qp) {
		sv_dbg("cq: qp %06x not in its slot %u of %u\n",
		       qp->qpx.qp_base.qp_num, i, n);
		return;
	}
	last = atomic_load_explicit(&set->qp[n - 1], memory_order_relaxed);
	/* release: the moved QP was published by its attach */
	atomic_store_explicit(&set->qp[i], last, memory_order_release);
	*slot_of(cq, last) = i;
	/* release: the moved slot before n shrinks past its old place */
	atomic_store_explicit(&set->n, n - 1, memory_order_release);
	*slot = SV_NO_SLOT;
}

/* Into the sets of its send and receive CQs (either may be NULL), which
 * pollers drive.  Caller holds ctx->qp_lock for writing. */
int sv_cq_attach_qp(struct sv_qp *qp)
{
	qp->cq_slot[0] = qp->cq_slot[1] = SV_NO_SLOT;
	if (qp->scq && attach(qp->scq, qp))
		return -ENOMEM;
	if (qp->rcq && attach(qp->rcq, qp)) {
		if (qp->scq)
			detach(qp->scq, qp);
		return -ENOMEM;
	}
	return 0;
}

/* Out of the sets it is in.  Caller holds ctx->qp_lock for writing. */
void sv_cq_detach_qp(struct sv_qp *qp)
{
	if (qp->scq)
		detach(qp->scq, qp);
	if (qp->rcq)
		detach(qp->rcq, qp);
}

static uint32_t cq_nqps(struct sv_cq *cq)
{
	struct sv_qp_set *s = atomic_load(&cq->qps);
	uint32_t n = 0, used = atomic_load(&s->n);

	for (uint32_t i = 0; i < used; i++)
		n += !atomic_load(&s->qp[i])->dead;
	return n;
}

/* The extended poll API: start_poll holds the CQ lock until end_poll. */
static bool next_cqe(struct sv_cq *cq)
{
	if (cq->tail == cq->head)
		return false;
	cq->cur = cq->q[cq->tail & (cq->size - 1)];
	atomic_store_explicit(&cq->tail, cq->tail + 1, memory_order_relaxed);
	cq->ex.wr_id = cq->cur.wc.wr_id;
	cq->ex.status = cq->cur.wc.status;
	return true;
}

static int ex_start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
	struct sv_cq *cq = container_of(ex, struct sv_cq, ex);

	if (attr && attr->comp_mask)
		return EINVAL;
	drive(cq);
	if (cq_empty(cq))
		return ENOENT;
	sv_lock(&cq->lock);
	if (!next_cqe(cq)) {
		sv_unlock(&cq->lock);
		return ENOENT;
	}
	return 0;
}

static int ex_next_poll(struct ibv_cq_ex *ex)
{
	return next_cqe(container_of(ex, struct sv_cq, ex)) ? 0 : ENOENT;
}

static void ex_end_poll(struct ibv_cq_ex *ex)
{
	sv_unlock(&container_of(ex, struct sv_cq, ex)->lock);
}

#define CUR(ex) (&container_of(ex, struct sv_cq, ex)->cur)

static enum ibv_wc_opcode ex_opcode(struct ibv_cq_ex *ex)
{
	return CUR(ex)->wc.opcode;
}

static uint32_t ex_vendor_err(struct ibv_cq_ex *ex)
{
	return CUR(ex)->wc.vendor_err;
}

static uint32_t ex_byte_len(struct ibv_cq_ex *ex)
{
	return CUR(ex)->wc.byte_len;
}

static __be32 ex_imm_data(struct ibv_cq_ex *ex)
{
	return CUR(ex)->wc.imm_data;
}

static uint32_t ex_qp_num(struct ibv_cq_ex *ex)
{
	return CUR(ex)->wc.qp_num;
}

static uint32_t ex_src_qp(struct ibv_cq_ex *ex)
{
	return CUR(ex)->wc.src_qp;
}

static unsigned int ex_wc_flags(struct ibv_cq_ex *ex)
{
	return CUR(ex)->wc.wc_flags;
}

static uint32_t ex_slid(struct ibv_cq_ex *ex)
{
	return CUR(ex)->wc.slid;
}

static uint8_t ex_sl(struct ibv_cq_ex *ex)
{
	return CUR(ex)->wc.sl;
}

static uint8_t ex_dlid_path_bits(struct ibv_cq_ex *ex)
{
	return CUR(ex)->wc.dlid_path_bits;
}

static uint64_t ex_completion_ts(struct ibv_cq_ex *ex)
{
	return CUR(ex)->ts; /* ns: hca_core_clock is 1 GHz */
}

static uint64_t ex_completion_wallclock_ns(struct ibv_cq_ex *ex)
{
	struct timespec rt;
	uint64_t mono = sv_now_ns();

	clock_gettime(CLOCK_REALTIME, &rt);
	return CUR(ex)->ts + ((uint64_t)rt.tv_sec * 1000000000ull +
			      (uint64_t)rt.tv_nsec - mono);
}

static struct sv_cq *cq_create(struct ibv_context *c, int cqe,
			       struct ibv_comp_channel *channel,
			       void *cq_context, uint64_t wc_flags,
			       struct ibv_pd *pdom)
{
	struct sv_context *ctx = to_sctx(c);
	struct sv_cq *cq;

	int err;

	if (cqe < 1 || cqe > SV_MAX_CQE) {
		errno = EINVAL;
		return NULL;
	}
	err = sv_obj_get(ctx, SV_OBJ_CQ);
	if (err) {
		errno = -err;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		goto err_nomem;
	cq->size = sv_roundup_pow2((uint32_t)cqe);
	cq->pdom = pdom;
	cq->q = sv_dom_alloc(pdom, cq->size, sizeof(*cq->q), SV_RES_CQ,
			     &cq->q_custom);
	if (!cq->q) {
		err = -errno;
		goto err_free_cq;
	}
	atomic_init(&cq->ready_set, -1);
	cq->qps = set_alloc(4);
	if (!cq->qps)
		goto err_free;
	cq->ctx = ctx;
	cq->wc_flags = wc_flags;
	sv_list_init(&cq->ev_node);

	cq->ex.context = c;
	cq->ex.channel = channel;
	cq->ex.cq_context = cq_context;
	cq->ex.cqe = (int)cq->size;
	pthread_mutex_init(&cq->ex.mutex, NULL);
	pthread_cond_init(&cq->ex.cond, NULL);
	cq->ex.start_poll = ex_start_poll;
	cq->ex.next_poll = ex_next_poll;
	cq->ex.end_poll = ex_end_poll;
	cq->ex.read_opcode = ex_opcode;
	cq->ex.read_vendor_err = ex_vendor_err;
	cq->ex.read_byte_len = ex_byte_len;
	cq->ex.read_imm_data = ex_imm_data;
	cq->ex.read_qp_num = ex_qp_num;
	cq->ex.read_src_qp = ex_src_qp;
	cq->ex.read_wc_flags = ex_wc_flags;
	cq->ex.read_slid = ex_slid;
	cq->ex.read_sl = ex_sl;
	cq->ex.read_dlid_path_bits = ex_dlid_path_bits;
	cq->ex.read_completion_ts = ex_completion_ts;
	cq->ex.read_completion_wallclock_ns = ex_completion_wallclock_ns;
	if (channel) {
		pthread_mutex_lock(&c->mutex);
		channel->refcnt++;
		pthread_mutex_unlock(&c->mutex);
		/* a channel of another context (the kernel refuses one) is
		 * not spun on for this CQ: the progress thread serves it */
		if (channel->context == c) {
			pthread_rwlock_wrlock(&ctx->qp_lock);
			sv_list_add_tail(&to_schannel(channel)->cqs,
					 &cq->ch_node);
			cq->on_channel = true;
			pthread_rwlock_unlock(&ctx->qp_lock);
		}
	}
	if (pdom)
		sv_pd_hold(pdom);
	return cq;

err_free:
	sv_dom_free(pdom, cq->q, SV_RES_CQ, cq->q_custom);
	err = -ENOMEM;
err_free_cq:
	free(cq);
	sv_obj_put(ctx, SV_OBJ_CQ);
	errno = -err;
	return NULL;
err_nomem:
	sv_obj_put(ctx, SV_OBJ_CQ);
	errno = ENOMEM;
	return NULL;
}

struct ibv_cq *sv_create_cq(struct ibv_context *c, int cqe, void *cq_context,
			    struct ibv_comp_channel *channel, int comp_vector)
{
	struct sv_cq *cq;

	if (comp_vector < 0 || comp_vector >= c->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	cq = cq_create(c, cqe, channel, cq_context, 0, NULL);
	return cq ? (struct ibv_cq *)&cq->ex : NULL;
}

/*
 * As rdma-core's providers answer ibv_create_cq_ex: an unknown comp_mask
 * bit, a comp_vector we do not have or a PD of another context is
 * EINVAL, and so is a PD that is not a parent domain (as mlx5: the CQ
 * takes the parent domain's allocator for its array, and holds it); a
 * completion field, or a creation flag, we cannot provide is
 * EOPNOTSUPP.  IBV_CREATE_CQ_ATTR_SINGLE_THREADED is only a promise by
 * the caller, which we may ignore (the progress thread pushes
 * completions: the lock stays); IGNORE_OVERRUN we do not honour (an
 * overrun is always IBV_EVENT_CQ_ERR).
 */
static int check_init_attr_ex(struct ibv_context *c,
			      const struct ibv_cq_init_attr_ex *attr)
{
	if (attr->comp_mask &
	    ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
		return -EINVAL;
	if (attr->comp_vector >= (uint32_t)c->num_comp_vectors)
		return -EINVAL;
	/* a parent domain, as mlx5: a plain PD has nothing for a CQ */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!attr->parent_domain || attr->parent_domain->context != c ||
	     !sv_pdom_of(attr->parent_domain)))
		return -EINVAL;
	if (attr->wc_flags & ~(uint64_t)SV_CQ_WC_FLAGS)
		return -EOPNOTSUPP;
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		return -EOPNOTSUPP;
	return 0;
}

struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *c,
				  struct ibv_cq_init_attr_ex *attr)
{
	struct sv_cq *cq;

	int err = check_init_attr_ex(c, attr);

	if (err) {
		errno = -err;
		return NULL;
	}
	cq = cq_create(c, (int)attr->cqe, attr->channel, attr->cq_context,
		       attr->wc_flags,
		       attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD
			       ? attr->parent_domain
			       : NULL);
	return cq ? &cq->ex : NULL;
}

int sv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sv_cq *cq = to_scq(ibcq);
	struct ibv_comp_channel *ch = ibcq->channel;

	pthread_rwlock_wrlock(&cq->ctx->qp_lock);
	if (cq_nqps(cq) || atomic_load(&cq->srqs)) {
		pthread_rwlock_unlock(&cq->ctx->qp_lock);
		return EBUSY;
	}
	if (cq->on_channel) /* no spin walks it from here on */
		sv_list_del(&cq->ch_node);
	pthread_rwlock_unlock(&cq->ctx->qp_lock);
	sv_drive_cq_gone(cq);
	if (ch) {
		struct sv_channel *sch = to_schannel(ch);

		/* forget events the app never took */
		pthread_mutex_lock(&sch->evq.lock);
		if (cq->events_queued)
			sv_list_del(&cq->ev_node);
		cq->events_queued = 0;
		pthread_mutex_unlock(&sch->evq.lock);
		pthread_mutex_lock(&ibcq->context->mutex);
		ch->refcnt--;
		pthread_mutex_unlock(&ibcq->context->mutex);
	}
	/* as rdma-core: wait until every event handed out was acked */
	pthread_mutex_lock(&ibcq->mutex);
	sv_async_forget(cq->ctx, ibcq);
	while (ibcq->comp_events_completed != cq->events_got ||
	       ibcq->async_events_completed != cq->async_got)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	while (cq->retired) {
		struct sv_qp_set *s = cq->retired;

		cq->retired = s->next_retired;
		free(s);
	}
	free(atomic_load(&cq->qps));
	pthread_mutex_lock(&cq->ctx->vctx.context.mutex);
	if (atomic_load(&cq->ready_set) >= 0) {
		sv_list_del(&cq->ready_node);
		close(atomic_load(&cq->ready_set));
	}
	pthread_mutex_unlock(&cq->ctx->vctx.context.mutex);
	sv_dom_free(cq->pdom, cq->q, SV_RES_CQ, cq->q_custom);
	if (cq->pdom)
		sv_pd_drop(cq->pdom);
	sv_obj_put(cq->ctx, SV_OBJ_CQ);
	free(cq);
	return 0;
}

/*
 * ibv_resize_cq: at least cqe entries (a power of two, as at creation;
 * cq->cqe says how many), never fewer than the completions queued
 * (EINVAL), nor more than max_cqe (EINVAL).  The queued completions move
 * to the same free-running indexes of the new array, so head and tail do
 * not change: the lock-free emptiness test of pollers (cq_empty) stays
 * right, and everything that reads the array holds cq->lock (poll, the
 * extended poll from start to end, push).  0 or a positive errno.
 */
int sv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sv_cq *cq;
	struct sv_cqe *q, *old;
	uint32_t size, oldsize;
	bool custom, old_custom;

	if (!ibcq || cqe < 1 || cqe > SV_MAX_CQE)
		return EINVAL;
	cq = to_scq(ibcq);
	size = sv_roundup_pow2((uint32_t)cqe);
	q = sv_dom_alloc(cq->pdom, size, sizeof(*q), SV_RES_CQ, &custom);
	if (!q)
		return errno;
	sv_lock(&cq->lock);
	if (cq->head - cq->tail > (uint32_t)cqe) {
		sv_unlock(&cq->lock);
		sv_dom_free(cq->pdom, q, SV_RES_CQ, custom);
		return EINVAL;
	}
	old = cq->q;
	oldsize = cq->size;
	for (uint32_t i = cq->tail; i != cq->head; i++)
		q[i & (size - 1)] = old[i & (oldsize - 1)];
	cq->q = q;
	cq->size = size;
	cq->ex.cqe = (int)size;
	old_custom = cq->q_custom;
	cq->q_custom = custom;
	sv_unlock(&cq->lock);
	sv_dom_free(cq->pdom, old, SV_RES_CQ, old_custom);
	return 0;
}
