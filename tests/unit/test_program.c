// SPDX-License-Identifier: MIT
/*
 * The rc_pingpong binary itself, on this machine's system libibverbs:
 * --help, bad options, and the clear message when there is no device.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sv_test.h"

static void run(struct sv_proc *p, char *const args[])
{
	char path[512], *argv[32];
	int n = 0;

	snprintf(path, sizeof(path), "%s/bin/rc_pingpong", sv_build_dir());
	argv[n++] = path;
	for (int i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	sv_proc_start(p, argv, NULL);
	sv_proc_wait(p, 10000);
}

SV_TEST(program_help_lists_every_option)
{
	static const char *const opts[] = {
		"--port",     "--ib-dev",      "--ib-port",	"--size",
		"--mtu",      "--rx-depth",    "--iters",	"--sl",
		"--events",   "--gid-idx",     "--odp",		"--iodp",
		"--prefetch", "--ts",	       "--chk",		"--dm",
		"--new_send", "--percentiles", "--json",	"--sweep",
		"--warmup",   "--explain",     "--oob-timeout", "--help",
		"-p,",	      "-d,",	       "-i,",		"-s,",
		"-m,",	      "-r,",	       "-n,",		"-l,",
		"-e,",	      "-g,",	       "-o,",		"-O,",
		"-P,",	      "-t,",	       "-c,",		"-j,",
		"-N,",
	};
	struct sv_proc p;

	run(&p, (char *[]){"--help", NULL});
	ASSERT_TRUE(p.exited);
	ASSERT_EQ(0, p.code);
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		ASSERT_CONTAINS(p.out, opts[i]);
	sv_proc_free(&p);
}

SV_TEST(program_bad_option_fails_with_message)
{
	struct sv_proc p;

	run(&p, (char *[]){"-m", "999", NULL});
	ASSERT_TRUE(p.exited);
	ASSERT_EQ(1, p.code);
	ASSERT_CONTAINS(p.err, "invalid --mtu '999'");
	sv_proc_free(&p);

	run(&p, (char *[]){"-P", NULL});
	ASSERT_EQ(1, p.code);
	ASSERT_CONTAINS(p.err, "prefetch is valid only with on-demand");
	sv_proc_free(&p);
}

static void expect_no_device(char *const args[])
{
	struct sv_proc p;

	run(&p, args);
	ASSERT_TRUE(p.exited);
	ASSERT_NE(0, p.code);
	ASSERT_CONTAINS(p.err, "No RDMA devices found");
	ASSERT_CONTAINS(p.err, "softverbs-run rc_pingpong");
	ASSERT_STR_EQ("", p.out);
	sv_proc_free(&p);
}

SV_TEST(program_no_device_server)
{
	char port[16];

	snprintf(port, sizeof(port), "%d", sv_free_port());
	expect_no_device((char *[]){"-p", port, NULL});
}

SV_TEST(program_no_device_client)
{
	char port[16];

	snprintf(port, sizeof(port), "%d", sv_free_port());
	expect_no_device((char *[]){"-p", port, "127.0.0.1", NULL});
}

SV_TEST(program_no_device_named_device)
{
	expect_no_device((char *[]){"-d", "mlx5_0", "--json", NULL});
}
