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
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "objects.h"
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

/* This thread, and the threads it starts, on the CPU it runs on; *all
 * the CPUs it had. */
static void pin_here(cpu_set_t *all)
{
	cpu_set_t one;

	ASSERT_OK(sched_getaffinity(0, sizeof(*all), all));
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	ASSERT_OK(sched_setaffinity(0, sizeof(one), &one));
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
	cpu_set_t all;
	uint64_t n = 0;

	/* over TCP the thread of a QP whose CQ is armed watches its socket,
	 * and the peer's (not polled) answers each write: a wake-up each */
	sv_test_needs_shm("writes done by the initiator, no peer thread");
	/* one CPU for the app and the progress threads, as a benchmark's
	 * taskset: the thread runs when the app is between posts, not
	 * holding the QP's lock (on two CPUs its looks mostly find the lock
	 * taken and come back a check period later) */
	pin_here(&all);
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

/* The channel fds whose system calls are counted (-1: none), and the
 * counts: an eventfd's 8-byte write and read, fcntl. */
static _Atomic int watch_fd[2] = {-1, -1};
static atomic_long n_fd_writes, n_fd_reads, n_fd_fcntls;

static bool watched(int fd)
{
	return fd >= 0 && (fd == atomic_load(&watch_fd[0]) ||
			   fd == atomic_load(&watch_fd[1]));
}

/* The next definition of name (librdmacm's and ours go on to it). */
static void *next_fn(_Atomic(void *) *slot, const char *name)
{
	void *f = atomic_load_explicit(slot, memory_order_acquire);

	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		atomic_store_explicit(slot, f, memory_order_release);
	}
	return f;
}

typedef ssize_t (*send_fn)(int, const void *, size_t, int);
typedef ssize_t (*rw_fn)(int, void *, size_t);
typedef int (*fcntl_fn)(int, int, ...);

/* every thread of every test of this program comes here */
ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	static _Atomic(void *) next;
	send_fn f = (send_fn)next_fn(&next, "send");

	if (len == 1 && atomic_load(&counting_bells))
		atomic_fetch_add(&n_bells, 1);
	return f(fd, buf, len, flags);
}

ssize_t write(int fd, const void *buf, size_t len)
{
	static _Atomic(void *) next;
	rw_fn f = (rw_fn)next_fn(&next, "write");

	if (len == 8 && watched(fd))
		atomic_fetch_add(&n_fd_writes, 1);
	return f(fd, (void *)buf, len);
}

ssize_t read(int fd, void *buf, size_t len)
{
	static _Atomic(void *) next;
	rw_fn f = (rw_fn)next_fn(&next, "read");

	if (len == 8 && watched(fd))
		atomic_fetch_add(&n_fd_reads, 1);
	return f(fd, buf, len);
}

int fcntl(int fd, int cmd, ...)
{
	static _Atomic(void *) next;
	fcntl_fn f = (fcntl_fn)next_fn(&next, "fcntl");
	va_list ap;
	void *arg;

	va_start(ap, cmd); /* as glibc's own: an int, a pointer or nothing */
	arg = va_arg(ap, void *);
	va_end(ap);
	if (watched(fd))
		atomic_fetch_add(&n_fd_fcntls, 1);
	return f(fd, cmd, arg);
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

/* EV_ROUNDS event-driven round trips of a with b's echo (a thread),
 * receive 0 posted on both ends already. */
static void ev_round_trips(struct sv_pair *p)
{
	pthread_t t;

	ASSERT_OK(pthread_create(&t, NULL, ev_echo, &p->b));
	for (uint64_t i = 0; i < EV_ROUNDS; i++) {
		ASSERT_OK(sv_end_send(&p->a, i, 64, 64, 0));
		ev_wait_recv(&p->a, i);
		ASSERT_OK(sv_end_recv(&p->a, i + 1, 0, 64));
	}
	ASSERT_OK(pthread_join(t, NULL));
}

struct ev_counts {
	long bells;		    /* doorbells rung */
	long writes, reads, fcntls; /* on the two channels' fds */
	long long switches;	    /* of the progress threads */
};

/*
 * An event-driven ping-pong (rc_pingpong -e) of EV_ROUNDS round trips:
 * each end arms its receive CQ, posts, and waits in ibv_get_cq_event,
 * whose spin runs the engine.  Both threads and all progress threads on
 * one CPU, and a spin of 5 s: a waiter spins until the other thread has
 * run, so what it waits for comes while it spins.
 */
static void ev_ping_pong(struct ev_counts *c)
{
	struct sv_end_opts oa = chan_opts(), ob = chan_opts();
	const char *key = "voluntary_ctxt_switches";
	long long before, after;
	cpu_set_t all;
	struct sv_pair p;

	ASSERT_OK(setenv("SOFTVERBS_EVENT_SPIN_US", "5000000", 1));
	pin_here(&all);
	oa.sq_sig_all = ob.sq_sig_all = false; /* only receives complete */
	sv_pair_open(&p, &oa, &ob);	       /* its threads inherit the CPU */
	ASSERT_OK(sv_end_recv(&p.a, 0, 0, 64));
	ASSERT_OK(sv_end_recv(&p.b, 0, 0, 64));
	/* -1 while no progress thread runs yet: then the count is from 0 */
	before = sv_threads_sum("softverbs-prog", key);
	atomic_store(&n_bells, 0);
	atomic_store(&n_fd_writes, 0);
	atomic_store(&n_fd_reads, 0);
	atomic_store(&n_fd_fcntls, 0);
	atomic_store(&watch_fd[0], p.a.ch->fd);
	atomic_store(&watch_fd[1], p.b.ch->fd);
	atomic_store(&counting_bells, true);
	ev_round_trips(&p);
	atomic_store(&counting_bells, false);
	atomic_store(&watch_fd[0], -1);
	atomic_store(&watch_fd[1], -1);
	after = sv_threads_sum("softverbs-prog", key);
	c->bells = atomic_load(&n_bells);
	c->writes = atomic_load(&n_fd_writes);
	c->reads = atomic_load(&n_fd_reads);
	c->fcntls = atomic_load(&n_fd_fcntls);
	c->switches = after - (before > 0 ? before : 0);
	fprintf(stderr,
		"%d event-driven round trips: %ld doorbells; the channels' fds "
		"%ld writes, %ld reads, %ld fcntls; the progress threads "
		"switched %lld times\n",
		EV_ROUNDS, c->bells, c->writes, c->reads, c->fcntls,
		c->switches);
	/* no event is left behind, uncounted or counted */
	ASSERT_FALSE(readable(p.a.ch->fd, 0));
	ASSERT_FALSE(readable(p.b.ch->fd, 0));
	sv_pair_close(&p);
	ASSERT_OK(sched_setaffinity(0, sizeof(all), &all));
}

/*
 * A QP whose CQ is armed is the progress thread's, with its sleep flags
 * up, so each packet of the peer rang our doorbell (a 1-byte send) and
 * woke that thread to do what the spin was doing.  Now the flags come
 * down while the app spins (drive.c sv_qp_spin_begin).  The doorbells
 * rung in 200 round trips: 800 before, 2-9 now (a message that comes
 * between two spins).  This program defines send to count them.
 */
SV_TEST(channel_spinning_waiter_is_not_rung)
{
	struct ev_counts c;

	sv_test_needs_shm("doorbells are the shared-memory wake-up");
	ev_ping_pong(&c);
	ASSERT_LE(c.bells, EV_ROUNDS / 2);
}

/*
 * The event a waiter's own spin raises needs no count on the eventfd:
 * it takes it next (core/event.c sv_channel_signal).  And a wait need
 * not ask fcntl whether the fd is non-blocking each time (channel.c
 * nonblocking).  Before, each event cost a write and a read of the
 * eventfd, and each wait an fcntl: 400 of each in 200 round trips (two
 * events each), and rc_pingpong -e took 23-26 us a round trip on one
 * host against 7-8 now.
 */
SV_TEST(channel_spinning_waiter_takes_its_event_without_system_calls)
{
	struct ev_counts c;

	sv_test_needs_shm("what the spin finds must come while it spins");
	ev_ping_pong(&c);
	ASSERT_LE(c.writes, EV_ROUNDS / 4);
	ASSERT_LE(c.reads, EV_ROUNDS / 4);
	ASSERT_LE(c.fcntls, 2 * (2 * EV_ROUNDS / 64 + 2));
}

/* The drives of the app (engine/drive.c sv_qp_drive) a QP has had. */
static uint64_t drives(struct ibv_qp *qp)
{
	return atomic_load_explicit(&to_sqp(qp)->prog.drives,
				    memory_order_relaxed);
}

/*
 * A waiter's spin runs the QPs of its channel's CQs, not every QP of its
 * context (verbs/channel.c spin_pass): the cost of a wait does not grow
 * with the idle QPs beside it.  64 QPs of a's context, connected in
 * pairs and idle, on CQs of no channel; a then makes EV_ROUNDS
 * event-driven round trips on its own QP.  Before, each pass of each
 * spin drove every one of the 64: 27,456 drives of them in one run here
 * (about 430 each; how many depends on how long the spins ran).
 */
SV_TEST(channel_spin_runs_only_the_channels_qps)
{
	enum { IDLE = 64 };
	struct sv_end_opts o = chan_opts();
	struct sv_end idle[IDLE];
	uint64_t before[IDLE], a_before, moved = 0, t0;
	struct sv_pair p;

	o.sq_sig_all = false; /* only receives complete */
	sv_pair_open(&p, &o, &o);
	for (int i = 0; i < IDLE; i++)
		sv_end_on_objects(&idle[i], p.a.ctx, p.a.pd, p.a.mr, p.a.buf);
	for (int i = 0; i < IDLE; i += 2) {
		sv_end_connect(&idle[i], idle[i + 1].qp->qp_num, 0);
		sv_end_connect(&idle[i + 1], idle[i].qp->qp_num, 0);
	}
	for (int i = 0; i < IDLE; i++)
		before[i] = drives(idle[i].qp);
	a_before = drives(p.a.qp);
	ASSERT_OK(sv_end_recv(&p.a, 0, 0, 64));
	ASSERT_OK(sv_end_recv(&p.b, 0, 0, 64));
	t0 = sv_now_ms();
	ev_round_trips(&p);
	for (int i = 0; i < IDLE; i++)
		moved += drives(idle[i].qp) - before[i];
	fprintf(stderr,
		"%d event-driven round trips in %llu ms beside %d idle QPs: "
		"a's QP driven %llu times, the idle ones %llu\n",
		EV_ROUNDS, (unsigned long long)(sv_now_ms() - t0), IDLE,
		(unsigned long long)(drives(p.a.qp) - a_before),
		(unsigned long long)moved);
	ASSERT_GE(drives(p.a.qp), a_before + 1); /* the waits ran it */
	ASSERT_EQ(0ull, (unsigned long long)moved);
	for (int i = 0; i < IDLE; i++)
		sv_end_off_objects(&idle[i]);
	sv_pair_close(&p);
}

struct cq_churn {
	struct sv_end *e;
	atomic_bool stop;
	long made;
};

/* CQs on e's channel, each with a QP on it, made and destroyed until
 * told to stop. */
static void *cq_churn(void *arg)
{
	struct cq_churn *c = arg;

	while (!atomic_load(&c->stop)) {
		struct ibv_cq *cq =
			ibv_create_cq(c->e->ctx, 16, NULL, c->e->ch, 0);
		struct ibv_qp_init_attr ia = {.send_cq = cq,
					      .recv_cq = cq,
					      .cap = {.max_send_wr = 4,
						      .max_recv_wr = 4,
						      .max_send_sge = 1,
						      .max_recv_sge = 1},
					      .qp_type = IBV_QPT_RC};
		struct ibv_qp *qp;

		ASSERT_NOT_NULL(cq);
		qp = ibv_create_qp(c->e->pd, &ia);
		ASSERT_NOT_NULL(qp);
		ASSERT_OK(ibv_destroy_qp(qp));
		ASSERT_OK(ibv_destroy_cq(cq));
		c->made++;
	}
	return NULL;
}

/*
 * The channel's list of CQs, which a waiter's spin walks, changes under
 * it: another thread makes and destroys CQs on the same channel (and a
 * QP on each) while a makes event-driven round trips.  TSan and ASan
 * watch the walk (tsan label).
 */
SV_TEST(channel_cqs_come_and_go_beside_a_spinning_waiter)
{
	struct sv_end_opts o = chan_opts();
	struct cq_churn c = {0};
	struct sv_pair p;
	pthread_t churn;

	o.sq_sig_all = false;
	sv_pair_open(&p, &o, &o);
	c.e = &p.a;
	ASSERT_OK(sv_end_recv(&p.a, 0, 0, 64));
	ASSERT_OK(sv_end_recv(&p.b, 0, 0, 64));
	ASSERT_OK(pthread_create(&churn, NULL, cq_churn, &c));
	ev_round_trips(&p);
	atomic_store(&c.stop, true);
	ASSERT_OK(pthread_join(churn, NULL));
	fprintf(stderr, "%d round trips beside %ld CQs made and destroyed\n",
		EV_ROUNDS, c.made);
	ASSERT_GE(c.made, 1);
	sv_pair_close(&p);
}

/*
 * Two events raised in one wait: the waiter takes one, and the other is
 * counted before it returns (the fd readable, a non-blocking read takes
 * it).  Both of a's CQs are on its channel and armed; a sends to b and b
 * to a, all on one CPU, then a waits: its spin takes b's message, and
 * b's ACK once b's progress thread made it (or a's progress thread takes
 * them first, and counts both).
 */
SV_TEST(channel_second_event_of_a_wait_is_counted)
{
	struct sv_end_opts oa = chan_opts();
	struct ibv_cq *first = NULL, *second = NULL;
	cpu_set_t all;
	struct ibv_wc wc;
	struct sv_pair p;
	void *ctx;
	int fl;

	ASSERT_OK(setenv("SOFTVERBS_EVENT_SPIN_US", "5000000", 1));
	pin_here(&all);
	sv_pair_open(&p, &oa, NULL);
	ASSERT_OK(sv_end_recv(&p.a, 1, 0, 64));
	ASSERT_OK(sv_end_recv(&p.b, 2, 0, 64));
	ASSERT_OK(ibv_req_notify_cq(p.a.scq, 0));
	ASSERT_OK(ibv_req_notify_cq(p.a.rcq, 0));
	atomic_store(&n_fd_writes, 0);
	atomic_store(&watch_fd[0], p.a.ch->fd);
	ASSERT_OK(sv_end_send(&p.a, 3, 64, 64, 0));
	ASSERT_OK(sv_end_send(&p.b, 4, 64, 64, 0));
	ASSERT_OK(ibv_get_cq_event(p.a.ch, &first, &ctx));
	if (!readable(p.a.ch->fd, 0)) { /* the other not raised yet */
		ASSERT_OK(ibv_get_cq_event(p.a.ch, &second, &ctx));
	} else {
		fl = fcntl(p.a.ch->fd, F_GETFL);
		ASSERT_OK(fcntl(p.a.ch->fd, F_SETFL, fl | O_NONBLOCK));
		ASSERT_OK(ibv_get_cq_event(p.a.ch, &second, &ctx));
		ASSERT_OK(fcntl(p.a.ch->fd, F_SETFL, fl));
	}
	atomic_store(&watch_fd[0], -1);
	fprintf(stderr, "two events, the channel's eventfd written %ld times\n",
		atomic_load(&n_fd_writes));
	ASSERT_TRUE(first != second);
	ASSERT_TRUE(first == p.a.scq || first == p.a.rcq);
	ASSERT_TRUE(second == p.a.scq || second == p.a.rcq);
	ibv_ack_cq_events(first, 1);
	ibv_ack_cq_events(second, 1);
	ASSERT_FALSE(readable(p.a.ch->fd, 0));
	ASSERT_EQ(1, ibv_poll_cq(p.a.scq, 1, &wc));
	ASSERT_EQ(1, ibv_poll_cq(p.a.rcq, 1, &wc));
	WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	WAIT_WC(p.b.scq, &wc, SV_WC_TIMEOUT_MS);
	sv_pair_close(&p);
	ASSERT_OK(sched_setaffinity(0, sizeof(all), &all));
}

/*
 * The fd's flags stay the app's: a wait that found the fd blocking, and
 * then O_NONBLOCK set, fails EAGAIN with nothing queued; set back, a wait
 * takes the event another thread's send raises (the read blocks for it,
 * whatever the last look at the flags said).
 */
static void *send_later(void *arg)
{
	struct sv_pair *p = arg;

	ASSERT_OK(sv_end_send(&p->a, 9, 0, 64, 0));
	return NULL;
}

SV_TEST(channel_wait_follows_the_fds_flags)
{
	struct sv_end_opts ob = chan_opts();
	struct ibv_cq *cq;
	struct ibv_wc wc;
	struct sv_pair p;
	pthread_t t;
	void *ctx;
	int fl;

	ASSERT_OK(setenv("SOFTVERBS_EVENT_SPIN_US", "50", 1));
	sv_pair_open(&p, NULL, &ob);
	fl = fcntl(p.b.ch->fd, F_GETFL);
	for (int round = 0; round < 3; round++) {
		/* blocking: an event comes (the first look at the flags) */
		ASSERT_OK(sv_end_recv(&p.b, 0, 0, 64));
		ASSERT_OK(ibv_req_notify_cq(p.b.rcq, 0));
		ASSERT_OK(pthread_create(&t, NULL, send_later, &p));
		take_event(&p.b, p.b.rcq);
		ASSERT_OK(pthread_join(t, NULL));
		ASSERT_EQ(1, ibv_poll_cq(p.b.rcq, 1, &wc));
		WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
		/* non-blocking now, nothing queued: EAGAIN, not a wait */
		ASSERT_OK(fcntl(p.b.ch->fd, F_SETFL, fl | O_NONBLOCK));
		ASSERT_EQ(-1, ibv_get_cq_event(p.b.ch, &cq, &ctx));
		ASSERT_EQ(EAGAIN, errno);
		ASSERT_EQ(-1, ibv_get_cq_event(p.b.ch, &cq, &ctx));
		ASSERT_EQ(EAGAIN, errno);
		/* blocking again: waits for the event, no EAGAIN */
		ASSERT_OK(fcntl(p.b.ch->fd, F_SETFL, fl));
	}
	sv_pair_close(&p);
}
