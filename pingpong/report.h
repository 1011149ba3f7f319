/* SPDX-License-Identifier: MIT */
/*
 * Results of a run and how they are shown: the original's lines (byte
 * for byte the same formats), our --percentiles block, and --json.
 * Pure: takes numbers, writes to a FILE.
 */
#ifndef PP_REPORT_H
#define PP_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "stats.h"

/* Receive completion timestamps (-t), as the original accumulates them. */
struct pp_ts_stats {
	uint64_t max_delta; /* device clock cycles */
	uint64_t min_delta;
	uint64_t total_delta;
	unsigned int iters; /* deltas measured */
};

/* One timed run at one message size. */
struct pp_result {
	unsigned int size;  /* bytes per message */
	unsigned int iters; /* timed exchanges */
	double usec;	    /* wall clock of the timed loop */
	bool have_lat;	    /* --percentiles was measured */
	struct pp_summary lat;
	struct pp_hist hist;
	bool have_ts; /* -t */
	struct pp_ts_stats ts;
	int bad_pages; /* -c on the server: pages that failed */
};

/* What the JSON object says about the run as a whole. */
struct pp_run_info {
	const char *role; /* "server" or "client" */
	const char *device;
	int ib_port;
	int mtu;
	unsigned int rx_depth;
	unsigned int iters;
	unsigned int warmup;
	bool events;
	bool sweep;
	const char *latency_def; /* what one latency sample spans */
};

/* The original's result lines, then --percentiles if measured. */
void pp_report_text(FILE *f, const struct pp_result *r);

/* One JSON object, newline terminated.  With info->sweep the results go
 * in a "sweep" array, else at top level (see docs/RC_PINGPONG.md). */
void pp_report_json(FILE *f, const struct pp_run_info *info,
		    const struct pp_result *r, unsigned int n);

#endif
