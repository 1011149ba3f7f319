// SPDX-License-Identifier: MIT
/*
 * Floor for connection set-up (issue 12, "Speed"): how fast plain TCP
 * connections are set up between the same two endpoints as cmtime's, to
 * put beside cmtime's rdma_cm connections per second.  Unlike the other
 * floor programs it is a server and a client (bench/run runs it as a pair,
 * pinned and, with --netns, in two namespaces), since a connection's two
 * ends may be on two hosts.
 *
 * A connection counts once the server *program* has accepted it and its
 * first byte has reached the client: the kernel completes the handshake
 * without the program, while rdma_cm's reply comes from the server
 * program (cmtime's rdma_accept).  As cmtime, the client starts all N
 * connects at once and waits for them all.
 *
 *   floor_tcpconn -l -p PORT -n N [-T DEADLINE_S]            the server
 *   floor_tcpconn -a ADDR -p PORT -n N [-T DEADLINE_S]       the client
 *
 * The server accepts N connections, answers each with one byte, waits
 * until the client has closed them all and exits 0.  The client prints
 * one line, "connections=N conn_per_s=X us_per_conn=Y total_ms=Z", and
 * closes them.  Any failure exits 1 saying why; the deadline (default
 * 60 s, SIGALRM) ends a hang.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "floor_tcpconn: %s: %s\n", what, strerror(errno));
	exit(1);
}

static __attribute__((noreturn)) void usage(void)
{
	fprintf(stderr, "usage: floor_tcpconn -l -p PORT -n N [-T S]\n"
			"       floor_tcpconn -a ADDR -p PORT -n N [-T S]\n");
	exit(2);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* N sockets and the std fds must fit: the soft limit up to the hard. */
static void raise_nofile(long n)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r))
		die("getrlimit");
	if (r.rlim_cur >= (rlim_t)n + 16)
		return;
	r.rlim_cur = r.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur < (rlim_t)n + 16) {
		errno = EMFILE;
		die("RLIMIT_NOFILE too small for -n");
	}
}

static int serve(const char *port, long n)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int *fds = calloc((size_t)n, sizeof(*fds));
	int l, one = 1;
	char b = 'c';

	if (!fds)
		die("calloc");
	a.sin_port = htons((uint16_t)atoi(port));
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		die("socket");
	if (setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		die("setsockopt");
	if (bind(l, (struct sockaddr *)&a, sizeof(a)))
		die("bind");
	if (listen(l, n > 4096 ? 4096 : (int)n))
		die("listen");
	for (long i = 0; i < n; i++) {
		fds[i] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		if (fds[i] < 0)
			die("accept");
		setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (write(fds[i], &b, 1) != 1)
			die("write");
	}
	/* the client closes them once it has counted them all */
	for (long i = 0; i < n; i++) {
		ssize_t r;

		do
			r = read(fds[i], &b, 1);
		while (r < 0 && errno == EINTR);
		if (r < 0)
			die("read");
		close(fds[i]);
	}
	close(l);
	free(fds);
	return 0;
}

static int connect_all(const char *addr, const char *port, long n)
{
	struct addrinfo h = {.ai_socktype = SOCK_STREAM,
			     .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV},
			*ai;
	int *fds = calloc((size_t)n, sizeof(*fds));
	struct epoll_event ev[64];
	long done = 0;
	double t0, t1;
	int ep, one = 1;

	if (!fds)
		die("calloc");
	if (getaddrinfo(addr, port, &h, &ai)) {
		errno = EINVAL;
		die("getaddrinfo");
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	t0 = now_s();
	for (long i = 0; i < n; i++) {
		struct epoll_event e = {.events = EPOLLIN,
					.data.u64 = (uint64_t)i};

		fds[i] = socket(ai->ai_family,
				SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fds[i] < 0)
			die("socket");
		setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fds[i], ai->ai_addr, ai->ai_addrlen) &&
		    errno != EINPROGRESS)
			die("connect");
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e))
			die("epoll_ctl");
	}
	while (done < n) {
		int k = epoll_wait(ep, ev, 64, -1);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			die("epoll_wait");
		for (int j = 0; j < k; j++) {
			int fd = fds[ev[j].data.u64];
			char b;
			ssize_t r = read(fd, &b, 1);

			if (r < 0 && errno == EAGAIN)
				continue;
			if (r != 1) {
				if (r == 0)
					errno = ECONNRESET;
				die("the server's first byte");
			}
			epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
			done++;
		}
	}
	t1 = now_s();
	printf("connections=%ld conn_per_s=%.1f us_per_conn=%.2f "
	       "total_ms=%.3f\n",
	       n, (double)n / (t1 - t0), (t1 - t0) * 1e6 / (double)n,
	       (t1 - t0) * 1e3);
	fflush(stdout);
	for (long i = 0; i < n; i++)
		close(fds[i]);
	close(ep);
	freeaddrinfo(ai);
	free(fds);
	return 0;
}

int main(int argc, char **argv)
{
	const char *addr = NULL, *port = NULL;
	int listen_mode = 0, opt;
	long n = 0, deadline = 60;

	while ((opt = getopt(argc, argv, "la:p:n:T:")) != -1) {
		switch (opt) {
		case 'l':
			listen_mode = 1;
			break;
		case 'a':
			addr = optarg;
			break;
		case 'p':
			port = optarg;
			break;
		case 'n':
			n = atol(optarg);
			break;
		case 'T':
			deadline = atol(optarg);
			break;
		default:
			usage();
		}
	}
	if (!port || n < 1 || n > 1000000 || deadline < 1 ||
	    listen_mode == (addr != NULL))
		usage();
	alarm((unsigned int)deadline);
	raise_nofile(n);
	return listen_mode ? serve(port, n) : connect_all(addr, port, n);
}
