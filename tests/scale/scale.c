// SPDX-License-Identifier: MIT
/*
 * sv_scale: many connected RC QP pairs between two processes (issue 13).
 * The parent and a forked child each open the device, create N QPs spread
 * over CQs of Q QPs each, swap QPNs over a socketpair, bring every QP to
 * RTS and send one message on each; every message must arrive, on the QP
 * it was meant for, exactly once.  It reports what that cost: set-up rate
 * (QPs to RTS per second, and to the first message through), fds and
 * resident memory per connected QP, and tear-down time.  Only the public
 * verbs API.  Exit status 0 only if every message arrived intact.
 * --netns A,B (root): the parent joins network namespace A and the child B
 * (setns before opening the device) and they address each other by GID
 * (the IPv4-mapped GID of each namespace's address), so the QPs connect
 * over softverbs' TCP transport (bench/run --netns).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 64 /* bytes per message: index, side, a pattern */

struct opts {
	int n;	       /* QP pairs */
	int per_cq;    /* QPs on one CQ */
	int timeout_s; /* the whole run */
	bool csv;      /* one line of figures */
	char *ns[2];   /* --netns: parent's and child's namespace, or NULL */
};

struct side {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf; /* n receive slots, then n send slots */
	struct ibv_cq **cq;
	struct ibv_qp **qp;
	int ncq;
	uint32_t *peer_qpn;
	int port_lid;
	int gid_index; /* --netns: our address's GID, else -1 */
	union ibv_gid gid, peer_gid;
};

struct figures {
	double create_s, rts_s, first_msg_s, destroy_s;
	double fds_per_qp, rss_kib_per_qp;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const struct side *s, const char *what, int err)
{
	fprintf(stderr, "sv_scale %s: %s: %s\n", s->name, what,
		err ? strerror(err) : "failed");
	exit(1);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

static long rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void xfer(int fd, void *buf, size_t len, bool out)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t r = out ? write(fd, p, len) : read(fd, p, len);

		if (r <= 0) {
			fprintf(stderr, "sv_scale: the other side went away\n");
			exit(1);
		}
		p += r;
		len -= (size_t)r;
	}
}

/* --netns: the IPv4-mapped GID of this namespace's one address (not
 * 127/8): the peer, in another namespace, reaches it over TCP. */
static void find_gid(struct side *s, int len)
{
	static const uint8_t v4[12] = {0, 0, 0, 0, 0,	 0,
				       0, 0, 0, 0, 0xff, 0xff};

	for (int i = 0; i < len; i++) {
		union ibv_gid g;

		if (ibv_query_gid(s->ctx, 1, i, &g))
			break;
		if (!memcmp(g.raw, v4, sizeof(v4)) && g.raw[12] != 127) {
			s->gid_index = i;
			s->gid = g;
			return;
		}
	}
	die(s, "no IPv4-mapped GID in this namespace", 0);
}

/* --netns: this side's process joins network namespace name. */
static void join_netns(struct side *s, const char *name)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(s, path, errno);
	if (setns(fd, CLONE_NEWNET))
		die(s, "setns", errno);
	close(fd);
}

static void open_side(struct side *s, const struct opts *o)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;
	size_t len = (size_t)o->n * 2 * MSG;

	if (!l || !l[0])
		die(s, "no RDMA device (run under softverbs-run)", 0);
	s->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!s->ctx)
		die(s, "ibv_open_device", errno);
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		die(s, "ibv_alloc_pd", errno);
	s->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!s->buf)
		die(s, "memory", ENOMEM);
	memset(s->buf, 0, len);
	s->mr = ibv_reg_mr(s->pd, s->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr)
		die(s, "ibv_reg_mr", errno);
	if (ibv_query_port(s->ctx, 1, &pa))
		die(s, "ibv_query_port", errno);
	s->port_lid = pa.lid;
	s->gid_index = -1;
	if (o->ns[0])
		find_gid(s, pa.gid_tbl_len);
	s->ncq = (o->n + o->per_cq - 1) / o->per_cq;
	s->cq = calloc(s->ncq, sizeof(*s->cq));
	s->qp = calloc(o->n, sizeof(*s->qp));
	s->peer_qpn = calloc(o->n, sizeof(*s->peer_qpn));
	if (!s->cq || !s->qp || !s->peer_qpn)
		die(s, "memory", ENOMEM);
	for (int i = 0; i < s->ncq; i++) {
		/* a send and a receive completion per QP */
		s->cq[i] = ibv_create_cq(s->ctx, 2 * o->per_cq, NULL, NULL, 0);
		if (!s->cq[i])
			die(s, "ibv_create_cq", errno);
	}
}

static void create_qps(struct side *s, const struct opts *o)
{
	for (int i = 0; i < o->n; i++) {
		struct ibv_cq *cq = s->cq[i / o->per_cq];
		struct ibv_qp_init_attr ia = {
			.send_cq = cq,
			.recv_cq = cq,
			.cap = {.max_send_wr = 1,
				.max_recv_wr = 1,
				.max_send_sge = 1,
				.max_recv_sge = 1},
			.qp_type = IBV_QPT_RC,
		};
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
					.port_num = 1};
		struct ibv_sge sg = {(uintptr_t)(s->buf + (size_t)i * MSG), MSG,
				     s->mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)i,
					 .sg_list = &sg,
					 .num_sge = 1},
				   *bad;
		int err;

		s->qp[i] = ibv_create_qp(s->pd, &ia);
		if (!s->qp[i]) {
			char what[64];

			snprintf(what, sizeof(what), "ibv_create_qp #%d", i);
			die(s, what, errno);
		}
		err = ibv_modify_qp(s->qp[i], &a,
				    IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		if (err)
			die(s, "ibv_modify_qp INIT", err);
		err = ibv_post_recv(s->qp[i], &wr, &bad);
		if (err)
			die(s, "ibv_post_recv", err);
	}
}

static void connect_qps(struct side *s, const struct opts *o)
{
	for (int i = 0; i < o->n; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR,
			.path_mtu = IBV_MTU_1024,
			.dest_qp_num = s->peer_qpn[i],
			.rq_psn = 0,
			.max_dest_rd_atomic = 1,
			.min_rnr_timer = 12,
			.ah_attr = {.dlid = (uint16_t)s->port_lid,
				    .port_num = 1},
		};
		int err;

		if (s->gid_index >= 0) {
			a.ah_attr.dlid = 0;
			a.ah_attr.is_global = 1;
			a.ah_attr.grh.dgid = s->peer_gid;
			a.ah_attr.grh.sgid_index = (uint8_t)s->gid_index;
			a.ah_attr.grh.hop_limit = 1;
		}
		err = ibv_modify_qp(s->qp[i], &a,
				    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					    IBV_QP_MAX_DEST_RD_ATOMIC |
					    IBV_QP_MIN_RNR_TIMER);

		if (err) {
			char what[64];

			snprintf(what, sizeof(what), "ibv_modify_qp RTR #%d",
				 i);
			die(s, what, err);
		}
		a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
					 .timeout = 14,
					 .retry_cnt = 7,
					 .rnr_retry = 7,
					 .sq_psn = 0,
					 .max_rd_atomic = 1};
		err = ibv_modify_qp(s->qp[i], &a,
				    IBV_QP_STATE | IBV_QP_TIMEOUT |
					    IBV_QP_RETRY_CNT |
					    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					    IBV_QP_MAX_QP_RD_ATOMIC);
		if (err)
			die(s, "ibv_modify_qp RTS", err);
	}
}

/* One message on every QP; waits for all sends and receives. */
static void traffic(struct side *s, const struct opts *o, uint32_t tag)
{
	int sends = 0, recvs = 0;
	uint8_t *got = calloc(o->n, 1);

	if (!got)
		die(s, "memory", ENOMEM);
	for (int i = 0; i < o->n; i++) {
		uint8_t *m = s->buf + ((size_t)o->n + i) * MSG;
		struct ibv_sge sg = {(uintptr_t)m, MSG, s->mr->lkey};
		struct ibv_send_wr wr = {.wr_id = (uint64_t)i,
					 .sg_list = &sg,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		uint32_t w[2] = {(uint32_t)i, tag};
		int err;

		memset(m, (int)(i * 7 + tag), MSG);
		memcpy(m, w, sizeof(w));
		err = ibv_post_send(s->qp[i], &wr, &bad);
		if (err)
			die(s, "ibv_post_send", err);
	}
	while (sends < o->n || recvs < o->n) {
		for (int c = 0; c < s->ncq; c++) {
			struct ibv_wc wc[32];
			int k = ibv_poll_cq(s->cq[c], 32, wc);

			if (k < 0)
				die(s, "ibv_poll_cq", EIO);
			for (int j = 0; j < k; j++) {
				uint32_t w[2], i = (uint32_t)wc[j].wr_id;
				const uint8_t *m;

				if (wc[j].status != IBV_WC_SUCCESS) {
					fprintf(stderr,
						"sv_scale %s: QP #%u: %s\n",
						s->name, i,
						ibv_wc_status_str(
							wc[j].status));
					exit(1);
				}
				if (!(wc[j].opcode & IBV_WC_RECV)) {
					sends++;
					continue;
				}
				m = s->buf + (size_t)i * MSG;
				memcpy(w, m, sizeof(w));
				/* the peer's QP i sent it, with the peer's tag
				 */
				if (i >= (uint32_t)o->n || got[i] ||
				    w[0] != i || wc[j].byte_len != MSG ||
				    wc[j].qp_num != s->qp[i]->qp_num) {
					fprintf(stderr,
						"sv_scale %s: receive on QP "
						"#%u: wrong message (index "
						"%u, %s)\n",
						s->name, i, w[0],
						got[i] ? "twice" : "misplaced");
					exit(1);
				}
				for (int b = 8; b < MSG; b++)
					if (m[b] != (uint8_t)(i * 7 + w[1])) {
						fprintf(stderr,
							"sv_scale %s: QP #%u: "
							"byte %d corrupt\n",
							s->name, i, b);
						exit(1);
					}
				got[i] = 1;
				recvs++;
			}
		}
	}
	free(got);
}

static void destroy_side(struct side *s, const struct opts *o)
{
	for (int i = 0; i < o->n; i++)
		if (ibv_destroy_qp(s->qp[i]))
			die(s, "ibv_destroy_qp", errno);
	for (int i = 0; i < s->ncq; i++)
		if (ibv_destroy_cq(s->cq[i]))
			die(s, "ibv_destroy_cq", errno);
	ibv_dereg_mr(s->mr);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
	free(s->buf);
	free(s->cq);
	free(s->qp);
	free(s->peer_qpn);
}

/* One side's run; sock reaches the other side.  Figures of this side. */
static struct figures run(const char *name, int sock, const struct opts *o)
{
	struct side s = {.name = name};
	struct figures f;
	uint32_t *mine;
	double t0, t1;
	int fd0;
	long rss0;
	char go = 1;

	if (o->ns[0])
		join_netns(&s, o->ns[name[0] == 'p' ? 0 : 1]);
	open_side(&s, o);
	fd0 = count_fds();
	rss0 = rss_kib();
	t0 = now_s();
	create_qps(&s, o);
	f.create_s = now_s() - t0;
	mine = calloc(o->n, sizeof(*mine));
	if (!mine)
		die(&s, "memory", ENOMEM);
	for (int i = 0; i < o->n; i++)
		mine[i] = s.qp[i]->qp_num;
	xfer(sock, mine, o->n * sizeof(*mine), true);
	xfer(sock, s.peer_qpn, o->n * sizeof(*mine), false);
	xfer(sock, &s.gid, sizeof(s.gid), true);
	xfer(sock, &s.peer_gid, sizeof(s.peer_gid), false);
	free(mine);
	t0 = now_s();
	connect_qps(&s, o);
	t1 = now_s();
	f.rts_s = t1 - t0;
	/* every QP of both sides at RTR before either sends, as a program
	 * that exchanges its QPNs after its own RTR (ibv_rc_pingpong's
	 * server) makes sure: a QP before RTR takes no packet, and 2,048
	 * QPs' RTR on a loaded host outlasts the sender's retry budget
	 * (7 tries of 67 ms) */
	xfer(sock, &go, 1, true);
	xfer(sock, &go, 1, false);
	traffic(&s, o, name[0] == 'p' ? 1 : 2);
	f.first_msg_s = now_s() - t0;
	f.fds_per_qp = (double)(count_fds() - fd0) / o->n;
	f.rss_kib_per_qp = (double)(rss_kib() - rss0) / o->n;
	/* both sides done before either tears down: no peer vanishes
	 * under a QP that still waits for its ACK */
	xfer(sock, &go, 1, true);
	xfer(sock, &go, 1, false);
	t0 = now_s();
	destroy_side(&s, o);
	f.destroy_s = now_s() - t0;
	return f;
}

static void usage(const char *argv0)
{
	printf("Usage: %s [-n PAIRS] [-q QPS_PER_CQ] [-t SECONDS] [--csv]\n"
	       "       [--netns PARENT_NS,CHILD_NS]\n"
	       "  Connects PAIRS RC QP pairs between two processes (this one\n"
	       "  and a child), QPS_PER_CQ of them on each CQ, sends one\n"
	       "  message on each QP both ways and checks every one.\n"
	       "  -n PAIRS        QP pairs (default 4096)\n"
	       "  -q QPS_PER_CQ   QPs sharing one CQ (default 1024)\n"
	       "  -t SECONDS      deadline for the whole run (default 120)\n"
	       "  --csv           one line: pairs,create_s,rts_s,first_msg_s,"
	       "qps_per_s,fds_per_qp,rss_kib_per_qp,destroy_s\n"
	       "  --netns A,B     parent in network namespace A, child in B\n"
	       "                  (ip netns names; root): QPs by GID, over "
	       "TCP\n",
	       argv0);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"csv", no_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{"netns", required_argument, NULL, 'N'},
		{NULL, 0, NULL, 0}};
	struct opts o = {.n = 4096, .per_cq = 1024, .timeout_s = 120};
	struct rlimit rl;
	struct figures f;
	int sv[2], st, c;
	pid_t pid;

	while ((c = getopt_long(argc, argv, "n:q:t:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			o.n = atoi(optarg);
			break;
		case 'q':
			o.per_cq = atoi(optarg);
			break;
		case 't':
			o.timeout_s = atoi(optarg);
			break;
		case 'c':
			o.csv = true;
			break;
		case 'N':
			o.ns[0] = strdup(optarg);
			o.ns[1] = o.ns[0] ? strchr(o.ns[0], ',') : NULL;
			if (!o.ns[1]) {
				fprintf(stderr, "sv_scale: --netns A,B\n");
				return 2;
			}
			*o.ns[1]++ = 0;
			break;
		case 'h':
			usage(argv[0]);
			return 0;
		default:
			usage(argv[0]);
			return 2;
		}
	}
	if (o.n < 1 || o.per_cq < 1 || o.timeout_s < 1) {
		fprintf(stderr, "sv_scale: -n, -q and -t take positive "
				"numbers\n");
		return 2;
	}
	/* every fd this user may have: each connected QP holds some */
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		perror("sv_scale: socketpair");
		return 1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("sv_scale: fork");
		return 1;
	}
	alarm((unsigned)o.timeout_s); /* a hang is a failure, not a wait */
	if (pid == 0) {
		close(sv[0]);
		run("child", sv[1], &o);
		_exit(0);
	}
	close(sv[1]);
	f = run("parent", sv[0], &o);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "sv_scale: the child failed\n");
		return 1;
	}
	if (o.csv)
		printf("%d,%.6f,%.6f,%.6f,%.0f,%.2f,%.1f,%.6f\n", o.n,
		       f.create_s, f.rts_s, f.first_msg_s, o.n / f.first_msg_s,
		       f.fds_per_qp, f.rss_kib_per_qp, f.destroy_s);
	else
		printf("sv_scale: %d RC QP pairs between two processes, %d "
		       "per CQ: all %d messages each way arrived intact\n"
		       "  create %.3f s; to RTS %.3f s (%.0f QPs/s); first "
		       "message on all %.3f s (%.0f QPs/s)\n"
		       "  per connected QP: %.2f fds, %.1f KiB resident; "
		       "destroy %.3f s\n",
		       o.n, o.per_cq, o.n, f.create_s, f.rts_s, o.n / f.rts_s,
		       f.first_msg_s, o.n / f.first_msg_s, f.fds_per_qp,
		       f.rss_kib_per_qp, f.destroy_s);
	return 0;
}
