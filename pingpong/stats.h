/* SPDX-License-Identifier: MIT */
/*
 * Latency statistics for --percentiles: nearest-rank percentiles over
 * per-iteration samples, and a log-linear histogram (four buckets per
 * power of two of nanoseconds).  Pure arithmetic, no I/O but printing.
 */
#ifndef PP_STATS_H
#define PP_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Buckets per power of two; bucket bounds are 1, 1.25, 1.5, 1.75 x 2^k. */
#define PP_HIST_SUB 4
/* Values 0..3, then 62 octaves [2^k, 2^(k+1)) for k = 2..63. */
#define PP_HIST_BUCKETS (63 * PP_HIST_SUB)

struct pp_summary {
	size_t n;     /* samples */
	uint64_t min; /* all in nanoseconds */
	uint64_t p50;
	uint64_t p99;
	uint64_t p999; /* 99.9th percentile */
	uint64_t max;
	double mean;
};

struct pp_hist {
	size_t count[PP_HIST_BUCKETS];
	unsigned int first; /* first non-empty bucket */
	unsigned int last;  /* last non-empty bucket */
	size_t total;	    /* samples counted */
};

/* Bucket of a sample, and the bucket's lower bound (inclusive). */
unsigned int pp_hist_bucket(uint64_t ns);
uint64_t pp_hist_lower(unsigned int bucket);
/* Upper bound (exclusive); UINT64_MAX for the last bucket. */
uint64_t pp_hist_upper(unsigned int bucket);

/*
 * Nearest-rank percentile of sorted samples: the smallest sample with at
 * least permyriad/10000 of the samples at or below it (9990: p99.9).
 * n must be > 0.
 */
uint64_t pp_percentile(const uint64_t *sorted, size_t n,
		       unsigned int permyriad);

/* Sorts samples in place and summarizes them; -1 if n is 0. */
int pp_summarize(uint64_t *samples, size_t n, struct pp_summary *s);

void pp_hist_build(const uint64_t *samples, size_t n, struct pp_hist *h);

/* ASCII histogram, one line per bucket from first to last, bars scaled
 * to width characters. */
void pp_hist_print(FILE *f, const struct pp_hist *h, int width);

#endif
