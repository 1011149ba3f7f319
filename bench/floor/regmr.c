// SPDX-License-Identifier: MIT
/*
 * regmr: how long ibv_reg_mr and ibv_dereg_mr of one large buffer take
 * (issue 27 item 8), beside the floor of what the same memory costs with
 * no verbs at all: touching every page (first faults) and mlock (what a
 * pin of resident memory costs the kernel; an HCA's pinning and IOMMU
 * mapping are not measurable here).  Linked with the system libibverbs:
 * run it under softverbs-run to measure softverbs.
 *
 *   regmr [-s SIZE] [-n REPEATS] [-a remote|local] [-m touched|untouched]
 *         [-c] [-f] [-T DEADLINE]
 *
 * -f: the floor only (no device).  Every repeat maps SIZE bytes of
 * private anonymous memory afresh (mmap; THP as the system's default),
 * touches it if -m touched (a page-sized stride of stores), registers it,
 * deregisters it, and unmaps it.  -c: first two RC QPs of the context
 * are connected to each other, a peer on this host (softverbs moves
 * registered memory onto its shared arena only once a peer on this host
 * could map it: -c measures that move, without -c registration only
 * records the MR).  One line per repeat:
 *   size=N mode=touched access=remote reg_s=X dereg_s=Y reg_GBps=...
 * then one "median" line; '#' lines are comments for people.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPEATS 64

struct opts {
	size_t size;
	int repeats;
	int access;
	const char *access_name;
	int touched;
	int connected;
	int floor_only;
	unsigned int deadline_s;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "regmr: %s: %s\n", what, strerror(errno));
	exit(1);
}

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	else if (*end == 'G' || *end == 'g')
		v <<= 30, end++;
	if (*end || !v) {
		fprintf(stderr, "regmr: bad size '%s' (e.g. 512M)\n", s);
		exit(2);
	}
	return (size_t)v;
}

static void parse(int argc, char **argv, struct opts *o)
{
	int c;

	*o = (struct opts){.size = 512ul << 20,
			   .repeats = 5,
			   .access = IBV_ACCESS_LOCAL_WRITE |
				     IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_READ,
			   .access_name = "remote",
			   .touched = 1,
			   .deadline_s = 300};
	while ((c = getopt(argc, argv, "s:n:a:m:cfT:")) != -1) {
		switch (c) {
		case 's':
			o->size = parse_size(optarg);
			break;
		case 'n':
			o->repeats = atoi(optarg);
			if (o->repeats < 1 || o->repeats > MAX_REPEATS) {
				fprintf(stderr, "regmr: -n 1..%d\n",
					MAX_REPEATS);
				exit(2);
			}
			break;
		case 'a':
			if (!strcmp(optarg, "local")) {
				o->access = IBV_ACCESS_LOCAL_WRITE;
			} else if (strcmp(optarg, "remote")) {
				fprintf(stderr, "regmr: -a remote|local\n");
				exit(2);
			}
			o->access_name = optarg;
			break;
		case 'm':
			o->touched = !strcmp(optarg, "touched");
			if (!o->touched && strcmp(optarg, "untouched")) {
				fprintf(stderr,
					"regmr: -m touched|untouched\n");
				exit(2);
			}
			break;
		case 'c':
			o->connected = 1;
			break;
		case 'f':
			o->floor_only = 1;
			break;
		case 'T':
			o->deadline_s = (unsigned int)atoi(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: regmr [-s SIZE] [-n REPEATS] "
				"[-a remote|local] [-m touched|untouched] "
				"[-c] [-f] [-T DEADLINE]\n");
			exit(2);
		}
	}
}

static void touch(uint8_t *p, size_t len, size_t pg)
{
	for (size_t i = 0; i < len; i += pg)
		p[i] = (uint8_t)(i / pg) | 1;
}

/* Are the bytes touch() wrote still there?  Every one, outside the timed
 * part: any SIZE, a page or less too. */
static int touched_intact(const uint8_t *p, size_t len, size_t pg)
{
	for (size_t i = 0; i < len; i += pg)
		if (p[i] != ((uint8_t)(i / pg) | 1))
			return 0;
	return 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The floor: first touch of fresh pages, and mlock+munlock of them. */
static void run_floor(const struct opts *o, double *t1, double *t2)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *p = mmap(NULL, o->size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double a;

	if (p == MAP_FAILED)
		die("mmap");
	a = now_s();
	touch(p, o->size, pg);
	*t1 = now_s() - a;
	a = now_s();
	if (mlock(p, o->size))
		*t2 = -1; /* RLIMIT_MEMLOCK: reported as n/a */
	else
		*t2 = now_s() - a;
	munlock(p, o->size);
	munmap(p, o->size);
}

static void run_verbs(const struct opts *o, struct ibv_pd *pd, double *reg,
		      double *dereg)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *p = mmap(NULL, o->size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;
	double a;

	if (p == MAP_FAILED)
		die("mmap");
	if (o->touched)
		touch(p, o->size, pg);
	a = now_s();
	mr = ibv_reg_mr(pd, p, o->size, o->access);
	*reg = now_s() - a;
	if (!mr)
		die("ibv_reg_mr");
	/* the bytes are still the program's */
	if (o->touched && !touched_intact(p, o->size, pg)) {
		fprintf(stderr, "regmr: registration changed the bytes\n");
		exit(1);
	}
	a = now_s();
	if (ibv_dereg_mr(mr)) {
		errno = EIO;
		die("ibv_dereg_mr");
	}
	*dereg = now_s() - a;
	if (o->touched && !touched_intact(p, o->size, pg)) {
		fprintf(stderr, "regmr: deregistration changed the bytes\n");
		exit(1);
	}
	munmap(p, o->size);
}

/* RESET -> INIT -> RTR -> RTS of qp toward dest on this port. */
static void to_rts(struct ibv_qp *qp, uint32_t dest, uint16_t lid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};

	errno = ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS);
	if (errno)
		die("ibv_modify_qp INIT");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = dest,
				 .max_dest_rd_atomic = 1,
				 .min_rnr_timer = 12,
				 .ah_attr = {.dlid = lid, .port_num = 1}};
	errno = ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER);
	if (errno)
		die("ibv_modify_qp RTR");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
				 .timeout = 14,
				 .retry_cnt = 7,
				 .rnr_retry = 7,
				 .max_rd_atomic = 1};
	errno = ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				      IBV_QP_MAX_QP_RD_ATOMIC);
	if (errno)
		die("ibv_modify_qp RTS");
}

/* -c: two RC QPs of ctx connected to each other (kept to the end). */
static void connect_pair(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {.qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 1,
					      .max_recv_wr = 1,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};
	struct ibv_port_attr pa;
	struct ibv_qp *q[2];

	if (!cq || ibv_query_port(ctx, 1, &pa))
		die("ibv_create_cq");
	ia.send_cq = ia.recv_cq = cq;
	for (int i = 0; i < 2; i++)
		if (!(q[i] = ibv_create_qp(pd, &ia)))
			die("ibv_create_qp");
	for (int i = 0; i < 2; i++)
		to_rts(q[i], q[1 - i]->qp_num, pa.lid);
}

static struct ibv_pd *open_pd(struct ibv_context **ctx)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_pd *pd;

	if (!list || !n) {
		errno = ENODEV;
		die("ibv_get_device_list (run under softverbs-run)");
	}
	*ctx = ibv_open_device(list[0]);
	if (!*ctx)
		die("ibv_open_device");
	ibv_free_device_list(list);
	pd = ibv_alloc_pd(*ctx);
	if (!pd)
		die("ibv_alloc_pd");
	return pd;
}

int main(int argc, char **argv)
{
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	double r[MAX_REPEATS], d[MAX_REPEATS];
	struct opts o;
	const char *k1 = "reg_s", *k2 = "dereg_s";

	parse(argc, argv, &o);
	signal(SIGALRM, SIG_DFL);
	alarm(o.deadline_s);
	if (o.floor_only) {
		k1 = "touch_s";
		k2 = "mlock_s";
		printf("# floor: first touch of %zu fresh bytes, then "
		       "mlock of them\n",
		       o.size);
	} else {
		pd = open_pd(&ctx);
		if (o.connected)
			connect_pair(ctx, pd);
		printf("# ibv_reg_mr/ibv_dereg_mr of %zu bytes, %s, %s "
		       "access, on %s%s\n",
		       o.size, o.touched ? "touched" : "untouched",
		       o.access_name, ibv_get_device_name(ctx->device),
		       o.connected ? ", a QP pair of it connected" : "");
	}
	for (int i = 0; i < o.repeats; i++) {
		if (o.floor_only)
			run_floor(&o, &r[i], &d[i]);
		else
			run_verbs(&o, pd, &r[i], &d[i]);
		printf("size=%zu mode=%s access=%s %s=%.6f %s=%.6f "
		       "reg_GBps=%.2f dereg_GBps=%.2f\n",
		       o.size, o.touched ? "touched" : "untouched",
		       o.floor_only ? "none" : o.access_name, k1, r[i], k2,
		       d[i], o.size / r[i] / 1e9, o.size / d[i] / 1e9);
		fflush(stdout);
	}
	printf("median size=%zu %s=%.6f %s=%.6f\n", o.size, k1,
	       median(r, o.repeats), k2, median(d, o.repeats));
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	return 0;
}
