// SPDX-License-Identifier: MIT
/*
 * Completion channels: the fd becomes readable on its own once an armed
 * CQ gets a completion (poll and epoll, O_NONBLOCK), events carry the CQ
 * and its context, solicited-only arming, EBUSY while a CQ uses it, and
 * waits that a signal without SA_RESTART ends with EINTR.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "pair.h"
#include "proc_thread.h"

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

/*
 * A QP whose receive CQ is armed is the progress thread's (drive.c look),
 * while the app may go on posting to it and polling its send CQ: UCX arms
 * its receive CQ for solicited events and polls the send CQ.  Posts whose
 * entries complete in them (RDMA writes into shared memory) must not wake
 * the thread one by one: 300 ms of 8-byte writes, each polled to its
 * completion, on one CPU, cost the context's progress threads a few
 * wake-ups (2-3 here; 60, one per 5 ms park check, when parked below)
 * and under a millisecond of CPU.  Before post.c's tell_thread a look
 * found nothing due and left look_at 0, so each post asked for another
 * (sv_qp_note_work): 15,200-20,600 switches and 61-82 ms of the thread's
 * CPU here, a third fewer writes, and UCX's put_bw at 4 KiB at 7.7-8.8
 * GB/s instead of 11.3-12 in half the runs.
 */
static void posts_do_not_wake(bool arm)
{
	struct sv_end_opts oa = chan_opts(), ob = sv_end_opts_default();
	const char *key = "voluntary_ctxt_switches";
	long long before, after, cpu0, cpu;
	struct timespec t0, t;
	struct sv_pair p;
	struct ibv_wc wc;
	cpu_set_t all, one;
	uint64_t n = 0;

	/* over TCP the thread of a QP whose CQ is armed watches its socket,
	 * and the peer's (not polled) answers each write: a wake-up each */
	sv_test_needs_shm("writes done by the initiator, no peer thread");
	/* one CPU for the app and the progress threads, as a benchmark's
	 * taskset: the thread runs when the app is between posts, not
	 * holding the QP's lock (on two CPUs its looks mostly find the lock
	 * taken and come back a check period later) */
	ASSERT_OK(sched_getaffinity(0, sizeof(all), &all));
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	ASSERT_OK(sched_setaffinity(0, sizeof(one), &one));
	ob.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	ob.qp_access = IBV_ACCESS_REMOTE_WRITE;
	sv_pair_open(&p, &oa, &ob); /* its threads inherit the CPU */
	sv_pair_ping(&p);
	if (arm) /* solicited: never fires */
		ASSERT_OK(ibv_req_notify_cq(p.a.rcq, 1));
	before = sv_threads_sum("softverbs-prog", key);
	cpu0 = sv_threads_cpu_ns("softverbs-prog");
	ASSERT_TRUE(before >= 0 && cpu0 >= 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		struct ibv_sge sg = {.addr = (uintptr_t)p.a.buf,
				     .length = 8,
				     .lkey = p.a.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = n,
					 .sg_list = &sg,
					 .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		wr.wr.rdma.remote_addr = (uintptr_t)p.b.buf;
		wr.wr.rdma.rkey = p.b.mr->rkey;
		memcpy(p.a.buf, &n, 8);
		ASSERT_OK(ibv_post_send(p.a.qp, &wr, &bad));
		WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(n, wc.wr_id);
		if (!arm) /* the receive CQ polled too: the QP parks */
			ASSERT_EQ(0, ibv_poll_cq(p.a.rcq, 1, &wc));
		n++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000000ll +
			 (t.tv_nsec - t0.tv_nsec) <
		 300000000ll);
	after = sv_threads_sum("softverbs-prog", key);
	cpu = sv_threads_cpu_ns("softverbs-prog") - cpu0;
	ASSERT_EQ(0, memcmp(p.b.buf, &(uint64_t){n - 1}, 8));
	fprintf(stderr,
		"%llu writes; the progress threads: %lld switches, %lld us "
		"on a CPU\n",
		(unsigned long long)n, after - before, cpu / 1000);
	ASSERT_LE(after - before, 200);
	ASSERT_LE(cpu, 30000000ll); /* a tenth of the 300 ms */
	sv_pair_close(&p);
	ASSERT_OK(sched_setaffinity(0, sizeof(all), &all));
}

SV_TEST(channel_armed_cq_posts_do_not_wake_the_thread)
{
	posts_do_not_wake(true);
}

/*
 * The same with the receive CQ polled, not armed: the QP is idle between
 * posts, and the progress thread leaves it to those polls (parked, look_at
 * 0).  Before post.c's tell_thread each post asked for a look, which
 * parked it again: 7,100-10,900 switches and 40-55 ms of the thread's CPU
 * in the 300 ms.
 */
SV_TEST(channel_parked_qp_posts_do_not_wake_the_thread)
{
	posts_do_not_wake(false);
}

/*
 * An event-driven ping-pong (rc_pingpong -e): each end arms its receive
 * CQ, posts, and waits in ibv_get_cq_event, whose spin runs the engine.
 * A QP whose CQ is armed is the progress thread's, with its sleep flags
 * up, so each packet of the peer rang our doorbell (a 1-byte send) and
 * woke that thread to do what the spin was doing.  Now the flags come
 * down while the app spins (drive.c sv_qp_spin_begin).  Both threads and
 * all progress threads on one CPU, and a spin of 5 s: a waiter spins
 * until the other thread has run, so what it waits for comes while it
 * spins.  The doorbells rung in 200 round trips: 800 before, 2-9 now
 * (a message that comes between two spins).  This program defines send
 * to count them (librdmacm's and ours go on to the next definition).
 */
#define EV_ROUNDS 200

static atomic_bool counting_bells;
static atomic_long n_bells;

typedef ssize_t (*send_fn)(int, const void *, size_t, int);

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	/* every thread of every test of this program comes here */
	static _Atomic(send_fn) next;
	send_fn f = atomic_load_explicit(&next, memory_order_acquire);

	if (!f) {
		f = (send_fn)dlsym(RTLD_NEXT, "send");
		atomic_store_explicit(&next, f, memory_order_release);
	}
	if (len == 1 && atomic_load(&counting_bells))
		atomic_fetch_add(&n_bells, 1);
	return f(fd, buf, len, flags);
}

static void ev_wait_recv(struct sv_end *e, uint64_t want)
{
	struct ibv_wc wc;

	for (;;) {
		int n;

		ASSERT_OK(ibv_req_notify_cq(e->rcq, 0));
		n = ibv_poll_cq(e->rcq, 1, &wc);
		ASSERT_GE(n, 0);
		if (n == 1) {
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
			ASSERT_EQ(want, wc.wr_id);
			return;
		}
		take_event(e, e->rcq);
	}
}

static void *ev_echo(void *arg)
{
	struct sv_end *b = arg;

	for (uint64_t i = 0; i < EV_ROUNDS; i++) {
		ev_wait_recv(b, i);
		ASSERT_OK(sv_end_recv(b, i + 1, 0, 64));
		ASSERT_OK(sv_end_send(b, i, 64, 64, 0));
	}
	return NULL;
}

SV_TEST(channel_spinning_waiter_is_not_rung)
{
	struct sv_end_opts oa = chan_opts(), ob = chan_opts();
	const char *key = "voluntary_ctxt_switches";
	long long before, after;
	cpu_set_t all, one;
	struct sv_pair p;
	pthread_t t;
	long bells;

	sv_test_needs_shm("doorbells are the shared-memory wake-up");
	ASSERT_OK(setenv("SOFTVERBS_EVENT_SPIN_US", "5000000", 1));
	ASSERT_OK(sched_getaffinity(0, sizeof(all), &all));
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	ASSERT_OK(sched_setaffinity(0, sizeof(one), &one));
	oa.sq_sig_all = ob.sq_sig_all = false; /* only receives complete */
	sv_pair_open(&p, &oa, &ob);	       /* its threads inherit the CPU */
	ASSERT_OK(sv_end_recv(&p.a, 0, 0, 64));
	ASSERT_OK(sv_end_recv(&p.b, 0, 0, 64));
	/* -1 while no progress thread runs yet: then the count is from 0 */
	before = sv_threads_sum("softverbs-prog", key);
	atomic_store(&counting_bells, true);
	ASSERT_OK(pthread_create(&t, NULL, ev_echo, &p.b));
	for (uint64_t i = 0; i < EV_ROUNDS; i++) {
		ASSERT_OK(sv_end_send(&p.a, i, 64, 64, 0));
		ev_wait_recv(&p.a, i);
		ASSERT_OK(sv_end_recv(&p.a, i + 1, 0, 64));
	}
	ASSERT_OK(pthread_join(t, NULL));
	atomic_store(&counting_bells, false);
	bells = atomic_load(&n_bells);
	after = sv_threads_sum("softverbs-prog", key);
	fprintf(stderr,
		"%d event-driven round trips: %ld doorbells; the progress "
		"threads switched %lld times\n",
		EV_ROUNDS, bells, after - (before > 0 ? before : 0));
	ASSERT_LE(bells, EV_ROUNDS / 2);
	sv_pair_close(&p);
	ASSERT_OK(sched_setaffinity(0, sizeof(all), &all));
}
