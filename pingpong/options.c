// SPDX-License-Identifier: MIT
/*
 * Command line of rc_pingpong.  Letters, long names and defaults follow
 * rdma-core 44's ibv_rc_pingpong so scripts keep working; numbers are
 * checked strictly (the original accepts "12abc" as 12) and each bad
 * value is named in one message.
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Long-only options have values above any char. */
enum {
	OPT_PERCENTILES = 0x100,
	OPT_JSON,
	OPT_SWEEP,
	OPT_WARMUP,
	OPT_EXPLAIN,
	OPT_OOB_TIMEOUT,
	OPT_HELP,
};

static const struct option long_options[] = {
	{"port", required_argument, NULL, 'p'},
	{"ib-dev", required_argument, NULL, 'd'},
	{"ib-port", required_argument, NULL, 'i'},
	{"size", required_argument, NULL, 's'},
	{"mtu", required_argument, NULL, 'm'},
	{"rx-depth", required_argument, NULL, 'r'},
	{"iters", required_argument, NULL, 'n'},
	{"sl", required_argument, NULL, 'l'},
	{"events", no_argument, NULL, 'e'},
	{"gid-idx", required_argument, NULL, 'g'},
	{"odp", no_argument, NULL, 'o'},
	{"iodp", no_argument, NULL, 'O'},
	{"prefetch", no_argument, NULL, 'P'},
	{"ts", no_argument, NULL, 't'},
	{"chk", no_argument, NULL, 'c'},
	{"dm", no_argument, NULL, 'j'},
	{"new_send", no_argument, NULL, 'N'},
	{"percentiles", no_argument, NULL, OPT_PERCENTILES},
	{"json", no_argument, NULL, OPT_JSON},
	{"sweep", required_argument, NULL, OPT_SWEEP},
	{"warmup", required_argument, NULL, OPT_WARMUP},
	{"explain", no_argument, NULL, OPT_EXPLAIN},
	{"oob-timeout", required_argument, NULL, OPT_OOB_TIMEOUT},
	{"help", no_argument, NULL, OPT_HELP},
	{NULL, 0, NULL, 0},
};

void pp_options_default(struct pp_options *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->port = PP_DEFAULT_PORT;
	opt->ib_port = 1;
	opt->size = 4096;
	opt->mtu = 1024;
	opt->rx_depth = 500;
	opt->iters = 1000;
	opt->sl = 0;
	opt->gidx = -1;
	opt->oob_timeout_ms = PP_DEFAULT_OOB_TIMEOUT_S * 1000;
}

void pp_usage(FILE *f, const char *argv0)
{
	fprintf(f, "Usage:\n");
	fprintf(f, "  %s            start a server and wait for connection\n",
		argv0);
	fprintf(f, "  %s <host>     connect to server at <host>\n", argv0);
	fprintf(f, "\nOptions (as ibv_rc_pingpong):\n");
	fprintf(f,
		"  -p, --port=<port>      TCP port of the address exchange "
		"(default 18515)\n"
		"  -d, --ib-dev=<dev>     RDMA device to use (default: the "
		"first one)\n"
		"  -i, --ib-port=<port>   port of the device (default 1)\n"
		"  -s, --size=<size>      message size in bytes (default "
		"4096)\n"
		"  -m, --mtu=<size>       path MTU: 256, 512, 1024, 2048 or "
		"4096 (default 1024)\n"
		"  -r, --rx-depth=<dep>   receives kept posted (default 500)\n"
		"  -n, --iters=<iters>    number of exchanges (default 1000)\n"
		"  -l, --sl=<sl>          service level 0..15 (default 0)\n"
		"  -e, --events           sleep on completion events (default: "
		"busy poll)\n"
		"  -g, --gid-idx=<gid index> local GID index (default: none, "
		"LID only)\n"
		"  -o, --odp              register the buffer on demand (ODP)\n"
		"  -O, --iodp             use one implicit ODP region\n"
		"  -P, --prefetch         prefetch the ODP region (needs -o or "
		"-O)\n"
		"  -t, --ts               read completion timestamps\n"
		"  -c, --chk              check the received data\n"
		"  -j, --dm               put the buffer in device memory\n"
		"  -N, --new_send         post sends with the ibv_wr_* API\n");
	fprintf(f,
		"\nOptions of this rc_pingpong (long form only):\n"
		"  --percentiles          per-iteration round-trip latency: "
		"min, median,\n"
		"                         p99, p99.9, max and a histogram\n"
		"  --json                 print the results as one JSON object "
		"on stdout\n"
		"                         (address lines go to stderr)\n"
		"  --sweep=<max>          run sizes 1, 2, 4 ... <max>, -n "
		"exchanges each;\n"
		"                         give the same --sweep to BOTH sides: "
		"they check\n"
		"                         it after the usual exchange, so a "
		"peer without\n"
		"                         it fails cleanly; not with -s\n"
		"  --warmup=<n>           <n> untimed exchanges first (per "
		"size); both\n"
		"                         sides need the same value, checked "
		"like --sweep\n"
		"  --explain              narrate each verbs step on stderr\n"
		"  --oob-timeout=<sec>    wait at most <sec> for each message "
		"of "
		"a connected\n"
		"                         peer, and for connect (default 60, "
		"max 3600)\n"
		"  -h, --help             show this help\n");
}

/* Parses all of s as an integer in [min, max]; base as strtol's 0. */
static int parse_num(const char *name, const char *s, long long min,
		     long long max, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno || end == s || *end != '\0' || v < min || v > max) {
		fprintf(stderr,
			"invalid %s '%s': expected a number from %lld to "
			"%lld\n",
			name, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_mtu(const char *s, int *mtu)
{
	long long v;

	if (parse_num("--mtu", s, 256, 4096, &v))
		return -1;
	if (v != 256 && v != 512 && v != 1024 && v != 2048 && v != 4096) {
		fprintf(stderr,
			"invalid --mtu '%s': expected 256, 512, 1024, 2048 "
			"or 4096\n",
			s);
		return -1;
	}
	*mtu = (int)v;
	return 0;
}

/* One option letter or long value; returns -1 after printing why. */
static int apply_option(int c, const char *arg, struct pp_options *opt)
{
	long long v = 0;
	int r = 0;

	switch (c) {
	case 'p':
		r = parse_num("--port", arg, 1, 65535, &v);
		opt->port = (unsigned int)v;
		break;
	case 'd':
		opt->ib_devname = arg;
		break;
	case 'i':
		r = parse_num("--ib-port", arg, 1, 255, &v);
		opt->ib_port = (int)v;
		break;
	case 's':
		r = parse_num("--size", arg, 1, INT_MAX, &v);
		opt->size = (unsigned int)v;
		opt->size_given = true;
		break;
	case 'm':
		r = parse_mtu(arg, &opt->mtu);
		break;
	case 'r':
		r = parse_num("--rx-depth", arg, 1, INT_MAX - 1, &v);
		opt->rx_depth = (unsigned int)v;
		break;
	case 'n':
		r = parse_num("--iters", arg, 1, INT_MAX, &v);
		opt->iters = (unsigned int)v;
		break;
	case 'l':
		r = parse_num("--sl", arg, 0, 15, &v);
		opt->sl = (int)v;
		break;
	case 'g':
		r = parse_num("--gid-idx", arg, -1, 255, &v);
		opt->gidx = (int)v;
		break;
	case OPT_SWEEP:
		r = parse_num("--sweep", arg, 1, INT_MAX, &v);
		opt->sweep_max = (unsigned int)v;
		break;
	case OPT_WARMUP:
		r = parse_num("--warmup", arg, 0, INT_MAX, &v);
		opt->warmup = (unsigned int)v;
		break;
	case OPT_OOB_TIMEOUT:
		r = parse_num("--oob-timeout", arg, 1, PP_MAX_OOB_TIMEOUT_S,
			      &v);
		opt->oob_timeout_ms = (int)v * 1000;
		break;
	}
	return r;
}

static void apply_flag(int c, struct pp_options *opt)
{
	switch (c) {
	case 'e':
		opt->use_event = true;
		break;
	case 'o':
		opt->use_odp = true;
		break;
	case 'O':
		opt->use_odp = true;
		opt->implicit_odp = true;
		break;
	case 'P':
		opt->prefetch_mr = true;
		break;
	case 't':
		opt->use_ts = true;
		break;
	case 'c':
		opt->validate_buf = true;
		break;
	case 'j':
		opt->use_dm = true;
		break;
	case 'N':
		opt->use_new_send = true;
		break;
	case OPT_PERCENTILES:
		opt->percentiles = true;
		break;
	case OPT_JSON:
		opt->json = true;
		break;
	case OPT_EXPLAIN:
		opt->explain = true;
		break;
	}
}

/* Combinations the original refuses, and ours. */
static int check_combinations(const struct pp_options *opt)
{
	if (opt->use_odp && opt->use_dm) {
		fprintf(stderr, "DM memory region can't be on demand\n");
		return -1;
	}
	if (!opt->use_odp && opt->prefetch_mr) {
		fprintf(stderr, "prefetch is valid only with on-demand memory "
				"region\n");
		return -1;
	}
	if (opt->sweep_max && opt->size_given) {
		fprintf(stderr, "--sweep and -s/--size exclude each other: "
				"--sweep chooses the sizes\n");
		return -1;
	}
	return 0;
}

enum pp_opt_result pp_options_parse(int argc, char **argv,
				    struct pp_options *opt)
{
	static const char short_opts[] = "p:d:i:s:m:r:n:l:eg:oOPtcjNh";
	int c;

	pp_options_default(opt);
	optind = 0; /* full re-initialisation of glibc's getopt */
	while ((c = getopt_long(argc, argv, short_opts, long_options, NULL)) !=
	       -1) {
		if (c == 'h' || c == OPT_HELP) {
			pp_usage(stdout, argv[0]);
			return PP_OPT_HELP;
		}
		if (c == '?') {
			pp_usage(stdout, argv[0]);
			return PP_OPT_ERROR;
		}
		if (optarg) {
			if (apply_option(c, optarg, opt))
				return PP_OPT_ERROR;
		} else {
			apply_flag(c, opt);
		}
	}
	if (optind == argc - 1) {
		opt->servername = argv[optind];
	} else if (optind < argc) {
		fprintf(stderr, "too many arguments: '%s' after host '%s'\n",
			argv[optind + 1], argv[optind]);
		return PP_OPT_ERROR;
	}
	if (check_combinations(opt))
		return PP_OPT_ERROR;
	return PP_OPT_OK;
}

unsigned int pp_sizes(const struct pp_options *opt, unsigned int *sizes,
		      unsigned int max_sizes)
{
	unsigned int n = 0;
	unsigned long long s;

	if (!opt->sweep_max) {
		if (max_sizes)
			sizes[n++] = opt->size;
		return n;
	}
	for (s = 1; s <= opt->sweep_max && n < max_sizes; s *= 2)
		sizes[n++] = (unsigned int)s;
	if (n && sizes[n - 1] != opt->sweep_max && n < max_sizes)
		sizes[n++] = opt->sweep_max;
	return n;
}

unsigned int pp_buf_size(const struct pp_options *opt)
{
	return opt->sweep_max ? opt->sweep_max : opt->size;
}
