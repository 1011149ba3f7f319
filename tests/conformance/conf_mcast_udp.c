// SPDX-License-Identifier: MIT
/*
 * Multicast between hosts (provider/verbs/mcast.c, ud/): a group whose MGID is
 * an IPv4-mapped multicast address is that IPv4 group, joined by the
 * context's UDP listener.  Run with SOFTVERBS_TRANSPORT=tcp (CMake sets
 * it), so on this one host the groups live on lo and every datagram takes
 * the UDP path: two processes exchange multicast through it, a QP that is
 * not attached never receives, forged datagrams sent to the group are
 * dropped, detach (and QP destroy, and context close) stop delivery and
 * leave the IP group, and a sender's own copy comes back once (or never,
 * with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB).  Each test has its own UDP
 * port (SOFTVERBS_TCP_PORT) and registry directory.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pair.h"
#include "ud_end.h"
#include "wire.h"

#define QKEY 0x0badcafeu
#define MLID 0xc001
#define GRH  40
#define SLOT 256
#define MSG  100

/* The transport this binary is about: forced in CMake, checked here so a
 * run without it fails loudly instead of testing shared memory. */
static void mu_env(void)
{
	const char *t = getenv("SOFTVERBS_TRANSPORT");
	static char dir[] = "/tmp/sv-mcastnet-XXXXXX";
	char port[16];

	if (!t || strcmp(t, "tcp"))
		sv_test_fail(__FILE__, __LINE__,
			     "needs SOFTVERBS_TRANSPORT=tcp (CMake sets it)");
	snprintf(port, sizeof(port), "%d", sv_free_port());
	ASSERT_OK(setenv("SOFTVERBS_TCP_PORT", port, 1));
	ASSERT_NOT_NULL(mkdtemp(dir));
	ASSERT_OK(setenv("SOFTVERBS_MCAST_DIR", dir, 1));
}

static void mu_rm_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'",
		 getenv("SOFTVERBS_MCAST_DIR"));
	ASSERT_OK(system(cmd));
}

/* A UD QP of u, ready (flags: its create_flags). */
static struct ibv_qp *mu_qp(struct ud_end *u, uint32_t flags)
{
	struct ibv_qp *qp = ud_end_qp(u, IBV_QPT_UD, 0, flags);

	ud_end_ready(qp, QKEY);
	return qp;
}

static void mu_open(struct ud_end *u)
{
	struct ud_end_opts o = ud_end_opts(8, 64 * SLOT, QKEY);

	o.recv_wr = 16;
	o.cqe = 256;
	o.two_cqs = true;
	ud_end_open(u, &o);
}

static void mu_recv(struct ud_end *u, struct ibv_qp *qp, uint64_t slot)
{
	ASSERT_OK(ud_end_recv(u, qp, slot, slot * SLOT, SLOT));
}

/* ::ffff:239.x.y.z, unique to this process and tag. */
static union ibv_gid mu_gid(uint8_t tag)
{
	union ibv_gid g = {.raw = {[10] = 0xff, [11] = 0xff, [12] = 239}};
	uint32_t p = (uint32_t)getpid();

	g.raw[13] = (uint8_t)(p >> 8);
	g.raw[14] = (uint8_t)p;
	g.raw[15] = tag;
	return g;
}

static struct ibv_ah *mu_ah(struct ud_end *u, const union ibv_gid *g)
{
	struct ibv_ah_attr aa = {.is_global = 1, .dlid = MLID, .port_num = 1};
	struct ibv_ah *ah;

	aa.grh.dgid = *g;
	aa.grh.hop_limit = 1;
	ah = ibv_create_ah(u->e.pd, &aa);
	ASSERT_NOT_NULL(ah);
	return ah;
}

static void mu_send(struct ud_end *u, struct ibv_qp *qp, struct ibv_ah *ah,
		    uint32_t seed)
{
	struct ibv_wc wc;

	sv_fill(u->buf + 63 * SLOT, MSG, seed);
	ASSERT_OK(ud_end_send(u, qp, seed, IBV_WR_SEND, 63 * SLOT, MSG, ah,
			      0xffffff, QKEY));
	WAIT_WC(u->scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
}

static void mu_check(struct ud_end *u, const struct ibv_wc *wc,
		     const union ibv_gid *g, uint32_t src, uint32_t seed)
{
	const uint8_t *b = u->buf + wc->wr_id * SLOT;
	struct ibv_grh grh;

	ASSERT_EQ(IBV_WC_SUCCESS, wc->status);
	ASSERT_TRUE(wc->wc_flags & IBV_WC_GRH);
	ASSERT_EQ(src, wc->src_qp);
	ASSERT_EQ(GRH + MSG, wc->byte_len);
	memcpy(&grh, b, sizeof(grh));
	ASSERT_OK(memcmp(grh.dgid.raw, g->raw, 16));
	ASSERT_EQ(-1, sv_check(b + GRH, MSG, seed));
}

/* True if lo has joined IPv4 group g (/proc/net/igmp). */
static bool lo_joined(const union ibv_gid *g)
{
	char line[256], want[16], dev[32] = "";
	FILE *f = fopen("/proc/net/igmp", "r");
	uint32_t a;
	bool in = false;

	ASSERT_NOT_NULL(f);
	memcpy(&a, &g->raw[12], 4);
	snprintf(want, sizeof(want), "%08X", a);
	while (fgets(line, sizeof(line), f)) {
		if (line[0] != '\t' && line[0] != ' ') {
			if (sscanf(line, "%*d %31s", dev) != 1)
				dev[0] = 0;
			continue;
		}
		if (!strcmp(dev, "lo") && strstr(line, want))
			in = true;
	}
	fclose(f);
	return in;
}

/* A group member in another process: attaches its QP (and not a second
 * one), posts receives, says its QPN, waits for go, then expects exactly
 * `n` multicasts from QPN src, seeds 1..n, on the attached QP.
 * args: gid (32 hex), src (hex), ready fd, go fd, n. */
SV_HELPER(mu_member)
{
	uint32_t src = (uint32_t)strtoul(argv[1], NULL, 16), qpn;
	int ready = atoi(argv[2]), go = atoi(argv[3]), n = atoi(argv[4]);
	struct ibv_qp *other;
	struct ud_end u;
	union ibv_gid g;
	struct ibv_wc wc;
	char c;

	(void)argc;
	for (int i = 0; i < 16; i++)
		sscanf(argv[0] + 2 * i, "%2hhx", &g.raw[i]);
	mu_open(&u);
	other = mu_qp(&u, 0);
	for (uint64_t s = 0; s < 8; s++) {
		mu_recv(&u, u.qp, s);
		mu_recv(&u, other, 8 + s);
	}
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	ASSERT_TRUE(lo_joined(&g));
	qpn = u.qp->qp_num;
	ASSERT_EQ(4, write(ready, &qpn, 4));
	ASSERT_EQ(1, read(go, &c, 1));
	for (int i = 1; i <= n; i++) {
		WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(u.qp->qp_num, wc.qp_num); /* never `other` */
		mu_check(&u, &wc, &g, src, (uint32_t)i);
	}
	NO_WC(u.cq, 100);
	ASSERT_OK(ibv_destroy_qp(other));
	ud_end_close(&u);
	return 0;
}

static uint32_t mu_ready(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	uint32_t qpn;

	ASSERT_EQ(1, poll(&p, 1, 20000));
	ASSERT_EQ(4, read(fd, &qpn, 4));
	return qpn;
}

/* Two member processes and a sender process (this one, not attached):
 * each member's attached QP gets each of 3 multicasts once, over UDP (the
 * registry is not used for an IPv4 group in this mode), its second QP,
 * not attached, nothing; the sender nothing. */
SV_TEST(mcastnet_two_processes_over_udp)
{
	union ibv_gid g;
	struct sv_proc p[2];
	char gid[33], src[16], rfd[8], gfd[8];
	int ready[2], go[2];
	struct ibv_ah *ah;
	struct ud_end s;

	mu_env();
	g = mu_gid(1);
	mu_open(&s);
	mu_recv(&s, s.qp, 0);
	ah = mu_ah(&s, &g);
	for (int i = 0; i < 16; i++)
		snprintf(gid + 2 * i, 3, "%02x", g.raw[i]);
	snprintf(src, sizeof(src), "%x", s.qp->qp_num);
	ASSERT_OK(pipe(ready));
	ASSERT_OK(pipe(go));
	snprintf(rfd, sizeof(rfd), "%d", ready[1]);
	snprintf(gfd, sizeof(gfd), "%d", go[0]);
	for (int i = 0; i < 2; i++) {
		sv_proc_start_helper(
			&p[i], "mu_member",
			(char *const[]){gid, src, rfd, gfd, "3", NULL}, NULL);
		mu_ready(ready[0]);
	}
	for (uint32_t k = 1; k <= 3; k++)
		mu_send(&s, s.qp, ah, k);
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(1, write(go[1], "g", 1));
	for (int i = 0; i < 2; i++) {
		sv_proc_wait(&p[i], 20000);
		if (p[i].status)
			sv_test_fail(__FILE__, __LINE__,
				     "member %d failed:\n%s", i, p[i].err);
		sv_proc_free(&p[i]);
	}
	NO_WC(s.cq, 50);
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&s);
	for (int i = 0; i < 2; i++) {
		close(ready[i]);
		close(go[i]);
	}
	mu_rm_dir();
}

/* CRC-32C (Castagnoli), as the provider seals a UDP datagram. */
static uint32_t crc32c(const void *buf, size_t n)
{
	const uint8_t *p = buf;
	uint32_t c = ~0u;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

struct mu_dgram {
	struct sv_ud_hdr h;
	uint8_t data[MSG];
};

/* A well-formed multicast datagram for group g from QPN 0x123456. */
static void mu_dgram(struct mu_dgram *d, const union ibv_gid *g, uint32_t seed)
{
	memset(d, 0, sizeof(*d));
	d->h.magic = SV_UD_MAGIC;
	d->h.version = SV_UD_VERSION;
	d->h.flags = SV_UD_GRH;
	d->h.src_qpn = 0x123456;
	d->h.dst_qpn = 0xffffff;
	d->h.qkey = QKEY;
	d->h.len = MSG;
	d->h.sgid[10] = d->h.sgid[11] = 0xff;
	d->h.sgid[12] = 127;
	d->h.sgid[15] = 1;
	memcpy(d->h.dgid, g->raw, 16);
	sv_fill(d->data, MSG, seed);
}

/* Sends d to (IPv4 of group `to`, our port) out of lo; sealed unless
 * `bad_crc`. */
static void mu_inject(int fd, struct mu_dgram *d, const union ibv_gid *to,
		      bool bad_crc)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)atoi(
					getenv("SOFTVERBS_TCP_PORT")))};

	memcpy(&a.sin_addr, &to->raw[12], 4);
	d->h.rsvd = 0;
	d->h.rsvd = crc32c(d, sizeof(*d)) ^ (bad_crc ? 1 : 0);
	ASSERT_EQ(
		(ssize_t)sizeof(*d),
		sendto(fd, d, sizeof(*d), 0, (struct sockaddr *)&a, sizeof(a)));
}

/* Datagrams a stranger sends to the group's address: a well-formed one
 * is taken (so the others reach the listener too), then a bad CRC, a
 * unicast DQPN, a GRH naming another group (one the QP is attached to),
 * no GRH, a wrong qkey, a truncated header, and a well-formed one to a
 * group nobody here joined: none is delivered; the next good one is. */
SV_TEST(mcastnet_forged_datagrams_dropped)
{
	union ibv_gid g, g2, g3;
	struct in_addr lo = {htonl(INADDR_LOOPBACK)};
	struct mu_dgram d;
	struct ibv_wc wc;
	struct ud_end u;
	int fd;

	mu_env();
	g = mu_gid(2);
	g2 = mu_gid(3);
	g3 = mu_gid(4);
	mu_open(&u);
	for (uint64_t s = 0; s < 16; s++)
		mu_recv(&u, u.qp, s);
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	ASSERT_OK(ibv_attach_mcast(u.qp, &g2, MLID));
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	ASSERT_GE(fd, 0);
	ASSERT_OK(setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof(lo)));

	mu_dgram(&d, &g, 1);
	mu_inject(fd, &d, &g, false);
	WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
	mu_check(&u, &wc, &g, 0x123456, 1);

	mu_dgram(&d, &g, 2);
	mu_inject(fd, &d, &g, true); /* bad CRC */
	mu_dgram(&d, &g, 3);
	d.h.dst_qpn = u.qp->qp_num; /* unicast DQPN sent to a group */
	mu_inject(fd, &d, &g, false);
	mu_dgram(&d, &g2, 4); /* names g2, sent to g */
	mu_inject(fd, &d, &g, false);
	mu_dgram(&d, &g, 5);
	d.h.flags = 0; /* no GRH: no group named */
	mu_inject(fd, &d, &g, false);
	mu_dgram(&d, &g, 6);
	d.h.qkey = QKEY + 1;
	mu_inject(fd, &d, &g, false);
	mu_dgram(&d, &g3, 7); /* nobody here joined g3 */
	mu_inject(fd, &d, &g3, false);
	mu_dgram(&d, &g, 8);
	d.h.len = MSG + 1; /* lies about its length */
	mu_inject(fd, &d, &g, false);
	NO_WC(u.cq, 200);

	mu_dgram(&d, &g2, 9);
	mu_inject(fd, &d, &g2, false);
	WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
	mu_check(&u, &wc, &g2, 0x123456, 9);
	NO_WC(u.cq, 50);
	close(fd);
	ud_end_close(&u);
	mu_rm_dir();
}

/* Detach stops delivery and the listener leaves the IP group (lo's
 * membership in /proc/net/igmp) with the context's last QP in it; a
 * second QP keeps the group joined until it is destroyed; context close
 * leaves what is left. */
SV_TEST(mcastnet_detach_destroy_close_leave)
{
	union ibv_gid g, g2;
	struct ibv_qp *b;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct ud_end u;

	mu_env();
	g = mu_gid(5);
	g2 = mu_gid(6);
	mu_open(&u);
	b = mu_qp(&u, 0);
	for (uint64_t s = 0; s < 8; s++) {
		mu_recv(&u, u.qp, s);
		mu_recv(&u, b, 8 + s);
	}
	ah = mu_ah(&u, &g);
	ASSERT_FALSE(lo_joined(&g));
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	ASSERT_OK(ibv_attach_mcast(b, &g, MLID));
	ASSERT_TRUE(lo_joined(&g));

	/* both attached: the sender u.qp gets its own copy once, b once */
	mu_send(&u, u.qp, ah, 1);
	for (int i = 0; i < 2; i++) {
		WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
		mu_check(&u, &wc, &g, u.qp->qp_num, 1);
	}
	NO_WC(u.cq, 100);

	/* u.qp detached: only b; the group is still joined for b */
	ASSERT_OK(ibv_detach_mcast(u.qp, &g, MLID));
	ASSERT_TRUE(lo_joined(&g));
	mu_send(&u, u.qp, ah, 2);
	WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(b->qp_num, wc.qp_num);
	mu_check(&u, &wc, &g, u.qp->qp_num, 2);
	NO_WC(u.cq, 100);

	/* b destroyed: nobody is in the group; the listener left it */
	ASSERT_OK(ibv_destroy_qp(b));
	while (ibv_poll_cq(u.cq, 1, &wc) == 1) /* b's receives, flushed */
		ASSERT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status);
	ASSERT_FALSE(lo_joined(&g));
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	ASSERT_TRUE(lo_joined(&g));
	ASSERT_OK(ibv_detach_mcast(u.qp, &g, MLID));
	ASSERT_FALSE(lo_joined(&g));
	mu_send(&u, u.qp, ah, 3);
	NO_WC(u.cq, 100);

	/* closing the context leaves its groups */
	ASSERT_OK(ibv_attach_mcast(u.qp, &g2, MLID));
	ASSERT_TRUE(lo_joined(&g2));
	ASSERT_OK(ibv_destroy_ah(ah));
	ud_end_close(&u);
	ASSERT_FALSE(lo_joined(&g2));
	mu_rm_dir();
}

/* IBV_QP_CREATE_BLOCK_SELF_MCAST_LB over UDP: the attached sender does
 * not get its own copy back through its listener; another member QP of
 * the process gets it once.  Another host's QP may have the same number
 * (QPNs are unique per host): a datagram with the blocked QP's number
 * and a source GID that is not this host's reaches it; with one of this
 * host's GIDs it is its own, and does not. */
SV_TEST(mcastnet_block_self_loopback)
{
	struct in_addr lo = {htonl(INADDR_LOOPBACK)};
	struct mu_dgram d;
	uint32_t got[2];
	int fd;
	union ibv_gid g;
	struct ibv_qp *s;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct ud_end u;

	mu_env();
	g = mu_gid(7);
	mu_open(&u);
	s = mu_qp(&u, IBV_QP_CREATE_BLOCK_SELF_MCAST_LB);
	for (uint64_t k = 0; k < 4; k++) {
		mu_recv(&u, u.qp, k);
		mu_recv(&u, s, 4 + k);
	}
	ASSERT_OK(ibv_attach_mcast(u.qp, &g, MLID));
	ASSERT_OK(ibv_attach_mcast(s, &g, MLID));
	ah = mu_ah(&u, &g);
	mu_send(&u, s, ah, 5);
	WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(u.qp->qp_num, wc.qp_num);
	mu_check(&u, &wc, &g, s->qp_num, 5);
	NO_WC(u.cq, 100);

	fd = socket(AF_INET, SOCK_DGRAM, 0);
	ASSERT_GE(fd, 0);
	ASSERT_OK(setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof(lo)));
	mu_dgram(&d, &g, 6);
	d.h.src_qpn = s->qp_num;
	d.h.sgid[12] = 192; /* ::ffff:192.0.0.1: another host's */
	mu_inject(fd, &d, &g, false);
	for (int i = 0; i < 2; i++) {
		WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
		got[i] = wc.qp_num;
		mu_check(&u, &wc, &g, s->qp_num, 6);
	}
	ASSERT_TRUE((got[0] == s->qp_num && got[1] == u.qp->qp_num) ||
		    (got[1] == s->qp_num && got[0] == u.qp->qp_num));
	mu_dgram(&d, &g, 7);
	d.h.src_qpn = s->qp_num; /* ::ffff:127.0.0.1: this host's */
	mu_inject(fd, &d, &g, false);
	WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(u.qp->qp_num, wc.qp_num);
	mu_check(&u, &wc, &g, s->qp_num, 7);
	NO_WC(u.cq, 100);
	close(fd);
	ASSERT_OK(ibv_destroy_ah(ah));
	ASSERT_OK(ibv_destroy_qp(s));
	ud_end_close(&u);
	mu_rm_dir();
}
