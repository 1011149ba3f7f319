/* SPDX-License-Identifier: MIT */
/*
 * The counters' table a process shows softverbs-stat: one sealed memfd
 * named "softverbs-stat" per context (stat.c), read by another process
 * (tools/softverbs-stat.c) through /proc/PID/fd.  Fixed layout,
 * versioned, self-describing: the names of the counters travel in it, so
 * a reader prints counters added after it was built.  The writer is the
 * context's progress thread, under a seqcount: seq odd while it writes;
 * a reader copies, then checks seq is even and unchanged.  Every field
 * is another process's word to the reader: it validates all of them.
 */
#ifndef SV_STAT_H
#define SV_STAT_H

#include <assert.h>
#include <stdint.h>

#define SV_STAT_MAGIC	 0x54535653u /* "SVST" */
#define SV_STAT_VERSION	 2
#define SV_STAT_MEMFD	 "softverbs-stat"
#define SV_STAT_NAME_LEN 32 /* a counter's name, NUL-padded */
#define SV_STAT_MAX_CTR	 96 /* counters a table may describe */
#define SV_STAT_SLOTS                             \
	1024 /* QPs shown one by one; more are in \
	      * the totals only */
#define SV_STAT_PERIOD_NS (250 * 1000 * 1000ull)

struct sv_stat_hdr {
	uint32_t magic;	     /* SV_STAT_MAGIC */
	uint32_t version;    /* SV_STAT_VERSION */
	uint32_t hdr_size;   /* sizeof(struct sv_stat_hdr) */
	uint32_t slot_size;  /* sizeof(struct sv_stat_slot) */
	uint32_t nslots;     /* SV_STAT_SLOTS */
	uint32_t nctr;	     /* counters per slot (<= SV_STAT_MAX_CTR) */
	uint32_t pid;	     /* the process */
	uint32_t ctx_id;     /* which of its contexts (1, 2, ...) */
	uint64_t seq;	     /* odd while the writer writes */
	uint64_t updated_ns; /* CLOCK_REALTIME of the last refresh */
	uint32_t nqps;	     /* slots in use: 0 .. nslots */
	uint32_t qps_live;   /* QPs the context has (may be > nqps) */
	uint64_t qps_gone;   /* QPs destroyed (their counters are in
			      * total) */
	char names[SV_STAT_MAX_CTR][SV_STAT_NAME_LEN];
	uint64_t total[SV_STAT_MAX_CTR]; /* the context's: live and gone */
};

struct sv_stat_slot {
	uint32_t qpn;
	uint32_t dest_qpn;
	uint8_t qp_type;  /* enum ibv_qp_type */
	uint8_t qp_state; /* enum ibv_qp_state */
	uint8_t rsvd[6];
	uint64_t c[SV_STAT_MAX_CTR]; /* the first nctr are meaningful */
};

static_assert(sizeof(struct sv_stat_hdr) % 64 == 0, "shared layout");
static_assert(sizeof(struct sv_stat_slot) == 16 + 8 * SV_STAT_MAX_CTR,
	      "shared layout");

#define SV_STAT_SIZE                  \
	(sizeof(struct sv_stat_hdr) + \
	 (uint64_t)SV_STAT_SLOTS * sizeof(struct sv_stat_slot))

/* A sealed memfd of SV_STAT_SIZE, mapped, its header's layout fields
 * set for nctr counters of context ctx_id (stat_table.c); the caller
 * writes the names, then the magic (release) last, for a reader takes
 * the table once it sees that.  *fd: the memfd, to keep open (the tool
 * finds the table by it).  NULL and errno if it cannot be had. */
struct sv_stat_hdr *sv_stat_table_new(uint32_t nctr, uint32_t ctx_id, int *fd);

struct sv_context;
struct sv_qp;

/* Counters exposed (stat.c): a sealed memfd "softverbs-stat" per
 * context, refreshed by the progress thread; softverbs-stat reads it. */
struct sv_stat;
int sv_stat_open(struct sv_context *ctx);
void sv_stat_close(struct sv_context *ctx);
/* Copies the QPs' counters into the table if its period has passed;
 * the next time it wants to run (ns), or UINT64_MAX. */
uint64_t sv_stat_refresh(struct sv_context *ctx, uint64_t now);
/* A QP goes: its final counters stay in the context's totals. */
void sv_stat_qp_gone(struct sv_qp *qp);

#endif
