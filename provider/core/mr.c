// SPDX-License-Identifier: MIT
/*
 * The MR table's lookup: a key to its MR, with no lock (verbs/mr.c's head
 * comment says how the keys and the table are made).  Every data path
 * calls it: the requester's and responder's SGEs and RDMA keys, the UD
 * transport, XRC delivery; so it is in core/, below them all.
 */
#include "core.h"
#include "objects.h"

/*
 * An import of another process's MR (verbs/import.c) dies with the
 * owner's MR.  The owner moves the import's word in its revocation page
 * (mapped read-only here) at its ibv_dereg_mr or ibv_rereg_mr before
 * that returns (a release store under its mr_lock); we load it with
 * acquire, so a use after the owner's dereg returned fails, as on
 * hardware, at the cost of one load per lookup (no syscall).  The
 * owner's death moves no word: the socket it held of ours hangs up
 * then, which the progress thread sees and marks (imp_revoked, verbs/
 * mr.c), a little later than the death, as on hardware.
 */
bool sv_mr_revoked(struct sv_mr *mr)
{
	if (atomic_load_explicit(&mr->imp_revoked, memory_order_relaxed))
		return true;
	return mr->imp_word &&
	       atomic_load_explicit(mr->imp_word, memory_order_acquire) !=
		       mr->imp_gen;
}

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
	if (__builtin_expect(mr->imp_remote, 0) && sv_mr_revoked(mr))
		return NULL;
	return mr;
}

/* IBA 10.6.3.1: [addr, addr+len) of key is inside a live MR of pd with
 * every bit of access; where it is in our memory, or NULL. */
uint8_t *sv_mr_at(struct sv_context *ctx, uint32_t key, struct sv_pd *pd,
		  uint64_t addr, uint64_t len, unsigned int access)
{
	struct sv_mr *mr = sv_mr_lookup(ctx, key, pd);

	if (!mr || ((unsigned int)mr->access & access) != access ||
	    addr < mr->iova || addr - mr->iova > mr->length ||
	    len > mr->length - (addr - mr->iova))
		return NULL;
	return (uint8_t *)mr->addr + (addr - mr->iova);
}

bool sv_sges_writable(struct sv_context *ctx, struct sv_pd *pd,
		      const struct ibv_sge *sg, uint32_t n, uint64_t len)
{
	for (uint32_t k = 0; k < n && len; k++) {
		uint64_t l = sg[k].length < len ? sg[k].length : len;

		if (l && !sv_mr_at(ctx, sg[k].lkey, pd, sg[k].addr, l,
				   IBV_ACCESS_LOCAL_WRITE))
			return false;
		len -= l;
	}
	return true;
}
