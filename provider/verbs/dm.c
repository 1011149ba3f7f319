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
 *
 * Another process that was passed the cmd_fd imports a DM (import.c):
 * at its first such import the DM moves off the arena onto a memfd of
 * its own (dm_move), which the owner passes and the importer maps
 * (sv_dm_import_remote); the owner's ibv_free_dm or death revokes the
 * import (dm_usable, and its MRs as imported MRs are).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guard.h"
#include "import.h"
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
	/* on the real one: ibv_reg_dm_mr holds it read, the move onto a
	 * memfd of its own (dm_move) write */
	pthread_rwlock_t move;
	/* the owner's: the DM's own memfd once another process imported it
	 * (-1 until then: on the arena) */
	int memfd;
	/* the importer's: another process's DM, its memfd mapped here (on
	 * ctx->dms, not counted in dm_bytes); alive while *word holds gen
	 * and the owner keeps the other end of life_fd (dm_usable) */
	bool remote;
	int life_fd;
	const _Atomic uint64_t *word;
	uint64_t gen;
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

/* Under TSan: the move's reads of the DM's bytes (rmem.c's unback, then
 * our copy) and the memcpy ops' guarded writes are ordered by guard
 * windows (the range read-only while it moves, writers waiting in the
 * fault handler) and mremap, which TSan does not see: the move's own
 * accesses are not recorded (the writers' among themselves still are).
 * Nothing otherwise. */
#if defined(__SANITIZE_THREAD__)
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
static void dm_tsan_ignore(bool on)
{
	if (on)
		__tsan_ignore_thread_begin();
	else
		__tsan_ignore_thread_end();
}
#else
static void dm_tsan_ignore(bool on)
{
	(void)on;
}
#endif

/* Whether another process's DM is still its owner's: its word unmoved
 * (the owner's ibv_free_dm moves it before it returns) and the socket
 * the owner holds quiet (a byte: freed; its end: the owner is gone). */
static bool remote_alive(struct sv_dm *dm)
{
	ssize_t n;
	char c;

	if (atomic_load_explicit(dm->word, memory_order_acquire) != dm->gen)
		return false;
	do
		n = recv(dm->life_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n < 0 && errno == EAGAIN;
}

/* Whether dm can be used: not freed through another handle, and if it is
 * another process's, still alive there (once not, never again). */
static bool dm_usable(struct sv_dm *dm)
{
	if (dm_dead(dm))
		return false;
	if (dm->remote && !remote_alive(dm)) {
		atomic_store_explicit(&dm->dead, true, memory_order_relaxed);
		return false;
	}
	return true;
}

/* ibv_memcpy_to_dm: 0 or a positive errno (EINVAL freed, or its owner
 * gone; EFAULT outside the DM, or a host buffer we cannot read).  No
 * lock: a guarded copy that writes while the DM moves (dm_move) waits in
 * the fault handler, then writes the new mapping. */
static int dm_memcpy_to(struct ibv_dm *ibdm, uint64_t off, const void *host,
			size_t len)
{
	struct sv_dm *dm = to_sdm(ibdm);
	int err = 0;

	if (!dm_usable(dm))
		err = EINVAL;
	else if (!dm_inside(dm, off, len))
		err = EFAULT;
	else if (len && sv_copy_guarded(dm->mem + off, host, len))
		err = EFAULT;
	return err;
}

/* ibv_memcpy_from_dm: the same, the other way. */
static int dm_memcpy_from(void *host, struct ibv_dm *ibdm, uint64_t off,
			  size_t len)
{
	struct sv_dm *dm = to_sdm(ibdm);
	int err = 0;

	if (!dm_usable(dm))
		err = EINVAL;
	else if (!dm_inside(dm, off, len))
		err = EFAULT;
	else if (len && sv_copy_guarded(host, dm->mem + off, len))
		err = EFAULT;
	return err;
}

/* Takes the DM's pages from the context's device memory: -ENOMEM past
 * it (pages, not bytes: 1-byte DMs cannot map a page each for ever). */
static int dm_take(struct sv_context *ctx, struct sv_dm *dm)
{
	int err = 0;

	pthread_mutex_lock(&ctx->mr_lock);
	if (dm->map_len > SV_MAX_DM_SIZE - ctx->dm_bytes)
		err = -ENOMEM;
	else
		ctx->dm_bytes += dm->map_len;
	pthread_mutex_unlock(&ctx->mr_lock);
	return err;
}

/* Puts dm, made whole, on the context's list, where imports (and the
 * progress thread's answers to other processes) find it. */
static void dm_link(struct sv_context *ctx, struct sv_dm *dm)
{
	pthread_mutex_lock(&ctx->mr_lock);
	dm->prev = NULL;
	dm->next = ctx->dms;
	if (ctx->dms)
		ctx->dms->prev = dm;
	ctx->dms = dm;
	pthread_mutex_unlock(&ctx->mr_lock);
}

/* Takes dm off the context's list and its bytes off the total (mr_lock
 * held). */
static void dm_unlink(struct sv_context *ctx, struct sv_dm *dm)
{
	if (!dm->remote)
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
	ctx->dm_bytes -= dm->map_len;
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
	uint32_t n;

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
	dm->memfd = dm->life_fd = -1;
	pthread_rwlock_init(&dm->move, NULL);
	do /* (see SV_HANDLE_HERE) */
		n = (atomic_fetch_add_explicit(&dm_handles, 1,
					       memory_order_relaxed) +
		     1) &
		    ~SV_HANDLE_HERE;
	while (!n);
	dm->ibv.handle = sv_handle_of(ctx, n);
	dm_link(ctx, dm);
	return &dm->ibv;

err_give_back:
	dm_give_back(ctx, dm);
err_free:
	free(dm);
	errno = -err;
	return NULL;
}

/* The DM's memory and struct (no handle names it any more). */
static void dm_unmap(struct sv_dm *dm)
{
	munmap(dm->mem, dm->map_len);
	if (dm->memfd >= 0)
		close(dm->memfd);
	if (dm->life_fd >= 0)
		close(dm->life_fd);
	pthread_rwlock_destroy(&dm->move);
	free(dm);
}

static void dm_release(struct sv_context *ctx, struct sv_dm *dm)
{
	if (!dm->remote)
		sv_rmem_dm_unhold(ctx, dm->mem);
	dm_unmap(dm);
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
	if (dm->remote) { /* the owner frees it: ours is an import */
		pthread_mutex_unlock(&ctx->mr_lock);
		fprintf(stderr,
			"softverbs: ibv_free_dm: DM %u is another process's "
			"(ibv_unimport_dm lets go of it here)\n",
			ibdm->handle);
		return EOPNOTSUPP;
	}
	atomic_store_explicit(&dm->dead, true, memory_order_release);
	/* other processes' imports: their next use fails */
	sv_import_revoke_dm(ctx, dm->ibv.handle);
	last = dm_drop(ctx, h);
	pthread_mutex_unlock(&ctx->mr_lock);
	if (last)
		dm_release(ctx, dm);
	return 0;
}

/* The live DM of ctx's own whose handle is handle (mr_lock held); an
 * import of another process's is not (its handle is the owner's). */
static struct sv_dm *dm_find(struct sv_context *ctx, uint32_t handle)
{
	struct sv_dm *dm;

	for (dm = ctx->dms; dm; dm = dm->next)
		if (dm->ibv.handle == handle && !dm->remote && !dm_dead(dm))
			break;
	return dm;
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
	dm = dm_find(ctx, handle);
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
	if (h == dm && !dm->remote) {
		fprintf(stderr,
			"softverbs: ibv_unimport_dm: DM %u was not imported "
			"(ibv_free_dm frees it)\n",
			ibdm->handle);
		return;
	}
	ctx = to_sctx(ibdm->context);
	pthread_mutex_lock(&ctx->mr_lock);
	/* another process's, mapped here: not while our MRs are on it */
	if (dm->remote &&
	    atomic_load_explicit(&dm->nmrs, memory_order_acquire)) {
		pthread_mutex_unlock(&ctx->mr_lock);
		fprintf(stderr,
			"softverbs: ibv_unimport_dm: DM %u still has MRs: "
			"kept\n",
			ibdm->handle);
		return;
	}
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
		dm_unmap(dm);
	}
	ctx->dm_bytes = 0;
}

/* What rdma-core's ibv_cmd_reg_dm_mr, mlx5 and the kernel refuse. */
static int check_reg_dm(struct ibv_pd *pd, struct sv_dm *dm, uint64_t off,
			size_t len, unsigned int access)
{
	/* the same context through any of its handles (import.c) */
	if (to_sctx(pd->context) != to_sctx(dm->ibv.context) || !dm_usable(dm))
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
	pthread_rwlock_rdlock(&dm->move); /* not moved meanwhile */
	err = check_reg_dm(pd, dm, dm_offset, length, access);
	if (err) {
		pthread_rwlock_unlock(&dm->move);
		errno = -err;
		return NULL;
	}
	/* before the MR exists: a free_dm from now on sees it */
	atomic_fetch_add_explicit(&dm->nmrs, 1, memory_order_relaxed);
	access &= ~(unsigned int)IBV_ACCESS_ZERO_BASED;
	if (dm->remote) {
		/* another process's: revoked with it (a copy of the
		 * socket is the MR's own) */
		struct sv_imp_life life = {
			.fd = fcntl(dm->life_fd, F_DUPFD_CLOEXEC, 0),
			.word = dm->word,
			.gen = dm->gen};

		mr = life.fd < 0
			     ? NULL
			     : sv_mr_publish_watched(pd, dm->mem + dm_offset,
						     length, access, dm, &life);
	} else {
		mr = sv_mr_publish(pd, dm->mem + dm_offset, length, 0, access,
				   dm);
	}
	if (!mr)
		sv_dm_mr_gone(dm);
	pthread_rwlock_unlock(&dm->move);
	return mr;
}

/*
 * Sharing with another process (ibv_import_dm there, import.c).  The DM's
 * bytes are on the context's arena, whose memfd holds every shared MR's
 * memory: passing it would give a stranger all of them.  So at its first
 * import by another process the DM moves onto a memfd of its own (sealed
 * against any size change, so neither side's mapping can fault), the
 * owner's mapping replaced in place with its bytes; that memfd is what
 * importers map.  Its MRs then go through the responder, as private
 * memory's, not the direct path (which reads the arena).  Not while the
 * DM has MRs: they are on the arena, and peers reach them there (EBUSY).
 */
static int dm_move(struct sv_context *ctx, struct sv_dm *dm)
{
	int fd = memfd_create("softverbs-dm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *tmp = MAP_FAILED;
	int err;

	if (fd < 0)
		return errno;
	if (ftruncate(fd, (off_t)dm->map_len) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		goto err;
	tmp = mmap(NULL, dm->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   0);
	if (tmp == MAP_FAILED)
		goto err;
	dm_tsan_ignore(true);
	/* off the arena: private memory with the DM's bytes again */
	sv_rmem_dm_unhold(ctx, dm->mem);
	/* read-only while its bytes move: the memcpy ops' guarded writes
	 * wait in the handler (guard.c), then retry on the new pages */
	sv_guard_window_open((uintptr_t)dm->mem,
			     (uintptr_t)dm->mem + dm->map_len);
	err = mprotect(dm->mem, dm->map_len, PROT_READ) ? errno : 0;
	if (!err) {
		memcpy(tmp, dm->mem, dm->map_len);
		/* straight to the kernel, as rmem.c (interposers drop
		 * FIXED) */
		if (syscall(SYS_mremap, tmp, dm->map_len, dm->map_len,
			    MREMAP_MAYMOVE | MREMAP_FIXED, dm->mem) == -1) {
			err = errno;
			mprotect(dm->mem, dm->map_len, PROT_READ | PROT_WRITE);
		}
	}
	sv_guard_window_close();
	dm_tsan_ignore(false);
	if (err) {
		errno = err;
		goto err;
	}
	dm->memfd = fd;
	return 0;
err:
	err = errno ? errno : ENOMEM;
	close(fd);
	if (tmp != MAP_FAILED)
		munmap(tmp, dm->map_len);
	return err;
}

/* Drops the reference sv_dm_share took (the DM may have been freed
 * meanwhile: its memory goes then). */
static void dm_put(struct sv_context *ctx, struct sv_dm *dm)
{
	bool last;

	pthread_mutex_lock(&ctx->mr_lock);
	last = dm_drop(ctx, dm);
	pthread_mutex_unlock(&ctx->mr_lock);
	if (last)
		dm_release(ctx, dm);
}

/* The owner's answer to SV_IMP_DM (the progress thread): the DM on its
 * own memfd, a copy of which goes to *memfd; fd, the importer's socket,
 * kept (sv_import_hold) until the DM is freed. */
uint32_t sv_dm_share(struct sv_context *ctx, uint32_t handle, int fd,
		     struct sv_imp_rep *r, int *memfd)
{
	struct sv_dm *dm;
	uint32_t st = 0;

	pthread_mutex_lock(&ctx->mr_lock);
	dm = dm_find(ctx, handle);
	if (dm)
		dm->refs++; /* not freed under us */
	pthread_mutex_unlock(&ctx->mr_lock);
	if (!dm)
		return EINVAL;
	pthread_rwlock_wrlock(&dm->move);
	if (dm->memfd < 0)
		st = atomic_load_explicit(&dm->nmrs, memory_order_relaxed)
			     ? EBUSY
			     : (uint32_t)dm_move(ctx, dm);
	pthread_rwlock_unlock(&dm->move);
	if (!st) {
		pthread_mutex_lock(&ctx->mr_lock);
		if (dm_dead(dm)) /* freed meanwhile: no import */
			st = EINVAL;
		else
			st = sv_import_hold(ctx, handle, true, fd, r);
		if (!st) {
			*memfd = fcntl(dm->memfd, F_DUPFD_CLOEXEC, 0);
			if (*memfd < 0) {
				st = (uint32_t)errno;
				sv_import_revoke_dm(ctx, handle);
			}
			r->length = dm->length;
		}
		pthread_mutex_unlock(&ctx->mr_lock);
	}
	dm_put(ctx, dm);
	return st;
}

/* What the owner passed as the DM's memfd: a regular file of the DM's
 * pages, sealed so that it can neither shrink (a fault here) nor be
 * resealed, and writable (no write seal): 0 or EPROTO. */
static int memfd_check(int fd, size_t map_len)
{
	unsigned int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	struct stat st;
	int seals;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != map_len)
		return EPROTO;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || ((unsigned int)seals & need) != need ||
	    (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
		return EPROTO;
	return 0;
}

/* ibv_import_dm of another process's DM (import.c, which checked the
 * answer and mapped the revocation page): its memfd mapped here, a handle
 * on ctx->dms (ibv_close_device unmaps it). */
struct ibv_dm *sv_dm_import_remote(struct ibv_context *c, uint32_t handle,
				   uint64_t length, int memfd,
				   const struct sv_imp_life *life)
{
	struct sv_context *ctx = to_sctx(c);
	long pg = sysconf(_SC_PAGESIZE);
	struct sv_dm *dm = calloc(1, sizeof(*dm));
	int err = ENOMEM;

	if (!dm)
		goto err;
	dm->length = length;
	dm->map_len = (length + (size_t)pg - 1) & ~((size_t)pg - 1);
	err = memfd_check(memfd, dm->map_len);
	if (err) {
		fprintf(stderr,
			"softverbs: ibv_import_dm: DM %u: the owner passed "
			"no memfd of its %zu bytes, sealed, writable\n",
			handle, dm->map_len);
		goto err;
	}
	dm->mem = mmap(NULL, dm->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       memfd, 0);
	if (dm->mem == MAP_FAILED) {
		err = errno;
		goto err;
	}
	close(memfd);
	sv_guard_init();
	dm->ibv.context = c;
	dm->ibv.memcpy_to_dm = dm_memcpy_to;
	dm->ibv.memcpy_from_dm = dm_memcpy_from;
	dm->ibv.handle = handle;
	dm->real = dm;
	dm->refs = 1;
	dm->memfd = -1;
	dm->remote = true;
	dm->life_fd = life->fd;
	dm->word = life->word;
	dm->gen = life->gen;
	pthread_rwlock_init(&dm->move, NULL);
	dm_link(ctx, dm);
	return &dm->ibv;
err:
	free(dm);
	close(memfd);
	close(life->fd);
	errno = err;
	return NULL;
}
