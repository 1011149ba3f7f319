// SPDX-License-Identifier: MIT
/*
 * UD multicast among the processes of one host (ibv_attach_mcast(3),
 * provider/verbs/mcast.c): attach/detach argument errors with errno as the
 * kernel gives them, one send reaching every member process once with
 * its GRH, a detached member and a non-member receiving nothing, the
 * sender's own QP receiving only when attached, a dead member's entry
 * (and hostile ones) in the registry harmless, and the device's limits.
 * Each test has its own registry directory (SOFTVERBS_MCAST_DIR).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pair.h"
#include "ud_end.h"

#define QKEY 0x0badcafeu
#define MLID 0xc001
#define GRH  40
#define SLOT 256
#define MSG  100
/* the device's limits (ibv_query_device; mcast_limits_enforced) */
#define MAX_GRP	    256
#define MAX_PER_GRP 56
#define MAX_TOTAL   1024

static void mc_open(struct ud_end *u)
{
	struct ud_end_opts o = ud_end_opts(8, 64 * SLOT, QKEY);

	o.cqe = 256;
	o.two_cqs = true;
	ud_end_open(u, &o);
}

static struct ibv_qp *mc_qp(struct ud_end *u, enum ibv_qp_type t)
{
	return ud_end_qp(u, t, 0, 0);
}

static void mc_ready(struct ibv_qp *qp)
{
	ud_end_ready(qp, QKEY);
}

static void post_recv(struct ud_end *u, struct ibv_qp *qp, uint64_t slot)
{
	ASSERT_OK(ud_end_recv(u, qp, slot, slot * SLOT, SLOT));
}

/* An AH for group gid (global, as a multicast needs). */
static struct ibv_ah *group_ah(struct ud_end *u, const union ibv_gid *gid)
{
	struct ibv_ah_attr aa = {.is_global = 1, .dlid = MLID, .port_num = 1};
	struct ibv_ah *ah;

	aa.grh.dgid = *gid;
	aa.grh.hop_limit = 1;
	ah = ibv_create_ah(u->e.pd, &aa);
	ASSERT_NOT_NULL(ah);
	return ah;
}

/* Sends MSG bytes (pattern seed) from slot 63 to the group. */
static void send_group(struct ud_end *u, struct ibv_qp *qp, struct ibv_ah *ah,
		       uint32_t seed)
{
	struct ibv_wc wc;

	sv_fill(u->buf + 63 * SLOT, MSG, seed);
	ASSERT_OK(ud_end_send(u, qp, 77, IBV_WR_SEND, 63 * SLOT, MSG, ah,
			      0xffffff, QKEY));
	WAIT_WC(u->scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(77, wc.wr_id);
	ASSERT_EQ(IBV_WC_SEND, wc.opcode);
}

/* The receive of one multicast: GRH with dgid = the group and sgid = the
 * host's GID 0, src_qp the sender, the payload intact. */
static void check_recv(struct ud_end *u, const struct ibv_wc *wc,
		       const union ibv_gid *gid, uint32_t src, uint32_t seed)
{
	const uint8_t *b = u->buf + wc->wr_id * SLOT;
	union ibv_gid me;
	struct ibv_grh g;

	ASSERT_EQ(IBV_WC_SUCCESS, wc->status);
	ASSERT_EQ(IBV_WC_RECV, wc->opcode);
	ASSERT_TRUE(wc->wc_flags & IBV_WC_GRH);
	ASSERT_EQ(src, wc->src_qp);
	ASSERT_EQ(GRH + MSG, wc->byte_len);
	memcpy(&g, b, sizeof(g));
	ASSERT_OK(memcmp(g.dgid.raw, gid->raw, 16));
	ASSERT_OK(ibv_query_gid(u->e.ctx, 1, 0, &me));
	ASSERT_OK(memcmp(g.sgid.raw, me.raw, 16));
	ASSERT_EQ(0x1b, g.next_hdr);
	ASSERT_EQ(-1, sv_check(b + GRH, MSG, seed));
}

/* A fresh registry directory for this test (inherited by helpers). */
static char *mc_dir(void)
{
	static char d[] = "/tmp/sv-mcast-XXXXXX";

	ASSERT_NOT_NULL(mkdtemp(d));
	ASSERT_OK(setenv("SOFTVERBS_MCAST_DIR", d, 1));
	return d;
}

/* Entries in the group directories of the registry (all groups). */
static int registry_entries(const char *dir)
{
	DIR *b = opendir(dir);
	struct dirent *g;
	int n = 0;

	ASSERT_NOT_NULL(b);
	while ((g = readdir(b))) {
		char p[512];
		struct dirent *e;
		DIR *d;

		if (g->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, g->d_name);
		d = opendir(p);
		if (!d)
			continue;
		while ((e = readdir(d)))
			n += e->d_name[0] != '.';
		closedir(d);
	}
	closedir(b);
	return n;
}

/* The only group directory's path (after one attach). */
static void group_path(const char *dir, char *out, size_t n)
{
	DIR *b = opendir(dir);
	struct dirent *g;

	ASSERT_NOT_NULL(b);
	out[0] = 0;
	while ((g = readdir(b)))
		if (g->d_name[0] != '.')
			snprintf(out, n, "%s/%s", dir, g->d_name);
	closedir(b);
	ASSERT_TRUE(out[0]);
}

static void touch(const char *dir, const char *name)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	ASSERT_GE(fd, 0);
	close(fd);
}

static void rm_rf(const char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ASSERT_OK(system(cmd));
}

static union ibv_gid mc_gid(uint32_t tag)
{
	union ibv_gid g = {.raw = {0xff, 0x12, 0x40, 0x1b}};

	tag ^= (uint32_t)getpid() << 8;
	memcpy(&g.raw[12], &tag, 4);
	return g;
}

/* A pid that no process has: a child that has exited and been reaped. */
static pid_t dead_pid(void)
{
	pid_t p = fork();

	if (p == 0)
		_exit(0);
	ASSERT_GE(p, 1);
	ASSERT_EQ(p, waitpid(p, NULL, 0));
	return p;
}

/* The kernel's and uverbs' answers: EINVAL for a non-multicast GID, a
 * QP that is not UD, a LID outside 0xc000-0xfffe; attaching twice
 * succeeds once; detaching what is not attached is EINVAL; the registry
 * entry comes and goes with the attachment, and with the QP. */
SV_TEST(mcast_attach_detach_errors)
{
	char *dir = mc_dir();
	union ibv_gid g = mc_gid(1), uni;
	struct ibv_qp *rc, *uc, *ud2;
	struct ud_end u;

	mc_open(&u);
	ASSERT_OK(ibv_query_gid(u.e.ctx, 1, 0, &uni));
	ASSERT_EQ(EINVAL, ibv_attach_mcast(u.qp, &uni, MLID));
	ASSERT_EQ(EINVAL, ibv_attach_mcast(u.qp, NULL, MLID));
	ASSERT_EQ(EINVAL, ibv_attach_mcast(u.qp, &g, 0x0001));
	ASSERT_EQ(EINVAL, ibv_attach_mcast(u.qp, &g, 0xbfff));
	ASSERT_EQ(EINVAL, ibv_attach_mcast(u.qp, &g, 0xffff));
	rc = mc_qp(&u, IBV_QPT_RC);
	uc = mc_qp(&u, IBV_QPT_UC);
	ASSERT_EQ(EINVAL, ibv_attach_mcast(rc, &g, MLID));
	ASSERT_EQ(EINVAL, ibv_attach_mcast(uc, &g, MLID));
	ASSERT_EQ(EINVAL, ibv_detach_mcast(rc, &g, MLID));
	ASSERT_EQ(0, registry_entries(dir));

	ASSERT_EQ(EINVAL, ibv_detach_mcast(u.qp, &g, MLID)); /* never */
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	ASSERT_EQ(1, registry_entries(dir));
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID)); /* again: a no-op */
	ASSERT_EQ(1, registry_entries(dir));
	ASSERT_EQ(EINVAL, ibv_detach_mcast(u.qp, &g, MLID + 1));
	ASSERT_OK(ibv_detach_mcast(u.qp, &g, MLID));
	ASSERT_EQ(0, registry_entries(dir));
	ASSERT_EQ(EINVAL, ibv_detach_mcast(u.qp, &g, MLID)); /* once only */

	/* destroying an attached QP detaches it */
	ud2 = mc_qp(&u, IBV_QPT_UD);
	ASSERT_OK(ibv_attach_mcast(ud2, &g, MLID));
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	ASSERT_EQ(2, registry_entries(dir));
	ASSERT_OK(ibv_destroy_qp(ud2));
	ASSERT_EQ(1, registry_entries(dir));
	ASSERT_OK(ibv_destroy_qp(rc));
	ASSERT_OK(ibv_destroy_qp(uc));
	ud_end_close(&u);
	ASSERT_EQ(0, registry_entries(dir));
	rm_rf(dir);
}

/*
 * A group member in its own process: attaches (mode "detached": then
 * detaches; "die": waits to be killed), posts receives, writes its QPN
 * to the ready pipe, waits for the test's go byte, then expects exactly
 * one multicast from QPN src (or none).
 * args: gid (32 hex), src qpn (hex), ready fd, go fd, mode, seed.
 */
SV_HELPER(mc_member)
{
	union ibv_gid g;
	uint32_t src = (uint32_t)strtoul(argv[1], NULL, 16), qpn;
	int ready = atoi(argv[2]), go = atoi(argv[3]);
	const char *mode = argv[4];
	uint32_t seed = (uint32_t)atoi(argv[5]);
	struct ud_end u;
	struct ibv_wc wc;
	char c;

	(void)argc;
	for (int i = 0; i < 16; i++)
		sscanf(argv[0] + 2 * i, "%2hhx", &g.raw[i]);
	mc_open(&u);
	for (uint64_t s = 0; s < 4; s++)
		post_recv(&u, u.qp, s);
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	if (!strcmp(mode, "detached"))
		ASSERT_OK(ibv_detach_mcast(u.qp, &g, MLID));
	qpn = u.qp->qp_num;
	ASSERT_EQ(4, write(ready, &qpn, 4));
	if (!strcmp(mode, "die"))
		for (;;)
			pause();
	ASSERT_EQ(1, read(go, &c, 1));
	if (!strcmp(mode, "recv")) {
		WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
		check_recv(&u, &wc, &g, src, seed);
	}
	/* the send completed before go: anything more is already queued */
	NO_WC(u.cq, 100);
	ud_end_close(&u);
	return 0;
}

/* Reads one QPN from the ready pipe, failing after 20 s. */
static uint32_t read_ready(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	uint32_t qpn;

	ASSERT_EQ(1, poll(&p, 1, 20000));
	ASSERT_EQ(4, read(fd, &qpn, 4));
	return qpn;
}

#define NMEMBERS 5 /* 3 receive, 1 detached, 1 killed */

/* One send reaches each of 3 member processes once, with its GRH and the
 * sender's QPN; a process that detached, a dead member, and the sender
 * (not attached) receive nothing; the send completes. */
SV_TEST(mcast_three_processes_one_send_each)
{
	static const char *const modes[NMEMBERS] = {"recv", "recv", "recv",
						    "detached", "die"};
	char *dir = mc_dir();
	union ibv_gid g = mc_gid(2);
	struct sv_proc p[NMEMBERS];
	char gid[33], src[16], rfd[8], gfd[8], seed[8] = "4242";
	int ready[2], go[2];
	uint32_t qpn[NMEMBERS];
	struct ibv_ah *ah;
	struct ud_end s;

	mc_open(&s);
	post_recv(&s, s.qp, 0);
	ah = group_ah(&s, &g);
	for (int i = 0; i < 16; i++)
		snprintf(gid + 2 * i, 3, "%02x", g.raw[i]);
	snprintf(src, sizeof(src), "%x", s.qp->qp_num);
	ASSERT_OK(pipe(ready));
	ASSERT_OK(pipe(go));
	snprintf(rfd, sizeof(rfd), "%d", ready[1]);
	snprintf(gfd, sizeof(gfd), "%d", go[0]);
	for (int i = 0; i < NMEMBERS; i++) {
		sv_proc_start_helper(&p[i], "mc_member",
				     (char *const[]){gid, src, rfd, gfd,
						     (char *)modes[i], seed,
						     NULL},
				     NULL);
		qpn[i] = read_ready(ready[0]); /* one at a time: i's QPN */
	}
	ASSERT_EQ(4, registry_entries(dir));
	sv_proc_kill(&p[NMEMBERS - 1]); /* its entry stays behind */
	ASSERT_EQ(4, registry_entries(dir));

	send_group(&s, s.qp, ah, 4242);
	for (int i = 0; i < NMEMBERS - 1; i++)
		ASSERT_EQ(1, write(go[1], "g", 1));
	for (int i = 0; i < NMEMBERS - 1; i++) {
		sv_proc_wait(&p[i], 20000);
		if (p[i].status)
			sv_test_fail(__FILE__, __LINE__,
				     "member %d (%s, qp %06x) failed:\n%s", i,
				     modes[i], qpn[i], p[i].err);
		sv_proc_free(&p[i]);
	}
	sv_proc_free(&p[NMEMBERS - 1]);
	NO_WC(s.cq, 50); /* not attached: the sender's QP got nothing */
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	rm_rf(dir);
}

/* Loopback, decided as IB does it (the switch replicates to every
 * member port, the sender's too; IPoIB drops its own copies): the
 * sender's QP receives its own multicast only while attached.  Two QPs
 * of one process in the group each get it once; a third QP of the
 * process, not attached, nothing; a wrong qkey reaches no one. */
SV_TEST(mcast_loopback_only_when_attached)
{
	char *dir = mc_dir();
	union ibv_gid g = mc_gid(3);
	struct ibv_qp *b, *c;
	struct ibv_ah *ah;
	struct ibv_wc wc[4];
	struct ud_end u;
	int got = 0;
	uint64_t end;

	mc_open(&u);
	b = mc_qp(&u, IBV_QPT_UD);
	c = mc_qp(&u, IBV_QPT_UD);
	mc_ready(b);
	mc_ready(c);
	post_recv(&u, u.qp, 0);
	post_recv(&u, u.qp, 1);
	post_recv(&u, b, 2);
	post_recv(&u, b, 3);
	post_recv(&u, c, 4);
	ah = group_ah(&u, &g);

	/* not attached: its own send does not come back */
	ASSERT_OK(ibv_attach_mcast(b, &g, MLID));
	send_group(&u, u.qp, ah, 1);
	WAIT_WC(u.cq, &wc[0], SV_WC_TIMEOUT_MS);
	ASSERT_EQ(b->qp_num, wc[0].qp_num);
	check_recv(&u, &wc[0], &g, u.qp->qp_num, 1);
	NO_WC(u.cq, 50);

	/* attached: it does, once, and so does b */
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	send_group(&u, u.qp, ah, 2);
	end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	while (got < 2 && sv_now_ms() < end) {
		int n = ibv_poll_cq(u.cq, 2 - got, &wc[got]);

		ASSERT_GE(n, 0);
		got += n;
	}
	ASSERT_EQ(2, got);
	ASSERT_NE(wc[0].qp_num, wc[1].qp_num);
	for (int i = 0; i < 2; i++) {
		ASSERT_TRUE(wc[i].qp_num == u.qp->qp_num ||
			    wc[i].qp_num == b->qp_num);
		check_recv(&u, &wc[i], &g, u.qp->qp_num, 2);
	}
	NO_WC(u.cq, 50); /* c, not attached, got nothing */
	ASSERT_OK(ibv_destroy_ah(ah));
	ASSERT_OK(ibv_destroy_qp(b));
	ASSERT_OK(ibv_destroy_qp(c));
	ud_end_close(&u);
	rm_rf(dir);
}

/* The registry is a hint: entries of dead processes, one naming a live
 * QP that is not attached, and malformed ones cost nothing.  The send
 * completes, the member receives once, the unattached QP nothing; and a
 * group full of dead members' entries still takes new members. */
SV_TEST(mcast_stale_and_hostile_entries_harmless)
{
	char *dir = mc_dir();
	union ibv_gid g = mc_gid(4);
	char gp[512], name[64];
	struct ibv_qp *b, *c, *q[MAX_PER_GRP];
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct ud_end u;
	pid_t dead = dead_pid();

	mc_open(&u);
	b = mc_qp(&u, IBV_QPT_UD);
	c = mc_qp(&u, IBV_QPT_UD);
	mc_ready(b);
	mc_ready(c);
	post_recv(&u, b, 0);
	post_recv(&u, c, 1);
	ASSERT_OK(ibv_attach_mcast(b, &g, MLID));
	group_path(dir, gp, sizeof(gp));
	/* c is alive but not a member; 0xabcdef belongs to nobody */
	snprintf(name, sizeof(name), "%06x.%d", c->qp_num, (int)dead);
	touch(gp, name);
	snprintf(name, sizeof(name), "abcdef.%d", (int)dead);
	touch(gp, name);
	/* b listed twice (a dead process had its QPN): still one copy */
	snprintf(name, sizeof(name), "%06x.%d", b->qp_num, (int)dead);
	touch(gp, name);
	touch(gp, "garbage");
	touch(gp, "ABCDEF.1");
	touch(gp, "000001.1");
	touch(gp, "ffffff.1");
	touch(gp, "123456.");
	touch(gp, "123456.-5");
	ah = group_ah(&u, &g);
	send_group(&u, u.qp, ah, 9);
	WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(b->qp_num, wc.qp_num);
	check_recv(&u, &wc, &g, u.qp->qp_num, 9);
	NO_WC(u.cq, 50);

	/* fill the group with dead members' entries: attaching finds it
	 * full, clears the dead ones and goes on */
	for (int i = 0; i < MAX_PER_GRP; i++) {
		snprintf(name, sizeof(name), "%06x.%d", 0x100000 + i,
			 (int)dead);
		touch(gp, name);
	}
	/* live: b, and the entries naming b's and c's QPNs (bound: kept) */
	for (int i = 0; i < MAX_PER_GRP - 3; i++) {
		q[i] = mc_qp(&u, IBV_QPT_UD);
		ASSERT_OK(ibv_attach_mcast(q[i], &g, MLID));
	}
	q[MAX_PER_GRP - 3] = mc_qp(&u, IBV_QPT_UD);
	ASSERT_EQ(ENOMEM, ibv_attach_mcast(q[MAX_PER_GRP - 3], &g, MLID));
	for (int i = 0; i <= MAX_PER_GRP - 3; i++)
		ASSERT_OK(ibv_destroy_qp(q[i]));
	ASSERT_OK(ibv_destroy_ah(ah));
	ASSERT_OK(ibv_destroy_qp(b));
	ASSERT_OK(ibv_destroy_qp(c));
	ud_end_close(&u);
	rm_rf(dir);
}

/* The limits ibv_query_device reports are the ones attach enforces
 * (ENOMEM, as rxe): groups per device context, QPs per group on the
 * host, attachments per device context. */
SV_TEST(mcast_limits_enforced)
{
	char *dir = mc_dir();
	struct ibv_device_attr da;
	struct ibv_qp *q[MAX_PER_GRP + 1];
	struct ud_end u, v;
	union ibv_gid g;
	uint32_t per;

	mc_open(&u);
	ASSERT_OK(ibv_query_device(u.e.ctx, &da));
	ASSERT_EQ(MAX_GRP, da.max_mcast_grp);
	ASSERT_EQ(MAX_PER_GRP, da.max_mcast_qp_attach);
	ASSERT_EQ(MAX_TOTAL, da.max_total_mcast_qp_attach);

	/* groups per context */
	for (int i = 0; i < da.max_mcast_grp; i++) {
		g = mc_gid(0x1000 + i);
		ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	}
	g = mc_gid(0x1000 + da.max_mcast_grp);
	ASSERT_EQ(ENOMEM, ibv_attach_mcast(u.qp, &g, MLID));
	/* another context of the process has its own count */
	mc_open(&v);
	ASSERT_OK(ibv_attach_mcast(v.qp, &g, MLID));
	ASSERT_OK(ibv_detach_mcast(v.qp, &g, MLID));
	g = mc_gid(0x1000);
	ASSERT_OK(ibv_detach_mcast(u.qp, &g, MLID));
	g = mc_gid(0x1000 + da.max_mcast_grp);
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	ASSERT_OK(ibv_destroy_qp(u.qp)); /* leaves all its groups */
	u.qp = mc_qp(&u, IBV_QPT_UD);
	ASSERT_EQ(0, registry_entries(dir));

	/* QPs per group, counted on the host: v's QP is the last one */
	g = mc_gid(0x2000);
	for (int i = 0; i < da.max_mcast_qp_attach; i++) {
		q[i] = mc_qp(&u, IBV_QPT_UD);
		if (i < da.max_mcast_qp_attach - 1)
			ASSERT_OK(ibv_attach_mcast(q[i], &g, MLID));
	}
	ASSERT_OK(ibv_attach_mcast(v.qp, &g, MLID));
	ASSERT_EQ(ENOMEM,
		  ibv_attach_mcast(q[da.max_mcast_qp_attach - 1], &g, MLID));
	ASSERT_OK(ibv_detach_mcast(v.qp, &g, MLID));
	ASSERT_OK(ibv_attach_mcast(q[da.max_mcast_qp_attach - 1], &g, MLID));
	for (int i = 0; i < da.max_mcast_qp_attach; i++)
		ASSERT_OK(ibv_destroy_qp(q[i]));
	ASSERT_EQ(0, registry_entries(dir));

	/* attachments per context: 8 QPs in total/8 groups each */
	per = (uint32_t)da.max_total_mcast_qp_attach / 8;
	ASSERT_TRUE(per <= (uint32_t)da.max_mcast_grp);
	for (int i = 0; i < 8; i++) {
		q[i] = mc_qp(&u, IBV_QPT_UD);
		for (uint32_t k = 0; k < per; k++) {
			g = mc_gid(0x3000 + k);
			ASSERT_OK(ibv_attach_mcast(q[i], &g, MLID));
		}
	}
	g = mc_gid(0x3000);
	ASSERT_EQ(ENOMEM, ibv_attach_mcast(u.qp, &g, MLID));
	ASSERT_OK(ibv_detach_mcast(q[0], &g, MLID));
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	for (int i = 0; i < 8; i++)
		ASSERT_OK(ibv_destroy_qp(q[i]));
	ud_end_close(&v);
	ud_end_close(&u);
	ASSERT_EQ(0, registry_entries(dir));
	rm_rf(dir);
}

/* A registry directory that is not the user's own (another user could
 * have made it first, or left it writable): attach refuses it. */
SV_TEST(mcast_registry_not_ours_refused)
{
	char *dir = mc_dir();
	union ibv_gid g = mc_gid(5);
	struct ud_end u;

	ASSERT_OK(chmod(dir, 0777));
	mc_open(&u);
	ASSERT_EQ(EACCES, ibv_attach_mcast(u.qp, &g, MLID));
	ASSERT_OK(chmod(dir, 0700));
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	ud_end_close(&u);
	rm_rf(dir);
}

/* IBV_QP_CREATE_BLOCK_SELF_MCAST_LB: an attached sender created with it
 * does not receive its own multicast; the other member does.  Other
 * create flags are not supported. */
SV_TEST(mcast_block_self_loopback_flag)
{
	char *dir = mc_dir();
	union ibv_gid g = mc_gid(6);
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_UD,
		.comp_mask =
			IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
		.create_flags = IBV_QP_CREATE_SCATTER_FCS,
		.cap = {.max_send_wr = 8,
			.max_recv_wr = 8,
			.max_send_sge = 1,
			.max_recv_sge = 1}};
	struct ibv_qp *s, *b;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct ud_end u;

	mc_open(&u);
	ia.pd = u.e.pd;
	ia.send_cq = u.scq;
	ia.recv_cq = u.cq;
	errno = 0;
	ASSERT_NULL(ibv_create_qp_ex(u.e.ctx, &ia));
	ASSERT_EQ(EOPNOTSUPP, errno);
	ia.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
	s = ibv_create_qp_ex(u.e.ctx, &ia);
	ASSERT_NOT_NULL(s);
	mc_ready(s);
	b = u.qp;
	post_recv(&u, s, 0);
	post_recv(&u, b, 1);
	ASSERT_OK(ibv_attach_mcast(s, &g, MLID));
	ASSERT_OK(ibv_attach_mcast(b, &g, MLID));
	ah = group_ah(&u, &g);
	send_group(&u, s, ah, 11);
	WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(b->qp_num, wc.qp_num);
	check_recv(&u, &wc, &g, s->qp_num, 11);
	NO_WC(u.cq, 50);
	ASSERT_OK(ibv_destroy_ah(ah));
	ASSERT_OK(ibv_destroy_qp(s));
	ud_end_close(&u);
	rm_rf(dir);
}
