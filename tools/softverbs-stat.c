// SPDX-License-Identifier: MIT
/*
 * softverbs-stat PID: the counters of a running process's softverbs
 * contexts, per context and per QP, with no daemon and without touching
 * the process: each context keeps its counters in a sealed memfd named
 * "softverbs-stat" (provider/lib/stat.h: the layout; provider/lib/stat.c: the
 * writer), which we find among /proc/PID/fd and map read-only.  The
 * kernel's /proc check is the permission check (the same user, or root).
 * Everything in the table is another process's word: every field is
 * checked before it is used, and a table that does not check out is
 * skipped with a message.
 *
 *   softverbs-stat [--json] [-w|--watch SECONDS] [-a|--all] PID
 *   softverbs-stat --env [--markdown|--roff|--names]   (env_show.c)
 *
 * Exit: 0 printed; 1 usage, no such process, permission; 2 the process
 * has no softverbs context.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "env_show.h"
#include "stat.h"

#define MAX_CTX 64

struct table {
	ino_t ino;
	const uint8_t *map; /* SV_STAT_SIZE bytes, read-only */
	int fd_num;
};

struct snap {
	struct sv_stat_hdr h;
	struct sv_stat_slot s[SV_STAT_SLOTS];
};

static const char *const qpt_names[] = {
	[2] = "RC",	    [3] = "UC",	      [4] = "UD",
	[8] = "RAW_PACKET", [9] = "XRC_SEND", [10] = "XRC_RECV",
};
static const char *const state_names[] = {"RESET", "INIT", "RTR", "RTS",
					  "SQD",   "SQE",  "ERR"};

static const char *qpt_name(unsigned t)
{
	return t < sizeof(qpt_names) / sizeof(qpt_names[0]) && qpt_names[t]
		       ? qpt_names[t]
		       : "?";
}

static const char *state_name(unsigned s)
{
	return s < sizeof(state_names) / sizeof(state_names[0]) ? state_names[s]
								: "?";
}

static void usage(FILE *f)
{
	fprintf(f, "usage: softverbs-stat [--json] [-w|--watch SECONDS] "
		   "[-a|--all] PID\n"
		   "  prints the softverbs counters of process PID, per "
		   "context and per QP\n"
		   "  -a: every counter of every QP, zeros too\n"
		   "       softverbs-stat --env [--markdown|--roff|--names]\n"
		   "  prints the SOFTVERBS_* variables with the values in "
		   "effect\n");
}

/* Finds the process's tables; -errno, or how many. */
static int find_tables(pid_t pid, struct table *t, int max)
{
	char dir[64], path[PATH_MAX], link[256];
	struct dirent *d;
	DIR *dp;
	int n = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	dp = opendir(dir);
	if (!dp)
		return -errno;
	while ((d = readdir(dp)) && n < max) {
		struct stat st;
		ssize_t len;
		int fd, seals;
		void *m;
		bool dup = false;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len < 0)
			continue;
		link[len] = 0;
		if (strncmp(link, "/memfd:" SV_STAT_MEMFD " ",
			    strlen("/memfd:" SV_STAT_MEMFD " ")) &&
		    strcmp(link, "/memfd:" SV_STAT_MEMFD))
			continue;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "softverbs-stat: %s: %s\n", path,
				strerror(errno));
			continue;
		}
		/* sealed against shrinking, or it could vanish under our
		 * mapping (SIGBUS); the size we expect, exactly */
		seals = fcntl(fd, F_GET_SEALS);
		if (fstat(fd, &st) || seals < 0 || !(seals & F_SEAL_SHRINK) ||
		    (uint64_t)st.st_size != SV_STAT_SIZE) {
			fprintf(stderr,
				"softverbs-stat: %s is not a table of this "
				"version (size %lld, seals %#x): skipped\n",
				path, (long long)st.st_size, seals);
			close(fd);
			continue;
		}
		for (int i = 0; i < n; i++)
			dup |= t[i].ino == st.st_ino;
		if (dup) {
			close(fd);
			continue;
		}
		m = mmap(NULL, SV_STAT_SIZE, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (m == MAP_FAILED)
			continue;
		t[n].ino = st.st_ino;
		t[n].map = m;
		t[n].fd_num = atoi(d->d_name);
		n++;
	}
	closedir(dp);
	return n;
}

/* A consistent copy of a table, checked; false (said) if it is not one. */
static bool read_table(const struct table *t, struct snap *s)
{
	const struct sv_stat_hdr *h = (const struct sv_stat_hdr *)t->map;

	for (int tries = 0; tries < 1000; tries++) {
		uint64_t a = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE), b;

		if (a & 1)
			continue;
		memcpy(s, t->map, sizeof(*s));
		atomic_thread_fence(memory_order_acquire);
		b = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);
		if (a != b)
			continue;
		if (s->h.magic != SV_STAT_MAGIC ||
		    s->h.version != SV_STAT_VERSION ||
		    s->h.hdr_size != sizeof(s->h) ||
		    s->h.slot_size != sizeof(s->s[0]) ||
		    s->h.nslots != SV_STAT_SLOTS ||
		    s->h.nctr > SV_STAT_MAX_CTR || s->h.nqps > SV_STAT_SLOTS) {
			fprintf(stderr,
				"softverbs-stat: fd %d: not a softverbs-stat "
				"table of version %d: skipped\n",
				t->fd_num, SV_STAT_VERSION);
			return false;
		}
		for (uint32_t i = 0; i < s->h.nctr; i++) {
			char *nm = s->h.names[i];

			nm[SV_STAT_NAME_LEN - 1] = 0;
			for (char *c = nm; *c; c++)
				if (!((*c >= 'a' && *c <= 'z') ||
				      (*c >= '0' && *c <= '9') || *c == '_'))
					*c = '?';
		}
		return true;
	}
	fprintf(stderr,
		"softverbs-stat: fd %d: the table keeps changing "
		"under us: skipped\n",
		t->fd_num);
	return false;
}

/* The counters most people want first, if the table has them. */
static const char *const main_ctr[] = {"tx_pkts", "tx_bytes", "rx_pkts",
				       "rx_bytes"};

static int ctr_index(const struct snap *s, const char *name)
{
	for (uint32_t i = 0; i < s->h.nctr; i++)
		if (!strcmp(s->h.names[i], name))
			return (int)i;
	return -1;
}

static void print_counters(const struct snap *s, const uint64_t *c, bool all,
			   const char *indent)
{
	bool any = false;

	printf("%s", indent);
	for (size_t k = 0; k < 4; k++) {
		int i = ctr_index(s, main_ctr[k]);

		if (i >= 0)
			printf("%s %-12" PRIu64 " ", main_ctr[k], c[i]);
	}
	printf("\n");
	for (uint32_t i = 0; i < s->h.nctr; i++) {
		bool is_main = false;

		for (size_t k = 0; k < 4; k++)
			is_main |= !strcmp(s->h.names[i], main_ctr[k]);
		if (is_main || (!all && !c[i]))
			continue;
		printf("%s%s%s %" PRIu64, any ? " " : "", any ? "" : indent,
		       s->h.names[i], c[i]);
		any = true;
	}
	if (any)
		printf("\n");
}

static void print_text(const struct snap *s, bool all)
{
	uint64_t now;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	printf("pid %u context %u: %u QPs (%" PRIu64 " destroyed), "
	       "updated %.0f ms ago\n",
	       s->h.pid, s->h.ctx_id, s->h.qps_live, s->h.qps_gone,
	       s->h.updated_ns && now > s->h.updated_ns
		       ? (double)(now - s->h.updated_ns) / 1e6
		       : 0.0);
	printf("  total\n");
	print_counters(s, s->h.total, all, "    ");
	for (uint32_t q = 0; q < s->h.nqps; q++) {
		const struct sv_stat_slot *sl = &s->s[q];

		printf("  qp 0x%06x %-8s %-5s dest 0x%06x\n",
		       sl->qpn & 0xffffff, qpt_name(sl->qp_type),
		       state_name(sl->qp_state), sl->dest_qpn & 0xffffff);
		print_counters(s, sl->c, all, "    ");
	}
	if (s->h.qps_live > s->h.nqps)
		printf("  (%u more QPs, in the total only)\n",
		       s->h.qps_live - s->h.nqps);
}

static void json_counters(const struct snap *s, const uint64_t *c)
{
	printf("{");
	for (uint32_t i = 0; i < s->h.nctr; i++)
		printf("%s\"%s\": %" PRIu64, i ? ", " : "", s->h.names[i],
		       c[i]);
	printf("}");
}

static void print_json(const struct snap *s, bool first)
{
	printf("%s{\"context\": %u, \"updated_ns\": %" PRIu64
	       ", \"qps_live\": %u, \"qps_destroyed\": %" PRIu64
	       ", \"total\": ",
	       first ? "" : ", ", s->h.ctx_id, s->h.updated_ns, s->h.qps_live,
	       s->h.qps_gone);
	json_counters(s, s->h.total);
	printf(", \"qps\": [");
	for (uint32_t q = 0; q < s->h.nqps; q++) {
		const struct sv_stat_slot *sl = &s->s[q];

		printf("%s{\"qpn\": %u, \"type\": \"%s\", \"state\": \"%s\", "
		       "\"dest_qpn\": %u, \"counters\": ",
		       q ? ", " : "", sl->qpn & 0xffffff, qpt_name(sl->qp_type),
		       state_name(sl->qp_state), sl->dest_qpn & 0xffffff);
		json_counters(s, sl->c);
		printf("}");
	}
	printf("]}");
}

static int show(pid_t pid, bool json, bool all)
{
	static struct snap s;
	struct table t[MAX_CTX];
	int n = find_tables(pid, t, MAX_CTX), shown = 0;

	if (n == -ENOENT) {
		fprintf(stderr, "softverbs-stat: no process %d\n", (int)pid);
		return 1;
	}
	if (n < 0) {
		fprintf(stderr,
			"softverbs-stat: cannot read /proc/%d/fd: %s (run as "
			"the process's user, or root)\n",
			(int)pid, strerror(-n));
		return 1;
	}
	if (json)
		printf("{\"pid\": %d, \"contexts\": [", (int)pid);
	for (int i = 0; i < n; i++) {
		if (read_table(&t[i], &s)) {
			if (json)
				print_json(&s, !shown);
			else
				print_text(&s, all);
			shown++;
		}
		munmap((void *)t[i].map, SV_STAT_SIZE);
	}
	if (json)
		printf("]}\n");
	fflush(stdout);
	if (!shown) {
		fprintf(stderr,
			"softverbs-stat: process %d has no softverbs device "
			"open (no " SV_STAT_MEMFD " memfd among its fds)\n",
			(int)pid);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, 0, 'j'},
		{"watch", required_argument, 0, 'w'},
		{"all", no_argument, 0, 'a'},
		{"help", no_argument, 0, 'h'},
		{"env", no_argument, 0, 'E'},
		{"markdown", no_argument, 0, 'M'},
		{"names", no_argument, 0, 'N'},
		{"roff", no_argument, 0, 'R'},
		{0, 0, 0, 0},
	};
	bool json = false, all = false, env = false;
	int how = -1;
	double watch = 0;
	char *end;
	long pid;
	int c, rc;

	while ((c = getopt_long(argc, argv, "jw:ah", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'a':
			all = true;
			break;
		case 'w':
			watch = strtod(optarg, &end);
			if (*end || !(watch > 0) || watch > 86400) {
				fprintf(stderr,
					"softverbs-stat: --watch %s: give "
					"seconds, more than 0\n",
					optarg);
				return 1;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'E':
			env = true;
			break;
		case 'M':
			how = SV_ENV_SHOW_MARKDOWN;
			break;
		case 'N':
			how = SV_ENV_SHOW_NAMES;
			break;
		case 'R':
			how = SV_ENV_SHOW_ROFF;
			break;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (env && optind == argc)
		return sv_env_show(how < 0 ? SV_ENV_SHOW_TEXT
					   : (enum sv_env_show)how);
	if (env || how >= 0 || optind != argc - 1) {
		usage(stderr);
		return 1;
	}
	pid = strtol(argv[optind], &end, 10);
	if (*end || pid <= 0 || pid > INT_MAX) {
		fprintf(stderr, "softverbs-stat: %s is not a process id\n",
			argv[optind]);
		return 1;
	}
	for (;;) {
		struct timespec ts = {(time_t)watch,
				      (long)((watch - (time_t)watch) * 1e9)};

		rc = show((pid_t)pid, json, all);
		if (!watch || rc)
			return rc;
		nanosleep(&ts, NULL);
		if (!json)
			printf("\n");
	}
}
