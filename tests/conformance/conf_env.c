// SPDX-License-Identifier: MIT
/*
 * A bad SOFTVERBS_* value through the public API (provider/lib/env.c's
 * policies): a REFUSE variable (SOFTVERBS_TCP_PORT=99999, a transport
 * that does not exist) leaves ibv_get_device_list empty with errno EINVAL
 * and one line on stderr; a DEFAULT one (SOFTVERBS_RING_KB=abc,
 * SOFTVERBS_EVENT_SPIN_US=-5) opens softverbs0 and moves a message, with
 * one line saying which default it used.  Each case runs in a child:
 * the table is read once per process.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pair.h"
#include "sv_test.h"

#define MAX_LINES 8

static void expect_in(const char *line, const char *what)
{
	if (!strstr(line, what))
		sv_test_fail(__FILE__, __LINE__, "'%s' not in the line '%s'",
			     what, line);
}

/* No device, EINVAL, twice (the second call says nothing more). */
static int list_is_empty(void)
{
	for (int k = 0; k < 2; k++) {
		struct ibv_device **l;
		int n = -1;

		errno = 0;
		l = ibv_get_device_list(&n);
		if (!l)
			return 2;
		if (n != 0 || l[0])
			return 3;
		if (errno != EINVAL)
			return 4;
		ibv_free_device_list(l);
	}
	return 0;
}

static void refused(const char *name, const char *value, const char *range)
{
	char lines[MAX_LINES][SV_CHILD_LINE], want[256];
	int n;

	ASSERT_EQ(0, sv_child_env(name, value, list_is_empty, lines, MAX_LINES,
				  &n));
	ASSERT_EQ(1, n);
	snprintf(want, sizeof(want), "%s=%s ", name, value);
	expect_in(lines[0], want);
	expect_in(lines[0], range);
	expect_in(lines[0], "refusing to open softverbs0");
}

SV_TEST(env_bad_port_refuses_device)
{
	refused("SOFTVERBS_TCP_PORT", "99999", "1..65535");
}

SV_TEST(env_bad_transport_refuses_device)
{
	refused("SOFTVERBS_TRANSPORT", "bogus", "auto, shm, tcp or roce");
}

/* softverbs0 opens, and a pair moves a message. */
static int pair_works(void)
{
	struct sv_pair p;

	sv_pair_open(&p, NULL, NULL);
	sv_pair_ping(&p);
	sv_pair_close(&p);
	return 0;
}

static void defaulted(const char *name, const char *value, const char *range,
		      const char *using)
{
	char lines[MAX_LINES][SV_CHILD_LINE], want[256];
	int n;

	ASSERT_EQ(0,
		  sv_child_env(name, value, pair_works, lines, MAX_LINES, &n));
	ASSERT_EQ(1, n);
	snprintf(want, sizeof(want), "%s=%s ", name, value);
	expect_in(lines[0], want);
	expect_in(lines[0], range);
	expect_in(lines[0], using);
}

SV_TEST(env_bad_ring_kb_uses_default)
{
	defaulted("SOFTVERBS_RING_KB", "abc", "16..262144 KiB",
		  "using default 1024 KiB");
}

SV_TEST(env_bad_spin_uses_default)
{
	defaulted("SOFTVERBS_EVENT_SPIN_US", "-5", "0..10000000 us",
		  "using default 50 us");
}
