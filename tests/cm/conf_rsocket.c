// SPDX-License-Identifier: MIT
/*
 * rsockets (rdmacm/rsocket*.c) through <rdma/rsocket.h>: connect/accept
 * blocking and non-blocking (EINPROGRESS, rpoll's POLLOUT, SO_ERROR),
 * IPv6, a several-MiB stream both ways with checksums (a helper process),
 * partial reads and MSG_PEEK, EAGAIN both ways and flow control (a
 * sender never has more in flight than the peer's ring), rpoll/rselect
 * readiness, SHUT_WR → the peer reads 0 and can still answer, a killed
 * peer → an error, not a hang, a blocked rrecv that sleeps (its thread's
 * CPU time), riomap + riowrite delivered and checked against the
 * window, stream bytes in RDMA writes of at most 64 KiB, and a hostile
 * peer (speaking rs_wire.h through plain rdma_cm and verbs) that gets the
 * connection reset.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "rs_wire.h"
#include "sv_test.h"

#define WAIT_MS 10000 /* something that must come: generous when loaded */

static uint8_t pat(uint64_t i, uint8_t seed)
{
	return (uint8_t)((i >> 9) ^ (i * 7) ^ seed);
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

#define FNV0 0xcbf29ce484222325ull

/* rpoll until fd has `ev`, with a deadline (line: the caller's) */
#define wait_for(fd, ev) wait_for_at(fd, ev, __LINE__)
static void wait_for_at(int fd, short ev, int line)
{
	uint64_t end = sv_now_ms() + WAIT_MS;
	struct pollfd p = {.fd = fd, .events = ev};

	for (;;) {
		int n = rpoll(&p, 1, 100);

		ASSERT_GE(n, 0);
		if (n && (p.revents & (ev | POLLERR | POLLHUP)))
			return;
		if (sv_now_ms() >= end)
			sv_test_fail(__FILE__, line, "rsocket %d: no event %#x",
				     fd, ev);
	}
}

static void set_nonblock(int fd, bool on)
{
	int fl = rfcntl(fd, F_GETFL);

	ASSERT_GE(fl, 0);
	ASSERT_OK(rfcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK));
}

static int listener(int family, uint16_t *port)
{
	struct sockaddr_storage ss = {.ss_family = family};
	socklen_t len = sizeof(ss);
	int l = rsocket(family, SOCK_STREAM, 0), one = 1;

	ASSERT_GE(l, 0);
	ASSERT_OK(rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
	if (family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_addr.s_addr =
			htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	ASSERT_OK(rbind(l, (struct sockaddr *)&ss,
			family == AF_INET ? sizeof(struct sockaddr_in)
					  : sizeof(struct sockaddr_in6)));
	ASSERT_OK(rlisten(l, 4));
	ASSERT_OK(rgetsockname(l, (struct sockaddr *)&ss, &len));
	*port = ntohs(family == AF_INET
			      ? ((struct sockaddr_in *)&ss)->sin_port
			      : ((struct sockaddr_in6 *)&ss)->sin6_port);
	ASSERT_NE(0, *port);
	return l;
}

static socklen_t loopback(int family, uint16_t port,
			  struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = family;
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->sin_port = htons(port);
		return sizeof(*a);
	}
	((struct sockaddr_in6 *)ss)->sin6_addr = in6addr_loopback;
	((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	return sizeof(struct sockaddr_in6);
}

/*
 * A connected pair in this process: a non-blocking rconnect
 * (EINPROGRESS), the listener's readiness and the client's POLLOUT by
 * rpoll, SO_ERROR 0.  Both ends come back blocking.
 */
static void pair(int family, int *a, int *b)
{
	struct sockaddr_storage ss;
	uint64_t end = sv_now_ms() + WAIT_MS;
	uint16_t port;
	int l = listener(family, &port), err = -1;
	socklen_t len = loopback(family, port, &ss), elen = sizeof(err);
	bool out = false;

	*a = rsocket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ASSERT_GE(*a, 0);
	ASSERT_EQ(-1, rconnect(*a, (struct sockaddr *)&ss, len));
	ASSERT_EQ(EINPROGRESS, errno);
	set_nonblock(l, true);
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
		if (p[1].revents & POLLOUT)
			out = true;
		ASSERT_FALSE(p[1].revents & POLLERR);
	}
	ASSERT_OK(rgetsockopt(*a, SOL_SOCKET, SO_ERROR, &err, &elen));
	ASSERT_EQ(0, err);
	ASSERT_OK(rclose(l));
	set_nonblock(*a, false);
}

static void send_all(int fd, const void *buf, size_t n)
{
	ASSERT_EQ((ssize_t)n, rsend(fd, buf, n, 0));
}

static void recv_all(int fd, void *buf, size_t n)
{
	ASSERT_EQ((ssize_t)n, rrecv(fd, buf, n, MSG_WAITALL));
}

SV_TEST(rs_pair_ipv4_and_ipv6_small_message)
{
	int fam[2] = {AF_INET, AF_INET6};

	for (int f = 0; f < 2; f++) {
		char out[] = "hello over rsockets", in[sizeof(out)] = {0};
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int a, b;

		pair(fam[f], &a, &b);
		send_all(a, out, sizeof(out));
		recv_all(b, in, sizeof(in));
		ASSERT_STR_EQ(out, in);
		send_all(b, "x", 1);
		recv_all(a, in, 1);
		ASSERT_EQ('x', in[0]);
		ASSERT_OK(rgetpeername(a, (struct sockaddr *)&peer, &plen));
		ASSERT_EQ(fam[f], peer.ss_family);
		ASSERT_OK(rclose(a));
		ASSERT_OK(rclose(b));
	}
}

SV_TEST(rs_unsupported_calls_fail_clearly)
{
	int v = 1, s, pfd[2];
	socklen_t len = sizeof(v);

	ASSERT_EQ(-1, rsocket(AF_INET, SOCK_DGRAM, 0));
	ASSERT_EQ(EOPNOTSUPP, errno);
	ASSERT_EQ(-1, rsocket(AF_UNIX, SOCK_STREAM, 0));
	ASSERT_EQ(EAFNOSUPPORT, errno);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(s, 0);
	ASSERT_EQ(-1, rsetsockopt(s, SOL_SOCKET, SO_BROADCAST, &v, len));
	ASSERT_EQ(ENOPROTOOPT, errno);
	ASSERT_EQ(-1, rgetsockopt(s, SOL_RDMA, 77, &v, &len));
	ASSERT_EQ(ENOPROTOOPT, errno);
	ASSERT_EQ(-1, rrecv(s, &v, 1, 0));
	ASSERT_EQ(ENOTCONN, errno);
	ASSERT_EQ(-1, rsend(s, &v, 1, 0));
	ASSERT_EQ(ENOTCONN, errno);
	ASSERT_OK(rclose(s));
	ASSERT_EQ(-1, rsend(s, &v, 1, 0));
	ASSERT_EQ(EBADF, errno);
	ASSERT_OK(pipe(pfd));
	ASSERT_EQ(-1, rrecv(pfd[0], &v, 1, 0)); /* a real fd */
	ASSERT_EQ(ENOTSOCK, errno);
	close(pfd[0]);
	close(pfd[1]);
}

/* A port nobody listens on: blocking rconnect fails ECONNREFUSED. */
SV_TEST(rs_connect_nobody_listens_refused)
{
	struct sockaddr_storage ss;
	socklen_t len = loopback(AF_INET, (uint16_t)sv_free_port(), &ss);
	int s = rsocket(AF_INET, SOCK_STREAM, 0);

	ASSERT_GE(s, 0);
	ASSERT_EQ(-1, rconnect(s, (struct sockaddr *)&ss, len));
	ASSERT_EQ(ECONNREFUSED, errno);
	ASSERT_OK(rclose(s));
}

/* Partial reads land in order; MSG_PEEK leaves the bytes; rreadv/rwritev
 * scatter and gather. */
SV_TEST(rs_partial_reads_peek_and_iovecs)
{
	static uint8_t out[20000], in[20000];
	struct iovec iv[3];
	size_t got = 0, steps[] = {1, 7, 4096, 3, 10000};
	int a, b;

	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = pat(i, 5);
	pair(AF_INET, &a, &b);
	iv[0] = (struct iovec){out, 10};
	iv[1] = (struct iovec){out + 10, 0};
	iv[2] = (struct iovec){out + 10, sizeof(out) - 10};
	ASSERT_EQ((ssize_t)sizeof(out), rwritev(a, iv, 3));
	wait_for(b, POLLIN);
	ASSERT_EQ(2, rrecv(b, in, 2, MSG_PEEK));
	ASSERT_EQ(out[0], in[0]);
	ASSERT_EQ(out[1], in[1]);
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		recv_all(b, in + got, steps[s]);
		got += steps[s];
	}
	iv[0] = (struct iovec){in + got, 5};
	iv[1] = (struct iovec){in + got + 5, sizeof(in) - got - 5};
	while (got < sizeof(in)) {
		ssize_t n = rreadv(b, iv, 2);

		ASSERT_GE(n, 1);
		got += (size_t)n;
		break; /* one readv: whatever is there */
	}
	if (got < sizeof(in))
		recv_all(b, in + got, sizeof(in) - got);
	ASSERT_OK(memcmp(in, out, sizeof(in)));
	ASSERT_OK(rclose(a));
	ASSERT_OK(rclose(b));
}

/*
 * Non-blocking: an empty rsocket gives EAGAIN and no POLLIN; a sender
 * that the reader does not drain gets EAGAIN after at most the reader's
 * ring (SO_RCVBUF) and loses POLLOUT; once the reader reads, POLLOUT
 * comes back; rselect agrees with rpoll.
 */
SV_TEST(rs_nonblocking_eagain_and_flow_control)
{
	static uint8_t buf[1 << 16];
	struct pollfd p;
	fd_set rd, wr;
	struct timeval tv = {WAIT_MS / 1000, 0};
	size_t total = 0, drained = 0;
	int a, b, rcv = 0;
	socklen_t len = sizeof(rcv);
	ssize_t n;

	pair(AF_INET, &a, &b);
	ASSERT_OK(rgetsockopt(b, SOL_SOCKET, SO_RCVBUF, &rcv, &len));
	ASSERT_GE(rcv, 4096);
	set_nonblock(a, true);
	set_nonblock(b, true);
	ASSERT_EQ(-1, rrecv(b, buf, sizeof(buf), 0));
	ASSERT_EQ(EAGAIN, errno);
	p = (struct pollfd){.fd = b, .events = POLLIN};
	ASSERT_EQ(0, rpoll(&p, 1, 0));
	/* fill b's ring exactly: a EAGAIN meanwhile only waits for the
	 * bounce ring's completions */
	while (total < (size_t)rcv) {
		n = rsend(a, buf, sizeof(buf), 0);
		if (n < 0) {
			ASSERT_EQ(EAGAIN, errno);
			wait_for(a, POLLOUT);
			continue;
		}
		total += (size_t)n;
		ASSERT_LE(total, (size_t)rcv); /* never past the ring */
	}
	ASSERT_EQ(-1, rsend(a, buf, 1, 0));
	ASSERT_EQ(EAGAIN, errno);
	ASSERT_GE(total, 1);
	p = (struct pollfd){.fd = a, .events = POLLOUT};
	ASSERT_EQ(0, rpoll(&p, 1, 0));
	FD_ZERO(&rd);
	FD_ZERO(&wr);
	FD_SET(b, &rd);
	FD_SET(a, &wr);
	/* b's bytes may still be on their way (TCP): rselect waits */
	ASSERT_EQ(1, rselect((a > b ? a : b) + 1, &rd, &wr, NULL, &tv));
	ASSERT_TRUE(FD_ISSET(b, &rd));
	ASSERT_FALSE(FD_ISSET(a, &wr));
	while (drained < total) {
		n = rrecv(b, buf, sizeof(buf), 0);
		if (n < 0) {
			ASSERT_EQ(EAGAIN, errno);
			wait_for(b, POLLIN);
			continue;
		}
		drained += (size_t)n;
	}
	ASSERT_EQ(total, drained);
	wait_for(a, POLLOUT);
	ASSERT_GE(rsend(a, buf, 1, 0), 1);
	ASSERT_OK(rclose(a));
	ASSERT_OK(rclose(b));
}

/* SHUT_WR: the peer reads what was sent, then 0 (EOF, again and again);
 * it can still answer and the half-closed side reads the answer. */
SV_TEST(rs_shutdown_wr_peer_reads_zero)
{
	char buf[64];
	int a, b;

	pair(AF_INET, &a, &b);
	send_all(a, "last words", 10);
	ASSERT_OK(rshutdown(a, SHUT_WR));
	ASSERT_EQ(-1, rsend(a, "x", 1, 0));
	ASSERT_EQ(EPIPE, errno);
	recv_all(b, buf, 10);
	ASSERT_OK(memcmp(buf, "last words", 10));
	ASSERT_EQ(0, rrecv(b, buf, sizeof(buf), 0));
	ASSERT_EQ(0, rrecv(b, buf, sizeof(buf), 0));
	send_all(b, "reply", 5);
	recv_all(a, buf, 5);
	ASSERT_OK(memcmp(buf, "reply", 5));
	ASSERT_OK(rclose(b));
	ASSERT_EQ(0, rrecv(a, buf, sizeof(buf), 0));
	ASSERT_OK(rclose(a));
}

/* The peer writes and closes: what it wrote is POLLIN first, and only
 * then, nothing left, POLLHUP (a TCP socket's order: rstream -T a takes
 * POLLHUP for an error, and failed 1 run in ~15 when it came early). */
SV_TEST(rs_poll_peer_closed_data_before_hangup)
{
	struct pollfd p;
	uint64_t end;
	char buf[64];
	int a, b;

	pair(AF_INET, &a, &b);
	send_all(a, "last words", 10);
	ASSERT_OK(rclose(a));	  /* its FIN, then the CM's disconnect */
	end = sv_now_ms() + 1000; /* the disconnect reaches b meanwhile */
	while (sv_now_ms() < end) {
		p = (struct pollfd){.fd = b, .events = POLLIN};
		ASSERT_EQ(1, rpoll(&p, 1, 50));
		ASSERT_EQ(POLLIN, p.revents);
	}
	recv_all(b, buf, 10);
	ASSERT_OK(memcmp(buf, "last words", 10));
	ASSERT_EQ(0, rrecv(b, buf, sizeof(buf), 0));
	p = (struct pollfd){.fd = b, .events = POLLIN};
	ASSERT_EQ(1, rpoll(&p, 1, 2000));
	ASSERT_TRUE(p.revents & POLLHUP);
	ASSERT_OK(rclose(b));
}

/* riomap a window on b; a riowrites into it, then sends a byte: the
 * byte's arrival means the write landed (one RC QP keeps the order). */
SV_TEST(rs_riomap_riowrite_delivered)
{
	static uint8_t win[8192], data[8192];
	char c;
	int a, b;

	pair(AF_INET, &a, &b);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = pat(i, 9);
	ASSERT_EQ(0, riomap(b, win, sizeof(win), PROT_WRITE, 0, 0));
	send_all(b, "m", 1); /* after the window's announcement */
	recv_all(a, &c, 1);
	ASSERT_EQ((size_t)-1, riowrite(a, data, 100, 8100, 0));
	ASSERT_EQ(EINVAL, errno); /* past the window's end */
	ASSERT_EQ((size_t)-1, riowrite(a, data, 1, 9000, 0));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(sizeof(data) - 100,
		  riowrite(a, data, sizeof(data) - 100, 100, 0));
	send_all(a, "d", 1);
	recv_all(b, &c, 1);
	ASSERT_OK(memcmp(win + 100, data, sizeof(data) - 100));
	for (size_t i = 0; i < 100; i++)
		ASSERT_EQ(0, win[i]);
	ASSERT_OK(riounmap(b, win, sizeof(win)));
	ASSERT_EQ(-1, riounmap(b, win, sizeof(win)));
	ASSERT_OK(rclose(a));
	ASSERT_OK(rclose(b));
}

struct blocked {
	int fd;
	ssize_t ret;
	char c;
};

static void *block_in_rrecv(void *arg)
{
	struct blocked *bl = arg;

	bl->ret = rrecv(bl->fd, &bl->c, 1, 0);
	return NULL;
}

static double thread_cpu_ms(pthread_t t)
{
	clockid_t cid;
	struct timespec ts;

	ASSERT_OK(pthread_getcpuclockid(t, &cid));
	ASSERT_OK(clock_gettime(cid, &ts));
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A blocked rrecv sleeps on the completion channel: its thread uses
 * almost no CPU over a 400 ms window, then the byte wakes it. */
SV_TEST(rs_blocked_rrecv_sleeps)
{
	struct blocked bl = {0};
	pthread_t t;
	double before, used;
	int a, b;

	pair(AF_INET, &a, &b);
	bl.fd = b;
	ASSERT_OK(pthread_create(&t, NULL, block_in_rrecv, &bl));
	/* let it get into its wait, then measure a window of it */
	poll(NULL, 0, 100);
	before = thread_cpu_ms(t);
	poll(NULL, 0, 400); /* the measuring window, not a synchronisation */
	used = thread_cpu_ms(t) - before;
	fprintf(stderr, "blocked rrecv: %.2f ms CPU in 400 ms\n", used);
	ASSERT_TRUE(used < 40.0); /* 10%: a busy loop would use ~400 */
	send_all(a, "w", 1);
	ASSERT_OK(pthread_join(t, NULL));
	ASSERT_EQ(1, bl.ret);
	ASSERT_EQ('w', bl.c);
	ASSERT_OK(rclose(a));
	ASSERT_OK(rclose(b));
}

/* ---- helper processes ---- */

static void write_num(int fd, unsigned long long v)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%llu\n", v);

	if (write(fd, buf, (size_t)n) != n)
		_exit(90);
}

static unsigned long long read_num(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[32] = {0};

	ASSERT_EQ(1, poll(&p, 1, WAIT_MS));
	ASSERT_TRUE(read(fd, buf, sizeof(buf) - 1) > 0);
	return strtoull(buf, NULL, 10);
}

/*
 * Listens on 127.0.0.1, writes its port to fd argv[0], accepts one.
 * "stream": reads an 8-byte length L and L bytes, answers their FNV
 * hash, then sends L bytes of its own pattern, SHUT_WR, and waits for
 * the test's EOF.  "hold": sends 100 bytes and waits for ever (the test
 * kills it).
 */
SV_HELPER(rs_server)
{
	static uint8_t buf[1 << 16];
	int pfd = atoi(argv[0]), l, s;
	uint16_t port;
	uint64_t len, h = FNV0, done;
	ssize_t n;

	l = listener(AF_INET, &port);
	write_num(pfd, port);
	s = raccept(l, NULL, NULL);
	if (s < 0)
		return 2;
	if (!strcmp(argv[1], "hold")) {
		memset(buf, 'h', 100);
		if (rsend(s, buf, 100, 0) != 100)
			return 3;
		for (;;)
			pause();
	}
	if (rrecv(s, &len, 8, MSG_WAITALL) != 8)
		return 4;
	for (done = 0; done < len; done += (uint64_t)n) {
		n = rrecv(s, buf, sizeof(buf), 0);
		if (n <= 0)
			return 5;
		h = fnv(h, buf, (size_t)n);
	}
	if (rsend(s, &h, 8, 0) != 8)
		return 6;
	for (done = 0; done < len;) {
		size_t c = len - done < 50000 ? len - done : 50000;

		for (size_t i = 0; i < c; i++)
			buf[i] = pat(done + i, 2);
		if (rsend(s, buf, c, 0) != (ssize_t)c)
			return 7;
		done += c;
	}
	if (rshutdown(s, SHUT_WR))
		return 8;
	if (rrecv(s, buf, 1, 0) != 0)
		return 9;
	rclose(s);
	rclose(l);
	return 0;
}

static int connect_helper(struct sv_proc *p, int fds[2], const char *mode)
{
	char fdarg[16];
	char *args[] = {fdarg, (char *)mode, NULL};
	struct sockaddr_storage ss;
	socklen_t len;
	int s;

	ASSERT_OK(pipe(fds));
	snprintf(fdarg, sizeof(fdarg), "%d", fds[1]);
	sv_proc_start_helper(p, "rs_server", args, NULL);
	close(fds[1]);
	len = loopback(AF_INET, (uint16_t)read_num(fds[0]), &ss);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(s, 0);
	ASSERT_OK(rconnect(s, (struct sockaddr *)&ss, len));
	return s;
}

/* 6 MiB to a helper process and 6 MiB back, blocking calls of odd
 * sizes, each direction checked by an FNV hash. */
SV_TEST(rs_stream_several_mib_both_ways)
{
	static uint8_t buf[100003];
	const uint64_t len = 6u << 20;
	uint64_t h = FNV0, theirs, done;
	struct sv_proc p;
	int fds[2], s;
	ssize_t n;

	s = connect_helper(&p, fds, "stream");
	send_all(s, &len, 8);
	for (done = 0; done < len;) {
		size_t c = len - done < sizeof(buf) ? len - done : sizeof(buf);

		for (size_t i = 0; i < c; i++)
			buf[i] = pat(done + i, 1);
		h = fnv(h, buf, c);
		send_all(s, buf, c);
		done += c;
	}
	recv_all(s, &theirs, 8);
	ASSERT_EQ(h, theirs);
	for (done = 0; done < len; done += (uint64_t)n) {
		n = rrecv(s, buf, 777 + done % 5000, 0);
		ASSERT_GE(n, 1);
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pat(done + i, 2))
				ASSERT_EQ(pat(done + i, 2), buf[i]);
	}
	ASSERT_EQ(0, rrecv(s, buf, 1, 0)); /* its SHUT_WR */
	ASSERT_OK(rclose(s));
	sv_proc_wait(&p, WAIT_MS);
	ASSERT_TRUE(p.exited);
	ASSERT_EQ(0, p.code);
	close(fds[0]);
	sv_proc_free(&p);
}

/* The peer process killed: after its bytes, rrecv fails (ECONNRESET) or
 * reads EOF, and rsend fails, both soon (the test's deadline is the
 * hang detector). */
SV_TEST(rs_peer_killed_error_not_hang)
{
	static uint8_t buf[4096];
	struct sv_proc p;
	int fds[2], s;
	ssize_t n;

	s = connect_helper(&p, fds, "hold");
	recv_all(s, buf, 100);
	ASSERT_EQ('h', buf[99]);
	sv_proc_kill(&p);
	n = rrecv(s, buf, sizeof(buf), 0);
	ASSERT_TRUE(n == 0 || (n == -1 && errno == ECONNRESET));
	for (int i = 0; i < 1000; i++) {
		n = rsend(s, buf, sizeof(buf), 0);
		if (n < 0)
			break;
	}
	ASSERT_EQ(-1, n);
	ASSERT_TRUE(errno == EPIPE || errno == ECONNRESET);
	ASSERT_OK(rclose(s));
	close(fds[0]);
	sv_proc_free(&p);
}

/* ---- a hostile peer: rs_wire.h spoken through rdma_cm and verbs ---- */

#define RAW_RING (256u << 10) /* the raw peer's receive ring */

struct raw {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint8_t *ring;
	struct ibv_mr *mr;
	struct rs_hello peer;
	bool want_lane;	     /* offer a zero-copy lane in our hello */
	struct ibv_qp *lane; /* then its QP (INIT until raw_lane_up) */
};

static struct rdma_cm_event *raw_event(struct raw *r,
				       enum rdma_cm_event_type want)
{
	struct pollfd p = {.fd = r->ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	ASSERT_EQ(1, poll(&p, 1, WAIT_MS));
	ASSERT_OK(rdma_get_cm_event(r->ch, &ev));
	if (ev->event != want)
		sv_test_fail(__FILE__, __LINE__, "event %s, wanted %s",
			     rdma_event_str(ev->event), rdma_event_str(want));
	return ev;
}

/* A lane QP in INIT that takes RDMA writes (rs_wire.h): its QPN. */
static uint32_t raw_lane(struct raw *r)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = r->cq,
		.recv_cq = r->cq,
		.cap = {.max_send_wr = 1,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};

	r->lane = ibv_create_qp(r->pd, &qa);
	ASSERT_NOT_NULL(r->lane);
	ASSERT_OK(ibv_modify_qp(r->lane, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS));
	return r->lane->qp_num;
}

/* connects to the rsocket listener l (accepting it here) with hello h */
static int raw_connect(struct raw *r, int l, uint16_t port,
		       const struct rs_hello *h)
{
	struct sockaddr_storage ss;
	socklen_t len = loopback(AF_INET, port, &ss);
	struct ibv_qp_init_attr qa = {
		.cap = {.max_send_wr = 8,
			.max_recv_wr = 8,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};
	struct rdma_conn_param cp = {.responder_resources = 1,
				     .initiator_depth = 1,
				     .private_data = h,
				     .private_data_len = sizeof(*h)};
	struct rdma_cm_event *ev;
	struct rs_hello hh;
	uint64_t end = sv_now_ms() + WAIT_MS;
	int s = -1;

	(void)len;
	r->ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(r->ch);
	ASSERT_OK(rdma_create_id(r->ch, &r->id, NULL, RDMA_PS_TCP));
	ASSERT_OK(rdma_resolve_addr(r->id, NULL, (struct sockaddr *)&ss, 2000));
	rdma_ack_cm_event(raw_event(r, RDMA_CM_EVENT_ADDR_RESOLVED));
	ASSERT_OK(rdma_resolve_route(r->id, 2000));
	rdma_ack_cm_event(raw_event(r, RDMA_CM_EVENT_ROUTE_RESOLVED));
	r->pd = ibv_alloc_pd(r->id->verbs);
	r->cq = ibv_create_cq(r->id->verbs, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(r->cq);
	qa.send_cq = qa.recv_cq = r->cq;
	ASSERT_OK(rdma_create_qp(r->id, r->pd, &qa));
	r->ring = calloc(1, RAW_RING);
	r->mr = ibv_reg_mr(r->pd, r->ring, RAW_RING,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NOT_NULL(r->mr);
	if (h->ring_size <= RAW_RING) { /* where the rsocket may write */
		hh = *h;
		hh.ring_addr = (uintptr_t)r->ring;
		hh.ring_rkey = r->mr->rkey;
		if (r->want_lane)
			hh.lane_qpn = raw_lane(r);
		cp.private_data = &hh;
	}
	ASSERT_OK(rdma_connect(r->id, &cp));
	set_nonblock(l, true);
	for (;;) {
		struct pollfd p[2] = {{.fd = l, .events = POLLIN},
				      {.fd = r->ch->fd, .events = POLLIN}};

		s = raccept(l, NULL, NULL);
		if (s >= 0)
			break;
		ASSERT_EQ(EAGAIN, errno);
		ASSERT_TRUE(sv_now_ms() < end);
		/* the listener's next request, or our answer (a real fd) */
		ASSERT_GE(rpoll(p, 2, 100), 0);
		if (p[1].revents & POLLIN)
			return -1; /* answered without an accept: refused */
	}
	ev = raw_event(r, RDMA_CM_EVENT_ESTABLISHED);
	ASSERT_GE(ev->param.conn.private_data_len, sizeof(r->peer));
	memcpy(&r->peer, ev->param.conn.private_data, sizeof(r->peer));
	rdma_ack_cm_event(ev);
	ASSERT_EQ(RS_MAGIC, r->peer.magic);
	return s;
}

static struct rs_hello good_hello(struct raw *r)
{
	struct rs_hello h = {.magic = RS_MAGIC, .version = RS_VERSION};

	h.ring_size = 65536;
	h.rq_depth = 16;
	(void)r; /* raw_connect puts the ring's address in once it is
		  * registered */
	return h;
}

static void raw_post(struct raw *r, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	ASSERT_OK(ibv_post_send(r->id->qp, wr, &bad));
}

static void raw_free(struct raw *r)
{
	if (r->lane)
		ibv_destroy_qp(r->lane);
	rdma_disconnect(r->id);
	rdma_destroy_qp(r->id);
	ibv_dereg_mr(r->mr);
	free(r->ring);
	ibv_destroy_cq(r->cq);
	ibv_dealloc_pd(r->pd);
	rdma_destroy_id(r->id);
	rdma_destroy_event_channel(r->ch);
}

/* An rrecv that must see the reset, soon */
static void expect_reset(int s)
{
	char buf[16];

	set_nonblock(s, false);
	ASSERT_EQ(-1, rrecv(s, buf, sizeof(buf), 0));
	ASSERT_EQ(ECONNRESET, errno);
	ASSERT_EQ(-1, rsend(s, buf, 1, 0));
	ASSERT_EQ(ECONNRESET, errno);
}

/* More stream bytes than the ring holds, in the immediate: reset. */
SV_TEST(rs_hostile_length_resets)
{
	struct raw r = {0};
	uint16_t port;
	int l = listener(AF_INET, &port), s;
	struct rs_hello h = good_hello(&r);
	struct ibv_sge sge;
	struct ibv_send_wr wr = {0};

	s = raw_connect(&r, l, port, &h);
	ASSERT_GE(s, 0);
	wait_for(s, POLLOUT); /* ESTABLISHED on its side too */
	sge = (struct ibv_sge){(uintptr_t)r.ring, 16, r.mr->lkey};
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(r.peer.ring_size + 1); /* a lie */
	wr.wr.rdma.remote_addr = r.peer.ring_addr;
	wr.wr.rdma.rkey = r.peer.ring_rkey;
	raw_post(&r, &wr);
	expect_reset(s);
	rdma_ack_cm_event(raw_event(&r, RDMA_CM_EVENT_DISCONNECTED));
	ASSERT_OK(rclose(s));
	ASSERT_OK(rclose(l));
	raw_free(&r);
}

/* Credits for bytes never sent, a control message of the wrong size, an
 * iomap window that wraps the address space: each resets. */
SV_TEST(rs_hostile_control_resets)
{
	for (int k = 0; k < 3; k++) {
		struct raw r = {0};
		uint16_t port;
		int l = listener(AF_INET, &port), s;
		struct rs_hello h = good_hello(&r);
		struct rs_ctrl *c;
		struct ibv_sge sge;
		struct ibv_send_wr wr = {0};

		s = raw_connect(&r, l, port, &h);
		ASSERT_GE(s, 0);
		wait_for(s, POLLOUT);
		c = (struct rs_ctrl *)r.ring;
		memset(c, 0, sizeof(*c));
		c->magic = RS_MAGIC;
		c->type = RS_CTRL_CREDIT;
		sge = (struct ibv_sge){(uintptr_t)c, sizeof(*c), r.mr->lkey};
		if (k == 0) {
			c->consumed = 12345; /* it sent us nothing */
		} else if (k == 1) {
			sge.length = sizeof(*c) - 1;
		} else {
			c->type = RS_CTRL_IOMAP;
			c->addr = ~0ull - 10;
			c->len = 4096;
		}
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		raw_post(&r, &wr);
		expect_reset(s);
		ASSERT_OK(rclose(s));
		ASSERT_OK(rclose(l));
		raw_free(&r);
	}
}

/* A REQ whose private data is not an rsocket hello: refused, and the
 * listener goes on (a good connection after it works). */
SV_TEST(rs_hostile_hello_refused)
{
	struct raw r = {0};
	uint16_t port;
	int l = listener(AF_INET, &port), a, b;
	struct rs_hello h = good_hello(&r);

	h.ring_size = 1u << 31; /* beyond RS_RING_MAX */
	ASSERT_EQ(-1, raw_connect(&r, l, port, &h));
	rdma_ack_cm_event(raw_event(&r, RDMA_CM_EVENT_REJECTED));
	raw_free(&r);
	ASSERT_OK(rclose(l));
	pair(AF_INET, &a, &b);
	send_all(a, "ok", 2);
	ASSERT_OK(rclose(a));
	ASSERT_OK(rclose(b));
}

/* connects as raw_connect with a ring of RAW_RING and 8 receives posted
 * for the rsocket's writes with immediate; the rsocket, writable */
static int raw_stream_peer(struct raw *r, int l, uint16_t port,
			   struct rs_hello *h)
{
	int s;

	h->ring_size = RAW_RING;
	s = raw_connect(r, l, port, h);
	ASSERT_GE(s, 0);
	wait_for(s, POLLOUT);
	for (int i = 0; i < 8; i++) {
		struct ibv_recv_wr rw = {.wr_id = (uint64_t)i}, *bad;

		ASSERT_OK(ibv_post_recv(r->id->qp, &rw, &bad));
	}
	return s;
}

/* The raw peer's next completion, the rsocket s progressing meanwhile
 * (both ends in this thread); fails the test at end (ms). */
static struct ibv_wc raw_next_wc(struct raw *r, int s, uint64_t end)
{
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(r->cq, 1, &wc)) == 0) {
		struct pollfd p = {.fd = s, .events = POLLIN};

		ASSERT_TRUE(sv_now_ms() < end);
		ASSERT_GE(rpoll(&p, 1, 0), 0); /* the rsocket's side */
	}
	ASSERT_EQ(1, n);
	return wc;
}

/*
 * A send bigger than RS_CHUNK_MAX (64 KiB) goes as several RDMA writes
 * of at most that (issue 27 item 4: the reader copies out one while the
 * writer copies in the next), never as one write of the whole ring.
 */
SV_TEST(rs_stream_writes_at_most_64_kib)
{
	struct raw r = {0};
	uint16_t port;
	int l = listener(AF_INET, &port), s, writes = 0;
	struct rs_hello h = good_hello(&r);
	uint64_t end = sv_now_ms() + WAIT_MS;
	uint8_t *buf = malloc(RAW_RING);
	uint32_t got = 0;

	ASSERT_NOT_NULL(buf);
	s = raw_stream_peer(&r, l, port, &h);
	for (uint32_t i = 0; i < RAW_RING; i++)
		buf[i] = pat(i, 5);
	ASSERT_EQ((ssize_t)RAW_RING, rsend(s, buf, RAW_RING, MSG_DONTWAIT));
	while (got < RAW_RING) {
		struct ibv_wc wc = raw_next_wc(&r, s, end);

		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
		ASSERT_LE(ntohl(wc.imm_data), 65536u);
		got += ntohl(wc.imm_data);
		writes++;
	}
	ASSERT_EQ(RAW_RING, got);
	ASSERT_EQ((int)(RAW_RING / 65536), writes);
	ASSERT_OK(memcmp(buf, r.ring, RAW_RING));
	raw_free(&r);
	ASSERT_OK(rclose(s));
	ASSERT_OK(rclose(l));
	free(buf);
}

/*
 * SO_RCVBUF and SO_SNDBUF ask for half the rings they get, as Linux and
 * rdma-core's rsockets take them (rstream's 512 KiB is a 1 MiB ring
 * there); rgetsockopt reads back the doubled size before the connection
 * and the size in use after it; the hello carries the receive ring's.
 */
SV_TEST(rs_buffer_options_are_doubled_as_linux)
{
	struct raw r = {0};
	uint16_t port;
	int l = listener(AF_INET, &port), s, rcv = 48 << 10, snd = 6 << 10,
	    v = 0, huge = INT_MAX;
	socklen_t len = sizeof(v);
	struct rs_hello h = good_hello(&r);

	ASSERT_OK(rsetsockopt(l, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv)));
	ASSERT_OK(rsetsockopt(l, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd)));
	ASSERT_OK(rgetsockopt(l, SOL_SOCKET, SO_RCVBUF, &v, &len));
	ASSERT_EQ(2 * rcv, v);
	ASSERT_OK(rgetsockopt(l, SOL_SOCKET, SO_SNDBUF, &v, &len));
	ASSERT_EQ(2 * snd, v);
	s = raw_connect(&r, l, port, &h);
	ASSERT_GE(s, 0); /* the accepted rsocket inherits the listener's */
	ASSERT_EQ((uint32_t)(2 * rcv), le32toh(r.peer.ring_size));
	ASSERT_OK(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len));
	ASSERT_EQ(2 * rcv, v);
	ASSERT_OK(rgetsockopt(s, SOL_SOCKET, SO_SNDBUF, &v, &len));
	ASSERT_EQ(2 * snd, v);
	/* no overflow past the largest ring */
	ASSERT_OK(rsetsockopt(l, SOL_SOCKET, SO_RCVBUF, &huge, sizeof(huge)));
	ASSERT_OK(rgetsockopt(l, SOL_SOCKET, SO_RCVBUF, &v, &len));
	ASSERT_EQ((int)RS_RING_MAX, v);
	raw_free(&r);
	ASSERT_OK(rclose(s));
	ASSERT_OK(rclose(l));
}

/* RS_CTRL_LANE to the rsocket s, acknowledged: the rsocket has it once
 * it next looks at its CQ. */
static void raw_say_lane(struct raw *r, int s)
{
	struct rs_ctrl *c = (struct rs_ctrl *)(r->ring + RAW_RING / 2);
	struct ibv_sge sge = {(uintptr_t)c, sizeof(*c), r->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 77,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND};
	struct ibv_wc wc;

	memset(c, 0, sizeof(*c));
	c->magic = htole32(RS_MAGIC);
	c->type = RS_CTRL_LANE;
	raw_post(r, &wr);
	wc = raw_next_wc(r, s, sv_now_ms() + WAIT_MS);
	ASSERT_EQ(77, wc.wr_id);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
}

/* The raw peer's lane to the rsocket's (RTR, RTS), then RS_CTRL_LANE. */
static void raw_lane_up(struct raw *r, int s)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
	int mask;

	ASSERT_NE(0, le32toh(r->peer.lane_qpn)); /* the rsocket offers one */
	ASSERT_OK(rdma_init_qp_attr(r->id, &a, &mask));
	a.dest_qp_num = le32toh(r->peer.lane_qpn);
	a.rq_psn = 0;
	ASSERT_OK(ibv_modify_qp(r->lane, &a, mask));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	ASSERT_OK(rdma_init_qp_attr(r->id, &a, &mask));
	a.sq_psn = 0;
	ASSERT_OK(ibv_modify_qp(r->lane, &a, mask));
	raw_say_lane(r, s);
}

/*
 * The zero-copy lane (rsocket_lane.c): with a peer that offers one, each
 * stream chunk's bytes come by plain RDMA WRITE on the lane and the
 * connection's QP carries a zero-length WRITE WITH IMMEDIATE that counts
 * them.  Over shared memory every chunk does.  Over TCP the first write
 * goes on the lane; the first that does not complete in its post (its
 * ACK has to come back first) rsend waits for, and the chunks after it
 * are copied (the immediate's write carries them).  Either way the bytes
 * in the ring are the program's.
 */
SV_TEST(rs_stream_bytes_come_on_the_lane_then_the_count)
{
	struct raw r = {.want_lane = true};
	uint16_t port;
	int l = listener(AF_INET, &port), s, chunks = 0, lane_chunks = 0;
	struct rs_hello h = good_hello(&r);
	uint64_t end = sv_now_ms() + WAIT_MS;
	uint32_t got = 0, want = 4 * 65536;
	uint8_t *buf = malloc(want);

	ASSERT_NOT_NULL(buf);
	s = raw_stream_peer(&r, l, port, &h);
	raw_lane_up(&r, s);
	for (uint32_t i = 0; i < want; i++)
		buf[i] = pat(i, 9);
	ASSERT_EQ((ssize_t)want, rsend(s, buf, want, MSG_DONTWAIT));
	memset(buf, 0, want); /* ours again: rsend returned */
	while (got < want) {
		struct ibv_wc wc = raw_next_wc(&r, s, end);

		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
		ASSERT_TRUE(wc.byte_len == 0 ||
			    wc.byte_len == ntohl(wc.imm_data));
		/* once copied, never the lane again */
		ASSERT_TRUE(wc.byte_len || lane_chunks == chunks);
		lane_chunks += wc.byte_len == 0;
		got += ntohl(wc.imm_data);
		chunks++;
	}
	ASSERT_EQ(want, got);
	ASSERT_EQ(4, chunks);
	if (sv_test_wire())
		ASSERT_GE(lane_chunks, 1); /* the ACK may beat the poll */
	else
		ASSERT_EQ(4, lane_chunks);
	for (uint32_t i = 0; i < want; i++)
		if (r.ring[i] != pat(i, 9))
			sv_test_fail(__FILE__, __LINE__, "ring byte %u", i);
	raw_free(&r);
	ASSERT_OK(rclose(s));
	ASSERT_OK(rclose(l));
	free(buf);
}

/*
 * rsend from memory the program does not have, on the lane: EFAULT, as
 * send(2) gives, and nothing of it reaches the peer; the stream goes on.
 */
SV_TEST(rs_send_from_unmapped_memory_is_efault)
{
	size_t len = 64 << 10;
	uint8_t *bad =
		mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t good[4096], in[sizeof(good)];
	int a, b;

	ASSERT_TRUE(bad != MAP_FAILED);
	pair(AF_INET, &a, &b);
	for (size_t i = 0; i < sizeof(good); i++)
		good[i] = pat(i, 3);
	ASSERT_EQ(-1, rsend(a, bad, len, 0));
	ASSERT_EQ(EFAULT, errno);
	send_all(a, good, sizeof(good));
	recv_all(b, in, sizeof(in));
	ASSERT_OK(memcmp(good, in, sizeof(in)));
	ASSERT_OK(rclose(a));
	ASSERT_OK(rclose(b));
	munmap(bad, len);
}

/*
 * A peer that offers a lane, says it may carry our writes
 * (RS_CTRL_LANE), and never connects it: the lane's write is never
 * acknowledged, so rsend learns it from the lane QP's retries running
 * out and resets the connection (a late packet of that write could
 * still land in the ring), in bounded time, never a hang.
 */
SV_TEST(rs_lane_never_connected_by_the_peer_resets)
{
	struct raw r = {.want_lane = true};
	uint16_t port;
	int l = listener(AF_INET, &port), s;
	struct rs_hello h = good_hello(&r);
	uint8_t *buf = calloc(1, 65536);
	uint64_t t0;
	int err = -1;
	socklen_t elen = sizeof(err);

	ASSERT_NOT_NULL(buf);
	h.ring_size = RAW_RING;
	s = raw_connect(&r, l, port, &h);
	ASSERT_GE(s, 0);
	wait_for(s, POLLOUT);
	ASSERT_NE(0, le32toh(r.peer.lane_qpn)); /* it offers one */
	raw_say_lane(&r, s);			/* our lane stays in INIT */
	ASSERT_OK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen));
	ASSERT_EQ(0, err); /* the message itself is fine */
	t0 = sv_now_ms();
	ASSERT_EQ(-1, rsend(s, buf, 65536, MSG_DONTWAIT));
	ASSERT_EQ(ECONNRESET, errno);
	ASSERT_TRUE(sv_now_ms() - t0 < WAIT_MS);
	ASSERT_OK(rclose(s));
	ASSERT_OK(rclose(l));
	raw_free(&r);
	free(buf);
}

/*
 * riowrite of 8 KiB or more goes on the zero-copy lane too: the bytes
 * come whole (a first pair); from memory the program does not have it
 * gives EFAULT, where the bounce ring's copy crashed, and the next one
 * still arrives (a second pair: the lane is gone, so it copies).
 */
SV_TEST(rs_riowrite_on_the_lane_and_efault)
{
	size_t len = (64 << 10) + 1, wlen = 128 << 10;
	uint8_t *win = calloc(1, wlen), *data = malloc(len);
	uint8_t *bad =
		mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char c;
	int a, b;

	ASSERT_NOT_NULL(win);
	ASSERT_NOT_NULL(data);
	ASSERT_TRUE(bad != MAP_FAILED);
	for (size_t i = 0; i < len; i++)
		data[i] = pat(i, 11);
	for (int k = 0; k < 2; k++) {
		memset(win, 0, wlen);
		pair(AF_INET, &a, &b);
		ASSERT_EQ(0, riomap(b, win, wlen, PROT_WRITE, 0, 0));
		send_all(b, "m", 1); /* after the window's announcement */
		recv_all(a, &c, 1);
		if (k == 1) {
			ASSERT_EQ((size_t)-1, riowrite(a, bad, len, 3, 0));
			ASSERT_EQ(EFAULT, errno);
		}
		ASSERT_EQ(len, riowrite(a, data, len, 3, 0));
		send_all(a, "d", 1);
		recv_all(b, &c, 1);
		ASSERT_OK(memcmp(win + 3, data, len));
		for (size_t i = 0; i < 3; i++)
			ASSERT_EQ(0, win[i]);
		ASSERT_OK(riounmap(b, win, wlen));
		ASSERT_OK(rclose(a));
		ASSERT_OK(rclose(b));
	}
	munmap(bad, len);
	free(data);
	free(win);
}
