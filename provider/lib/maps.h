/* SPDX-License-Identifier: MIT */
/*
 * Our own mappings, one by one, as /proc/self/maps describes them: what
 * registration asks of a range (mapped? writable? private anonymous
 * memory rmem.c may re-back? pieces of our arena?).  Linux 6.11's
 * PROCMAP_QUERY ioctl answers for one mapping at a time, about 4 us,
 * where the text of every mapping of the process cost 47 us for a small
 * program (more with ASan's thousands) and registration read it three
 * times.  Older kernels get the text, parsed.  Neither allocates: a
 * child walks it between fork and exec.  A service: it calls nothing of
 * the provider and includes no layer header.
 */
#ifndef SV_MAPS_H
#define SV_MAPS_H

#include <stdint.h>

/* One mapping.  perm as the file writes it: "rw-p", "r--s", ...; name
 * the file's path or the kernel's name ("[heap]", "[anon:x]"), "" for
 * none.  Valid during the callback only. */
struct sv_vma {
	uintptr_t lo, hi;
	uint64_t off;
	unsigned int dev_major, dev_minor;
	unsigned long ino;
	char perm[5];
	const char *name;
};

/* What to do next: 0 goes on to the next mapping; anything else stops
 * the walk (negative: an error, which the walk returns). */
typedef int (*sv_vma_fn)(const struct sv_vma *v, void *arg);

/*
 * Calls fn for each mapping overlapping [lo, hi), in address order,
 * until it returns non-zero.  0 when fn stopped it with a positive
 * answer or the mappings ran out; fn's negative answer; or -errno if
 * the kernel's answer could not be had.
 */
int sv_maps_walk(uintptr_t lo, uintptr_t hi, sv_vma_fn fn, void *arg);

/* Test hooks: one way only.  _query returns -EOPNOTSUPP on a kernel
 * without PROCMAP_QUERY. */
int sv_maps_walk_text(uintptr_t lo, uintptr_t hi, sv_vma_fn fn, void *arg);
int sv_maps_walk_query(uintptr_t lo, uintptr_t hi, sv_vma_fn fn, void *arg);

#endif
