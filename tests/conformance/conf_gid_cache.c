// SPDX-License-Identifier: MIT
/*
 * The GID table is read from the interfaces once, and again only after
 * an address or link changed (transport/addr.c, lib/ifwatch.c; issue 27
 * item 3): every ibv_query_gid was a getifaddrs (~43 us), and one
 * rdma_cm connection's set-up made about 11.  This program defines
 * getifaddrs, so libibverbs' calls come here first and go on to the next
 * definition (the sanitizer's or libc's) by RTLD_NEXT, counted.
 *   gid_table_read_once: 1,000 queries, at most 2 reads;
 *   gid_table_asks_no_pid: 1,000 queries, at most 2 getpid calls (the
 *     fork check was a getpid per query, 3 per rdma_cm connection per
 *     side: it is the pthread_atfork child handler's flag now); and a
 *     forked child still queries (its own socket);
 *   gid_table_follows_addresses: in a network namespace of its own
 *     (root; else skipped), an address added to lo is in the very next
 *     query, and gone from the one after it is removed.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "sv_test.h"

static atomic_long n_getifaddrs;

int getifaddrs(struct ifaddrs **ifap)
{
	static int (*next)(struct ifaddrs **);

	if (!next)
		next = (int (*)(struct ifaddrs **))dlsym(RTLD_NEXT,
							 "getifaddrs");
	atomic_fetch_add(&n_getifaddrs, 1);
	return next(ifap);
}

static atomic_long n_getpid;

pid_t getpid(void)
{
	static pid_t (*next)(void);

	if (!next)
		next = (pid_t(*)(void))dlsym(RTLD_NEXT, "getpid");
	atomic_fetch_add(&n_getpid, 1);
	return next();
}

static struct ibv_context *open_dev(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c;

	ASSERT_NOT_NULL(l);
	ASSERT_NOT_NULL(l[0]);
	c = ibv_open_device(l[0]);
	ASSERT_NOT_NULL(c);
	ibv_free_device_list(l);
	return c;
}

/* Whether port 1's table has the IPv4-mapped GID of a (dotted). */
static bool has_v4_gid(struct ibv_context *c, const char *a)
{
	struct ibv_port_attr pa;
	union ibv_gid want = {.raw = {[10] = 0xff, [11] = 0xff}};

	ASSERT_EQ(1, inet_pton(AF_INET, a, &want.raw[12]));
	ASSERT_OK(ibv_query_port(c, 1, &pa));
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		union ibv_gid g;

		if (ibv_query_gid(c, 1, i, &g))
			break;
		if (!memcmp(&g, &want, sizeof(g)))
			return true;
	}
	return false;
}

SV_TEST(gid_table_read_once)
{
	struct ibv_context *c = open_dev();
	union ibv_gid first, g;
	long before, reads;

	ASSERT_OK(ibv_query_gid(c, 1, 0, &first));
	before = atomic_load(&n_getifaddrs);
	for (int i = 0; i < 1000; i++) {
		ASSERT_OK(ibv_query_gid(c, 1, i % 2, &g));
		if (i % 2 == 0)
			ASSERT_EQ(0, memcmp(&g, &first, sizeof(g)));
	}
	/* no address changes here: none, but an unrelated change on the
	 * host may move it once or twice */
	reads = atomic_load(&n_getifaddrs) - before;
	ASSERT_LE(reads, 2);
	ASSERT_OK(ibv_close_device(c));
}

SV_TEST(gid_table_asks_no_pid)
{
	struct ibv_context *c = open_dev();
	union ibv_gid first, g;
	long before;
	pid_t pid;
	int st;

	ASSERT_OK(ibv_query_gid(c, 1, 0, &first));
	before = atomic_load(&n_getpid);
	for (int i = 0; i < 1000; i++)
		ASSERT_OK(ibv_query_gid(c, 1, i % 2, &g));
	ASSERT_LE(atomic_load(&n_getpid) - before, 2); /* was 1,000 */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) /* the child's first look opens its own socket */
		_exit(ibv_query_gid(c, 1, 0, &g) ||
		      memcmp(&g, &first, sizeof(g)) ||
		      ibv_query_gid(c, 1, 0, &g));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ASSERT_OK(ibv_query_gid(c, 1, 0, &g)); /* and the parent's still is */
	ASSERT_EQ(0, memcmp(&g, &first, sizeof(g)));
	ASSERT_OK(ibv_close_device(c));
}

/* Sets (or, with a NULL address, removes) lo:7's IPv4 address. */
static void lo_alias(const char *a)
{
	struct ifreq r;
	struct sockaddr_in *sin = (struct sockaddr_in *)&r.ifr_addr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ASSERT_GE(fd, 0);
	memset(&r, 0, sizeof(r));
	snprintf(r.ifr_name, sizeof(r.ifr_name), "lo:7");
	if (a) {
		sin->sin_family = AF_INET;
		ASSERT_EQ(1, inet_pton(AF_INET, a, &sin->sin_addr));
		ASSERT_OK(ioctl(fd, SIOCSIFADDR, &r));
	} else {
		/* an alias brought down loses its address */
		ASSERT_OK(ioctl(fd, SIOCGIFFLAGS, &r));
		r.ifr_flags &= ~IFF_UP;
		ASSERT_OK(ioctl(fd, SIOCSIFFLAGS, &r));
	}
	close(fd);
}

static void lo_up(void)
{
	struct ifreq r;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ASSERT_GE(fd, 0);
	memset(&r, 0, sizeof(r));
	snprintf(r.ifr_name, sizeof(r.ifr_name), "lo");
	ASSERT_OK(ioctl(fd, SIOCGIFFLAGS, &r));
	r.ifr_flags |= IFF_UP;
	ASSERT_OK(ioctl(fd, SIOCSIFFLAGS, &r));
	close(fd);
}

SV_TEST(gid_table_follows_addresses)
{
	/* TEST-NET-1 (RFC 5737), on lo of a namespace of our own */
	const char *a = "192.0.2.77";
	struct ibv_context *c;

	if (unshare(CLONE_NEWNET)) {
		fprintf(stderr,
			"SKIP: a network namespace of its own: %s "
			"(needs root)\n",
			strerror(errno));
		exit(77);
	}
	lo_up();
	c = open_dev();
	ASSERT_TRUE(has_v4_gid(c, "127.0.0.1"));
	ASSERT_FALSE(has_v4_gid(c, a));
	for (int round = 0; round < 3; round++) {
		lo_alias(a);
		ASSERT_TRUE(has_v4_gid(c, a));
		lo_alias(NULL);
		ASSERT_FALSE(has_v4_gid(c, a));
	}
	ASSERT_OK(ibv_close_device(c));
}
