// SPDX-License-Identifier: MIT
/*
 * Memory windows (IBA 10.6.7; man ibv_alloc_mw, ibv_bind_mw): alloc and
 * dealloc, and ibv_bind_mw for type 1, which posts a BIND_MW WQE as
 * rdma-core's providers do.  A window is a slot of the context's window
 * table and a key (objects.h: struct sv_mw says how its bits are made);
 * binding, invalidation and the responder's lookup are core/mw.c's.
 * Windows are type-stable: a responder that looked a key up while the
 * program deallocates it reads an invalid window, never freed memory.
 */
#include <errno.h>
#include <stdlib.h>

#include "auth.h"
#include "core.h"
#include "engine.h"
#include "verbs.h"

/* A free slot from a random one; caller holds mw_lock, nmws < max. */
static uint32_t free_slot(struct sv_context *ctx, uint32_t r)
{
	uint32_t slot = r & (SV_MAX_MW - 1);

	while (ctx->mws[slot] || !slot) /* slot 0 keeps keys away from 0 */
		slot = (slot + 1) & (SV_MAX_MW - 1);
	return slot;
}

/* A window for a slot (the free list first), in its slot but with no
 * PD yet; NULL with *err. */
static struct sv_mw *mw_alloc(struct sv_context *ctx, int *err)
{
	struct sv_mw *mw = NULL;
	uint32_t r[2];

	sv_auth_random(r, sizeof(r));
	pthread_mutex_lock(&ctx->mw_lock);
	if (ctx->nmws >= SV_MAX_MW - 1) {
		*err = EINVAL; /* max_mw live (rxe's pool limit) */
	} else if (ctx->mw_free) {
		mw = ctx->mw_free;
		ctx->mw_free = mw->next_free;
	} else {
		mw = calloc(1, sizeof(*mw));
		*err = ENOMEM;
	}
	if (mw) {
		uint32_t slot = free_slot(ctx, r[0]);

		/* bit 31: a window's; 20..30 random; the slot; the low
		 * byte, the consumer's, random to start with */
		mw->base = SV_KEY_MW | (r[1] & 0x7ff00000u) | slot << 8;
		atomic_store_explicit(
			(_Atomic(struct sv_mw *) *)&ctx->mws[slot], mw,
			memory_order_release);
		ctx->nmws++;
	}
	pthread_mutex_unlock(&ctx->mw_lock);
	return mw;
}

struct ibv_mw *sv_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type)
{
	struct sv_context *ctx = to_sctx(ibpd->context);
	struct sv_mw *mw;
	uint32_t r_low;
	int err = 0;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return NULL;
	}
	sv_auth_random(&r_low, sizeof(r_low));
	mw = mw_alloc(ctx, &err);
	if (!mw) {
		errno = err;
		return NULL;
	}
	mw->ibv.context = ibpd->context;
	mw->ibv.pd = ibpd;
	mw->ibv.type = type;
	mw->ibv.handle = sv_mw_slot(mw->base);
	mw->ibv.rkey = mw->base | (r_low & 0xff);
	sv_pd_hold(ibpd);
	pthread_mutex_lock(&ctx->mw_lock);
	sv_mw_clear(mw); /* invalid until bound */
	mw->pd = to_spd(ibpd);
	pthread_mutex_unlock(&ctx->mw_lock);
	return &mw->ibv;
}

int sv_dealloc_mw(struct ibv_mw *ibmw)
{
	struct sv_mw *mw = container_of(ibmw, struct sv_mw, ibv);
	struct sv_context *ctx = to_sctx(ibmw->context);
	struct ibv_pd *ibpd;
	struct sv_pd *pd;

	pthread_mutex_lock(&ctx->mw_lock);
	pd = mw->pd;
	ibpd = ibmw->pd; /* before mw can be reused, once unlocked */
	if (!pd) {
		pthread_mutex_unlock(&ctx->mw_lock);
		return EINVAL; /* deallocated already */
	}
	/* first: keys that look it up from now on fail (IBA 10.6.7.2.3:
	 * deallocation invalidates a bound window) */
	sv_mw_clear(mw);
	mw->pd = NULL;
	atomic_store_explicit(
		(_Atomic(struct sv_mw *) *)&ctx->mws[sv_mw_slot(mw->base)],
		NULL, memory_order_release);
	mw->next_free = ctx->mw_free;
	ctx->mw_free = mw;
	ctx->nmws--;
	pthread_mutex_unlock(&ctx->mw_lock);
	sv_pd_drop(ibpd);
	return 0;
}

/*
 * ibv_bind_mw (type 1): verbs.h's inline checked the type and the MR's
 * PD; this posts the bind as a BIND_MW WQE with the window's next key,
 * which it hands the program at once (rxe's provider does so too: a
 * failed bind's completion says the key is not valid).
 */
int sv_bind_mw(struct ibv_qp *qp, struct ibv_mw *ibmw, struct ibv_mw_bind *bind)
{
	struct ibv_send_wr wr = {
		.wr_id = bind->wr_id,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = bind->send_flags,
		.bind_mw = {.mw = ibmw,
			    .rkey = ibv_inc_rkey(ibmw->rkey),
			    .bind_info = bind->bind_info},
	};
	int err;

	if (ibmw->type != IBV_MW_TYPE_1 || ibmw->context != qp->context)
		return EINVAL;
	err = sv_post_bind_mw(qp, &wr);
	if (!err)
		ibmw->rkey = wr.bind_mw.rkey;
	return err;
}

void sv_mw_qp_gone(struct sv_context *ctx, uint32_t qpn)
{
	pthread_mutex_lock(&ctx->mw_lock);
	for (uint32_t i = 1; ctx->nmws && i < SV_MAX_MW; i++) {
		struct sv_mw *mw = ctx->mws[i];

		if (mw && mw->ibv.type == IBV_MW_TYPE_2 && mw->key &&
		    mw->qpn == qpn)
			sv_mw_clear(mw);
	}
	pthread_mutex_unlock(&ctx->mw_lock);
}

void sv_mw_free_all(struct sv_context *ctx)
{
	for (uint32_t i = 0; ctx->nmws && i < SV_MAX_MW; i++)
		free(ctx->mws[i]);
	while (ctx->mw_free) {
		struct sv_mw *mw = ctx->mw_free;

		ctx->mw_free = mw->next_free;
		free(mw);
	}
	pthread_mutex_destroy(&ctx->mw_lock);
}
