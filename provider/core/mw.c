// SPDX-License-Identifier: MIT
/*
 * Memory windows' data path (IBA 10.6.7): what a window's rkey reaches,
 * and the three changes of its binding the engine makes in order with
 * the queues: bind (a BIND_MW WQE), local invalidate (LOCAL_INV) and
 * remote invalidate (a SEND with Invalidate).  verbs/mw.c makes and
 * frees windows.  A binding is written under ctx->mw_lock, inside a
 * seqlock that the responder's lookup reads with no lock.
 */
#include <stdatomic.h>

#include "core.h"
#include "objects.h"

/* The window whose slot the key names, or NULL (not a window key). */
static struct sv_mw *mw_of(struct sv_context *ctx, uint32_t key)
{
	if (!(key & SV_KEY_MW))
		return NULL;
	return atomic_load_explicit(
		(_Atomic(struct sv_mw *) *)&ctx->mws[sv_mw_slot(key)],
		memory_order_acquire);
}

#define LD(x)	 __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* A consistent copy of mw's binding (seqlock reader). */
static void read_binding(struct sv_mw *mw, struct sv_mw *b)
{
	uint32_t s;

	do {
		while ((s = atomic_load_explicit(&mw->seq,
						 memory_order_acquire)) &
		       1)
			;
		b->key = LD(mw->key);
		b->mr_key = LD(mw->mr_key);
		b->access = LD(mw->access);
		b->qpn = LD(mw->qpn);
		b->va = LD(mw->va);
		b->len = LD(mw->len);
		/* acquire: the copies above before the second look */
		atomic_thread_fence(memory_order_acquire);
	} while (atomic_load_explicit(&mw->seq, memory_order_relaxed) != s);
}

/* Caller holds ctx->mw_lock; readers see the old binding or the new. */
static void write_binding(struct sv_mw *mw, uint32_t key, uint32_t mr_key,
			  uint32_t access, uint32_t qpn, uint64_t va,
			  uint64_t len)
{
	atomic_fetch_add_explicit(&mw->seq, 1, memory_order_relaxed);
	/* release: readers that see the odd seq see no field written
	 * before it (paired with their acquire fence) */
	atomic_thread_fence(memory_order_release);
	ST(mw->key, key);
	ST(mw->mr_key, mr_key);
	ST(mw->access, access);
	ST(mw->qpn, qpn);
	ST(mw->va, va);
	ST(mw->len, len);
	/* release: the fields before the even seq */
	atomic_fetch_add_explicit(&mw->seq, 1, memory_order_release);
}

void sv_mw_clear(struct sv_mw *mw)
{
	write_binding(mw, 0, 0, 0, 0, 0, 0);
}

/* [va, va+len) inside the MR's current range. */
static bool inside(const struct sv_mr *mr, uint64_t va, uint64_t len)
{
	return va >= mr->iova && va - mr->iova <= mr->length &&
	       len <= mr->length - (va - mr->iova);
}

uint8_t *sv_mw_at(struct sv_context *ctx, uint32_t rkey, struct sv_pd *pd,
		  uint32_t qpn, uint64_t va, uint64_t len, unsigned int access)
{
	struct sv_mw *mw = mw_of(ctx, rkey);
	struct sv_mw b;
	struct sv_mr *mr;

	if (!mw || !pd ||
	    atomic_load_explicit((_Atomic(struct sv_pd *) *)&mw->pd,
				 memory_order_acquire) != pd)
		return NULL;
	read_binding(mw, &b);
	if (!b.key || b.key != rkey || (b.access & access) != access ||
	    (mw->ibv.type == IBV_MW_TYPE_2 && b.qpn != qpn))
		return NULL;
	/* the range inside the window, and the window inside its MR as
	 * the MR is now (deregistered, moved to another PD: refused) */
	if (va < b.va || va - b.va > b.len || len > b.len - (va - b.va))
		return NULL;
	mr = sv_mr_lookup(ctx, b.mr_key, pd);
	if (!mr || !inside(mr, b.va, b.len))
		return NULL;
	return mr->addr + (va - mr->iova);
}

/* IBA 10.6.7.2.1 (C10-73..): what a bind may not do, as a completion
 * error; post.c has refused what a WR may not say. */
static bool bind_ok(struct sv_qp *qp, struct sv_mw *mw, const struct sv_swqe *w,
		    struct sv_pd *pd)
{
	struct sv_mr *mr;

	if (mw->pd != pd || (w->rkey & ~0xffu) != mw->base)
		return false;
	/* type 2 binds only an invalid window (rxe: "not in the free
	 * state"); type 1 rebinds at will */
	if (mw->ibv.type == IBV_MW_TYPE_2 && mw->key)
		return false;
	if (!w->mw_mr_key)
		return mw->ibv.type == IBV_MW_TYPE_1; /* unbind */
	mr = sv_mr_lookup(qp->ctx, w->mw_mr_key, pd);
	if (!mr || !(mr->access & IBV_ACCESS_MW_BIND) ||
	    !inside(mr, w->raddr, w->swap_add))
		return false;
	/* C10-73: remote write or atomic needs local write on the MR */
	return !(w->mw_access &
		 (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) ||
	       (mr->access & IBV_ACCESS_LOCAL_WRITE);
}

enum ibv_wc_status sv_mw_bind(struct sv_qp *qp, const struct sv_swqe *w)
{
	struct sv_pd *pd = to_spd(qp->qpx.qp_base.pd);
	struct sv_mw *mw = w->mw;
	bool ok;

	pthread_mutex_lock(&qp->ctx->mw_lock);
	ok = bind_ok(qp, mw, w, pd);
	if (ok && w->mw_mr_key)
		write_binding(mw, w->rkey, w->mw_mr_key, w->mw_access,
			      qp->qpx.qp_base.qp_num, w->raddr, w->swap_add);
	else if (ok)
		sv_mw_clear(mw);
	pthread_mutex_unlock(&qp->ctx->mw_lock);
	return ok ? IBV_WC_SUCCESS : IBV_WC_MW_BIND_ERR;
}

int sv_mw_invalidate(struct sv_context *ctx, uint32_t rkey, struct sv_pd *pd,
		     uint32_t qpn)
{
	struct sv_mw *mw = mw_of(ctx, rkey);
	int err = -EINVAL;

	if (!mw)
		return err;
	pthread_mutex_lock(&ctx->mw_lock);
	/* o10-37.2.26: type 2 only, its key exactly; a remote invalidate
	 * (qpn) only through the QP it is bound to */
	if (mw->pd == pd && mw->ibv.type == IBV_MW_TYPE_2 && mw->key &&
	    mw->key == rkey && (!qpn || mw->qpn == qpn)) {
		sv_mw_clear(mw);
		err = 0;
	}
	pthread_mutex_unlock(&ctx->mw_lock);
	return err;
}
