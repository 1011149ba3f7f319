// SPDX-License-Identifier: MIT
/*
 * SOFTVERBS_FAULTS' pure parts (provider/lib/inject.c): the spec's parser
 * (every key, the bounds of a probability, junk, the key it names when it
 * refuses) and the decision function (0 never, 1 always, the rate it
 * gives, and that it depends on nothing but its arguments).
 */
#include <string.h>

#include "inject.h"
#include "sv_test.h"

static struct sv_inject parse_ok(const char *spec)
{
	struct sv_inject f;
	char bad[32] = "untouched";

	if (sv_inject_parse(spec, &f, bad, sizeof(bad)))
		sv_test_fail(__FILE__, __LINE__, "'%s' refused at '%s'",
			     spec ? spec : "(null)", bad);
	return f;
}

static void parse_bad(const char *spec, const char *key)
{
	struct sv_inject f;
	char bad[32] = "untouched";

	ASSERT_EQ(-22, sv_inject_parse(spec, &f, bad, sizeof(bad)));
	if (strcmp(bad, key))
		sv_test_fail(__FILE__, __LINE__, "'%s' named '%s', not '%s'",
			     spec, bad, key);
}

SV_TEST(faults_parse_every_key)
{
	struct sv_inject f = parse_ok(
		"drop=0.01,rnr=1,access=0.5,kill_at=12,seed=0x10,delay_us=3,"
		"reorder=0.25,reorder_out=0.125");

	ASSERT_TRUE(f.on);
	ASSERT_TRUE(f.drop == 0.01);
	ASSERT_TRUE(f.rnr == 1.0);
	ASSERT_TRUE(f.access == 0.5);
	ASSERT_EQ(12u, f.kill_at);
	ASSERT_EQ(16u, f.seed);
	ASSERT_EQ(3u, f.delay_us);
	ASSERT_TRUE(f.reorder == 0.25);
	ASSERT_TRUE(f.reorder_out == 0.125);
	f = parse_ok("seed=1");
	ASSERT_TRUE(f.on);
	ASSERT_TRUE(f.drop == 0);
	f = parse_ok("drop=0,access=.25");
	ASSERT_TRUE(f.access == 0.25);
}

SV_TEST(faults_parse_empty_is_off)
{
	ASSERT_FALSE(parse_ok("").on);
	ASSERT_FALSE(parse_ok(NULL).on);
}

SV_TEST(faults_parse_refuses_naming_the_key)
{
	parse_bad("drop=1.01", "drop");
	parse_bad("drop=-0", "drop");
	parse_bad("drop=nan", "drop");
	parse_bad("drop=0.1x", "drop");
	parse_bad("rnr=", "rnr");
	parse_bad("access=2", "access");
	parse_bad("reorder_out=1.5", "reorder_out");
	parse_bad("kill_at=-1", "kill_at");
	parse_bad("kill_at=1.5", "kill_at");
	parse_bad("seed=99999999999999999999999", "seed");
	parse_bad("delay_us=x", "delay_us");
	parse_bad("delay_us=10000001", "delay_us");
	parse_bad("drops=0.1", "drops");
	parse_bad("DROP=0.1", "DROP");
	parse_bad("drop", "drop");
	parse_bad("=1", "");
	parse_bad("drop=0.1,,seed=1", "");
	parse_bad("seed=1,drop=0.1,", "");
	parse_bad("drop=0.1 ", "drop");
	parse_bad("averyveryverylongkeyname=1", "averyveryverylongkeyname");
}

SV_TEST(faults_hit_bounds)
{
	for (uint32_t psn = 0; psn < 100000; psn++) {
		ASSERT_FALSE(sv_inject_hit(0, 1, SV_FAULT_DROP, 0, psn, 0));
		ASSERT_TRUE(sv_inject_hit(1, 1, SV_FAULT_DROP, 0, psn, 0));
	}
}

/* The rate is P (to 3 sigma over 10^6 draws), for each kind. */
SV_TEST(faults_hit_rate)
{
	static const double ps[] = {0.001, 0.01, 0.05, 0.5, 0.99};

	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		const uint32_t n = 1000000;
		double p = ps[i], sd = __builtin_sqrt(n * p * (1 - p));
		uint32_t hits = 0;

		for (uint32_t k = 0; k < n; k++)
			hits += sv_inject_hit(p, 42, SV_FAULT_DROP, k & 7,
					      k >> 3, k & 1);
		if (hits < n * p - 4 * sd || hits > n * p + 4 * sd)
			sv_test_fail(__FILE__, __LINE__, "p %g: %u hits of %u",
				     p, hits, n);
	}
}

/* A pure function: same inputs, same answer, in any order; each input
 * changes the answers. */
SV_TEST(faults_hit_is_pure_and_keyed)
{
	uint32_t same = 0, seed = 0, kind = 0, qp = 0, psn = 0, att = 0;

	for (uint32_t k = 0; k < 20000; k++) {
		bool h = sv_inject_hit(0.3, 7, SV_FAULT_DROP, 3, k, 1);

		ASSERT_EQ(h, sv_inject_hit(0.3, 7, SV_FAULT_DROP, 3, k, 1));
		same += h;
		seed += h != sv_inject_hit(0.3, 8, SV_FAULT_DROP, 3, k, 1);
		kind += h != sv_inject_hit(0.3, 7, SV_FAULT_RSP, 3, k, 1);
		qp += h != sv_inject_hit(0.3, 7, SV_FAULT_DROP, 4, k, 1);
		psn += h != sv_inject_hit(0.3, 7, SV_FAULT_DROP, 3, k + 1, 1);
		att += h != sv_inject_hit(0.3, 7, SV_FAULT_DROP, 3, k, 2);
	}
	/* independent draws differ 2 p (1 - p) = 42% of the time */
	ASSERT_TRUE(same > 5000);
	ASSERT_TRUE(seed > 7000 && kind > 7000 && qp > 7000 && psn > 7000 &&
		    att > 7000);
}

SV_TEST(faults_qp_index_counts)
{
	uint32_t a = sv_inject_qp_index();

	ASSERT_EQ(a + 1, sv_inject_qp_index());
}
