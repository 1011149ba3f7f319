/* SPDX-License-Identifier: MIT */
/*
 * rsockets' private side: struct rs and what crosses rsocket.c (the
 * socket calls: table, connect/accept, options, rpoll), rsocket_io.c
 * (the data path: CQ, credits, stream) and rsocket_iomap.c (riomap,
 * riowrite).  The wire is rs_wire.h.
 *
 * An rsocket's number is the fd of its rdma_cm event channel (an eventfd
 * of channel.c): a real kernel object, so it never collides with a file
 * the program opens.  One thread at a time per rsocket (rs->lock).
 */
#ifndef SV_RS_H
#define SV_RS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "env.h" /* provider/lib/env.h: the SOFTVERBS_* table */
#include "rs_wire.h"

enum rs_state {
	RS_NEW,
	RS_BOUND,
	RS_LISTENING,
	RS_RESOLVING_ADDR,
	RS_RESOLVING_ROUTE,
	RS_CONNECTING, /* active: REQ sent */
	RS_ACCEPTING,  /* passive: REP sent, ESTABLISHED not yet seen */
	RS_CONNECTED,
	RS_FAILED, /* connect failed or connection reset: rs->err */
	RS_CLOSED, /* disconnected after both FINs */
	RS_NSTATES
};
extern const char *const rs_state_names[RS_NSTATES];

#define RS_RQ_DEPTH   64  /* receives we post (data + control) */
#define RS_RESERVE    8	  /* peer receives kept for control messages */
#define RS_SQ_DEPTH   128 /* send queue */
#define RS_CTRL_SLOTS 16  /* control messages in flight */
#define RS_IOMAPS     16  /* windows each way */
#define RS_RING_DEF   (128u << 10)
#define RS_WBUF_SIZE  (256u << 10) /* riowrite's bounce ring */
#define RS_SPIN_LOOKS 8		   /* CQ looks between two clock reads */
#define RS_CHUNK_MAX  (64u << 10)  /* one RDMA write of stream bytes */
#define RS_INLINE_DEF 64	   /* RDMA_INLINE's default */
#define RS_INLINE_MAX 512	   /* and its most */
#define RS_LANE_MIN   (8u << 10)   /* a chunk the zero-copy lane takes */
#define RS_LANE_MAX   (1u << 20)   /* and riowrite's most in one write */

/* wr_id: kind in the top byte, a length or slot below */
enum rs_wr { RS_WR_DATA = 1, RS_WR_CTRL, RS_WR_IOW, RS_WR_RECV };
#define RS_WR(kind, v) (((uint64_t)(kind) << 56) | (uint64_t)(v))
#define RS_WR_KIND(id) ((unsigned int)((id) >> 56))
#define RS_WR_VAL(id)  ((id) & ((1ull << 56) - 1))

struct rs_iomap {
	bool used;
	uint64_t offset, len; /* the riomap window */
	uint64_t addr;	      /* where it is (local: buf; remote: peer VA) */
	uint32_t rkey;
	struct ibv_mr *mr; /* local only */
};

struct rs {
	int fd; /* the rsocket number: ech->fd */
	pthread_mutex_t lock;
	enum rs_state state;
	int err; /* RS_FAILED's errno; SO_ERROR reports it once */
	bool err_reported;
	int domain;
	bool nonblock;
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;

	/* options (SOL_SOCKET, IPPROTO_TCP, SOL_RDMA) */
	int rcvbuf, sndbuf, keepalive, keepidle, nodelay, inline_size;
	int sqsize, rqsize, iomapsize, reuseaddr;
	struct linger linger;

	/* verbs */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	bool cq_armed;
	struct ibv_qp *qp;
	uint32_t max_inline; /* chunks up to this go IBV_SEND_INLINE */

	/* receive side: our ring, the peer writes into it */
	uint8_t *rbuf;
	uint32_t rsize;
	struct ibv_mr *rmr;
	uint64_t rcvd;	   /* stream bytes landed */
	uint64_t consumed; /* stream bytes read by the program */
	uint64_t consumed_told;
	uint64_t recvs_done; /* receives completed and re-posted */
	uint64_t recvs_told;
	bool fin_rcvd;	   /* the peer's FIN: EOF once the ring is empty */
	bool disconnected; /* the CM said DISCONNECTED */

	/* control buffers: RS_RQ_DEPTH receive slots, then the send slots */
	struct rs_ctrl *ctl;
	struct ibv_mr *ctlmr;
	uint64_t ctrl_posted, ctrl_done;

	/* send side: a bounce ring twice the size of the peer's ring */
	uint8_t *sbuf;
	uint32_t ssize;
	struct ibv_mr *smr;
	uint64_t sent, acked; /* stream bytes posted, their sends done */
	uint64_t peer_addr;
	uint32_t peer_rkey, peer_rsize, peer_rq;
	uint64_t peer_consumed, peer_recvs; /* its last counters */
	uint64_t msgs_sent;		    /* messages that cost a receive */
	unsigned int sq_used;
	bool fin_sent, shut_wr, shut_rd;

	/* the zero-copy lane (rsocket_lane.c) */
	struct ibv_qp *lane; /* NULL: none */
	struct ibv_cq *lane_cq;
	struct ibv_mr *zmr; /* implicit ODP: the program's memory, local */
	uint32_t peer_lane; /* its QPN; 0: none */
	bool zc;	    /* stream writes go on the lane */

	/* riowrite */
	uint8_t *wbuf;
	struct ibv_mr *wmr;
	uint64_t wposted, wdone;
	struct rs_iomap lmaps[RS_IOMAPS], rmaps[RS_IOMAPS];
};

/* rsocket.c */
#define RS_MAX_FD 65536	      /* an rsocket's number is below this */
struct rs *rs_get(int fd);    /* locked, or NULL with errno EBADF/ENOTSOCK */
struct rs *rs_lookup(int fd); /* not locked; NULL if none */
int rs_ret_err(struct rs *rs, int ret); /* rs_put; -errno: -1, errno */
void rs_put(struct rs *rs);
void rs_fail(struct rs *rs, int err); /* connection reset */
int rs_cm_progress(struct rs *rs);    /* reads the CM events there are */

/* rsocket_lane.c */
void rs_lane_setup(struct rs *rs);   /* INIT, or no lane */
bool rs_lane_connect(struct rs *rs); /* to rs->peer_lane, or no lane */
void rs_lane_free(struct rs *rs);
int rs_lane_write(struct rs *rs, const void *p, uint32_t len, uint64_t raddr,
		  uint32_t rkey);

/* rsocket_io.c: 0 or -errno */
uint64_t rs_now_ns(void);
uint32_t rs_ring_size(int v);	/* the ring an SO_RCVBUF/SO_SNDBUF value asks */
int rs_io_setup(struct rs *rs); /* verbs, ring, receives posted */
void rs_io_teardown(struct rs *rs);
void rs_hello_fill(struct rs *rs, struct rs_hello *h);
int rs_hello_take(struct rs *rs, const void *pdata, uint8_t len);
int rs_progress(struct rs *rs);		    /* CQ and CM, no wait */
int rs_wait(struct rs *rs, int timeout_ms); /* comp channel or CM fd */
bool rs_spin(struct rs *rs); /* polls rs_spin_ns(): true if something came */

/*
 * How long a wait polls before it sleeps: SOFTVERBS_EVENT_SPIN_US, as
 * ibv_get_cq_event's (default 50 us).  rdma-core's rsockets poll 10 us
 * (their polling_time); here a wake-up across CPUs costs more than that,
 * so a 10 us poll let each sleep of one end outlast the other's poll and
 * put it to sleep in turn: `rstream -T b` at 8 B took 1.3 us one way
 * against 0.88 without blocking, and as much with a poll of 30 us or
 * more (bench/results/rsockets/README.md, 2026-12-06).
 */
static inline uint64_t rs_spin_ns(void)
{
	return sv_env_uint(SV_ENV_EVENT_SPIN_US) * 1000u;
}
bool rs_readable(struct rs *rs);
bool rs_writable(struct rs *rs);
int rs_send_ctrl(struct rs *rs, enum rs_ctrl_type t, const struct rs_iomap *m);
ssize_t rs_do_send(struct rs *rs, const struct iovec *iov, int iovcnt,
		   int flags);
ssize_t rs_do_recv(struct rs *rs, const struct iovec *iov, int iovcnt,
		   int flags);
int rs_drain(struct rs *rs, int timeout_ms);	    /* our sends completed */
void *rs_ring_alloc(size_t len);		    /* whole pages, zeroed */
bool rs_can_talk(const struct rs *rs);		    /* connected, queues up */
int rs_ready_to_talk(struct rs *rs, bool dontwait); /* waits to connect */

/* rsocket_iomap.c */
off_t rs_iomap_add(struct rs *rs, void *buf, size_t len, off_t offset);
int rs_iomap_del(struct rs *rs, void *buf, size_t len);
size_t rs_iowrite(struct rs *rs, const void *buf, size_t count, off_t offset,
		  int flags);

#endif
