// SPDX-License-Identifier: MIT
/*
 * rsockets' data path costs no system call per message on shared memory
 * (issue 27 item 4): a ping-pong of non-blocking rsend/rrecv (rstream's
 * default) and one that waits in rpoll with rsockets only.  Every fcntl
 * and poll the process makes while the messages move is counted: this
 * program defines both, so librdmacm's calls come here first and go on
 * to the next definition (the sanitizer's or libc's) by RTLD_NEXT.
 * Before the fix each empty rrecv read the CM channel (rdma_get_cm_event:
 * its lock and an fcntl) and each rpoll pass made a poll() of no wait.
 * One thread and both ends in this process: the counts do not depend on
 * the machine's load.  And a blocking wait polls as long as
 * SOFTVERBS_EVENT_SPIN_US says before it sleeps (a poll() each sleep).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <rdma/rsocket.h>

#include "sv_test.h"

#define WAIT_MS		10000
#define ROUNDS		2000
#define BLOCKING_ROUNDS 100

static atomic_bool counting;
static atomic_long n_fcntl, n_poll;

int fcntl(int fd, int cmd, ...)
{
	static int (*next)(int, int, ...);
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!next)
		next = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl");
	if (atomic_load(&counting))
		atomic_fetch_add(&n_fcntl, 1);
	return next(fd, cmd, arg);
}

int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	static int (*next)(struct pollfd *, nfds_t, int);

	if (!next)
		next = (int (*)(struct pollfd *, nfds_t, int))dlsym(RTLD_NEXT,
								    "poll");
	if (atomic_load(&counting))
		atomic_fetch_add(&n_poll, 1);
	return next(fds, nfds, timeout);
}

/* A connected pair in this process, both ends non-blocking. */
static void pair(int *a, int *b)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	uint64_t end = sv_now_ms() + WAIT_MS;
	int l = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
	bool out = false;

	ASSERT_GE(l, 0);
	ASSERT_OK(rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_OK(rbind(l, (struct sockaddr *)&sa, sizeof(sa)));
	ASSERT_OK(rlisten(l, 4));
	ASSERT_OK(rgetsockname(l, (struct sockaddr *)&sa, &len));
	*a = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ASSERT_GE(*a, 0);
	ASSERT_EQ(-1, rconnect(*a, (struct sockaddr *)&sa, sizeof(sa)));
	ASSERT_EQ(EINPROGRESS, errno);
	*b = -1;
	while (*b < 0 || !out) {
		struct pollfd p[2] = {{.fd = l, .events = POLLIN},
				      {.fd = *a, .events = POLLOUT}};

		ASSERT_TRUE(sv_now_ms() < end);
		ASSERT_GE(rpoll(p, 2, 100), 0);
		if (*b < 0 && (p[0].revents & POLLIN)) {
			*b = raccept(l, NULL, NULL);
			if (*b < 0)
				ASSERT_EQ(EAGAIN, errno);
		}
		out = out || (p[1].revents & POLLOUT);
		ASSERT_FALSE(p[1].revents & POLLERR);
	}
	ASSERT_OK(rclose(l));
	ASSERT_OK(rfcntl(*b, F_SETFL, O_NONBLOCK));
}

/* rrecv of n bytes on a non-blocking rsocket: EAGAIN until they come;
 * by rpoll(timeout 0) first if use_rpoll.  Returns the rrecv calls. */
static long recv_spin(int fd, uint8_t *buf, size_t n, bool use_rpoll)
{
	uint64_t end = sv_now_ms() + WAIT_MS;
	size_t got = 0;
	long calls = 0;

	while (got < n) {
		ssize_t r;

		if (use_rpoll) {
			struct pollfd p = {.fd = fd, .events = POLLIN};

			if (rpoll(&p, 1, 0) == 0) {
				ASSERT_TRUE(sv_now_ms() < end);
				continue;
			}
		}
		r = rrecv(fd, buf + got, n - got, 0);
		calls++;
		if (r < 0) {
			ASSERT_EQ(EAGAIN, errno);
			ASSERT_TRUE(sv_now_ms() < end);
			continue;
		}
		ASSERT_TRUE(r > 0);
		got += (size_t)r;
	}
	return calls;
}

/* fd has nothing to read yet: rrecv's EAGAIN or rpoll's 0 */
static void empty_look(int fd, bool use_rpoll)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	uint8_t c;

	if (use_rpoll) {
		ASSERT_EQ(0, rpoll(&p, 1, 0));
		return;
	}
	ASSERT_EQ(-1, rrecv(fd, &c, 1, 0));
	ASSERT_EQ(EAGAIN, errno);
}

static void pingpong(bool use_rpoll)
{
	uint8_t msg[8], got[8];
	struct timespec t0, t1;
	long calls = 0;
	int a, b;

	pair(&a, &b);
	atomic_store(&n_fcntl, 0);
	atomic_store(&n_poll, 0);
	atomic_store(&counting, true);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	for (int i = 0; i < ROUNDS; i++) {
		memset(msg, i, sizeof(msg));
		/* each receiver looks once before its message is sent: the
		 * empty look (EAGAIN, or rpoll's 0) is what a spinning
		 * receiver does most of the time */
		empty_look(b, use_rpoll);
		ASSERT_EQ((ssize_t)sizeof(msg), rsend(a, msg, sizeof(msg), 0));
		calls += recv_spin(b, got, sizeof(got), use_rpoll);
		ASSERT_OK(memcmp(msg, got, sizeof(msg)));
		empty_look(a, use_rpoll);
		ASSERT_EQ((ssize_t)sizeof(got), rsend(b, got, sizeof(got), 0));
		calls += recv_spin(a, msg, sizeof(msg), use_rpoll);
		ASSERT_OK(memcmp(msg, got, sizeof(msg)));
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	atomic_store(&counting, false);
	fprintf(stderr,
		"%d round trips, %d empty looks, %ld rrecv calls: %ld fcntl, "
		"%ld poll; %.0f ns of CPU a round trip\n",
		ROUNDS, 2 * ROUNDS, calls, atomic_load(&n_fcntl),
		atomic_load(&n_poll),
		((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) /
			ROUNDS);
	ASSERT_GE(calls, 2 * ROUNDS);
	/* once each, not a message: the passive side's ESTABLISHED read
	 * on the way (rdma_get_cm_event: two), the provider checking the
	 * seals of the peer's memory as it first attaches it (F_GET_SEALS,
	 * up to two a direction); seen 2 to 6, before the fix 3,870 */
	ASSERT_LE(atomic_load(&n_fcntl), 16);
	ASSERT_EQ(0, atomic_load(&n_poll));
	ASSERT_OK(rclose(a));
	ASSERT_OK(rclose(b));
}

SV_TEST(rs_nonblocking_pingpong_makes_no_fcntl_or_poll)
{
	pingpong(false);
}

SV_TEST(rs_rpoll_of_rsockets_only_makes_no_poll_until_it_sleeps)
{
	pingpong(true);
}

/* A non-blocking raccept with no connection waiting (rstream's server
 * spins on it until its client comes): EAGAIN without a system call.
 * Before the fix each one read the CM channel (its lock, an fcntl). */
SV_TEST(rs_nonblocking_raccept_of_nobody_makes_no_system_call)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int l = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;

	ASSERT_GE(l, 0);
	ASSERT_OK(rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_OK(rbind(l, (struct sockaddr *)&sa, sizeof(sa)));
	ASSERT_OK(rlisten(l, 4));
	atomic_store(&n_fcntl, 0);
	atomic_store(&n_poll, 0);
	atomic_store(&counting, true);
	for (int i = 0; i < ROUNDS; i++) {
		ASSERT_EQ(-1, raccept(l, NULL, NULL));
		ASSERT_EQ(EAGAIN, errno);
	}
	atomic_store(&counting, false);
	ASSERT_EQ(0, atomic_load(&n_fcntl));
	ASSERT_EQ(0, atomic_load(&n_poll));
	ASSERT_OK(rclose(l));
}

/* The echo end of the blocking ping-pong: blocking rrecv, rsend back. */
static void *echo(void *arg)
{
	int fd = *(int *)arg;
	uint8_t m[8];

	for (int i = 0; i < BLOCKING_ROUNDS; i++) {
		size_t got = 0;

		while (got < sizeof(m)) {
			ssize_t r = rrecv(fd, m + got, sizeof(m) - got, 0);

			if (r <= 0)
				return NULL; /* the main thread's rpoll fails */
			got += (size_t)r;
		}
		if (rsend(fd, m, sizeof(m), 0) != (ssize_t)sizeof(m))
			return NULL;
	}
	return NULL;
}

/*
 * A wait polls SOFTVERBS_EVENT_SPIN_US before it sleeps, in a blocking
 * rrecv (rs_wait) and in rpoll with a timeout: with 5 s of it, no wait
 * of this ping-pong reaches poll().  Both threads on one CPU, so each
 * waits for the other's time slice (milliseconds): the fixed 10 us poll
 * there was before slept (a poll() each) at nearly every wait.
 */
SV_TEST(rs_blocking_waits_poll_as_long_as_event_spin_us_says)
{
	cpu_set_t one;
	pthread_t t;
	int a, b;

	ASSERT_OK(setenv("SOFTVERBS_EVENT_SPIN_US", "5000000", 1));
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	ASSERT_OK(pthread_setaffinity_np(pthread_self(), sizeof(one), &one));
	pair(&a, &b);
	ASSERT_OK(rfcntl(a, F_SETFL, 0));
	ASSERT_OK(rfcntl(b, F_SETFL, 0));
	/* made now, it runs on our CPU only (the affinity is inherited) */
	ASSERT_OK(pthread_create(&t, NULL, echo, &b));
	atomic_store(&n_poll, 0);
	atomic_store(&counting, true);
	for (int i = 0; i < BLOCKING_ROUNDS; i++) {
		uint8_t msg[8], got[8];
		struct pollfd p = {.fd = a, .events = POLLIN};
		size_t n = 0;

		memset(msg, i, sizeof(msg));
		ASSERT_EQ((ssize_t)sizeof(msg), rsend(a, msg, sizeof(msg), 0));
		while (n < sizeof(got)) {
			ssize_t r;

			ASSERT_EQ(1, rpoll(&p, 1, WAIT_MS));
			r = rrecv(a, got + n, sizeof(got) - n, 0);
			ASSERT_TRUE(r > 0);
			n += (size_t)r;
		}
		ASSERT_OK(memcmp(msg, got, sizeof(msg)));
	}
	atomic_store(&counting, false);
	ASSERT_OK(pthread_join(t, NULL));
	fprintf(stderr, "%d blocking round trips on one CPU: %ld poll\n",
		BLOCKING_ROUNDS, atomic_load(&n_poll));
	ASSERT_EQ(0, atomic_load(&n_poll));
	ASSERT_OK(rclose(a));
	ASSERT_OK(rclose(b));
}
