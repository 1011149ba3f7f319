// SPDX-License-Identifier: MIT
/*
 * UD datagrams between hosts with SOFTVERBS_SECRET_FILE (issue 24, ud/mac.c):
 * forced over UDP on lo (SOFTVERBS_TRANSPORT=tcp, each test its own port
 * and secret).  The provider's own send path seals and its receive path
 * checks; datagrams made here with the same derived key (OpenSSL, as
 * auth.c derives it) probe the replay window and its bound.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "pair.h"
#include "sv.h"
#include "ud_end.h"
#include "wire.h"

#define QKEY  0x5ec4e7u
#define DEPTH 256
#define SLOT  (UD_GRH + 64)

static uint8_t key[32]; /* HMAC(secret, the UD label), as auth.c */

/* A secret file of 32 random bytes (mode 600), a free port, over UDP. */
static void us_env(void)
{
	static char path[] = "/tmp/sv-udsecret-XXXXXX";
	const char *t = getenv("SOFTVERBS_TRANSPORT");
	static const char label[] = "softverbs-v1 ud datagram";
	uint8_t secret[32];
	unsigned int klen = sizeof(key);
	char port[16];
	int fd;

	if (!t || strcmp(t, "tcp"))
		sv_test_fail(__FILE__, __LINE__,
			     "needs SOFTVERBS_TRANSPORT=tcp (CMake sets it)");
	fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	sv_fill(secret, sizeof(secret), (uint32_t)getpid());
	ASSERT_EQ((ssize_t)sizeof(secret), write(fd, secret, sizeof(secret)));
	close(fd);
	ASSERT_OK(setenv("SOFTVERBS_SECRET_FILE", path, 1));
	snprintf(port, sizeof(port), "%d", sv_free_port());
	ASSERT_OK(setenv("SOFTVERBS_TCP_PORT", port, 1));
	ASSERT_NOT_NULL(HMAC(EVP_sha256(), secret, sizeof(secret),
			     (const uint8_t *)label, strlen(label), key,
			     &klen));
}

static void us_rm(void)
{
	unlink(getenv("SOFTVERBS_SECRET_FILE"));
}

struct us_dgram {
	struct sv_ud_hdr h;
	uint8_t data[8];
	struct sv_ud_mac t;
};

/* Sends to qpn on lo a datagram from sender id, seq, sealed as ud/mac.c
 * seals. */
static void us_inject(int fd, uint32_t qpn, uint64_t id, uint64_t seq)
{
	struct sockaddr_in a = {
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)atoi(getenv("SOFTVERBS_TCP_PORT"))),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	uint8_t full[32];
	unsigned int len = sizeof(full);
	struct us_dgram d;

	memset(&d, 0, sizeof(d));
	d.h.magic = SV_UD_MAGIC;
	d.h.version = SV_UD_VERSION;
	d.h.flags = SV_UD_MAC;
	d.h.src_qpn = 0x123;
	d.h.dst_qpn = qpn;
	d.h.qkey = QKEY;
	d.h.len = sizeof(d.data);
	memcpy(d.data, &seq, sizeof(seq));
	d.t.sender = id;
	d.t.seq = seq;
	/* header, payload, sender and seq: contiguous here */
	ASSERT_NOT_NULL(HMAC(
		EVP_sha256(), key, sizeof(key), (const uint8_t *)&d,
		offsetof(struct us_dgram, t) + SV_UD_MAC_COVERS, full, &len));
	memcpy(d.t.mac, full, sizeof(d.t.mac));
	ASSERT_EQ((ssize_t)sizeof(d), sendto(fd, &d, sizeof(d), 0,
					     (struct sockaddr *)&a, sizeof(a)));
}

static uint64_t ctr(struct ibv_qp *qp, size_t off)
{
	return __atomic_load_n(
		(uint64_t *)((uint8_t *)&to_sqp(qp)->stats + off),
		__ATOMIC_RELAXED);
}
#define REPLAYS(qp) ctr(qp, offsetof(struct sv_qp_stats, ud_replay_drops))
#define AUTHS(qp)   ctr(qp, offsetof(struct sv_qp_stats, ud_auth_drops))

/* Takes n datagrams (each in SV_WC_TIMEOUT_MS), reposting each
 * receive. */
static void us_take(struct ud_end *u, int n)
{
	struct ibv_wc wc;

	while (n--) {
		WAIT_WC(u->cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_OK(ud_end_recv(u, u->qp, wc.wr_id,
				      (size_t)wc.wr_id * SLOT, SLOT));
	}
}

/* Waits (5 s at most) until qp has dropped want replays, then checks
 * that nothing else arrives. */
static void us_replays(struct ud_end *u, uint64_t want)
{
	uint64_t end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	struct ibv_wc wc;

	while (REPLAYS(u->qp) < want && sv_now_ms() < end)
		ASSERT_EQ(0, ibv_poll_cq(u->cq, 1, &wc)); /* drives it */
	ASSERT_EQ(want, REPLAYS(u->qp));
	NO_WC(u->cq, 50);
}

/* The provider's own sends, over UDP to our own port: sealed (a seq is
 * used per datagram), checked and taken; the datagrams carry the MAC,
 * not the CRC. */
SV_TEST(udsecret_own_sends_sealed_and_taken)
{
	struct ud_end_opts o = ud_end_opts(16, 16 * SLOT, QKEY);
	struct ibv_wc wc;
	struct ud_end u;

	us_env();
	o.ah = true;
	ud_end_open(&u, &o);
	for (uint64_t s = 0; s < 8; s++)
		ASSERT_OK(ud_end_recv(&u, u.qp, s, (size_t)s * SLOT, SLOT));
	for (uint64_t s = 0; s < 4; s++) {
		ASSERT_OK(ud_end_send(&u, u.qp, 100 + s, IBV_WR_SEND, 8 * SLOT,
				      64, u.ah, u.qp->qp_num, QKEY));
		WAIT_WC(u.scq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		WAIT_WC(u.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(UD_GRH + 64u, wc.byte_len);
	}
	ASSERT_EQ(4u, to_sqp(u.qp)->ud.tx_seq);
	ASSERT_TRUE(to_sqp(u.qp)->ud.tx_id != 0);
	ASSERT_EQ(0u, AUTHS(u.qp) + REPLAYS(u.qp));
	ud_end_close(&u);
	us_rm();
}

/*
 * The window (64 seqs per sender) and its bound: a seq 63 below the
 * highest is taken once, 64 below is too old, a repeat is a replay.  Of
 * 200 senders more, the 128 most recent are remembered (their replays
 * dropped) in the QP's fixed table; the first sender, evicted, is
 * forgotten: its old datagram is taken again (ud/mac.c says so).
 */
SV_TEST(udsecret_replay_window_and_bound)
{
	struct ud_end_opts o = ud_end_opts(DEPTH, DEPTH * SLOT, QKEY);
	uint64_t base = 0x5e9d000000000000ull;
	struct ud_end u;
	uint32_t qpn;
	int fd;

	us_env();
	ud_end_open(&u, &o);
	for (uint64_t s = 0; s < DEPTH; s++)
		ASSERT_OK(ud_end_recv(&u, u.qp, s, (size_t)s * SLOT, SLOT));
	qpn = u.qp->qp_num;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	ASSERT_GE(fd, 0);

	us_inject(fd, qpn, base, 100);
	us_inject(fd, qpn, base, 37); /* 63 below: in the window */
	us_inject(fd, qpn, base, 36); /* 64 below: too old */
	us_inject(fd, qpn, base, 100);
	us_inject(fd, qpn, base, 37);
	us_inject(fd, qpn, base, 0); /* never sent (and too old) */
	us_take(&u, 2);
	us_replays(&u, 4);

	for (uint64_t i = 1; i <= 200; i++) {
		us_inject(fd, qpn, base + i, 1);
		if (i % 50 == 0)
			us_take(&u, 50);
	}
	for (uint64_t i = 200 - 127; i <= 200; i++)
		us_inject(fd, qpn, base + i, 1);
	us_replays(&u, 4 + 128);
	us_inject(fd, qpn, base, 100); /* evicted: forgotten */
	us_take(&u, 1);
	ASSERT_EQ(0u, AUTHS(u.qp));
	close(fd);
	ud_end_close(&u);
	us_rm();
}
