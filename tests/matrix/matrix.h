/* SPDX-License-Identifier: MIT */
/*
 * The program matrix: real programs nobody here wrote, each run on
 * softverbs0 through softverbs-run with a deadline, and what each is
 * expected to do today.  rows.c is the table; matrix.c runs one row per
 * ctest test (`test_matrix ROW`).
 */
#ifndef SV_MATRIX_H
#define SV_MATRIX_H

#define MX_ARGS 24
#define MX_ENV	4

/* What a row is expected to do today. */
enum mx_expect {
	MX_WORKS,     /* every process exits 0 */
	MX_FAILS,     /* an error exit, quickly, and no signal anywhere */
	MX_TIMES_OUT, /* still running at the deadline (a known wait for
		       * ever, not ours to fix); killed there */
};

/* A server that serves for ever (qperf): stopped once the client is done,
 * which is not a time-out. */
#define MX_DAEMON 0x1

/*
 * One row.  In argv and env, @PORT@ becomes a free TCP port and @BUILD@
 * the build tree; each program runs as `softverbs-run ARGV...`.  With a
 * server, the client starts once the server's port has a listener (TCP) or
 * a bound socket (UDP), or once the server has exited (a program that fails
 * never listens), or at once when the server's argv has no @PORT@.
 */
struct mx_row {
	const char *name; /* the ctest test is matrix.<name> */
	const char *pkg;  /* Debian package of argv[0] (scripts/install-deps) */
	enum mx_expect expect;
	const char *reason;	     /* why it does that today, one line */
	const char *server[MX_ARGS]; /* started first; empty: no server */
	const char *client[MX_ARGS]; /* the client, or the lone program */
	int deadline_s;		     /* from the row's start, for everything */
	const char *env[MX_ENV];     /* extra NAME=value for both sides */
	const char *says;      /* some output (either side) must contain this */
	const char *also_says; /* and this (which device, which transport) */
	unsigned int flags;
	int ready_port;		/* a server with a fixed port (udaddy's 7174):
				 * the client starts once it is bound */
	const char *ready_says; /* the client starts once the server's
				 * stdout says this (line-buffered: stdbuf) */
};

extern const struct mx_row mx_rows[];
extern const int mx_nrows;

#endif
