/* SPDX-License-Identifier: MIT */
/*
 * Numbers two test processes in different namespaces pass each other
 * through files of a directory both see (a QPN, "ready", "end"): no
 * socket between namespaces is needed for the test's own bookkeeping.
 */
#ifndef SV_ROCE_EXCHANGE_H
#define SV_ROCE_EXCHANGE_H

/* CLOCK_MONOTONIC in seconds. */
double sv_x_now(void);
/* Writes v to DIR/NAME atomically (a rename); on failure prints who
 * (the program's name) and why, and exits 1. */
void sv_x_put(const char *who, const char *dir, const char *name, unsigned v);
/* The number in DIR/NAME, waiting up to secs for it; -1 if none came. */
long sv_x_get(const char *dir, const char *name, double secs);

#endif
