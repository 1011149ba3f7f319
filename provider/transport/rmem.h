/* SPDX-License-Identifier: MIT */
/*
 * Zero-copy memory for one-sided RDMA ("rmem").  Memory registered with
 * remote access is moved, in place, onto pages of a per-context memfd (the
 * arena), and every MR is described in a second memfd (the key table).  A
 * peer on the same host that holds both fds writes, reads and atomically
 * updates our MRs with one memcpy or one CPU atomic, with none of our
 * threads taking part.  The table is the only thing a peer trusts, and it
 * trusts nothing in it: every field is validated at each use.
 */
#ifndef SV_RMEM_H
#define SV_RMEM_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct sv_context;
struct sv_mr;

#define SV_RKEY_MAGIC	     0x79656b72u /* "rkey" */
#define SV_RKEY_VERSION	     2u		 /* 2: random keys, slot = low bits */
#define SV_RKEY_HDR_BYTES    4096u	 /* entries start on page 2 */
#define SV_RMEM_ARENA_GB     64u	 /* default; SOFTVERBS_ARENA_GB */
#define SV_RMEM_NOT_REBACKED UINT64_MAX	 /* arena_off of such an MR */

/* The key table's first page.  Written once, before the fd is shared. */
struct sv_rkey_hdr {
	uint32_t magic;	      /* SV_RKEY_MAGIC: catches a table not ours */
	uint32_t version;     /* SV_RKEY_VERSION: bump on any layout change */
	uint32_t entry_size;  /* sizeof(struct sv_rkey_entry) */
	uint32_t nentries;    /* entries, a power of two; the entry of a
			       * key is key & (nentries - 1) (its MR slot) */
	uint64_t entries_off; /* offset of entry 0 from the table's start */
	uint64_t arena_size;  /* bytes of the arena this table describes */
};
static_assert(sizeof(struct sv_rkey_hdr) == 32, "shared layout is ABI");

/*
 * One MR slot, written by its owner under a seqlock: gen is odd while the
 * entry changes, and a reader that sees gen differ before and after its
 * copy (or odd) throws the copy away.  key 0 means no MR.
 */
struct sv_rkey_entry {
	_Atomic uint32_t gen; /* seqlock: odd while being written */
	uint32_t key;	      /* the MR's rkey; 0: no live MR here */
	uint64_t iova;	      /* first address the peer names */
	uint64_t length;      /* bytes from iova */
	uint64_t arena_off;   /* arena offset of the MR's first byte, or
			       * SV_RMEM_NOT_REBACKED */
	uint32_t access;      /* enum ibv_access_flags of the MR */
	uint32_t pd_id;	      /* the owner's sv_pd.id */
};
static_assert(sizeof(struct sv_rkey_entry) == 40, "shared layout is ABI");

/* Context open/close: joins/leaves the list fork walks; the arena and
 * table are made only when first needed. */
int sv_rmem_init(struct sv_context *ctx);
void sv_rmem_fini(struct sv_context *ctx);

/*
 * After an MR is set up (keys written): re-backs its pages if it has
 * remote access and that is possible, and publishes its entry.  Never
 * fails: an MR that cannot be re-backed works through the responder.
 */
void sv_rmem_reg(struct sv_context *ctx, struct sv_mr *mr);
/* First thing of a deregistration (or re-registration): the entry is
 * invalid before this returns; the pages become private again once the
 * last MR on them goes.  Idempotent. */
void sv_rmem_dereg(struct sv_context *ctx, struct sv_mr *mr);

/*
 * Device memory (verbs/dm.c): the DM's pages, [p, p+len) of fresh private
 * anonymous memory, page-aligned, moved onto the arena as a segment the
 * DM holds, so every MR on it is re-backed already and peers reach it
 * with one copy.  -errno if not (no arena, arena full): the DM then
 * works through the responder.  unhold drops the hold (free_dm); in a
 * fork child, which forgot the arena, it finds nothing to drop.
 */
int sv_rmem_dm_hold(struct sv_context *ctx, void *p, size_t len);
void sv_rmem_dm_unhold(struct sv_context *ctx, void *p);

/*
 * What backs [b, e) here, for ibv_import_mr across processes
 * (verbs/import.c): true if it is all shared memory ('s' in
 * /proc/self/maps) of one object with an inode (a file, memfd, shmem,
 * MAP_SHARED|MAP_ANONYMOUS), mapped contiguously; its device, inode and
 * the object's offset at b are then in o.
 */
struct sv_mapobj {
	unsigned int dev_major, dev_minor;
	uint64_t ino, offset;
};
bool sv_rmem_shared_object(uintptr_t b, uintptr_t e, struct sv_mapobj *o);

/* Initiator side (see the engine).  A peer's arena and key table. */
struct sv_rpeer;

/* For the hello: our fds (created lazily); -errno.  rmem keeps them.
 * Shares the context's memory first (sv_rmem_share). */
int sv_rmem_fds(struct sv_context *ctx, int *arena_fd, int *table_fd);
/*
 * A peer on this host may map our arena from now on (a link to one is
 * being made): the MRs that waited move onto it, and later ones move at
 * registration.  Before the link's receive descriptors are written, so
 * that receives posted before it are shown in shared memory.  -errno if
 * there is no arena (then memory stays where it is).
 */
int sv_rmem_share(struct sv_context *ctx);
/*
 * Validates fds a peer handed us (memfds sealed against shrinking, sizes,
 * the table's magic and version), maps them (arena read-write shared,
 * table read-only); one mapping per arena (st_dev, st_ino) in ctx,
 * refcounted.  NULL and errno on refusal.  The fds stay the caller's.
 */
struct sv_rpeer *sv_rpeer_get(struct sv_context *ctx, int arena_fd,
			      int table_fd);
void sv_rpeer_put(struct sv_context *ctx, struct sv_rpeer *p);
/*
 * Where [va, va + len) of rkey is in our mapping of the peer's arena, if
 * the peer's table says rkey is live, in PD pd_id, re-backed, has every
 * bit of access, and the range lies inside the MR and the arena; else
 * NULL (the peer's responder then decides).  Lock-free: one seqlock read
 * of the entry, each field read once.
 */
void *sv_rpeer_resolve(struct sv_rpeer *p, uint32_t rkey, uint32_t pd_id,
		       uint64_t va, uint64_t len, unsigned int access);

/* Where [off, off + len) of the peer's arena is in our mapping, or NULL
 * if that is not inside the arena (off and len come from the peer). */
void *sv_rpeer_at(struct sv_rpeer *p, uint64_t off, uint64_t len);

/*
 * Single-copy send/receive (req.c, resp.c): receive buffers in shared
 * memory are described to the sender, which places a send of at least
 * sv_single_copy_min() bytes into them itself.  The policy, read once
 * from the environment: SOFTVERBS_SINGLE_COPY=0 turns it off (then only
 * memory with remote access is shared), SOFTVERBS_SINGLE_COPY_MIN sets
 * the size from which a send is placed.  UINT32_MAX: off.
 */
#define SV_SINGLE_COPY_MIN 1024u
uint32_t sv_single_copy_min(void);
/*
 * Sends of at most this many bytes are placed only into a receive buffer
 * that is warm or while the receiver is busy (req.c try_place); larger
 * ones always.  SOFTVERBS_SINGLE_COPY_COLD sets it (0: always place).
 */
#define SV_SINGLE_COPY_COLD 8192u
uint32_t sv_single_copy_cold(void);
/* The MR access that gets an MR's pages shared (re-backed). */
unsigned int sv_rmem_shared_access(void);

#endif
