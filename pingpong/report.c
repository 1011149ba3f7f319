// SPDX-License-Identifier: MIT
/*
 * Printing results.  The text lines keep the original's formats exactly
 * because scripts parse them; everything we add is either behind an
 * option (--percentiles) or in the JSON object (--json).
 */
#include "report.h"

#include <inttypes.h>
#include <math.h>

void pp_report_text(FILE *f, const struct pp_result *r)
{
	long long bytes = (long long)r->size * r->iters * 2;

	fprintf(f, "%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes,
		r->usec / 1000000., bytes * 8. / r->usec);
	fprintf(f, "%d iters in %.2f seconds = %.2f usec/iter\n", r->iters,
		r->usec / 1000000., r->usec / r->iters);
	if (r->have_ts && r->ts.iters) {
		fprintf(f,
			"Max receive completion clock cycles = %" PRIu64 "\n",
			r->ts.max_delta);
		fprintf(f,
			"Min receive completion clock cycles = %" PRIu64 "\n",
			r->ts.min_delta);
		fprintf(f, "Average receive completion clock cycles = %f\n",
			(double)r->ts.total_delta / r->ts.iters);
	}
	if (r->have_lat) {
		const struct pp_summary *s = &r->lat;

		fprintf(f,
			"latency usec over %zu round trips: min %.3f  p50 %.3f"
			"  p99 %.3f  p99.9 %.3f  max %.3f  mean %.3f\n",
			s->n, s->min / 1000.0, s->p50 / 1000.0, s->p99 / 1000.0,
			s->p999 / 1000.0, s->max / 1000.0, s->mean / 1000.0);
		pp_hist_print(f, &r->hist, 50);
	}
}

/* JSON has no NaN or infinity: a value that is not finite is null. */
static void json_num(FILE *f, const char *key, double v)
{
	if (isfinite(v))
		fprintf(f, "\"%s\":%.3f", key, v);
	else
		fprintf(f, "\"%s\":null", key);
}

static void json_str(FILE *f, const char *key, const char *s)
{
	fprintf(f, "\"%s\":\"", key);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_percentiles(FILE *f, const struct pp_result *r)
{
	const struct pp_summary *s = &r->lat;

	fprintf(f, ",\"percentiles\":{\"unit\":\"usec\",\"samples\":%zu,",
		s->n);
	json_num(f, "min", s->min / 1000.0);
	fputc(',', f);
	json_num(f, "p50", s->p50 / 1000.0);
	fputc(',', f);
	json_num(f, "p99", s->p99 / 1000.0);
	fputc(',', f);
	json_num(f, "p99_9", s->p999 / 1000.0);
	fputc(',', f);
	json_num(f, "max", s->max / 1000.0);
	fputc(',', f);
	json_num(f, "mean", s->mean / 1000.0);
	fprintf(f, ",\"histogram\":[");
	for (unsigned int b = r->hist.first; r->hist.total && b <= r->hist.last;
	     b++) {
		if (!r->hist.count[b])
			continue;
		fprintf(f, "%s{", b == r->hist.first ? "" : ",");
		json_num(f, "from_usec", pp_hist_lower(b) / 1000.0);
		fputc(',', f);
		json_num(f, "to_usec", pp_hist_upper(b) / 1000.0);
		fprintf(f, ",\"count\":%zu}", r->hist.count[b]);
	}
	fprintf(f, "]}");
}

/* The fields of one result, without braces. */
static void json_result(FILE *f, const struct pp_result *r)
{
	long long bytes = (long long)r->size * r->iters * 2;

	fprintf(f, "\"size\":%u,\"iters\":%u,\"bytes\":%lld,", r->size,
		r->iters, bytes);
	json_num(f, "seconds", r->usec / 1000000.);
	fputc(',', f);
	json_num(f, "mbit_per_sec", bytes * 8. / r->usec);
	fputc(',', f);
	json_num(f, "usec_per_iter", r->usec / r->iters);
	if (r->have_ts && r->ts.iters) {
		fprintf(f,
			",\"completion_ts\":{\"max_cycles\":%" PRIu64
			",\"min_cycles\":%" PRIu64 ",",
			r->ts.max_delta, r->ts.min_delta);
		json_num(f, "avg_cycles",
			 (double)r->ts.total_delta / r->ts.iters);
		fputc('}', f);
	}
	if (r->have_lat)
		json_percentiles(f, r);
	if (r->bad_pages >= 0)
		fprintf(f, ",\"invalid_pages\":%d", r->bad_pages);
}

void pp_report_json(FILE *f, const struct pp_run_info *info,
		    const struct pp_result *r, unsigned int n)
{
	fprintf(f, "{\"program\":\"rc_pingpong\",\"schema\":1,");
	json_str(f, "role", info->role);
	fputc(',', f);
	json_str(f, "device", info->device);
	fprintf(f,
		",\"ib_port\":%d,\"mtu\":%d,\"rx_depth\":%u,\"events\":%s,"
		"\"warmup\":%u",
		info->ib_port, info->mtu, info->rx_depth,
		info->events ? "true" : "false", info->warmup);
	if (info->latency_def) {
		fputc(',', f);
		json_str(f, "latency_sample", info->latency_def);
	}
	if (info->sweep) {
		fprintf(f, ",\"iters\":%u,\"sweep\":[", info->iters);
		for (unsigned int i = 0; i < n; i++) {
			fprintf(f, "%s{", i ? "," : "");
			json_result(f, &r[i]);
			fputc('}', f);
		}
		fprintf(f, "]}\n");
		return;
	}
	if (n) {
		fputc(',', f);
		json_result(f, &r[0]);
	}
	fprintf(f, "}\n");
}
