// SPDX-License-Identifier: MIT
/*
 * rmem: where the mappings that re-backing moves into place are made
 * (rmem.c reback and unback), apart so that tests/unit/test_rmem_place.c
 * can hold them to it.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "rmem_priv.h"

/*
 * A mapping of len bytes to be moved onto lo, at lo's offset within a 2
 * MiB page: private anonymous memory asked for in huge pages (fd < 0;
 * THP, where the system allows it on madvise), or fd's pages from off,
 * shared and populated.  mremap then moves whole page tables for the 2
 * MiB pages the range covers, and keeps what they held: huge pages, and
 * the hypervisor's view of entries already used (touch_held; at another
 * offset each page cost 4.5 us again after the move).  Anonymous: the
 * copy into it takes a fault per 2 MiB instead of one per 4 KiB page (a
 * 512 MiB deregistration spent most of its time there).  Holes stay
 * unallocated.
 */
void *sv_rmem_placed_like(uintptr_t lo, size_t len, int fd, uint64_t off)
{
	size_t span = len + SV_HUGE_PAGE;
	/* the file's case reserves the place only */
	uint8_t *base =
		mmap(NULL, span, fd < 0 ? PROT_READ | PROT_WRITE : PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | (fd < 0 ? 0 : MAP_NORESERVE),
		     -1, 0);
	uintptr_t b, t;

	if (base == MAP_FAILED)
		return MAP_FAILED;
	b = (uintptr_t)base;
	t = b + ((lo - b) & (SV_HUGE_PAGE - 1));
	if (t > b)
		munmap(base, t - b);
	if (b + span > t + len)
		munmap((void *)(t + len), b + span - (t + len));
	if (fd < 0) {
		(void)madvise((void *)t, len, MADV_HUGEPAGE); /* a hint */
		return (void *)t;
	}
	if (mmap((void *)t, len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_POPULATE | MAP_FIXED, fd,
		 (off_t)off) == MAP_FAILED) {
		int err = errno;

		munmap((void *)t, len);
		errno = err;
		return MAP_FAILED;
	}
	return (void *)t;
}
