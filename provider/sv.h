/* SPDX-License-Identifier: MIT */
/*
 * The provider's objects and what crosses files.  Each verbs object wraps
 * the libibverbs structure the application sees (first member, or the
 * context inside verbs_context) and adds our state.  Locks, from outer to
 * inner: ctx->qp_lock (rwlock: QP list / CQ membership) -> qp->lock ->
 * ctx->xsrq_lock (XRC SRQ list) -> srq->lock -> cq->lock ->
 * channel/event-queue locks.  A responder holds
 * its qp->lock when it takes a WQE from the QP's SRQ; post_srq_recv takes
 * srq->lock alone, and wakes QPs waiting in RNR only after releasing it.
 */
#ifndef SV_H
#define SV_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>

#include "core.h"
#include "entry.h"
#include "env.h"
#include "inject.h"
#include "link.h"
#include "evloop.h"
#include "util.h"

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
#define SV_MAX_SRQ     (1 << 14)    /* srq.c enforces the SRQ limits */
#define SV_MAX_SRQ_WR  16384
#define SV_MAX_AH      (1 << 16) /* ah.c enforces it (ENOMEM) */
#define SV_MAX_SRQ_SGE 32
#define SV_MAX_RD_ATOM 16 /* reads/atomics in flight per QP */
#define SV_GID_TBL_LEN 16
#define SV_WARM_BUFS   8 /* receive buffers a sender keeps as warm (req.c) */
/* Multicast (mcast.c): groups and attachments per context, members of a
 * group on the host (its registry directory) */
#define SV_MAX_MCAST_GRP	     256
#define SV_MAX_MCAST_QP_ATTACH	     56 /* rxe's */
#define SV_MAX_TOTAL_MCAST_QP_ATTACH 1024
#define SV_MCAST_QPN		     0xffffffu /* the DQPN of multicast (IB_MULTICAST_QPN) */

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
struct sv_mcast;
struct sv_mcast_grp;
struct sv_ud_door;
struct sv_lanes_tx;
struct sv_lane_rx;
struct sv_ud_replay;
struct sv_ud_hdr;

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
	atomic_bool rung; /* a link doorbell fired: drain under qp->lock */
	atomic_bool hup;  /* its events said the peer hung up: a reader
			   * reads on to the EOF (no edge after it) */
	bool quiet;	  /* EPOLLIN off (sv_progress_quiet) */
	bool out;	  /* EPOLLOUT on (sv_progress_want_out) */
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

/* An event queue behind a real fd (eventfd in semaphore mode): one count
 * per queued event, so poll()/epoll on the fd works as on hardware. */
struct sv_evq {
	pthread_mutex_t lock;
	int fd;
	struct sv_list events; /* struct sv_async_ev, or CQs for channels */
};

struct sv_context {
	struct verbs_context vctx; /* ->context is what apps hold */
	pthread_rwlock_t qp_lock;  /* qps list and cq->qps membership */
	struct sv_list qps;	   /* struct sv_qp.ctx_node */
	pthread_mutex_t xsrq_lock; /* xsrqs; inside qp->lock, outside
				    * srq->lock */
	struct sv_list xsrqs;	   /* XRC SRQs (struct sv_srq.ctx_node) */
	pthread_mutex_t mr_lock;   /* MR table allocation */
	struct sv_mr **mrs;	   /* slot = sv_mr_slot(key); never moves */
	uint32_t nmrs;		   /* slots taken (live or being set up) */
	uint32_t mr_cap;
	struct sv_mr *mr_free;	  /* type-stable: MRs are reused */
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
	/* UD lanes this context sends on (lane.c), one per destination QP;
	 * its QPs' sends serialise on lane_lock (inside qp->lock) */
	pthread_mutex_t lane_lock;
	struct sv_lanes_tx *lanes;
	struct sv_stat *stat; /* counters' memfd (stat.c), or NULL */
};

static inline struct sv_context *to_sctx(struct ibv_context *c)
{
	return container_of(c, struct sv_context, vctx.context);
}

/* What each kind of object may count to (device.c; SV_MAX_*). */
extern const uint32_t sv_obj_max[SV_OBJ_NUM];

/* Counts one more object of kind k in the context: 0, or -EINVAL when
 * the device's max_* of that kind are already live (rxe's pool limit). */
static inline int sv_obj_get(struct sv_context *ctx, enum sv_obj k)
{
	if (atomic_fetch_add_explicit(&ctx->nobj[k], 1, memory_order_relaxed) >=
	    sv_obj_max[k]) {
		atomic_fetch_sub_explicit(&ctx->nobj[k], 1,
					  memory_order_relaxed);
		return -EINVAL;
	}
	return 0;
}

static inline void sv_obj_put(struct sv_context *ctx, enum sv_obj k)
{
	atomic_fetch_sub_explicit(&ctx->nobj[k], 1, memory_order_relaxed);
}

/* A PD cannot go while anything created on it lives (the kernel's
 * usecnt): MRs and QPs take a reference (MWs, AHs, SRQs must too). */
struct sv_pd {
	struct ibv_pd ibv;	/* ibv.handle = id */
	_Atomic uint32_t users; /* objects created on this PD */
	uint32_t id;		/* non-zero, unique in the context: the
				 * key table's pd_id (rmem.c) */
};

static inline struct sv_pd *to_spd(struct ibv_pd *pd)
{
	return container_of(pd, struct sv_pd, ibv);
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
	 * if not re-backed) and the arena offset of its first byte */
	struct sv_rseg *rseg;
	uint64_t arena_off;
};

/* The MR table's slot of a key (mr.c's head comment says why the low
 * bits); the key table a peer reads is indexed the same way (rmem.h). */
static inline uint32_t sv_mr_slot(uint32_t key)
{
	return key & (SV_MAX_MR - 1);
}

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
	struct sv_qp_set *retired; /* outgrown sets, freed with the CQ */
	uint32_t events_queued;	   /* queued on the channel, not yet got */
	uint32_t events_got;	   /* handed to the app by get_cq_event */
	struct sv_list ev_node;	   /* on channel->evq.events when queued */
	struct sv_cqe cur;	   /* the extended API's current completion */
	uint32_t async_got;	   /* async events handed out for this CQ */
	_Atomic uint32_t srqs;	   /* XRC SRQs completing here: EBUSY */
};

static inline struct sv_cq *to_scq(struct ibv_cq *cq)
{
	return container_of((struct ibv_cq_ex *)cq, struct sv_cq, ex);
}

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
};

/* Removes every completion of QP qpn not polled yet (ibv_destroy_qp). */
void sv_cq_clean(struct sv_cq *cq, uint32_t qpn);
int sv_cq_attach_qp(struct sv_cq *cq, struct sv_qp *qp);
void sv_cq_detach_qp(struct sv_cq *cq, struct sv_qp *qp);

/* Async events (channel.c; core.h's sv_async_event queues them).  Drops
 * the queued events of a CQ or QP being destroyed. */
void sv_async_forget(struct sv_context *ctx, void *obj);
int sv_evq_init(struct sv_evq *q);
void sv_evq_destroy(struct sv_evq *q);

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

/* The responder's side (engine/srq.c).  The responder's WQE for the
 * message at hand: the first the QP holds (lent), else the SRQ's oldest
 * moved into its RQ; false if there is none.  Lends the QP more for
 * single copy, raises
 * IBV_EVENT_SRQ_LIMIT_REACHED when it crosses an armed limit.  Caller
 * holds qp->lock. */
bool sv_srq_take(struct sv_srq *srq, struct sv_qp *qp);
/* Gives the SRQ back the WQEs lent to qp that its peer has not claimed
 * (before its link closes: to ERROR, RESET).  Caller holds qp->lock. */
void sv_srq_return(struct sv_qp *qp);
/* WQEs an RC QP on an SRQ may hold lent (its RQ's slots). */
#define SV_SRQ_LEND 64

/* SOFTVERBS_FAULTS' counts (inject.c's callers): sv_stat_add by one. */
#define SV_STAT_INC(qp, f) sv_stat_add(qp, f, 1)

/* Atomics the responder answered, by PSN: a duplicate is answered from
 * here, never executed twice (IBA 9.4.6). */
#define SV_ATOMIC_REPLAY 16

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
	uint64_t seq_nak_sent, seq_nak_recv; /* PSN sequence error NAKs */
	uint64_t rnr_nak_sent, rnr_nak_recv; /* receiver not ready NAKs */
	uint64_t fault_drops;  /* SOFTVERBS_FAULTS: packets lost */
	uint64_t fault_rnr;    /* ... RNR NAKs made up */
	uint64_t fault_access; /* ... access errors made up */
	uint64_t direct_ops;   /* one-sided ops done in the peer's
				* memory (req.c try_direct) */
	uint64_t placed_sends; /* sends placed in the peer's receive
				* buffer (req.c try_place) */
	uint64_t cold_sends;   /* placeable sends sent through the ring:
				* a cold buffer, an idle receiver */
	uint64_t warmed_recvs; /* receive buffers read ahead while idle
				* (resp.c warm_next) */
	uint64_t ud_drops;     /* UD datagrams dropped on arrival */
	uint64_t err_wc;       /* completions with an error status */
	uint64_t tcp_sends;    /* sendmsg calls on its TCP link (tcp.c) */
	uint64_t tcp_reads;    /* ... recv calls */
	uint64_t tcp_records;  /* records (packet trains) it put on its TCP
				* link, resends included (tcp.c) */
	/* UD datagrams (in ud_drops) from another host without a MAC
	 * that checks, or with one we cannot check (no secret: ud.c) */
	uint64_t ud_auth_drops;
	/* ... with a MAC that checks, but replayed or too old */
	uint64_t ud_replay_drops;
	/* the progress thread's looks at it (engine/drive.c): flat in the
	 * number of other QPs (tests/scale/idle.c) */
	uint64_t progress_looks;
	/* completions by status (index enum ibv_wc_status, the last slot
	 * for any status beyond it) */
	uint64_t wc_err[IBV_WC_TM_RNDV_INCOMPLETE + 2];
};
#define SV_STAT_N (sizeof(struct sv_qp_stats) / sizeof(uint64_t))

/* Adds n to a counter of qp: the caller runs the QP's engine. */
#define sv_stat_add(qp, field, n)                                            \
	__atomic_store_n(                                                    \
		&(qp)->stats.field,                                          \
		__atomic_load_n(&(qp)->stats.field, __ATOMIC_RELAXED) + (n), \
		__ATOMIC_RELAXED)

/* Counts a completion's status if it is an error. */
#define sv_stat_wc(qp, st)                                           \
	do {                                                         \
		unsigned int st_ = (unsigned int)(st);               \
		if (st_ != IBV_WC_SUCCESS) {                         \
			if (st_ > IBV_WC_TM_RNDV_INCOMPLETE)         \
				st_ = IBV_WC_TM_RNDV_INCOMPLETE + 1; \
			sv_stat_add(qp, err_wc, 1);                  \
			sv_stat_add(qp, wc_err[st_], 1);             \
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
			    * before it is a new round, NAKed again */
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
};

struct sv_qp {
	struct ibv_qp_ex qpx; /* starts with struct ibv_qp */
	struct sv_context *ctx;
	struct sv_lock lock; /* everything below but the lists */
	struct sv_list ctx_node;
	struct sv_cq *scq, *rcq;
	uint32_t max_inline;
	uint32_t max_send_sge, max_recv_sge;
	uint32_t ex_start; /* sq.post at ibv_wr_start */
	int ex_err;	   /* first error since ibv_wr_start */
	bool dead;	   /* destroyed: on ctx->qp_free */
	bool destroying;   /* in ibv_destroy_qp: flushes make no CQEs */

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
	struct sv_qp *next_free;  /* on ctx->qp_free once destroyed */
	uint32_t async_got;	  /* async events handed out */
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
	struct sv_qp_prog prog; /* progress thread */
};

static inline struct sv_qp *to_sqp(struct ibv_qp *qp)
{
	return container_of((struct ibv_qp_ex *)qp, struct sv_qp, qpx);
}

/* This host's addresses (transport/addr.c). */
uint16_t sv_local_lid(void);
uint64_t sv_node_guid(void);
/* Fills the GID table; returns its length (at most SV_GID_TBL_LEN). */
int sv_gid_table(union ibv_gid *gids);
bool sv_gid_is_local(const union ibv_gid *gid);
/* The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d); false if it
 * is not one. */
bool sv_gid_ipv4(const union ibv_gid *gid, struct in_addr *a);
/* A host's IP address for the TCP and UDP transports: IPv4 or IPv6. */
union sv_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};
/* The address (and port) a GID names another host by: an IPv4-mapped
 * GID's IPv4 address, or a global (or ULA, or ::1) IPv6 address itself;
 * false for any other GID (link-local, multicast, zero). */
bool sv_gid_sockaddr(const union ibv_gid *gid, uint16_t port,
		     union sv_sockaddr *a);
static inline socklen_t sv_sockaddr_len(const union sv_sockaddr *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in);
}
/* Device (device.c).  An address vector this host can reach (port 1 or
 * unset; our LID, or a GID of our table): 0, or EINVAL said once on
 * stderr, as who. */
/* An address vector's check (EINVAL, said on stderr); tcp_ok: another
 * host's IP address GID (sv_gid_sockaddr) is fine (a connected QP's, over TCP).
 */
int sv_av_check(const struct ibv_ah_attr *a, const char *who, bool tcp_ok);
int sv_port_mtu_bytes(enum ibv_mtu mtu);

/* QP (qp.c; the error transition and the link's close, engine/qp_error.c). */
void sv_qp_to_error(struct sv_qp *qp, enum ibv_event_type ev);
void sv_qp_link_close(struct sv_qp *qp, bool bye);
void sv_qp_init_ex_ops(struct sv_qp *qp, uint64_t send_ops_flags);
int sv_qp_ex_check_ops(enum ibv_qp_type type, uint64_t send_ops_flags);
/* The QP's link (engine/qp_link.c); caller holds qp->lock.  One step
 * up (connect, the peer's hello): what makes the link impossible
 * (-errno: another user's socket, out of fds; said on stderr), else 0. */
int sv_qp_link_connect(struct sv_qp *qp);
/* The same, and a link that cannot come up takes the QP to ERROR. */
void sv_qp_link_step(struct sv_qp *qp);
/* The link's peer said goodbye (st CLOSED) or vanished (DEAD). */
void sv_qp_link_event(struct sv_qp *qp, enum sv_link_state st);
/* Says on stderr, once, why the link cannot come up (what failed, err). */
void sv_qp_link_error(struct sv_qp *qp, const char *what, int err);
/* The local ACK timeout (IBA 9.7.6.1.3; at least SV_MIN_ACK_TIMEOUT_NS,
 * UINT64_MAX / 2 for 0: infinite) (comp.c). */
uint64_t sv_qp_ack_timeout_ns(const struct sv_qp *qp);
/* A link that runs by itself (TCP): its turn (engine/qp_link.c).  Caller
 * holds qp->lock. */
void sv_qp_link_run(struct sv_qp *qp, uint64_t now);
void sv_qp_free_all(struct sv_context *ctx);
/* ibv_close_device: every QP still open is torn down (BYE to peers). */
void sv_qp_close_all(struct sv_context *ctx);

/* A send WQE's SGEs: qp->sq.sge holds max_send_sge of them per WQE slot.
 * Data, not a step of the engine: the capture (a service) reads them too. */
static inline struct ibv_sge *sv_swqe_sge(struct sv_qp *qp,
					  const struct sv_swqe *w)
{
	return &qp->sq.sge[(size_t)(w - qp->sq.wqe) * qp->max_send_sge];
}

/* The engine (req.c, resp.c, comp.c).  Caller holds qp->lock. */
/* Scatters into a WQE's local SGEs (read data, atomic results) at its
 * cursor; -EFAULT if the memory went, -EINVAL past the SGEs. */
int sv_swqe_scatter(struct sv_qp *qp, struct sv_swqe *w, const uint8_t *src,
		    uint32_t len);
void sv_req_run(struct sv_qp *qp);
void sv_resp_run(struct sv_qp *qp);
void sv_comp_run(struct sv_qp *qp, uint64_t now_ns);
/* Completes the finished WQEs at the head of the send queue, in order
 * (the requester calls it after executing one-sided WQEs itself). */
void sv_comp_advance(struct sv_qp *qp);
/* Drops the responses SOFTVERBS_FAULTS delay_us holds (reset, destroy). */
void sv_comp_fault_free(struct sv_qp *qp);
/* IBA table 45: an RNR NAK timer code in ns (comp.c). */
uint64_t sv_rnr_timer_ns(uint8_t code);
/* Retransmission: the send state back to psn (req.c). */
void sv_req_rewind(struct sv_qp *qp, uint32_t psn);

/* UD (ud.c).  Caller holds qp->lock. */
/* Sends the posted WQEs as datagrams and completes them. */
void sv_ud_send_run(struct sv_qp *qp);
/* Takes every datagram waiting on the QP's socket. */
void sv_ud_recv_run(struct sv_qp *qp);
/* UD lanes (lane.c; off with SOFTVERBS_UD_LANES=0).  Sender, under
 * qp->lock: the datagram d of n bytes to QP qpn through its lane: 0 sent,
 * -EAGAIN the lane is full, 1 send it on the socket, with the lane's memfd
 * (SCM_RIGHTS) when *offer_fd >= 0.  sv_lane_gone: the socket says there
 * is no such QP.  Receiver, under qp->lock: sv_lane_offer maps the lane
 * pid offered with a checked datagram (fd is consumed); peek/consume take
 * its records in order (peek: 1 and our copy of the header, or 0). */
int sv_lane_send(struct sv_qp *qp, const void *d, size_t n, uint32_t qpn,
		 int *offer_fd);
void sv_lane_gone(struct sv_context *ctx, uint32_t qpn);
/* The datagram that offered the lane to qpn did not go (a full queue):
 * the offer goes with the next one. */
void sv_lane_unoffered(struct sv_context *ctx, uint32_t qpn);
void sv_lanes_tx_close(struct sv_context *ctx);
void sv_lane_offer(struct sv_qp *qp, int fd, pid_t pid);
int sv_lane_peek(struct sv_lane_rx *l, struct sv_ud_hdr *h,
		 const uint8_t **payload);
void sv_lane_consume(struct sv_lane_rx *l);
void sv_lanes_rx_sleep(struct sv_qp *qp, bool sleep);
void sv_lanes_rx_reap(struct sv_qp *qp);
void sv_lanes_rx_close(struct sv_qp *qp);
/* The datagram socket of a new UD QP, bound to its QPN. */
int sv_ud_bind(struct sv_link *l, uint32_t *qpn);
/* Where an AH's UD sends go: *ip another host's address (network order)
 * when they go over UDP, else 0; an IPv6 host's: *ip6 true, *ip
 * INADDR_NONE (the address is the dgid); -errno if the socket for it
 * cannot be made. */
int sv_ud_route(struct sv_context *ctx, const struct ibv_ah_attr *a,
		uint32_t *ip, bool *ip6);
/* The context's UDP listener, at its first UD QP (a failure is said
 * once: datagrams from other hosts then do not reach it); closed with the
 * context.  Its callback in the loop (ud.c) passes datagrams on. */
void sv_ud_door_open(struct sv_context *ctx);
void sv_ud_door_close(struct sv_context *ctx);
/* When a datagram held for a full QP socket is tried again (UINT64_MAX:
 * none held); tries it when due.  Progress thread only. */
uint64_t sv_ud_door_next_ns(struct sv_context *ctx, uint64_t now);
/* The listener joins (join) or leaves IPv4 group grp (network order)
 * between hosts: 0, or -errno when no interface took the join.  No
 * listener: 0 (the group stays this host's).  ctx->mcast_lock held. */
int sv_ud_mcast_join(struct sv_context *ctx, uint32_t grp, bool join);

/* Multicast (verbs/mcast.c, transport/mcast.c). */
/* The members of group gid on this host: up to max QPNs, sorted, each
 * once; entries of dead members included (a datagram to them is lost). */
int sv_mcast_members(const union ibv_gid *gid, uint32_t *qpn, int max);
/* True if the QP is attached to group gid.  Caller holds qp->lock or
 * ctx->mcast_lock. */
bool sv_mcast_attached(const struct sv_qp *qp, const uint8_t gid[16]);
/* ibv_destroy_qp, ibv_close_device: the QP leaves every group (uverbs
 * detaches a destroyed QP).  Caller holds no QP lock. */
void sv_mcast_detach_all(struct sv_qp *qp);
/* True if gid is an IPv4-mapped multicast address (::ffff:224.0.0.0/4,
 * RoCEv2's MGID for an IPv4 group): *grp its address (network order). */
bool sv_mcast_ipv4(const uint8_t gid[16], uint32_t *grp);
/* This context's QPs attached to gid, sorted (up to max): 0 when none,
 * -EAGAIN when the registry lock is busy (try again).  Never blocks. */
int sv_mcast_ctx_members(struct sv_context *ctx, const uint8_t gid[16],
			 uint32_t *qpn, int max);

/* XRC (xrc.c). */
struct ibv_xrcd *sv_open_xrcd(struct ibv_context *c,
			      struct ibv_xrcd_init_attr *attr);
int sv_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_qp *sv_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *attr);
/* An XRC SRQ's number and socket; 0 or -errno. */
int sv_xsrq_bind(struct sv_srq *srq);
void sv_xsrq_unbind(struct sv_srq *srq);
/* Takes the forwarded sends waiting on the SRQ's socket while it has
 * WQEs.  Caller holds no SRQ lock. */
void sv_xsrq_recv_run(struct sv_srq *srq);
/* XRC_RECV QPs: joining and leaving the process's list (ibv_open_qp). */
void sv_xrc_qp_add(struct sv_qp *qp);
void sv_xrc_qp_del(struct sv_qp *qp);
/* The abstract socket name of XRC SRQ srqn of domain (engine/xrc.c). */
struct sockaddr_un;
socklen_t sv_xsrq_addr(struct sockaddr_un *a, const char *domain,
		       uint32_t srqn);
/* The responder of an XRC_RECV QP (engine/xrc.c), for the message whose
 * packet names srqn: binds the SRQ if it is of our context (qp->srq,
 * qp->rcq), else marks the message to be forwarded.  Caller holds qp->lock. */
int sv_xrc_bind(struct sv_qp *qp, uint32_t srqn);
void sv_xrc_unbind(struct sv_qp *qp);
/* A forwarded send: its bytes in order; at the last, handed to the SRQ's
 * process.  0, -EAGAIN (its queue is full: retry), -ENOENT (no SRQ of
 * that number in our domain), -EMSGSIZE. */
int sv_xrc_fwd_data(struct sv_qp *qp, const struct sv_pkt *p,
		    const uint8_t *data);
int sv_xrc_fwd_send(struct sv_qp *qp, const struct sv_pkt *p);

/* The progress thread (loop/progress.c): the context's event loop.
 * next_ns: the context's deadlines outside the loop's heap (it may run
 * what is due), asked before each sleep; UINT64_MAX: none. */
typedef uint64_t sv_progress_next_cb(struct sv_context *ctx, uint64_t now);
int sv_progress_start(struct sv_context *ctx, sv_progress_next_cb *next_ns);
void sv_progress_stop(struct sv_context *ctx);
/* The context whose progress thread calls; NULL on any other thread. */
struct sv_context *sv_progress_ctx(void);
/* A timer in ctx's loop (evloop.h), from its thread only: 0 or -ENOMEM. */
int sv_progress_timer_start(struct sv_context *ctx, struct sv_timer *t,
			    uint64_t when);
void sv_progress_timer_stop(struct sv_context *ctx, struct sv_timer *t);
/* Has the thread call cb(a) soon (any thread); nothing if a is queued. */
void sv_progress_async(struct sv_context *ctx, struct sv_async *a,
		       sv_async_cb *cb);
/* Registers p (its callback: sv_pfd_set) for fd in ctx's loop. */
void sv_progress_add(struct sv_context *ctx, struct sv_pfd *p, int fd);
void sv_progress_del(struct sv_context *ctx, struct sv_pfd *p);
/* An edge-triggered socket of ours (a TCP link's): out, whether room to
 * send wakes the thread too. */
void sv_progress_want_out(struct sv_context *ctx, struct sv_pfd *p, bool out);
/* Stops (or resumes) watching p for input; hang-ups still wake us. */
void sv_progress_quiet(struct sv_context *ctx, struct sv_pfd *p, bool quiet);
void sv_progress_kick(struct sv_context *ctx);

/* Who drives a QP's engine (engine/drive.c). */
/* New send work while the app may not poll: the thread must see its
 * timers, if it does not look at qp by due (the work's earliest deadline
 * the caller knows, UINT64_MAX: none) anyway. */
void sv_qp_note_work(struct sv_qp *qp, uint64_t due);
/* Asks the thread to look at qp soon (any thread; qp is type-stable). */
void sv_qp_visit(struct sv_qp *qp);
/* The callbacks of a QP's fds (sv_pfd_set), in the progress thread:
 * listener (hellos, edge), our connection or a TCP link's socket (rung,
 * edge), a peer's connection to us (goodbye or hang-up, level), a UD
 * QP's datagram socket (edge).  Each looks at the QP after. */
void sv_qp_on_listen(struct sv_io *io, uint32_t revents);
void sv_qp_on_doorbell(struct sv_io *io, uint32_t revents);
void sv_qp_on_conn(struct sv_io *io, uint32_t revents);
void sv_qp_on_ud(struct sv_io *io, uint32_t revents);
/* The context's deadlines outside the loop's heap (the doors' callers in
 * wait, TCP's and UDP's): the progress thread's next_ns. */
uint64_t sv_drive_doors_next_ns(struct sv_context *ctx, uint64_t now);
/* Runs the engine for one QP if it has work; the fast path of poll/post. */
void sv_qp_drive(struct sv_qp *qp);
/* now: the time if the caller knows it, else 0 (the engine may skip
 * its timers to save clock reads). */
void sv_qp_run(struct sv_qp *qp, uint64_t now);

/* A receive WQE and its SGEs from a work request already checked
 * (post.c; SRQs too). */
void sv_rwqe_fill(struct sv_rwqe *r, struct ibv_sge *sge,
		  const struct ibv_recv_wr *wr);

/* Shows the peer receives [from, rq_post) for single-copy sends (post.c).
 * Caller holds qp->lock. */
void sv_rq_describe(struct sv_qp *qp, uint32_t from);

/* Data path entry points, installed in context ops. */
int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		 struct ibv_send_wr **bad);
int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad);
int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad);
int sv_post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *op,
		    struct ibv_ops_wr **bad);
int sv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
struct ibv_srq *sv_create_srq_ex(struct ibv_context *c,
				 struct ibv_srq_init_attr_ex *attr);
int sv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *c,
				  struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *sv_create_qp_ex(struct ibv_context *c,
			       struct ibv_qp_init_attr_ex *attr);
int sv_query_device_ex(struct ibv_context *c,
		       const struct ibv_query_device_ex_input *in,
		       struct ibv_device_attr_ex *attr, size_t attr_size);
int sv_query_rt_values(struct ibv_context *c, struct ibv_values_ex *values);

/*
 * Capture (pcap.c): SOFTVERBS_PCAP=FILE writes every packet as RoCEv2 in
 * a pcap file.  sv_pcap_on is set once, at the first ibv_open_device,
 * before any QP exists; every hook sits behind `if (sv_pcap_on)`.
 * tx: we send it (src = us); else we received it.
 */
extern bool sv_pcap_on;
void sv_pcap_open(void);
/* Where a payload the record does not carry is (a send placed in the
 * receive buffer): SGEs whose addr are pointers, from the message's
 * first byte. */
struct sv_pcap_sg {
	const struct ibv_sge *sge;
	uint32_t n;
};
/* A train (wire.h) as the per-MTU packets it stands for.  ext: the bytes
 * after the header (XRCETH if flagged, then the opcode's extension),
 * data: the payload (NULL: not at hand, the packet's headers written as
 * cut; ext itself: a received record, the payload after the extension,
 * lengths checked against h->rec_len); sg: a placed send's payload, or
 * NULL.  The requester's QP shows its PSNs shifted by qp->pcap.psn_off. */
void sv_pcap_train(struct sv_qp *qp, bool tx, const struct sv_pkt *h,
		   const uint8_t *ext, const uint8_t *data,
		   const struct sv_pcap_sg *sg);
/* sv_pcap_train of a train the requester sends for WQE w: a placed
 * send's payload and a write's note's (req.c try_direct) from w. */
void sv_pcap_req(struct sv_qp *qp, const struct sv_swqe *w,
		 const struct sv_pkt *h, const uint8_t *ext,
		 const uint8_t *data);
/* An ack word (ring.h) written (tx) or newly read, as an ACKNOWLEDGE. */
void sv_pcap_ack(struct sv_qp *qp, bool tx, uint64_t ack);
/* A one-sided WQE done in the peer's memory (req.c try_direct): its
 * request and its response as a hardware initiator would see them,
 * under PSNs of their own (qp->pcap.psn_off grows).  data: the bytes
 * written or read; npsn_shown: how many of the write's PSNs to show
 * (a write with immediate leaves its last to the note). */
void sv_pcap_direct(struct sv_qp *qp, const struct sv_swqe *w,
		    const uint8_t *data, uint32_t npsn_shown);
/* A UD datagram (ud.c) sent or received. */
void sv_pcap_ud(struct sv_qp *qp, bool tx, const struct sv_ud_hdr *h,
		const uint8_t *sgid, const uint8_t *dgid, const uint8_t *data);
/* Writes out what is buffered (the progress thread, context close). */
void sv_pcap_flush(void);

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
