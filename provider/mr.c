// SPDX-License-Identifier: MIT
/*
 * Memory regions: registration refuses what the kernel would (the range
 * must be mapped with the permissions the access needs, the flags
 * coherent), takes a reference on the PD, and hands out a key naming a
 * slot of the context's MR table.  Nothing is pinned or madvised: the
 * engine's copies are guarded instead (fault.c), and fork needs nothing
 * (IBV_FORK_UNNEEDED, device.c).  MR structures are type-stable (reused, never
 * freed before the context) so the engine may look a key up without a lock
 * while another thread deregisters: a stale key then simply fails the lookup.
 * Memory with remote access is moved onto the context's arena, and every
 * MR is published in its key table, so a peer on this host reaches it
 * with no help from us (rmem.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rmem.h"
#include "sv.h"

#define SV_ACCESS_KNOWN                                                      \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                 \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | \
	 IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING)

/* ib_access_writable(): access that lets anyone write the memory. */
#define SV_ACCESS_WRITES                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)

/*
 * The kernel pins a range at registration, for writing when the access
 * lets anyone write (FOLL_WRITE), and fails with EFAULT what it cannot
 * pin: a hole, PROT_NONE, or a read-only mapping asked to be writable.
 * We pin nothing, so we ask /proc/self/maps the same question: every
 * page of [addr, addr+len) mapped readable, and writable if write.
 */
static int check_range(const void *addr, size_t len, bool write)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t cur = (uintptr_t)addr & ~(page - 1);
	uintptr_t end = ((uintptr_t)addr + len + page - 1) & ~(page - 1);
	FILE *f = fopen("/proc/self/maps", "re");
	char *line = NULL;
	size_t cap = 0;
	int err = -EFAULT;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		unsigned long lo, hi;
		char perm[5];

		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) != 3)
			break;
		if (hi <= cur)
			continue;
		if (lo > cur || perm[0] != 'r' || (write && perm[1] != 'w'))
			break; /* a hole, or a page we may not touch */
		cur = hi;
		if (cur >= end) {
			err = 0;
			break;
		}
	}
	free(line);
	fclose(f);
	return err;
}

/* What the kernel would refuse, as -errno. */
static int check_reg(const void *addr, size_t length, unsigned int access)
{
	if (access & ~(unsigned int)SV_ACCESS_KNOWN)
		return -EINVAL;
	if (access &
	    (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_MW_BIND))
		return -EOPNOTSUPP;
	/* IBA 10.6.3.1: remote write or atomic needs local write */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	/* ib_umem_get(): an empty or wrapping range is invalid */
	if (!length || (uintptr_t)addr + length < (uintptr_t)addr)
		return -EINVAL;
	if (length > SV_MAX_MR_SIZE) /* the device's max_mr_size */
		return -EINVAL;
	return check_range(addr, length, access & SV_ACCESS_WRITES);
}

/* Optional access bits may be ignored (verbs.h); others are ours. */
static unsigned int mask_optional(unsigned int access)
{
	return access & (~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE |
			 IBV_ACCESS_RELAXED_ORDERING);
}

/* A free MR slot: the free list first, so the table is full (EINVAL:
 * max_mr live) only when every slot holds a live MR. */
static struct sv_mr *mr_alloc(struct sv_context *ctx, int *err)
{
	struct sv_mr *mr = NULL;

	pthread_mutex_lock(&ctx->mr_lock);
	if (ctx->mr_free) {
		mr = ctx->mr_free;
		ctx->mr_free = mr->next_free;
	} else if (ctx->nmrs >= SV_MAX_MR) {
		*err = -EINVAL;
	} else {
		mr = calloc(1, sizeof(*mr));
		*err = -ENOMEM;
		if (mr) {
			mr->index = ctx->nmrs; /* from 1: key 0 is invalid */
			atomic_store_explicit(
				(_Atomic(struct sv_mr *) *)&ctx->mrs[mr->index],
				mr, memory_order_release);
			ctx->nmrs++;
		}
	}
	pthread_mutex_unlock(&ctx->mr_lock);
	return mr;
}

struct sv_mr *sv_mr_lookup(struct sv_context *ctx, uint32_t key,
			   struct sv_pd *pd)
{
	uint32_t idx = key >> 8;
	struct sv_mr *mr;

	if (idx == 0 || idx >= SV_MAX_MR)
		return NULL;
	mr = atomic_load_explicit((_Atomic(struct sv_mr *) *)&ctx->mrs[idx],
				  memory_order_acquire);
	if (!mr || mr->ibv.lkey != key || mr->pd != pd)
		return NULL;
	return mr;
}

struct ibv_mr *sv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr, size_t length,
			       uint64_t iova, unsigned int access)
{
	struct sv_context *ctx = to_sctx(ibpd->context);
	struct sv_pd *pd = to_spd(ibpd);
	struct sv_mr *mr;
	uint32_t gen;
	int err;

	access = mask_optional(access);
	err = check_reg(addr, length, access);
	if (err) {
		errno = -err;
		return NULL;
	}
	mr = mr_alloc(ctx, &err);
	if (!mr) {
		errno = -err;
		return NULL;
	}
	/* the engine's copies survive the app unmapping this (fault.c) */
	sv_fault_init();
	sv_pd_get(pd);
	gen = (mr->ibv.lkey + 1) & 0xff;
	mr->addr = addr;
	mr->iova = iova;
	mr->length = length;
	mr->access = (int)access;
	mr->ibv.context = ibpd->context;
	mr->ibv.pd = ibpd;
	mr->ibv.addr = addr;
	mr->ibv.length = length;
	mr->ibv.handle = mr->index;
	/* release: fields above before the key that makes them findable */
	atomic_store_explicit((_Atomic uint32_t *)&mr->ibv.rkey,
			      mr->index << 8 | gen, memory_order_relaxed);
	mr->pd = pd;
	atomic_store_explicit((_Atomic uint32_t *)&mr->ibv.lkey,
			      mr->index << 8 | gen, memory_order_release);
	/* re-backed and published for peers; never fails */
	sv_rmem_reg(ctx, mr);
	return &mr->ibv;
}

int sv_dereg_mr(struct ibv_mr *ibmr)
{
	struct sv_mr *mr = container_of(ibmr, struct sv_mr, ibv);
	struct sv_context *ctx = to_sctx(ibmr->context);
	struct sv_pd *pd;

	/* first: peers that look the key up from now on fail */
	sv_rmem_dereg(ctx, mr);
	pthread_mutex_lock(&ctx->mr_lock);
	pd = mr->pd;
	if (!pd) { /* already deregistered */
		pthread_mutex_unlock(&ctx->mr_lock);
		return EINVAL;
	}
	mr->pd = NULL; /* lookups fail from now on */
	mr->next_free = ctx->mr_free;
	ctx->mr_free = mr;
	pthread_mutex_unlock(&ctx->mr_lock);
	sv_pd_put(pd);
	return 0;
}

/* What libibverbs' ibv_rereg_mr refuses before the driver sees it. */
static bool rereg_bad_input(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd,
			    void *addr, size_t length, int access)
{
	if (!ibmr || !flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED))
		return true;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length))
		return true;
	if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))
		return true;
	return (flags & IBV_REREG_MR_CHANGE_PD) &&
	       (!pd || pd->context != ibmr->context);
}

/*
 * ibv_rereg_mr: a negative ibv_rereg_mr_err_code with errno set, or 0.
 * The keys stay (as rxe's rereg, and rdma-core's rereg of the same MR);
 * the key table entry is withdrawn first and published again with a new
 * gen, and the memory re-backed for the new range and access.  Every
 * check is made before anything changes, so on any error the old MR is
 * still whole (stronger than IBV_REREG_MR_ERR_CMD promises).
 */
int sv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *ibpd, void *addr,
		size_t length, int access)
{
	struct sv_mr *mr = container_of(ibmr, struct sv_mr, ibv);
	struct sv_context *ctx;
	struct sv_pd *old, *pd;
	unsigned int acc;
	int err;

	if (rereg_bad_input(ibmr, flags, ibpd, addr, length, access)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	ctx = to_sctx(ibmr->context);
	pthread_mutex_lock(&ctx->mr_lock);
	old = mr->pd;
	if (!old) { /* deregistered */
		pthread_mutex_unlock(&ctx->mr_lock);
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (!(flags & IBV_REREG_MR_CHANGE_TRANSLATION)) {
		addr = mr->addr;
		length = mr->length;
	}
	acc = flags & IBV_REREG_MR_CHANGE_ACCESS ? mask_optional(access)
						 : (unsigned int)mr->access;
	pd = flags & IBV_REREG_MR_CHANGE_PD ? to_spd(ibpd) : old;
	err = check_reg(addr, length, acc);
	if (err) {
		pthread_mutex_unlock(&ctx->mr_lock);
		errno = -err;
		return IBV_REREG_MR_ERR_CMD;
	}
	sv_rmem_dereg(ctx, mr);
	mr->pd = NULL; /* local lookups fail while it changes */
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->addr = addr;
		mr->iova = (uintptr_t)addr;
		mr->length = length;
		mr->ibv.addr = addr;
		mr->ibv.length = length;
	}
	mr->access = (int)acc;
	if (pd != old) {
		sv_pd_get(pd);
		sv_pd_put(old);
		mr->ibv.pd = ibpd;
	}
	/* release: the new fields before lookups can succeed again */
	atomic_store_explicit((_Atomic(struct sv_pd *) *)&mr->pd, pd,
			      memory_order_release);
	sv_rmem_reg(ctx, mr);
	pthread_mutex_unlock(&ctx->mr_lock);
	return 0;
}
