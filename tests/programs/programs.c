// SPDX-License-Identifier: MIT
/*
 * Server/client pairs of real programs on softverbs0 (see programs.h).
 */
#include "programs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 32

const char *sv_built(const char *rel)
{
	static char buf[4][512];
	static int i;
	char *b = buf[i++ % 4];

	snprintf(b, sizeof(buf[0]), "%s/%s", sv_build_dir(), rel);
	return b;
}

/* softverbs-run ARGV... -p PORT [localhost] */
static void build_argv(char **out, const char *const argv[], const char *port,
		       bool client)
{
	int n = 0;

	out[n++] = (char *)sv_built("bin/softverbs-run");
	for (int i = 0; argv[i] && n < MAX_ARGS - 5; i++)
		out[n++] = (char *)argv[i];
	out[n++] = "-p";
	out[n++] = (char *)port;
	if (client)
		out[n++] = "localhost";
	out[n] = NULL;
}

char **sv_prog_env(void)
{
	static char preload[1024], opts[] = "ASAN_OPTIONS=detect_leaks=0:"
					    "verify_asan_link_order=0";
	static char *env[3];
	const char *rt = getenv("SV_ASAN_RUNTIME");
	const char *trace = sv_crashtrace_lib();

	if ((!rt || !*rt) && trace) {
		/* a crash of the program prints its stack */
		snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", trace);
		env[0] = preload;
		env[1] = NULL;
		return env;
	}
	if (!rt || !*rt)
		return NULL;
	/* softverbs-run adds our library in front of this */
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", rt);
	env[0] = preload;
	env[1] = opts;
	env[2] = NULL;
	return env;
}

static void show(const char *who, const struct sv_proc *p)
{
	fprintf(stderr, "--- %s exit %d\nstdout:\n%s\nstderr:\n%s\n", who,
		p->code, p->out, p->err);
}

/* perftest could not time its report (programs.h) */
static bool clock_fit_failed(const struct sv_pair_run *r)
{
	return (r->client.code != 0 && r->client.err &&
		strstr(r->client.err, SV_PERFTEST_CLOCK_FIT)) ||
	       (r->server.code != 0 && r->server.err &&
		strstr(r->server.err, SV_PERFTEST_CLOCK_FIT));
}

/* sargv and cargv name port, which this fills with a free one */
static void run_pair_once(struct sv_pair_run *r, char **sargv, char **cargv,
			  char port[static 16], int timeout_ms)
{
	int p = sv_free_port();

	snprintf(port, 16, "%d", p);
	sv_proc_start(&r->server, sargv, sv_prog_env());
	sv_wait_listening(p, r->server.pid, timeout_ms);
	sv_proc_start(&r->client, cargv, sv_prog_env());
	sv_proc_wait(&r->client, timeout_ms);
	sv_proc_wait(&r->server, timeout_ms);
}

void sv_run_pair(struct sv_pair_run *r, const char *const server_argv[],
		 const char *const client_argv[], int timeout_ms)
{
	char *sargv[MAX_ARGS], *cargv[MAX_ARGS], port[16] = "";

	build_argv(sargv, server_argv, port, false);
	build_argv(cargv, client_argv, port, true);
	for (int t = 1;; t++) {
		run_pair_once(r, sargv, cargv, port, timeout_ms);
		if (t == SV_PAIR_TRIES || !clock_fit_failed(r))
			break;
		fprintf(stderr,
			"run %d of %s: perftest could not time its report "
			"(\"%s\"); again\n",
			t, server_argv[0], SV_PERFTEST_CLOCK_FIT);
		sv_pair_run_free(r);
	}
	if (r->client.code != 0 || r->server.code != 0) {
		show("server", &r->server);
		show("client", &r->client);
	}
	ASSERT_EQ(0, r->server.code);
	ASSERT_EQ(0, r->client.code);
}

void sv_pair_run_free(struct sv_pair_run *r)
{
	sv_proc_free(&r->server);
	sv_proc_free(&r->client);
}

void sv_run_clients(struct sv_multi_run *r, const char *const server_argv[],
		    const char *const client_argv[], int n, int timeout_ms)
{
	char *sargv[MAX_ARGS], *cargv[MAX_ARGS], port[16];
	int p = sv_free_port();
	bool ok;

	ASSERT_TRUE(n > 0 && n <= SV_MAX_CLIENTS);
	r->n = n;
	snprintf(port, sizeof(port), "%d", p);
	build_argv(sargv, server_argv, port, false);
	build_argv(cargv, client_argv, port, true);
	sv_proc_start(&r->server, sargv, sv_prog_env());
	sv_wait_listening(p, r->server.pid, timeout_ms);
	for (int i = 0; i < n; i++)
		sv_proc_start(&r->client[i], cargv, sv_prog_env());
	for (int i = 0; i < n; i++)
		sv_proc_wait(&r->client[i], timeout_ms);
	sv_proc_wait(&r->server, timeout_ms);
	ok = r->server.code == 0;
	for (int i = 0; i < n; i++)
		ok &= r->client[i].code == 0;
	if (!ok) {
		show("server", &r->server);
		for (int i = 0; i < n; i++)
			show("client", &r->client[i]);
	}
	ASSERT_EQ(0, r->server.code);
	for (int i = 0; i < n; i++)
		ASSERT_EQ(0, r->client[i].code);
}

void sv_multi_run_free(struct sv_multi_run *r)
{
	sv_proc_free(&r->server);
	for (int i = 0; i < r->n; i++)
		sv_proc_free(&r->client[i]);
}
