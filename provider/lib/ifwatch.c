// SPDX-License-Identifier: MIT
/*
 * The interface generation (ifwatch.h): a NETLINK_ROUTE socket in the
 * groups of address and link changes.  The kernel queues its notice of a
 * change before the call that made it returns, so a look after a change
 * (in any process of the namespace) finds the notice waiting and moves
 * the generation.  Reading drains the queue without blocking; what the
 * notices say does not matter.
 *
 * After fork the child shares the parent's socket, and a notice it read
 * would be lost to the parent: the child never reads it, but opens its
 * own (and closes its copy only if the fd still is that socket: the
 * program may have closed and reused the number).  The child knows it is
 * one by its pthread_atfork handler's flag, not by a getpid per call
 * (issue 27 item 3: three per rdma_cm connection per side); a child made
 * by a raw clone(2) that runs no handlers would read the parent's socket
 * (glibc's fork, vfork+exec and posix_spawn are fine).
 */
#include "ifwatch.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

static struct {
	pthread_mutex_t lock;
	int fd;		/* the socket; -1: none (every call moves) */
	uint32_t port;	/* its netlink port id: ours if getsockname agrees */
	bool opened;	/* tried to open it (this process or its parent) */
	bool forked;	/* a child since: its own socket at its next call */
	uint64_t gen;	/* current generation */
	uint64_t moves; /* times it moved */
} w = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

/* The socket, bound to the change groups; -1 if it cannot be had. */
static int watch_open(uint32_t *port)
{
	struct sockaddr_nl a = {
		.nl_family = AF_NETLINK,
		.nl_groups =
			RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR,
	};
	socklen_t len = sizeof(a);
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
			NETLINK_ROUTE);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &len)) {
		close(fd);
		return -1;
	}
	*port = a.nl_pid;
	return fd;
}

/* Whether fd still is the socket we opened (a forked child's copy). */
static bool still_ours(int fd, uint32_t port)
{
	struct sockaddr_nl a;
	socklen_t len = sizeof(a);

	return !getsockname(fd, (struct sockaddr *)&a, &len) &&
	       len == sizeof(a) && a.nl_family == AF_NETLINK &&
	       a.nl_pid == port;
}

/* Drains the queue: true if anything came (or was lost: ENOBUFS). On any
 * other error the socket goes (every later call then moves). */
static bool drain(void)
{
	char buf[8192];
	bool moved = false;

	for (;;) {
		ssize_t n = recv(w.fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0 || (n < 0 && errno == ENOBUFS)) {
			moved = true;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return moved;
		if (n < 0 && errno == EINTR)
			continue;
		close(w.fd);
		w.fd = -1;
		return true;
	}
}

/* A child forked while another thread held the lock would wait for ever:
 * its copy starts unlocked (the fd is handled at its first call). */
static void atfork_child(void)
{
	pthread_mutex_init(&w.lock, NULL);
	w.forked = w.opened;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

uint64_t sv_ifaddr_gen(void)
{
	bool moved;
	uint64_t g;

	pthread_once(&once, register_atfork);
	pthread_mutex_lock(&w.lock);
	if (!w.opened || w.forked) {
		/* first use, or a forked child: a socket of its own, and
		 * whatever was derived before is not known to be current */
		if (w.forked && w.fd >= 0 && still_ours(w.fd, w.port))
			close(w.fd);
		w.fd = watch_open(&w.port);
		w.opened = true;
		w.forked = false;
		moved = true;
	} else {
		moved = w.fd < 0 || drain();
	}
	if (moved) {
		w.gen++;
		w.moves++;
	}
	g = w.gen;
	pthread_mutex_unlock(&w.lock);
	return g;
}

uint64_t sv_ifaddr_gen_moves(void)
{
	uint64_t m;

	pthread_mutex_lock(&w.lock);
	m = w.moves;
	pthread_mutex_unlock(&w.lock);
	return m;
}
