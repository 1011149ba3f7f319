/* SPDX-License-Identifier: MIT */
/*
 * What the files of rmem share (rmem.h is its header for the rest of the
 * provider): the context's state (struct sv_rmem), its segments and the
 * peers it maps, and the pieces /proc/self/maps shows of a segment.
 *   rmem.c       the arena, the key table, re-backing, fork, the context
 *   rmem_maps.c  /proc/self/maps: private anonymous memory, pieces
 *   rmem_peer.c  the initiator side: peers' arenas and tables, rkeys
 */
#ifndef SV_RMEM_PRIV_H
#define SV_RMEM_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "objects.h"
#include "rmem.h"

/* A range of our memory now backed by the arena: every MR whose pages
 * lie inside it shares it. */
struct sv_rseg {
	uintptr_t b, e; /* page-rounded */
	uint64_t off;	/* arena offset of b */
	uint32_t refs;	/* MRs on it, and the device memory's hold */
	bool dm_hold;	/* device memory made it (sv_rmem_dm_hold) */
	struct sv_rseg *next;
	/* pages of zeros (or none) at registration: if half or more,
	 * deregistration reads the pages to skip those still zero (a
	 * read costs a fault a page on some VMs: not worth it for memory
	 * that was written) */
	size_t zeros;
};

/* A peer's arena and table as we map them (initiator side). */
struct sv_rpeer {
	dev_t dev; /* the arena's identity: one mapping per arena */
	ino_t ino;
	uint32_t refs;
	uint8_t *arena; /* read-write, shared */
	uint64_t arena_size;
	const uint8_t *table; /* read-only: the peer writes it */
	size_t table_size;
	const struct sv_rkey_entry *ent; /* entry 0 */
	uint32_t nentries;		 /* validated once, at get */
	struct sv_rpeer *next;
};

struct sv_rmem {
	struct sv_context *ctx;
	pthread_mutex_t lock;	/* everything below; then the fault window */
	int arena_fd, table_fd; /* -1 until first needed */
	dev_t arena_dev;
	ino_t arena_ino;
	uint64_t arena_size;
	struct sv_rkey_hdr *table; /* our mapping, read-write */
	size_t table_size;
	struct sv_rkey_entry *ent;
	struct range *free;
	struct sv_rseg *segs;
	/* our arena's fds went to a peer (sv_rmem_fds): MRs move onto the
	 * arena at registration; before, they wait on waiting (their
	 * rmem_wait), in registration order */
	bool shared;
	struct sv_list waiting;
	struct sv_rpeer *peers;
	struct sv_rmem *next; /* on all_rmem */
};

static inline uintptr_t page_size(void)
{
	return (uintptr_t)sysconf(_SC_PAGESIZE);
}

struct piece {
	uintptr_t lo, hi;
	uint64_t off; /* arena offset of lo */
	int prot;     /* of the mapping now */
	int fd;	      /* the arena */
};

struct collect {
	const struct sv_rmem *rm;
	const struct sv_rseg *s;
	struct piece *pc;
	size_t n, cap;
	int err;
};

#define SV_HUGE_PAGE (2ul << 20)

/* rmem_place.c: len bytes at lo's offset within a 2 MiB page, to be
 * moved onto lo with mremap: private anonymous memory (fd < 0) or fd's
 * pages from off, shared and populated.  MAP_FAILED and errno. */
void *sv_rmem_placed_like(uintptr_t lo, size_t len, int fd, uint64_t off);
/* rmem_maps.c: true if [b, e) is private anonymous read-write memory,
 * what malloc and mmap hand out, and no part of the calling thread's
 * stack. */
bool sv_rmem_private_anon(uintptr_t b, uintptr_t e);
/* rmem_maps.c: held[i] set if page i of the n at 'at', mapped from the
 * arena fd at off, holds data (resident, or swapped out). */
void sv_rmem_pages_data(int fd, const uint8_t *at, uint64_t off, size_t n,
			unsigned char *held);
/* rmem_maps.c: appends the pieces of s to *c (c->pc grows with realloc);
 * 0 or -errno. */
int sv_rmem_collect_pieces(const struct sv_rmem *rm, const struct sv_rseg *s,
			   struct collect *c);

#endif
