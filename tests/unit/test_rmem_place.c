// SPDX-License-Identifier: MIT
/*
 * Where re-backing makes the mapping it moves into place
 * (provider/transport/rmem_place.c): at the target's offset within a 2
 * MiB page, whatever that offset, so that mremap moves whole page
 * tables (and with them what a hypervisor that shadows the guest's page
 * tables learned of the entries: rmem.c touch_held); the arena's bytes,
 * shared and already populated; or private memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rmem_priv.h"
#include "sv_test.h"

#define MIB	  (1ul << 20)
#define PG	  4096ul
#define LEN	  (6 * MIB + 3 * PG) /* covers whole 2 MiB pages and parts */
#define ARENA_LEN (16 * MIB)

/* A memfd of ARENA_LEN bytes, every page's first word its page number. */
static int arena(void)
{
	int fd = memfd_create("test-rmem-place", MFD_CLOEXEC);

	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(ftruncate(fd, (off_t)ARENA_LEN));
	for (uint64_t i = 0; i < ARENA_LEN / PG; i++)
		ASSERT_EQ((ssize_t)sizeof(i),
			  pwrite(fd, &i, sizeof(i), (off_t)(i * PG)));
	return fd;
}

/* The targets: page-aligned addresses at several offsets in a 2 MiB page. */
static const uintptr_t offs[] = {0, PG, 0x5000, MIB, 2 * MIB - PG};

static uintptr_t target(void *space, uintptr_t off)
{
	uintptr_t a = ((uintptr_t)space + 2 * MIB - 1) & ~(2 * MIB - 1);

	return a + off;
}

SV_TEST(rmem_place_file_at_the_targets_offset_shared_and_populated)
{
	int fd = arena();
	void *space = mmap(NULL, LEN + 4 * MIB, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char vec[LEN / PG];

	ASSERT_TRUE(space != MAP_FAILED);
	for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		uintptr_t lo = target(space, offs[k]);
		uint64_t off = 2 * MIB + k * PG, v = 7;
		uint64_t *t = sv_rmem_placed_like(lo, LEN, fd, off);

		ASSERT_TRUE(t != MAP_FAILED);
		ASSERT_EQ(0, ((uintptr_t)t - lo) & (2 * MIB - 1));
		/* populated: every page is in the page table already */
		ASSERT_OK(mincore(t, LEN, vec));
		for (size_t i = 0; i < LEN / PG; i++)
			ASSERT_EQ(1, vec[i] & 1);
		/* the file's pages from off, and shared with it */
		for (size_t i = 0; i < LEN / PG; i++)
			ASSERT_EQ(off / PG + i, t[i * PG / sizeof(*t)]);
		t[PG / sizeof(*t)] = 99;
		ASSERT_EQ((ssize_t)sizeof(v),
			  pread(fd, &v, sizeof(v), (off_t)(off + PG)));
		ASSERT_EQ(99, v);
		v = off / PG + 1;
		ASSERT_EQ((ssize_t)sizeof(v),
			  pwrite(fd, &v, sizeof(v), (off_t)(off + PG)));
		ASSERT_OK(munmap(t, LEN));
	}
	ASSERT_OK(munmap(space, LEN + 4 * MIB));
	close(fd);
}

SV_TEST(rmem_place_private_at_the_targets_offset)
{
	void *space = mmap(NULL, LEN + 4 * MIB, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_TRUE(space != MAP_FAILED);
	for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		uintptr_t lo = target(space, offs[k]);
		uint8_t *t = sv_rmem_placed_like(lo, LEN, -1, 0);

		ASSERT_TRUE(t != MAP_FAILED);
		ASSERT_EQ(0, ((uintptr_t)t - lo) & (2 * MIB - 1));
		ASSERT_EQ(0, t[0] | t[LEN - 1]);
		t[0] = t[LEN - 1] = 5; /* writable */
		ASSERT_OK(munmap(t, LEN));
	}
	ASSERT_OK(munmap(space, LEN + 4 * MIB));
}

/* A file that cannot be mapped: MAP_FAILED with mmap's errno. */
SV_TEST(rmem_place_bad_file_fails_cleanly)
{
	void *t = sv_rmem_placed_like(0x10000000, LEN, 1000000, 0);

	ASSERT_TRUE(t == MAP_FAILED);
	ASSERT_EQ(EBADF, errno);
}
