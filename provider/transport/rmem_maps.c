// SPDX-License-Identifier: MIT
/*
 * rmem: what a range of our memory is, from our mappings (lib/maps.c, no
 * malloc: a fork child walks them too): whether it is private anonymous
 * memory, which rmem.c may re-back, and the pieces of a segment that
 * still map our arena, which it makes private again at deregistration
 * or snapshots before a fork; and which of them hold data (mincore).
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

#include "maps.h"
#include "objects.h"
#include "rmem.h"
#include "rmem_priv.h"

struct cover {
	uintptr_t cur, end;
	uintptr_t sp; /* in the caller's stack */
	bool ok;
};

/* Private anonymous read-write memory: what malloc and mmap hand out,
 * but not the mapping of the calling thread's own stack (its frames, and
 * the signal frame a fault in the guard window needs, would be written
 * while it is read-only).  The main thread's is "[stack]"; another
 * thread's is unnamed and found by the frame's address. */
static int private_anon_fn(const struct sv_vma *v, void *arg)
{
	struct cover *c = arg;
	bool anon = !*v->name || !strcmp(v->name, "[heap]") ||
		    !strncmp(v->name, "[anon:", 6);

	if (v->lo > c->cur || strcmp(v->perm, "rw-p") || v->ino ||
	    v->dev_major || v->dev_minor || !anon ||
	    (v->lo <= c->sp && c->sp < v->hi))
		return 1;
	c->cur = v->hi;
	if (c->cur < c->end)
		return 0;
	c->ok = true;
	return 1;
}

bool sv_rmem_private_anon(uintptr_t b, uintptr_t e)
{
	struct cover c = {b, e, (uintptr_t)__builtin_frame_address(0), false};

	return !sv_maps_walk(b, e, private_anon_fn, &c) && c.ok;
}

struct shobj {
	uintptr_t b, cur, end;
	struct sv_mapobj o;
	bool ok;
};

/* One object's shared pages, contiguous in address and offset. */
static int shared_fn(const struct sv_vma *v, void *arg)
{
	struct shobj *c = arg;
	uint64_t off;

	if (v->lo > c->cur || v->perm[3] != 's' || !v->ino)
		return 1;
	off = v->off + (c->cur - v->lo); /* the object's, at cur */
	if (c->cur == c->b) {
		c->o.dev_major = v->dev_major;
		c->o.dev_minor = v->dev_minor;
		c->o.ino = v->ino;
		c->o.offset = off;
	} else if (v->dev_major != c->o.dev_major ||
		   v->dev_minor != c->o.dev_minor || v->ino != c->o.ino ||
		   off != c->o.offset + (c->cur - c->b)) {
		return 1;
	}
	c->cur = v->hi;
	if (c->cur < c->end)
		return 0;
	c->ok = true;
	return 1;
}

bool sv_rmem_shared_object(uintptr_t b, uintptr_t e, struct sv_mapobj *o)
{
	struct shobj c = {.b = b, .cur = b, .end = e};

	if (e <= b || sv_maps_walk(b, e, shared_fn, &c) || !c.ok)
		return false;
	*o = c.o;
	return true;
}

/* ---- pieces: what of a segment still maps our arena ---- */

static int collect_fn(const struct sv_vma *v, void *arg)
{
	struct collect *c = arg;
	uintptr_t lo = v->lo > c->s->b ? v->lo : c->s->b;
	uintptr_t hi = v->hi < c->s->e ? v->hi : c->s->e;
	uint64_t off = c->s->off + (lo - c->s->b);
	struct piece *pc;

	if (v->ino != c->rm->arena_ino ||
	    makedev(v->dev_major, v->dev_minor) != c->rm->arena_dev ||
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
int sv_rmem_collect_pieces(const struct sv_rmem *rm, const struct sv_rseg *s,
			   struct collect *c)
{
	int err;

	c->rm = rm;
	c->s = s;
	err = sv_maps_walk(s->b, s->e, collect_fn, c);
	return err ? err : c->err;
}

/*
 * rmem.c's copy back: which of the n pages at 'at' (mapped from the
 * arena fd at off) hold data, held[i] set.  A page resident in the page
 * cache (mincore) does; one that is not is a hole, or swapped out, which
 * lseek(SEEK_DATA) tells
 * apart (it returns the page itself if data, else where data starts
 * again: the pages before that are holes too).  Not lseek(SEEK_HOLE)
 * from each run: it walks the page cache to the next hole, and ranges
 * registered one after the other are one extent of the arena (QEMU's
 * migration registers 512 MRs of 1 MiB in a row; deregistering them
 * walked every later one: 0.9 s of CPU after a 0.6 s migration of 512
 * MiB, quadratic in the size).  If mincore fails, all pages count.
 */
void sv_rmem_pages_data(int fd, const uint8_t *at, uint64_t off, size_t n,
			unsigned char *held)
{
	size_t pg = page_size();

	if (mincore((void *)at, n * pg, held)) {
		memset(held, 1, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		off_t o = (off_t)(off + i * pg), d;

		if (held[i] & 1)
			continue;
		d = lseek(fd, o, SEEK_DATA);
		if (d == o || (d < 0 && errno != ENXIO)) {
			held[i] = 1; /* data, or cannot tell: copied */
			continue;
		}
		/* a hole up to d (ENXIO: to the end) */
		for (; i < n && (d < 0 || (off_t)(off + i * pg) < d); i++)
			held[i] = 0;
		i--;
	}
}
