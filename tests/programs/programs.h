/* SPDX-License-Identifier: MIT */
/*
 * Runs a server and a client program on softverbs0 (through
 * build/bin/softverbs-run) on a free port, waits for both with a deadline
 * and checks their exit and output.
 */
#ifndef SV_PROGRAMS_H
#define SV_PROGRAMS_H

#include "sv_test.h"

struct sv_pair_run {
	struct sv_proc server;
	struct sv_proc client;
};

/*
 * perftest times its rows in CPU cycles, and before each report it
 * measures the cycles of a microsecond: 200 spans of 10 us to 2 ms, timed
 * by gettimeofday, fitted by a line.  If the fit is poor (r^2 < 0.9) it
 * prints this and exits 1 with no report.  One preemption of a few
 * milliseconds inside a span spoils the fit, and a loaded 2-CPU machine
 * preempts: such a run failed for the machine's reasons, not ours, and
 * runs again (sv_run_pair, the matrix's rows), SV_PAIR_TRIES times at
 * most.  Any other failure stands.
 */
#define SV_PERFTEST_CLOCK_FIT "Correlation coefficient r^2"
#define SV_PAIR_TRIES	      3

/*
 * Starts `server_argv` (with "-p PORT" appended), waits until it listens,
 * then starts `client_argv` (with "-p PORT" and "localhost" appended);
 * both NULL-terminated, argv[0] a program name or path.  Waits for both
 * (timeout_ms each) and fails the test unless both exit 0, after a run
 * again for SV_PERFTEST_CLOCK_FIT.
 */
void sv_run_pair(struct sv_pair_run *r, const char *const server_argv[],
		 const char *const client_argv[], int timeout_ms);
void sv_pair_run_free(struct sv_pair_run *r);

/* One server and n clients (at most SV_MAX_CLIENTS), all started once the
 * server listens, as sv_run_pair; every one must exit 0. */
#define SV_MAX_CLIENTS 8
struct sv_multi_run {
	struct sv_proc server;
	struct sv_proc client[SV_MAX_CLIENTS];
	int n;
};

void sv_run_clients(struct sv_multi_run *r, const char *const server_argv[],
		    const char *const client_argv[], int n, int timeout_ms);
void sv_multi_run_free(struct sv_multi_run *r);

/* Extra environment for programs on softverbs (the ASan runtime in
 * sanitizer builds), or NULL. */
char **sv_prog_env(void);

/* Path of a program of ours in the build tree ("bin/rc_pingpong"). */
const char *sv_built(const char *rel);

#endif
