// SPDX-License-Identifier: MIT
/*
 * rsockets' data path (the protocol is rs_wire.h): one RC QP per
 * connected rsocket, one CQ on a completion channel for its sends and
 * receives, every send signalled (their completions free the bounce
 * rings and the send queue in order).
 *
 * Flow control never lets a sender overrun the receiver:
 * - ring bytes: we write at most peer_rsize - (sent - peer_consumed);
 * - peer receives: every message but riowrite's costs one; we keep
 *   RS_RESERVE of them for control messages, so a credit update can
 *   always go, and the peer gives them back in its counters;
 * - the receiver tells its counters when half its ring or a quarter of
 *   its receives are free again: a sender that waits always has a
 *   receiver that has read at least that much, so nobody waits on the
 *   other for ever.
 * Every number from the peer is checked (rs_wire.h); a peer that breaks a
 * rule gets the connection reset (rs_fail), never a write outside our
 * ring, which is all the memory we let it write besides riomap windows.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/uio.h>
#include <time.h>

#include "cm.h"
#include "rs.h"

/*
 * Whole pages: registering our buffers moves their pages onto the
 * provider's shared arena (DESIGN.md, rmem.c), and a program buffer that
 * shared a page with one of them would be "partly on moved pages" when
 * the program registers it (riomap), so a peer's RDMA write to it would
 * take the target's responder instead of landing at once (riostream
 * spins on such a buffer's last byte).
 */
void *rs_ring_alloc(size_t len)
{
	size_t whole = (len + 4095) & ~(size_t)4095;
	void *p = NULL;

	if (posix_memalign(&p, 4096, whole))
		return NULL;
	memset(p, 0, whole);
	return p;
}

/*
 * A ring's size for an SO_RCVBUF or SO_SNDBUF value: twice the value, as
 * Linux sockets and rdma-core's rsockets take it (the kernel counts its
 * bookkeeping in the buffer; rsockets keep the rule, so a program tuned
 * on them gets the ring it got there), within RS_RING_MIN..RS_RING_MAX;
 * 0 (not set) or less: the default.
 */
uint32_t rs_ring_size(int v)
{
	uint64_t s = v > 0 ? 2 * (uint64_t)v : RS_RING_DEF;

	if (s < RS_RING_MIN)
		s = RS_RING_MIN;
	if (s > RS_RING_MAX)
		s = RS_RING_MAX;
	return (uint32_t)s;
}

static int post_recv(struct rs *rs, unsigned int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)&rs->ctl[slot],
		.length = sizeof(struct rs_ctrl),
		.lkey = rs->ctlmr->lkey,
	};
	struct ibv_recv_wr wr =
				   {
					   .wr_id = RS_WR(RS_WR_RECV, slot),
					   .sg_list = &sge,
					   .num_sge = 1,
				   },
			   *bad;

	return -ibv_post_recv(rs->qp, &wr, &bad);
}

/* The CQ of sends and receives, on a non-blocking completion channel. */
static int make_cq(struct rs *rs, struct ibv_context *ctx)
{
	int err;

	rs->cch = ibv_create_comp_channel(ctx);
	if (!rs->cch)
		return -errno;
	fcntl(rs->cch->fd, F_SETFL, fcntl(rs->cch->fd, F_GETFL) | O_NONBLOCK);
	rs->cq = ibv_create_cq(ctx, RS_SQ_DEPTH + RS_RQ_DEPTH + 8, rs, rs->cch,
			       0);
	if (rs->cq)
		return 0;
	err = -errno;
	ibv_destroy_comp_channel(rs->cch);
	rs->cch = NULL;
	return err;
}

int rs_io_setup(struct rs *rs)
{
	struct ibv_context *ctx = rs->id->verbs;
	struct ibv_qp_init_attr qa = {0};
	unsigned int i;
	int err = -ENOMEM;

	if (!ctx)
		return -ENODEV;
	rs->pd = ibv_alloc_pd(ctx);
	if (!rs->pd)
		return -errno;
	err = make_cq(rs, ctx);
	if (err)
		goto err_pd;
	err = -ENOMEM;
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = RS_SQ_DEPTH;
	qa.cap.max_recv_wr = RS_RQ_DEPTH;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = rs->inline_size < 0 ? 0
				 : rs->inline_size > RS_INLINE_MAX
					 ? RS_INLINE_MAX
					 : (uint32_t)rs->inline_size;
	rs->max_inline = qa.cap.max_inline_data;
	if (rdma_create_qp(rs->id, rs->pd, &qa)) {
		err = -errno;
		goto err_cq;
	}
	rs->qp = rs->id->qp;
	if (qa.cap.max_inline_data < rs->max_inline)
		rs->max_inline = qa.cap.max_inline_data;
	rs->rsize = rs_ring_size(rs->rcvbuf);
	rs->rbuf = rs_ring_alloc(rs->rsize);
	if (!rs->rbuf)
		goto err_qp;
	rs->rmr = ibv_reg_mr(rs->pd, rs->rbuf, rs->rsize,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->rmr) {
		err = -errno;
		goto err_rbuf;
	}
	rs->ctl = rs_ring_alloc((RS_RQ_DEPTH + RS_CTRL_SLOTS) *
				sizeof(struct rs_ctrl));
	if (!rs->ctl)
		goto err_rmr;
	rs->ctlmr = ibv_reg_mr(rs->pd, rs->ctl,
			       (RS_RQ_DEPTH + RS_CTRL_SLOTS) *
				       sizeof(struct rs_ctrl),
			       IBV_ACCESS_LOCAL_WRITE);
	if (!rs->ctlmr) {
		err = -errno;
		goto err_ctl;
	}
	for (i = 0; i < RS_RQ_DEPTH; i++) {
		err = post_recv(rs, i);
		if (err)
			goto err_ctlmr;
	}
	rs_lane_setup(rs);
	return 0;

err_ctlmr:
	ibv_dereg_mr(rs->ctlmr);
	rs->ctlmr = NULL;
err_ctl:
	free(rs->ctl);
	rs->ctl = NULL;
err_rmr:
	ibv_dereg_mr(rs->rmr);
	rs->rmr = NULL;
err_rbuf:
	free(rs->rbuf);
	rs->rbuf = NULL;
err_qp:
	rdma_destroy_qp(rs->id);
	rs->qp = NULL;
err_cq:
	ibv_destroy_cq(rs->cq);
	rs->cq = NULL;
	ibv_destroy_comp_channel(rs->cch);
	rs->cch = NULL;
err_pd:
	ibv_dealloc_pd(rs->pd);
	rs->pd = NULL;
	return err;
}

void rs_io_teardown(struct rs *rs)
{
	int i;

	if (rs->qp) {
		rdma_destroy_qp(rs->id);
		rs->qp = NULL;
	}
	rs_lane_free(rs);
	for (i = 0; i < RS_IOMAPS; i++)
		if (rs->lmaps[i].used && rs->lmaps[i].mr)
			ibv_dereg_mr(rs->lmaps[i].mr);
	if (rs->wmr)
		ibv_dereg_mr(rs->wmr);
	free(rs->wbuf);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	free(rs->sbuf);
	if (rs->ctlmr)
		ibv_dereg_mr(rs->ctlmr);
	free(rs->ctl);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	free(rs->rbuf);
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cch)
		ibv_destroy_comp_channel(rs->cch);
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	rs->wmr = rs->smr = rs->ctlmr = rs->rmr = NULL;
	rs->wbuf = rs->sbuf = rs->rbuf = NULL;
	rs->ctl = NULL;
	rs->cq = NULL;
	rs->cch = NULL;
	rs->pd = NULL;
}

void rs_hello_fill(struct rs *rs, struct rs_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = htole32(RS_MAGIC);
	h->version = RS_VERSION;
	h->ring_addr = htole64((uintptr_t)rs->rbuf);
	h->ring_rkey = htole32(rs->rmr->rkey);
	h->ring_size = htole32(rs->rsize);
	h->rq_depth = htole32(RS_RQ_DEPTH);
	h->lane_qpn = htole32(rs->lane ? rs->lane->qp_num : 0);
}

/* The peer's hello (the CM's private data): -EPROTO if it is not ours. */
int rs_hello_take(struct rs *rs, const void *pdata, uint8_t len)
{
	struct rs_hello h;
	uint32_t size, rq;

	if (!pdata || len < sizeof(h))
		return -EPROTO;
	memcpy(&h, pdata, sizeof(h));
	size = le32toh(h.ring_size);
	rq = le32toh(h.rq_depth);
	if (le32toh(h.magic) != RS_MAGIC || h.version != RS_VERSION ||
	    size < RS_RING_MIN || size > RS_RING_MAX || rq < RS_RQ_MIN ||
	    rq > RS_RQ_MAX)
		return -EPROTO;
	rs->peer_addr = le64toh(h.ring_addr);
	rs->peer_rkey = le32toh(h.ring_rkey);
	rs->peer_rsize = size;
	rs->peer_rq = rq;
	rs->peer_lane = le32toh(h.lane_qpn) & 0xffffff;
	/* SO_SNDBUF's, or twice the peer's ring: completions that lag never
	 * cut the chunks small (each chunk costs the peer a receive) */
	rs->ssize = rs->sndbuf > 0 ? rs_ring_size(rs->sndbuf) : 2 * size;
	rs->sbuf = rs_ring_alloc(rs->ssize);
	if (!rs->sbuf)
		return -ENOMEM;
	rs->smr =
		ibv_reg_mr(rs->pd, rs->sbuf, rs->ssize, IBV_ACCESS_LOCAL_WRITE);
	if (!rs->smr) {
		free(rs->sbuf);
		rs->sbuf = NULL;
		return -errno;
	}
	return 0;
}

/* Peer receives we may still use. */
static int64_t msg_credits(const struct rs *rs)
{
	return (int64_t)rs->peer_rq + (int64_t)rs->peer_recvs -
	       (int64_t)rs->msgs_sent;
}

bool rs_can_talk(const struct rs *rs)
{
	return rs->qp && rs->sbuf && rs->state == RS_CONNECTED &&
	       !rs->disconnected;
}

int rs_send_ctrl(struct rs *rs, enum rs_ctrl_type t, const struct rs_iomap *m)
{
	unsigned int slot = RS_RQ_DEPTH + rs->ctrl_posted % RS_CTRL_SLOTS;
	struct rs_ctrl *c = &rs->ctl[slot];
	struct ibv_sge sge = {
		.addr = (uintptr_t)c,
		.length = sizeof(*c),
		.lkey = rs->ctlmr ? rs->ctlmr->lkey : 0,
	};
	struct ibv_send_wr wr =
				   {
					   .wr_id = RS_WR(RS_WR_CTRL, 0),
					   .sg_list = &sge,
					   .num_sge = 1,
					   .opcode = IBV_WR_SEND,
				   },
			   *bad;
	int64_t need =
		(t == RS_CTRL_IOMAP || t == RS_CTRL_UNMAP) ? RS_RESERVE + 1 : 1;
	int ret;

	if (!rs_can_talk(rs))
		return rs->state == RS_FAILED ? -rs->err : -ENOTCONN;
	if (msg_credits(rs) < need ||
	    rs->ctrl_posted - rs->ctrl_done >= RS_CTRL_SLOTS ||
	    rs->sq_used >= RS_SQ_DEPTH)
		return -EAGAIN;
	memset(c, 0, sizeof(*c));
	c->magic = htole32(RS_MAGIC);
	c->type = t;
	c->consumed = htole64(rs->consumed);
	c->recvs = htole64(rs->recvs_done);
	if (m) {
		c->offset = htole64(m->offset);
		c->addr = htole64(m->addr);
		c->len = htole64(m->len);
		c->rkey = htole32(m->rkey);
	}
	ret = ibv_post_send(rs->qp, &wr, &bad);
	if (ret)
		return -ret;
	rs->ctrl_posted++;
	rs->sq_used++;
	rs->msgs_sent++;
	rs->consumed_told = rs->consumed;
	rs->recvs_told = rs->recvs_done;
	return 0;
}

static void maybe_report(struct rs *rs)
{
	if (!rs_can_talk(rs))
		return;
	if (rs->consumed - rs->consumed_told >= rs->rsize / 2 ||
	    rs->recvs_done - rs->recvs_told >= RS_RQ_DEPTH / 4)
		rs_send_ctrl(rs, RS_CTRL_CREDIT, NULL);
}

static void bad_peer(struct rs *rs, const char *what, uint64_t v)
{
	fprintf(stderr,
		"softverbs rsocket %d: the peer broke the protocol (%s: %llu); "
		"connection reset\n",
		rs->fd, what, (unsigned long long)v);
	rs_fail(rs, ECONNRESET);
}

static void take_iomap(struct rs *rs, const struct rs_ctrl *c)
{
	uint64_t off = le64toh(c->offset), len = le64toh(c->len);
	uint64_t addr = le64toh(c->addr);
	int i, free_i = -1;

	if (c->type == RS_CTRL_UNMAP) {
		for (i = 0; i < RS_IOMAPS; i++)
			if (rs->rmaps[i].used && rs->rmaps[i].offset == off)
				rs->rmaps[i].used = false;
		return;
	}
	if (!len || off > (1ull << 62) || len > (1ull << 62) ||
	    addr + len < addr) {
		bad_peer(rs, "riomap window", len);
		return;
	}
	for (i = 0; i < RS_IOMAPS; i++) {
		struct rs_iomap *r = &rs->rmaps[i];

		if (r->used && off < r->offset + r->len &&
		    r->offset < off + len)
			r->used = false; /* replaced */
		if (!r->used && free_i < 0)
			free_i = i;
	}
	if (free_i < 0) {
		bad_peer(rs, "riomap windows", RS_IOMAPS + 1);
		return;
	}
	rs->rmaps[free_i] = (struct rs_iomap){
		.used = true,
		.offset = off,
		.len = len,
		.addr = addr,
		.rkey = le32toh(c->rkey),
	};
}

static void take_ctrl(struct rs *rs, const struct rs_ctrl *c, uint32_t len)
{
	uint64_t consumed, recvs;

	if (len != sizeof(*c) || le32toh(c->magic) != RS_MAGIC ||
	    c->type < RS_CTRL_CREDIT || c->type >= RS_CTRL_NTYPES) {
		bad_peer(rs, "control message length", len);
		return;
	}
	consumed = le64toh(c->consumed);
	recvs = le64toh(c->recvs);
	/* the peer cannot have read more than we sent, nor re-posted more
	 * receives than our messages used; counters never go back */
	if (consumed < rs->peer_consumed || consumed > rs->sent) {
		bad_peer(rs, "bytes read", consumed);
		return;
	}
	if (recvs < rs->peer_recvs || recvs > rs->msgs_sent) {
		bad_peer(rs, "receives re-posted", recvs);
		return;
	}
	rs->peer_consumed = consumed;
	rs->peer_recvs = recvs;
	switch (c->type) {
	case RS_CTRL_FIN:
		if (rs->fin_rcvd) {
			bad_peer(rs, "second FIN", 2);
			return;
		}
		rs->fin_rcvd = true;
		break;
	case RS_CTRL_IOMAP:
	case RS_CTRL_UNMAP:
		take_iomap(rs, c);
		break;
	case RS_CTRL_LANE:
		/* only our own connected lane; a lie costs the liar */
		rs->zc = rs->lane && rs->peer_lane;
		break;
	default:
		break;
	}
}

static void take_data(struct rs *rs, uint32_t len)
{
	uint64_t unread = rs->rcvd - rs->consumed;
	uint32_t pos = rs->rcvd % rs->rsize;

	if (rs->fin_rcvd) {
		bad_peer(rs, "bytes after FIN", len);
		return;
	}
	if (!len || len > rs->rsize - unread || pos + len > rs->rsize) {
		bad_peer(rs, "stream bytes", len);
		return;
	}
	rs->rcvd += len;
}

static void handle_wc(struct rs *rs, const struct ibv_wc *wc)
{
	unsigned int kind = RS_WR_KIND(wc->wr_id);
	uint64_t val = RS_WR_VAL(wc->wr_id);

	if (kind != RS_WR_RECV) {
		if (rs->sq_used)
			rs->sq_used--;
		if (kind == RS_WR_DATA)
			rs->acked += val;
		else if (kind == RS_WR_CTRL)
			rs->ctrl_done++;
		else if (kind == RS_WR_IOW)
			rs->wdone += val;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		/* flushed after a disconnect or a reset: expected */
		if (rs->state == RS_CONNECTED && !rs->disconnected) {
			if (wc->status != IBV_WC_WR_FLUSH_ERR)
				fprintf(stderr,
					"softverbs rsocket %d: %s; connection "
					"reset\n",
					rs->fd, ibv_wc_status_str(wc->status));
			rs_fail(rs, ECONNRESET);
		}
		return;
	}
	if (kind != RS_WR_RECV)
		return;
	if (val >= RS_RQ_DEPTH)
		return; /* not ours */
	/* the peer talks, so it is connected: as IB's "communication
	 * established", do not wait for the CM's ESTABLISHED to answer */
	if (rs->state == RS_ACCEPTING)
		rs->state = RS_CONNECTED;
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
		take_data(rs, ntohl(wc->imm_data));
	else if (wc->opcode == IBV_WC_RECV)
		take_ctrl(rs, &rs->ctl[val], wc->byte_len);
	else
		bad_peer(rs, "opcode", wc->opcode);
	if (rs->state == RS_FAILED || !rs->qp)
		return;
	if (post_recv(rs, (unsigned int)val) == 0)
		rs->recvs_done++;
}

static int poll_cq(struct rs *rs)
{
	struct ibv_wc wc[16];
	int n, i, total = 0;

	if (!rs->cq)
		return 0;
	do {
		n = ibv_poll_cq(rs->cq, 16, wc);
		for (i = 0; i < n; i++)
			handle_wc(rs, &wc[i]);
		if (n > 0)
			total += n;
	} while (n == 16);
	return total;
}

int rs_progress(struct rs *rs)
{
	int n = poll_cq(rs);

	if (rs->state != RS_LISTENING && !n)
		rs_cm_progress(rs);
	maybe_report(rs);
	return 0;
}

/* Consumes the completion channel's events (its fd is non-blocking). */
static void eat_cq_events(struct rs *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	while (rs->cch && ibv_get_cq_event(rs->cch, &cq, &ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		rs->cq_armed = false;
	}
}

uint64_t rs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Poll before blocking, as rdma-core's rsockets do (their polling_time):
 * a peer that answers within rs_spin_ns() is seen without arming the CQ,
 * a poll() and the peer's wake-up of our completion channel (a system
 * call each side).  Only the CQ (which runs the QP's engine) and a flag
 * of the CM channel are read: no system call.  True if something came.
 */
bool rs_spin(struct rs *rs)
{
	uint64_t end = 0, now;

	for (;;) {
		/* the clock after every RS_SPIN_LOOKS looks, not each, and
		 * not before the first: on a VM a clock_gettime costs as
		 * much as an empty look, and a peer that answers at once
		 * costs none (17 % of a blocking 8-byte ping-pong's CPU when
		 * read at each look) */
		for (int k = 0; k < RS_SPIN_LOOKS; k++) {
			if (poll_cq(rs))
				return true;
			if (rs->ech && cm_channel_pending(rs->ech))
				return true;
		}
		now = rs_now_ns();
		if (!end)
			end = now + rs_spin_ns();
		else if (now >= end)
			return false;
	}
}

/*
 * Sleeps until the CQ or the CM has something, or timeout_ms (-1: no
 * limit), after polling for rs_spin_ns().  The caller re-checks its
 * condition after rs_progress.
 */
int rs_wait(struct rs *rs, int timeout_ms)
{
	struct pollfd p[2];
	int n = 0, ret;

	if (timeout_ms != 0 && rs_spin(rs))
		return 0;
	if (rs->cq && !rs->cq_armed) {
		if (ibv_req_notify_cq(rs->cq, 0) == 0)
			rs->cq_armed = true;
		/* what came before the arming is in the CQ already */
		if (poll_cq(rs))
			return 0;
	}
	p[n++] = (struct pollfd){.fd = rs->fd, .events = POLLIN};
	if (rs->cch)
		p[n++] = (struct pollfd){.fd = rs->cch->fd, .events = POLLIN};
	pthread_mutex_unlock(&rs->lock);
	ret = poll(p, n, timeout_ms);
	pthread_mutex_lock(&rs->lock);
	if (ret < 0)
		return -errno;
	eat_cq_events(rs);
	return 0;
}

/* waits for cond (re-evaluated after each progress) or a deadline */
static int wait_until(struct rs *rs, bool (*cond)(struct rs *), int ms)
{
	uint64_t end = ms < 0 ? 0 : cm_now_ms() + ms;

	for (;;) {
		rs_progress(rs);
		if (cond(rs))
			return 0;
		if (rs->state == RS_FAILED)
			return -rs->err;
		if (ms >= 0 && cm_now_ms() >= end)
			return -ETIMEDOUT;
		rs_wait(rs, ms < 0 ? -1 : (int)(end - cm_now_ms()));
	}
}

bool rs_readable(struct rs *rs)
{
	return rs->rcvd != rs->consumed || rs->fin_rcvd || rs->shut_rd ||
	       rs->disconnected || rs->state == RS_FAILED ||
	       rs->state == RS_CLOSED;
}

static uint64_t send_room(const struct rs *rs)
{
	uint64_t peer_free, sb_free, contig;

	if (!rs_can_talk(rs) || rs->shut_wr)
		return 0;
	if (msg_credits(rs) <= RS_RESERVE ||
	    rs->sq_used >= RS_SQ_DEPTH - RS_CTRL_SLOTS)
		return 0;
	peer_free = rs->peer_rsize - (rs->sent - rs->peer_consumed);
	sb_free = rs->ssize - (rs->sent - rs->acked);
	contig = rs->peer_rsize - rs->sent % rs->peer_rsize;
	if (rs->ssize - rs->sent % rs->ssize < contig)
		contig = rs->ssize - rs->sent % rs->ssize;
	if (sb_free < peer_free)
		peer_free = sb_free;
	return peer_free < contig ? peer_free : contig;
}

bool rs_writable(struct rs *rs)
{
	return send_room(rs) > 0 || rs->state == RS_FAILED ||
	       rs->disconnected || rs->shut_wr;
}

static bool sends_done(struct rs *rs)
{
	return rs->sq_used == 0 || rs->disconnected;
}

int rs_drain(struct rs *rs, int timeout_ms)
{
	return wait_until(rs, sends_done, timeout_ms);
}

static bool connected_or_failed(struct rs *rs)
{
	return rs->state == RS_CONNECTED || rs->state == RS_FAILED ||
	       rs->state == RS_CLOSED;
}

/* Before any byte moves: 0 once connected, or -errno. */
int rs_ready_to_talk(struct rs *rs, bool dontwait)
{
	int ret;

	switch (rs->state) {
	case RS_CONNECTED:
		return 0;
	case RS_RESOLVING_ADDR:
	case RS_RESOLVING_ROUTE:
	case RS_CONNECTING:
	case RS_ACCEPTING:
		rs_progress(rs);
		if (rs->state == RS_CONNECTED)
			return 0;
		if (dontwait)
			return -EAGAIN;
		ret = wait_until(rs, connected_or_failed, -1);
		if (ret)
			return ret;
		return rs->state == RS_CONNECTED ? 0 : -ENOTCONN;
	case RS_FAILED:
		return -rs->err;
	default:
		return -ENOTCONN;
	}
}

/* chunk bytes of the iovecs from (*i, *io_off) to dst */
static void copy_in(uint8_t *dst, uint64_t chunk, const struct iovec *iov,
		    int *i, size_t *io_off)
{
	for (uint64_t done = 0; done < chunk;) {
		size_t n = iov[*i].iov_len - *io_off;

		if (n > chunk - done)
			n = chunk - done;
		memcpy(dst + done, (const uint8_t *)iov[*i].iov_base + *io_off,
		       n);
		done += n;
		*io_off += n;
		if (*io_off == iov[*i].iov_len) {
			(*i)++;
			*io_off = 0;
		}
	}
}

/*
 * Where a chunk's bytes come from (wr's one SGE, length and key set):
 * the program's buffer inline when small; nowhere when the lane wrote
 * them into the peer's ring already (the write carries only the
 * immediate); else the bounce ring, after a copy.  Advances (*i,
 * *io_off).  0, -EFAULT (the program's buffer) or -ECONNRESET (the lane
 * broke).
 */
static int stage_chunk(struct rs *rs, const struct iovec *iov, int *i,
		       size_t *io_off, uint64_t chunk, uint64_t raddr,
		       struct ibv_send_wr *wr)
{
	const uint8_t *p = (const uint8_t *)iov[*i].iov_base + *io_off;
	bool whole = chunk <= iov[*i].iov_len - *io_off;
	uint64_t pos;
	int ret;

	if (whole && chunk <= rs->max_inline) {
		wr->sg_list->addr = (uintptr_t)p;
		wr->send_flags = IBV_SEND_INLINE;
	} else if (whole && rs->zc && chunk >= RS_LANE_MIN &&
		   (ret = rs_lane_write(rs, p, (uint32_t)chunk, raddr,
					rs->peer_rkey)) != -EAGAIN) {
		if (ret)
			return ret;
		wr->num_sge = 0;
	} else {
		/* in sbuf; in the peer's ring it goes to raddr */
		pos = rs->sent % rs->ssize;
		copy_in(rs->sbuf + pos, chunk, iov, i, io_off);
		wr->sg_list->addr = (uintptr_t)(rs->sbuf + pos);
		return 0;
	}
	*io_off += chunk;
	if (*io_off == iov[*i].iov_len) {
		(*i)++;
		*io_off = 0;
	}
	return 0;
}

ssize_t rs_do_send(struct rs *rs, const struct iovec *iov, int iovcnt,
		   int flags)
{
	bool dontwait = rs->nonblock || (flags & MSG_DONTWAIT);
	size_t want = 0, total = 0, io_off = 0;
	int i = 0, ret;

	for (int k = 0; k < iovcnt; k++)
		want += iov[k].iov_len;
	ret = rs_ready_to_talk(rs, dontwait);
	if (ret)
		return ret;
	while (total < want) {
		uint64_t room, chunk, raddr;
		struct ibv_sge sge;
		struct ibv_send_wr wr = {0}, *bad;

		rs_progress(rs);
		if (rs->state == RS_FAILED)
			return total ? (ssize_t)total : -rs->err;
		if (rs->shut_wr || rs->disconnected ||
		    rs->state != RS_CONNECTED)
			return total ? (ssize_t)total : -EPIPE;
		room = send_room(rs);
		if (!room) {
			if (dontwait)
				return total ? (ssize_t)total : -EAGAIN;
			rs_wait(rs, -1);
			continue;
		}
		chunk = want - total < room ? want - total : room;
		/* several writes, not one of the whole ring: the peer reads
		 * (and gives the room back) while we copy the next one */
		if (chunk > RS_CHUNK_MAX)
			chunk = RS_CHUNK_MAX;
		raddr = rs->peer_addr + rs->sent % rs->peer_rsize;
		sge.length = (uint32_t)chunk;
		sge.lkey = rs->smr->lkey;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		ret = stage_chunk(rs, iov, &i, &io_off, chunk, raddr, &wr);
		if (ret == -EFAULT)
			return total ? (ssize_t)total : -EFAULT;
		if (ret) {
			rs_fail(rs, ECONNRESET);
			return total ? (ssize_t)total : -ECONNRESET;
		}
		wr.wr_id = RS_WR(RS_WR_DATA, chunk);
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl((uint32_t)chunk);
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rs->peer_rkey;
		ret = ibv_post_send(rs->qp, &wr, &bad);
		if (ret) {
			rs_fail(rs, ECONNRESET);
			return total ? (ssize_t)total : -ECONNRESET;
		}
		rs->sq_used++;
		rs->msgs_sent++;
		rs->sent += chunk;
		total += chunk;
	}
	return (ssize_t)total;
}

ssize_t rs_do_recv(struct rs *rs, const struct iovec *iov, int iovcnt,
		   int flags)
{
	bool dontwait = rs->nonblock || (flags & MSG_DONTWAIT);
	bool waitall = (flags & MSG_WAITALL) && !dontwait;
	size_t want = 0, total = 0, io_off = 0;
	uint64_t peek = rs->consumed;
	int i = 0, ret;

	for (int k = 0; k < iovcnt; k++)
		want += iov[k].iov_len;
	if (rs->state == RS_NEW || rs->state == RS_BOUND ||
	    rs->state == RS_LISTENING)
		return -ENOTCONN;
	ret = rs_ready_to_talk(rs, dontwait);
	if (ret && ret != -EAGAIN)
		return ret;
	if (ret == -EAGAIN && rs->rcvd == rs->consumed)
		return -EAGAIN;
	if (!want)
		return 0;
	for (;;) {
		uint64_t pos_abs = (flags & MSG_PEEK) ? peek : rs->consumed;
		uint64_t avail = rs->rcvd - pos_abs;

		if (rs->state == RS_FAILED)
			return total ? (ssize_t)total : -rs->err;
		while (avail && total < want) {
			uint32_t pos = pos_abs % rs->rsize;
			size_t n = rs->rsize - pos;

			if (n > avail)
				n = avail;
			if (n > iov[i].iov_len - io_off)
				n = iov[i].iov_len - io_off;
			memcpy((uint8_t *)iov[i].iov_base + io_off,
			       rs->rbuf + pos, n);
			total += n;
			avail -= n;
			pos_abs += n;
			io_off += n;
			if (io_off == iov[i].iov_len) {
				i++;
				io_off = 0;
			}
		}
		if (flags & MSG_PEEK)
			peek = pos_abs;
		else
			rs->consumed = pos_abs;
		if (total == want || (total && !waitall))
			break;
		rs_progress(rs);
		if (rs->rcvd != ((flags & MSG_PEEK) ? peek : rs->consumed))
			continue;
		if (rs->state == RS_FAILED)
			return total ? (ssize_t)total : -rs->err;
		if (rs->fin_rcvd || rs->shut_rd || rs->state == RS_CLOSED)
			break; /* EOF */
		if (rs->disconnected)
			return total ? (ssize_t)total : -ECONNRESET;
		if (dontwait)
			return total ? (ssize_t)total : -EAGAIN;
		rs_wait(rs, -1);
	}
	maybe_report(rs);
	return (ssize_t)total;
}
