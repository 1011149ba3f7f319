// SPDX-License-Identifier: MIT
/*
 * Completion channels: the fd becomes readable on its own once an armed
 * CQ gets a completion (poll and epoll, O_NONBLOCK), events carry the CQ
 * and its context, solicited-only arming, EBUSY while a CQ uses it, and
 * waits that a signal without SA_RESTART ends with EINTR.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "pair.h"

static bool readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static void take_event(struct sv_end *e, struct ibv_cq *want)
{
	struct ibv_cq *cq = NULL;
	void *ctx = NULL;

	ASSERT_OK(ibv_get_cq_event(e->ch, &cq, &ctx));
	ASSERT_TRUE(cq == want);
	ASSERT_TRUE(ctx == e); /* the cq_context given at creation */
	ibv_ack_cq_events(cq, 1);
}

static struct sv_end_opts chan_opts(void)
{
	struct sv_end_opts o = sv_end_opts_default();

	o.channel = true;
	o.psn = 0x5678;
	return o;
}

SV_TEST(channel_poll_wakeup)
{
	struct sv_end_opts ob = chan_opts();
	struct sv_pair p;
	struct ibv_wc wc;

	sv_pair_open(&p, NULL, &ob);
	for (int i = 0; i < 2; i++)
		ASSERT_OK(sv_end_recv(&p.b, (uint64_t)i, 0, 64));
	for (int round = 0; round < 2; round++) {
		ASSERT_OK(ibv_req_notify_cq(p.b.rcq, 0));
		ASSERT_FALSE(readable(p.b.ch->fd, 0));
		ASSERT_OK(sv_end_send(&p.a, (uint64_t)round, 0, 64, 0));
		/* nobody polls b: its fd must become readable by itself */
		ASSERT_TRUE(readable(p.b.ch->fd, SV_WC_TIMEOUT_MS));
		take_event(&p.b, p.b.rcq);
		ASSERT_EQ(1, ibv_poll_cq(p.b.rcq, 1, &wc));
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ((uint64_t)round, wc.wr_id);
		WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
	}
	/* not re-armed: a third completion raises no event */
	ASSERT_OK(sv_end_recv(&p.b, 2, 0, 64));
	ASSERT_OK(sv_end_send(&p.a, 2, 0, 64, 0));
	WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_FALSE(readable(p.b.ch->fd, 50));
	sv_pair_close(&p);
}

SV_TEST(channel_epoll_nonblock)
{
	struct sv_end_opts ob = chan_opts();
	struct sv_pair p;
	struct epoll_event ev = {.events = EPOLLIN}, out;
	struct ibv_cq *cq;
	struct ibv_wc wc;
	void *ctx;
	int ep;

	sv_pair_open(&p, NULL, &ob);
	ASSERT_OK(fcntl(p.b.ch->fd, F_SETFL,
			fcntl(p.b.ch->fd, F_GETFL) | O_NONBLOCK));
	errno = 0;
	ASSERT_EQ(-1, ibv_get_cq_event(p.b.ch, &cq, &ctx));
	ASSERT_EQ(EAGAIN, errno);

	ep = epoll_create1(0);
	ASSERT_TRUE(ep >= 0);
	ev.data.ptr = p.b.ch;
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, p.b.ch->fd, &ev));
	ASSERT_OK(ibv_req_notify_cq(p.b.rcq, 0));
	ASSERT_EQ(0, epoll_wait(ep, &out, 1, 0));
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 64));
	ASSERT_OK(sv_end_send(&p.a, 1, 0, 64, 0));
	ASSERT_EQ(1, epoll_wait(ep, &out, 1, SV_WC_TIMEOUT_MS));
	ASSERT_TRUE(out.data.ptr == p.b.ch);
	take_event(&p.b, p.b.rcq);
	/* drained: non-blocking again says EAGAIN */
	errno = 0;
	ASSERT_EQ(-1, ibv_get_cq_event(p.b.ch, &cq, &ctx));
	ASSERT_EQ(EAGAIN, errno);
	ASSERT_EQ(0, epoll_wait(ep, &out, 1, 0));
	ASSERT_EQ(1, ibv_poll_cq(p.b.rcq, 1, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
	close(ep);
	sv_pair_close(&p);
}

SV_TEST(channel_solicited_only)
{
	struct sv_end_opts ob = chan_opts();
	struct sv_pair p;
	struct ibv_wc wc;

	sv_pair_open(&p, NULL, &ob);
	for (int i = 0; i < 2; i++)
		ASSERT_OK(sv_end_recv(&p.b, (uint64_t)i, 0, 64));
	ASSERT_OK(ibv_req_notify_cq(p.b.rcq, 1));
	ASSERT_OK(sv_end_send(&p.a, 0, 0, 64, 0));
	WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS); /* it arrived ... */
	ASSERT_EQ(0, wc.wr_id);
	ASSERT_FALSE(readable(p.b.ch->fd, 50)); /* ... and woke no one */
	ASSERT_OK(sv_end_send(&p.a, 1, 0, 64, IBV_SEND_SOLICITED));
	ASSERT_TRUE(readable(p.b.ch->fd, SV_WC_TIMEOUT_MS));
	take_event(&p.b, p.b.rcq);
	WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(1, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
	WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
	sv_pair_close(&p);
}

SV_TEST(channel_destroy_busy)
{
	struct sv_end e;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	ch = ibv_create_comp_channel(e.ctx);
	ASSERT_NOT_NULL(ch);
	cq = ibv_create_cq(e.ctx, 4, NULL, ch, 0);
	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(EBUSY, ibv_destroy_comp_channel(ch));
	ASSERT_OK(ibv_destroy_cq(cq));
	ASSERT_OK(ibv_destroy_comp_channel(ch));
	sv_end_close(&e);
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/*
 * alarm(1) with a handler installed without SA_RESTART, then a blocking
 * wait for an event that never comes: -1/EINTR within about a second, as
 * the read() of rdma-core's kernel fd gives (qperf ends timed tests so).
 * The harness's own deadline alarm is put back afterwards.
 */
static void wait_interrupted(int (*wait)(struct sv_end *), struct sv_end *e)
{
	struct sigaction sa = {.sa_handler = on_alarm}, old;
	unsigned int left;
	uint64_t t0;
	int rc;

	sigemptyset(&sa.sa_mask);
	ASSERT_OK(sigaction(SIGALRM, &sa, &old));
	alarms = 0;
	left = alarm(1);
	t0 = sv_now_ms();
	errno = 0;
	rc = wait(e);
	ASSERT_EQ(-1, rc);
	ASSERT_EQ(EINTR, errno);
	ASSERT_EQ(1, alarms);
	ASSERT_LE(sv_now_ms() - t0, 1500);
	ASSERT_OK(sigaction(SIGALRM, &old, NULL));
	alarm(left ? left : 60);
}

static int wait_cq_event(struct sv_end *e)
{
	struct ibv_cq *cq;
	void *ctx;

	return ibv_get_cq_event(e->ch, &cq, &ctx);
}

static int wait_async_event(struct sv_end *e)
{
	struct ibv_async_event ev;

	return ibv_get_async_event(e->ctx, &ev);
}

SV_TEST(channel_get_cq_event_eintr)
{
	struct sv_end_opts ob = chan_opts();
	struct sv_pair p;
	struct ibv_wc wc;

	sv_pair_open(&p, NULL, &ob);
	ASSERT_OK(sv_end_recv(&p.b, 7, 0, 64));
	ASSERT_OK(ibv_req_notify_cq(p.b.rcq, 0));
	wait_interrupted(wait_cq_event, &p.b);
	/* the channel still works after the interrupted wait */
	ASSERT_OK(sv_end_send(&p.a, 1, 0, 64, 0));
	take_event(&p.b, p.b.rcq);
	WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(7, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
	sv_pair_close(&p);
}

SV_TEST(channel_get_async_event_eintr)
{
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	wait_interrupted(wait_async_event, &e);
	sv_end_close(&e);
}
