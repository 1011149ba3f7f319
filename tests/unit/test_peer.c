// SPDX-License-Identifier: MIT
/*
 * provider/lib/peer.c alone: who is at the other end of a TCP connection.
 * Real sockets of this host: loopback IPv4, IPv6 and a dual-stack
 * listener with an IPv4 caller (the owner is us on both sides); another
 * user (root only: a child as nobody); a peer in another network
 * namespace (root only: two namespaces of our own on a veth pair, no
 * other traffic); and the cost of a lookup among a few hundred sockets.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "peer.h"
#include "sv_test.h"

union addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_storage ss;
};

static union addr v4(const char *ip)
{
	union addr a;

	memset(&a, 0, sizeof(a));
	a.in.sin_family = AF_INET;
	ASSERT_EQ(1, inet_pton(AF_INET, ip, &a.in.sin_addr));
	return a;
}

static union addr v6(const char *ip)
{
	union addr a;

	memset(&a, 0, sizeof(a));
	a.in6.sin6_family = AF_INET6;
	ASSERT_EQ(1, inet_pton(AF_INET6, ip, &a.in6.sin6_addr));
	return a;
}

/* A listener on addr (port 0: the kernel picks a free one); its port
 * is written back into *addr. */
static int listen_on(union addr *addr, bool dual_stack)
{
	socklen_t len = sizeof(*addr);
	int one = 1, zero = 0;
	int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT_TRUE(s >= 0);
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
	if (addr->sa.sa_family == AF_INET6)
		ASSERT_OK(setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY,
				     dual_stack ? &zero : &one, sizeof(one)));
	ASSERT_OK(bind(s, &addr->sa, sizeof(*addr)));
	ASSERT_OK(listen(s, 512));
	ASSERT_OK(getsockname(s, &addr->sa, &len));
	return s;
}

static int connect_to(const union addr *to, uint16_t port)
{
	union addr a = *to;
	int s = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT_TRUE(s >= 0);
	if (a.sa.sa_family == AF_INET)
		a.in.sin_port = port;
	else
		a.in6.sin6_port = port;
	ASSERT_OK(connect(s, &a.sa, sizeof(a)));
	return s;
}

static uint16_t port_of(const union addr *a)
{
	return a->sa.sa_family == AF_INET ? a->in.sin_port : a->in6.sin6_port;
}

/* A connection to ourselves: *c the side that connected to `to` (from
 * its family), *a the side listener l accepted. */
static void pair(int l, const union addr *to, uint16_t port, int *c, int *a)
{
	*c = connect_to(to, port);
	*a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ASSERT_TRUE(*a >= 0);
}

static void expect_ours(int fd)
{
	uid_t uid = (uid_t)-2;

	ASSERT_OK(sv_peer_tcp_uid(fd, &uid));
	ASSERT_EQ(getuid(), uid);
	ASSERT_OK(sv_peer_check(fd, NULL));
}

SV_TEST(peer_loopback_ipv4)
{
	union addr la = v4("127.0.0.1"), good = v4("127.0.0.1"),
		   bad = v4("127.0.0.2"), mapped = v6("::ffff:127.0.0.1"),
		   mapped_bad = v6("::ffff:127.0.0.2");
	int l = listen_on(&la, false), c, a;

	pair(l, &la, port_of(&la), &c, &a);
	expect_ours(c);
	expect_ours(a);
	for (int i = 0; i < 2; i++) {
		int fd = i ? a : c;

		ASSERT_TRUE(sv_peer_addr_is(fd, &good.sa));
		ASSERT_TRUE(sv_peer_addr_is(fd, &mapped.sa));
		ASSERT_FALSE(sv_peer_addr_is(fd, &bad.sa));
		ASSERT_FALSE(sv_peer_addr_is(fd, &mapped_bad.sa));
		ASSERT_OK(sv_peer_check(fd, &good.sa));
		ASSERT_OK(sv_peer_check(fd, &mapped.sa));
		ASSERT_EQ(-EACCES, sv_peer_check(fd, &bad.sa));
		ASSERT_EQ(-EACCES, sv_peer_check(fd, &mapped_bad.sa));
	}
	close(c);
	close(a);
	close(l);
}

SV_TEST(peer_loopback_ipv6)
{
	union addr la = v6("::1"), good = v6("::1"), bad = v6("::2"),
		   bad4 = v4("127.0.0.1");
	int l = listen_on(&la, false), c, a;

	pair(l, &la, port_of(&la), &c, &a);
	expect_ours(c);
	expect_ours(a);
	for (int i = 0; i < 2; i++) {
		int fd = i ? a : c;

		ASSERT_TRUE(sv_peer_addr_is(fd, &good.sa));
		ASSERT_FALSE(sv_peer_addr_is(fd, &bad.sa));
		ASSERT_FALSE(sv_peer_addr_is(fd, &bad4.sa));
		ASSERT_OK(sv_peer_check(fd, &good.sa));
		ASSERT_EQ(-EACCES, sv_peer_check(fd, &bad.sa));
		ASSERT_EQ(-EACCES, sv_peer_check(fd, &bad4.sa));
	}
	close(c);
	close(a);
	close(l);
}

/* The door listens dual-stack: an IPv4 caller (an AF_INET socket) is
 * ::ffff:a.b.c.d on the accepted AF_INET6 socket. */
SV_TEST(peer_dual_stack_ipv4_caller)
{
	union addr la = v6("::"), to = v4("127.0.0.1"), good = v4("127.0.0.1"),
		   mapped = v6("::ffff:127.0.0.1"), bad = v4("127.0.0.2");
	union addr got;
	socklen_t len = sizeof(got);
	int l = listen_on(&la, true), c, a;

	pair(l, &to, port_of(&la), &c, &a);
	ASSERT_OK(getpeername(a, &got.sa, &len));
	ASSERT_EQ(AF_INET6, got.sa.sa_family); /* as the door sees it */
	ASSERT_TRUE(IN6_IS_ADDR_V4MAPPED(&got.in6.sin6_addr));
	expect_ours(c);
	expect_ours(a);
	for (int i = 0; i < 2; i++) {
		int fd = i ? a : c;

		ASSERT_OK(sv_peer_check(fd, &good.sa));
		ASSERT_OK(sv_peer_check(fd, &mapped.sa));
		ASSERT_EQ(-EACCES, sv_peer_check(fd, &bad.sa));
	}
	close(c);
	close(a);
	close(l);
}

/*
 * A listener with TCP_DEFER_ACCEPT keeps the other end a request socket
 * (SYN_RECV, which the kernel reports with uid 0: nobody's) until data
 * comes: the side that connected must not take that 0 for root.  Once
 * a byte is in, the other end is a full socket and the listener's.
 */
SV_TEST(peer_half_open_other_end_is_no_owner)
{
	union addr la = v4("127.0.0.1");
	int l = listen_on(&la, false), c, a, secs = 5;
	uid_t uid = 4242;
	uint64_t t0;

	ASSERT_OK(setsockopt(l, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs,
			     sizeof(secs)));
	c = connect_to(&la, port_of(&la));
	t0 = sv_now_ms();
	ASSERT_EQ(-EAGAIN, sv_peer_tcp_uid(c, &uid));
	ASSERT_EQ(4242, uid);
	ASSERT_EQ(-EAGAIN, sv_peer_check(c, &la.sa));
	/* waited for the handshake, but with its deadline */
	ASSERT_LE(sv_now_ms() - t0, 2 * SV_PEER_DEADLINE_MS + 1000);
	/* and the progress thread's check does not wait at all: 10 asks in
	 * less time than one waiting ask's deadline */
	t0 = sv_now_ms();
	for (int i = 0; i < 10; i++)
		ASSERT_EQ(-EAGAIN, sv_peer_check_now(c, &la.sa));
	ASSERT_TRUE(sv_now_ms() - t0 < SV_PEER_DEADLINE_MS);
	ASSERT_EQ(1, write(c, "x", 1));
	a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ASSERT_TRUE(a >= 0);
	expect_ours(c);
	expect_ours(a);
	close(a);
	close(c);
	close(l);
}

/*
 * A caller that sent its bytes and closed: once its FIN is acked its
 * socket is a timewait one (state FIN_WAIT2 or TIME_WAIT), which the
 * kernel reports with uid 0.  Its owner is gone: an error, never 0 (as
 * root, that 0 would pass for ours: a local user's hello, sent and
 * closed, would be taken for root's).
 */
SV_TEST(peer_closed_caller_is_no_owner)
{
	union addr la = v4("127.0.0.1");
	int l = listen_on(&la, false), c, a, err;
	uint64_t until = sv_now_ms() + 10000;
	unsigned int us = 50;
	char x;
	uid_t uid;

	pair(l, &la, port_of(&la), &c, &a);
	ASSERT_EQ(1, write(c, "x", 1));
	close(c);
	ASSERT_EQ(1, read(a, &x, 1));
	ASSERT_EQ(0, read(a, &x, 1)); /* its FIN is in */
	/* until its FIN's ACK is in (a delayed ACK), it is a full socket
	 * and still its creator's */
	for (;;) {
		uid = 4242;
		err = sv_peer_tcp_uid(a, &uid);
		if (err)
			break;
		ASSERT_EQ(getuid(), uid);
		ASSERT_TRUE(sv_now_ms() < until);
		sv_backoff(&us);
	}
	ASSERT_EQ(-ENOTCONN, err);
	ASSERT_EQ(4242, uid);
	ASSERT_EQ(-ENOTCONN, sv_peer_check(a, &la.sa));
	close(a);
	close(l);
}

/* Nothing to tell: an error, never 0 (the callers refuse on it). */
SV_TEST(peer_errors_refuse)
{
	union addr la = v4("127.0.0.1");
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int l = listen_on(&la, false);
	uid_t uid = 4242;

	ASSERT_TRUE(s >= 0);
	ASSERT_EQ(-ENOTCONN, sv_peer_tcp_uid(s, &uid)); /* not connected */
	ASSERT_EQ(4242, uid);				/* untouched */
	ASSERT_NE(0, sv_peer_check(s, NULL));
	ASSERT_FALSE(sv_peer_addr_is(s, &la.sa));
	ASSERT_NE(0, sv_peer_check(s, &la.sa));
	ASSERT_EQ(-EBADF, sv_peer_tcp_uid(-1, &uid));
	ASSERT_FALSE(sv_peer_addr_is(-1, &la.sa));
	ASSERT_NE(0, sv_peer_check(-1, NULL));
	ASSERT_NE(0, sv_peer_check(l, NULL)); /* a listener has no peer */
	ASSERT_EQ(4242, uid);
	close(s);
	close(l);
}

/* The words for the transports' one line: one reason per refusal. */
static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct tcp_info info_of(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	ASSERT_OK(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len));
	return ti;
}

/* A reader that never reads: the writer fills its window, and the
 * kernel's bytes stay unacknowledged (SIOCOUTQ > 0: what tcp run.c
 * took for a broken path before, and broke live links on).  The path is
 * fine: the reader's kernel answers the window probes, and no
 * retransmission is counted, through two of them. */
SV_TEST(peer_path_closed_window_is_no_retransmission)
{
	union addr la = v4("127.0.0.1");
	int l = listen_on(&la, false), c, a, small = 4096, unsent = 0;
	static char junk[65536];
	uint64_t t0;

	pair(l, &la, port_of(&la), &c, &a);
	ASSERT_OK(setsockopt(a, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)));
	ASSERT_FALSE(sv_peer_path_retransmits(c)); /* nothing sent */
	ASSERT_OK(fcntl(c, F_SETFL, O_NONBLOCK));
	while (send(c, junk, sizeof(junk), MSG_NOSIGNAL) > 0)
		;
	ASSERT_EQ(EAGAIN, errno);
	ASSERT_OK(ioctl(c, SIOCOUTQ, &unsent));
	ASSERT_TRUE(unsent > 0);
	/* the window probes go out at the RTO (200 ms, doubling: each an
	 * icsk_backoff; an answered probe is no tcpi_probes) */
	t0 = mono_ms();
	while (info_of(c).tcpi_backoff < 2) {
		ASSERT_FALSE(sv_peer_path_retransmits(c));
		ASSERT_TRUE(mono_ms() - t0 < 20000);
		poll(NULL, 0, 10); /* the kernel's timer: nothing to wait on */
	}
	ASSERT_FALSE(sv_peer_path_retransmits(c));
	close(c);
	close(a);
	close(l);
}

/* The other side of the predicate: a SYN the listener drops (its accept
 * queue is full) is retransmitted, and the connecting socket says so.
 * (An established path that goes down is the same timer; it needs a
 * network to cut: netns.tcp_trust and conf_tcp's black hole.) */
SV_TEST(peer_path_dropped_syn_is_a_retransmission)
{
	union addr la = v4("127.0.0.1");
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, c1, c2;
	socklen_t len = sizeof(la);
	uint64_t t0;

	ASSERT_TRUE(s >= 0);
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
	ASSERT_OK(bind(s, &la.sa, sizeof(la.in)));
	ASSERT_OK(listen(s, 0)); /* a queue of one, never accepted */
	ASSERT_OK(getsockname(s, &la.sa, &len));
	c1 = connect_to(&la, port_of(&la)); /* fills it */
	c2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ASSERT_TRUE(c2 >= 0);
	/* another may still fit (the kernel's queue takes backlog + 1) */
	for (int i = 0; i < 4; i++) {
		t0 = mono_ms();
		ASSERT_TRUE(connect(c2, &la.sa, sizeof(la.in)) &&
			    errno == EINPROGRESS);
		while (!sv_peer_path_retransmits(c2) &&
		       info_of(c2).tcpi_state == TCP_SYN_SENT &&
		       mono_ms() - t0 < 10000)
			poll(NULL, 0, 10); /* the SYN's timer: 1 s */
		if (info_of(c2).tcpi_state == TCP_SYN_SENT)
			break;
		close(c2); /* it got in: fill the queue with it, again */
		c2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		ASSERT_TRUE(c2 >= 0);
	}
	ASSERT_EQ(TCP_SYN_SENT, info_of(c2).tcpi_state);
	ASSERT_TRUE(sv_peer_path_retransmits(c2));
	close(c2);
	close(c1);
	close(s);
}

SV_TEST(peer_why_names_each_refusal)
{
	ASSERT_CONTAINS(sv_peer_why(-EACCES), "address");
	ASSERT_CONTAINS(sv_peer_why(-EPERM), "another user");
	ASSERT_CONTAINS(sv_peer_why(-EAGAIN), "handshake");
	ASSERT_CONTAINS(sv_peer_why(-ENOTCONN), "closed");
	ASSERT_CONTAINS(sv_peer_why(-ETIMEDOUT), "did not answer");
}

/* The address in those lines: an IPv4-mapped one as IPv4; none "?". */
SV_TEST(peer_addr_str_names_the_address)
{
	struct sockaddr_in6 m = {.sin6_family = AF_INET6};
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct sockaddr none = {.sa_family = AF_UNSPEC};
	char buf[64];
	int fd;

	inet_pton(AF_INET6, "::ffff:10.77.0.2", &m.sin6_addr);
	ASSERT_STR_EQ("10.77.0.2",
		      sv_peer_addr_str((void *)&m, buf, sizeof(buf)));
	inet_pton(AF_INET6, "fd00:5e::2", &m.sin6_addr);
	ASSERT_STR_EQ("fd00:5e::2",
		      sv_peer_addr_str((void *)&m, buf, sizeof(buf)));
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	ASSERT_STR_EQ("127.0.0.1",
		      sv_peer_addr_str((void *)&a, buf, sizeof(buf)));
	ASSERT_STR_EQ("?", sv_peer_addr_str(&none, buf, sizeof(buf)));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_TRUE(fd >= 0);
	ASSERT_STR_EQ("?", sv_peer_name(fd, buf, sizeof(buf))); /* no peer */
	close(fd);
}

static void skip(const char *why)
{
	printf("SKIP %s: %s\n", sv_test_name(), why);
	fflush(stdout);
	exit(77);
}

/* Exit code of a child: the failed check's number, 0 if all passed. */
static int child_checks(const union addr *to, uint16_t port, int go)
{
	uid_t uid = (uid_t)-2;
	char x;
	int c;

	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		return 10;
	c = connect_to(to, port);
	/* the other end is the listener's: root's */
	if (sv_peer_tcp_uid(c, &uid))
		return 11;
	if (uid != 0)
		return 12;
	if (sv_peer_check(c, NULL) != -EPERM)
		return 13;
	if (sv_peer_check(c, &to->sa) != -EPERM)
		return 14;
	/* hold the connection until the parent has looked */
	if (read(go, &x, 1) < 0)
		return 15;
	close(c);
	return 0;
}

/* Another user over loopback TCP: refused on both sides. */
SV_TEST(peer_other_user)
{
	union addr la = v4("127.0.0.1");
	int go[2], l, a, status;
	uid_t uid = (uid_t)-2;
	pid_t pid;

	if (getuid() != 0)
		skip("needs root to run a child as another user");
	l = listen_on(&la, false);
	ASSERT_OK(pipe2(go, O_CLOEXEC));
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		close(go[1]);
		_exit(child_checks(&la, port_of(&la), go[0]));
	}
	close(go[0]);
	a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ASSERT_TRUE(a >= 0);
	ASSERT_OK(sv_peer_tcp_uid(a, &uid));
	ASSERT_EQ(65534, uid);
	ASSERT_EQ(-EPERM, sv_peer_check(a, NULL));
	ASSERT_EQ(-EPERM, sv_peer_check(a, &la.sa));
	close(go[1]); /* the child may go */
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	close(a);
	close(l);
}

/* Two network namespaces of our own, named after our pid, on one veth
 * pair: A 10.79.0.1 and fd00:79::1, B 10.79.0.2 and fd00:79::2. */
static char ns_a[64], ns_b[64];

static void ns_cleanup(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null",
		 ns_a, ns_b);
	if (system(cmd) < 0)
		perror("system");
}

__attribute__((format(printf, 1, 2))) static void sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		sv_test_fail(__FILE__, __LINE__, "failed: %s", cmd);
}

static void ns_make(void)
{
	int pid = (int)getpid();

	snprintf(ns_a, sizeof(ns_a), "svpeer%d-a", pid);
	snprintf(ns_b, sizeof(ns_b), "svpeer%d-b", pid);
	if (system("command -v ip >/dev/null") != 0)
		skip("needs ip(8) (iproute2)");
	atexit(ns_cleanup);
	if (system("ip netns add svpeer-probe-$$ 2>/dev/null && "
		   "ip netns del svpeer-probe-$$") != 0)
		skip("cannot make a network namespace here");
	sh("ip netns add %s && ip netns add %s", ns_a, ns_b);
	sh("ip -n %s link add pa type veth peer name pb netns %s", ns_a, ns_b);
	sh("ip -n %s addr add 10.79.0.1/24 dev pa && "
	   "ip -n %s addr add 10.79.0.2/24 dev pb && "
	   "ip -n %s addr add fd00:79::1/64 dev pa nodad && "
	   "ip -n %s addr add fd00:79::2/64 dev pb nodad",
	   ns_a, ns_b, ns_a, ns_b);
	sh("ip -n %s addr add fe80::79:1/64 dev pa nodad && "
	   "ip -n %s addr add fe80::79:2/64 dev pb nodad",
	   ns_a, ns_b);
	sh("ip -n %s link set pa up && ip -n %s link set pb up && "
	   "ip -n %s link set lo up && ip -n %s link set lo up",
	   ns_a, ns_b, ns_a, ns_b);
}

static void enter(const char *ns)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(setns(fd, CLONE_NEWNET));
	close(fd);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* A listener in A, a caller in B; each side asks in its own namespace,
 * where the other end is not: -ENOENT, and the address decides. */
static void other_netns(const char *ip_a, const char *ip_b, bool v6addr,
			bool dual)
{
	union addr la = v6addr ? v6(dual ? "::" : ip_a) : v4(ip_a);
	union addr to = v6addr && !dual ? v6(ip_a) : v4(ip_a);
	union addr want_b = v6addr && !dual ? v6(ip_b) : v4(ip_b);
	union addr want_a = to;
	union addr wrong = v4("10.79.0.3");
	int orig, l, c, a;
	uid_t uid = 4242;

	orig = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	ASSERT_TRUE(orig >= 0);
	enter(ns_a);
	l = listen_on(&la, dual);
	enter(ns_b);
	c = connect_to(&to, port_of(&la));
	ASSERT_EQ(-ENOENT, sv_peer_tcp_uid(c, &uid));
	ASSERT_OK(sv_peer_check(c, &want_a.sa));
	ASSERT_EQ(-EACCES, sv_peer_check(c, &wrong.sa));
	enter(ns_a);
	a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ASSERT_TRUE(a >= 0);
	ASSERT_EQ(-ENOENT, sv_peer_tcp_uid(a, &uid));
	ASSERT_EQ(4242, uid);
	ASSERT_OK(sv_peer_check(a, &want_b.sa));
	ASSERT_OK(sv_peer_check(a, NULL));
	ASSERT_EQ(-EACCES, sv_peer_check(a, &wrong.sa));
	ASSERT_EQ(-EACCES, sv_peer_check(a, &want_a.sa));
	if (!v6addr) { /* what a lookup of a peer on another host costs */
		double t0 = now_us();
		int n = 1000;

		for (int i = 0; i < n; i++)
			ASSERT_EQ(-ENOENT, sv_peer_tcp_uid(a, &uid));
		printf("peer_other_netns: %d lookups of a peer not on this "
		       "host: %.1f us each\n",
		       n, (now_us() - t0) / n);
	}
	close(a);
	close(c);
	close(l);
	ASSERT_OK(setns(orig, CLONE_NEWNET));
	close(orig);
}

/* fe80::/10 is one address per interface: the scope id counts when
 * want names one (A's fe80::79:1 on pa, B's fe80::79:2 on pb). */
static void link_local(void)
{
	union addr la = v6("fe80::79:1"), to = v6("fe80::79:1"),
		   want = v6("fe80::79:2");
	unsigned int pa, pb;
	int orig, l, c, a;

	orig = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	ASSERT_TRUE(orig >= 0);
	enter(ns_b);
	pb = if_nametoindex("pb");
	ASSERT_TRUE(pb > 0);
	enter(ns_a);
	pa = if_nametoindex("pa");
	ASSERT_TRUE(pa > 0);
	la.in6.sin6_scope_id = pa;
	l = listen_on(&la, false);
	enter(ns_b);
	to.in6.sin6_scope_id = pb;
	c = connect_to(&to, port_of(&la));
	ASSERT_OK(sv_peer_check(c, &to.sa));
	enter(ns_a);
	a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ASSERT_TRUE(a >= 0);
	ASSERT_OK(sv_peer_check(a, &want.sa)); /* no scope: any interface */
	want.in6.sin6_scope_id = pa;
	ASSERT_OK(sv_peer_check(a, &want.sa));
	want.in6.sin6_scope_id = 1; /* lo */
	ASSERT_NE((int)pa, 1);
	ASSERT_EQ(-EACCES, sv_peer_check(a, &want.sa));
	ASSERT_FALSE(sv_peer_addr_is(a, &want.sa));
	close(a);
	close(c);
	close(l);
	ASSERT_OK(setns(orig, CLONE_NEWNET));
	close(orig);
}

SV_TEST(peer_other_netns)
{
	if (getuid() != 0)
		skip("needs root to make network namespaces");
	ns_make();
	other_netns("10.79.0.1", "10.79.0.2", false, false);
	other_netns("fd00:79::1", "fd00:79::2", true, false);
	/* A listens dual-stack, B calls its IPv4 address */
	other_netns("10.79.0.1", "10.79.0.2", true, true);
	link_local();
}

/*
 * The cost (once per connection set-up): 10,000 lookups with a few
 * hundred TCP sockets of ours open (300 connections, 601 sockets).  The
 * kernel's exact lookup is a hash; the time is printed, never gated.
 */
SV_TEST(peer_cost_10000_lookups)
{
	enum { CONNS = 300, CALLS = 10000 };
	union addr la = v4("127.0.0.1");
	int l = listen_on(&la, false), c[CONNS], a[CONNS];
	double t0, us;
	uid_t uid;

	for (int i = 0; i < CONNS; i++)
		pair(l, &la, port_of(&la), &c[i], &a[i]);
	t0 = now_us();
	for (int i = 0; i < CALLS; i++) {
		int fd = i & 1 ? a[i % CONNS] : c[i % CONNS];

		uid = (uid_t)-2;
		ASSERT_OK(sv_peer_tcp_uid(fd, &uid));
		ASSERT_EQ(getuid(), uid);
	}
	us = (now_us() - t0) / CALLS;
	printf("peer_cost: %d sv_peer_tcp_uid calls, %d TCP sockets open: "
	       "%.2f us per call\n",
	       CALLS, 2 * CONNS + 1, us);
	for (int i = 0; i < CONNS; i++) {
		close(c[i]);
		close(a[i]);
	}
	close(l);
}
