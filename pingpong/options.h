/* SPDX-License-Identifier: MIT */
/*
 * Command line of rc_pingpong: the options of rdma-core 44's
 * ibv_rc_pingpong with the same letters, names and defaults, plus our
 * long-only additions.  Parsing and validation are pure: no verbs here.
 */
#ifndef PP_OPTIONS_H
#define PP_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

#define PP_DEFAULT_PORT		 18515
#define PP_DEFAULT_OOB_TIMEOUT_S 60
/* Option-independent cap on how long we wait for one peer message. */
#define PP_MAX_OOB_TIMEOUT_S 3600

struct pp_options {
	const char *servername; /* NULL: server; else the host to connect */
	unsigned int port;	/* TCP port of the out-of-band exchange */
	const char *ib_devname; /* NULL: first device found */
	int ib_port;		/* HCA port, 1-based */
	unsigned int size;	/* message size in bytes */
	bool size_given;	/* -s was on the command line */
	int mtu;		/* path MTU in bytes: 256..4096 */
	unsigned int rx_depth;	/* receives kept posted */
	unsigned int iters;	/* timed exchanges (per size with --sweep) */
	int sl;			/* service level, 0..15 */
	int gidx;		/* GID index, -1: no GID (LID only) */
	bool use_event;		/* -e: sleep on a completion channel */
	bool use_odp;		/* -o or -O: on-demand paging MR */
	bool implicit_odp;	/* -O: one implicit MR over all memory */
	bool prefetch_mr;	/* -P: ibv_advise_mr prefetch */
	bool use_ts;		/* -t: completion timestamps */
	bool validate_buf;	/* -c: check received data */
	bool use_dm;		/* -j: device memory buffer */
	bool use_new_send;	/* -N: ibv_wr_* send API */

	/* Ours, long options only. */
	bool percentiles;	/* --percentiles */
	bool json;		/* --json */
	bool explain;		/* --explain */
	unsigned int sweep_max; /* --sweep MAX, 0: off */
	unsigned int warmup;	/* --warmup N untimed exchanges */
	int oob_timeout_ms;	/* --oob-timeout SEC, per peer message */
};

enum pp_opt_result {
	PP_OPT_OK,    /* run with the parsed options */
	PP_OPT_HELP,  /* usage was printed on request: exit 0 */
	PP_OPT_ERROR, /* a message was printed: exit 1 */
};

/* Fills *opt with the defaults of ibv_rc_pingpong. */
void pp_options_default(struct pp_options *opt);

/*
 * Parses argv into *opt (defaults first).  Errors are printed to stderr
 * here, once; usage goes to stdout as in the original.  Resets getopt,
 * so it may be called more than once in one process (tests do).
 */
enum pp_opt_result pp_options_parse(int argc, char **argv,
				    struct pp_options *opt);

/* Prints the usage text, every option included. */
void pp_usage(FILE *f, const char *argv0);

/* Message sizes of this run: 1, 2, 4 ... MAX with --sweep, else -s. */
unsigned int pp_sizes(const struct pp_options *opt, unsigned int *sizes,
		      unsigned int max_sizes);

/* The largest message of the run: the buffer and MR are this big. */
unsigned int pp_buf_size(const struct pp_options *opt);

#endif
