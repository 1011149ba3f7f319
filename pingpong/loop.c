// SPDX-License-Identifier: MIT
/*
 * The ping-pong loop of the paper.  One function per concern: wait for
 * an event (-e), poll (plain or extended CQ for -t), handle one work
 * completion.  Receives are topped up before fewer than two remain;
 * every CQ event is counted so teardown can acknowledge it.
 */
#include "loop.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "explain.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Loop state that lives only while the loop runs. */
struct run {
	struct pp_loop *lp;
	unsigned int scnt; /* send completions */
	unsigned int rcnt; /* receive completions */
	uint64_t last_end; /* when the previous exchange ended, ns */
	bool have_last;	   /* last_end is meaningful */
	uint64_t prev_ts;  /* -t: previous receive timestamp */
	bool have_prev_ts;
};

/* Receives run low: post enough to be back at rx_depth. */
static int refill_recv(struct pp_loop *lp)
{
	struct pp_context *ctx = lp->ctx;
	int want = (int)ctx->rx_depth - lp->routs;

	lp->routs += pp_post_recv(ctx, want);
	pp_explain(PP_STEP_REFILL_RECV,
		   "ibv_post_recv() x %d -> %d receives outstanding", want,
		   lp->routs);
	if (lp->routs < (int)ctx->rx_depth) {
		fprintf(stderr, "Couldn't post receive (%d)\n", lp->routs);
		return -1;
	}
	return 0;
}

/* -t: deltas between receive completions, wrapping at the clock mask. */
static void account_ts(struct run *r, uint64_t ts)
{
	struct pp_ts_stats *s = &r->lp->ts;
	uint64_t mask = r->lp->ctx->completion_timestamp_mask;

	if (r->have_prev_ts) {
		uint64_t d = ts >= r->prev_ts ? ts - r->prev_ts
					      : mask - r->prev_ts + ts + 1;

		if (d > s->max_delta)
			s->max_delta = d;
		if (d < s->min_delta)
			s->min_delta = d;
		s->total_delta += d;
		s->iters++;
	}
	r->prev_ts = ts;
	r->have_prev_ts = true;
}

/* An exchange ended: record its latency, start the next if any. */
static int exchange_done(struct run *r)
{
	struct pp_loop *lp = r->lp;
	uint64_t t = now_ns();

	if (lp->lat_ns && r->have_last && lp->nlat < lp->iters)
		lp->lat_ns[lp->nlat++] = t - r->last_end;
	r->last_end = t;
	r->have_last = true;
	if (r->scnt >= lp->iters)
		return 0;
	if (pp_post_send(lp->ctx)) {
		fprintf(stderr, "Couldn't post send\n");
		return -1;
	}
	lp->ctx->pending = PINGPONG_RECV_WRID | PINGPONG_SEND_WRID;
	return 0;
}

static int handle_wc(struct run *r, uint64_t wr_id, enum ibv_wc_status st,
		     uint64_t ts)
{
	struct pp_loop *lp = r->lp;

	if (st != IBV_WC_SUCCESS) {
		fprintf(stderr, "Failed status %s (%d) for wr_id %d\n",
			ibv_wc_status_str(st), st, (int)wr_id);
		return -1;
	}
	switch ((int)wr_id) {
	case PINGPONG_SEND_WRID:
		r->scnt++;
		break;
	case PINGPONG_RECV_WRID:
		if (--lp->routs <= 1 && refill_recv(lp))
			return -1;
		r->rcnt++;
		if (lp->ctx->cq_ex)
			account_ts(r, ts);
		break;
	default:
		fprintf(stderr, "Completion for unknown wr_id %d\n",
			(int)wr_id);
		return -1;
	}
	lp->ctx->pending &= ~(int)wr_id;
	if (!lp->ctx->pending)
		return exchange_done(r);
	return 0;
}

/* Plain CQ: up to two completions (a send and a receive) per call. */
static int poll_plain(struct run *r)
{
	struct ibv_wc wc[2];
	int ne = ibv_poll_cq(r->lp->ctx->cq, 2, wc);

	if (ne < 0) {
		fprintf(stderr, "poll CQ failed %d\n", ne);
		return -1;
	}
	if (ne)
		pp_explain(PP_STEP_POLL_CQ, "ibv_poll_cq(cq, 2) -> %d", ne);
	for (int i = 0; i < ne; i++)
		if (handle_wc(r, wc[i].wr_id, wc[i].status, 0))
			return -1;
	return ne;
}

/* Extended CQ (-t): drains what is there, timestamps included. */
static int poll_ex(struct run *r)
{
	struct ibv_cq_ex *cq = r->lp->ctx->cq_ex;
	struct ibv_poll_cq_attr attr = {};
	int ret, n = 0;

	ret = ibv_start_poll(cq, &attr);
	if (ret == ENOENT)
		return 0;
	if (ret) {
		fprintf(stderr, "poll CQ failed %d\n", ret);
		return -1;
	}
	do {
		n++;
		if (handle_wc(r, cq->wr_id, cq->status,
			      ibv_wc_read_completion_ts(cq))) {
			ibv_end_poll(cq);
			return -1;
		}
		ret = ibv_next_poll(cq);
	} while (!ret);
	ibv_end_poll(cq);
	if (ret != ENOENT) {
		fprintf(stderr, "poll CQ failed %d\n", ret);
		return -1;
	}
	pp_explain(PP_STEP_POLL_CQ,
		   "ibv_start_poll/ibv_next_poll(cq_ex) -> %d with timestamps",
		   n);
	return n;
}

static int poll_once(struct run *r)
{
	return r->lp->ctx->cq_ex ? poll_ex(r) : poll_plain(r);
}

/* -e: sleep for an event, count it for the final ack, re-arm the CQ. */
static int wait_event(struct pp_context *ctx)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	if (ibv_get_cq_event(ctx->channel, &ev_cq, &ev_ctx)) {
		fprintf(stderr, "Failed to get cq_event\n");
		return -1;
	}
	ctx->num_cq_events++;
	if (ev_cq != ctx->cq) {
		fprintf(stderr, "CQ event for unknown CQ %p\n", (void *)ev_cq);
		return -1;
	}
	if (ibv_req_notify_cq(ctx->cq, 0)) {
		fprintf(stderr, "Couldn't request CQ notification\n");
		return -1;
	}
	pp_explain(PP_STEP_GET_CQ_EVENT, "ibv_get_cq_event(channel) -> our CQ; "
					 "ibv_req_notify_cq(cq, 0) re-arms it");
	return 0;
}

/* After an event (armed before polling), take everything queued. */
static int drain(struct run *r)
{
	int n;

	do {
		n = poll_once(r);
	} while (n > 0);
	return n < 0 ? -1 : 0;
}

int pp_loop_run(struct pp_loop *lp)
{
	struct pp_context *ctx = lp->ctx;
	struct run r = {.lp = lp};
	uint64_t start;

	lp->nlat = 0;
	lp->ts = (struct pp_ts_stats){.min_delta = 0xffffffff};
	ctx->pending = PINGPONG_RECV_WRID;
	if (lp->client) {
		r.last_end = now_ns();
		r.have_last = true;
		if (pp_post_send(ctx)) {
			fprintf(stderr, "Couldn't post send\n");
			return -1;
		}
		ctx->pending |= PINGPONG_SEND_WRID;
	}
	start = now_ns();
	/* The peer may have begun this run while we finished the last: its
	 * first message was counted there, so count it here and answer. */
	while (lp->early) {
		lp->early--;
		r.rcnt++;
		ctx->pending &= ~PINGPONG_RECV_WRID;
		if (!ctx->pending && exchange_done(&r))
			return -1;
	}
	while (r.rcnt < lp->iters || r.scnt < lp->iters) {
		int ret;

		if (ctx->channel)
			ret = wait_event(ctx) ? -1 : drain(&r);
		else
			ret = poll_once(&r);
		if (ret < 0)
			return -1;
	}
	lp->usec = (double)(now_ns() - start) / 1000.0;
	lp->early = r.rcnt - lp->iters;
	return 0;
}
