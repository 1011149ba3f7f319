/* SPDX-License-Identifier: MIT */
/*
 * SOFTVERBS_SUBNET (docs/tcp.md, "LIDs between hosts"): an IPv4 subnet
 * whose hosts' LIDs are the host parts of their addresses, so that a LID
 * names a host with no subnet manager.  The parser (env.c's check,
 * addr.c) and the mapping both ways: pure functions, inline so that
 * every copy of env.c (libibverbs, librdmacm, softverbs-stat) has them.
 */
#ifndef SV_SUBNET_H
#define SV_SUBNET_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* IBA 4.1.3: unicast LIDs are 0x0001-0xbfff */
#define SV_LID_UNICAST_MAX 0xbfff
/* a LID is 16 bits: a shorter prefix has host parts no LID can carry */
#define SV_SUBNET_PREFIX_MIN 16
/* a /31 or /32 has no room for two hosts with a network and broadcast */
#define SV_SUBNET_PREFIX_MAX 30

struct sv_subnet {
	uint32_t net;	 /* host order, host bits zero */
	unsigned prefix; /* 16..30; 0: no subnet */
};

static inline uint32_t sv_subnet_mask(const struct sv_subnet *s)
{
	return s->prefix ? ~0u << (32 - s->prefix) : 0;
}

/* The highest LID a host of s can have: its last host part before the
 * broadcast address, at most the last unicast LID. */
static inline uint16_t sv_subnet_lid_max(const struct sv_subnet *s)
{
	uint32_t last = ~sv_subnet_mask(s) - 1;

	return (uint16_t)(last < SV_LID_UNICAST_MAX ? last
						    : SV_LID_UNICAST_MAX);
}

/*
 * Parses "a.b.c.d/N" (N in 16..30, host bits of a.b.c.d zero) into *s:
 * 0, or -EINVAL with why filled ("has host bits set: 10.233.0.0/16?").
 */
static inline int sv_subnet_parse(const char *v, struct sv_subnet *s, char *why,
				  size_t n)
{
	char addr[INET_ADDRSTRLEN], *end;
	const char *slash = strchr(v, '/');
	struct in_addr a;
	struct sv_subnet t;
	unsigned long p;

	if (!slash || (size_t)(slash - v) >= sizeof(addr)) {
		snprintf(why, n, "is not an IPv4 subnet a.b.c.d/N");
		return -EINVAL;
	}
	memcpy(addr, v, (size_t)(slash - v));
	addr[slash - v] = '\0';
	if (inet_pton(AF_INET, addr, &a) != 1) {
		snprintf(why, n, "'%s' is not an IPv4 address", addr);
		return -EINVAL;
	}
	errno = 0;
	p = strtoul(slash + 1, &end, 10);
	if (!slash[1] || *end || errno || slash[1] < '0' || slash[1] > '9' ||
	    p < SV_SUBNET_PREFIX_MIN || p > SV_SUBNET_PREFIX_MAX) {
		snprintf(why, n,
			 "prefix '%s' is not %d..%d (a LID is 16 bits: the "
			 "host part of an address)",
			 slash + 1, SV_SUBNET_PREFIX_MIN, SV_SUBNET_PREFIX_MAX);
		return -EINVAL;
	}
	t.prefix = (unsigned)p;
	t.net = ntohl(a.s_addr);
	if (t.net & ~sv_subnet_mask(&t)) {
		struct in_addr net = {
			.s_addr = htonl(t.net & sv_subnet_mask(&t))};

		inet_ntop(AF_INET, &net, addr, sizeof(addr));
		snprintf(why, n, "has host bits set (%s/%u?)", addr, t.prefix);
		return -EINVAL;
	}
	*s = t;
	return 0;
}

/* The address (host order) LID lid names on s: true, or false when no
 * host of s has that LID (0, multicast, past the subnet's hosts). */
static inline bool sv_subnet_lid_addr(const struct sv_subnet *s, uint16_t lid,
				      uint32_t *addr)
{
	if (!s->prefix || lid == 0 || lid > sv_subnet_lid_max(s))
		return false;
	*addr = s->net | lid;
	return true;
}

/* The LID of address addr (host order) on s, or 0: not in s, or its host
 * part is no unicast LID (the network or broadcast address, past
 * 0xbfff). */
static inline uint16_t sv_subnet_addr_lid(const struct sv_subnet *s,
					  uint32_t addr)
{
	uint32_t host = addr & ~sv_subnet_mask(s);

	if (!s->prefix || (addr & sv_subnet_mask(s)) != s->net || host == 0 ||
	    host > sv_subnet_lid_max(s))
		return 0;
	return (uint16_t)host;
}

#endif
