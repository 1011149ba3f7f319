// SPDX-License-Identifier: MIT
/*
 * Memory regions: registration refuses what the kernel would (the range
 * must be mapped with the permissions the access needs, the flags
 * coherent), takes a reference on the PD, and hands out a key naming a
 * slot of the context's MR table.  Nothing is pinned or madvised: the
 * engine's copies are guarded instead (guard.c), and fork needs nothing
 * (IBV_FORK_UNNEEDED, device.c).  MR structures are type-stable (reused, never
 * freed before the context) so the engine may look a key up without a lock
 * while another thread deregisters: a stale key then simply fails the lookup.
 * Memory with remote access is moved onto the context's arena (an ODP
 * MR's never: odp.c), and every MR is published in its key table, so a
 * peer on this host reaches it with no help from us (rmem.c).
 *
 * Keys cannot be guessed (issue 24): an rkey is all an RDMA WRITE from the
 * network needs besides the QP, so every key is 31 bits from getrandom
 * (bit 31 set is a memory window's key: verbs/mw.c)
 * whose low 17 bits (sv_mr_slot) name a free slot of the table; lkey ==
 * rkey.  The table has a fixed SV_MAX_MR slots (it never moves, so lookup
 * is one load and a compare, with no lock and no probing), at most
 * max_mr = SV_MAX_MR - 1 of them taken: a random word whose slot is taken
 * is thrown away and another drawn (at most half full, two draws on
 * average); after SV_MR_DRAWS draws (a table nearly full) the first free
 * slot from a random one is taken, with 14 random high bits.  So a key is
 * uniform over the keys of the free slots: 31 random bits while the table
 * is mostly free, never fewer than 14 plus the slot's.  Keeping an index
 * in the key and filling the rest with random bits would leave 14 (the
 * index needs 17), and a hashed home slot needs a hash to invert; the low
 * bits are a hash as good, the key being random.  Unique while
 * registered: one live key per slot.  A stale key fails: its slot is free,
 * or holds another key (equal with chance 2^-31; rxe's 8-bit variant
 * repeats every 256 registrations of a slot).  The words come from
 * getrandom 64 at a time (ctx->mr_rand): a registration costs no system
 * call more (it already looks at our mappings; reg+dereg of 4 KiB took
 * 269 us of CPU before and after).  The price: MRs are spread over the
 * table's 1 MiB and the key table's 5 MiB, whose pages a slot's first use
 * makes resident: after 10,000 registrations 1 MiB of anonymous and 5 MiB
 * of shared memory more than with sequential keys, bounded there.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "core.h"
#include "engine.h"
#include "entry.h"
#include "guard.h"
#include "maps.h"
#include "objects.h"
#include "progress.h"
#include "rmem.h"
#include "verbs.h"

#define SV_ACCESS_KNOWN                                                      \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                 \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | \
	 IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING)

/* check_range's walk: every page from cur to end mapped, readable, and
 * writable if write. */
struct range_walk {
	uintptr_t cur, end;
	bool write, ok;
};

static int range_fn(const struct sv_vma *v, void *arg)
{
	struct range_walk *w = arg;

	if (v->lo > w->cur || v->perm[0] != 'r' ||
	    (w->write && v->perm[1] != 'w'))
		return 1; /* a hole, or a page we may not touch */
	w->cur = v->hi;
	w->ok = w->cur >= w->end;
	return w->ok;
}

/*
 * The kernel pins a range at registration, for writing when the access
 * lets anyone write (FOLL_WRITE), and fails with EFAULT what it cannot
 * pin: a hole, PROT_NONE, or a read-only mapping asked to be writable.
 * We pin nothing, so we ask our mappings (lib/maps.c) the same question:
 * every page of [addr, addr+len) mapped readable, and writable if write.
 */
static int check_range(const void *addr, size_t len, bool write)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	struct range_walk w = {
		.cur = (uintptr_t)addr & ~(page - 1),
		.end = ((uintptr_t)addr + len + page - 1) & ~(page - 1),
		.write = write,
	};
	int err = sv_maps_walk(w.cur, w.end, range_fn, &w);

	return err ? err : w.ok ? 0 : -EFAULT;
}

/* What the kernel would refuse, as -errno.  An ODP MR's memory is not
 * looked at (odp.c). */
static int check_reg(const void *addr, size_t length, uint64_t iova,
		     unsigned int access)
{
	if (access & ~(unsigned int)SV_ACCESS_KNOWN)
		return -EINVAL;
	if (access & IBV_ACCESS_ZERO_BASED)
		return -EOPNOTSUPP;
	/* IBA 10.6.3.1: remote write or atomic needs local write */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & IBV_ACCESS_ON_DEMAND)
		return sv_odp_check_reg(addr, length, iova);
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

#define SV_MR_DRAWS 32 /* random slots tried before a scan (mr_alloc) */

/* A random word for a key, bit 31 clear (set: a memory window's key,
 * objects.h); caller holds ctx->mr_lock. */
static uint32_t mr_random(struct sv_context *ctx)
{
	if (!ctx->mr_nrand) {
		sv_auth_random(ctx->mr_rand, sizeof(ctx->mr_rand));
		ctx->mr_nrand = ARRAY_SIZE(ctx->mr_rand);
	}
	return ctx->mr_rand[--ctx->mr_nrand] & ~SV_KEY_MW;
}

/* A new key whose slot is free (head comment); caller holds mr_lock and
 * has checked that a slot is free. */
static uint32_t mr_new_key(struct sv_context *ctx)
{
	const uint32_t mask = SV_MAX_MR - 1;
	uint32_t key, slot;

	for (int i = 0; i < SV_MR_DRAWS; i++) {
		key = mr_random(ctx);
		if (key && !ctx->mrs[sv_mr_slot(key)])
			return key;
	}
	key = mr_random(ctx);
	slot = sv_mr_slot(key);
	while (ctx->mrs[slot])
		slot = (slot + 1) & mask;
	key = (key & ~mask) | slot;
	return key ? key : (mask + 1) | slot; /* 0 is no key */
}

/*
 * A free slot and an MR for it (the free list first: MRs are type-stable),
 * in the slot before the lock is dropped, its pd NULL so lookups fail
 * until sv_reg_mr_iova2 publishes it.  EINVAL: max_mr live.  *key: 0 for
 * a new key, else the key to take (EBUSY: its slot is taken).
 */
static struct sv_mr *mr_alloc(struct sv_context *ctx, uint32_t *key, int *err)
{
	struct sv_mr *mr = NULL;

	pthread_mutex_lock(&ctx->mr_lock);
	if (ctx->nmrs >= SV_MAX_MR - 1) {
		*err = -EINVAL;
	} else if (*key && ctx->mrs[sv_mr_slot(*key)]) {
		*err = -EBUSY; /* the key asked for: its slot is taken */
	} else if (ctx->mr_free) {
		mr = ctx->mr_free;
		ctx->mr_free = mr->next_free;
	} else {
		mr = calloc(1, sizeof(*mr));
		*err = -ENOMEM;
	}
	if (mr) {
		if (!*key)
			*key = mr_new_key(ctx);
		mr->index = sv_mr_slot(*key);
		atomic_store_explicit(
			(_Atomic(struct sv_mr *) *)&ctx->mrs[mr->index], mr,
			memory_order_release);
		ctx->nmrs++;
	}
	pthread_mutex_unlock(&ctx->mr_lock);
	return mr;
}

/*
 * The MR over [addr, addr+length), named by iova, set up and published
 * (the arguments checked by the caller); on device memory if dm.  NULL
 * and errno on failure.
 */
/* The progress thread: the socket whose other end the owner of an
 * imported MR holds said something (a byte: the owner's dereg, whose
 * word already moved; the end: the owner closed it, or died).  Peeked
 * first: an event taken before the MR's reuse may name its next import,
 * whose socket is quiet. */
static void imp_event(struct sv_io *io, uint32_t revents)
{
	struct sv_pfd *p = container_of(io, struct sv_pfd, io);
	struct sv_mr *mr = container_of(p, struct sv_mr, imp_pfd);
	ssize_t n;
	char c;
	int fd;

	(void)revents;
	/* acquire: a live MR's fields, written before its pd (publish);
	 * none: deregistered here (its grace callback, ours, closes the
	 * fd), or a reuse not registered yet */
	if (!atomic_load_explicit((_Atomic(struct sv_pd *) *)&mr->pd,
				  memory_order_acquire)) {
		sv_progress_del(p->ctx, p);
		return;
	}
	fd = __atomic_load_n(&mr->imp_fd, __ATOMIC_RELAXED);
	if (fd < 0)
		return;
	/* the owner's dereg moved our word before it wrote: no need to look */
	if (!sv_mr_revoked(mr)) {
		do
			n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n < 0 && errno == EAGAIN)
			return;
	}
	atomic_store_explicit(&mr->imp_revoked, true, memory_order_release);
	/* level-triggered, and it stays readable: watched no more */
	sv_progress_del(p->ctx, p);
}

static struct ibv_mr *publish(struct ibv_pd *ibpd, void *addr, size_t length,
			      uint64_t iova, unsigned int access,
			      struct sv_dm *dm, uint32_t key,
			      const struct sv_imp_life *life)
{
	struct sv_context *ctx = to_sctx(ibpd->context);
	struct sv_pd *pd = to_spd(ibpd);
	struct sv_mr *mr;
	int err;

	mr = mr_alloc(ctx, &key, &err);
	if (!mr) {
		errno = -err;
		return NULL;
	}
	/* the engine's copies survive the app unmapping this (guard.c) */
	sv_guard_init();
	sv_pd_get(pd);
	mr->addr = addr;
	mr->iova = iova;
	mr->length = length;
	mr->access = (int)access;
	if ((access & IBV_ACCESS_ON_DEMAND) && sv_odp_implicit(addr, length))
		sv_odp_implicit_span(mr);
	mr->dm = dm;
	mr->imp_remote = life != NULL;
	__atomic_store_n(&mr->imp_fd, life ? life->fd : -1, __ATOMIC_RELAXED);
	mr->imp_word = life ? life->word : NULL;
	mr->imp_gen = life ? life->gen : 0;
	atomic_store_explicit(&mr->imp_revoked, false, memory_order_relaxed);
	mr->ibv.context = ibpd->context;
	mr->ibv.pd = ibpd;
	mr->ibv.addr = addr;
	mr->ibv.length = length;
	/* an import of another process's MR: that MR's handle, as
	 * ibv_import_mr's in one process */
	mr->ibv.handle = life && life->handle ? life->handle
					      : sv_handle_of(ctx, mr->index);
	atomic_store_explicit((_Atomic uint32_t *)&mr->ibv.rkey, key,
			      memory_order_relaxed);
	atomic_store_explicit((_Atomic uint32_t *)&mr->ibv.lkey, key,
			      memory_order_relaxed);
	/* release: the fields and keys above before the pd that makes them
	 * findable (sv_mr_lookup) */
	atomic_store_explicit((_Atomic(struct sv_pd *) *)&mr->pd, pd,
			      memory_order_release);
	/* re-backed and published for peers; never fails */
	sv_rmem_reg(ctx, mr);
	if (life) { /* the owner's death: seen by the progress thread */
		sv_pfd_set(&mr->imp_pfd, imp_event, false);
		sv_progress_add(ctx, &mr->imp_pfd, life->fd);
	}
	return &mr->ibv;
}

struct ibv_mr *sv_mr_publish(struct ibv_pd *ibpd, void *addr, size_t length,
			     uint64_t iova, unsigned int access,
			     struct sv_dm *dm)
{
	return publish(ibpd, addr, length, iova, access, dm, 0, NULL);
}

/* An MR on another process's device memory (dm.c: the DM's memfd mapped
 * here), checked by the caller: revoked, as an imported MR, when the DM's
 * owner frees it or dies (life: its word, and a copy of the DM's socket,
 * the MR's own). */
struct ibv_mr *sv_mr_publish_watched(struct ibv_pd *ibpd, void *addr,
				     size_t length, unsigned int access,
				     struct sv_dm *dm,
				     const struct sv_imp_life *life)
{
	struct ibv_mr *ibmr;

	ibmr = publish(ibpd, addr, length, 0, access, dm, 0, life);
	if (!ibmr)
		close(life->fd);
	return ibmr;
}

/* ibv_import_mr across processes (import.c): this process's registration
 * of [addr, addr+length), which the caller found is the memory the other
 * process's MR names, under that MR's key and iova.  Checked as any
 * registration (its mapping here must allow the access); EBUSY if the
 * key's slot is taken here. */
struct ibv_mr *sv_mr_import_remote(struct ibv_pd *ibpd, void *addr,
				   size_t length, uint64_t iova,
				   unsigned int access, uint32_t key,
				   const struct sv_imp_life *life)
{
	struct ibv_mr *ibmr;
	int err;

	err = check_reg(addr, length, iova, access);
	if (!err && (access & IBV_ACCESS_ON_DEMAND) &&
	    sv_odp_implicit(addr, length))
		err = -EOPNOTSUPP; /* all of the other process's memory */
	if (err) {
		close(life->fd);
		errno = -err;
		return NULL;
	}
	ibmr = publish(ibpd, addr, length, iova, access, NULL, key, life);
	if (!ibmr)
		close(life->fd);
	return ibmr;
}

struct ibv_mr *sv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr, size_t length,
			       uint64_t iova, unsigned int access)
{
	int err;

	access = mask_optional(access);
	err = check_reg(addr, length, iova, access);
	if (err) {
		errno = -err;
		return NULL;
	}
	return sv_mr_publish(ibpd, addr, length, iova, access, NULL);
}

/*
 * Before the memory under mr leaves the arena (rereg, dereg): no peer
 * places a send into a receive posted on it any more (post.c
 * sv_rq_withdraw), since the arena range may be another MR's next; the
 * send goes the ring's way and the responder finds the receive's MR
 * changed: LOC_PROT_ERR there, REM_OP_ERR for the sender.
 */
static void withdraw_receives(struct sv_context *ctx, const struct sv_mr *mr)
{
	uint64_t off = __atomic_load_n(&mr->arena_off, __ATOMIC_ACQUIRE);
	struct sv_list *n;

	if (off == SV_RMEM_NOT_REBACKED || !mr->pd)
		return;
	pthread_rwlock_rdlock(&ctx->qp_lock);
	sv_list_for_each(n, &ctx->qps)
	{
		struct sv_qp *qp = container_of(n, struct sv_qp, ctx_node);

		sv_lock(&qp->lock);
		sv_rq_withdraw(qp, off, mr->length);
		sv_unlock(&qp->lock);
	}
	pthread_rwlock_unlock(&ctx->qp_lock);
}

/*
 * Grace periods.  A progress thread that looked a key up reads the MR's
 * fields (iova, addr, length, access) with no lock until it is done with
 * that packet or WQE; it keeps no MR from one callback to the next.  So
 * once it has run a callback queued after an MR's pd went NULL, no
 * lookup of the old MR is still being used, and its fields may be
 * written again: a deregistered MR waits in ctx->mr_limbo until then
 * (mr_grace_cb) before the free list hands it out again, and rereg waits
 * for one such callback (mr_grace_wait) before it rewrites them.  (An
 * XRC SRQ may be filled by another context's thread: not covered.)
 */
/* An import's socket (the owner holds its other end), once no lookup
 * can be using the MR and the progress thread no longer watches it (or
 * is gone): the owner sees our end close (import.c). */
void sv_mr_imp_close(struct sv_mr *mr)
{
	if (mr->imp_remote && mr->imp_fd >= 0)
		close(mr->imp_fd);
	__atomic_store_n(&mr->imp_fd, -1, __ATOMIC_RELAXED);
	mr->imp_word = NULL;
	mr->imp_remote = false;
}

static void mr_grace_cb(struct sv_async *a)
{
	struct sv_context *ctx = container_of(a, struct sv_context, mr_grace);
	struct sv_mr *mr;

	pthread_mutex_lock(&ctx->mr_lock);
	while ((mr = ctx->mr_limbo)) {
		ctx->mr_limbo = mr->next_free;
		if (mr->imp_remote) /* watched no more (this thread's) */
			sv_progress_del(ctx, &mr->imp_pfd);
		sv_mr_imp_close(mr); /* no lookup uses it any more */
		mr->next_free = ctx->mr_free;
		ctx->mr_free = mr;
	}
	pthread_mutex_unlock(&ctx->mr_lock);
}

struct mr_grace {
	struct sv_async a;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void mr_grace_done(struct sv_async *a)
{
	struct mr_grace *g = container_of(a, struct mr_grace, a);

	pthread_mutex_lock(&g->lock);
	g->done = true;
	pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* Back when ctx's progress thread has run a callback queued now; at once
 * on that thread itself.  Never with mr_lock held (mr_grace_cb takes it). */
static void mr_grace_wait(struct sv_context *ctx)
{
	struct mr_grace g = {.done = false};

	if (sv_progress_ctx() == ctx)
		return;
	pthread_mutex_init(&g.lock, NULL);
	pthread_cond_init(&g.cond, NULL);
	sv_progress_async(ctx, &g.a, mr_grace_done);
	pthread_mutex_lock(&g.lock);
	while (!g.done)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);
	pthread_cond_destroy(&g.cond);
	pthread_mutex_destroy(&g.lock);
}

int sv_dereg_mr(struct ibv_mr *ibmr)
{
	struct sv_mr *mr = container_of(ibmr, struct sv_mr, ibv);
	struct sv_context *ctx = to_sctx(ibmr->context);
	struct sv_dm *dm;
	struct sv_pd *pd;

	if (mr->imported) /* a copy: the MR it names goes (import.c) */
		return sv_import_mr_dereg(mr);
	withdraw_receives(ctx, mr);
	/* first: peers that look the key up from now on fail */
	sv_rmem_dereg(ctx, mr);
	pthread_mutex_lock(&ctx->mr_lock);
	pd = mr->pd;
	if (!pd) { /* already deregistered */
		pthread_mutex_unlock(&ctx->mr_lock);
		return EINVAL;
	}
	/* lookups fail from now on; atomic: the progress threads load it
	 * with no lock (core/mr.c) */
	atomic_store_explicit((_Atomic(struct sv_pd *) *)&mr->pd, NULL,
			      memory_order_relaxed);
	/* the slot is free; the MR, reused for another key (never freed),
	 * still fails a lookup of this one that loaded it before */
	atomic_store_explicit((_Atomic(struct sv_mr *) *)&ctx->mrs[mr->index],
			      NULL, memory_order_release);
	ctx->nmrs--;
	sv_import_revoke(ctx, mr->ibv.lkey); /* other processes' imports */
	dm = mr->dm;
	mr->dm = NULL;
	mr->next_free = ctx->mr_limbo; /* reused after a grace period */
	ctx->mr_limbo = mr;
	pthread_mutex_unlock(&ctx->mr_lock);
	sv_progress_async(ctx, &ctx->mr_grace, mr_grace_cb);
	sv_pd_put(pd);
	if (dm)
		sv_dm_mr_gone(dm);
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
 * the key table entry is withdrawn first and published again (its
 * seqlock's gen moves), and the memory re-backed for the new range and
 * access.  Every check is made before anything changes, so on any error
 * the old MR is still whole (stronger than IBV_REREG_MR_ERR_CMD promises).
 */
int sv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *ibpd, void *addr,
		size_t length, int access)
{
	struct sv_mr *mr = container_of(ibmr, struct sv_mr, ibv);
	struct sv_context *ctx;
	struct sv_pd *old, *pd;
	unsigned int acc;
	uint64_t iova;
	int err;

	if (rereg_bad_input(ibmr, flags, ibpd, addr, length, access)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (mr->imported || mr->imp_remote) { /* import.c */
		errno = EOPNOTSUPP;
		return IBV_REREG_MR_ERR_INPUT;
	}
	ctx = to_sctx(ibmr->context);
	withdraw_receives(ctx, mr);
	pthread_mutex_lock(&ctx->mr_lock);
	old = mr->pd;
	if (!old) { /* deregistered */
		pthread_mutex_unlock(&ctx->mr_lock);
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (mr->dm) { /* as uverbs' rereg: not an MR on device memory */
		pthread_mutex_unlock(&ctx->mr_lock);
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	iova = (uintptr_t)addr;
	if (!(flags & IBV_REREG_MR_CHANGE_TRANSLATION)) {
		/* as registered (an implicit MR's engine span differs) */
		addr = mr->ibv.addr;
		length = mr->ibv.length;
		iova = sv_odp_implicit(addr, length) ? 0 : mr->iova;
	}
	acc = flags & IBV_REREG_MR_CHANGE_ACCESS ? mask_optional(access)
						 : (unsigned int)mr->access;
	pd = flags & IBV_REREG_MR_CHANGE_PD ? to_spd(ibpd) : old;
	err = check_reg(addr, length, iova, acc);
	if (err) {
		pthread_mutex_unlock(&ctx->mr_lock);
		errno = -err;
		return IBV_REREG_MR_ERR_CMD;
	}
	sv_rmem_dereg(ctx, mr);
	/* other processes' imports name the old MR: revoked */
	sv_import_revoke(ctx, mr->ibv.lkey);
	/* local lookups fail while it changes, and the fields are rewritten
	 * once no lookup made before is in use */
	atomic_store_explicit((_Atomic(struct sv_pd *) *)&mr->pd, NULL,
			      memory_order_relaxed);
	pthread_mutex_unlock(&ctx->mr_lock);
	mr_grace_wait(ctx);
	pthread_mutex_lock(&ctx->mr_lock);
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
