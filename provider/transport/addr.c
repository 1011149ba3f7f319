// SPDX-License-Identifier: MIT
/*
 * This host's addresses, as the transports and the device name them: the
 * LID every process of the host agrees on, the node GUID, the GID table
 * (link-local, then ::ffff:a.b.c.d per local IPv4 address, then each
 * IPv6 address of the host that is not link-local: the address itself,
 * as the kernel's RoCE GID table), and what a GID names: an IP address,
 * this host or another.  A host here is a network namespace: that is what
 * QPNs and the shared-memory transport are scoped to.  With
 * SOFTVERBS_SUBNET a LID is the host part of an address (subnet.h): what
 * a LID names, and this host's LID.  The UD transport, the QPs' routes
 * and the device's queries (verbs/device.c) call them.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "ifwatch.h"
#include "subnet.h"
#include "transport.h"

/* FNV-1a over the host's identity: network namespace and host name. */
static uint64_t host_hash(void)
{
	static uint64_t h;
	struct stat st;
	char name[256] = "";

	if (h)
		return h;
	h = 1469598103934665603ull;
	if (stat("/proc/self/ns/net", &st) == 0) {
		for (unsigned int i = 0; i < sizeof(st.st_ino); i++) {
			h ^= (st.st_ino >> (8 * i)) & 0xff;
			h *= 1099511628211ull;
		}
	}
	gethostname(name, sizeof(name) - 1);
	for (char *p = name; *p; p++) {
		h ^= (uint8_t)*p;
		h *= 1099511628211ull;
	}
	return h ? h : 1;
}

/* This host's LID, and SOFTVERBS_SUBNET's part in it (read once: the
 * port's LID does not move while a program runs). */
static struct {
	pthread_once_t once;
	uint16_t lid;	      /* the port's */
	struct sv_subnet net; /* prefix 0: no SOFTVERBS_SUBNET */
	struct in_addr self;  /* our address there; 0: none */
} lids = {.once = PTHREAD_ONCE_INIT};

/* The lowest address of this host on the subnet that has a LID (host
 * order), or 0. */
static uint32_t subnet_self(const struct sv_subnet *net)
{
	struct ifaddrs *ifa, *i;
	uint32_t best = 0;

	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i; i = i->ifa_next) {
		uint32_t a;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		a = ntohl(((const struct sockaddr_in *)i->ifa_addr)
				  ->sin_addr.s_addr);
		if (sv_subnet_addr_lid(net, a) && (!best || a < best))
			best = a;
	}
	freeifaddrs(ifa);
	return best;
}

static void lids_init(void)
{
	const char *v = sv_env_str(SV_ENV_SUBNET);
	char why[128];
	uint32_t self;

	/* a unicast LID (IBA 4.1.3: 0x0001-0xbfff) every process here
	 * agrees on */
	lids.lid = (uint16_t)(1 + host_hash() % 0xbffe);
	/* env.c refused a bad value (sv_env_str: NULL) */
	if (!v || sv_subnet_parse(v, &lids.net, why, sizeof(why)))
		return;
	self = subnet_self(&lids.net);
	if (!self) {
		fprintf(stderr,
			"softverbs: SOFTVERBS_SUBNET=%s: no address of this "
			"host is in it with a LID (host part 1..0x%04x); this "
			"host keeps LID 0x%04x, which may be another host's: "
			"give it an address there\n",
			v, sv_subnet_lid_max(&lids.net), lids.lid);
		return;
	}
	lids.self.s_addr = htonl(self);
	lids.lid = sv_subnet_addr_lid(&lids.net, self);
}

uint16_t sv_local_lid(void)
{
	pthread_once(&lids.once, lids_init);
	return lids.lid;
}

bool sv_lid_ipv4(uint16_t lid, struct in_addr *a)
{
	uint32_t addr;

	if (lid == sv_local_lid() || !sv_subnet_lid_addr(&lids.net, lid, &addr))
		return false;
	a->s_addr = htonl(addr);
	return true;
}

uint16_t sv_ipv4_lid(struct in_addr a)
{
	sv_local_lid();
	return sv_subnet_addr_lid(&lids.net, ntohl(a.s_addr));
}

bool sv_subnet_self(struct in_addr *a)
{
	sv_local_lid();
	if (!lids.self.s_addr)
		return false;
	*a = lids.self;
	return true;
}

uint16_t sv_subnet_lid_last(void)
{
	sv_local_lid();
	return lids.net.prefix ? sv_subnet_lid_max(&lids.net) : 0;
}

uint64_t sv_node_guid(void)
{
	/* a locally administered EUI-64, from the host hash */
	return (host_hash() & ~(0xffull << 56)) | (0x02ull << 56);
}

/* An IPv6 address that names this host to others as a GID: not
 * link-local (fe80::/10 needs a scope a GID cannot carry: our entry 0 is
 * the host's link-local GID), not v4-mapped (the IPv4 entries), not
 * multicast or unspecified. */
static bool ipv6_gid_ok(const struct in6_addr *a)
{
	return !IN6_IS_ADDR_LINKLOCAL(a) && !IN6_IS_ADDR_V4MAPPED(a) &&
	       !IN6_IS_ADDR_MULTICAST(a) && !IN6_IS_ADDR_UNSPECIFIED(a);
}

/* Reads the GID table from the interfaces; its length.  The IPv4
 * entries come before the IPv6 ones, whatever order getifaddrs gives,
 * so an IPv4 entry's index does not move when IPv6 addresses come and go
 * (programs and tests pass -g N). */
static int gid_table_read(union ibv_gid *gids)
{
	struct ifaddrs *ifa, *i;
	uint64_t guid = htobe64(sv_node_guid());
	int n = 1;

	memset(gids, 0, sizeof(*gids) * SV_GID_TBL_LEN);
	gids[0].raw[0] = 0xfe;
	gids[0].raw[1] = 0x80;
	memcpy(&gids[0].raw[8], &guid, 8);
	if (getifaddrs(&ifa))
		return n;
	for (i = ifa; i && n < SV_GID_TBL_LEN; i = i->ifa_next) {
		const struct sockaddr_in *sin;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		sin = (const struct sockaddr_in *)i->ifa_addr;
		gids[n].raw[10] = 0xff;
		gids[n].raw[11] = 0xff;
		memcpy(&gids[n].raw[12], &sin->sin_addr, 4);
		n++;
	}
	for (i = ifa; i && n < SV_GID_TBL_LEN; i = i->ifa_next) {
		const struct sockaddr_in6 *sin6;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6)
			continue;
		sin6 = (const struct sockaddr_in6 *)i->ifa_addr;
		if (!ipv6_gid_ok(&sin6->sin6_addr))
			continue;
		memcpy(gids[n].raw, &sin6->sin6_addr, 16);
		n++;
	}
	freeifaddrs(ifa);
	return n;
}

/*
 * The table as last read, and the interface generation it was read at
 * (lib/ifwatch.h): every ibv_query_gid, and an rdma_cm connection's
 * set-up about 11 times, asked for it, and each read is a getifaddrs
 * (~43 us).  Read again only once an address or link changed.
 */
static struct {
	pthread_mutex_t lock;
	uint64_t gen; /* 0: never read */
	int n;
	union ibv_gid gids[SV_GID_TBL_LEN];
} gid_cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void gid_cache_atfork_child(void)
{
	pthread_mutex_init(&gid_cache.lock, NULL);
}

static pthread_once_t gid_cache_once = PTHREAD_ONCE_INIT;

static void gid_cache_register(void)
{
	pthread_atfork(NULL, NULL, gid_cache_atfork_child);
}

/* Fills the GID table; returns its length (at most SV_GID_TBL_LEN). */
int sv_gid_table(union ibv_gid *gids)
{
	uint64_t gen;
	int n;

	pthread_once(&gid_cache_once, gid_cache_register);
	/* before reading: a change during the read moves it again */
	gen = sv_ifaddr_gen();
	pthread_mutex_lock(&gid_cache.lock);
	if (gid_cache.gen == gen) {
		n = gid_cache.n;
		memcpy(gids, gid_cache.gids, sizeof(*gids) * SV_GID_TBL_LEN);
		pthread_mutex_unlock(&gid_cache.lock);
		return n;
	}
	pthread_mutex_unlock(&gid_cache.lock);
	n = gid_table_read(gids);
	pthread_mutex_lock(&gid_cache.lock);
	gid_cache.gen = gen;
	gid_cache.n = n;
	memcpy(gid_cache.gids, gids, sizeof(*gids) * SV_GID_TBL_LEN);
	pthread_mutex_unlock(&gid_cache.lock);
	return n;
}

bool sv_gid_ipv4(const union ibv_gid *gid, struct in_addr *a)
{
	if (memcmp(gid->raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12))
		return false;
	memcpy(&a->s_addr, &gid->raw[12], 4);
	return true;
}

bool sv_gid_sockaddr(const union ibv_gid *gid, uint16_t port,
		     union sv_sockaddr *a)
{
	struct in6_addr a6;
	struct in_addr in;

	memset(a, 0, sizeof(*a));
	if (sv_gid_ipv4(gid, &in)) {
		a->in.sin_family = AF_INET;
		a->in.sin_port = htons(port);
		a->in.sin_addr = in;
		return true;
	}
	memcpy(&a6, gid->raw, 16);
	if (!ipv6_gid_ok(&a6))
		return false;
	a->in6.sin6_family = AF_INET6;
	a->in6.sin6_port = htons(port);
	a->in6.sin6_addr = a6;
	return true;
}

bool sv_ipv4_is_local(struct in_addr a)
{
	union ibv_gid g = {.raw = {[10] = 0xff, [11] = 0xff}};

	memcpy(&g.raw[12], &a, 4);
	return sv_gid_is_local(&g);
}

bool sv_gid_is_local(const union ibv_gid *gid)
{
	union ibv_gid gids[SV_GID_TBL_LEN];
	int n = sv_gid_table(gids);

	for (int i = 0; i < n; i++)
		if (!memcmp(&gids[i], gid, sizeof(*gid)))
			return true;
	/* ::ffff:127.x.y.z and ::1 are this host whatever the table says */
	return !memcmp(gid->raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff\x7f", 13) ||
	       !memcmp(gid->raw, &in6addr_loopback, 16);
}
