/* SPDX-License-Identifier: MIT */
/*
 * The ping-pong loop: the client sends first, each side answers every
 * message, an exchange is over when both its send and its receive have
 * completed (the "pending" bits).  Polls, or sleeps on CQ events (-e).
 */
#ifndef PP_LOOP_H
#define PP_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pingpong.h"
#include "report.h"

struct pp_loop {
	struct pp_context *ctx;
	bool client;	       /* the client posts the first send */
	unsigned int iters;    /* exchanges to run */
	int routs;	       /* receives posted and not yet completed;
				* carried from one run to the next */
	unsigned int early;    /* receives of the next run that completed
				* in this one (the peer started it) */
	uint64_t *lat_ns;      /* NULL, or room for iters latency samples */
	size_t nlat;	       /* samples written */
	struct pp_ts_stats ts; /* -t: receive completion timestamps */
	double usec;	       /* wall clock from first send to the end */
};

/*
 * Runs lp->iters exchanges.  Latency samples (when lat_ns is set) are the
 * times between consecutive exchange ends; the client's first starts at
 * its first post, so it records iters round trips, the server iters - 1.
 * Errors are printed here; 0 or -1.
 */
int pp_loop_run(struct pp_loop *lp);

#endif
