// SPDX-License-Identifier: MIT
/*
 * On-demand paging (issue 28 item 3): what IBV_ACCESS_ON_DEMAND changes.
 * An ODP MR is registered without looking at the memory (the kernel's
 * ib_umem_odp_get neither pins nor checks the range), is never moved
 * onto the arena (rmem.c leaves it where it is), so every access to it
 * goes through the target's responder, which copies from and to the
 * process's address space as it is at that moment: pages never touched
 * read as zeros, a range remapped after registration is served with
 * its new contents, and a range unmapped (or mapped without the access)
 * faults in a guarded copy (guard.c) and completes in error.  Implicit
 * ODP (addr NULL, length SIZE_MAX, iova 0) is one MR over the whole
 * address space.  Here: the registration checks, the device's caps and
 * ibv_advise_mr.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"
#include "guard.h"
#include "objects.h"
#include "verbs.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/*
 * What the kernel's ODP registration refuses (the flags are checked by
 * the caller): implicit ODP is exactly addr NULL, length SIZE_MAX, iova
 * 0 (mlx5: another iova is EINVAL); an explicit range must not be empty
 * or wrap and fits max_mr_size.  The range's mappings are not looked at,
 * but for page 0 (vm.mmap_min_addr), which is never mapped: EFAULT, as a
 * pinned registration (the kernel takes it; every access would fault,
 * and the engine would form a NULL pointer).
 */
int sv_odp_check_reg(const void *addr, size_t length, uint64_t iova)
{
	if (sv_odp_implicit(addr, length))
		return iova ? -EINVAL : 0;
	if (!length || (uintptr_t)addr + length < (uintptr_t)addr)
		return -EINVAL;
	if (length > SV_MAX_MR_SIZE)
		return -EINVAL;
	if ((uintptr_t)addr < (uintptr_t)sysconf(_SC_PAGESIZE))
		return -EFAULT;
	return 0;
}

/*
 * Where an implicit MR reaches, as the engine sees it (mr->addr, iova,
 * length; its ibv_mr keeps NULL and SIZE_MAX): [second page, 2^63), not
 * all 64 bits.  The page holding NULL is never mapped (vm.mmap_min_addr)
 * and the upper half is the kernel's, so an access there would fault
 * anyway; refusing it as out of bounds gives the same completion and
 * keeps the engine's pointer arithmetic defined (no NULL pointer for
 * memcpy, UBSan's nonnull; no offset past PTRDIFF_MAX from mr->addr,
 * UBSan's pointer-overflow).
 */
void sv_odp_implicit_span(struct sv_mr *mr)
{
	uint64_t floor = (uint64_t)sysconf(_SC_PAGESIZE);

	mr->addr = (uint8_t *)(uintptr_t)floor;
	mr->iova = floor;
	mr->length = (UINT64_C(1) << 63) - floor;
}

/*
 * ibv_query_device_ex's odp_caps: what the tests show working with ODP
 * MRs on both sides (tests/conformance/conf_odp.c).  UC has no reads or
 * atomics; UD no RDMA at all and no SRQ (EOPNOTSUPP).  XRC
 * (sv_odp_xrc_caps): send, RDMA and atomics, receives on its SRQs
 * (tests/conformance/conf_xrc_odp.c).
 */
void sv_odp_fill_caps(struct ibv_odp_caps *c)
{
	c->general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	c->per_transport_caps.rc_odp_caps =
		IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
		IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	c->per_transport_caps.uc_odp_caps = IBV_ODP_SUPPORT_SEND |
					    IBV_ODP_SUPPORT_RECV |
					    IBV_ODP_SUPPORT_WRITE;
	c->per_transport_caps.ud_odp_caps =
		IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
}

/* ibv_query_device_ex's xrc_odp_caps: an ODP MR is served by the same
 * responder and guarded copies whatever the QP type, and an XRC receive
 * is always an SRQ's (no IBV_ODP_SUPPORT_RECV). */
uint32_t sv_odp_xrc_caps(void)
{
	return IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE |
	       IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
	       IBV_ODP_SUPPORT_SRQ_RECV;
}

/* Faults [p, p+len) in by touching one byte (reading) or one word
 * (an atomic add of 0: a write that changes nothing) per page, guarded;
 * -EFAULT at the first page that cannot be. */
static int touch(uint8_t *p, uint64_t len, bool write)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(pg - 1);
	uintptr_t end = (uintptr_t)p + len;

	for (; a < end; a += pg) {
		uint64_t old;
		uint8_t b;

		if (write ? sv_atomic_guarded((uint64_t *)a, 0, 0, true, &old)
			  : sv_copy_guarded(&b, (void *)a, 1))
			return -EFAULT;
		if (a + pg < a)
			break;
	}
	return 0;
}

/* Makes [p, p+len) present (readable, or writable), as the kernel's
 * prefetch faults an ODP range in: MADV_POPULATE_* in one call; where
 * it refuses (older kernels, a range that is not all mapped, or not
 * with that access) the touch decides.  0 or -EFAULT. */
static int populate(uint8_t *p, uint64_t len, bool write)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(pg - 1);
	uintptr_t e = ((uintptr_t)p + len + pg - 1) & ~(pg - 1);

	if (e > a) {
		int r;

		do {
			r = madvise((void *)a, e - a,
				    write ? MADV_POPULATE_WRITE
					  : MADV_POPULATE_READ);
		} while (r && errno == EINTR);
		if (!r)
			return 0;
	}
	return touch(p, len, write);
}

/*
 * One SGE of ibv_advise_mr: its MR (an ODP MR of pd with the access the
 * advice needs) and where its range is in our memory.  The errors are
 * mlx5's (get_prefetchable_mr, pagefault_mr) with the man page's EPERM:
 * a key that names no ODP MR of pd ENOENT when the call is synchronous
 * (FLUSH), EINVAL when it is not; a memory window's key EINVAL; write
 * advice on an MR nobody may write EPERM; a range outside the MR EFAULT.
 */
static int advise_sge(struct sv_context *ctx, struct sv_pd *pd,
		      const struct ibv_sge *s, bool write, bool flush,
		      uint8_t **at)
{
	struct sv_mr *mr;
	uint64_t off;

	if (s->lkey & SV_KEY_MW)
		return -EINVAL;
	mr = sv_mr_lookup(ctx, s->lkey, pd);
	if (!mr || !(mr->access & IBV_ACCESS_ON_DEMAND))
		return flush ? -ENOENT : -EINVAL;
	if (write && !(mr->access & SV_ACCESS_WRITES))
		return -EPERM;
	if (s->addr < mr->iova)
		return -EFAULT;
	off = s->addr - mr->iova;
	if (off > mr->length || s->length > mr->length - off)
		return -EFAULT;
	*at = mr->addr + off;
	return 0;
}

/*
 * ibv_advise_mr: 0 or a positive errno.  Every SGE is checked before
 * any page is touched.  PREFETCH and PREFETCH_WRITE fault the ranges in
 * (readable, writable) now; with IBV_ADVISE_MR_FLAG_FLUSH a range that
 * cannot be (a hole, or mapped without the access) is EFAULT, without
 * it the advice is best effort (mlx5 queues it and reports nothing).
 * PREFETCH_NO_FAULT faults nothing: the pages the CPU has are the ones
 * we use, there is no device page table to fill.
 */
int sv_advise_mr(struct ibv_pd *ibpd, enum ibv_advise_mr_advice advice,
		 uint32_t flags, struct ibv_sge *sg, uint32_t num_sge)
{
	bool flush = flags & IBV_ADVISE_MR_FLAG_FLUSH;
	bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
	struct sv_context *ctx;
	struct sv_pd *pd;
	uint8_t *at;
	int err;

	if (!ibpd || (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH))
		return EINVAL;
	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EOPNOTSUPP;
	if (!sg || !num_sge) /* uverbs: at least one SGE */
		return EINVAL;
	ctx = to_sctx(ibpd->context);
	pd = to_spd(ibpd);
	for (uint32_t i = 0; i < num_sge; i++) {
		err = advise_sge(ctx, pd, &sg[i], write, flush, &at);
		if (err)
			return -err;
	}
	if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return 0;
	for (uint32_t i = 0; i < num_sge; i++) {
		if (!sg[i].length ||
		    advise_sge(ctx, pd, &sg[i], write, flush, &at))
			continue; /* deregistered meanwhile: nothing to do */
		err = populate(at, sg[i].length, write);
		if (err && flush)
			return -err;
	}
	return 0;
}
