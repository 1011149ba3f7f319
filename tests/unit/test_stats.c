// SPDX-License-Identifier: MIT
/*
 * Latency statistics, the original's result lines, the JSON object and
 * the --explain narration.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "explain.h"
#include "report.h"
#include "stats.h"
#include "sv_test.h"

SV_TEST(stats_percentiles_nearest_rank)
{
	uint64_t v[1000];
	struct pp_summary s;

	/* 1..100, shuffled: summarize sorts */
	for (int i = 0; i < 100; i++)
		v[i] = (uint64_t)((i * 37) % 100 + 1);
	ASSERT_OK(pp_summarize(v, 100, &s));
	ASSERT_EQ(100, s.n);
	ASSERT_EQ(1, s.min);
	ASSERT_EQ(50, s.p50);
	ASSERT_EQ(99, s.p99);
	ASSERT_EQ(100, s.p999);
	ASSERT_EQ(100, s.max);
	ASSERT_TRUE(fabs(s.mean - 50.5) < 1e-9);
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(i + 1, v[i]);

	for (int i = 0; i < 1000; i++)
		v[i] = (uint64_t)(1000 - i);
	ASSERT_OK(pp_summarize(v, 1000, &s));
	ASSERT_EQ(500, s.p50);
	ASSERT_EQ(990, s.p99);
	ASSERT_EQ(999, s.p999);

	v[0] = 42;
	ASSERT_OK(pp_summarize(v, 1, &s));
	ASSERT_EQ(42, s.min);
	ASSERT_EQ(42, s.p50);
	ASSERT_EQ(42, s.p999);
	ASSERT_EQ(42, s.max);
	ASSERT_EQ(-1, pp_summarize(v, 0, &s));
	ASSERT_EQ(42, pp_percentile(v, 1, 0));
	{
		uint64_t two[2] = {10, 20};

		ASSERT_EQ(10, pp_percentile(two, 2, 5000));
		ASSERT_EQ(20, pp_percentile(two, 2, 5001));
		ASSERT_EQ(20, pp_percentile(two, 2, 10000));
	}
}

SV_TEST(stats_histogram_buckets)
{
	static const struct {
		uint64_t ns;
		unsigned int bucket;
		uint64_t lower;
	} known[] = {
		{0, 0, 0},    {3, 3, 3},       {4, 4, 4},	 {7, 7, 7},
		{8, 8, 8},    {9, 8, 8},       {10, 9, 10},	 {15, 11, 14},
		{16, 12, 16}, {1000, 35, 896}, {1024, 36, 1024},
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		ASSERT_EQ(known[i].bucket, pp_hist_bucket(known[i].ns));
		ASSERT_EQ(known[i].lower, pp_hist_lower(known[i].bucket));
	}
	/* Every value lies in [lower, upper) of its bucket, buckets ascend. */
	for (uint64_t ns = 0; ns < 100000; ns = ns * 5 / 4 + 1) {
		unsigned int b = pp_hist_bucket(ns);

		ASSERT_LE(pp_hist_lower(b), ns);
		ASSERT_TRUE(ns < pp_hist_upper(b));
		ASSERT_EQ(pp_hist_upper(b), pp_hist_lower(b + 1));
	}
	ASSERT_EQ(PP_HIST_BUCKETS - 1, pp_hist_bucket(UINT64_MAX));
	ASSERT_EQ(UINT64_MAX, pp_hist_upper(PP_HIST_BUCKETS - 1));
}

SV_TEST(stats_histogram_build_and_print)
{
	uint64_t v[] = {2100, 2200, 2600, 2600, 9000};
	struct pp_hist h;
	struct capture cap;
	size_t total = 0;
	char *out;
	FILE *f;

	pp_hist_build(v, 5, &h);
	ASSERT_EQ(5, h.total);
	ASSERT_EQ(pp_hist_bucket(2100), h.first);
	ASSERT_EQ(pp_hist_bucket(9000), h.last);
	ASSERT_EQ(2, h.count[pp_hist_bucket(2200)]);
	ASSERT_EQ(2, h.count[pp_hist_bucket(2600)]);
	for (unsigned int b = 0; b < PP_HIST_BUCKETS; b++)
		total += h.count[b];
	ASSERT_EQ(5, total);

	capture_begin(&cap, 1);
	f = stdout;
	pp_hist_print(f, &h, 20);
	out = capture_end(&cap);
	/* one line per bucket from first to last, full bar for the top */
	ASSERT_CONTAINS(out, "|####################| 2\n");
	ASSERT_CONTAINS(out, "2.048 ..      2.560 usec");
	ASSERT_CONTAINS(out, "| 1\n");
	free(out);

	pp_hist_build(v, 0, &h);
	ASSERT_EQ(0, h.total);
}

static struct pp_result sample_result(void)
{
	static uint64_t lat[] = {3000, 2000, 2500, 12000, 2200};
	struct pp_result r = {
		.size = 4096, .iters = 1000, .usec = 10000.0, .bad_pages = -1};

	ASSERT_OK(pp_summarize(lat, 5, &r.lat));
	pp_hist_build(lat, 5, &r.hist);
	r.have_lat = true;
	return r;
}

SV_TEST(report_text_keeps_original_lines)
{
	struct pp_result r = {
		.size = 4096, .iters = 1000, .usec = 10000.0, .bad_pages = -1};
	struct capture cap;
	char *out;

	capture_begin(&cap, 1);
	pp_report_text(stdout, &r);
	out = capture_end(&cap);
	ASSERT_STR_EQ("8192000 bytes in 0.01 seconds = 6553.60 Mbit/sec\n"
		      "1000 iters in 0.01 seconds = 10.00 usec/iter\n",
		      out);
	free(out);

	r.have_ts = true;
	r.ts = (struct pp_ts_stats){.max_delta = 900,
				    .min_delta = 100,
				    .total_delta = 1000,
				    .iters = 4};
	capture_begin(&cap, 1);
	pp_report_text(stdout, &r);
	out = capture_end(&cap);
	ASSERT_CONTAINS(out, "Max receive completion clock cycles = 900\n"
			     "Min receive completion clock cycles = 100\n"
			     "Average receive completion clock cycles = "
			     "250.000000\n");
	free(out);
}

SV_TEST(report_text_percentiles_block)
{
	struct pp_result r = sample_result();
	struct capture cap;
	char *out;

	capture_begin(&cap, 1);
	pp_report_text(stdout, &r);
	out = capture_end(&cap);
	ASSERT_CONTAINS(out, "1000 iters in 0.01 seconds = 10.00 usec/iter\n"
			     "latency usec over 5 round trips: min 2.000  "
			     "p50 2.500  p99 12.000  p99.9 12.000  max "
			     "12.000  mean 4.340\n");
	ASSERT_CONTAINS(out, "usec |");
	free(out);
}

static char *json_of(const struct pp_run_info *info, const struct pp_result *r,
		     unsigned int n)
{
	struct capture cap;

	capture_begin(&cap, 1);
	pp_report_json(stdout, info, r, n);
	return capture_end(&cap);
}

SV_TEST(report_json_well_formed)
{
	struct pp_result r[2] = {sample_result(), sample_result()};
	struct pp_run_info info = {.role = "client",
				   .device = "dev\"with\\odd\nname",
				   .ib_port = 1,
				   .mtu = 1024,
				   .rx_depth = 500,
				   .iters = 1000,
				   .latency_def = "client: round trip"};
	char *out;

	r[0].have_ts = true;
	r[0].ts = (struct pp_ts_stats){5, 1, 6, 2};
	r[0].bad_pages = 0;
	out = json_of(&info, r, 1);
	ASSERT_TRUE(json_valid(out));
	ASSERT_CONTAINS(out, "\"role\":\"client\"");
	ASSERT_CONTAINS(out, "\"device\":\"dev\\\"with\\\\odd\\u000aname\"");
	ASSERT_CONTAINS(out, "\"size\":4096,\"iters\":1000,\"bytes\":8192000");
	ASSERT_CONTAINS(out, "\"seconds\":0.010");
	ASSERT_CONTAINS(out, "\"mbit_per_sec\":6553.600");
	ASSERT_CONTAINS(out, "\"usec_per_iter\":10.000");
	ASSERT_CONTAINS(out, "\"p99_9\":12.000");
	ASSERT_CONTAINS(out, "\"histogram\":[{\"from_usec\":");
	ASSERT_CONTAINS(out, "\"completion_ts\":{\"max_cycles\":5");
	ASSERT_CONTAINS(out, "\"invalid_pages\":0");
	ASSERT_TRUE(out[strlen(out) - 1] == '\n');
	free(out);

	info.sweep = true;
	r[1].size = 1;
	r[1].have_lat = false;
	out = json_of(&info, r, 2);
	ASSERT_TRUE(json_valid(out));
	ASSERT_CONTAINS(out, "\"sweep\":[{\"size\":4096");
	ASSERT_CONTAINS(out, "},{\"size\":1,");
	free(out);

	/* Nothing measured: still one valid object. */
	info.sweep = false;
	info.latency_def = NULL;
	out = json_of(&info, r, 0);
	ASSERT_TRUE(json_valid(out));
	free(out);
}

SV_TEST(report_json_no_nan)
{
	struct pp_result r = {.size = 1, .iters = 1, .usec = 0.0};
	struct pp_run_info info = {.role = "server", .device = "d"};
	char *out = json_of(&info, &r, 1);

	ASSERT_TRUE(json_valid(out));
	ASSERT_CONTAINS(out, "\"mbit_per_sec\":null");
	free(out);
}

SV_TEST(json_checker_rejects_garbage)
{
	ASSERT_TRUE(json_valid("{\"a\":[1,2.5,-3e2,true,null,\"x\"]}"));
	ASSERT_FALSE(json_valid("{\"a\":1,}"));
	ASSERT_FALSE(json_valid("{\"a\":nan}"));
	ASSERT_FALSE(json_valid("{\"a\":1} x"));
	ASSERT_FALSE(json_valid("\"ctl\x01\""));
}

SV_TEST(explain_narrates_on_stderr_once_per_loop_step)
{
	struct capture cap;
	char *err;

	for (int s = 0; s < PP_STEP_COUNT; s++)
		ASSERT_TRUE(pp_explain_why(s) &&
			    strlen(pp_explain_why(s)) > 20);
	capture_begin(&cap, 2);
	pp_explain(PP_STEP_ALLOC_PD, "not shown: %d", 1);
	pp_explain_enable(true);
	pp_explain(PP_STEP_ALLOC_PD, "ibv_alloc_pd(context) -> pd handle %u",
		   3u);
	pp_explain(PP_STEP_POST_SEND, "first send");
	pp_explain(PP_STEP_POST_SEND, "second send");
	err = capture_end(&cap);
	ASSERT_FALSE(strstr(err, "not shown"));
	ASSERT_CONTAINS(err, "[explain] ibv_alloc_pd(context) -> pd handle 3\n"
			     "[explain]     why: ");
	ASSERT_CONTAINS(err, pp_explain_why(PP_STEP_ALLOC_PD));
	ASSERT_CONTAINS(err, "first send");
	ASSERT_FALSE(strstr(err, "second send"));
	free(err);
}
