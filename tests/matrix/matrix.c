// SPDX-License-Identifier: MIT
/*
 * Runs one row of the program matrix (rows.c) as one harness test: server
 * and client through softverbs-run, everything killed at the row's
 * deadline, and the outcome compared with what the row expects today.
 * Prints one result line per row.  A program that is not installed skips
 * the row (exit 77).
 */
#include "matrix.h"
#include "programs.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SKIP 77 /* ctest SKIP_RETURN_CODE */

/* What a row did. */
enum mx_outcome {
	MX_O_WORKS,
	MX_O_FAILS,
	MX_O_TIMES_OUT,
	MX_O_CRASHES, /* a signal, or a sanitizer report */
};

static const char *const outcome_names[] = {
	[MX_O_WORKS] = "works",
	[MX_O_FAILS] = "fails cleanly",
	[MX_O_TIMES_OUT] = "times out",
	[MX_O_CRASHES] = "crashes",
};

/* MX_WORKS and friends are spelled as the outcomes they expect. */
static const enum mx_outcome expected_outcome[] = {
	[MX_WORKS] = MX_O_WORKS,
	[MX_FAILS] = MX_O_FAILS,
	[MX_TIMES_OUT] = MX_O_TIMES_OUT,
};

/* One process of a row. */
struct side {
	const char *who; /* "server", "client" */
	struct sv_proc proc;
	pid_t pgid; /* its process group, for the sweep at the end */
	bool started;
	bool timed_out; /* killed at the deadline */
	bool stopped;	/* a daemon killed once the client was done */
	char *argv[MX_ARGS + 2];
};

/* Replaces @PORT@ and @BUILD@ in `s`; returns a new string. */
static char *expand(const char *s, int port)
{
	char buf[1024], num[16];
	size_t n = 0;

	snprintf(num, sizeof(num), "%d", port);
	while (*s && n < sizeof(buf) - 1) {
		const char *rep = NULL;

		if (!strncmp(s, "@PORT@", 6))
			rep = num;
		else if (!strncmp(s, "@BUILD@", 7))
			rep = sv_build_dir();
		if (rep) {
			n += snprintf(buf + n, sizeof(buf) - n, "%s", rep);
			s += rep == num ? 6 : 7;
		} else {
			buf[n++] = *s++;
		}
	}
	buf[n < sizeof(buf) ? n : sizeof(buf) - 1] = '\0';
	return strdup(buf);
}

static bool uses_port(const char *const argv[])
{
	for (int i = 0; argv[i]; i++)
		if (strstr(argv[i], "@PORT@"))
			return true;
	return false;
}

/* True if `prog` (a path, or a name in PATH) is an executable file. */
static bool installed(const char *prog)
{
	char path[1024];
	const char *p;

	if (strchr(prog, '/'))
		return access(prog, X_OK) == 0;
	p = getenv("PATH");
	while (p && *p) {
		size_t len = strcspn(p, ":");

		snprintf(path, sizeof(path), "%.*s/%s", (int)len, p, prog);
		if (access(path, X_OK) == 0)
			return true;
		p += len + (p[len] == ':');
	}
	return false;
}

static void skip_unless_installed(const struct mx_row *r, const char *prog,
				  int port)
{
	char *path = expand(prog, port);

	if (installed(path)) {
		free(path);
		return;
	}
	if (strstr(prog, "@BUILD@"))
		printf("matrix %s: SKIPPED: %s was not built (no MPI compiler "
		       "at configure time: install %s and libopenmpi-dev, "
		       "re-run cmake)\n",
		       r->name, path, r->pkg);
	else
		printf("matrix %s: SKIPPED: %s is not installed (Debian "
		       "package "
		       "%s; scripts/install-deps installs it)\n",
		       r->name, path, r->pkg);
	exit(SKIP);
}

/* softverbs-run ARGV..., placeholders expanded. */
static void make_argv(struct side *s, const char *const argv[], int port)
{
	int n = 0;

	s->argv[n++] = strdup(sv_built("bin/softverbs-run"));
	for (int i = 0; argv[i]; i++)
		s->argv[n++] = expand(argv[i], port);
	s->argv[n] = NULL;
}

/* The row's env, expanded, followed by sv_prog_env() (the ASan runtime);
 * free_env() frees what this allocated. */
static char **make_env(const struct mx_row *r, int port)
{
	static char *env[MX_ENV + 4];
	char **base = sv_prog_env();
	int n = 0;

	for (int i = 0; i < MX_ENV && r->env[i]; i++)
		env[n++] = expand(r->env[i], port);
	for (int i = 0; base && base[i]; i++)
		env[n++] = base[i];
	env[n] = NULL;
	return env;
}

static void free_env(const struct mx_row *r, char **env)
{
	for (int i = 0; i < MX_ENV && r->env[i]; i++)
		free(env[i]);
}

static void free_side(struct side *s)
{
	for (int i = 0; s->argv[i]; i++)
		free(s->argv[i]);
	sv_proc_free(&s->proc);
}

static void start(struct side *s, char **env)
{
	sv_proc_start(&s->proc, s->argv, env);
	s->pgid = s->proc.pid;
	s->started = true;
}

static bool done(struct side *s)
{
	return !s->started || sv_proc_poll(&s->proc);
}

/* A socket listening (TCP) or bound (UDP) on `port`: UDP for udpong. */
static bool ready(int port)
{
	return sv_port_listening(port) || sv_udp_port_bound(port);
}

/* Waits for the server's port (or its exit) until `end`. */
static void wait_ready(struct side *srv, int port, uint64_t end)
{
	unsigned int us = 50;

	while (!ready(port) && !done(srv) && sv_now_ms() < end)
		sv_backoff(&us);
}

/* True once the file at `path` contains `says`. */
static bool file_says(const char *path, const char *says)
{
	char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, says) != NULL;
}

/* Waits for the server's output to say `says` (or its exit) until `end`. */
static void wait_says(struct side *srv, const char *says, uint64_t end)
{
	unsigned int us = 50;

	while (!file_says(srv->proc.out_path, says) && !done(srv) &&
	       sv_now_ms() < end)
		sv_backoff(&us);
}

/* Kills a side still running at the deadline. */
static void kill_late(struct side *s)
{
	if (s->started && s->proc.pid > 0) {
		s->timed_out = true;
		sv_proc_kill(&s->proc);
	}
}

/* Waits for the client, then the server (a daemon is stopped instead). */
static void wait_row(const struct mx_row *r, struct side *srv, struct side *cli,
		     uint64_t end)
{
	unsigned int us = 50;

	while (sv_now_ms() < end) {
		bool cdone = done(cli);

		if (cdone && (r->flags & MX_DAEMON) && srv->proc.pid > 0) {
			srv->stopped = true;
			sv_proc_kill(&srv->proc);
		}
		if (cdone && done(srv))
			return;
		sv_backoff(&us);
	}
	kill_late(cli);
	kill_late(srv);
}

static bool sanitizer_report(const struct side *s)
{
	const char *e = s->proc.err;

	return e && (strstr(e, "ERROR: AddressSanitizer") ||
		     strstr(e, "ERROR: LeakSanitizer") ||
		     strstr(e, "runtime error: "));
}

static enum mx_outcome side_outcome(const struct side *s)
{
	if (!s->started || s->stopped)
		return MX_O_WORKS;
	if (sanitizer_report(s))
		return MX_O_CRASHES;
	if (s->timed_out)
		return MX_O_TIMES_OUT;
	if (!s->proc.exited)
		return MX_O_CRASHES;
	return s->proc.code ? MX_O_FAILS : MX_O_WORKS;
}

/* The worse of the two, crashes worst. */
static enum mx_outcome row_outcome(const struct side *srv,
				   const struct side *cli)
{
	enum mx_outcome a = side_outcome(srv), b = side_outcome(cli);

	return a > b ? a : b;
}

static void describe(const struct side *s, char *buf, size_t len)
{
	size_t n = strlen(buf);
	int st = s->proc.status;

	if (!s->started)
		return;
	if (s->stopped)
		snprintf(buf + n, len - n, "%s stopped", s->who);
	else if (s->timed_out)
		snprintf(buf + n, len - n, "%s timed out", s->who);
	else if (s->proc.exited)
		snprintf(buf + n, len - n, "%s exit %d", s->who, s->proc.code);
	else
		snprintf(buf + n, len - n, "%s signal %d (%s)", s->who,
			 WTERMSIG(st), strsignal(WTERMSIG(st)));
	if (sanitizer_report(s)) {
		n = strlen(buf);
		snprintf(buf + n, len - n, " with a sanitizer report");
	}
	n = strlen(buf);
	snprintf(buf + n, len - n, ", ");
}

static void show(const struct side *s)
{
	if (!s->started)
		return;
	fprintf(stderr, "--- %s:", s->who);
	for (int i = 0; s->argv[i]; i++)
		fprintf(stderr, " %s", s->argv[i]);
	fprintf(stderr, "\nstdout:\n%s\nstderr:\n%s\n", s->proc.out,
		s->proc.err);
}

static bool said_one(const char *says, const struct side *srv,
		     const struct side *cli)
{
	const struct side *sides[] = {srv, cli};

	if (!says)
		return true;
	for (int i = 0; i < 2; i++)
		if (sides[i]->started && (strstr(sides[i]->proc.out, says) ||
					  strstr(sides[i]->proc.err, says)))
			return true;
	return false;
}

static bool said(const struct mx_row *r, const struct side *srv,
		 const struct side *cli)
{
	return said_one(r->says, srv, cli) && said_one(r->also_says, srv, cli);
}

/* Kills whatever the row's processes left behind (mpirun's ranks). */
static void sweep(const struct side *s)
{
	if (s->started)
		kill(-s->pgid, SIGKILL);
}

static void run_row(const struct mx_row *r)
{
	struct side srv, cli;
	int port, tries = 0;
	uint64_t t0, end;
	enum mx_outcome want = expected_outcome[r->expect], got;
	char what[512] = "";
	char **env;
	bool ok;

again:
	srv = (struct side){.who = "server"};
	cli = (struct side){.who = "client"};
	port = sv_free_port();
	t0 = sv_now_ms();
	end = t0 + r->deadline_s * 1000ull;
	tries++;

	if (r->server[0])
		skip_unless_installed(r, r->server[0], port);
	skip_unless_installed(r, r->client[0], port);
	for (int i = 0; r->client[i]; i++)
		if (strstr(r->client[i], "@BUILD@"))
			skip_unless_installed(r, r->client[i], port);
	env = make_env(r, port);
	if (r->server[0]) {
		make_argv(&srv, r->server, port);
		start(&srv, env);
		if (uses_port(r->server))
			wait_ready(&srv, port, end);
		else if (r->ready_port)
			wait_ready(&srv, r->ready_port, end);
		else if (r->ready_says)
			wait_says(&srv, r->ready_says, end);
	}
	make_argv(&cli, r->client, port);
	start(&cli, env);
	wait_row(r, &srv, &cli, end);
	sweep(&srv);
	sweep(&cli);

	got = row_outcome(&srv, &cli);
	/* perftest could not time its report (programs.h) */
	if (got == MX_O_FAILS && want == MX_O_WORKS && tries < SV_PAIR_TRIES &&
	    said_one(SV_PERFTEST_CLOCK_FIT, &srv, &cli)) {
		printf("matrix %s: run %d: perftest could not time its "
		       "report; again\n",
		       r->name, tries);
		free_side(&srv);
		free_side(&cli);
		free_env(r, env);
		goto again;
	}
	describe(&srv, what, sizeof(what));
	describe(&cli, what, sizeof(what));
	what[strlen(what) - 2] = '\0';
	ok = got == want && said(r, &srv, &cli);
	printf("matrix %-24s expected %-13s observed %-13s (%s) %5.2f s: %s\n",
	       r->name, outcome_names[want], outcome_names[got], what,
	       (sv_now_ms() - t0) / 1000.0, ok ? "ok" : "MISMATCH");
	printf("  why: %s\n", r->reason);
	if (ok) {
		free_side(&srv);
		free_side(&cli);
		free_env(r, env);
		return;
	}
	show(&srv);
	show(&cli);
	if (got != want)
		sv_test_fail(__FILE__, __LINE__, "%s: expected %s, observed %s",
			     r->name, outcome_names[want], outcome_names[got]);
	sv_test_fail(__FILE__, __LINE__, "%s: no output says \"%s\"%s%s%s",
		     r->name, r->says, r->also_says ? " and \"" : "",
		     r->also_says ? r->also_says : "",
		     r->also_says ? "\"" : "");
}

static void run_current(void)
{
	const char *name = sv_test_name();
	const char *dl = getenv("SV_TEST_DEADLINE");

	sv_proc_own_group();
	for (int i = 0; i < mx_nrows; i++) {
		if (strcmp(mx_rows[i].name, name))
			continue;
		/* the harness's deadline must stay behind the row's */
		ASSERT_TRUE(!dl || mx_rows[i].deadline_s + 5 <= atoi(dl));
		run_row(&mx_rows[i]);
		return;
	}
	sv_test_fail(__FILE__, __LINE__, "no row %s", name);
}

__attribute__((constructor)) static void register_rows(void)
{
	for (int i = 0; i < mx_nrows; i++)
		sv_test_register(mx_rows[i].name, run_current);
}
