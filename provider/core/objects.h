/* SPDX-License-Identifier: MIT */
/*
 * The provider's objects (DESIGN.md, "provider/"): the structures every
 * layer reads, with their limits and the small inline helpers that only
 * touch their fields.  Each verbs object wraps the libibverbs structure
 * the application sees (first member, or the context inside
 * verbs_context) and adds our state.  Locks, from outer to inner:
 * ctx->qp_lock (rwlock: QP list / CQ membership) -> qp->lock ->
 * ctx->xsrq_lock (XRC SRQ list) -> srq->lock -> cq->lock ->
 * channel/event-queue locks; qp->lock -> ctx->mw_lock (a window's
 * binding: the requester's bind and invalidate, the responder's remote
 * invalidate).  A responder holds
 * its qp->lock when it takes a WQE from the QP's SRQ; post_srq_recv takes
 * srq->lock alone, and wakes QPs waiting in RNR only after releasing it.
 *
 * Data, no calls: the functions on these objects are declared by the
 * layer that defines them (verbs.h, engine.h, transport.h, progress.h,
 * core.h).  In core/, below the layers that call each other, so that all
 * of them may include it; it includes link.h and evloop.h, higher
 * layers' headers, because a QP embeds its link and its timer and a pfd
 * its io by value (tests/abi/includes.sh lists these two and the wire/
 * and lib/ files that read a QP's fields).
 */
#ifndef SV_OBJECTS_H
#define SV_OBJECTS_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "evloop.h"
#include "link.h"
#include "util.h"
#include "wire.h" /* SV_MCAST_QPN */

/*
 * Exports live in abi/ alone (DESIGN.md, "provider/"): abi/export.h is not
 * for the layers below it, and SV_EXPORT in an object file stops the build.
 */
#pragma GCC poison SV_EXPORT SV_SYMVER

/*
 * The device's limits: what ibv_query_device reports and what create and
 * modify enforce (EINVAL beyond them).  Object counts are per context
 * (struct sv_context.nobj): each ibv_open_device is a device instance of
 * its own, as far as resources go.
 */
#define SV_DEV_NAME    "softverbs0"
#define SV_MAX_QP      (1 << 14) /* each QP holds an fd (its listener) */
#define SV_MAX_QP_WR   16384
#define SV_MAX_SGE     32
#define SV_MAX_INLINE  1024
#define SV_MAX_CQ      (1 << 14)
#define SV_MAX_CQE     (1 << 22)
#define SV_MAX_PD      (1 << 15)
#define SV_MAX_MSG     (1u << 31)
#define SV_MAX_MR      (1 << 17)    /* MR table slots; max_mr is one less */
#define SV_MAX_MR_SIZE (1ull << 40) /* bytes in one MR */
#define SV_MAX_MW      (1 << 12)    /* window slots; max_mw is one less */
#define SV_MAX_SRQ     (1 << 14)    /* srq.c enforces the SRQ limits */
#define SV_MAX_SRQ_WR  16384
#define SV_MAX_AH      (1 << 16) /* ah.c enforces it (ENOMEM) */
#define SV_MAX_SRQ_SGE 32
/* reads/atomics in flight per QP, each way: 128, as the kernel's rxe,
 * whose peers perftest sets to its count (a QP refuses more than its
 * device allows) */
#define SV_MAX_RD_ATOM 128
#define SV_GID_TBL_LEN 16
#define SV_WARM_BUFS   8 /* receive buffers a sender keeps as warm (req.c) */
/* Multicast (mcast.c): groups and attachments per context, members of a
 * group on the host (its registry directory) */
#define SV_MAX_MCAST_GRP	     256
#define SV_MAX_MCAST_QP_ATTACH	     56 /* rxe's */
#define SV_MAX_TOTAL_MCAST_QP_ATTACH 1024
/* Device memory (verbs/dm.c): max_dm_size, and what a context's DMs may
 * hold in all; ConnectX-6's on-chip memory (MEMIC) is as big */
#define SV_MAX_DM_SIZE (256u << 10)

/* Objects counted against the device's max_* (sv_obj_get/put). */
enum sv_obj {
	SV_OBJ_PD,
	SV_OBJ_CQ,
	SV_OBJ_QP,
	SV_OBJ_SRQ,
	SV_OBJ_AH,
	SV_OBJ_NUM,
};

struct sv_progress;
struct sv_rpeer;
struct sv_qp;
struct sv_rmem;
struct sv_rseg;
struct sv_dm;
struct sv_mcast;
struct sv_mcast_grp;
struct sv_ud_door;
struct sv_lanes_tx;
struct sv_lane_rx;
struct sv_ud_replay;
struct sv_ud_hdr;

/* A call another thread asks the progress thread to make
 * (sv_progress_async): queued once however often it is asked, until the
 * thread takes it.  Its memory must stay valid (or type-stable) while
 * queued. */
struct sv_async;
typedef void sv_async_cb(struct sv_async *a);
struct sv_async {
	struct sv_async *next; /* on the thread's list (under its lock) */
	sv_async_cb *cb;       /* set when queued (under its lock) */
	atomic_bool queued;    /* on the list */
};

/* An fd of ours in the progress thread's loop: the loop's io (the fd and
 * the callback its owner registered with sv_pfd_set: the loop knows
 * callbacks, not kinds of fd), and what those callbacks need. */
struct sv_pfd {
	struct sv_io io;	/* callback and registration (evloop.h) */
	int fd;			/* -1 when not registered */
	bool edge;		/* EPOLLET (sv_pfd_set) */
	struct sv_context *ctx; /* whose loop (sv_progress_add) */
	struct sv_qp *qp;	/* a QP's fd: whose */
	struct sv_srq *srq;	/* an XRC SRQ's socket: whose */
	atomic_bool rung;     /* a link doorbell fired: drain under qp->lock */
	atomic_bool hup;      /* its events said the peer hung up: a reader
			       * reads on to the EOF (no edge after it) */
	bool quiet;	      /* EPOLLIN off (sv_progress_quiet) */
	bool out;	      /* EPOLLOUT on (sv_progress_want_out) */
	struct sv_async bell; /* its callback, as if its fd had input
			       * (sv_pfd_ring) */
};

/* What handles p's events, from its next sv_progress_add on; edge: edge
 * triggered (an fd we may not be able to empty at once, so that it never
 * makes the thread spin), else level (hang-ups, the app's kick).  A QP's
 * pfd changes callback under qp->lock (its link opens or closes) while the
 * progress thread may be handling an event epoll returned for it just
 * before: the callback is a relaxed atomic. */
static inline void sv_pfd_set(struct sv_pfd *p, sv_io_cb *cb, bool edge)
{
	sv_io_set_cb(&p->io, cb);
	p->edge = edge;
}

/* An event queue behind a real fd (eventfd in semaphore mode): one count
 * per queued event, so poll()/epoll on the fd works as on hardware.  The
 * events a thread raises while it spins in ibv_get_cq_event on this very
 * queue are queued without their count (uncounted): that thread takes
 * one and counts the rest before it returns (verbs/channel.c). */
struct sv_evq {
	pthread_mutex_t lock;
	int fd;
	struct sv_list events; /* struct sv_async_ev, or CQs for channels */
	uint32_t uncounted;    /* under lock */
};

/* Other processes' MR imports a context holds (verbs/import.c). */
#define SV_IMP_HELD 64

struct sv_context {
	struct verbs_context vctx; /* ->context is what apps hold */
	pthread_rwlock_t qp_lock;  /* qps list and cq->qps membership */
	struct sv_list qps;	   /* struct sv_qp.ctx_node */
	/* CQs with a readiness set (struct sv_cq.ready_set), under
	 * vctx.context.mutex: the context's close closes the sets of those
	 * the app did not destroy */
	struct sv_list ready_cqs;
	/* CQs with QPs the progress thread left to the app's polls (parked:
	 * engine/drive.c) and its one timer that checks they are still
	 * polled; the list and each CQ's park_node under park_lock, which
	 * comes after a QP's lock */
	pthread_mutex_t park_lock;
	struct sv_list park_cqs;
	struct sv_timer park_timer; /* the progress thread's */
	pthread_mutex_t xsrq_lock;  /* xsrqs; inside qp->lock, outside
				     * srq->lock */
	struct sv_list xsrqs;	    /* XRC SRQs (struct sv_srq.ctx_node) */
	pthread_mutex_t mr_lock;    /* MR table allocation */
	struct sv_mr **mrs;	    /* slot = sv_mr_slot(key); never moves */
	uint32_t nmrs;		    /* slots taken (live or being set up) */
	uint32_t mr_cap;
	struct sv_mr *mr_free;	/* type-stable: MRs are reused */
	struct sv_mr *mr_limbo; /* deregistered, not reusable until the
				 * progress thread took mr_grace (mr.c) */
	struct sv_async mr_grace;
	/* other processes' imports of this context's MRs (verbs/import.c),
	 * under mr_lock: entry i (key 0: free) holds a socket of its
	 * importer's and owns word i of the revocation page imp_page (a
	 * sealed memfd, imp_page_fd, made at the first import, which every
	 * importer maps read-only); when the MR is deregistered or
	 * re-registered (or we close) word i moves on, then the socket is
	 * written to and closed (the kernel closes it if we die), which
	 * revokes the import there (sv_mr_revoked); at most SV_IMP_HELD.
	 * dm: key is a DM's handle, revoked by its ibv_free_dm (dm.c) */
	struct sv_imp_held {
		uint32_t key;
		int fd;
		bool dm;
	} imp_held[SV_IMP_HELD];
	uint32_t imp_nheld;
	_Atomic uint64_t *imp_page;
	int imp_page_fd;
	/* a context imported from another process: its owner's revocation
	 * page mapped read-only (under mr_lock; NULL until the first MR
	 * import), and which memfd it is */
	const _Atomic uint64_t *imp_rpage;
	uint64_t imp_rpage_dev, imp_rpage_ino;
	uint32_t mr_rand[64];	  /* getrandom's words for keys (mr.c) */
	uint32_t mr_nrand;	  /* of them not used yet */
	struct sv_qp *qp_free;	  /* type-stable: QPs are reused, so a
				   * poller with an old set is safe */
	struct sv_evq async;	  /* async events, fd = async_fd */
	struct sv_progress *prog; /* the progress thread (progress.c) */
	struct sv_rmem *rmem;	  /* arena, key table, peers (rmem.c) */
	_Atomic uint32_t pd_ids;  /* last PD id handed out */
	_Atomic uint32_t nobj[SV_OBJ_NUM]; /* live objects, by kind */
	pthread_mutex_t mcast_lock; /* the three below, qp->ud.mcast lists */
	struct sv_mcast_grp *mcast_grps; /* groups our QPs are attached to */
	uint32_t mcast_ngrp;		 /* against SV_MAX_MCAST_GRP */
	uint32_t mcast_nattach;	   /* against SV_MAX_TOTAL_MCAST_QP_ATTACH */
	pthread_mutex_t door_lock; /* opening a transport's door */
	/* Each transport's own state in the context (link.h, enum
	 * sv_tp_slot), opaque here: TCP's door, made at its first link and
	 * published (release) before its fd is in the progress thread's
	 * epoll; freed by sv_transport_ctx_close */
	void *_Atomic tp_state[SV_TP_SLOTS];
	/* UD between hosts (ud.c), under door_lock: the UDP socket sends
	 * go out on (at the first AH of another host), the UDP listener on
	 * the well-known port (at the first UD QP) and the Unix socket its
	 * datagrams are passed on with */
	int ud_tx_fd, ud_fwd_fd;
	int ud_tx6_fd; /* UD to another host's IPv6 address (ud.c) */
	struct sv_pfd udoor;
	bool udoor_failed;
	struct sv_ud_door *_Atomic udoor_st; /* the listener's state (ud.c);
					      * the progress thread reads it */
	/* the listener holds a datagram for a full QP socket (door.c): our
	 * polls read their sockets each time, so that the next poll that
	 * pumps passes it on, not a retry tick later */
	atomic_bool udoor_holds;
	/* till when (sv_now_ns) the listener is busy, datagrams coming: our
	 * readers' polls pump it too (ud/door.c sv_ud_door_poll); 0: not
	 * busy (a poll that finds the time past sets it back to 0, so that
	 * polls read no clock once datagrams stopped coming) */
	_Atomic uint64_t udoor_busy_ns;
	/* the listener's counters of RoCEv2 datagrams it dropped (ud/roce.c,
	 * in the context's totals: stat.c), in the listener's state */
	struct sv_qp_stats *udoor_stats;
	/* UD lanes this context sends on (lane.c), one per destination QP;
	 * its QPs' sends serialise on lane_lock (inside qp->lock) */
	pthread_mutex_t lane_lock;
	struct sv_lanes_tx *lanes;
	struct sv_stat *stat; /* counters' memfd (stat.c), or NULL */
	/* the other end of cmd_fd's socketpair (verbs/context.c), read by
	 * the progress thread (cmd_pfd): other processes' import requests
	 * (verbs/import_wire.c); -1 in a context imported from another
	 * process, whose cmd_fd is the one it was given */
	int cmd_peer;
	struct sv_pfd cmd_pfd;
	/* Import (verbs/import.c).  real: the context objects live in:
	 * itself, or, for a context ibv_import_device made from a cmd_fd
	 * of this process, the context that fd belongs to (to_sctx follows
	 * it); refs: the real context's handles, itself and its in-process
	 * imports (the last ibv_close_device tears it down); remote: made
	 * by ibv_import_device from another process's cmd_fd.  The process's
	 * registry finds a real context by its cmd_fd's inode (imp_node). */
	struct sv_context *real;
	_Atomic uint32_t refs;
	bool remote;
	struct sv_list imp_node;
	uint64_t cmd_dev, cmd_ino;
	int cmd_pid; /* who registered it: a forked child asks the owner */
	/* live PDs an import may name by handle (struct sv_pd.node) */
	pthread_mutex_t pd_lock;
	struct sv_list pds;
	/* memory windows (verbs/mw.c, core/mw.c): slot = sv_mw_slot(key),
	 * type-stable like MRs; mw_lock serialises every change of a
	 * window's binding (readers use its seqlock) */
	pthread_mutex_t mw_lock;
	uint32_t nmws;
	struct sv_mw *mw_free;
	struct sv_mw *mws[SV_MAX_MW];
	/* device memory (verbs/dm.c), under mr_lock: the live DMs, and
	 * their pages' bytes against SV_MAX_DM_SIZE */
	struct sv_dm *dms;
	uint64_t dm_bytes;
};

/* The context objects live in: an in-process import's is its original
 * (verbs/import.c). */
static inline struct sv_context *to_sctx(struct ibv_context *c)
{
	return container_of(c, struct sv_context, vctx.context)->real;
}

/* One context's handles are one namespace, as the kernel's ufile's.  A
 * process that imported another's context (ibv_import_device of its
 * cmd_fd) gives what it makes there (PDs, MRs, DMs) handles with this
 * bit; the owner's never have it (their numbers stay below it).  So an
 * import verb on that context finds a handle with the bit in this
 * process and any other at the owner, and never one for the other
 * (verbs/import.c). */
#define SV_HANDLE_HERE 0x80000000u

/* The handle of the object numbered n (below SV_HANDLE_HERE) of ctx. */
static inline uint32_t sv_handle_of(const struct sv_context *ctx, uint32_t n)
{
	return ctx->remote ? n | SV_HANDLE_HERE : n;
}

/* A PD cannot go while anything created on it lives (the kernel's
 * usecnt): MRs, MWs and QPs take a reference (AHs, SRQs must too). */
struct sv_pd {
	struct ibv_pd ibv;	/* ibv.handle = id */
	_Atomic uint32_t users; /* objects created on this PD */
	uint32_t id;		/* non-zero, unique in the context: the
				 * key table's pd_id (rmem.c) */
	struct sv_pd *inner;	/* a parent domain (verbs/domain.c): the
				 * PD it contains; NULL for a PD */
	/* Import (verbs/import.c): real is the PD every check compares:
	 * itself, or the original of a PD ibv_import_pd made in this
	 * process (to_spd follows it).  On the real PD, under its
	 * context's pd_lock: refs, its handles (itself and its imports;
	 * freed at 0), dead once deallocated through one of them (no import
	 * finds it), node on ctx->pds until freed.  remote: imported from
	 * another process (a PD of this context standing for that one). */
	struct sv_pd *real;
	uint32_t refs;
	bool dead;
	bool remote;
	struct sv_list node;
};

/* The protection domain of pd: pd itself, the original of an import
 * (verbs/import.c), or the PD inside a parent domain, which "is
 * completely interchangeable" with it (man ibv_alloc_parent_domain;
 * domain.c sets its real to that PD's): keys and QPs compare these. */
static inline struct sv_pd *to_spd(struct ibv_pd *pd)
{
	return container_of(pd, struct sv_pd, ibv)->real;
}

static inline void sv_pd_get(struct sv_pd *pd)
{
	atomic_fetch_add_explicit(&pd->users, 1, memory_order_relaxed);
}

static inline void sv_pd_put(struct sv_pd *pd)
{
	atomic_fetch_sub_explicit(&pd->users, 1, memory_order_release);
}

struct sv_mr {
	struct ibv_mr ibv;
	struct sv_pd *pd; /* NULL while on the free list */
	uint64_t iova;	  /* address the peer names */
	uint8_t *addr;	  /* where it is in our memory */
	uint64_t length;
	int access;	/* enum ibv_access_flags */
	uint32_t index; /* slot in ctx->mrs: sv_mr_slot(key) */
	struct sv_mr *next_free;
	/* rmem.c, under its lock: the re-backed segment holding the MR (NULL
	 * if not re-backed) and the arena offset of its first byte (written
	 * with a release store, read without the lock: post.c); rmem_wait
	 * on its list of MRs to move when the context first shares its
	 * memory with a peer (rmem_waits says if on it) */
	struct sv_rseg *rseg;
	uint64_t arena_off;
	struct sv_list rmem_wait;
	bool rmem_waits;
	struct sv_dm *dm; /* the device memory it is on (verbs/dm.c), or
			   * NULL: its MR count drops at deregistration */
	/* made by ibv_import_mr (verbs/import.c): a copy of the MR's
	 * handle, keys and range, in no table; the keys find the original */
	bool imported;
	/* made by ibv_import_mr of another process's MR: this process's
	 * registration of the same shared memory under its keys.  imp_word:
	 * its word in the owner's revocation page (ctx->imp_rpage), alive
	 * while it holds imp_gen (core/mr.c: one load per lookup); imp_fd
	 * the socket the owner holds the other end of (its close, the
	 * owner's death, revokes the import: imp_pfd, watched by the
	 * progress thread), closed after the grace period (verbs/mr.c);
	 * imp_revoked once the progress thread saw that */
	bool imp_remote;
	int imp_fd;
	atomic_bool imp_revoked;
	const _Atomic uint64_t *imp_word;
	uint64_t imp_gen;
	struct sv_pfd imp_pfd;
};

/* The MR table's slot of a key (mr.c's head comment says why the low
 * bits); the key table a peer reads is indexed the same way (rmem.h). */
static inline uint32_t sv_mr_slot(uint32_t key)
{
	return key & (SV_MAX_MR - 1);
}

/*
 * A memory window (verbs/mw.c; its data path core/mw.c).  Its keys have
 * bit 31 set (SV_KEY_MW), MRs' never, so a key names one table; bits
 * 8..19 name its slot, the low 8 bits are the consumer's (ibv_inc_rkey)
 * and bits 20..30 are random.  A window reaches [va, va+len) of the MR
 * whose key it holds, with the window's access, while that MR lives in
 * its PD; the binding is read under a seqlock (seq odd: being written)
 * and written under ctx->mw_lock.
 */
#define SV_KEY_MW 0x80000000u

struct sv_mw {
	struct ibv_mw ibv;	 /* ibv.rkey: the last key bound, as the
				  * program sees it */
	struct sv_pd *pd;	 /* NULL while free */
	uint32_t base;		 /* the key's bits that never change */
	struct sv_mw *next_free; /* on ctx->mw_free */
	_Atomic uint32_t seq;	 /* seqlock over the binding below */
	uint32_t key;		 /* the key that reaches it; 0: invalid */
	uint32_t mr_key;	 /* the MR it is bound to */
	uint32_t access;	 /* IBV_ACCESS_REMOTE_* it allows */
	uint32_t qpn;		 /* type 2: the QP it is bound to */
	uint64_t va, len;	 /* the range, in the MR's iovas */
};

static inline uint32_t sv_mw_slot(uint32_t key)
{
	return (key >> 8) & (SV_MAX_MW - 1);
}

/* Completion with the extras the extended CQ API can read. */
struct sv_cqe {
	struct ibv_wc wc;
	uint64_t ts; /* completion time, ns (CLOCK_MONOTONIC) */
};

struct sv_cq {
	struct ibv_cq_ex ex; /* starts with struct ibv_cq */
	struct sv_context *ctx;
	struct sv_lock lock; /* the queue and arm state */
	struct sv_cqe *q;
	uint32_t size;	       /* slots, a power of two */
	_Atomic uint32_t head; /* next to fill (free-running) */
	_Atomic uint32_t tail; /* next to poll (free-running) */
	_Atomic int armed;     /* 0, or 1 + solicited_only */
	bool overrun;	       /* IBV_EVENT_CQ_ERR has been raised */
	uint64_t wc_flags;     /* ibv_cq_init_attr_ex.wc_flags */
	/* QPs completing here: slots changed in place under ctx->qp_lock,
	 * read by pollers with no lock; replaced only to grow (cq.c) */
	struct sv_qp_set *_Atomic qps;
	struct sv_qp_set *retired;   /* outgrown sets, freed with the CQ */
	_Atomic uint32_t drive_from; /* the set's slot a poll runs first */
	/* its drives by polls (a hint: racing pollers may lose one), beside
	 * drive_from, which each poll writes too: no line more on a poll;
	 * the progress thread's park check reads it (engine/drive.c) */
	_Atomic uint64_t polls;
	uint32_t events_queued; /* queued on the channel, not yet got */
	uint32_t events_got;	/* handed to the app by get_cq_event */
	struct sv_list ev_node; /* on channel->evq.events when queued */
	/* on its channel's cqs (a channel of its own context), whose
	 * waiter's spin runs the QPs of these CQs only (verbs/channel.c) */
	struct sv_list ch_node;
	bool on_channel;
	struct sv_cqe cur;     /* the extended API's current completion */
	uint32_t async_got;    /* async events handed out for this CQ */
	_Atomic uint32_t srqs; /* XRC SRQs completing here: EBUSY */
	struct ibv_pd *pdom;   /* its parent domain, or NULL */
	bool q_custom;	       /* q is from pdom's allocator */
	/* the readiness set (transport/link.h) of the connections of its
	 * QPs' links that may idle (TCP; links_idle: one reached RTR): made
	 * by the first poll of two QPs or more, which asks it which have
	 * bytes waiting and skips the idle rest (engine/drive.c); -1 before,
	 * -2 if it could not be made (every poll runs those links) */
	_Atomic int ready_set;
	atomic_bool links_idle;
	struct sv_list ready_node; /* on ctx->ready_cqs while it has one */
	/* the progress thread's park check: the polls it saw last, and
	 * the CQ's place on ctx->park_cqs (under park_lock) */
	uint64_t park_seen;
	bool park_listed;
	struct sv_list park_node;
	/* slots of the set attach and detach read or wrote (under
	 * ctx->qp_lock for writing): their cost, which a test holds flat
	 * in the number of QPs (conf_device.c) */
	uint64_t set_visits;
};

static inline struct sv_cq *to_scq(struct ibv_cq *cq)
{
	return container_of((struct ibv_cq_ex *)cq, struct sv_cq, ex);
}

#define SV_NO_SLOT UINT32_MAX /* sv_qp.cq_slot: in no set */

/* A CQ's QPs.  Written under ctx->qp_lock; pollers read n, then slots. */
struct sv_qp_set {
	struct sv_qp_set *next_retired; /* on cq->retired once outgrown */
	uint32_t cap;			/* slots in qp[] */
	_Atomic uint32_t n;		/* slots in use: qp[0, n) */
	struct sv_qp *_Atomic qp[];	/* never NULL below n */
};

struct sv_channel {
	struct ibv_comp_channel ibv;
	struct sv_evq evq;
	/* its CQs (struct sv_cq.ch_node), under the context's qp_lock: a
	 * waiter spins on their QPs, not on every QP of the context */
	struct sv_list cqs;
	_Atomic uint32_t fl_seen; /* what fcntl said of O_NONBLOCK, and
				   * when (verbs/channel.c nonblocking) */
};

static inline struct sv_channel *to_schannel(struct ibv_comp_channel *ch)
{
	return container_of(ch, struct sv_channel, ibv);
}

/* Send queue entry.  Inline data is copied at post time; SGEs are read
 * when the requester packetizes (the app may not touch them until the
 * completion, IBA 10.8.3). */
struct sv_swqe {
	uint64_t wr_id;
	uint32_t opcode; /* enum ibv_wr_opcode */
	uint32_t flags;	 /* enum ibv_send_flags */
	uint32_t imm;	 /* network order */
	uint32_t num_sge;
	uint32_t length;    /* message bytes */
	uint32_t first_psn; /* assigned when the first train is sent */
	uint32_t last_psn;
	uint32_t sent;	  /* bytes already put on the link */
	uint32_t sge_idx; /* gather cursor */
	uint32_t sge_off;
	uint32_t got;	       /* read: response bytes placed */
	uint32_t tries;	       /* times rewound for retransmission */
	uint32_t rd_base;      /* read: the byte its request asks from (a
				* rewound read asks for the rest, req.c) */
	uint64_t due_ns;       /* SOFTVERBS_FAULTS delay_us: not sent
				* before then (0: at once) */
	uint8_t op;	       /* enum sv_opcode on the wire */
	bool inl;	       /* data lives in the inline buffer */
	bool mapped;	       /* SGE addrs turned from iovas into pointers */
	bool done;	       /* executed: no ACK awaited (direct, or the
				* read/atomic response has arrived) */
	bool direct;	       /* executed by us in the target's memory */
	bool imm_valid;	       /* imm is sent (SEND/WRITE with immediate) */
	bool placed;	       /* a send already in the peer's receive buffer:
				* only its header travels */
	bool local;	       /* BIND_MW, LOCAL_INV: executed by the
				* requester in order, nothing travels (op 0) */
	bool inv;	       /* SEND_WITH_INV: imm is the rkey the peer
				* invalidates (SV_PKT_INV) */
	uint8_t status;	       /* enum ibv_wc_status found by the requester */
	uint64_t raddr;	       /* write/read/atomic: the target's iova */
	uint32_t rkey;	       /* write/read/atomic: the target's key */
	uint64_t swap_add;     /* atomic: swap value or addend */
	uint64_t compare;      /* compare-and-swap: the compare value */
	uint32_t ud_qpn;       /* UD: the destination QP (wr.ud.remote_qpn) */
	uint32_t ud_qkey;      /* UD: wr.ud.remote_qkey */
	bool ud_addr;	       /* UD: destination set (AH, QPN, qkey) */
	bool ud_grh;	       /* UD: the AH is global: a GRH travels */
	uint64_t ud_first_ns;  /* UD: first try; the kernel's queue was full */
	uint32_t ud_mc_next;   /* UD multicast: members below this QPN done */
	uint32_t ud_ip;	       /* UD: the AH's host over UDP (network order),
				* 0: this host's QPs directly */
	bool ud_ip6;	       /* UD: that host is the IPv6 address ud_dgid
				* (ud_ip INADDR_NONE: not this host) */
	uint32_t xrc_srqn;     /* XRC_SEND: the remote SRQ (XRCETH) */
	struct sv_mw *mw;      /* BIND_MW: the window (rkey: its new key,
				* raddr, swap_add: the range) */
	uint32_t mw_mr_key;    /* BIND_MW: the MR's key, 0: unbind */
	uint32_t mw_access;    /* BIND_MW: the window's access */
	union ibv_gid ud_sgid; /* UD, with a GRH: our GID (sgid_index) */
	union ibv_gid ud_dgid; /* UD, with a GRH: the AH's dgid */
};

/* An address handle (ah.c): where a UD send goes.  Checked at creation
 * (port 1, a LID or GID of this host); immutable after. */
struct sv_ah {
	struct ibv_ah ibv;
	struct ibv_ah_attr attr;
	union ibv_gid sgid; /* is_global: our GID at grh.sgid_index */
	uint32_t ud_ip;	    /* another host's address (network order): UD
			     * sends go there over UDP (ud.c); 0: this host */
	bool ud_ip6;	    /* that host is the IPv6 address attr's dgid
			     * (ud_ip INADDR_NONE) */
};

static inline struct sv_ah *to_sah(struct ibv_ah *ah)
{
	return container_of(ah, struct sv_ah, ibv);
}

struct sv_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t length; /* room, bytes */
	/* its MR changed (rereg, dereg) after the peer claimed it for a
	 * placed send (post.c sv_rq_withdraw): the bytes may have gone to
	 * the memory the MR left, so a placed send into it fails */
	bool stale;
	/* shown to the peer as pieces of our shared memory (post.c
	 * describe, until withdrawn): a placed send into any other receive
	 * is a peer's lie, and fails as into a stale one */
	bool placeable;
};

/*
 * A shared receive queue (srq.c): receive WQEs any QP of the context
 * attached to it takes, one whole WQE per message.  The responder copies
 * the WQE it takes into its QP's RQ (so the SRQ slot is free at once and
 * a resize may move the queue), or finds it there, lent ahead of time for
 * single copy (srq.c lend); the QPs attached hold a reference
 * (users), so the SRQ outlives every responder that can reach it.
 */
struct sv_srq {
	struct ibv_srq ibv;
	struct sv_context *ctx;
	struct sv_lock lock;	/* the queue, limit; inside qp->lock */
	struct sv_rwqe *q;	/* size slots */
	struct ibv_sge *sge;	/* max_sge per slot */
	uint8_t buf_custom;	/* q (bit 0), sge (1): from the parent
				 * domain's allocator (verbs/domain.c) */
	uint32_t size;		/* slots, a power of two */
	uint32_t max;		/* max_wr: at most this many posted */
	uint32_t max_sge;	/* SGEs per WQE, fixed at creation */
	uint32_t post;		/* next slot to fill (free-running) */
	uint32_t comp;		/* next slot a responder takes */
	uint32_t limit;		/* armed srq_limit, 0: disarmed */
	_Atomic uint32_t users; /* QPs attached: destroy is EBUSY */
	_Atomic bool rnr;	/* a responder NAKed RNR for lack of WQEs */
	/* single copy (srq.c: lending): WQEs moved ahead of time into QPs'
	 * RQs, shown to their peers, and the QPs holding any (srq_node) */
	uint32_t lent;
	struct sv_list lenders;
	uint32_t async_got; /* async events handed out (ctx->async lock) */
	/* XRC SRQs (xrc.c) only */
	struct sv_xrcd *xrcd;	 /* its XRC domain; NULL: a basic SRQ */
	struct sv_cq *cq;	 /* where its receives complete */
	uint32_t srqn;		 /* ibv_get_srq_num: its socket's name */
	int sock;		 /* forwarded sends arrive here, or -1 */
	struct sv_pfd pfd;	 /* sock in the progress thread */
	struct sv_list ctx_node; /* on ctx->xsrqs */
	uint8_t *fwd_buf;	 /* one forwarded message, as received */
};

/*
 * An XRC domain (xrc.c): a name shared by the processes that open the same
 * file (its device and inode), or private to the context (fd -1).  XRC
 * SRQs and XRC_RECV QPs belong to one; while any does, it cannot close.
 */
struct sv_xrcd {
	struct ibv_xrcd ibv;
	char id[40];		/* the domain's name: "f<dev>-<ino>" or
				 * "p<pid>-<n>" (private) */
	int lock_fd;		/* our own open of the file: holds the OFD
				 * lock that says the domain exists; -1 */
	_Atomic uint32_t users; /* SRQs and QPs in it: close is EBUSY */
};

static inline struct sv_xrcd *to_sxrcd(struct ibv_xrcd *x)
{
	return container_of(x, struct sv_xrcd, ibv);
}

static inline struct sv_srq *to_ssrq(struct ibv_srq *srq)
{
	return container_of(srq, struct sv_srq, ibv);
}

/* SOFTVERBS_FAULTS' counts (inject.c's callers): sv_stat_add by one. */
#define SV_STAT_INC(qp, f) sv_stat_add(qp, f, 1)

/* Atomics the responder answered, by PSN: a duplicate is answered from
 * here, never executed twice (IBA 9.4.6); as many as a requester may
 * have in flight (max_dest_rd_atomic, at most SV_MAX_RD_ATOM) */
#define SV_ATOMIC_REPLAY SV_MAX_RD_ATOM

/*
 * A QP's counters (stat.c exposes them to softverbs-stat).  Packets are
 * the IBA's (one per path MTU, ACKs included), bytes are payload bytes.
 * The thread running the QP's engine (under qp->lock) adds with
 * sv_stat_add: a relaxed load and store, no locked instruction; readers
 * (stat.c's snapshot) load relaxed.  Every field is a uint64_t: stat.c
 * copies the struct as an array (SV_STAT_N).
 */
struct sv_qp_stats {
	uint64_t tx_pkts, tx_bytes; /* requests, responses, ACKs sent */
	uint64_t rx_pkts, rx_bytes; /* ... received */
	uint64_t retrans_pkts;	    /* packets sent again */
	uint64_t ack_timeouts;	    /* local ACK timer expiries */
	uint64_t read_gaps;	    /* reads asked again at a lost response */
	uint64_t seq_nak_sent, seq_nak_recv; /* PSN sequence error NAKs */
	uint64_t rnr_nak_sent, rnr_nak_recv; /* receiver not ready NAKs */
	uint64_t fault_drops;	 /* SOFTVERBS_FAULTS: packets lost */
	uint64_t fault_reorders; /* ... RoCE datagrams taken after the next */
	uint64_t fault_reorders_out; /* ... sent after the next */
	uint64_t fault_rnr;	     /* ... RNR NAKs made up */
	uint64_t fault_access;	     /* ... access errors made up */
	uint64_t direct_ops;	     /* one-sided ops done in the peer's
				      * memory (req.c try_direct) */
	uint64_t placed_sends;	     /* sends placed in the peer's receive
				      * buffer (req.c try_place) */
	uint64_t cold_sends;	     /* placeable sends sent through the ring:
				      * a cold buffer, an idle receiver */
	uint64_t warmed_recvs;	     /* receive buffers read ahead while idle
				      * (resp.c warm_next) */
	uint64_t ud_drops;	     /* UD datagrams dropped on arrival */
	uint64_t err_wc;	     /* completions with an error status */
	uint64_t tcp_sends;	     /* sendmsg calls on its TCP link (tcp.c) */
	uint64_t tcp_reads;	     /* ... recv calls */
	uint64_t tcp_records;	/* records (packet trains) it put on its TCP
				 * link, resends included (tcp.c) */
	uint64_t tcp_slow_acks; /* ACK timeouts while the peer's host took
				 * what we sent (no retransmission):
				 * kept the connection */
	/* calls held back: the context had CALLS_MAX at the doors
	 * (transport/tcp/door.c: a call waits for a place) */
	uint64_t tcp_calls_paced;
	/* UD datagrams (in ud_drops) from another host without a MAC
	 * that checks, or with one we cannot check (no secret: ud.c) */
	uint64_t ud_auth_drops;
	/* ... with a MAC that checks, but replayed or too old */
	uint64_t ud_replay_drops;
	/* its RoCEv2 link (transport/roce/): datagrams dropped on
	 * arrival, by the codec's reason
	 * (wire/roce.h enum sv_roce_verdict; roce_drop_qpn: not for this
	 * QP or not from its peer; roce_drop_full: no room in our ring,
	 * resent by the peer); roce_reacks: duplicates acknowledged again;
	 * roce_stale_acks: ACKs and NAKs that came after a newer one,
	 * ignored (in.c take_aeth);
	 * roce_icrc_id: ICRCs verified with an IPv4 ID other than 0, solved
	 * from the ICRC (a GSO run's later segments; every packet of rxe,
	 * whose IDs are its kernel's: wire/roce.h) */
	uint64_t roce_drop_short, roce_drop_tver, roce_drop_opcode;
	uint64_t roce_drop_trunc, roce_drop_pad, roce_drop_len;
	uint64_t roce_drop_icrc, roce_drop_qpt, roce_drop_seg;
	uint64_t roce_drop_qpn, roce_drop_full;
	/* the UD listener (ud/door.c, the context's): datagrams it held for
	 * a QP socket that was full */
	uint64_t ud_door_holds;
	uint64_t roce_reacks, roce_stale_acks, roce_icrc_id;
	/* datagrams read on our socket for another link of this process
	 * that shares it (two QP pairs, one UDP source port:
	 * transport/roce/share.c), passed to that link, or relayed to a
	 * link of another process on the four-tuple */
	uint64_t roce_passed;
	/* ACK and NAK packets our RoCEv2 responder sent (duplicates'
	 * again included), and of them the ACKs that waited for the app's
	 * reply and left in its system call (roce/out.c ack_waits); UDP
	 * GSO messages sent (runs of 2 datagrams or more), UDP GRO bundles
	 * read (2 or more) */
	uint64_t roce_acks, roce_acks_joined, roce_gso_sends, roce_gro_reads;
	/* UD over RoCEv2 (ud/roce.c): sends longer than the path MTU,
	 * completed with no packet (IBA C10-93.1.1, as rxe) */
	uint64_t roce_ud_too_long;
	/* UC packets its responder dropped out of sequence: a PSN gap
	 * (a lost packet) ends the message in progress, and the packets
	 * up to the next FIRST or ONLY go too (IBA 9.8.3, resp.c) */
	uint64_t uc_seq_drops;
	/* the progress thread's looks at it (engine/drive.c): flat in the
	 * number of other QPs (tests/scale/idle.c) */
	uint64_t progress_looks;
	/* of those, looks at it parked on a CQ the app stopped polling
	 * (engine/drive.c park_check) */
	uint64_t progress_swept;
	/* the app's polls and posts that ran its engine (engine/drive.c
	 * sv_qp_drive): an idle QP's stays flat however often its CQ is
	 * polled (tests/scale/idle.c) */
	uint64_t poll_runs;
	/* completions with an error, by status (index the enum
	 * ibv_wc_status less one: success is not counted; the last slot for
	 * any status beyond it) */
	uint64_t wc_err[IBV_WC_TM_RNDV_INCOMPLETE + 1];
};
#define SV_STAT_N (sizeof(struct sv_qp_stats) / sizeof(uint64_t))

/* Adds n to a counter of the table st (struct sv_qp_stats *): its one
 * writer at a time (the QP's engine, or whoever holds what feeds it),
 * readers anywhere (softverbs-stat): no locked instruction. */
#define sv_stats_add(st, field, n)                                         \
	__atomic_store_n(&(st)->field,                                     \
			 __atomic_load_n(&(st)->field, __ATOMIC_RELAXED) + \
				 (n),                                      \
			 __ATOMIC_RELAXED)
/* Adds n to a counter of qp: the caller runs the QP's engine. */
#define sv_stat_add(qp, field, n) sv_stats_add(&(qp)->stats, field, n)

/* Counts a completion's status if it is an error. */
#define sv_stat_wc(qp, st)                                           \
	do {                                                         \
		unsigned int st_ = (unsigned int)(st);               \
		if (st_ != IBV_WC_SUCCESS) {                         \
			if (st_ > IBV_WC_TM_RNDV_INCOMPLETE)         \
				st_ = IBV_WC_TM_RNDV_INCOMPLETE + 1; \
			sv_stat_add(qp, err_wc, 1);                  \
			sv_stat_add(qp, wc_err[st_ - 1], 1);         \
		}                                                    \
	} while (0)

/* SOFTVERBS_PCAP (pcap.c): the addresses a QP's packets show, fixed at
 * RTR (qp.c) while a capture is on. */
struct sv_pcap_addr {
	uint8_t src[16], dst[16]; /* IPv4-mapped or IPv6: ours, the peer's */
	uint16_t sport;		  /* UDP source port: RoCE's entropy */
};

/* The send queue: WQE slots the app fills (post.c) and the requester
 * puts on the link (req.c); [comp, post) are the WQEs not completed. */
struct sv_qp_sq {
	struct sv_swqe *wqe;
	struct ibv_sge *sge; /* max_send_sge per slot */
	uint8_t *inline_buf; /* max_inline per slot */
	uint32_t size;	     /* slots, a power of two */
	uint32_t max;	     /* max_send_wr the app asked for */
	uint32_t post;	     /* next slot to fill */
	uint32_t send;	     /* next WQE to put on the link */
	uint32_t comp;	     /* oldest WQE not completed */
	bool stopped;	     /* a WQE failed: send nothing more */
	bool sig_all;
};

/* The requester (req.c): PSNs and what is in flight, and what it knows
 * of the peer's memory and receive queue for single copy. */
struct sv_qp_req {
	uint32_t psn;		/* requester's next PSN */
	uint32_t rd_out;	/* reads/atomics sent, not yet answered */
	uint32_t ring_rdma;	/* one-sided WQEs on the ring, not done: a
				 * direct one must not pass them */
	struct sv_rpeer *rpeer; /* the peer context's memory, if shared */
	uint32_t peer_pd;	/* the peer QP's PD id (its key table) */
	uint32_t recv_msgs;	/* messages sent that consume a receive:
				 * the next one takes the peer's receive
				 * number recv_msgs (single copy) */
	uint64_t warm_off[SV_WARM_BUFS]; /* arena offsets + 1 of the peer's
					  * last receive buffers (req.c) */
	uint32_t warm_next;		 /* next warm_off slot to write */
};

/* The receive queue (post.c fills it, the responder takes from it);
 * unused on an SRQ but for [comp, held, post): see struct sv_qp. */
struct sv_qp_rq {
	struct sv_rwqe *wqe;
	struct ibv_sge *sge;
	uint32_t size, max;
	uint32_t post, comp;
	uint32_t held; /* on an SRQ: see above */
};

/* The responder (resp.c): the message in progress, the next receive
 * read ahead, and (IBA 9.7.5) its sequence-error state and atomic
 * replay cache. */
struct sv_qp_resp {
	uint32_t psn; /* next PSN we expect */
	uint32_t off; /* bytes placed in the current rwqe */
	uint32_t msg; /* length of the message in progress */
	/* the next receive's buffer, read ahead while idle (resp.c
	 * warm_next): for WQE number warm_wqe - 1, warm_len bytes at
	 * warm_buf, warm_done of them so far */
	const uint8_t *warm_buf;
	uint32_t warm_wqe, warm_len, warm_done;
	bool placed; /* the last send was placed by the sender: it
		      * writes the next one too, no read ahead */
	uint32_t sge_idx, sge_off;
	bool rnr;	   /* head packet NAKed for RNR */
	bool in_msg;	   /* between FIRST and LAST */
	bool drop;	   /* dropping an aborted message */
	uint32_t nak_seq;  /* NAKs sent (in the ack word) */
	uint8_t *wr_ptr;   /* write in progress: next byte goes here */
	uint32_t rd_sent;  /* read in progress: bytes answered */
	bool write;	   /* the message in progress is a write */
	bool seq_naked;	   /* NAK-seq sent for psn */
	uint32_t nak_from; /* ... on seeing this PSN: a packet at or
			    * before it may start a new round */
	bool seq_suspect;  /* ... one did: the next out of sequence
			    * confirms it (NAKed again), one in sequence
			    * shows it was a reordering */
	bool seq_dropped;  /* packets after a gap discarded, to nak_from
			    * (resp_ack.c refill_nak) */
	bool seq_nak_new;  /* ... and NAKed in this run: not sent yet */
	struct {
		uint32_t psn;
		bool valid;
		uint64_t orig;
	} atom_replay[SV_ATOMIC_REPLAY];
	uint32_t atom_next;
};

/* The completer (comp.c): acks, the ack/RNR timer and its retries. */
struct sv_qp_comp {
	uint64_t ack;	      /* last ack word processed */
	uint64_t deadline;    /* ns: ack or RNR timer */
	uint32_t retries;     /* ack timeouts so far */
	uint32_t rnr_retries; /* RNR NAKs so far */
	bool rnr_wait;	      /* waiting out an RNR timer */
	bool acked_valid;     /* acked holds an ACKed PSN */
	uint32_t acked;	      /* newest PSN the peer acknowledged */
	uint32_t spins;	      /* idle completer runs (clock reads) */
	/* the read response gap last asked again for (comp.c read_gap) */
	bool gap_valid;
	uint32_t gap_psn, gap_tries;
};

/* SOFTVERBS_FAULTS (faults.h): the faults injected into this QP so far
 * and what they hold back. */
struct sv_qp_inject {
	/* SOFTVERBS_FAULTS (inject.h) */
	uint32_t idx; /* creation index in the process */
	uint32_t try; /* responder: drops of the train at
		       * try_psn so far (the attempt) */
	uint32_t try_psn;
	uint32_t rnr_try;     /* responder: RNR attempts of the head */
	uint64_t rnr_until;   /* ... refusing it until then (ns) */
	uint64_t delay_until; /* requester: delay_us holds the next
			       * WQE until then (ns), or 0 */
	bool ack_pending;     /* completer: delay_us holds this ack */
	uint64_t ack_val;     /* ... word */
	uint64_t ack_due;     /* ... until then (ns) */
	uint64_t drop_hash;   /* a digest of the (psn, attempt) dropped
			       * (tests: same seed, same faults) */
	/* completer: the read/atomic responses delay_us holds (comp.c) */
	struct sv_fault_rsp *rsp;      /* oldest first */
	struct sv_fault_rsp **rsp_end; /* where the next goes */
	uint64_t rsp_bytes;	       /* their records' bytes */
	uint64_t rsp_due;	       /* the oldest's due (ns), or 0 */
};

/* UD (ud.c, lane.c, mcast.c): the datagram socket is link.listen_fd. */
struct sv_qp_ud {
	uint64_t drops; /* datagrams dropped on arrival (debugging) */
	/* with a secret: the senders from other hosts whose seqs this QP
	 * has seen (ud.c), made at the first datagram whose MAC checks;
	 * under qp->lock */
	struct sv_ud_replay *replay;
	uint64_t tx_id;	 /* our id as a sender (random, 0: none yet) */
	uint64_t tx_seq; /* ... and the last seq we sent */
	/* multicast groups attached (mcast.c): changed under
	 * ctx->mcast_lock and qp->lock, read under either */
	struct sv_mcast *mcast;
	bool mcast_block_self; /* IBV_QP_CREATE_BLOCK_SELF_MCAST_LB */
	/* UD lanes (lane.c) this QP takes datagrams from, under qp->lock */
	struct sv_lane_rx *lanes; /* SV_LANES_PER_QP of them, or NULL */
	uint32_t nlanes;
	bool lane_sleep; /* the progress thread sleeps for the QP: the
			  * lanes' rx_sleep flags are up */
	/* counters, read by tests without the lock: lanes accepted, and
	 * datagrams taken from lanes / sent into lanes */
	_Atomic uint32_t lanes_accepted;
	_Atomic uint64_t lane_rx, lane_tx;
	_Atomic uint64_t lost; /* sends lost: no room at the destination
				* (socket queue or lane) in time */
	uint32_t stalled;      /* a QPN whose full queue outlasted a wait:
				* sends to it are lost at once until one goes
				* (ud.c wait_room); 0: none */
	/* UD over RoCEv2 (ud/roce.c), set at create: datagrams to other
	 * hosts are RoCEv2 packets, and RoCEv2 ones are taken */
	bool roce;
	uint32_t roce_mtu; /* the port's active MTU: longer sends go
			    * nowhere (IBA C10-93.1.1) */
	uint32_t roce_psn; /* the next BTH PSN, under qp->lock */
	int roce_fd;	   /* the socket they leave from, at the first
			    * (-1: none yet) */
};

/* XRC (xrc.c).  XRC_RECV: the QP's srq/rcq are the SRQ of the message
 * in progress and its CQ, while it is in progress (bound). */
struct sv_qp_xrc {
	struct sv_xrcd *xrcd; /* XRC_RECV: its domain */
	uint32_t srqn;	      /* the message in progress names this SRQ */
	bool fwd;	      /* ... of another context: forwarded */
	uint8_t *buf;	      /* a forwarded message being assembled */
	uint32_t cap;	      /* bytes buf holds */
	uint64_t retry_ns;    /* a full SRQ socket: retry then */
	int sock;	      /* our socket for forwarding, or -1 */
	uint32_t opens;	      /* handles: creator + ibv_open_qp's */
	struct sv_list node;  /* on the process's XRC_RECV list */
};

/* SOFTVERBS_PCAP (pcap.c), while sv_pcap_on: addresses, and how far
 * the PSNs shown run ahead of the engine's (one-sided ops done in
 * the peer's memory take PSNs only in our capture). */
struct sv_qp_pcap {
	struct sv_pcap_addr addr;
	uint32_t psn_off;
	uint32_t rx_next; /* responder: next request PSN to show */
	bool rx_valid;
	uint32_t msn; /* messages shown as done (the AETH's MSN) */
};

/* The progress thread's view of app-thread driving (engine/drive.c).
 * Kept when a reused QP is zeroed (qp.c): the group stays last. */
struct sv_qp_prog {
	_Atomic uint64_t drives; /* app-thread engine runs (a hint) */
	uint64_t seen_drives;	 /* progress thread: drives last look */
	uint64_t active_ns;	 /* progress thread: drives last moved */
	uint64_t seen_polls;	 /* progress thread: rcq's polls last look */
	bool parked;		 /* progress thread: left to rcq's polls */
	/* written under qp->lock: the ibv_get_cq_event spin that took its
	 * sleep flags down (drive.c sv_qp_spin_begin), or 0 */
	_Atomic uint64_t quiet_token;
};

struct sv_qp {
	struct ibv_qp_ex qpx; /* starts with struct ibv_qp */
	struct sv_context *ctx;
	struct sv_lock lock; /* everything below but the lists */
	struct sv_list ctx_node;
	struct sv_cq *scq, *rcq;
	/* its slots in scq's and rcq's QP sets, or SV_NO_SLOT (cq.c; under
	 * ctx->qp_lock for writing): one only if scq is rcq */
	uint32_t cq_slot[2];
	uint32_t max_inline;
	uint32_t max_send_sge, max_recv_sge;
	uint32_t ex_start;  /* sq.post at ibv_wr_start */
	int ex_err;	    /* first error since ibv_wr_start */
	bool dead;	    /* destroyed: on ctx->qp_free */
	bool destroying;    /* in ibv_destroy_qp: flushes make no CQEs */
	uint8_t buf_custom; /* queue buffers from the parent domain's
			     * allocator, a bit each (verbs/qp.c) */

	/* attributes (modify_qp / query_qp) */
	struct ibv_qp_attr attr; /* what the app set, for query */
	uint32_t mtu;		 /* path MTU in bytes */

	struct sv_qp_sq sq;	/* send queue */
	struct sv_qp_req req;	/* requester */
	struct sv_qp_comp comp; /* completer */

	/* receive queue; on an SRQ: [rq.comp, rq.held) the WQE the
	 * responder took, [rq.held, rq.post) WQEs the SRQ lent it for single
	 * copy (srq.c), both under srq->lock */
	struct sv_srq *srq;	 /* NULL: the QP has its own RQ */
	struct sv_qp_rq rq;	 /* receive queue */
	struct sv_list srq_node; /* on srq->lenders while it holds lent WQEs */

	struct sv_qp_resp resp; /* responder */

	struct sv_qp_inject inject; /* fault injection */

	struct sv_qp_ud ud; /* UD */

	struct sv_qp_xrc xrc; /* XRC */

	struct sv_qp_stats stats; /* counters (sv_stat_add; stat.c) */
	struct sv_qp_pcap pcap;	  /* capture */
	struct sv_link link;	  /* the connection, once there is one */
	struct sv_pfd pfd[3];	  /* listener, conn (our doorbell), acc */
	struct sv_pfd pend_pfd[SV_LINK_PENDING]; /* link.pend_fd's */
	struct sv_qp *next_free; /* on ctx->qp_free once destroyed */
	uint32_t async_got;	 /* async events handed out */
	/* on ctx->qps (set and cleared under ctx->qp_lock for writing, so
	 * a reader of that lock sees the list's truth in O(1); kept, like
	 * drives, when a reused QP is zeroed) */
	atomic_bool listed;
	/* the progress thread's (engine/drive.c), also kept when a reused QP is
	 * zeroed: its timer may still be in the loop's heap, the QP on the
	 * thread's visit list */
	struct sv_timer timer; /* its one next deadline (evloop.h) */
	struct sv_async visit; /* a look asked for (sv_qp_visit) */
	/* when the thread looks at it again by itself (ns: its timer; 1: a
	 * visit is queued; 0: never): new work due sooner asks for a look
	 * (sv_qp_note_work) */
	_Atomic uint64_t look_at;
	/* a poll found its link's connection readable in its CQ's
	 * readiness set: the next poll that reaches it runs it
	 * (engine/drive.c; kept too when a reused QP is zeroed: a late
	 * poller may mark it, and a stale mark costs one run) */
	atomic_bool readable;
	struct sv_qp_prog prog; /* progress thread */
};

static inline struct sv_qp *to_sqp(struct ibv_qp *qp)
{
	return container_of((struct ibv_qp_ex *)qp, struct sv_qp, qpx);
}

/* A send WQE's SGEs: qp->sq.sge holds max_send_sge of them per WQE slot.
 * Data, not a step of the engine: the capture (a service) reads them too. */
static inline struct ibv_sge *sv_swqe_sge(struct sv_qp *qp,
					  const struct sv_swqe *w)
{
	return &qp->sq.sge[(size_t)(w - qp->sq.wqe) * qp->max_send_sge];
}

#endif
