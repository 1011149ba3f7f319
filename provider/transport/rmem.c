// SPDX-License-Identifier: MIT
/*
 * rmem: a context's arena (the memfd registered memory is moved onto) and
 * key table (the memfd describing every MR to peers), the re-backing of
 * the application's pages at registration and its undoing at
 * deregistration and in a fork child; and, for the engine, peers' arenas
 * and tables mapped and looked up (sv_rpeer_*).  DESIGN.md, "Hazards of
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

#define REMOTE_ACCESS                                       \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* A free range of arena offsets; the free list is sorted and coalesced. */
struct range {
	uint64_t off, len;
	struct range *next;
};

/* A range of our memory now backed by the arena: every MR whose pages
 * lie inside it shares it. */
struct sv_rseg {
	uintptr_t b, e; /* page-rounded */
	uint64_t off;	/* arena offset of b */
	uint32_t refs;	/* MRs on it */
	struct sv_rseg *next;
};

/* A peer's arena and table as we map them (initiator side). */
struct sv_rpeer {
	dev_t dev; /* the arena's identity: one mapping per arena */
	ino_t ino;
	uint32_t refs;
	uint8_t *arena; /* read-write, shared */
	uint64_t arena_size;
	const uint8_t *table; /* read-only: the peer writes it */
	size_t table_size;
	const struct sv_rkey_entry *ent; /* entry 0 */
	uint32_t nentries;		 /* validated once, at get */
	struct sv_rpeer *next;
};

struct sv_rmem {
	struct sv_context *ctx;
	pthread_mutex_t lock;	/* everything below; then the fault window */
	int arena_fd, table_fd; /* -1 until first needed */
	dev_t arena_dev;
	ino_t arena_ino;
	uint64_t arena_size;
	struct sv_rkey_hdr *table; /* our mapping, read-write */
	size_t table_size;
	struct sv_rkey_entry *ent;
	struct range *free;
	struct sv_rseg *segs;
	struct sv_rpeer *peers;
	struct sv_rmem *next; /* on all_rmem */
};

/* Every context's rmem, for fork.  Lock order: all_lock -> rm->lock. */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv_rmem *all_rmem;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static uintptr_t page_size(void)
{
	return (uintptr_t)sysconf(_SC_PAGESIZE);
}

/* ---- /proc/self/maps, with no malloc (a fork child walks it too) ---- */

struct vma {
	uintptr_t lo, hi;
	uint64_t off;
	unsigned int dmaj, dmin;
	unsigned long ino;
	char perm[5];
	const char *path; /* "" for none */
};

typedef int (*vma_fn)(const struct vma *v, void *arg);

/* One line; 1 once past hi (stop), else fn's answer for overlapping. */
static int maps_line(char *line, uintptr_t lo, uintptr_t hi, vma_fn fn,
		     void *arg)
{
	struct vma v;
	unsigned long a, z;
	int pos = -1;

	if (sscanf(line, "%lx-%lx %4s %" SCNx64 " %x:%x %lu %n", &a, &z, v.perm,
		   &v.off, &v.dmaj, &v.dmin, &v.ino, &pos) < 7)
		return -EIO;
	v.lo = a;
	v.hi = z;
	v.path = pos >= 0 ? line + pos : "";
	if (v.lo >= hi)
		return 1;
	if (v.hi <= lo)
		return 0;
	return fn(&v, arg);
}

/* Calls fn for each mapping overlapping [lo, hi), in address order,
 * until it returns non-zero; -errno if the file cannot be read. */
static int maps_walk(uintptr_t lo, uintptr_t hi, vma_fn fn, void *arg)
{
	char buf[8192];
	size_t have = 0;
	bool skip = false; /* inside an overlong line */
	int ret = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		char *line = buf, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : 0;
			break;
		}
		have += (size_t)n;
		while ((nl = memchr(line, '\n', buf + have - line))) {
			*nl = '\0';
			if (!skip)
				ret = maps_line(line, lo, hi, fn, arg);
			skip = false;
			line = nl + 1;
			if (ret)
				goto out;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) {
			skip = true;
			have = 0;
		}
	}
out:
	close(fd);
	return ret < 0 ? ret : 0;
}

struct cover {
	uintptr_t cur, end;
	bool ok;
};

/* Private anonymous read-write memory: what malloc and mmap hand out. */
static int private_anon_fn(const struct vma *v, void *arg)
{
	struct cover *c = arg;
	bool anon = !*v->path || !strcmp(v->path, "[heap]") ||
		    !strncmp(v->path, "[anon:", 6);

	if (v->lo > c->cur || strcmp(v->perm, "rw-p") || v->ino || v->dmaj ||
	    v->dmin || !anon)
		return 1;
	c->cur = v->hi;
	if (c->cur < c->end)
		return 0;
	c->ok = true;
	return 1;
}

/* Our own stack: its frames (ours, and the signal frame a fault in the
 * window needs) would be written while it is read-only. */
static bool on_own_stack(uintptr_t b, uintptr_t e)
{
	pthread_attr_t a;
	void *lo;
	size_t len;
	bool on = true; /* unknown: do not move */

	if (pthread_getattr_np(pthread_self(), &a))
		return on;
	if (!pthread_attr_getstack(&a, &lo, &len))
		on = b < (uintptr_t)lo + len && (uintptr_t)lo < e;
	pthread_attr_destroy(&a);
	return on;
}

static bool private_anon(uintptr_t b, uintptr_t e)
{
	struct cover c = {b, e, false};

	return !maps_walk(b, e, private_anon_fn, &c) && c.ok;
}

/* ---- pieces: what of a segment still maps our arena ---- */

struct piece {
	uintptr_t lo, hi;
	uint64_t off; /* arena offset of lo */
	int prot;     /* of the mapping now */
	int fd;	      /* the arena */
};

struct collect {
	const struct sv_rmem *rm;
	const struct sv_rseg *s;
	struct piece *pc;
	size_t n, cap;
	int err;
};

static int collect_fn(const struct vma *v, void *arg)
{
	struct collect *c = arg;
	uintptr_t lo = v->lo > c->s->b ? v->lo : c->s->b;
	uintptr_t hi = v->hi < c->s->e ? v->hi : c->s->e;
	uint64_t off = c->s->off + (lo - c->s->b);
	struct piece *pc;

	if (v->ino != c->rm->arena_ino ||
	    makedev(v->dmaj, v->dmin) != c->rm->arena_dev ||
	    v->perm[3] != 's' || v->off + (lo - v->lo) != off)
		return 0; /* unmapped or replaced by the application */
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 8;
		pc = realloc(c->pc, c->cap * sizeof(*pc));
		if (!pc) {
			c->err = -ENOMEM;
			return 1;
		}
		c->pc = pc;
	}
	c->pc[c->n++] = (struct piece){
		.lo = lo,
		.hi = hi,
		.off = off,
		.prot = (v->perm[0] == 'r' ? PROT_READ : 0) |
			(v->perm[1] == 'w' ? PROT_WRITE : 0) |
			(v->perm[2] == 'x' ? PROT_EXEC : 0),
		.fd = c->rm->arena_fd,
	};
	return 0;
}

/* Appends the pieces of s to *c (c->pc grows with realloc). */
static int collect_pieces(const struct sv_rmem *rm, const struct sv_rseg *s,
			  struct collect *c)
{
	int err;

	c->rm = rm;
	c->s = s;
	err = maps_walk(s->b, s->e, collect_fn, c);
	return err ? err : c->err;
}

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

/* [p, p+len) into the arena at off, runs of non-zero pages at a time. */
static int copy_to_arena(int fd, uint64_t off, const uint8_t *p, size_t len)
{
	size_t pg = page_size(), i = 0, j;
	int err;

	while (i < len) {
		if (page_zero(p + i, pg)) {
			i += pg;
			continue;
		}
		for (j = i + pg; j < len && !page_zero(p + j, pg); j += pg)
			;
		err = pwrite_all(fd, p + i, j - i, off + i);
		if (err)
			return err;
		i = j;
	}
	return 0;
}

/* The arena's data extents of [off, off+len) into p (holes stay zero,
 * untouched).  lseek moves the fd's offset, which nothing else uses. */
static int copy_from_arena(int fd, uint64_t off, uint8_t *p, size_t len)
{
	uint64_t pos = off, end = off + len;

	while (pos < end) {
		off_t d = lseek(fd, (off_t)pos, SEEK_DATA);
		off_t h;
		int err;

		if (d < 0)
			return errno == ENXIO ? 0 : -errno; /* no more data */
		if ((uint64_t)d >= end)
			return 0;
		h = lseek(fd, d, SEEK_HOLE);
		if (h < 0)
			return -errno;
		if ((uint64_t)h > end)
			h = (off_t)end;
		err = pread_all(fd, p + (d - (off_t)off), (size_t)(h - d),
				(uint64_t)d);
		if (err)
			return err;
		pos = (uint64_t)h;
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
static int reback(struct sv_rmem *rm, uintptr_t b, uintptr_t e, uint64_t *off)
{
	size_t len = e - b;
	uint64_t o = arena_alloc(rm, len);
	void *tmp;
	int err;

	if (o == UINT64_MAX)
		return -ENOSPC;
	sv_guard_window_open(b, e);
	if (mprotect((void *)b, len, PROT_READ)) {
		err = -errno;
		goto err_close;
	}
	err = copy_to_arena(rm->arena_fd, o, (const uint8_t *)b, len);
	if (err)
		goto err_unprotect;
	/* populated: a pinned MR's pages are there from registration on,
	 * as a hardware provider's (pinned) are; else the first pass
	 * through many buffers takes a fault per page on the data path
	 * (UCX rc_verbs: 8192 pages of receive buffers, ~17k faults a
	 * side inside its first timed iterations) */
	tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		   rm->arena_fd, (off_t)o);
	if (tmp == MAP_FAILED) {
		err = -errno;
		goto err_unprotect;
	}
	err = remap_over(tmp, len, (void *)b);
	if (err) {
		munmap(tmp, len);
		goto err_unprotect;
	}
	sv_guard_window_close();
	*off = o;
	return 0;

err_unprotect:
	mprotect((void *)b, len, PROT_READ | PROT_WRITE);
err_close:
	sv_guard_window_close();
	arena_free(rm, o, len);
	return err;
}

/*
 * Private anonymous pages with the arena's bytes over one piece, in
 * place (the reverse of reback), while other threads may write it.
 */
static int unback(const struct piece *pc)
{
	size_t len = pc->hi - pc->lo;
	void *lo = (void *)pc->lo;
	void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int err = 0;

	if (tmp == MAP_FAILED)
		return -errno;
	sv_guard_window_open(pc->lo, pc->hi);
	if ((pc->prot & PROT_WRITE) &&
	    mprotect(lo, len, pc->prot & ~PROT_WRITE))
		err = -errno;
	if (!err)
		err = copy_from_arena(pc->fd, pc->off, tmp, len);
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
	int err = collect_pieces(rm, s, &c);

	for (size_t i = 0; !err && i < c.n; i++)
		err = unback(&c.pc[i]);
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

	for (s = rm->segs; s; s = s->next) {
		if (b >= s->b && e <= s->e) {
			s->refs++;
			mr->rseg = s;
			mr->arena_off = s->off + (a - s->b);
			return;
		}
		if (b < s->e && s->b < e)
			return; /* partly on a segment: not re-backed */
	}
	if (!private_anon(b, e) || on_own_stack(b, e))
		return;
	s = malloc(sizeof(*s));
	if (!s)
		return;
	if (reback(rm, b, e, &off)) {
		free(s);
		return;
	}
	*s = (struct sv_rseg){b, e, off, 1, rm->segs};
	rm->segs = s;
	mr->rseg = s;
	mr->arena_off = off + (a - b);
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

void sv_rmem_reg(struct sv_context *ctx, struct sv_mr *mr)
{
	struct sv_rmem *rm = ctx->rmem;

	pthread_mutex_lock(&rm->lock);
	mr->rseg = NULL;
	mr->arena_off = SV_RMEM_NOT_REBACKED;
	if ((mr->access & sv_rmem_shared_access()) && !rmem_make(rm))
		attach(rm, mr);
	/* before the table exists no MR has remote access (it is made at
	 * the first that has), so none is missing from it */
	if (rm->table)
		entry_write(&rm->ent[mr->index], mr->ibv.rkey, mr->iova,
			    mr->length, mr->arena_off, (uint32_t)mr->access,
			    mr->pd->id);
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
	s = mr->rseg;
	mr->rseg = NULL;
	mr->arena_off = SV_RMEM_NOT_REBACKED;
	if (s && !--s->refs)
		seg_release(rm, s);
	pthread_mutex_unlock(&rm->lock);
}

int sv_rmem_fds(struct sv_context *ctx, int *arena_fd, int *table_fd)
{
	struct sv_rmem *rm = ctx->rmem;
	int err;

	pthread_mutex_lock(&rm->lock);
	err = rmem_make(rm);
	if (!err) {
		*arena_fd = rm->arena_fd;
		*table_fd = rm->table_fd;
	}
	pthread_mutex_unlock(&rm->lock);
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
			err = collect_pieces(rm, s, &c);
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

/* ---- initiator side ---- */

/* A memfd that can never shrink (mapping it cannot SIGBUS); its size. */
static int check_memfd(int fd, struct stat *st)
{
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0)
		return errno == EBADF ? -EBADF : -EINVAL; /* not a memfd */
	if (!(seals & F_SEAL_SHRINK))
		return -EINVAL;
	/* after the seal: the size cannot go down from here */
	if (fstat(fd, st))
		return -errno;
	if (!S_ISREG(st->st_mode) || st->st_size <= 0 ||
	    (uint64_t)st->st_size % page_size())
		return -EINVAL;
	return 0;
}

/* The table's header, read once; -EPROTO for another layout. */
static int check_table(const uint8_t *t, size_t size, uint64_t arena_size,
		       struct sv_rkey_hdr *h)
{
	memcpy(h, t, sizeof(*h)); /* the peer may change it: one copy */
	if (h->magic != SV_RKEY_MAGIC || h->version != SV_RKEY_VERSION ||
	    h->entry_size != sizeof(struct sv_rkey_entry))
		return -EPROTO;
	if (!h->nentries || h->nentries > SV_MAX_MR ||
	    (h->nentries & (h->nentries - 1)) || h->entries_off < sizeof(*h) ||
	    h->entries_off % _Alignof(struct sv_rkey_entry) ||
	    h->entries_off > size ||
	    (size - h->entries_off) / sizeof(struct sv_rkey_entry) <
		    h->nentries ||
	    h->arena_size != arena_size)
		return -EINVAL;
	return 0;
}

static struct sv_rpeer *rpeer_map(int arena_fd, int table_fd,
				  const struct stat *as, const struct stat *ts)
{
	struct sv_rpeer *p = calloc(1, sizeof(*p));
	struct sv_rkey_hdr h;
	void *m;
	int err;

	if (!p)
		return NULL;
	p->table_size = (size_t)ts->st_size;
	m = mmap(NULL, p->table_size, PROT_READ, MAP_SHARED, table_fd, 0);
	if (m == MAP_FAILED)
		goto err_free;
	p->table = m;
	err = check_table(p->table, p->table_size, (uint64_t)as->st_size, &h);
	if (err) {
		errno = -err;
		goto err_table;
	}
	p->arena_size = (uint64_t)as->st_size;
	m = mmap(NULL, p->arena_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 arena_fd, 0);
	if (m == MAP_FAILED)
		goto err_table;
	p->arena = m;
	p->ent = (const struct sv_rkey_entry *)(p->table + h.entries_off);
	p->nentries = h.nentries;
	p->dev = as->st_dev;
	p->ino = as->st_ino;
	p->refs = 1;
	return p;

err_table:
	err = errno;
	munmap((void *)p->table, p->table_size);
	errno = err;
err_free:
	err = errno;
	free(p);
	errno = err;
	return NULL;
}

struct sv_rpeer *sv_rpeer_get(struct sv_context *ctx, int arena_fd,
			      int table_fd)
{
	struct sv_rmem *rm = ctx->rmem;
	struct stat as, ts;
	struct sv_rpeer *p;
	int err;

	err = check_memfd(arena_fd, &as);
	if (!err)
		err = check_memfd(table_fd, &ts);
	if (!err && (as.st_dev == ts.st_dev && as.st_ino == ts.st_ino))
		err = -EINVAL; /* one file for both */
	if (!err && (uint64_t)ts.st_size <
			    SV_RKEY_HDR_BYTES + sizeof(struct sv_rkey_entry))
		err = -EINVAL;
	if (err) {
		errno = -err;
		return NULL;
	}
	pthread_mutex_lock(&rm->lock);
	for (p = rm->peers; p; p = p->next) {
		if (p->dev == as.st_dev && p->ino == as.st_ino) {
			p->refs++;
			goto out;
		}
	}
	p = rpeer_map(arena_fd, table_fd, &as, &ts);
	if (p) {
		p->next = rm->peers;
		rm->peers = p;
	}
out:
	err = errno;
	pthread_mutex_unlock(&rm->lock);
	errno = err;
	return p;
}

void sv_rpeer_put(struct sv_context *ctx, struct sv_rpeer *p)
{
	struct sv_rmem *rm = ctx->rmem;

	pthread_mutex_lock(&rm->lock);
	if (!--p->refs) {
		for (struct sv_rpeer **pp = &rm->peers; *pp;
		     pp = &(*pp)->next) {
			if (*pp == p) {
				*pp = p->next;
				break;
			}
		}
		munmap(p->arena, p->arena_size);
		munmap((void *)p->table, p->table_size);
		free(p);
	}
	pthread_mutex_unlock(&rm->lock);
}

/* An entry's fields as one consistent copy. */
struct rkey_copy {
	uint32_t key, access, pd_id;
	uint64_t iova, length, arena_off;
};

/* Seqlock read; false if the owner was writing it. */
static bool entry_read(const struct sv_rkey_entry *en, struct rkey_copy *c)
{
	_Atomic uint32_t *gen = (_Atomic uint32_t *)&en->gen;
	/* acquire: the fields after the gen that vouches for them */
	uint32_t g = atomic_load_explicit(gen, memory_order_acquire);

	if (g & 1)
		return false;
	c->key = __atomic_load_n(&en->key, __ATOMIC_RELAXED);
	c->iova = __atomic_load_n(&en->iova, __ATOMIC_RELAXED);
	c->length = __atomic_load_n(&en->length, __ATOMIC_RELAXED);
	c->arena_off = __atomic_load_n(&en->arena_off, __ATOMIC_RELAXED);
	c->access = __atomic_load_n(&en->access, __ATOMIC_RELAXED);
	c->pd_id = __atomic_load_n(&en->pd_id, __ATOMIC_RELAXED);
	/* acquire: the fields are read before the gen is read again */
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(gen, memory_order_relaxed) == g;
}

void *sv_rpeer_at(struct sv_rpeer *p, uint64_t off, uint64_t len)
{
	if (off > p->arena_size || len > p->arena_size - off)
		return NULL;
	return p->arena + off;
}

/* SOFTVERBS_SINGLE_COPY=0 keeps memory without remote access private. */
static uint32_t single_copy_min = UINT32_MAX;
static uint32_t single_copy_cold = SV_SINGLE_COPY_COLD;
static unsigned int shared_access = REMOTE_ACCESS;
static pthread_once_t policy_once = PTHREAD_ONCE_INIT;

static void policy_read(void)
{
	single_copy_cold = (uint32_t)sv_env_uint(SV_ENV_SINGLE_COPY_COLD);
	if (!sv_env_bool(SV_ENV_SINGLE_COPY))
		return;
	single_copy_min = (uint32_t)sv_env_uint(SV_ENV_SINGLE_COPY_MIN);
	shared_access = REMOTE_ACCESS | IBV_ACCESS_LOCAL_WRITE;
}

uint32_t sv_single_copy_min(void)
{
	pthread_once(&policy_once, policy_read);
	return single_copy_min;
}

uint32_t sv_single_copy_cold(void)
{
	pthread_once(&policy_once, policy_read);
	return single_copy_cold;
}

unsigned int sv_rmem_shared_access(void)
{
	pthread_once(&policy_once, policy_read);
	return shared_access;
}

void *sv_rpeer_resolve(struct sv_rpeer *p, uint32_t rkey, uint32_t pd_id,
		       uint64_t va, uint64_t len, unsigned int access)
{
	struct rkey_copy c;
	uint64_t moff, off;

	if (!len || !rkey)
		return NULL;
	/* nentries is a power of two (check_table) */
	if (!entry_read(&p->ent[rkey & (p->nentries - 1)], &c))
		return NULL;
	if (c.key != rkey || c.pd_id != pd_id ||
	    c.arena_off == SV_RMEM_NOT_REBACKED ||
	    (c.access & access) != access)
		return NULL;
	/* inside the MR, with no overflow */
	if (va < c.iova)
		return NULL;
	moff = va - c.iova;
	if (moff > c.length || len > c.length - moff)
		return NULL;
	/* inside the arena */
	if (c.arena_off > p->arena_size || moff > p->arena_size - c.arena_off)
		return NULL;
	off = c.arena_off + moff;
	if (len > p->arena_size - off)
		return NULL;
	return p->arena + off;
}
