// SPDX-License-Identifier: MIT
/*
 * rc_pingpong's command line: the defaults and letters of ibv_rc_pingpong,
 * our long options, and every rejected value with its message.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "options.h"
#include "sv_test.h"

/* Parses a NULL-terminated list of arguments after the program name. */
static enum pp_opt_result parse(struct pp_options *o, const char *first, ...)
{
	char *argv[64];
	int argc = 0;
	va_list ap;
	const char *a;

	argv[argc++] = "rc_pingpong";
	va_start(ap, first);
	for (a = first; a; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	return pp_options_parse(argc, argv, o);
}

/* Parses expecting failure; returns what was printed on stderr. */
static char *parse_fails(const char *a, const char *b, const char *c)
{
	struct pp_options o;
	struct capture cap;
	char *err;

	capture_begin(&cap, 2);
	ASSERT_EQ(PP_OPT_ERROR, parse(&o, a, b, c, NULL));
	err = capture_end(&cap);
	ASSERT_TRUE(strlen(err) > 0);
	return err;
}

SV_TEST(options_defaults_are_the_originals)
{
	struct pp_options o;

	ASSERT_EQ(PP_OPT_OK, parse(&o, NULL));
	ASSERT_NULL(o.servername);
	ASSERT_EQ(18515, o.port);
	ASSERT_NULL(o.ib_devname);
	ASSERT_EQ(1, o.ib_port);
	ASSERT_EQ(4096, o.size);
	ASSERT_EQ(1024, o.mtu);
	ASSERT_EQ(500, o.rx_depth);
	ASSERT_EQ(1000, o.iters);
	ASSERT_EQ(0, o.sl);
	ASSERT_EQ(-1, o.gidx);
	ASSERT_FALSE(o.use_event || o.use_odp || o.implicit_odp ||
		     o.prefetch_mr || o.use_ts || o.validate_buf || o.use_dm ||
		     o.use_new_send);
	ASSERT_FALSE(o.percentiles || o.json || o.explain);
	ASSERT_EQ(0, o.sweep_max);
	ASSERT_EQ(0, o.warmup);
	ASSERT_EQ(60000, o.oob_timeout_ms);
}

SV_TEST(options_short_letters)
{
	struct pp_options o;

	ASSERT_EQ(PP_OPT_OK, parse(&o, "-p", "1234", "-d", "mlx5_0", "-i", "2",
				   "-s", "64", "-m", "2048", "-r", "10", "-n",
				   "5", "-l", "3", "-e", "-g", "1", "-o", "-P",
				   "-t", "-c", "-N", "server.example", NULL));
	ASSERT_STR_EQ("server.example", o.servername);
	ASSERT_EQ(1234, o.port);
	ASSERT_STR_EQ("mlx5_0", o.ib_devname);
	ASSERT_EQ(2, o.ib_port);
	ASSERT_EQ(64, o.size);
	ASSERT_EQ(2048, o.mtu);
	ASSERT_EQ(10, o.rx_depth);
	ASSERT_EQ(5, o.iters);
	ASSERT_EQ(3, o.sl);
	ASSERT_EQ(1, o.gidx);
	ASSERT_TRUE(o.use_event && o.use_odp && o.prefetch_mr && o.use_ts &&
		    o.validate_buf && o.use_new_send);
	ASSERT_FALSE(o.implicit_odp || o.use_dm);

	ASSERT_EQ(PP_OPT_OK, parse(&o, "-O", "-P", NULL));
	ASSERT_TRUE(o.use_odp && o.implicit_odp && o.prefetch_mr);
	ASSERT_EQ(PP_OPT_OK, parse(&o, "-j", "-c", NULL));
	ASSERT_TRUE(o.use_dm && o.validate_buf);
	/* base 0, as the original's strtoul(..., 0) */
	ASSERT_EQ(PP_OPT_OK, parse(&o, "-p", "0x4000", NULL));
	ASSERT_EQ(0x4000, o.port);
}

SV_TEST(options_long_names)
{
	struct pp_options o;

	ASSERT_EQ(PP_OPT_OK,
		  parse(&o, "--port=2000", "--ib-dev=rxe0", "--ib-port=3",
			"--size=128", "--mtu=256", "--rx-depth=7", "--iters=9",
			"--sl=15", "--events", "--gid-idx=0", "--iodp",
			"--prefetch", "--ts", "--chk", "--new_send", "host",
			NULL));
	ASSERT_EQ(2000, o.port);
	ASSERT_STR_EQ("rxe0", o.ib_devname);
	ASSERT_EQ(3, o.ib_port);
	ASSERT_EQ(128, o.size);
	ASSERT_EQ(256, o.mtu);
	ASSERT_EQ(7, o.rx_depth);
	ASSERT_EQ(9, o.iters);
	ASSERT_EQ(15, o.sl);
	ASSERT_EQ(0, o.gidx);
	ASSERT_TRUE(o.use_event && o.use_odp && o.implicit_odp &&
		    o.prefetch_mr && o.use_ts && o.validate_buf &&
		    o.use_new_send);
	ASSERT_STR_EQ("host", o.servername);
	ASSERT_EQ(PP_OPT_OK, parse(&o, "--dm", NULL));
	ASSERT_TRUE(o.use_dm);
}

SV_TEST(options_new_long_only)
{
	struct pp_options o;

	ASSERT_EQ(PP_OPT_OK, parse(&o, "--percentiles", "--json", "--sweep",
				   "4096", "--warmup=10", "--explain",
				   "--oob-timeout", "5", NULL));
	ASSERT_TRUE(o.percentiles && o.json && o.explain);
	ASSERT_EQ(4096, o.sweep_max);
	ASSERT_EQ(10, o.warmup);
	ASSERT_EQ(5000, o.oob_timeout_ms);
	ASSERT_EQ(4096, pp_buf_size(&o));
}

SV_TEST(options_sweep_sizes)
{
	struct pp_options o;
	unsigned int s[40], n;

	ASSERT_EQ(PP_OPT_OK, parse(&o, "--sweep", "4096", NULL));
	n = pp_sizes(&o, s, 40);
	ASSERT_EQ(13, n);
	for (unsigned int i = 0; i < n; i++)
		ASSERT_EQ(1u << i, s[i]);
	ASSERT_EQ(PP_OPT_OK, parse(&o, "--sweep", "100", NULL));
	n = pp_sizes(&o, s, 40);
	ASSERT_EQ(8, n);
	ASSERT_EQ(64, s[6]);
	ASSERT_EQ(100, s[7]);
	ASSERT_EQ(100, pp_buf_size(&o));
	ASSERT_EQ(PP_OPT_OK, parse(&o, "--sweep", "1", NULL));
	ASSERT_EQ(1, pp_sizes(&o, s, 40));
	ASSERT_EQ(PP_OPT_OK, parse(&o, "-s", "77", NULL));
	ASSERT_EQ(1, pp_sizes(&o, s, 40));
	ASSERT_EQ(77, s[0]);
}

SV_TEST(options_role)
{
	struct pp_options o;
	char *err;

	ASSERT_EQ(PP_OPT_OK, parse(&o, "-n", "3", NULL));
	ASSERT_NULL(o.servername);
	ASSERT_EQ(PP_OPT_OK, parse(&o, "::1", "-n", "3", NULL));
	ASSERT_STR_EQ("::1", o.servername);
	err = parse_fails("a", "b", NULL);
	ASSERT_CONTAINS(err, "too many arguments");
	free(err);
}

SV_TEST(options_invalid_values_rejected)
{
	static const struct {
		const char *opt, *val, *msg;
	} bad[] = {
		{"-p", "65536", "invalid --port '65536'"},
		{"-p", "0", "invalid --port"},
		{"-p", "12abc", "invalid --port '12abc'"},
		{"-i", "0", "invalid --ib-port"},
		{"-s", "0", "invalid --size"},
		{"-s", "-5", "invalid --size"},
		{"-s", "abc", "invalid --size 'abc'"},
		{"-s", "99999999999", "invalid --size"},
		{"-m", "1000", "expected 256, 512, 1024, 2048 or 4096"},
		{"-m", "8192", "invalid --mtu"},
		{"-r", "0", "invalid --rx-depth"},
		{"-n", "0", "invalid --iters"},
		{"-n", "", "invalid --iters"},
		{"-l", "16", "invalid --sl"},
		{"-g", "-2", "invalid --gid-idx"},
		{"--sweep", "0", "invalid --sweep"},
		{"--warmup", "-1", "invalid --warmup"},
		{"--oob-timeout", "0", "invalid --oob-timeout"},
		{"--oob-timeout", "3601", "invalid --oob-timeout"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *err = parse_fails(bad[i].opt, bad[i].val, NULL);

		ASSERT_CONTAINS(err, bad[i].msg);
		free(err);
	}
}

SV_TEST(options_original_combination_checks)
{
	char *err;

	err = parse_fails("-o", "-j", NULL);
	ASSERT_CONTAINS(err, "DM memory region can't be on demand");
	free(err);
	err = parse_fails("-O", "-j", NULL);
	ASSERT_CONTAINS(err, "DM memory region can't be on demand");
	free(err);
	err = parse_fails("-P", NULL, NULL);
	ASSERT_CONTAINS(err,
			"prefetch is valid only with on-demand memory region");
	free(err);
	err = parse_fails("--sweep=64", "-s", "8");
	ASSERT_CONTAINS(err, "--sweep and -s/--size exclude each other");
	free(err);
}

SV_TEST(options_unknown_option_prints_usage)
{
	struct pp_options o;
	struct capture out, err;
	char *o_text, *e_text;

	capture_begin(&out, 1);
	capture_begin(&err, 2);
	ASSERT_EQ(PP_OPT_ERROR, parse(&o, "--bogus", NULL));
	e_text = capture_end(&err);
	o_text = capture_end(&out);
	ASSERT_CONTAINS(e_text, "bogus");
	ASSERT_CONTAINS(o_text, "Usage:");
	free(e_text);
	free(o_text);
}

SV_TEST(options_help_lists_every_option)
{
	static const char *const names[] = {
		"-p, --port",	  "-d, --ib-dev",   "-i, --ib-port",
		"-s, --size",	  "-m, --mtu",	    "-r, --rx-depth",
		"-n, --iters",	  "-l, --sl",	    "-e, --events",
		"-g, --gid-idx",  "-o, --odp",	    "-O, --iodp",
		"-P, --prefetch", "-t, --ts",	    "-c, --chk",
		"-j, --dm",	  "-N, --new_send", "--percentiles",
		"--json",	  "--sweep",	    "--warmup",
		"--explain",	  "--oob-timeout",  "--help",
	};
	struct pp_options o;
	struct capture cap;
	char *out;

	capture_begin(&cap, 1);
	ASSERT_EQ(PP_OPT_HELP, parse(&o, "--help", NULL));
	out = capture_end(&cap);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ASSERT_CONTAINS(out, names[i]);
	ASSERT_CONTAINS(out, "default 18515");
	free(out);
}
