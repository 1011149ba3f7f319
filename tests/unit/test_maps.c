// SPDX-License-Identifier: MIT
/*
 * Our mappings one by one (provider/lib/maps.c): PROCMAP_QUERY and the
 * text of /proc/self/maps describe every mapping alike (private and
 * shared, anonymous and named, a memfd, a file, read-only, PROT_NONE,
 * the heap), and a walk gives exactly the mappings that overlap its
 * range, in order, and stops when told.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "maps.h"
#include "sv_test.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA	     0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

#define MAX_VMAS 4096
#define USER_TOP ((uintptr_t)1 << 47) /* below [vsyscall], not a VMA */

struct seen {
	struct sv_vma v;
	char name[256];
};

/* static: a walk that collects must not allocate (the heap would move) */
static struct seen by_text[MAX_VMAS], by_query[MAX_VMAS];

struct collect {
	struct seen *s;
	int n, stop_at;
};

static int collect_fn(const struct sv_vma *v, void *arg)
{
	struct collect *c = arg;

	if (c->n == MAX_VMAS)
		return -ENOSPC;
	c->s[c->n].v = *v;
	snprintf(c->s[c->n].name, sizeof(c->s[c->n].name), "%s", v->name);
	c->s[c->n].v.name = c->s[c->n].name;
	return ++c->n == c->stop_at;
}

typedef int (*walk_fn)(uintptr_t, uintptr_t, sv_vma_fn, void *);

static int walk(walk_fn w, struct seen *s, uintptr_t lo, uintptr_t hi,
		int stop_at)
{
	struct collect c = {s, 0, stop_at};

	ASSERT_EQ(0, w(lo, hi, collect_fn, &c));
	return c.n;
}

static void needs_query(void)
{
	if (sv_maps_walk_query(0, 1, collect_fn, &(struct collect){0}) ==
	    -EOPNOTSUPP) {
		printf("SKIP: this kernel has no PROCMAP_QUERY (Linux 6.11)\n");
		exit(77);
	}
}

static void *map(size_t len, int prot, int flags, int fd)
{
	void *p = mmap(NULL, len, prot, flags, fd, 0);

	ASSERT_TRUE(p != MAP_FAILED);
	return p;
}

static bool has_name(const struct seen *s, int n, const char *prefix)
{
	for (int i = 0; i < n; i++)
		if (!strncmp(s[i].name, prefix, strlen(prefix)))
			return true;
	return false;
}

SV_TEST(query_describes_every_mapping_as_the_text_does)
{
	int mfd = memfd_create("sv-maps-test", 0);
	int efd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	void *heap = sbrk(4096); /* "[heap]", whatever malloc uses */
	char *named;
	int nt, nq;

	needs_query();
	ASSERT_GE(mfd, 0);
	ASSERT_GE(efd, 0);
	ASSERT_OK(ftruncate(mfd, 4 * 4096));
	map(3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	map(2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1);
	map(4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	map(4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	map(2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mfd);
	map(4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, efd);
	named = map(4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1);
	/* "[anon:sv-named]", where the kernel has CONFIG_ANON_VMA_NAME */
	(void)prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)named,
		    4096, (unsigned long)"sv-named");
	ASSERT_TRUE(heap != (void *)-1);
	/* once each first: the walks' own stack frames may grow [stack] */
	walk(sv_maps_walk_text, by_text, 0, USER_TOP, 0);
	walk(sv_maps_walk_query, by_query, 0, USER_TOP, 0);
	nt = walk(sv_maps_walk_text, by_text, 0, USER_TOP, 0);
	nq = walk(sv_maps_walk_query, by_query, 0, USER_TOP, 0);
	ASSERT_EQ(nt, nq);
	ASSERT_GE(nt, 8);
	for (int i = 0; i < nt; i++) {
		const struct sv_vma *t = &by_text[i].v, *q = &by_query[i].v;

		if (t->lo != q->lo || t->hi != q->hi || t->off != q->off ||
		    t->dev_major != q->dev_major ||
		    t->dev_minor != q->dev_minor || t->ino != q->ino ||
		    strcmp(t->perm, q->perm) || strcmp(t->name, q->name))
			sv_test_fail(
				__FILE__, __LINE__,
				"mapping %d: text %lx-%lx %s %llx %x:%x "
				"%lu '%s', query %lx-%lx %s %llx %x:%x "
				"%lu '%s'",
				i, (unsigned long)t->lo, (unsigned long)t->hi,
				t->perm, (unsigned long long)t->off,
				t->dev_major, t->dev_minor, t->ino, t->name,
				(unsigned long)q->lo, (unsigned long)q->hi,
				q->perm, (unsigned long long)q->off,
				q->dev_major, q->dev_minor, q->ino, q->name);
	}
	/* and the names were there to compare */
	ASSERT_TRUE(has_name(by_query, nq, "[heap]"));
	ASSERT_TRUE(has_name(by_query, nq, "[stack]"));
	ASSERT_TRUE(has_name(by_query, nq, "/memfd:sv-maps-test"));
	close(efd);
	close(mfd);
}

/* Three mappings with a hole between the second and third: a walk of a
 * range gives those that overlap it, in order, clipped to none other;
 * a positive answer stops it (0), a negative one is its result. */
static void walk_range_and_stop(walk_fn w)
{
	/* a hole on either side: no neighbour merges with the ends */
	uint8_t *p = (uint8_t *)map(7 * 4096, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1) +
		     4096;
	uintptr_t b = (uintptr_t)p;
	struct seen s[8];
	int n;

	ASSERT_OK(munmap(p - 4096, 4096));
	ASSERT_OK(munmap(p + 5 * 4096, 4096));
	/* rw- | r-- | hole | rw- rw- */
	ASSERT_OK(mprotect(p + 4096, 4096, PROT_READ));
	ASSERT_OK(munmap(p + 2 * 4096, 4096));
	n = walk(w, s, b + 100, b + 5 * 4096 - 100, 0);
	ASSERT_EQ(3, n);
	ASSERT_EQ(b, s[0].v.lo);
	ASSERT_EQ(b + 4096, s[0].v.hi);
	ASSERT_OK(strcmp("rw-p", s[0].v.perm));
	ASSERT_EQ(b + 4096, s[1].v.lo);
	ASSERT_OK(strcmp("r--p", s[1].v.perm));
	ASSERT_EQ(b + 3 * 4096, s[2].v.lo);
	ASSERT_EQ(b + 5 * 4096, s[2].v.hi);
	/* only the middle one; the hole alone: none */
	ASSERT_EQ(1, walk(w, s, b + 4096, b + 2 * 4096, 0));
	ASSERT_OK(strcmp("r--p", s[0].v.perm));
	ASSERT_EQ(0, walk(w, s, b + 2 * 4096, b + 3 * 4096, 0));
	/* stopped after the first */
	ASSERT_EQ(1, walk(w, s, b, b + 5 * 4096, 1));
	ASSERT_EQ(-ENOSPC, w(b, b + 5 * 4096, collect_fn,
			     &(struct collect){s, MAX_VMAS, 0}));
	ASSERT_OK(munmap(p, 2 * 4096));
	ASSERT_OK(munmap(p + 3 * 4096, 2 * 4096));
}

SV_TEST(text_walks_a_range_and_stops)
{
	walk_range_and_stop(sv_maps_walk_text);
}

SV_TEST(query_walks_a_range_and_stops)
{
	needs_query();
	walk_range_and_stop(sv_maps_walk_query);
}

SV_TEST(walk_uses_either)
{
	walk_range_and_stop(sv_maps_walk);
}
