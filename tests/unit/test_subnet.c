// SPDX-License-Identifier: MIT
/*
 * SOFTVERBS_SUBNET's parser and its LID <-> address mapping
 * (provider/lib/subnet.h) alone: what parses and what is refused (with
 * why), every host part of a /24 and a /16 both ways, the edges (network
 * and broadcast addresses, LID 0, the last unicast LID 0xbfff and the
 * multicast range), and the env row that refuses a bad value.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "env.h"
#include "subnet.h"
#include "sv_test.h"

static struct sv_subnet parse_ok(const char *v)
{
	struct sv_subnet s = {0};
	char why[128] = "";

	if (sv_subnet_parse(v, &s, why, sizeof(why)))
		sv_test_fail(__FILE__, __LINE__, "%s refused: %s", v, why);
	return s;
}

static void parse_bad(const char *v, const char *want)
{
	struct sv_subnet s = {.net = 7, .prefix = 17};
	char why[128] = "";

	ASSERT_EQ(-EINVAL, sv_subnet_parse(v, &s, why, sizeof(why)));
	ASSERT_CONTAINS(why, want);
	/* the out-parameter is written only on success */
	ASSERT_EQ(7, s.net);
	ASSERT_EQ(17, s.prefix);
}

static uint32_t ip(const char *a)
{
	struct in_addr in;

	ASSERT_EQ(1, inet_pton(AF_INET, a, &in));
	return ntohl(in.s_addr);
}

SV_TEST(subnet_parse)
{
	struct sv_subnet s = parse_ok("10.233.0.0/16");

	ASSERT_EQ(ip("10.233.0.0"), s.net);
	ASSERT_EQ(16, s.prefix);
	s = parse_ok("192.168.7.0/24");
	ASSERT_EQ(ip("192.168.7.0"), s.net);
	ASSERT_EQ(24, s.prefix);
	s = parse_ok("10.1.2.4/30");
	ASSERT_EQ(30, s.prefix);

	parse_bad("10.233.0.0", "is not an IPv4 subnet");
	parse_bad("", "is not an IPv4 subnet");
	parse_bad("10.233.0/16", "'10.233.0' is not an IPv4 address");
	parse_bad("fd00::/64", "'fd00::' is not an IPv4 address");
	parse_bad("10.233.0.0/8", "prefix '8' is not 16..30");
	parse_bad("10.233.0.0/15", "prefix '15' is not 16..30");
	parse_bad("10.233.0.0/31", "prefix '31' is not 16..30");
	parse_bad("10.233.0.0/", "prefix '' is not 16..30");
	parse_bad("10.233.0.0/16x", "prefix '16x' is not 16..30");
	parse_bad("10.233.0.0/+16", "prefix '+16' is not 16..30");
	parse_bad("10.233.0.0/ 16", "prefix ' 16' is not 16..30");
	parse_bad("10.233.0.0/99999999999999999999", "is not 16..30");
	parse_bad("10.233.0.1/16", "has host bits set (10.233.0.0/16?)");
	parse_bad("10.233.1.0/24x", "is not 16..30");
	parse_bad("10.233.1.128/24", "has host bits set (10.233.1.0/24?)");
	/* an address longer than any IPv4 one */
	parse_bad("10.233.000000000000000000.0/16", "is not an IPv4");
}

/* Every host of a /24 both ways; the network and broadcast addresses
 * and the addresses outside have no LID, LIDs past the hosts no
 * address. */
SV_TEST(subnet_map_24)
{
	struct sv_subnet s = parse_ok("10.77.0.0/24");
	uint32_t a;

	ASSERT_EQ(0xfe, sv_subnet_lid_max(&s));
	for (uint32_t lid = 1; lid <= 0xfe; lid++) {
		ASSERT_TRUE(sv_subnet_lid_addr(&s, (uint16_t)lid, &a));
		ASSERT_EQ(ip("10.77.0.0") + lid, a);
		ASSERT_EQ(lid, sv_subnet_addr_lid(&s, a));
	}
	a = 12345;
	ASSERT_FALSE(sv_subnet_lid_addr(&s, 0, &a));
	ASSERT_FALSE(sv_subnet_lid_addr(&s, 0xff, &a));	 /* broadcast */
	ASSERT_FALSE(sv_subnet_lid_addr(&s, 0x100, &a)); /* past the /24 */
	ASSERT_FALSE(sv_subnet_lid_addr(&s, 0xc000, &a));
	ASSERT_FALSE(sv_subnet_lid_addr(&s, 0xffff, &a));
	ASSERT_EQ(12345, a); /* written only on success */
	ASSERT_EQ(0, sv_subnet_addr_lid(&s, ip("10.77.0.0")));
	ASSERT_EQ(0, sv_subnet_addr_lid(&s, ip("10.77.0.255")));
	ASSERT_EQ(0, sv_subnet_addr_lid(&s, ip("10.77.1.1")));
	ASSERT_EQ(0, sv_subnet_addr_lid(&s, ip("10.78.0.1")));
	ASSERT_EQ(0, sv_subnet_addr_lid(&s, ip("127.0.0.1")));
}

/* A /16: host parts up to the last unicast LID (IBA 4.1.3: 0xbfff) have
 * LIDs; 10.233.192.0 and above (the multicast LIDs' range) none. */
SV_TEST(subnet_map_16)
{
	struct sv_subnet s = parse_ok("10.233.0.0/16");
	uint32_t a;

	ASSERT_EQ(SV_LID_UNICAST_MAX, sv_subnet_lid_max(&s));
	for (uint32_t lid = 1; lid <= 0xffff; lid++) {
		bool ok = sv_subnet_lid_addr(&s, (uint16_t)lid, &a);

		ASSERT_EQ(lid <= 0xbfff, ok);
		ASSERT_EQ(lid <= 0xbfff ? lid : 0,
			  sv_subnet_addr_lid(&s, ip("10.233.0.0") + lid));
		if (ok)
			ASSERT_EQ(ip("10.233.0.0") + lid, a);
	}
	ASSERT_EQ(0x0102, sv_subnet_addr_lid(&s, ip("10.233.1.2")));
	ASSERT_EQ(0xbfff, sv_subnet_addr_lid(&s, ip("10.233.191.255")));
	ASSERT_EQ(0, sv_subnet_addr_lid(&s, ip("10.233.192.0")));
	ASSERT_EQ(0, sv_subnet_addr_lid(&s, ip("10.234.0.1")));
}

/* No subnet (prefix 0): no LID names an address, no address has a LID. */
SV_TEST(subnet_none)
{
	struct sv_subnet s = {0};
	uint32_t a;

	ASSERT_FALSE(sv_subnet_lid_addr(&s, 1, &a));
	ASSERT_EQ(0, sv_subnet_addr_lid(&s, ip("10.0.0.1")));
	ASSERT_EQ(0, sv_subnet_addr_lid(&s, 0));
}

/* The env row: a good value is read, a bad one refuses softverbs0. */
SV_TEST(subnet_env_row)
{
	setenv("SOFTVERBS_SUBNET", "10.233.0.0/16", 1);
	sv_env_quiet = true;
	ASSERT_FALSE(sv_env_refused());
	ASSERT_STR_EQ("10.233.0.0/16", sv_env_str(SV_ENV_SUBNET));
}

SV_TEST(subnet_env_row_bad)
{
	setenv("SOFTVERBS_SUBNET", "10.233.0.1/16", 1);
	sv_env_quiet = true;
	ASSERT_TRUE(sv_env_refused());
	ASSERT_NULL(sv_env_str(SV_ENV_SUBNET));
}
