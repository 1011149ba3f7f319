/* SPDX-License-Identifier: MIT */
/*
 * Conformance helpers: one end of an RC connection (device, PD, MR, CQs,
 * optional completion channel, QP) and a connected pair of them inside one
 * test process.  Everything goes through the public verbs API only; the
 * helpers fail the test (with the caller's file:line for waits) rather
 * than return errors, so the tests read as the behaviour they check.
 */
#ifndef SV_CONF_PAIR_H
#define SV_CONF_PAIR_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "sv_test.h"

/* How to build one end; start from sv_end_opts_default(). */
struct sv_end_opts {
	int cqe; /* entries of each CQ */
	uint32_t max_send_wr, max_recv_wr;
	uint32_t max_send_sge, max_recv_sge;
	uint32_t max_inline;
	bool sq_sig_all;
	bool channel;	   /* CQs on a completion channel */
	bool shared_cq;	   /* one CQ for send and receive */
	size_t buf_len;	   /* registered buffer, bytes */
	int mr_access;	   /* the buffer's MR; 0: IBV_ACCESS_LOCAL_WRITE */
	int qp_access;	   /* qp_access_flags at INIT (remote access) */
	uint8_t rd_atomic; /* max_rd_atomic = max_dest_rd_atomic; 0: 1 */
	enum ibv_mtu mtu;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint32_t psn; /* our sq_psn = the peer's rq_psn */
};

struct sv_end {
	struct sv_end_opts o;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch; /* NULL unless o.channel */
	struct ibv_cq *scq, *rcq;    /* equal with o.shared_cq */
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf; /* o.buf_len bytes, registered */
	uint16_t lid; /* port 1's LID */
};

struct sv_pair {
	struct sv_end a, b;
};

struct sv_end_opts sv_end_opts_default(void);

/* Opens softverbs0 and creates everything; the QP is left in RESET. */
void sv_end_open(struct sv_end *e, const struct sv_end_opts *o);
/* Opens the device and PD only (for tests that build their own QP). */
void sv_end_open_ctx(struct sv_end *e);
/* Connects two QPs of e's context to each other, then destroys them.
 * Over shared memory (not SOFTVERBS_TRANSPORT=tcp) that first connection
 * on this host hands the context's memory to a peer (rmem.c): what was
 * registered moves onto the arena, and what is registered from now on
 * moves at once.  Returns whether it did (false over TCP). */
bool sv_end_share_memory(struct sv_end *e);
void sv_end_close(struct sv_end *e);
/* An end over objects made elsewhere (an imported PD and MR, say): an RC
 * QP (16 WRs, 2 SGEs, every send signalled) on one new CQ of 64, in
 * RESET; qp_access read, write and local write.  sv_end_off_objects
 * destroys that QP and CQ only, not the objects given. */
void sv_end_on_objects(struct sv_end *e, struct ibv_context *ctx,
		       struct ibv_pd *pd, struct ibv_mr *mr, uint8_t *buf);
void sv_end_off_objects(struct sv_end *e);

/* The attributes and masks the IBA requires, with the end's options. */
int sv_end_to_init(struct sv_end *e);
int sv_end_to_rtr(struct sv_end *e, uint32_t dest_qpn, uint32_t rq_psn);
int sv_end_to_rts(struct sv_end *e);
/* RESET -> INIT -> RTR -> RTS toward dest_qpn whose sq_psn is dest_psn. */
void sv_end_connect(struct sv_end *e, uint32_t dest_qpn, uint32_t dest_psn);
/* Asserts the QP's state (ibv_query_qp). */
enum ibv_qp_state sv_end_state(struct sv_end *e);

/* Opens both ends (NULL: defaults) and connects them. */
void sv_pair_open(struct sv_pair *p, const struct sv_end_opts *oa,
		  const struct sv_end_opts *ob);
void sv_pair_close(struct sv_pair *p);
/* One 64-byte message from a to b (buffers' start, wr_ids 1 and 2): both
 * completions must be successes. */
void sv_pair_ping(struct sv_pair *p);

/* Posts one WR over buf[off, off+len) of the end's MR; the verbs' rc. */
int sv_end_send(struct sv_end *e, uint64_t wr_id, size_t off, uint32_t len,
		unsigned int flags);
int sv_end_recv(struct sv_end *e, uint64_t wr_id, size_t off, uint32_t len);

/* Polls cq for one completion until timeout_ms; false if none came. */
bool sv_wc_poll(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms);
void sv_wc_wait_at(const char *file, int line, struct ibv_cq *cq,
		   struct ibv_wc *wc, int timeout_ms);
void sv_wc_none_at(const char *file, int line, struct ibv_cq *cq, int ms);

/* Fails the test (at the caller) if no completion arrives in time. */
#define WAIT_WC(cq, wc, ms) sv_wc_wait_at(__FILE__, __LINE__, cq, wc, ms)
/* Fails the test if a completion arrives within ms (bounded look). */
#define NO_WC(cq, ms) sv_wc_none_at(__FILE__, __LINE__, cq, ms)

/* Short waits: a completion on one host arrives in microseconds; the
 * bound only keeps a broken provider from hanging the test. */
#define SV_WC_TIMEOUT_MS 5000

/* Receives one completion and checks its status and wr_id. */
#define EXPECT_WC(cq, st, id)                                                 \
	do {                                                                  \
		struct ibv_wc w_;                                             \
		WAIT_WC(cq, &w_, SV_WC_TIMEOUT_MS);                           \
		if (w_.status != (st))                                        \
			sv_test_fail(__FILE__, __LINE__,                      \
				     "wr_id %" PRIu64 ": status %s (%d), "    \
				     "expected %s",                           \
				     (uint64_t)w_.wr_id,                      \
				     ibv_wc_status_str(w_.status), w_.status, \
				     ibv_wc_status_str(st));                  \
		ASSERT_EQ((id), w_.wr_id);                                    \
	} while (0)

/* How many datagrams a Unix datagram socket queues before its senders
 * wait (net.unix.max_dgram_qlen; 10, the kernel's default, if it cannot
 * be read): forwarded sends and the UD listener's datagrams wait there. */
int sv_unix_dgram_qlen(void);

/* Fills buf with a pattern that depends on seed and position. */
void sv_fill(uint8_t *buf, size_t len, uint32_t seed);
/* Index of the first byte that differs from the pattern, or -1. */
long sv_check(const uint8_t *buf, size_t len, uint32_t seed);

#endif
