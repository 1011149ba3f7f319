// SPDX-License-Identifier: MIT
/*
 * The cost of the first access to a page through a new mapping
 * (first-pass-2026-12-05.md): 128 MiB, one byte written a 4 KiB page,
 * twice, for a few kinds of mapping; and whether a mapping read through
 * keeps that when mremap moves it to the same offset in a 2 MiB page,
 * or to another.  gcc -O2 first-touch.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define N  (128ul << 20)
#define PG 4096ul

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ns a page for one pass of one-byte writes (or reads) over p */
static double pass(volatile char *p, int write)
{
	double t = now();

	for (size_t o = 0; o < N; o += PG)
		if (write)
			p[o] = 1;
		else
			(void)p[o];
	return (now() - t) / (double)(N / PG) * 1e9;
}

static void two(const char *what, volatile char *p)
{
	double first = pass(p, 1);
	double second = pass(p, 1);

	printf("%-44s first %6.0f ns/page, second %4.0f\n", what, first,
	       second);
}

#define HUGE (2ul << 20)

/* N bytes of reserved space at offset off within a 2 MiB page */
static char *space_at(size_t off)
{
	char *b = mmap(NULL, N + 2 * HUGE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return (char *)((((uintptr_t)b + HUGE - 1) & ~(HUGE - 1)) + off);
}

/* fd's pages mapped at offset from (in a 2 MiB page), read through,
 * then mremapped to offset 0x3000 */
static void moved(int fd, size_t from)
{
	char *dst = space_at(0x3000);
	char *t = mmap(space_at(from), N, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE | MAP_FIXED, fd, 0);

	pass(t, 0);
	mremap(t, N, N, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	printf("read, then mremapped to %s 2 MiB offset: first %6.0f "
	       "ns/page\n",
	       from == 0x3000 ? "the same" : "another ", pass(dst, 1));
}

int main(void)
{
	int fd = memfd_create("first-touch", 0);
	const int rw = PROT_READ | PROT_WRITE;
	char *p, *q, *dst;
	double rd;

	if (fd < 0 || ftruncate(fd, N) || fallocate(fd, 0, 0, N))
		return 1;
	p = mmap(NULL, N, rw, MAP_SHARED | MAP_POPULATE, fd, 0);
	two("memfd, fallocated, populated", p);
	q = mmap(NULL, N, rw, MAP_SHARED | MAP_POPULATE, fd, 0);
	two("a second populated mapping of it", q);
	two("private anonymous, populated",
	    mmap(NULL, N, rw, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1,
		 0));
	q = mmap(NULL, N, rw, MAP_SHARED | MAP_POPULATE, fd, 0);
	pass(q, 0);
	dst = mmap(NULL, N, rw, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mremap(q, N, N, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	two("memfd mapping read, then mremapped", dst);
	q = mmap(NULL, N, rw, MAP_SHARED | MAP_POPULATE, fd, 0);
	rd = pass(q, 0);
	printf("%-44s read %6.0f ns/page, then",
	       "a new populated memfd mapping", rd);
	printf(" write %4.0f\n", pass(q, 1));
	moved(fd, 0x3000);
	moved(fd, 0x7000);
	return 0;
}
