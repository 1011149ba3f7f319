// SPDX-License-Identifier: MIT
/*
 * The MR table's lookup: a key to its MR, with no lock (verbs/mr.c's head
 * comment says how the keys and the table are made).  Every data path
 * calls it: the requester's and responder's SGEs and RDMA keys, the UD
 * transport, XRC delivery; so it is in core/, below them all.
 */
#include "core.h"
#include "objects.h"

/* pd first (acquire): an MR is published by its pd (release, after its
 * keys), so a pd we see came with the keys written before it. */
struct sv_mr *sv_mr_lookup(struct sv_context *ctx, uint32_t key,
			   struct sv_pd *pd)
{
	struct sv_mr *mr;

	if (!key)
		return NULL;
	mr = atomic_load_explicit(
		(_Atomic(struct sv_mr *) *)&ctx->mrs[sv_mr_slot(key)],
		memory_order_acquire);
	if (!mr ||
	    atomic_load_explicit((_Atomic(struct sv_pd *) *)&mr->pd,
				 memory_order_acquire) != pd ||
	    atomic_load_explicit((_Atomic uint32_t *)&mr->ibv.lkey,
				 memory_order_relaxed) != key)
		return NULL;
	return mr;
}
