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
 * Starts `server_argv` (with "-p PORT" appended), waits until it listens,
 * then starts `client_argv` (with "-p PORT" and "localhost" appended);
 * both NULL-terminated, argv[0] a program name or path.  Waits for both
 * (timeout_ms each) and fails the test unless both exit 0.
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
