// SPDX-License-Identifier: MIT
/*
 * The SOFTVERBS_* variables: the table (one row each, env.h), the one
 * place that reads them from the environment, their parsers, and the one
 * line on stderr a bad value gets.  A service like util.c: it calls
 * nothing of the provider but inject.c's parser.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "cpus.h"
#include "env.h"
#include "inject.h"
#include "rmem.h"
#include "subnet.h"
#include "tcp.h"
#include "wire.h"

static const char *const transports[] = {
	[SV_TRANSPORT_AUTO] = "auto",
	[SV_TRANSPORT_SHM] = "shm",
	[SV_TRANSPORT_TCP] = "tcp",
	[SV_TRANSPORT_ROCE] = "roce",
	NULL,
};

static int faults_check(const char *v, char *why, size_t n)
{
	struct sv_inject f;
	char bad[64];

	if (!sv_inject_parse(v, &f, bad, sizeof(bad)))
		return 0;
	snprintf(why, n, "bad key or value '%s'", bad);
	return -EINVAL;
}

static const char *const cm_drop_names[SV_CM_DROP_KINDS] = {
	"req", "rep", "rtu", "rej", "dreq", "drep",
};

int sv_env_cm_drop_parse(const char *v, unsigned int n[SV_CM_DROP_KINDS])
{
	memset(n, 0, SV_CM_DROP_KINDS * sizeof(n[0]));
	while (*v) {
		size_t k = strcspn(v, "=");
		unsigned long x;
		char *end;
		int i;

		for (i = 0; i < SV_CM_DROP_KINDS; i++)
			if (strlen(cm_drop_names[i]) == k &&
			    !strncmp(v, cm_drop_names[i], k))
				break;
		if (i == SV_CM_DROP_KINDS || v[k] != '=' || v[k + 1] < '0' ||
		    v[k + 1] > '9')
			return -EINVAL;
		errno = 0;
		x = strtoul(v + k + 1, &end, 10);
		if (errno || x > 1000 || (*end && *end != ',') ||
		    (*end == ',' && !end[1]))
			return -EINVAL;
		n[i] = (unsigned int)x;
		v = *end ? end + 1 : end;
	}
	return 0;
}

static int cm_drop_check(const char *v, char *why, size_t n)
{
	unsigned int k[SV_CM_DROP_KINDS];

	if (!sv_env_cm_drop_parse(v, k))
		return 0;
	snprintf(why, n,
		 "not a list of KIND=N (KIND req rep rtu rej dreq "
		 "drep, N 0..1000)");
	return -EINVAL;
}

/* A secret file must be ours alone: a secret others can read is none. */
static int secret_check(const char *v, char *why, size_t n)
{
	struct stat st;

	if (stat(v, &st)) {
		snprintf(why, n, "%s", strerror(errno));
		return -EINVAL;
	}
	if (!S_ISREG(st.st_mode))
		snprintf(why, n, "not a regular file");
	else if (st.st_uid != geteuid())
		snprintf(why, n, "owned by uid %u, not by this user (%u)",
			 (unsigned int)st.st_uid, (unsigned int)geteuid());
	else if (st.st_mode & 077)
		snprintf(why, n, "mode %03o lets %s read it: chmod 600 it",
			 (unsigned int)(st.st_mode & 0777),
			 st.st_mode & 070 ? "its group" : "others");
	else if (st.st_size < SV_SECRET_MIN || st.st_size > SV_SECRET_MAX)
		snprintf(why, n, "%lld bytes, not %d to %d",
			 (long long)st.st_size, SV_SECRET_MIN, SV_SECRET_MAX);
	else if (access(v, R_OK))
		snprintf(why, n, "%s", strerror(errno));
	else
		return 0;
	return -EINVAL;
}

static int cpus_check(const char *v, char *why, size_t n)
{
	enum sv_cpus_kind kind;
	cpu_set_t set;

	return sv_cpus_parse(v, &kind, &set, why, n);
}

static int subnet_check(const char *v, char *why, size_t n)
{
	struct sv_subnet s;

	return sv_subnet_parse(v, &s, why, n);
}

/* one row per variable, its fields read as a sentence */
/* clang-format off */
#define LIBS	 "libibverbs"
#define RUN	 "softverbs-run"
#define LIBS_CM	 "libibverbs, librdmacm"
#define LIBCM	 "librdmacm"
#define BOOL(d)	 .type = SV_ENV_T_BOOL, .def = (d), .max = 1
#define UINT(d, lo, hi) \
	.type = SV_ENV_T_UINT, .def = (d), .min = (lo), .max = (hi)

const struct sv_env_row sv_env_rows[SV_ENV_COUNT] = {
	[SV_ENV_DEBUG] = {
		"SOFTVERBS_DEBUG", BOOL(0), .policy = SV_ENV_DEFAULT,
		.reader = LIBS_CM,
		.help = "1: log connection, error and rdma_cm events to "
			"stderr",
	},
	[SV_ENV_TRANSPORT] = {
		"SOFTVERBS_TRANSPORT", .type = SV_ENV_T_ENUM,
		.policy = SV_ENV_REFUSE, .def = SV_TRANSPORT_AUTO,
		.values = transports, .reader = LIBS_CM,
		.help = "auto: shared memory on this host, TCP to other "
			"hosts; tcp: TCP on this host too (and the rdma_cm "
			"rendezvous); shm: never TCP; roce: RoCEv2 over UDP 4791 to "
			"every peer (a RoCE NIC, the kernel's rxe, softverbs "
			"on another host), RC, UC and UD",
	},
	[SV_ENV_TCP_PORT] = {
		"SOFTVERBS_TCP_PORT", .type = SV_ENV_T_PORT,
		.policy = SV_ENV_REFUSE, .def = SV_TCP_PORT_DEFAULT, .min = 1,
		.max = 65535, .reader = LIBS,
		.help = "the TCP port QPs listen on and call (and the UDP "
			"port of UD datagrams between hosts)",
	},
	[SV_ENV_TCP_CONNECT_PORT] = {
		"SOFTVERBS_TCP_CONNECT_PORT", .type = SV_ENV_T_PORT,
		.policy = SV_ENV_REFUSE, .def = 0,
		.def_text = "SOFTVERBS_TCP_PORT's", .min = 1, .max = 65535,
		.reader = LIBS,
		.help = "the port QPs call peers on (a fault-injecting "
			"proxy's, for tests)",
	},
	[SV_ENV_RING_KB] = {
		"SOFTVERBS_RING_KB", UINT(1024, 16, 256 * 1024),
		.policy = SV_ENV_DEFAULT, .unit = "KiB", .reader = LIBS,
		.help = "each connection's ring per direction (rounded up "
			"to a power of two)",
	},
	[SV_ENV_EVENT_SPIN_US] = {
		"SOFTVERBS_EVENT_SPIN_US", UINT(50, 0, 10000000),
		.policy = SV_ENV_DEFAULT, .unit = "us", .reader = LIBS_CM,
		.help = "how long ibv_get_cq_event keeps the engine running, "
			"and a blocking rsockets call polls, before it sleeps",
	},
	[SV_ENV_SINGLE_COPY] = {
		"SOFTVERBS_SINGLE_COPY", BOOL(1), .policy = SV_ENV_DEFAULT,
		.reader = LIBS,
		.help = "0: memory registered without remote access stays "
			"private (sends go through the ring: two copies)",
	},
	[SV_ENV_MOVE_AT_REG] = {
		"SOFTVERBS_MOVE_AT_REG", BOOL(0), .policy = SV_ENV_DEFAULT,
		.reader = LIBS,
		.help = "1: ibv_reg_mr moves shared memory onto the arena at "
			"once; 0: at the context's first connection on this "
			"host (memory of programs whose peers are all on "
			"other hosts never moves)",
	},
	[SV_ENV_SINGLE_COPY_MIN] = {
		"SOFTVERBS_SINGLE_COPY_MIN",
		UINT(SV_SINGLE_COPY_MIN, 0, UINT32_MAX),
		.policy = SV_ENV_DEFAULT, .unit = "bytes", .reader = LIBS,
		.help = "the size from which a send is placed straight into "
			"the receive buffer",
	},
	[SV_ENV_SINGLE_COPY_COLD] = {
		"SOFTVERBS_SINGLE_COPY_COLD",
		UINT(SV_SINGLE_COPY_COLD, 0, UINT32_MAX),
		.policy = SV_ENV_DEFAULT, .unit = "bytes", .reader = LIBS,
		.help = "sends up to this size go through the ring when their "
			"receive buffer is cold and the receiver idle (0: "
			"always place)",
	},
	[SV_ENV_ARENA_GB] = {
		"SOFTVERBS_ARENA_GB", UINT(SV_RMEM_ARENA_GB, 1, 16384),
		.policy = SV_ENV_DEFAULT, .unit = "GiB", .reader = LIBS,
		.help = "the most memory a context shares (sparse)",
	},
	[SV_ENV_UD_LANES] = {
		"SOFTVERBS_UD_LANES", BOOL(1), .policy = SV_ENV_DEFAULT,
		.reader = LIBS,
		.help = "0: UD datagrams go on the QP's socket only (no "
			"shared-memory lanes)",
	},
	[SV_ENV_MCAST_DIR] = {
		"SOFTVERBS_MCAST_DIR", .type = SV_ENV_T_PATH,
		.policy = SV_ENV_DEFAULT,
		.def_text = "/dev/shm/softverbs-<uid>-mcast",
		.syntax = "a directory", .reader = LIBS,
		.help = "where multicast group membership is kept",
	},
	[SV_ENV_FAULTS] = {
		"SOFTVERBS_FAULTS", .type = SV_ENV_T_SPEC,
		.policy = SV_ENV_REFUSE, .def_text = "none",
		.syntax = "comma-separated drop=P rnr=P access=P reorder=P "
			  "reorder_out=P delay_us=N kill_at=N seed=N (P in [0,1], "
			  "delay_us at most 10000000)",
		.check = faults_check, .reader = LIBS,
		.help = "faults to inject: packets lost, RNR and access "
			"NAKs, RoCE datagrams reordered, delays, a crash "
			"after N packets",
	},
	[SV_ENV_PCAP] = {
		"SOFTVERBS_PCAP", .type = SV_ENV_T_PATH,
		.policy = SV_ENV_DEFAULT, .def_text = "none",
		.syntax = "a file name (%p: the process id, %%: %)",
		.reader = LIBS,
		.help = "write every packet to this pcap file or FIFO (one "
			"that cannot be opened, a FIFO with no reader within "
			"1 s, a reader gone or taking nothing for 1 s: a "
			"line, the capture stops, the program goes on)",
	},
	[SV_ENV_PCAP_SNAP] = {
		"SOFTVERBS_PCAP_SNAP", UINT(SV_PCAP_SNAP, 0, SV_PCAP_SNAP),
		.policy = SV_ENV_DEFAULT, .unit = "bytes", .reader = LIBS,
		.help = "bytes of each frame a capture keeps, as tcpdump -s "
			"(0: the default, whole packets)",
	},
	/* The kernel's IB CM gives up a REQ (or SIDR REQ) after its
	 * retries (response timeout 20, ~4.3 s a try, 15 retries: about a
	 * minute); a listener's program that never answers must not hold
	 * the active side for ever.  Our stream is reliable: one wait. */
	[SV_ENV_CM_TIMEOUT_MS] = {
		"SOFTVERBS_CM_TIMEOUT_MS", UINT(64000, 1, 3600000),
		.policy = SV_ENV_DEFAULT, .unit = "ms", .reader = LIBCM,
		.help = "how long a connection (or SIDR) request waits for "
			"its answer before RDMA_CM_EVENT_UNREACHABLE",
	},
	/* A fault hook for the IB CM's MADs over RoCE (ib_link.c): the
	 * first N of a kind are not sent, as if lost, so the MAD
	 * retransmission is tested (tests/roce/netns_roce.sh) */
	[SV_ENV_CM_MAD_DROP] = {
		"SOFTVERBS_CM_MAD_DROP", .type = SV_ENV_T_SPEC,
		.policy = SV_ENV_DEFAULT, .def_text = "none",
		.syntax = "comma-separated KIND=N (KIND req rep rtu rej dreq "
			  "drep, N 0..1000)",
		.check = cm_drop_check, .reader = LIBCM,
		.help = "SOFTVERBS_TRANSPORT=roce: the first N IB CM MADs of "
			"each kind this process sends are lost on purpose "
			"(counted as dropped, resent as lost ones are); "
			"req and rep count SIDR REQs and REPs too",
	},
	[SV_ENV_DEVFILES] = {
		"SOFTVERBS_DEVFILES", BOOL(1), .policy = SV_ENV_DEFAULT,
		.reader = RUN,
		.help = "0: no /dev/infiniband and /sys/class/infiniband "
			"files for the program (libsoftverbs-devfiles.so "
			"not preloaded)",
	},
	/* auth.h: what each transport proves with it (docs/trust.md) */
	[SV_ENV_SECRET_FILE] = {
		"SOFTVERBS_SECRET_FILE", .type = SV_ENV_T_SPEC,
		.policy = SV_ENV_REFUSE, .def_text = "none",
		.syntax = "a file of 16 to 4096 bytes that only its owner, "
			  "this user, may read (mode 600 or 400)",
		.check = secret_check, .reader = LIBS_CM,
		.help = "a shared secret: every TCP link, CM connection and "
			"UD datagram between hosts must prove it",
	},
	/* subnet.h; addr.c maps LIDs and addresses (docs/tcp.md, "LIDs
	 * between hosts") */
	[SV_ENV_SUBNET] = {
		"SOFTVERBS_SUBNET", .type = SV_ENV_T_SPEC,
		.policy = SV_ENV_REFUSE, .def_text = "none",
		.syntax = "an IPv4 subnet a.b.c.d/N, N in 16..30",
		.check = subnet_check, .reader = LIBS,
		.help = "LIDs that route between hosts: a host's LID is the "
			"host part of its address in this subnet, and a LID "
			"names that address (unset: a LID is this host's "
			"only)",
	},
	/* cpus.h: why not the process's own binding */
	[SV_ENV_PROGRESS_CPUS] = {
		"SOFTVERBS_PROGRESS_CPUS", .type = SV_ENV_T_SPEC,
		.policy = SV_ENV_DEFAULT, .def_text = "inherit",
		.syntax = "inherit, all, or a CPU list as taskset -c takes "
			  "it (0-3,8)",
		.check = cpus_check, .reader = LIBS,
		.help = "where each context's progress thread may run: "
			"inherit (the program's binding), all (any CPU, even "
			"when the program is bound to fewer), or these CPUs",
	},
	[SV_ENV_ROCE_SPORT] = {
		"SOFTVERBS_ROCE_SPORT", .type = SV_ENV_T_PORT,
		.policy = SV_ENV_REFUSE, .def = 0, .min = 0, .max = 65535,
		.reader = LIBS,
		.help = "the UDP source port of every RoCEv2 QP pair; 0: "
			"from the two QPNs, as rxe and NICs do.  Set it on "
			"both sides, softverbs to softverbs only (a firewall "
			"that opens one port; a test of pairs that share one)",
	},
	[SV_ENV_ROCE_GSO] = {
		"SOFTVERBS_ROCE_GSO", BOOL(1), .policy = SV_ENV_DEFAULT,
		.reader = LIBS,
		.help = "1: a RoCEv2 QP hands a train's packets to the kernel "
			"as one UDP GSO message (cut into the same packets, "
			"IPv4 IDs 0, 1, 2...) and reads arrivals in UDP GRO "
			"bundles; 0: a system call moves datagrams one by "
			"one, IPv4 ID 0",
	},
};
/* clang-format on */

bool sv_env_quiet;

static struct {
	char *raw;    /* the environment's string; NULL: unset or empty */
	bool bad;     /* refused: val is the default */
	uint64_t val; /* bool, uint, port, enum */
} env[SV_ENV_COUNT];
static bool refused;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
uint64_t sv_env_vals[SV_ENV_COUNT];
atomic_bool sv_env_ready;

void sv_env_range(const struct sv_env_row *r, char *buf, size_t n)
{
	size_t k = 0;

	switch (r->type) {
	case SV_ENV_T_BOOL:
		snprintf(buf, n, "0 or 1");
		break;
	case SV_ENV_T_UINT:
	case SV_ENV_T_PORT:
		snprintf(buf, n, "%" PRIu64 "..%" PRIu64 "%s%s", r->min, r->max,
			 r->unit ? " " : "", r->unit ? r->unit : "");
		break;
	case SV_ENV_T_ENUM:
		buf[0] = '\0';
		for (int i = 0; r->values[i] && k < n; i++)
			k += (size_t)snprintf(
				buf + k, n - k, "%s%s",
				i ? (r->values[i + 1] ? ", " : " or ") : "",
				r->values[i]);
		break;
	default:
		snprintf(buf, n, "%s", r->syntax);
	}
}

void sv_env_default(const struct sv_env_row *r, char *buf, size_t n)
{
	if (r->def_text)
		snprintf(buf, n, "%s", r->def_text);
	else if (r->type == SV_ENV_T_ENUM)
		snprintf(buf, n, "%s", r->values[r->def]);
	else
		snprintf(buf, n, "%" PRIu64, r->def);
}

/* Decimal or 0x hex digits only: no sign, no space, no suffix. */
static bool parse_u64(const char *s, uint64_t *v)
{
	int base = 10;
	char *end;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!*s || !(base == 16 ? strchr("0123456789abcdefABCDEF", *s)
				: strchr("0123456789", *s)))
		return false;
	errno = 0;
	*v = strtoull(s, &end, base);
	return !errno && !*end;
}

int sv_env_parse(const struct sv_env_row *r, const char *s, uint64_t *v,
		 char *why, size_t n)
{
	char range[256];

	sv_env_range(r, range, sizeof(range));
	switch (r->type) {
	case SV_ENV_T_BOOL:
	case SV_ENV_T_UINT:
	case SV_ENV_T_PORT:
		if (parse_u64(s, v) && *v >= r->min && *v <= r->max)
			return 0;
		snprintf(why, n, "is not %s%s",
			 r->type == SV_ENV_T_PORT   ? "a port in "
			 : r->type == SV_ENV_T_UINT ? "in "
						    : "",
			 range);
		return -EINVAL;
	case SV_ENV_T_ENUM:
		for (uint64_t i = 0; r->values[i]; i++)
			if (!strcmp(s, r->values[i])) {
				*v = i;
				return 0;
			}
		snprintf(why, n, "is not one of %s", range);
		return -EINVAL;
	case SV_ENV_T_PATH:
		*v = 0; /* the string is the value */
		return 0;
	case SV_ENV_T_SPEC: {
		char w[128];

		*v = 0;
		if (!r->check(s, w, sizeof(w)))
			return 0;
		snprintf(why, n, "is not valid: %s; valid: %s", w, range);
		return -EINVAL;
	}
	}
	return -EINVAL;
}

static void load(void)
{
	for (int i = 0; i < SV_ENV_COUNT; i++) {
		const struct sv_env_row *r = &sv_env_rows[i];
		const char *s = getenv(r->name);
		char why[512], def[64];

		env[i].val = r->def;
		if (!s || !*s)
			continue; /* empty is unset, as it always was */
		/* ours: a later setenv must not pull it from under us */
		env[i].raw = strdup(s);
		if (!sv_env_parse(r, s, &env[i].val, why, sizeof(why)))
			continue;
		env[i].bad = true;
		env[i].val = r->def;
		if (r->policy == SV_ENV_REFUSE)
			refused = true;
		if (sv_env_quiet)
			continue;
		sv_env_default(r, def, sizeof(def));
		if (r->policy == SV_ENV_REFUSE)
			fprintf(stderr,
				"softverbs: %s=%s %s; refusing to open "
				"softverbs0\n",
				r->name, s, why);
		else
			fprintf(stderr,
				"softverbs: %s=%s %s; using default %s%s%s\n",
				r->name, s, why, def, r->unit ? " " : "",
				r->unit ? r->unit : "");
	}
	for (int i = 0; i < SV_ENV_COUNT; i++)
		sv_env_vals[i] = env[i].val;
	/* release: the values before anyone skips the once */
	atomic_store_explicit(&sv_env_ready, true, memory_order_release);
}

void sv_env_load(void)
{
	pthread_once(&env_once, load);
}

const char *sv_env_str(enum sv_env_id id)
{
	pthread_once(&env_once, load);
	return env[id].bad ? NULL : env[id].raw;
}

const char *sv_env_raw(enum sv_env_id id, bool *bad)
{
	pthread_once(&env_once, load);
	if (bad)
		*bad = env[id].bad;
	return env[id].raw;
}

bool sv_env_refused(void)
{
	pthread_once(&env_once, load);
	return refused;
}
