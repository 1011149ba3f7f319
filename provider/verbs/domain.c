// SPDX-License-Identifier: MIT
/*
 * Thread domains (ibv_alloc_td) and parent domains
 * (ibv_alloc_parent_domain), as mlx5 has them: a parent domain is a PD
 * (to_spd gives the PD inside it) with an optional TD and the program's
 * allocator for the queue buffers of the QPs, CQs and SRQs made on it.
 * A TD is a promise of single-threaded use; softverbs keeps its locks all
 * the same, since its progress thread shares every QP and CQ with the
 * program (docs/verbs.md "Thread and parent domains").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

/* What the program's alloc is asked for: natural alignment of the
 * entries (WQEs, SGEs, completions), a cache line */
#define SV_DOM_ALIGN 64

struct ibv_td *sv_alloc_td(struct ibv_context *c, struct ibv_td_init_attr *a)
{
	struct sv_td *td;

	if (!a || a->comp_mask) { /* no optional field is defined */
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->ibv.context = c;
	return &td->ibv;
}

/* EBUSY while a parent domain holds it, as mlx5. */
int sv_dealloc_td(struct ibv_td *ibtd)
{
	struct sv_td *td = to_std(ibtd);

	/* acquire: the parent domains' last uses happen before the free */
	if (atomic_load_explicit(&td->users, memory_order_acquire))
		return EBUSY;
	free(td);
	return 0;
}

static int check_pdom_attr(struct ibv_context *c,
			   const struct ibv_parent_domain_init_attr *a)
{
	if (!a || !a->pd || a->pd->context != c)
		return EINVAL;
	if (a->td && a->td->context != c)
		return EINVAL;
	if (a->comp_mask & ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
				       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT))
		return EINVAL;
	/* rdma-core would call a NULL allocator; we refuse it */
	if ((a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!a->alloc || !a->free))
		return EINVAL;
	return 0;
}

/*
 * A parent domain of a.pd (or of the PD inside a.pd if that is itself a
 * parent domain, as mlx5's to_mpd resolves it).  It holds its PD and TD
 * until ibv_dealloc_pd; its handle is its PD's
 * (ibv_initialize_parent_domain).
 */
struct ibv_pd *sv_alloc_parent_domain(struct ibv_context *c,
				      struct ibv_parent_domain_init_attr *a)
{
	struct sv_pdom *dom;
	int err = check_pdom_attr(c, a);

	if (err) {
		errno = err;
		return NULL;
	}
	dom = calloc(1, sizeof(*dom));
	if (!dom) {
		errno = ENOMEM;
		return NULL;
	}
	dom->pd.inner = to_spd(a->pd);
	dom->pd.real = dom->pd.inner; /* to_spd: the PD inside */
	dom->pd.id = dom->pd.inner->id;
	dom->pd.ibv.context = c;
	dom->pd.ibv.handle = dom->pd.inner->ibv.handle;
	sv_pd_get(dom->pd.inner);
	if (a->td) {
		dom->td = to_std(a->td);
		atomic_fetch_add_explicit(&dom->td->users, 1,
					  memory_order_relaxed);
	}
	if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		dom->alloc = a->alloc;
		dom->free = a->free;
	}
	if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		dom->pd_context = a->pd_context;
	return &dom->pd.ibv;
}

/* ibv_dealloc_pd of a parent domain: EBUSY while an object made on it
 * lives (sv_pd_hold), then its PD and TD are free to go. */
int sv_dealloc_parent_domain(struct sv_pdom *dom)
{
	/* acquire: the users' last accesses happen before the free */
	if (atomic_load_explicit(&dom->pd.users, memory_order_acquire))
		return EBUSY;
	sv_pd_put(dom->pd.inner);
	if (dom->td)
		atomic_fetch_sub_explicit(&dom->td->users, 1,
					  memory_order_release);
	free(dom);
	return 0;
}

void sv_pd_hold(struct ibv_pd *pd)
{
	struct sv_pdom *dom = sv_pdom_of(pd);

	sv_pd_get(to_spd(pd));
	if (dom)
		sv_pd_get(&dom->pd);
}

void sv_pd_drop(struct ibv_pd *pd)
{
	struct sv_pdom *dom = sv_pdom_of(pd);

	if (dom)
		sv_pd_put(&dom->pd);
	sv_pd_put(to_spd(pd));
}

/* Said once: a program's allocator that breaks its contract is a bug
 * worth a line, not a line per QP. */
static void say_misaligned(void *p, size_t size)
{
	static atomic_bool said;

	if (atomic_exchange(&said, true) && !sv_debug)
		return;
	fprintf(stderr,
		"softverbs: the parent domain's alloc returned %p for %zu "
		"bytes, not aligned to the %d asked; the object is not "
		"created (EINVAL)\n",
		p, size, SV_DOM_ALIGN);
}

/*
 * A zeroed buffer of n * size bytes for an object made on pd, of a
 * resource type (verbs.h SV_RES_*): from the parent domain's alloc if it
 * has one and that does not answer IBV_ALLOCATOR_USE_DEFAULT, else from
 * calloc.  *custom says which, for sv_dom_free.  NULL with errno: ENOMEM
 * (alloc said NULL, or no memory), EINVAL (alloc broke the alignment).
 */
void *sv_dom_alloc(struct ibv_pd *pd, size_t n, size_t size, uint64_t type,
		   bool *custom)
{
	struct sv_pdom *dom = pd ? sv_pdom_of(pd) : NULL;
	size_t bytes;
	void *p;

	*custom = false;
	if (__builtin_mul_overflow(n, size, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	if (dom && dom->alloc) {
		p = dom->alloc(pd, dom->pd_context, bytes, SV_DOM_ALIGN, type);
		if (!p) {
			errno = ENOMEM;
			return NULL;
		}
		if (p != IBV_ALLOCATOR_USE_DEFAULT) {
			if ((uintptr_t)p % SV_DOM_ALIGN) {
				dom->free(pd, dom->pd_context, p, type);
				say_misaligned(p, bytes);
				errno = EINVAL;
				return NULL;
			}
			/* the man page makes alloc zero it; we rely on it,
			 * so we make sure */
			memset(p, 0, bytes);
			*custom = true;
			return p;
		}
	}
	p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		errno = ENOMEM;
	return p;
}

void sv_dom_free(struct ibv_pd *pd, void *p, uint64_t type, bool custom)
{
	struct sv_pdom *dom;

	if (!custom) {
		free(p);
		return;
	}
	dom = sv_pdom_of(pd);
	dom->free(pd, dom->pd_context, p, type);
}
