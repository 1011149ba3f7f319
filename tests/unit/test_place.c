// SPDX-License-Identifier: MIT
/*
 * sv_place (util.h), how every byte a peer sends reaches registered
 * memory: the last byte is stored once, after all the others, as an HCA
 * places an RDMA write.  The same for the guarded copies (guard.c: on
 * x86-64 the small ones are its own assembly).  Programs spin on that byte and
 * then write there themselves (riostream); a second store of it, stale, undid
 * their write (glibc's memcpy of 64 bytes stores the same 64 bytes twice).
 *
 * Watched exactly, with no timing: the last byte is the first byte of a
 * read-only page.  Each store that reaches the page faults; the handler
 * counts it, checks that every other byte is already in place, opens the
 * page and single-steps the store (the trap flag), and the trap closes
 * the page again.  x86-64 only (the trap flag); not under TSan, which
 * defers signals.
 */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "guard.h"
#include "sv_test.h"
#include "util.h"

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define WATCH 1
#endif

#ifdef WATCH
#define TF 0x100 /* EFLAGS' trap flag */

static uint8_t *page2;
static size_t pagesz;
static volatile const uint8_t *want, *got;
static volatile size_t want_n;
static volatile int stores, early;

static void on_segv(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	(void)sig;
	if ((uint8_t *)si->si_addr < page2 ||
	    (uint8_t *)si->si_addr >= page2 + pagesz)
		_exit(3); /* not ours */
	stores++;
	for (size_t i = 0; i + 1 < want_n; i++)
		if (got[i] != want[i])
			early++; /* the last byte before this one */
	mprotect(page2, pagesz, PROT_READ | PROT_WRITE);
	uc->uc_mcontext.gregs[REG_EFL] |= TF;
}

static void on_trap(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	(void)sig;
	(void)si;
	mprotect(page2, pagesz, PROT_READ);
	uc->uc_mcontext.gregs[REG_EFL] &= ~TF;
}

/* Stores that reach the last byte when place copies n bytes, and how
 * many other bytes were not in place at one of them. */
static int watch(void (*place)(void *, const void *, size_t), size_t n,
		 int *out_early)
{
	struct sigaction sa = {.sa_flags = SA_SIGINFO}, old_segv, old_trap;
	uint8_t src[256], *base, *dst;

	pagesz = (size_t)sysconf(_SC_PAGESIZE);
	base = mmap(NULL, 2 * pagesz, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(base != MAP_FAILED);
	page2 = base + pagesz;
	dst = page2 - (n - 1); /* the last byte opens page 2 */
	for (size_t i = 0; i < n; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	want = src;
	got = dst;
	want_n = n;
	stores = early = 0;
	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = on_segv;
	ASSERT_OK(sigaction(SIGSEGV, &sa, &old_segv));
	sa.sa_sigaction = on_trap;
	ASSERT_OK(sigaction(SIGTRAP, &sa, &old_trap));
	ASSERT_OK(mprotect(page2, pagesz, PROT_READ));
	place(dst, src, n);
	ASSERT_OK(sigaction(SIGSEGV, &old_segv, NULL));
	ASSERT_OK(sigaction(SIGTRAP, &old_trap, NULL));
	ASSERT_OK(mprotect(page2, pagesz, PROT_READ | PROT_WRITE));
	ASSERT_EQ(0, memcmp(dst, src, n));
	munmap(base, 2 * pagesz);
	*out_early = early;
	return stores;
}

static void place_sv(void *d, const void *s, size_t n)
{
	sv_place(d, s, n);
}

static void place_guarded(void *d, const void *s, size_t n)
{
	ASSERT_OK(sv_copy_guarded(d, s, n));
}

/* every size up to 17 (each of sv_place's small cases and the guarded
 * assembly's 8-byte steps and byte tail), then larger ones */
static void check_sizes(void (*place)(void *, const void *, size_t))
{
	static const size_t sizes[] = {1,  2,  3,  4,  5,  6,	7,   8,	 9,
				       10, 11, 12, 13, 14, 15,	16,  17, 24,
				       31, 33, 63, 64, 65, 100, 128, 256};

	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		int not_there, n = watch(place, sizes[i], &not_there);

		printf("%zu bytes: %d store(s) of the last byte, %d bytes "
		       "not yet there\n",
		       sizes[i], n, not_there);
		ASSERT_EQ(1, n);
		ASSERT_EQ(0, not_there);
	}
}
#endif

SV_TEST(place_stores_last_byte_once_and_last)
{
#ifdef WATCH
	check_sizes(place_sv);
#else
	printf("SKIP: needs x86-64's trap flag, and no TSan\n");
	exit(77);
#endif
}

SV_TEST(guarded_copy_stores_last_byte_once_and_last)
{
#ifdef WATCH
	check_sizes(place_guarded);
#else
	printf("SKIP: needs x86-64's trap flag, and no TSan\n");
	exit(77);
#endif
}
