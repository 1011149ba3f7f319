/* SPDX-License-Identifier: MIT */
/*
 * Guarded copies (lib/guard.c): copies and atomics on registered memory
 * that fail with -EFAULT instead of crashing.
 */
#ifndef SV_GUARD_H
#define SV_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Guarded copies (guard.c).  sv_guard_init installs the SIGSEGV/SIGBUS
 * handler (once; at the first registration); sv_copy_guarded copies to or
 * from registered memory and returns -EFAULT, instead of crashing, if the
 * application unmapped or truncated it. */
void sv_guard_init(void);
/* One 8-byte atomic on registered memory, guarded the same way: fetch-
 * and-add of value, or compare-and-swap (compare, value); the old value
 * in *old, or -EFAULT and nothing done. */
int sv_atomic_guarded(uint64_t *p, uint64_t compare, uint64_t value,
		      bool fetch_add, uint64_t *old);

/*
 * x86-64, outside the sanitizers: a small copy and an atomic are a few
 * instructions of guard.c's assembly, and a fault there is sent by the
 * handler to their error return (the kernel's exception table, in
 * userspace): no recovery point to set, which costs more than an 8-byte
 * copy (sigsetjmp: 7-8 % of a post and a poll of an 8-byte read).  The
 * sanitizers keep the C path: their checks see its copies.
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SV_GUARD_NO_FIXUP
#endif
#endif
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && \
	!defined(__SANITIZE_THREAD__) && !defined(SV_GUARD_NO_FIXUP)
#define SV_GUARD_FIXUP	   1
#define SV_GUARD_SMALL_MAX 64 /* bytes copied by the assembly */
int sv_guard_copy_small(void *dst, const void *src, size_t n);
#endif
int sv_guard_copy_long(void *dst, const void *src, size_t n);

/* Copies n bytes to or from registered memory as sv_place does (each
 * byte stored once, the last one last): 0, or -EFAULT if the memory was
 * taken away (some bytes may have been copied). */
static inline int sv_copy_guarded(void *dst, const void *src, size_t n)
{
#ifdef SV_GUARD_FIXUP
	if (n <= SV_GUARD_SMALL_MAX)
		return sv_guard_copy_small(dst, src, n);
#endif
	return sv_guard_copy_long(dst, src, n);
}
/* A window (rmem.c): the caller is about to make [lo, hi) read-only and
 * replace its pages; until sv_guard_window_close, a thread that writes
 * there waits in the handler, then retries.  One window at a time (a
 * mutex, held from open to close by the same thread, which must take no
 * lock a waiting writer may hold: no malloc).  [0, UINTPTR_MAX) covers
 * everything (fork's snapshot).  sv_guard_init must have run. */
void sv_guard_window_open(uintptr_t lo, uintptr_t hi);
void sv_guard_window_close(void);

#endif
