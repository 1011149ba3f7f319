// SPDX-License-Identifier: MIT
/*
 * rc_pingpong: the program of Kerr's "Dissecting a Small InfiniBand
 * Application Using the Verbs API", compatible with rdma-core 44's
 * ibv_rc_pingpong.  main() reads top to bottom like the paper: find a
 * device, build the verbs objects, swap addresses, connect, ping-pong,
 * report, tear down.  docs/DISSECTION.md maps each step to its code.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "explain.h"
#include "loop.h"
#include "oob.h"
#include "options.h"
#include "pingpong.h"
#include "report.h"

#define MAX_SIZES 40

static const char client_latency[] =
	"client: from posting send k to the completion of both send k and "
	"the reply to it (one round trip)";
static const char server_latency[] =
	"server: between the ends of consecutive exchanges, an exchange "
	"ending with the completion of a received message (one round trip "
	"as the server sees it; iters - 1 samples)";

static void no_device_help(const char *why)
{
	fprintf(stderr,
		"No RDMA devices found (%s).\n"
		"This host has no InfiniBand/RoCE adapter, or no provider "
		"for it.  To run without one, use the softverbs software "
		"device:\n"
		"    softverbs-run rc_pingpong [options] [host]\n",
		why);
}

/* Step 1 of the paper: the device list, and the device we will use. */
static struct ibv_device **get_devices(const struct pp_options *opt,
				       struct ibv_device **dev)
{
	struct ibv_device **list;
	int num = 0;

	list = ibv_get_device_list(&num);
	if (!list) {
		char why[128];

		snprintf(why, sizeof(why), "Failed to get IB devices list: %s",
			 strerror(errno));
		no_device_help(why);
		return NULL;
	}
	pp_explain(PP_STEP_GET_DEVICE_LIST,
		   "ibv_get_device_list() -> %d "
		   "device(s)",
		   num);
	if (!list[0]) {
		no_device_help("the device list is empty");
		ibv_free_device_list(list);
		return NULL;
	}
	*dev = pp_find_device(list, opt->ib_devname);
	if (!*dev) {
		ibv_free_device_list(list);
		return NULL;
	}
	return list;
}

static void print_dest(FILE *f, const char *which, const struct pp_dest *d)
{
	char gid[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, d->gid, gid, sizeof(gid));
	fprintf(f, "  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", which,
		d->lid, d->qpn, d->psn, gid);
}

struct connect_arg {
	struct pp_context *ctx;
	uint32_t my_psn;
};

/* The server connects its QP before it answers, as the original does. */
static int server_connect(const struct pp_dest *peer, void *arg)
{
	struct connect_arg *a = arg;

	return pp_connect_qp(a->ctx, peer, a->my_psn);
}

/* The exchange of identifiers over TCP, then the client connects. */
static int exchange(struct pp_context *ctx, const struct pp_options *opt,
		    const struct pp_dest *mine, struct pp_dest *rem)
{
	struct pp_ext ext = {.iters = opt->iters,
			     .sweep_max = opt->sweep_max,
			     .warmup = opt->warmup};
	const struct pp_ext *e = opt->sweep_max || opt->warmup ? &ext : NULL;
	struct connect_arg arg = {.ctx = ctx, .my_psn = mine->psn};
	int lfd, ret;

	if (opt->servername)
		return pp_oob_connect(opt->servername, opt->port,
				      opt->oob_timeout_ms, mine, e, rem) ||
		       pp_connect_qp(ctx, rem, mine->psn);
	if (pp_oob_listen(opt->port, &lfd))
		return -1;
	ret = pp_oob_serve(lfd, opt->oob_timeout_ms, mine, e, server_connect,
			   &arg, rem);
	close(lfd);
	return ret;
}

/* Warm-up (untimed), then the timed run at the current size. */
static int run_size(struct pp_loop *lp, const struct pp_options *opt,
		    struct pp_result *res)
{
	struct pp_context *ctx = lp->ctx;
	uint64_t *lat = lp->lat_ns;

	if (opt->warmup) {
		lp->iters = opt->warmup;
		lp->lat_ns = NULL;
		if (pp_loop_run(lp))
			return -1;
		lp->lat_ns = lat;
	}
	lp->iters = opt->iters;
	if (pp_loop_run(lp))
		return -1;
	memset(res, 0, sizeof(*res));
	res->size = ctx->size;
	res->iters = opt->iters;
	res->usec = lp->usec;
	res->bad_pages = -1;
	res->have_ts = opt->use_ts;
	res->ts = lp->ts;
	if (lat && !pp_summarize(lat, lp->nlat, &res->lat)) {
		res->have_lat = true;
		pp_hist_build(lat, lp->nlat, &res->hist);
	}
	return 0;
}

/* -c on the server, after the result lines as in the original. */
static int check_data(struct pp_context *ctx, const struct pp_options *opt,
		      struct pp_result *res)
{
	if (!opt->validate_buf || opt->servername)
		return 0;
	res->bad_pages = pp_check_buf(ctx, opt->json ? stderr : stdout);
	return res->bad_pages ? -1 : 0;
}

/* Every size of the run (one without --sweep), reported as it ends. */
static int ping_pong(struct pp_context *ctx, const struct pp_options *opt,
		     const char *devname)
{
	unsigned int sizes[MAX_SIZES], n = pp_sizes(opt, sizes, MAX_SIZES);
	struct pp_result res[MAX_SIZES];
	struct pp_loop lp = {.ctx = ctx,
			     .client = opt->servername != NULL,
			     .routs = (int)ctx->rx_depth};
	struct pp_run_info info = {
		.role = opt->servername ? "client" : "server",
		.device = devname,
		.ib_port = opt->ib_port,
		.mtu = opt->mtu,
		.rx_depth = opt->rx_depth,
		.iters = opt->iters,
		.warmup = opt->warmup,
		.events = opt->use_event,
		.sweep = opt->sweep_max != 0,
	};
	bool bad_data = false;
	unsigned int i;
	int ret = -1;

	if (opt->percentiles) {
		lp.lat_ns = calloc(opt->iters, sizeof(*lp.lat_ns));
		if (!lp.lat_ns) {
			fprintf(stderr,
				"no memory for %u latency samples; "
				"use fewer -n\n",
				opt->iters);
			return -1;
		}
		info.latency_def =
			opt->servername ? client_latency : server_latency;
	}
	for (i = 0; i < n; i++) {
		pp_set_size(ctx, sizes[i]);
		if (run_size(&lp, opt, &res[i]))
			goto out_free;
		if (!opt->json) {
			if (opt->sweep_max)
				printf("size %u:\n", sizes[i]);
			pp_report_text(stdout, &res[i]);
		}
		if (check_data(ctx, opt, &res[i]))
			bad_data = true;
	}
	if (opt->json)
		pp_report_json(stdout, &info, res, n);
	ret = bad_data ? -1 : 0;
out_free:
	free(lp.lat_ns);
	return ret;
}

int main(int argc, char *argv[])
{
	struct ibv_device **dev_list, *ib_dev = NULL;
	struct pp_options opt;
	struct pp_context ctx;
	struct pp_dest my_dest, rem_dest;
	FILE *addr_out;
	int ret = 1;

	switch (pp_options_parse(argc, argv, &opt)) {
	case PP_OPT_HELP:
		return 0;
	case PP_OPT_ERROR:
		return 1;
	case PP_OPT_OK:
		break;
	}
	pp_explain_enable(opt.explain);
	addr_out = opt.json ? stderr : stdout;
	srand48(getpid() * time(NULL));

	dev_list = get_devices(&opt, &ib_dev);
	if (!dev_list)
		return 1;
	if (pp_init_ctx(&ctx, ib_dev, &opt))
		goto out_free_list;

	if (pp_post_recv(&ctx, (int)ctx.rx_depth) < (int)ctx.rx_depth) {
		fprintf(stderr, "Couldn't post receive (%u)\n", ctx.rx_depth);
		goto out_close;
	}
	pp_explain(PP_STEP_POST_RECV, "ibv_post_recv() x %u, %u bytes each",
		   ctx.rx_depth, ctx.buf_size);
	if (opt.use_event) {
		if (ibv_req_notify_cq(ctx.cq, 0)) {
			fprintf(stderr, "Couldn't request CQ notification\n");
			goto out_close;
		}
		pp_explain(PP_STEP_REQ_NOTIFY,
			   "ibv_req_notify_cq(cq, 0) -> ok");
	}

	if (pp_local_dest(&ctx, &my_dest))
		goto out_close;
	print_dest(addr_out, "local address: ", &my_dest);
	fflush(addr_out); /* a script may wait for this line */
	if (opt.validate_buf && opt.servername && pp_fill_buf(&ctx))
		goto out_close;
	pp_explain(PP_STEP_EXCHANGE,
		   "%s port %u, 52-byte message "
		   "LID:QPN:PSN:GID each way",
		   opt.servername ? "TCP connect to" : "TCP listen on",
		   opt.port);
	if (exchange(&ctx, &opt, &my_dest, &rem_dest))
		goto out_close;
	print_dest(addr_out, "remote address:", &rem_dest);
	fflush(addr_out);

	if (ping_pong(&ctx, &opt, ibv_get_device_name(ib_dev)))
		goto out_close;
	ret = 0;
out_close:
	if (pp_close_ctx(&ctx))
		ret = 1;
out_free_list:
	ibv_free_device_list(dev_list);
	pp_explain(PP_STEP_FREE_DEVICE_LIST, "ibv_free_device_list() -> ok");
	return ret;
}
