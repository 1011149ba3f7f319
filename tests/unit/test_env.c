// SPDX-License-Identifier: MIT
/*
 * The SOFTVERBS_* table (provider/lib/env.c) alone: each type's parser, the
 * defaults when unset or empty, the one stderr line a bad value gets
 * (variable, value, range, what happens) and the two policies, the
 * quiet mode librdmacm and softverbs-stat use, and that the environment
 * is read once.  Every SV_TEST is its own process: the table is read at
 * its first accessor call, after the test has set the variables.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "sv_test.h"

#define MAX_LINES 8

static int saved_fd = -1;
static FILE *cap;

/* stderr into a temporary file, from here to capture_end. */
static void capture_begin(void)
{
	cap = tmpfile();
	ASSERT_NOT_NULL(cap);
	fflush(stderr);
	saved_fd = dup(2);
	ASSERT_TRUE(saved_fd >= 0);
	ASSERT_TRUE(dup2(fileno(cap), 2) == 2);
}

/* Restores stderr; the lines written meanwhile (how many). */
static int capture_end(char lines[MAX_LINES][1024])
{
	int n = 0;

	fflush(stderr);
	ASSERT_TRUE(dup2(saved_fd, 2) == 2);
	close(saved_fd);
	rewind(cap);
	while (n < MAX_LINES && fgets(lines[n], 1024, cap))
		n++;
	fclose(cap);
	for (int i = 0; i < n; i++)
		fprintf(stderr, "said: %s", lines[i]);
	return n;
}

static void unset_all(void)
{
	for (int i = 0; i < SV_ENV_COUNT; i++)
		ASSERT_OK(unsetenv(sv_env_rows[i].name));
}

static void expect_in(const char *line, const char *what)
{
	if (!strstr(line, what))
		sv_test_fail(__FILE__, __LINE__, "'%s' not in the line '%s'",
			     what, line);
}

SV_TEST(env_unset_gives_every_default)
{
	char lines[MAX_LINES][1024];

	unset_all();
	ASSERT_OK(setenv("SOFTVERBS_TCP_PORT", "", 1)); /* empty: unset */
	capture_begin();
	for (int i = 0; i < SV_ENV_COUNT; i++) {
		ASSERT_EQ(sv_env_rows[i].def, sv_env_uint(i));
		ASSERT_NULL(sv_env_str(i));
	}
	ASSERT_FALSE(sv_env_refused());
	ASSERT_EQ(0, capture_end(lines));
	/* the defaults the call sites had before the table */
	ASSERT_EQ(4791, sv_env_uint(SV_ENV_TCP_PORT));
	ASSERT_EQ(SV_TRANSPORT_AUTO, sv_env_uint(SV_ENV_TRANSPORT));
	ASSERT_EQ(1024, sv_env_uint(SV_ENV_RING_KB));
	ASSERT_EQ(50, sv_env_uint(SV_ENV_EVENT_SPIN_US));
	ASSERT_EQ(64, sv_env_uint(SV_ENV_ARENA_GB));
	ASSERT_EQ(1024, sv_env_uint(SV_ENV_SINGLE_COPY_MIN));
	ASSERT_EQ(8192, sv_env_uint(SV_ENV_SINGLE_COPY_COLD));
	ASSERT_EQ(SV_PCAP_SNAP, sv_env_uint(SV_ENV_PCAP_SNAP));
	ASSERT_EQ(64000, sv_env_uint(SV_ENV_CM_TIMEOUT_MS));
	ASSERT_EQ(0, sv_env_uint(SV_ENV_TCP_CONNECT_PORT)); /* TCP_PORT's */
	ASSERT_FALSE(sv_env_bool(SV_ENV_DEBUG));
	ASSERT_TRUE(sv_env_bool(SV_ENV_SINGLE_COPY));
	ASSERT_TRUE(sv_env_bool(SV_ENV_UD_LANES));
	ASSERT_TRUE(sv_env_bool(SV_ENV_DEVFILES));
}

SV_TEST(env_good_values_are_read)
{
	unset_all();
	setenv("SOFTVERBS_TRANSPORT", "tcp", 1);
	setenv("SOFTVERBS_TCP_PORT", "18515", 1);
	setenv("SOFTVERBS_TCP_CONNECT_PORT", "65535", 1);
	setenv("SOFTVERBS_SINGLE_COPY_MIN", "0x400", 1);
	setenv("SOFTVERBS_SINGLE_COPY_COLD", "0", 1);
	setenv("SOFTVERBS_DEBUG", "1", 1);
	setenv("SOFTVERBS_UD_LANES", "0", 1);
	setenv("SOFTVERBS_MCAST_DIR", "/tmp/x", 1);
	setenv("SOFTVERBS_FAULTS", "drop=0.1,seed=3", 1);
	ASSERT_EQ(SV_TRANSPORT_TCP, sv_env_uint(SV_ENV_TRANSPORT));
	ASSERT_EQ(18515, sv_env_uint(SV_ENV_TCP_PORT));
	ASSERT_EQ(65535, sv_env_uint(SV_ENV_TCP_CONNECT_PORT));
	ASSERT_EQ(1024, sv_env_uint(SV_ENV_SINGLE_COPY_MIN));
	ASSERT_EQ(0, sv_env_uint(SV_ENV_SINGLE_COPY_COLD));
	ASSERT_TRUE(sv_env_bool(SV_ENV_DEBUG));
	ASSERT_FALSE(sv_env_bool(SV_ENV_UD_LANES));
	ASSERT_OK(strcmp("/tmp/x", sv_env_str(SV_ENV_MCAST_DIR)));
	ASSERT_OK(strcmp("drop=0.1,seed=3", sv_env_str(SV_ENV_FAULTS)));
	ASSERT_FALSE(sv_env_refused());
}

/* Each type's parser, value by value (sv_env_parse is pure). */
static void parse_is(enum sv_env_id id, const char *s, int ok, uint64_t want)
{
	char why[512] = "";
	uint64_t v = 12345;
	int err = sv_env_parse(&sv_env_rows[id], s, &v, why, sizeof(why));

	if (ok ? err || v != want : !err)
		sv_test_fail(__FILE__, __LINE__,
			     "%s='%s': %d, %llu (wanted %s %llu) '%s'",
			     sv_env_rows[id].name, s, err,
			     (unsigned long long)v, ok ? "ok" : "bad",
			     (unsigned long long)want, why);
}

SV_TEST(env_parsers)
{
	parse_is(SV_ENV_DEBUG, "0", 1, 0);
	parse_is(SV_ENV_DEBUG, "1", 1, 1);
	parse_is(SV_ENV_DEBUG, "2", 0, 0);
	parse_is(SV_ENV_DEBUG, "yes", 0, 0);
	parse_is(SV_ENV_TCP_PORT, "1", 1, 1);
	parse_is(SV_ENV_TCP_PORT, "65535", 1, 65535);
	parse_is(SV_ENV_TCP_PORT, "0", 0, 0);
	parse_is(SV_ENV_TCP_PORT, "65536", 0, 0);
	parse_is(SV_ENV_TCP_PORT, "99999", 0, 0);
	parse_is(SV_ENV_TCP_PORT, "-1", 0, 0);
	parse_is(SV_ENV_TCP_PORT, "+80", 0, 0);
	parse_is(SV_ENV_TCP_PORT, " 80", 0, 0);
	parse_is(SV_ENV_TCP_PORT, "80 ", 0, 0);
	parse_is(SV_ENV_TCP_PORT, "http", 0, 0);
	parse_is(SV_ENV_RING_KB, "16", 1, 16);
	parse_is(SV_ENV_RING_KB, "262144", 1, 262144);
	parse_is(SV_ENV_RING_KB, "15", 0, 0);
	parse_is(SV_ENV_RING_KB, "262145", 0, 0);
	parse_is(SV_ENV_RING_KB, "64k", 0, 0);
	parse_is(SV_ENV_RING_KB, "0x40", 1, 64);
	parse_is(SV_ENV_RING_KB, "0x", 0, 0);
	parse_is(SV_ENV_SINGLE_COPY_MIN, "4294967295", 1, 4294967295u);
	parse_is(SV_ENV_SINGLE_COPY_MIN, "4294967296", 0, 0);
	parse_is(SV_ENV_SINGLE_COPY_MIN, "99999999999999999999999", 0, 0);
	parse_is(SV_ENV_TRANSPORT, "auto", 1, SV_TRANSPORT_AUTO);
	parse_is(SV_ENV_TRANSPORT, "shm", 1, SV_TRANSPORT_SHM);
	parse_is(SV_ENV_TRANSPORT, "tcp", 1, SV_TRANSPORT_TCP);
	parse_is(SV_ENV_TRANSPORT, "TCP", 0, 0);
	parse_is(SV_ENV_TRANSPORT, "bogus", 0, 0);
	parse_is(SV_ENV_FAULTS, "drop=0.5", 1, 0);
	parse_is(SV_ENV_FAULTS, "drop=1.5", 0, 0);
	parse_is(SV_ENV_FAULTS, "junk", 0, 0);
	parse_is(SV_ENV_MCAST_DIR, "anything at all", 1, 0);
	parse_is(SV_ENV_CM_MAD_DROP, "req=2,rep=1,drep=1000", 1, 0);
	parse_is(SV_ENV_CM_MAD_DROP, "req=1001", 0, 0);
	parse_is(SV_ENV_CM_MAD_DROP, "lap=1", 0, 0);
	parse_is(SV_ENV_CM_MAD_DROP, "req=", 0, 0);
	parse_is(SV_ENV_CM_MAD_DROP, "req=1,", 0, 0);
	parse_is(SV_ENV_CM_MAD_DROP, "req=-1", 0, 0);
}

/* SOFTVERBS_CM_MAD_DROP's counts, kind by kind (ib_link.c loses that
 * many of each) */
SV_TEST(env_cm_mad_drop)
{
	unsigned int n[SV_CM_DROP_KINDS];

	ASSERT_OK(sv_env_cm_drop_parse("rep=3,req=2,dreq=7", n));
	ASSERT_EQ(2, n[SV_CM_DROP_REQ]);
	ASSERT_EQ(3, n[SV_CM_DROP_REP]);
	ASSERT_EQ(0, n[SV_CM_DROP_RTU]);
	ASSERT_EQ(0, n[SV_CM_DROP_REJ]);
	ASSERT_EQ(7, n[SV_CM_DROP_DREQ]);
	ASSERT_EQ(0, n[SV_CM_DROP_DREP]);
	ASSERT_OK(sv_env_cm_drop_parse("", n));
	ASSERT_EQ(0, n[SV_CM_DROP_REQ]);
	ASSERT_EQ(-EINVAL, sv_env_cm_drop_parse("rtu=1,drep", n));
	ASSERT_EQ(-EINVAL, sv_env_cm_drop_parse("reqq=1", n));
}

/* A REFUSE row: one line naming variable, value and range; refused;
 * the default stands in the table (nobody opens the device anyway). */
static void refused_one_line(const char *name, const char *value,
			     enum sv_env_id id, const char *range)
{
	char lines[MAX_LINES][1024];

	unset_all();
	ASSERT_OK(setenv(name, value, 1));
	capture_begin();
	ASSERT_TRUE(sv_env_refused());
	for (int k = 0; k < 3; k++) /* said once, however often read */
		ASSERT_EQ(sv_env_rows[id].def, sv_env_uint(id));
	ASSERT_EQ(1, capture_end(lines));
	expect_in(lines[0], name);
	expect_in(lines[0], value);
	expect_in(lines[0], range);
	expect_in(lines[0], "refusing to open softverbs0");
}

SV_TEST(env_refuse_tcp_port_out_of_range)
{
	refused_one_line("SOFTVERBS_TCP_PORT", "99999", SV_ENV_TCP_PORT,
			 "1..65535");
}

SV_TEST(env_refuse_transport_bogus)
{
	refused_one_line("SOFTVERBS_TRANSPORT", "bogus", SV_ENV_TRANSPORT,
			 "auto, shm, tcp or roce");
}

SV_TEST(env_refuse_connect_port_junk)
{
	refused_one_line("SOFTVERBS_TCP_CONNECT_PORT", "80x",
			 SV_ENV_TCP_CONNECT_PORT, "1..65535");
}

SV_TEST(env_refuse_faults_spec)
{
	refused_one_line("SOFTVERBS_FAULTS", "drop=0.1,rnr=7", SV_ENV_FAULTS,
			 "'rnr'");
	ASSERT_NULL(sv_env_str(SV_ENV_FAULTS));
}

/* A DEFAULT row: one line ending in the default used; not refused. */
static void defaulted_one_line(const char *name, const char *value,
			       enum sv_env_id id, const char *range,
			       const char *using)
{
	char lines[MAX_LINES][1024];

	unset_all();
	ASSERT_OK(setenv(name, value, 1));
	capture_begin();
	ASSERT_EQ(sv_env_rows[id].def, sv_env_uint(id));
	ASSERT_FALSE(sv_env_refused());
	ASSERT_EQ(1, capture_end(lines));
	expect_in(lines[0], name);
	expect_in(lines[0], value);
	expect_in(lines[0], range);
	expect_in(lines[0], using);
}

SV_TEST(env_default_ring_kb_junk)
{
	defaulted_one_line("SOFTVERBS_RING_KB", "abc", SV_ENV_RING_KB,
			   "16..262144", "using default 1024 KiB");
}

SV_TEST(env_default_debug_level)
{
	defaulted_one_line("SOFTVERBS_DEBUG", "yes", SV_ENV_DEBUG, "0 or 1",
			   "using default 0");
}

SV_TEST(env_default_cm_timeout)
{
	defaulted_one_line("SOFTVERBS_CM_TIMEOUT_MS", "0", SV_ENV_CM_TIMEOUT_MS,
			   "1..3600000", "using default 64000 ms");
}

/* Two bad values: two lines, each once, even read from many threads. */
static void *read_all(void *arg)
{
	for (int i = 0; i < SV_ENV_COUNT; i++)
		(void)sv_env_uint(i);
	return arg;
}

SV_TEST(env_each_bad_value_said_once)
{
	char lines[MAX_LINES][1024];
	pthread_t t[8];

	unset_all();
	setenv("SOFTVERBS_ARENA_GB", "0", 1);
	setenv("SOFTVERBS_TRANSPORT", "udp", 1);
	capture_begin();
	for (int i = 0; i < 8; i++)
		ASSERT_OK(pthread_create(&t[i], NULL, read_all, NULL));
	for (int i = 0; i < 8; i++)
		ASSERT_OK(pthread_join(t[i], NULL));
	ASSERT_EQ(2, capture_end(lines));
	expect_in(lines[0], "SOFTVERBS_TRANSPORT=udp");
	expect_in(lines[1], "SOFTVERBS_ARENA_GB=0 is not in 1..16384 GiB");
	ASSERT_TRUE(sv_env_refused());
}

/* librdmacm's and softverbs-stat's copy: the same verdict, no word. */
SV_TEST(env_quiet_says_nothing)
{
	char lines[MAX_LINES][1024];

	unset_all();
	setenv("SOFTVERBS_TCP_PORT", "99999", 1);
	setenv("SOFTVERBS_RING_KB", "abc", 1);
	sv_env_quiet = true;
	capture_begin();
	ASSERT_TRUE(sv_env_refused());
	ASSERT_EQ(0, capture_end(lines));
}

/* Read once: a later setenv changes nothing, and the string is ours. */
SV_TEST(env_read_once)
{
	unset_all();
	setenv("SOFTVERBS_MCAST_DIR", "/tmp/first", 1);
	setenv("SOFTVERBS_TCP_PORT", "5000", 1);
	ASSERT_EQ(5000, sv_env_uint(SV_ENV_TCP_PORT));
	setenv("SOFTVERBS_MCAST_DIR", "/tmp/second", 1);
	setenv("SOFTVERBS_TCP_PORT", "99999", 1);
	unsetenv("SOFTVERBS_MCAST_DIR");
	ASSERT_OK(strcmp("/tmp/first", sv_env_str(SV_ENV_MCAST_DIR)));
	ASSERT_EQ(5000, sv_env_uint(SV_ENV_TCP_PORT));
	ASSERT_FALSE(sv_env_refused());
}
