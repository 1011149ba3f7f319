// SPDX-License-Identifier: MIT
/*
 * Device memory (ibv_alloc_dm, ibv_free_dm, ibv_memcpy_to_dm,
 * ibv_memcpy_from_dm, ibv_reg_dm_mr), as mlx5 offers its on-chip memory
 * (MEMIC): a region of the device that programs fill and read with the
 * dm's memcpy ops and that RDMA reaches through MRs registered on it.
 *
 * Our "device" is the context's shared-memory arena (transport/rmem.c):
 * a DM is page-rounded private anonymous memory moved onto the arena at
 * allocation (sv_rmem_dm_hold), so every MR on it is already shared:
 * peers on this host write, read and update it atomically with one copy
 * (the direct one-sided path) and place sends into receives on it
 * (single copy), with none of our threads; over TCP the responder serves
 * it as any MR.  If the arena cannot take it the DM stays private and
 * works through the responder, slower, never wrong.
 *
 * As rdma-core and mlx5: an MR on a DM is zero-based (IBV_ACCESS_ZERO_BASED
 * is required; its iova 0 is byte dm_offset of the DM), its access at most
 * local write and remote write, read and atomic, and it lies inside the
 * DM.  A DM with MRs on it cannot be freed (EBUSY: the kernel's usecnt).
 * memcpy beyond the DM's length is EFAULT.  The bound: max_dm_size
 * (SV_MAX_DM_SIZE) per allocation and per context in all, counted in
 * pages; a DM past max_dm_size is EINVAL (mlx5's check), past what the
 * context has left ENOMEM (the kernel's, when the device's memory is used
 * up).  Allocating and freeing 256 KiB costs ~3 ms (the move onto the
 * arena and back); a DM is meant to be made once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guard.h"
#include "rmem.h"
#include "verbs.h"

struct sv_dm {
	struct ibv_dm ibv;
	uint8_t *mem;		   /* the bytes: page-aligned, mapped */
	uint64_t length;	   /* what was asked: the bounds */
	size_t map_len;		   /* length rounded up to pages */
	_Atomic uint32_t nmrs;	   /* MRs on it (ibv_free_dm: EBUSY) */
	struct sv_dm *next, *prev; /* ctx->dms, under mr_lock */
	/* ibv_import_dm (in this process): real is the DM every handle
	 * names (itself for the one ibv_alloc_dm made); on the real one,
	 * under mr_lock: refs, its handles (the memory goes with the
	 * last), dead once freed through any of them (no import finds
	 * it, memcpy through the others is EINVAL) */
	struct sv_dm *real;
	uint32_t refs;
	_Atomic bool dead;
};

#define SV_DM_ACCESS                                         \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
	 IBV_ACCESS_ZERO_BASED)

static _Atomic uint32_t dm_handles; /* the last ibv_dm.handle given */

/* The DM a handle names (import: ibv_import_dm). */
static struct sv_dm *to_sdm(struct ibv_dm *dm)
{
	return container_of(dm, struct sv_dm, ibv)->real;
}

static bool dm_dead(struct sv_dm *dm)
{
	return atomic_load_explicit(&dm->dead, memory_order_acquire);
}

/* [off, off+len) inside the DM, without overflow. */
static bool dm_inside(const struct sv_dm *dm, uint64_t off, uint64_t len)
{
	return off <= dm->length && len <= dm->length - off;
}

/* ibv_memcpy_to_dm: 0 or a positive errno (EFAULT outside the DM, or a
 * host buffer we cannot read). */
static int dm_memcpy_to(struct ibv_dm *ibdm, uint64_t off, const void *host,
			size_t len)
{
	struct sv_dm *dm = to_sdm(ibdm);

	if (dm_dead(dm)) /* freed through another handle */
		return EINVAL;
	if (!dm_inside(dm, off, len))
		return EFAULT;
	if (len && sv_copy_guarded(dm->mem + off, host, len))
		return EFAULT;
	return 0;
}

/* ibv_memcpy_from_dm: the same, the other way. */
static int dm_memcpy_from(void *host, struct ibv_dm *ibdm, uint64_t off,
			  size_t len)
{
	struct sv_dm *dm = to_sdm(ibdm);

	if (dm_dead(dm))
		return EINVAL;
	if (!dm_inside(dm, off, len))
		return EFAULT;
	if (len && sv_copy_guarded(host, dm->mem + off, len))
		return EFAULT;
	return 0;
}

/* Takes the DM's pages from the context's device memory: -ENOMEM past
 * it (pages, not bytes: 1-byte DMs cannot map a page each for ever). */
static int dm_take(struct sv_context *ctx, struct sv_dm *dm)
{
	int err = 0;

	pthread_mutex_lock(&ctx->mr_lock);
	if (dm->map_len > SV_MAX_DM_SIZE - ctx->dm_bytes) {
		err = -ENOMEM;
	} else {
		ctx->dm_bytes += dm->map_len;
		dm->prev = NULL;
		dm->next = ctx->dms;
		if (ctx->dms)
			ctx->dms->prev = dm;
		ctx->dms = dm;
	}
	pthread_mutex_unlock(&ctx->mr_lock);
	return err;
}

/* Takes dm off the context's list and its bytes off the total (mr_lock
 * held). */
static void dm_unlink(struct sv_context *ctx, struct sv_dm *dm)
{
	ctx->dm_bytes -= dm->map_len;
	if (dm->prev)
		dm->prev->next = dm->next;
	else
		ctx->dms = dm->next;
	if (dm->next)
		dm->next->prev = dm->prev;
}

static void dm_give_back(struct sv_context *ctx, struct sv_dm *dm)
{
	pthread_mutex_lock(&ctx->mr_lock);
	dm_unlink(ctx, dm);
	pthread_mutex_unlock(&ctx->mr_lock);
}

/* What mlx5_alloc_dm and the kernel refuse, as -errno. */
static int check_alloc(const struct ibv_alloc_dm_attr *attr)
{
	long pg = sysconf(_SC_PAGESIZE);

	if (!attr || attr->comp_mask)
		return -EINVAL;
	if (!attr->length || attr->length > SV_MAX_DM_SIZE)
		return -EINVAL;
	/* the bytes start on a page: any alignment up to one is kept */
	if (attr->log_align_req >= 31 ||
	    (1l << attr->log_align_req) > (pg > 0 ? pg : 4096))
		return -EINVAL;
	return 0;
}

struct ibv_dm *sv_alloc_dm(struct ibv_context *c,
			   struct ibv_alloc_dm_attr *attr)
{
	struct sv_context *ctx = to_sctx(c);
	long pg = sysconf(_SC_PAGESIZE);
	struct sv_dm *dm;
	int err = check_alloc(attr);

	if (err) {
		errno = -err;
		return NULL;
	}
	dm = calloc(1, sizeof(*dm));
	if (!dm) {
		errno = ENOMEM;
		return NULL;
	}
	dm->length = attr->length;
	dm->map_len = (attr->length + (size_t)pg - 1) & ~((size_t)pg - 1);
	err = dm_take(ctx, dm);
	if (err)
		goto err_free;
	dm->mem = mmap(NULL, dm->map_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dm->mem == MAP_FAILED) {
		err = -ENOMEM;
		goto err_give_back;
	}
	sv_guard_init(); /* the memcpy ops' guarded copies */
	/* on the arena; if not, the responder serves its MRs */
	err = sv_rmem_dm_hold(ctx, dm->mem, dm->map_len);
	if (err)
		sv_dbg("device memory of %zu bytes stays private: %s\n",
		       dm->map_len, strerror(-err));
	dm->ibv.context = c;
	dm->ibv.memcpy_to_dm = dm_memcpy_to;
	dm->ibv.memcpy_from_dm = dm_memcpy_from;
	dm->ibv.comp_mask = 0;
	dm->real = dm;
	dm->refs = 1;
	dm->ibv.handle = atomic_fetch_add_explicit(&dm_handles, 1,
						   memory_order_relaxed) +
			 1;
	return &dm->ibv;

err_give_back:
	dm_give_back(ctx, dm);
err_free:
	free(dm);
	errno = -err;
	return NULL;
}

static void dm_release(struct sv_context *ctx, struct sv_dm *dm)
{
	sv_rmem_dm_unhold(ctx, dm->mem);
	munmap(dm->mem, dm->map_len);
	free(dm);
}

/* Drops handle h of its DM (mr_lock held): true when it was the last,
 * and the DM is then off the context's list; h itself is freed here
 * unless it is the DM. */
static bool dm_drop(struct sv_context *ctx, struct sv_dm *h)
{
	struct sv_dm *dm = h->real;

	if (h != dm)
		free(h);
	if (--dm->refs)
		return false;
	dm_unlink(ctx, dm);
	return true;
}

/* ibv_free_dm through any handle: the DM is destroyed (as the kernel's
 * destroy of a shared object), its memory goes with its last handle;
 * 0 or a positive errno. */
int sv_free_dm(struct ibv_dm *ibdm)
{
	struct sv_dm *dm, *h;
	struct sv_context *ctx;
	bool last;

	if (!ibdm)
		return EINVAL;
	h = container_of(ibdm, struct sv_dm, ibv);
	dm = h->real;
	ctx = to_sctx(ibdm->context);
	pthread_mutex_lock(&ctx->mr_lock);
	/* acquire: the MRs' last use happens before the unmap */
	if (atomic_load_explicit(&dm->nmrs, memory_order_acquire)) {
		pthread_mutex_unlock(&ctx->mr_lock);
		return EBUSY;
	}
	atomic_store_explicit(&dm->dead, true, memory_order_release);
	last = dm_drop(ctx, h);
	pthread_mutex_unlock(&ctx->mr_lock);
	if (last)
		dm_release(ctx, dm);
	return 0;
}

/* ibv_import_dm in this process: a handle of the live DM of ctx whose
 * handle is handle; NULL and EINVAL if none. */
struct ibv_dm *sv_dm_import(struct ibv_context *c, uint32_t handle)
{
	struct sv_context *ctx = to_sctx(c);
	struct sv_dm *h = calloc(1, sizeof(*h)), *dm;

	if (!h) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&ctx->mr_lock);
	for (dm = ctx->dms; dm; dm = dm->next)
		if (dm->ibv.handle == handle && !dm_dead(dm))
			break;
	if (dm)
		dm->refs++;
	pthread_mutex_unlock(&ctx->mr_lock);
	if (!dm) {
		free(h);
		errno = EINVAL;
		return NULL;
	}
	h->ibv = dm->ibv;
	h->ibv.context = c;
	h->real = dm;
	h->mem = dm->mem;
	h->length = dm->length;
	h->map_len = dm->map_len;
	return &h->ibv;
}

/* The import protocol's SV_IMP_DM (import.c): whether handle names a live
 * DM of ctx, and its length. */
bool sv_dm_live(struct sv_context *ctx, uint32_t handle, uint64_t *length)
{
	struct sv_dm *dm;

	pthread_mutex_lock(&ctx->mr_lock);
	for (dm = ctx->dms; dm; dm = dm->next)
		if (dm->ibv.handle == handle && !dm_dead(dm))
			break;
	if (dm)
		*length = dm->length;
	pthread_mutex_unlock(&ctx->mr_lock);
	return dm != NULL;
}

/* ibv_unimport_dm: this handle only (a DM it was not imported as: said,
 * nothing freed). */
void sv_dm_unimport(struct ibv_dm *ibdm)
{
	struct sv_context *ctx;
	struct sv_dm *h, *dm;
	bool last;

	if (!ibdm)
		return;
	h = container_of(ibdm, struct sv_dm, ibv);
	dm = h->real;
	if (h == dm) {
		fprintf(stderr,
			"softverbs: ibv_unimport_dm: DM %u was not imported "
			"(ibv_free_dm frees it)\n",
			ibdm->handle);
		return;
	}
	ctx = to_sctx(ibdm->context);
	pthread_mutex_lock(&ctx->mr_lock);
	last = dm_drop(ctx, h);
	pthread_mutex_unlock(&ctx->mr_lock);
	if (last)
		dm_release(ctx, dm);
}

void sv_dm_mr_gone(struct sv_dm *dm)
{
	atomic_fetch_sub_explicit(&dm->nmrs, 1, memory_order_release);
}

/* ibv_close_device: the DMs the application left (their MRs are gone
 * with the context's; the arena was already let go). */
void sv_dm_free_all(struct sv_context *ctx)
{
	while (ctx->dms) {
		struct sv_dm *dm = ctx->dms;

		ctx->dms = dm->next;
		munmap(dm->mem, dm->map_len);
		free(dm);
	}
	ctx->dm_bytes = 0;
}

/* What rdma-core's ibv_cmd_reg_dm_mr, mlx5 and the kernel refuse. */
static int check_reg_dm(struct ibv_pd *pd, struct sv_dm *dm, uint64_t off,
			size_t len, unsigned int access)
{
	/* the same context through any of its handles (import.c) */
	if (to_sctx(pd->context) != to_sctx(dm->ibv.context) || dm_dead(dm))
		return -EINVAL;
	/* DM MRs are zero-based: the bytes' address is the device's */
	if (!(access & IBV_ACCESS_ZERO_BASED))
		return -EINVAL;
	if (access & ~(unsigned int)SV_DM_ACCESS)
		return -EINVAL;
	/* IBA 10.6.3.1: remote write or atomic needs local write */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (!len || !dm_inside(dm, off, len))
		return -EINVAL;
	return 0;
}

struct ibv_mr *sv_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm,
			    uint64_t dm_offset, size_t length,
			    unsigned int access)
{
	struct sv_dm *dm;
	struct ibv_mr *mr;
	int err;

	if (!pd || !ibdm) {
		errno = EINVAL;
		return NULL;
	}
	dm = to_sdm(ibdm);
	/* optional access bits may be ignored (verbs.h) */
	access &= ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
	err = check_reg_dm(pd, dm, dm_offset, length, access);
	if (err) {
		errno = -err;
		return NULL;
	}
	/* before the MR exists: a free_dm from now on sees it */
	atomic_fetch_add_explicit(&dm->nmrs, 1, memory_order_relaxed);
	mr = sv_mr_publish(pd, dm->mem + dm_offset, length, 0,
			   access & ~(unsigned int)IBV_ACCESS_ZERO_BASED, dm);
	if (!mr)
		sv_dm_mr_gone(dm);
	return mr;
}
