// SPDX-License-Identifier: MIT
/*
 * rmem: what a range of our memory is, read from /proc/self/maps with no
 * malloc (a fork child walks it too): whether it is private anonymous
 * memory, which rmem.c may re-back, and the pieces of a segment that
 * still map our arena, which it makes private again at deregistration
 * or snapshots before a fork.  A parser of the kernel's file, apart from
 * the arena's bookkeeping.
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

#include "objects.h"
#include "rmem.h"
#include "rmem_priv.h"

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

bool sv_rmem_private_anon(uintptr_t b, uintptr_t e)
{
	struct cover c = {b, e, false};

	return !maps_walk(b, e, private_anon_fn, &c) && c.ok;
}

struct shobj {
	uintptr_t b, cur, end;
	struct sv_mapobj o;
	bool ok;
};

/* One object's shared pages, contiguous in address and offset. */
static int shared_fn(const struct vma *v, void *arg)
{
	struct shobj *c = arg;
	uint64_t off;

	if (v->lo > c->cur || v->perm[3] != 's' || !v->ino)
		return 1;
	off = v->off + (c->cur - v->lo); /* the object's, at cur */
	if (c->cur == c->b) {
		c->o.dev_major = v->dmaj;
		c->o.dev_minor = v->dmin;
		c->o.ino = v->ino;
		c->o.offset = off;
	} else if (v->dmaj != c->o.dev_major || v->dmin != c->o.dev_minor ||
		   v->ino != c->o.ino || off != c->o.offset + (c->cur - c->b)) {
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

	if (e <= b || maps_walk(b, e, shared_fn, &c) || !c.ok)
		return false;
	*o = c.o;
	return true;
}

/* ---- pieces: what of a segment still maps our arena ---- */

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
int sv_rmem_collect_pieces(const struct sv_rmem *rm, const struct sv_rseg *s,
			   struct collect *c)
{
	int err;

	c->rm = rm;
	c->s = s;
	err = maps_walk(s->b, s->e, collect_fn, c);
	return err ? err : c->err;
}
