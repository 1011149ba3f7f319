// SPDX-License-Identifier: MIT
/*
 * rmem: a context's arena (the memfd registered memory is moved onto) and
 * key table (the memfd describing every MR to peers), the re-backing of
 * the application's pages at registration and its undoing at
 * deregistration and in a fork child: the target side, the owner of the
 * memory.  What a range of our memory is comes from /proc/self/maps
 * (rmem_maps.c); peers' arenas and tables are mapped and looked up for
 * the engine in rmem_peer.c (sv_rpeer_*).  DESIGN.md, "Hazards of
 * re-backing", says what this changes for the application.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "env.h"
#include "guard.h"
#include "objects.h"
#include "rmem.h"
#include "rmem_priv.h"

/* A free range of arena offsets; the free list is sorted and coalesced. */
struct range {
	uint64_t off, len;
	struct range *next;
};

/* Every context's rmem, for fork.  Lock order: all_lock -> rm->lock. */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv_rmem *all_rmem;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* ---- copies that bypass the sanitizers' interceptors ----
 * The range holds malloc's redzones and other objects: ASan must not
 * check our copy of it, so the kernel does the copy (raw syscalls). */

static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off)
{
	while (n) {
		long w = syscall(SYS_pwrite64, fd, p, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static int pread_all(int fd, uint8_t *p, size_t n, uint64_t off)
{
	while (n) {
		long r = syscall(SYS_pread64, fd, p, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

typedef uint64_t __attribute__((may_alias)) word_t;

/* A page never written reads as zeros: the arena's hole already does. */
__attribute__((no_sanitize_address)) static bool page_zero(const uint8_t *p,
							   size_t n)
{
	const word_t *w = (const word_t *)p;

	for (size_t i = 0; i < n / sizeof(*w); i += 8) {
		word_t acc = w[i] | w[i + 1] | w[i + 2] | w[i + 3] | w[i + 4] |
			     w[i + 5] | w[i + 6] | w[i + 7];

		if (acc)
			return false;
	}
	return true;
}

/*
 * Which of n pages from p hold memory, into held[] (/proc/self/pagemap,
 * fd pm: present or swapped, bits 63 and 62; these flags need no
 * privilege).  A private anonymous page with neither was never written
 * (or was discarded) and reads as zeros: page_zero would learn that
 * with a fault per page, which was 3.4 s of an untouched 512 MiB
 * registration's 3.8 s here.  All held where pagemap cannot say.
 */
#define SV_PM_CHUNK 512 /* pages per pagemap read: 4 KiB of entries */

static void pages_held(int pm, const uint8_t *p, size_t n, bool *held)
{
	uint64_t e[SV_PM_CHUNK];
	size_t want = n * sizeof(e[0]);
	off_t at = (off_t)((uintptr_t)p / page_size() * sizeof(e[0]));
	long r = pm < 0 ? -1 : syscall(SYS_pread64, pm, e, want, at);

	for (size_t i = 0; i < n; i++)
		held[i] = r != (long)want || (e[i] & (3ull << 62));
}

/*
 * Reads a word of each page of to (the arena's pages that are to replace
 * p's) whose page in p held[] says is in the application's page tables.
 * Where the hypervisor shadows the guest's page tables (this 2-vCPU VM),
 * the first access through a page table entry costs about 4.5 us,
 * populated or not, and 30 ns after (bench/results/ucx/first-touch.c).
 * Re-backing gives the application new entries, so without this its
 * data path paid that again for memory it had touched already: UCX
 * rc_verbs' first 4,095 messages (one new receive buffer each) took 5.4
 * us one way against 0.54 later.  Registration pays it instead, as a
 * hardware provider's pins every page there.  Pages never touched are
 * left: their first use costs as much without us.  The entries must
 * survive the move: reback puts to at p's offset within 2 MiB.
 */
__attribute__((no_sanitize_address, no_sanitize_thread)) static void
touch_held(const uint8_t *to, const bool *held, size_t n)
{
	size_t pg = page_size();

	for (size_t i = 0; i < n; i++)
		if (held[i])
			(void)*(const volatile uint8_t *)(to + i * pg);
}

/* [p, p+len) into the arena at off (mapped at to), runs of non-zero
 * pages at a time, touching to's pages as touch_held says; pm:
 * /proc/self/pagemap, or -1 (then nothing is touched).  *zeros: the
 * pages skipped. */
static int copy_to_arena(int fd, int pm, uint64_t off, const uint8_t *p,
			 const uint8_t *to, size_t len, size_t *zeros)
{
	size_t pg = page_size(), npages = len / pg;
	bool held[SV_PM_CHUNK];

	for (size_t c = 0; c < npages; c += SV_PM_CHUNK) {
		size_t n = npages - c < SV_PM_CHUNK ? npages - c : SV_PM_CHUNK;
		size_t i = 0, j;
		int err;

		pages_held(pm, p + c * pg, n, held);
		if (pm >= 0)
			touch_held(to + c * pg, held, n);
		while (i < n) {
			if (!held[i] || page_zero(p + (c + i) * pg, pg)) {
				i++;
				++*zeros;
				continue;
			}
			for (j = i + 1; j < n && held[j] &&
					!page_zero(p + (c + j) * pg, pg);
			     j++)
				;
			err = pwrite_all(fd, p + (c + i) * pg, (j - i) * pg,
					 off + (c + i) * pg);
			if (err)
				return err;
			i = j;
		}
	}
	return 0;
}

/* [d, h) of the arena (page aligned) into p at d - off, runs of pages
 * that view (the same bytes as mapped, readable; or NULL) shows are not
 * all zeros at a time: zero pages stay untouched holes in p. */
static int copy_run(int fd, uint64_t off, uint8_t *p, const uint8_t *view,
		    uint64_t d, uint64_t h)
{
	size_t pg = page_size();

	while (d < h) {
		uint64_t j;
		int err;

		if (view && page_zero(view + (d - off), pg)) {
			d += pg;
			continue;
		}
		for (j = d + pg;
		     view && j < h && !page_zero(view + (j - off), pg); j += pg)
			;
		if (!view)
			j = h;
		err = pread_all(fd, p + (d - off), (size_t)(j - d), d);
		if (err)
			return err;
		d = j;
	}
	return 0;
}

#define SV_HELD_WINDOW 1024 /* pages a mincore call: 4 MiB */

/* The arena's data of [off, off+len), mapped here at 'at', into p (holes
 * stay zero, untouched), skipping the pages of zeros view shows (NULL:
 * none).  A page the populated mapping faulted in but nobody wrote is
 * data: an untouched 512 MiB registration's deregistration copied 512
 * MiB of zeros into new pages (4.9 s here).  lseek moves the fd's
 * offset, which nothing else uses. */
static int copy_from_arena(int fd, uint64_t off, uint8_t *p, const uint8_t *at,
			   const uint8_t *view, size_t len)
{
	unsigned char held[SV_HELD_WINDOW];
	size_t pg = page_size(), npages = len / pg;

	for (size_t c = 0; c < npages; c += SV_HELD_WINDOW) {
		size_t n = npages - c < SV_HELD_WINDOW ? npages - c
						       : SV_HELD_WINDOW;
		size_t i = 0;

		sv_rmem_pages_data(fd, at + c * pg, off + c * pg, n, held);
		while (i < n) {
			size_t j = i + 1;
			int err;

			if (!(held[i] & 1)) {
				i++;
				continue;
			}
			while (j < n && (held[j] & 1))
				j++;
			err = copy_run(fd, off, p, view, off + (c + i) * pg,
				       off + (c + j) * pg);
			if (err)
				return err;
			i = j;
		}
	}
	return 0;
}

/* ---- the arena and its offsets ---- */

static uint64_t arena_bytes(void)
{
	return sv_env_uint(SV_ENV_ARENA_GB) << 30;
}

/* A memfd of size bytes (sparse), sealed so it can never change size:
 * a peer's copies into it cannot SIGBUS. */
static int sealed_memfd(const char *name, uint64_t size)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int err;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* Makes the arena and the key table if not yet there.  rm->lock held. */
static int rmem_make(struct sv_rmem *rm)
{
	size_t pg = page_size();
	struct range *all;
	struct stat st;
	void *t;
	int err;

	if (rm->arena_fd >= 0)
		return 0;
	all = malloc(sizeof(*all));
	if (!all)
		return -ENOMEM;
	rm->arena_size = arena_bytes();
	rm->table_size =
		(SV_RKEY_HDR_BYTES +
		 (size_t)SV_MAX_MR * sizeof(struct sv_rkey_entry) + pg - 1) &
		~(pg - 1);
	rm->arena_fd = sealed_memfd("softverbs-arena", rm->arena_size);
	if (rm->arena_fd < 0) {
		err = rm->arena_fd;
		goto err_free;
	}
	if (fstat(rm->arena_fd, &st)) {
		err = -errno;
		goto err_arena;
	}
	rm->arena_dev = st.st_dev;
	rm->arena_ino = st.st_ino;
	rm->table_fd = sealed_memfd("softverbs-keys", rm->table_size);
	if (rm->table_fd < 0) {
		err = rm->table_fd;
		goto err_arena;
	}
	t = mmap(NULL, rm->table_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 rm->table_fd, 0);
	if (t == MAP_FAILED) {
		err = -errno;
		goto err_table;
	}
	rm->table = t;
	*rm->table = (struct sv_rkey_hdr){
		.magic = SV_RKEY_MAGIC,
		.version = SV_RKEY_VERSION,
		.entry_size = sizeof(struct sv_rkey_entry),
		.nentries = SV_MAX_MR,
		.entries_off = SV_RKEY_HDR_BYTES,
		.arena_size = rm->arena_size,
	};
	rm->ent = (struct sv_rkey_entry *)((uint8_t *)t + SV_RKEY_HDR_BYTES);
	*all = (struct range){0, rm->arena_size, NULL};
	rm->free = all;
	return 0;

err_table:
	close(rm->table_fd);
	rm->table_fd = -1;
err_arena:
	close(rm->arena_fd);
	rm->arena_fd = -1;
err_free:
	free(all);
	return err;
}

/* First fit; UINT64_MAX if no range is long enough. */
static uint64_t arena_alloc(struct sv_rmem *rm, uint64_t len)
{
	for (struct range **pp = &rm->free; *pp; pp = &(*pp)->next) {
		struct range *r = *pp;
		uint64_t off = r->off;

		if (r->len < len)
			continue;
		r->off += len;
		r->len -= len;
		if (!r->len) {
			*pp = r->next;
			free(r);
		}
		return off;
	}
	return UINT64_MAX;
}

/* Gives the memory back (a hole) and the offsets to the free list; if
 * the list cannot grow the offsets are lost, never the bytes of others. */
static void arena_free(struct sv_rmem *rm, uint64_t off, uint64_t len)
{
	struct range **pp = &rm->free, *prev = NULL, *r;

	fallocate(rm->arena_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		  (off_t)off, (off_t)len);
	while (*pp && (*pp)->off < off) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (prev && prev->off + prev->len == off) {
		prev->len += len;
		r = prev;
	} else {
		r = malloc(sizeof(*r));
		if (!r)
			return;
		*r = (struct range){off, len, *pp};
		*pp = r;
	}
	if (r->next && r->off + r->len == r->next->off) {
		struct range *n = r->next;

		r->len += n->len;
		r->next = n->next;
		free(n);
	}
}

/* ---- re-backing ---- */

/*
 * mremap(2) straight to the kernel: [from, from+len) replaces [to,
 * to+len).  Programs interpose mremap over every library's PLT entry:
 * UCX 1.13's memory hooks (libucm) do, with a four-argument wrapper that
 * drops MREMAP_FIXED's new address (so our pages would land anywhere and
 * the range stay read-only), and report the move as the program's own
 * unmap.  Ours keeps the address and the bytes: nobody is to hear of it.
 */
static int remap_over(void *from, size_t len, void *to)
{
	if (syscall(SYS_mremap, from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
		    to) == -1)
		return -errno;
	return 0;
}

/*
 * Moves [b, e) onto the arena at a new offset, in place: the range is
 * made read-only (writers wait in guard.c), its bytes copied to the
 * arena, and the arena's pages mapped over it in one mremap.
 */
static int reback(struct sv_rmem *rm, uintptr_t b, uintptr_t e, uint64_t *off,
		  size_t *zeros)
{
	size_t len = e - b;
	uint64_t o = arena_alloc(rm, len);
	void *tmp;
	int err, pm;

	if (o == UINT64_MAX)
		return -ENOSPC;
	/* the arena's pages in one call (the populated mapping below
	 * allocates them all anyway); a hint: if it fails the copy
	 * allocates, or fails */
	(void)fallocate(rm->arena_fd, 0, (off_t)o, (off_t)len);
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	sv_guard_window_open(b, e);
	if (mprotect((void *)b, len, PROT_READ)) {
		err = -errno;
		goto err_close;
	}
	/* populated: a pinned MR's pages are there from registration on,
	 * as a hardware provider's (pinned) are; else the first pass
	 * through many buffers takes a fault per page on the data path
	 * (UCX rc_verbs: 8192 pages of receive buffers, ~17k faults a
	 * side inside its first timed iterations); and the pages the
	 * application had touched are touched through it (touch_held) */
	tmp = sv_rmem_placed_like(b, len, rm->arena_fd, o);
	if (tmp == MAP_FAILED) {
		err = -errno;
		goto err_unprotect;
	}
	*zeros = 0;
	err = copy_to_arena(rm->arena_fd, pm, o, (const uint8_t *)b, tmp, len,
			    zeros);
	if (err) {
		munmap(tmp, len);
		goto err_unprotect;
	}
	err = remap_over(tmp, len, (void *)b);
	if (err) {
		munmap(tmp, len);
		goto err_unprotect;
	}
	sv_guard_window_close();
	if (pm >= 0)
		close(pm);
	*off = o;
	return 0;

err_unprotect:
	mprotect((void *)b, len, PROT_READ | PROT_WRITE);
err_close:
	sv_guard_window_close();
	if (pm >= 0)
		close(pm);
	arena_free(rm, o, len);
	return err;
}

/*
 * Private anonymous pages with the arena's bytes over one piece, in
 * place (the reverse of reback), while other threads may write it.
 */
static int unback(const struct piece *pc, bool scan)
{
	size_t len = pc->hi - pc->lo;
	void *lo = (void *)pc->lo;
	void *tmp = sv_rmem_placed_like(pc->lo, len, -1, 0);
	int err = 0;

	if (tmp == MAP_FAILED)
		return -errno;
	sv_guard_window_open(pc->lo, pc->hi);
	if ((pc->prot & PROT_WRITE) &&
	    mprotect(lo, len, pc->prot & ~PROT_WRITE))
		err = -errno;
	if (!err)
		err = copy_from_arena(
			pc->fd, pc->off, tmp, lo,
			scan && (pc->prot & PROT_READ) ? lo : NULL, len);
	if (!err && pc->prot != (PROT_READ | PROT_WRITE) &&
	    mprotect(tmp, len, pc->prot))
		err = -errno;
	if (!err)
		err = remap_over(tmp, len, lo);
	if (err) {
		munmap(tmp, len);
		mprotect(lo, len, pc->prot);
	}
	sv_guard_window_close();
	return err;
}

/* The segment's last MR went: what still maps it becomes private again,
 * then its arena range is punched.  If any piece cannot be restored the
 * arena range is kept: it holds the application's bytes. */
static void seg_release(struct sv_rmem *rm, struct sv_rseg *s)
{
	struct collect c = {0};
	int err = sv_rmem_collect_pieces(rm, s, &c);

	for (size_t i = 0; !err && i < c.n; i++)
		err = unback(&c.pc[i],
			     s->zeros >= (s->e - s->b) / page_size() / 2);
	free(c.pc);
	if (!err)
		arena_free(rm, s->off, s->e - s->b);
	else
		fprintf(stderr,
			"softverbs: could not make %#lx-%#lx private again "
			"(%s); it stays on the arena\n",
			(unsigned long)s->b, (unsigned long)s->e,
			strerror(-err));
	for (struct sv_rseg **pp = &rm->segs; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	free(s);
}

/* mr's arena offset, for the lock-free readers (post.c describes a
 * receive by it): the pages are on the arena before the offset says so. */
static void set_off(struct sv_mr *mr, uint64_t off)
{
	__atomic_store_n(&mr->arena_off, off, __ATOMIC_RELEASE);
}

/* Puts mr on a segment: an existing one holding all its pages, else a new
 * one if its pages are private anonymous memory no segment touches. */
static void attach(struct sv_rmem *rm, struct sv_mr *mr)
{
	uintptr_t pg = page_size();
	uintptr_t a = (uintptr_t)mr->addr;
	uintptr_t b = a & ~(pg - 1);
	uintptr_t e = (a + mr->length + pg - 1) & ~(pg - 1);
	struct sv_rseg *s;
	uint64_t off = 0;
	size_t zeros = 0;

	for (s = rm->segs; s; s = s->next) {
		if (b >= s->b && e <= s->e) {
			s->refs++;
			mr->rseg = s;
			set_off(mr, s->off + (a - s->b));
			return;
		}
		if (b < s->e && s->b < e)
			return; /* partly on a segment: not re-backed */
	}
	if (!sv_rmem_private_anon(b, e))
		return;
	s = malloc(sizeof(*s));
	if (!s)
		return;
	if (reback(rm, b, e, &off, &zeros)) {
		free(s);
		return;
	}
	*s = (struct sv_rseg){b, e, off, 1, false, rm->segs, zeros};
	rm->segs = s;
	mr->rseg = s;
	set_off(mr, off + (a - b));
}

/* ---- the key table (seqlock writer; we are the only one) ---- */

static void entry_write(struct sv_rkey_entry *en, uint32_t key, uint64_t iova,
			uint64_t length, uint64_t arena_off, uint32_t access,
			uint32_t pd_id)
{
	uint32_t g = atomic_load_explicit(&en->gen, memory_order_relaxed);

	atomic_store_explicit(&en->gen, g + 1, memory_order_relaxed);
	/* release: the odd gen before any field changes */
	atomic_thread_fence(memory_order_release);
	__atomic_store_n(&en->key, key, __ATOMIC_RELAXED);
	__atomic_store_n(&en->iova, iova, __ATOMIC_RELAXED);
	__atomic_store_n(&en->length, length, __ATOMIC_RELAXED);
	__atomic_store_n(&en->arena_off, arena_off, __ATOMIC_RELAXED);
	__atomic_store_n(&en->access, access, __ATOMIC_RELAXED);
	__atomic_store_n(&en->pd_id, pd_id, __ATOMIC_RELAXED);
	/* release: the fields before the even gen that vouches for them */
	atomic_store_explicit(&en->gen, g + 2, memory_order_release);
}

static void entry_clear(struct sv_rkey_entry *en)
{
	entry_write(en, 0, 0, 0, SV_RMEM_NOT_REBACKED, 0, 0);
}

/* ---- target side: the verbs' hooks ---- */

/* Publishes mr's entry (offset and all) in the key table, if there is
 * one.  rm->lock held. */
static void publish(struct sv_rmem *rm, const struct sv_mr *mr)
{
	if (rm->table)
		entry_write(&rm->ent[mr->index], mr->ibv.rkey, mr->iova,
			    mr->length, mr->arena_off, (uint32_t)mr->access,
			    mr->pd->id);
}

/*
 * The first time our arena goes to a peer on this host: the MRs that
 * waited move onto it now, in the order they were registered (so the
 * same MRs share a segment as if each had moved at its registration),
 * and their entries say where.  Until then no process could reach the
 * arena, and moving memory onto it was only cost: two copies of every
 * written page (a 512 MiB registration 0.4-0.5 s here, and its
 * deregistration 0.4-1 s), and the hazards of re-backing for programs
 * whose peers are all on other hosts.  rm->lock held.
 */
static void share(struct sv_rmem *rm)
{
	if (rm->shared)
		return;
	rm->shared = true;
	while (!sv_list_empty(&rm->waiting)) {
		struct sv_mr *mr =
			container_of(rm->waiting.next, struct sv_mr, rmem_wait);

		sv_list_del(&mr->rmem_wait);
		mr->rmem_waits = false;
		attach(rm, mr);
		if (mr->arena_off != SV_RMEM_NOT_REBACKED)
			publish(rm, mr);
	}
}

/* mr leaves the list of MRs waiting to move, if on it.  rm->lock held. */
static void unwait(struct sv_mr *mr)
{
	if (mr->rmem_waits)
		sv_list_del(&mr->rmem_wait);
	mr->rmem_waits = false;
}

void sv_rmem_reg(struct sv_context *ctx, struct sv_mr *mr)
{
	struct sv_rmem *rm = ctx->rmem;

	pthread_mutex_lock(&rm->lock);
	mr->rseg = NULL;
	set_off(mr, SV_RMEM_NOT_REBACKED);
	/* an ODP MR stays where it is: its pages are whatever the address
	 * space holds when the responder copies (verbs/odp.c); the others
	 * move now if a peer may map the arena, else when one first may */
	if ((mr->access & sv_rmem_shared_access()) && !rmem_make(rm) &&
	    !(mr->access & IBV_ACCESS_ON_DEMAND)) {
		if (rm->shared) {
			attach(rm, mr);
		} else {
			sv_list_add_tail(&rm->waiting, &mr->rmem_wait);
			mr->rmem_waits = true;
		}
	}
	/* before the table exists no MR has remote access (it is made at
	 * the first that has), so none is missing from it */
	publish(rm, mr);
	pthread_mutex_unlock(&rm->lock);
}

void sv_rmem_dereg(struct sv_context *ctx, struct sv_mr *mr)
{
	struct sv_rmem *rm = ctx->rmem;
	struct sv_rseg *s;

	pthread_mutex_lock(&rm->lock);
	/* first: a peer that looks after this finds no MR */
	if (rm->table && rm->ent[mr->index].key == mr->ibv.rkey)
		entry_clear(&rm->ent[mr->index]);
	unwait(mr);
	s = mr->rseg;
	mr->rseg = NULL;
	set_off(mr, SV_RMEM_NOT_REBACKED);
	if (s && !--s->refs)
		seg_release(rm, s);
	pthread_mutex_unlock(&rm->lock);
}

int sv_rmem_dm_hold(struct sv_context *ctx, void *p, size_t len)
{
	struct sv_rmem *rm = ctx->rmem;
	uintptr_t b = (uintptr_t)p;
	struct sv_rseg *s = malloc(sizeof(*s));
	uint64_t off = 0;
	size_t zeros = 0;
	int err;

	if (!s)
		return -ENOMEM;
	pthread_mutex_lock(&rm->lock);
	err = rmem_make(rm);
	if (!err)
		err = reback(rm, b, b + len, &off, &zeros);
	if (!err) {
		*s = (struct sv_rseg){b,    b + len,  off,  1,
				      true, rm->segs, zeros};
		rm->segs = s;
	}
	pthread_mutex_unlock(&rm->lock);
	if (err)
		free(s);
	return err;
}

void sv_rmem_dm_unhold(struct sv_context *ctx, void *p)
{
	struct sv_rmem *rm = ctx->rmem;

	pthread_mutex_lock(&rm->lock);
	for (struct sv_rseg *s = rm->segs; s; s = s->next) {
		if (s->dm_hold && s->b == (uintptr_t)p) {
			s->dm_hold = false;
			if (!--s->refs)
				seg_release(rm, s);
			break;
		}
	}
	pthread_mutex_unlock(&rm->lock);
}

int sv_rmem_share(struct sv_context *ctx)
{
	struct sv_rmem *rm = ctx->rmem;
	int err;

	pthread_mutex_lock(&rm->lock);
	err = rmem_make(rm);
	if (!err)
		share(rm);
	pthread_mutex_unlock(&rm->lock);
	return err;
}

int sv_rmem_fds(struct sv_context *ctx, int *arena_fd, int *table_fd)
{
	struct sv_rmem *rm = ctx->rmem;
	int err = sv_rmem_share(ctx);

	/* made under the lock just taken; only the close and a fork child
	 * change them again */
	if (!err) {
		*arena_fd = rm->arena_fd;
		*table_fd = rm->table_fd;
	}
	return err;
}

/* ---- fork: the child gets private copies, as with real verbs ---- */

static struct piece *frozen; /* every segment's pieces, during fork */
static void **snaps;	     /* each one's private snapshot, or NULL */
static size_t nfrozen;

/* A private anonymous copy of each piece, made with every piece
 * read-only for the moment (writers wait in guard.c), so it is one
 * instant's state; NULL where it cannot be made. */
static void snapshot(void)
{
	for (size_t i = 0; i < nfrozen; i++) {
		size_t len = frozen[i].hi - frozen[i].lo;
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		snaps[i] = m == MAP_FAILED ? NULL : m;
	}
	sv_guard_window_open(0, UINTPTR_MAX);
	for (size_t i = 0; i < nfrozen; i++)
		if (frozen[i].prot & PROT_WRITE)
			mprotect((void *)frozen[i].lo,
				 frozen[i].hi - frozen[i].lo,
				 frozen[i].prot & ~PROT_WRITE);
	for (size_t i = 0; i < nfrozen; i++) {
		if (snaps[i] &&
		    copy_from_arena(frozen[i].fd, frozen[i].off, snaps[i],
				    (const uint8_t *)frozen[i].lo, NULL,
				    frozen[i].hi - frozen[i].lo)) {
			munmap(snaps[i], frozen[i].hi - frozen[i].lo);
			snaps[i] = NULL;
		}
	}
	for (size_t i = 0; i < nfrozen; i++)
		if (frozen[i].prot & PROT_WRITE)
			mprotect((void *)frozen[i].lo,
				 frozen[i].hi - frozen[i].lo, frozen[i].prot);
	sv_guard_window_close();
}

/*
 * Before fork: no registration in flight (every lock held), and a
 * snapshot of every re-backed piece, which the child inherits as private
 * memory and moves into place.  Nothing waits across the fork itself:
 * fork takes malloc's locks after us, and a thread holding one may be
 * writing a re-backed page (small MRs share pages with malloc's data).
 */
static void fork_prepare(void)
{
	struct collect c = {0};
	int err = 0;

	pthread_mutex_lock(&all_lock);
	for (struct sv_rmem *rm = all_rmem; rm; rm = rm->next) {
		pthread_mutex_lock(&rm->lock);
		for (struct sv_rseg *s = rm->segs; s && !err; s = s->next)
			err = sv_rmem_collect_pieces(rm, s, &c);
	}
	frozen = c.pc;
	nfrozen = err ? 0 : c.n;
	snaps = nfrozen ? calloc(nfrozen, sizeof(*snaps)) : NULL;
	if (!snaps)
		nfrozen = 0;
	if (nfrozen)
		snapshot();
}

static void fork_done(void)
{
	free(frozen);
	free(snaps);
	frozen = NULL;
	snaps = NULL;
	nfrozen = 0;
}

static void unlock_all(void)
{
	for (struct sv_rmem *rm = all_rmem; rm; rm = rm->next)
		pthread_mutex_unlock(&rm->lock);
	pthread_mutex_unlock(&all_lock);
}

static void fork_parent(void)
{
	for (size_t i = 0; i < nfrozen; i++)
		if (snaps[i])
			munmap(snaps[i], frozen[i].hi - frozen[i].lo);
	fork_done();
	unlock_all();
}

/* The child forgets the arena and table: its first registration with
 * remote access makes its own.  Its peers' mappings stay. */
static void forget(struct sv_rmem *rm)
{
	struct sv_context *ctx = rm->ctx;

	/* nor the parent's random words for keys (mr.c): its keys are not
	 * the parent's next ones */
	ctx->mr_nrand = 0;
	for (uint32_t i = 0; ctx->nmrs && i < SV_MAX_MR; i++) {
		if (!ctx->mrs[i])
			continue;
		ctx->mrs[i]->rseg = NULL;
		ctx->mrs[i]->arena_off = SV_RMEM_NOT_REBACKED;
	}
	/* nor the parent's peers: the child's memory waits for its own */
	while (!sv_list_empty(&rm->waiting))
		unwait(container_of(rm->waiting.next, struct sv_mr, rmem_wait));
	rm->shared = sv_env_bool(SV_ENV_MOVE_AT_REG);
	while (rm->segs) {
		struct sv_rseg *s = rm->segs;

		rm->segs = s->next;
		free(s);
	}
	while (rm->free) {
		struct range *r = rm->free;

		rm->free = r->next;
		free(r);
	}
	if (rm->table)
		munmap(rm->table, rm->table_size); /* the parent's table */
	rm->table = NULL;
	rm->ent = NULL;
	if (rm->arena_fd >= 0) {
		close(rm->arena_fd);
		close(rm->table_fd);
	}
	rm->arena_fd = rm->table_fd = -1;
}

/* The snapshots, private to us, move where the arena's pages were. */
static void fork_child(void)
{
	for (size_t i = 0; i < nfrozen; i++) {
		const struct piece *pc = &frozen[i];
		size_t len = pc->hi - pc->lo;

		if (!snaps[i] ||
		    (pc->prot != (PROT_READ | PROT_WRITE) &&
		     mprotect(snaps[i], len, pc->prot)) ||
		    remap_over(snaps[i], len, (void *)pc->lo))
			fprintf(stderr,
				"softverbs: fork child: %#lx-%#lx stays "
				"shared with the parent\n",
				(unsigned long)pc->lo, (unsigned long)pc->hi);
	}
	fork_done();
	for (struct sv_rmem *rm = all_rmem; rm; rm = rm->next)
		forget(rm);
	unlock_all();
}

static void atfork_install(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- context ---- */

int sv_rmem_init(struct sv_context *ctx)
{
	struct sv_rmem *rm = calloc(1, sizeof(*rm));

	if (!rm)
		return -ENOMEM;
	pthread_once(&atfork_once, atfork_install);
	rm->ctx = ctx;
	rm->arena_fd = rm->table_fd = -1;
	sv_list_init(&rm->waiting);
	rm->shared = sv_env_bool(SV_ENV_MOVE_AT_REG);
	pthread_mutex_init(&rm->lock, NULL);
	ctx->rmem = rm;
	pthread_mutex_lock(&all_lock);
	rm->next = all_rmem;
	all_rmem = rm;
	pthread_mutex_unlock(&all_lock);
	return 0;
}

/* Close: peers find no MR; the memory of MRs still registered becomes
 * private again (the application keeps using it). */
void sv_rmem_fini(struct sv_context *ctx)
{
	struct sv_rmem *rm = ctx->rmem;

	pthread_mutex_lock(&all_lock);
	for (struct sv_rmem **pp = &all_rmem; *pp; pp = &(*pp)->next) {
		if (*pp == rm) {
			*pp = rm->next;
			break;
		}
	}
	pthread_mutex_unlock(&all_lock);
	pthread_mutex_lock(&rm->lock);
	/* the entries of MRs left registered (the table's other pages
	 * were never touched: not read either) */
	for (uint32_t i = 0; rm->table && ctx->nmrs && i < SV_MAX_MR; i++)
		if (ctx->mrs[i] && rm->ent[i].key)
			entry_clear(&rm->ent[i]);
	while (rm->segs)
		seg_release(rm, rm->segs);
	while (rm->peers) {
		struct sv_rpeer *p = rm->peers;

		rm->peers = p->next;
		munmap(p->arena, p->arena_size);
		munmap((void *)p->table, p->table_size);
		free(p);
	}
	pthread_mutex_unlock(&rm->lock);
	forget(rm);
	pthread_mutex_destroy(&rm->lock);
	free(rm);
	ctx->rmem = NULL;
}
