// SPDX-License-Identifier: MIT
/*
 * Percentiles and histogram for --percentiles.  Samples are integer
 * nanoseconds; percentiles use the nearest-rank rule so every reported
 * value is a latency that really happened.
 */
#include "stats.h"

#include <stdlib.h>
#include <string.h>

unsigned int pp_hist_bucket(uint64_t ns)
{
	unsigned int k, j;

	if (ns < PP_HIST_SUB)
		return (unsigned int)ns;
	k = 63 - (unsigned int)__builtin_clzll(ns); /* ns in [2^k, 2^k+1) */
	j = (unsigned int)(ns >> (k - 2)) & (PP_HIST_SUB - 1);
	return PP_HIST_SUB * (k - 1) + j;
}

uint64_t pp_hist_lower(unsigned int bucket)
{
	unsigned int k, j;

	if (bucket < PP_HIST_SUB)
		return bucket;
	k = bucket / PP_HIST_SUB + 1;
	j = bucket % PP_HIST_SUB;
	return (uint64_t)(PP_HIST_SUB + j) << (k - 2);
}

uint64_t pp_hist_upper(unsigned int bucket)
{
	if (bucket + 1 >= PP_HIST_BUCKETS)
		return UINT64_MAX;
	return pp_hist_lower(bucket + 1);
}

uint64_t pp_percentile(const uint64_t *sorted, size_t n, unsigned int permyriad)
{
	uint64_t rank = ((uint64_t)permyriad * n + 9999) / 10000;

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int pp_summarize(uint64_t *samples, size_t n, struct pp_summary *s)
{
	double sum = 0;

	if (!n)
		return -1;
	qsort(samples, n, sizeof(*samples), cmp_u64);
	for (size_t i = 0; i < n; i++)
		sum += (double)samples[i];
	s->n = n;
	s->min = samples[0];
	s->p50 = pp_percentile(samples, n, 5000);
	s->p99 = pp_percentile(samples, n, 9900);
	s->p999 = pp_percentile(samples, n, 9990);
	s->max = samples[n - 1];
	s->mean = sum / (double)n;
	return 0;
}

void pp_hist_build(const uint64_t *samples, size_t n, struct pp_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->first = PP_HIST_BUCKETS - 1;
	for (size_t i = 0; i < n; i++) {
		unsigned int b = pp_hist_bucket(samples[i]);

		h->count[b]++;
		if (b < h->first)
			h->first = b;
		if (b > h->last)
			h->last = b;
	}
	h->total = n;
	if (!n)
		h->first = h->last = 0;
}

void pp_hist_print(FILE *f, const struct pp_hist *h, int width)
{
	size_t top = 0;

	if (!h->total)
		return;
	if (width > 100)
		width = 100;
	for (unsigned int b = h->first; b <= h->last; b++)
		if (h->count[b] > top)
			top = h->count[b];
	for (unsigned int b = h->first; b <= h->last; b++) {
		int bar = (int)((h->count[b] * (size_t)width + top - 1) / top);

		fprintf(f, "  %10.3f .. %10.3f usec |%-*.*s| %zu\n",
			pp_hist_lower(b) / 1000.0, pp_hist_upper(b) / 1000.0,
			width, bar,
			"################################################"
			"################################################"
			"####",
			h->count[b]);
	}
}
