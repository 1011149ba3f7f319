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
int sv_copy_guarded(void *dst, const void *src, size_t n);
/* One 8-byte atomic on registered memory, guarded the same way: fetch-
 * and-add of value, or compare-and-swap (compare, value); the old value
 * in *old, or -EFAULT and nothing done. */
int sv_atomic_guarded(uint64_t *p, uint64_t compare, uint64_t value,
		      bool fetch_add, uint64_t *old);
/* A window (rmem.c): the caller is about to make [lo, hi) read-only and
 * replace its pages; until sv_guard_window_close, a thread that writes
 * there waits in the handler, then retries.  One window at a time (a
 * mutex, held from open to close by the same thread, which must take no
 * lock a waiting writer may hold: no malloc).  [0, UINTPTR_MAX) covers
 * everything (fork's snapshot).  sv_guard_init must have run. */
void sv_guard_window_open(uintptr_t lo, uintptr_t hi);
void sv_guard_window_close(void);

#endif
