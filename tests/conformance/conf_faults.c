// SPDX-License-Identifier: MIT
/*
 * SOFTVERBS_FAULTS (issue 14 item 2): packets lost on the wire and the
 * IBA's retransmission that mends them, made-up RNR NAKs and remote
 * access errors, a peer killed after its N-th packet, and a bad spec
 * refused at ibv_open_device.  Each test is its own process: the spec is
 * set before the first open (it is read once).  The counters are read
 * from the QP's struct sv_qp_stats through objects.h (no export for them).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "objects.h"
#include "pair.h"
#include "ud_end.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static struct sv_qp_stats stats_of(struct sv_end *e)
{
	struct sv_qp *qp = to_sqp(e->qp);
	struct sv_qp_stats s = {
		.retrans_pkts = LOAD(qp->stats.retrans_pkts),
		.ack_timeouts = LOAD(qp->stats.ack_timeouts),
		.read_gaps = LOAD(qp->stats.read_gaps),
		.seq_nak_sent = LOAD(qp->stats.seq_nak_sent),
		.seq_nak_recv = LOAD(qp->stats.seq_nak_recv),
		.rnr_nak_sent = LOAD(qp->stats.rnr_nak_sent),
		.rnr_nak_recv = LOAD(qp->stats.rnr_nak_recv),
		.fault_drops = LOAD(qp->stats.fault_drops),
		.fault_reorders = LOAD(qp->stats.fault_reorders),
		.fault_reorders_out = LOAD(qp->stats.fault_reorders_out),
		.fault_rnr = LOAD(qp->stats.fault_rnr),
		.fault_access = LOAD(qp->stats.fault_access),
	};
	return s;
}

static void set_faults(const char *spec)
{
	ASSERT_OK(setenv("SOFTVERBS_FAULTS", spec, 1));
}

/* Word i of message m: every byte of every message differs. */
static uint64_t pat(uint32_t m, uint32_t i)
{
	return ((uint64_t)m << 32 | i) * 0x9e3779b97f4a7c15ull + 1;
}

static void fill_msg(uint8_t *b, uint32_t len, uint32_t m)
{
	uint64_t *w = (uint64_t *)b;

	for (uint32_t i = 0; i < len / 8; i++)
		w[i] = pat(m, i);
}

static long check_msg(const uint8_t *b, uint32_t len, uint32_t m)
{
	const uint64_t *w = (const uint64_t *)b;

	for (uint32_t i = 0; i < len / 8; i++)
		if (w[i] != pat(m, i))
			return (long)i * 8;
	return -1;
}

#define SLOTS 16 /* sends in flight; receives posted: twice that */

static void post_send_slot(struct sv_end *e, uint32_t m, uint32_t len)
{
	uint32_t s = m % SLOTS;

	fill_msg(e->buf + (size_t)s * len, len, m);
	ASSERT_OK(sv_end_send(e, m, (size_t)s * len, len, 0));
}

/*
 * a sends nmsg messages of len bytes to b, SLOTS in flight, and b checks
 * every byte of each.  Fails on any error completion or the deadline.
 */
static void transfer(struct sv_pair *P, uint32_t nmsg, uint32_t len,
		     int deadline_ms)
{
	uint32_t sent = 0, acked = 0, got = 0;
	uint64_t end = sv_now_ms() + (uint64_t)deadline_ms;

	for (uint32_t k = 0; k < 2 * SLOTS && k < nmsg; k++)
		ASSERT_OK(sv_end_recv(&P->b, k, (size_t)(k % (2 * SLOTS)) * len,
				      len));
	while (sent < SLOTS && sent < nmsg)
		post_send_slot(&P->a, sent++, len);
	while (got < nmsg || acked < nmsg) {
		struct ibv_wc wc;
		int n;

		if (sv_now_ms() > end)
			sv_test_fail(__FILE__, __LINE__,
				     "deadline: %u sent, %u acked, %u got",
				     sent, acked, got);
		n = ibv_poll_cq(P->b.rcq, 1, &wc);
		ASSERT_TRUE(n >= 0);
		if (n) {
			long bad;

			if (wc.status != IBV_WC_SUCCESS)
				sv_test_fail(__FILE__, __LINE__,
					     "receive %u: %s", got,
					     ibv_wc_status_str(wc.status));
			ASSERT_EQ(got, wc.wr_id);
			ASSERT_EQ(len, wc.byte_len);
			bad = check_msg(P->b.buf + (size_t)(got % (2 * SLOTS)) *
							   len,
					len, got);
			if (bad >= 0)
				sv_test_fail(__FILE__, __LINE__,
					     "message %u differs at byte %ld",
					     got, bad);
			if (got + 2 * SLOTS < nmsg)
				ASSERT_OK(sv_end_recv(
					&P->b, got + 2 * SLOTS,
					(size_t)(got % (2 * SLOTS)) * len,
					len));
			got++;
		}
		n = ibv_poll_cq(P->a.scq, 1, &wc);
		ASSERT_TRUE(n >= 0);
		if (n) {
			if (wc.status != IBV_WC_SUCCESS)
				sv_test_fail(__FILE__, __LINE__, "send %u: %s",
					     acked,
					     ibv_wc_status_str(wc.status));
			ASSERT_EQ(acked, wc.wr_id);
			acked++;
			if (sent < nmsg)
				post_send_slot(&P->a, sent++, len);
		}
	}
}

static struct sv_end_opts xfer_opts(uint32_t len)
{
	struct sv_end_opts o = sv_end_opts_default();

	o.buf_len = (size_t)2 * SLOTS * len;
	o.mtu = IBV_MTU_4096;
	o.cqe = 128;
	return o;
}

/* Issue 14 item 2: 1 GiB over RC with drop=0.01 arrives byte-exact, and
 * the counters show the losses and the retransmissions that mended
 * them. */
SV_TEST(faults_drop_rc_1gib_byte_exact)
{
	const uint32_t len = 64 * 1024, nmsg = 16384;
	struct sv_end_opts o = xfer_opts(len);
	struct sv_qp_stats sa, sb;
	struct sv_pair P;
	uint64_t t0;

	set_faults("drop=0.01,seed=1");
	sv_pair_open(&P, &o, &o);
	t0 = sv_now_ms();
	transfer(&P, nmsg, len, 100000);
	sa = stats_of(&P.a);
	sb = stats_of(&P.b);
	printf("1 GiB in %" PRIu64 " ms: b dropped %" PRIu64
	       " trains, sent %" PRIu64 " NAK-seq; a resent %" PRIu64
	       " trains, took %" PRIu64 " NAK-seq, %" PRIu64 " ACK timeouts\n",
	       sv_now_ms() - t0, sb.fault_drops, sb.seq_nak_sent,
	       sa.retrans_pkts, sa.seq_nak_recv, sa.ack_timeouts);
	ASSERT_GE(sb.fault_drops, 100);
	ASSERT_GE(sb.seq_nak_sent, 1);
	ASSERT_GE(sa.seq_nak_recv, 1);
	ASSERT_GE(sa.retrans_pkts, sb.fault_drops);
	ASSERT_EQ(0, sa.fault_drops); /* a took no requests */
	sv_pair_close(&P);
}

/*
 * reorder=P on the RoCE wire: a datagram that came is taken after the
 * next one, requests at b and ACKs at a.  Every message arrives whole and
 * in order, and no reordering waits for the ACK timer: a gap a late
 * packet filled is NAKed at once for what was discarded after it.  Before
 * (resp.c: a NAK-seq still "standing" after the gap was filled, and a
 * NAK overwritten by the ACK of the late packet), reorder=0.01 took
 * ibv_rc_pingpong -s 65536 from 0.10 to 48 ms a round trip, one ACK
 * timeout in two reorderings.
 */
/* One message of len bytes at a time, nmsg of them, a ping-pong: a to
 * b, then b to a.  Nothing comes after a message's packets to mend a gap
 * but a NAK or the ACK timer.  Each arrives whole. */
static void ping_pong(struct sv_pair *P, uint32_t nmsg, uint32_t len)
{
	struct ibv_wc wc;

	for (uint32_t m = 0; m < nmsg; m++) {
		struct sv_end *tx = m & 1 ? &P->b : &P->a;
		struct sv_end *rx = m & 1 ? &P->a : &P->b;
		long bad;

		ASSERT_OK(sv_end_recv(rx, m, 0, len));
		fill_msg(tx->buf, len, m);
		ASSERT_OK(sv_end_send(tx, m, 0, len, 0));
		WAIT_WC(rx->rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(len, wc.byte_len);
		bad = check_msg(rx->buf, len, m);
		if (bad >= 0)
			sv_test_fail(__FILE__, __LINE__,
				     "message %u differs at byte %ld", m, bad);
		WAIT_WC(tx->scq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	}
}

/* 300 messages of 64 KiB in a ping-pong with spec (a reorder): each
 * arrives whole, at most one ACK timeout for every slack reorderings
 * (0: none), and the reorderings counted (on arrival, or as sent: out). */
static void reorder_ping_pong(const char *spec, bool out, uint64_t slack)
{
	const uint32_t len = 65536;
	struct sv_end_opts o = xfer_opts(len);
	struct sv_qp_stats sa, sb;
	uint64_t moved, other;
	struct sv_pair P;

	set_faults(spec);
	o.mtu = IBV_MTU_1024; /* 64 packets a message */
	sv_pair_open(&P, &o, &o);
	ping_pong(&P, 300, len);
	sa = stats_of(&P.a);
	sb = stats_of(&P.b);
	moved = out ? sa.fault_reorders_out + sb.fault_reorders_out
		    : sa.fault_reorders + sb.fault_reorders;
	other = out ? sa.fault_reorders + sb.fault_reorders
		    : sa.fault_reorders_out + sb.fault_reorders_out;
	printf("reordered %" PRIu64 " (%s), %" PRIu64 " NAK-seq sent, %" PRIu64
	       " ACK timeouts\n",
	       moved, out ? "as sent" : "on arrival",
	       sa.seq_nak_sent + sb.seq_nak_sent,
	       sa.ack_timeouts + sb.ack_timeouts);
	ASSERT_GE(moved, 50);
	ASSERT_EQ(0, other);
	ASSERT_GE(sa.seq_nak_sent + sb.seq_nak_sent, 1);
	if (slack)
		ASSERT_LE(sa.ack_timeouts + sb.ack_timeouts, moved / slack);
	else
		ASSERT_EQ(0, sa.ack_timeouts + sb.ack_timeouts);
	sv_pair_close(&P);
}

SV_TEST(faults_reorder_seldom_waits_for_the_ack_timer)
{
	sv_test_needs_roce("reorder is a fault of the RoCE wire");
	/* Idle, no ACK timeout in 300 round trips (about 250 held back).
	 * Under load (a clean-clone CI run beside it), 1 in 2 runs of 20,
	 * with the build of 2026-12-05 as with today's (cause not found;
	 * CI's plain pass failed on it once): one is allowed for every 50
	 * moves.  The fault this guards against (a NAK-seq standing once
	 * its gap was mended) made one nearly every round trip. */
	reorder_ping_pong("reorder=0.01,seed=1", false, 50);
}

/*
 * reorder_out=P: a datagram of a flush leaves after the next one of it,
 * what the peer then takes in that order (the way to show rxe, which has
 * no SOFTVERBS_FAULTS, packets out of order: tests/roce/rxe_interop.sh).
 * (A queue where one moves leaves a datagram a message, each ICRC made
 * for IPv4 ID 0.  Our receiver solves the ID from the ICRC, so only a
 * peer that checks it against the header, as rxe does, would see it
 * wrong: the reorder_out rows against rxe.)
 */
SV_TEST(faults_reorder_out_seldom_waits_for_the_ack_timer)
{
	sv_test_needs_roce("reorder_out is a fault of the RoCE wire");
	/* Idle, no ACK timeout in 300 round trips (about 260 moves).
	 * Beside three busy loops, 1 or 2 in 3 runs of 12 while check_psn
	 * (resp.c) NAKed a resend whose first two datagrams swapped again,
	 * as a round whose first packet was lost: the requester went back
	 * two or three times, the peer's socket filled with stale rounds,
	 * and the NAK for the next message's gap waited behind them,
	 * starved of CPU, past the 67 ms timer
	 * (test_conf.hostile_late_packet_of_a_round_is_not_naked_again).
	 * Since, 1 in 2 runs of 20 (cause not found), so one is allowed
	 * for every 20 moves; the old fault this guards against made one
	 * in two. */
	reorder_ping_pong("reorder_out=0.01,seed=1", true, 20);
}

/* In a child: a transfer with spec; writes (drops, digest) to fd. */
static void drop_run(const char *spec, int fd)
{
	struct sv_end_opts o = xfer_opts(16384);
	struct sv_pair P;
	uint64_t r[2];

	set_faults(spec);
	sv_pair_open(&P, &o, &o);
	transfer(&P, 2000, 16384, 50000);
	r[0] = stats_of(&P.b).fault_drops;
	r[1] = to_sqp(P.b.qp)->inject.drop_hash;
	sv_pair_close(&P);
	if (write(fd, r, sizeof(r)) != sizeof(r))
		_exit(3);
}

static void drop_child(const char *spec, uint64_t r[2])
{
	int fds[2], st;
	pid_t pid;

	ASSERT_OK(pipe(fds));
	fflush(NULL);
	pid = fork(); /* the spec is read once per process */
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		drop_run(spec, fds[1]);
		_exit(0);
	}
	close(fds[1]);
	ASSERT_EQ((ssize_t)(2 * sizeof(uint64_t)),
		  read(fds[0], r, 2 * sizeof(uint64_t)));
	close(fds[0]);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The same seed twice drops the same trains at the same attempts (the
 * count and a digest of the (PSN, attempt) list); another seed not. */
SV_TEST(faults_drop_same_seed_same_faults)
{
	uint64_t r1[2], r2[2], r3[2];

	drop_child("drop=0.05,seed=7", r1);
	drop_child("seed=7,drop=0.05", r2);
	drop_child("drop=0.05,seed=8", r3);
	printf("seed 7: %" PRIu64 " drops (%016" PRIx64 "), again %" PRIu64
	       " (%016" PRIx64 "); seed 8: %" PRIu64 " (%016" PRIx64 ")\n",
	       r1[0], r1[1], r2[0], r2[1], r3[0], r3[1]);
	ASSERT_GE(r1[0], 10);
	ASSERT_EQ(r1[0], r2[0]);
	ASSERT_EQ(r1[1], r2[1]);
	ASSERT_NE(r1[1], r3[1]);
}

/* Read k: message k, len bytes, from the peer's slot k + 1 into sge
 * (nsge SGEs over the start of our buffer), checked byte for byte. */
static void read_checked(struct sv_pair *P, struct ibv_sge *sge, int nsge,
			 uint32_t k, uint32_t len)
{
	struct ibv_send_wr wr = {.wr_id = k,
				 .sg_list = sge,
				 .num_sge = nsge,
				 .opcode = IBV_WR_RDMA_READ,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	fill_msg(P->b.buf + (size_t)(k + 1) * len, len, k);
	memset(P->a.buf, 0, len);
	wr.wr.rdma.remote_addr = (uintptr_t)P->b.buf + (size_t)(k + 1) * len;
	wr.wr.rdma.rkey = P->b.mr->rkey;
	ASSERT_OK(ibv_post_send(P->a.qp, &wr, &bad));
	EXPECT_WC(P->a.scq, IBV_WC_SUCCESS, k);
	ASSERT_EQ(-1, check_msg(P->a.buf, len, k));
}

/* Reads whose responses are lost are asked again; atomics whose answers
 * are lost are answered from the replay cache, never executed twice. */
SV_TEST(faults_drop_rc_read_and_atomic)
{
	const uint32_t len = 65536, nread = 256, natomic = 400;
	struct sv_end_opts o = sv_end_opts_default();
	struct sv_qp_stats sa;
	struct sv_pair P;
	uint8_t *seen;

	set_faults("drop=0.02,seed=3");
	/* each read from its own bytes: a duplicate of a finished read may
	 * still be answered (IBA 9.7.5.1.2) while we fill the next */
	o.buf_len = (size_t)(nread + 1) * len;
	o.mtu = IBV_MTU_4096;
	o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	o.qp_access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
		      IBV_ACCESS_REMOTE_ATOMIC;
	o.rd_atomic = 4;
	sv_pair_open(&P, &o, &o);
	for (uint32_t k = 0; k < nread; k++) {
		struct ibv_sge sge = {.addr = (uintptr_t)P.a.buf,
				      .length = len,
				      .lkey = P.a.mr->lkey};

		read_checked(&P, &sge, 1, k, len);
	}
	memset(P.b.buf, 0, 8);
	seen = calloc(natomic, 1);
	ASSERT_NOT_NULL(seen);
	for (uint32_t k = 0; k < natomic; k++) {
		struct ibv_sge sge = {.addr = (uintptr_t)P.a.buf + 8 * (k % 8),
				      .length = 8,
				      .lkey = P.a.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = k,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		uint64_t old;

		wr.wr.atomic.remote_addr = (uintptr_t)P.b.buf;
		wr.wr.atomic.rkey = P.b.mr->rkey;
		wr.wr.atomic.compare_add = 1;
		ASSERT_OK(ibv_post_send(P.a.qp, &wr, &bad));
		EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, k);
		memcpy(&old, P.a.buf + 8 * (k % 8), 8);
		ASSERT_EQ(k, old); /* each value once, in order */
		seen[k] = 1;
	}
	ASSERT_EQ(natomic,
		  __atomic_load_n((uint64_t *)P.b.buf, __ATOMIC_ACQUIRE));
	free(seen);
	sa = stats_of(&P.a);
	printf("a lost %" PRIu64 " responses, resent %" PRIu64
	       " requests, %" PRIu64 " ACK timeouts; b lost %" PRIu64
	       " requests\n",
	       sa.fault_drops, sa.retrans_pkts, sa.ack_timeouts,
	       stats_of(&P.b).fault_drops);
	ASSERT_GE(sa.fault_drops, 1);
	ASSERT_GE(sa.ack_timeouts, 1);
	sv_pair_close(&P);
}

/* A read of many packets whose responses are lost goes on from the first
 * one lost (IBA 9.7.6.1.3, rxe's req_retry): asked again for the rest,
 * the responses placed kept, the retry count started again by each
 * response, and at once where the next response shows the loss.  It
 * was asked again from its start: a 1 MiB read (16 trains
 * of responses here, each lost with odds of 1 in 5) came whole on 3 % of
 * its tries, and ended in RETRY_EXC_ERR; against rxe, ib_read_lat of
 * 64 KiB with 2 % of the packets lost did. */
SV_TEST(faults_drop_long_read_goes_on_from_the_loss)
{
	const uint32_t len = 1 << 20, nread = 8;
	struct sv_end_opts o = sv_end_opts_default();
	struct sv_qp_stats sa;
	struct sv_pair P;

	set_faults("drop=0.2,seed=9");
	o.buf_len = (size_t)(nread + 1) * len;
	o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	o.qp_access = IBV_ACCESS_REMOTE_READ;
	/* 16 ms: each loss nothing after it shows waits for it; 8 in a
	 * row with no progress end the read (1 ms: 8 ms of the responder
	 * descheduled, under ASan beside other tests, did; 4 ms: 32 ms
	 * did, in a clean-clone CI's ASan stage, 2026-12-07) */
	o.timeout = 12;
	o.rd_atomic = 1;
	sv_pair_open(&P, &o, &o);
	for (uint32_t k = 0; k < nread; k++) {
		/* scattered into two SGEs, the cut not on an MTU: the
		 * rest lands where it belongs */
		struct ibv_sge sge[2] = {{.addr = (uintptr_t)P.a.buf,
					  .length = 300000,
					  .lkey = P.a.mr->lkey},
					 {.addr = (uintptr_t)P.a.buf + 300000,
					  .length = len - 300000,
					  .lkey = P.a.mr->lkey}};

		read_checked(&P, sge, 2, k, len);
	}
	sa = stats_of(&P.a);
	printf("a lost %" PRIu64 " responses, %" PRIu64
	       " ACK timeouts, %" PRIu64 " reads asked again at a gap\n",
	       sa.fault_drops, sa.ack_timeouts, sa.read_gaps);
	/* about 26 of 128 trains */
	ASSERT_GE(sa.fault_drops, 12);
	/* a loss the next response shows is asked again at once, without
	 * the ACK timer (40 timeouts for 37 losses when it waited) */
	ASSERT_GE(sa.read_gaps, 5);
	ASSERT_TRUE(sa.ack_timeouts < sa.fault_drops);
	sv_pair_close(&P);
}

/* As many atomics in flight as a QP may have (max_rd_atomic 128, rxe's
 * count), their answers lost at random: every duplicate is answered
 * from the responder's cache, which must hold all 128 (it held 16: the
 * duplicate of an older one found nothing, was dropped, and the
 * requester ran out of retries). */
SV_TEST(faults_drop_128_atomics_in_flight)
{
	const uint32_t n = 128, rounds = 8;
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_device_attr da;
	struct sv_pair P;
	uint8_t seen[128];

	set_faults("drop=0.02,seed=5");
	o.buf_len = 65536;
	o.max_send_wr = n;
	o.cqe = 2 * (int)n;
	o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	o.qp_access = IBV_ACCESS_REMOTE_ATOMIC;
	o.rd_atomic = (uint8_t)n;
	sv_pair_open(&P, &o, &o);
	ASSERT_OK(ibv_query_device(P.a.ctx, &da));
	ASSERT_GE(da.max_qp_rd_atom, (int)n);
	ASSERT_GE(da.max_qp_init_rd_atom, (int)n);
	memset(P.b.buf, 0, 8);
	for (uint32_t r = 0; r < rounds; r++) {
		memset(seen, 0, sizeof(seen));
		for (uint32_t k = 0; k < n; k++) {
			struct ibv_sge sge = {.addr = (uintptr_t)P.a.buf + 64 +
						      8 * k,
					      .length = 8,
					      .lkey = P.a.mr->lkey};
			struct ibv_send_wr
				wr = {.wr_id = k,
				      .sg_list = &sge,
				      .num_sge = 1,
				      .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				      .send_flags = IBV_SEND_SIGNALED},
				*bad;

			wr.wr.atomic.remote_addr = (uintptr_t)P.b.buf;
			wr.wr.atomic.rkey = P.b.mr->rkey;
			wr.wr.atomic.compare_add = 1;
			ASSERT_OK(ibv_post_send(P.a.qp, &wr, &bad));
		}
		for (uint32_t k = 0; k < n; k++) {
			uint64_t old;

			EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, k);
			memcpy(&old, P.a.buf + 64 + 8 * k, 8);
			/* each value once: none executed twice */
			ASSERT_TRUE(old >= (uint64_t)r * n &&
				    old < (uint64_t)(r + 1) * n);
			ASSERT_EQ(0, seen[old - (uint64_t)r * n]);
			seen[old - (uint64_t)r * n] = 1;
		}
	}
	ASSERT_EQ((uint64_t)rounds * n,
		  __atomic_load_n((uint64_t *)P.b.buf, __ATOMIC_ACQUIRE));
	printf("a lost %" PRIu64 " answers, b lost %" PRIu64 " requests\n",
	       stats_of(&P.a).fault_drops, stats_of(&P.b).fault_drops);
	ASSERT_GE(stats_of(&P.a).fault_drops, 1);
	sv_pair_close(&P);
}

/* Drives e until its link is up (over TCP the connection is made after
 * RTR, and a 1 ms timer would otherwise count the set-up as lost sends). */
static void wait_link_up(struct sv_end *e)
{
	uint64_t until = sv_now_ms() + 10000;
	struct ibv_wc wc;

	while (LOAD(to_sqp(e->qp)->link.state) != SV_LINK_UP &&
	       sv_now_ms() < until)
		ASSERT_EQ(0, ibv_poll_cq(e->scq, 1, &wc));
	ASSERT_EQ(SV_LINK_UP, LOAD(to_sqp(e->qp)->link.state));
}

/* Every packet lost: the local ACK timeout resends retry_cnt times, then
 * IBV_WC_RETRY_EXC_ERR. */
SV_TEST(faults_drop_all_retry_exceeded)
{
	struct sv_end_opts o = sv_end_opts_default();
	bool tcp = getenv("SOFTVERBS_TRANSPORT") &&
		   !strcmp(getenv("SOFTVERBS_TRANSPORT"), "tcp");
	uint64_t until, drops;
	struct sv_pair P;
	struct ibv_wc wc;
	int n = 0;

	set_faults("drop=1");
	o.timeout = 12; /* 16.8 ms: b gets to run between a's tries */
	o.retry_cnt = 3;
	sv_pair_open(&P, &o, &o);
	ASSERT_OK(sv_end_recv(&P.b, 2, 0, 64));
	wait_link_up(&P.a);
	ASSERT_OK(sv_end_send(&P.a, 1, 0, 64, 0));
	/* b driven too: each try is taken (and lost) as it comes */
	until = sv_now_ms() + 10000;
	while (n == 0 && sv_now_ms() < until) {
		ASSERT_EQ(0, ibv_poll_cq(P.b.rcq, 1, &wc)); /* all lost */
		n = ibv_poll_cq(P.a.scq, 1, &wc);
		ASSERT_GE(n, 0);
	}
	ASSERT_EQ(1, n);
	ASSERT_EQ(IBV_WC_RETRY_EXC_ERR, wc.status);
	ASSERT_EQ(1, wc.wr_id);
	ASSERT_EQ(3, stats_of(&P.a).ack_timeouts);
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&P.a));
	/* the first try and 3 resends; over TCP the last may go down with
	 * the connection when a's QP fails (the IBA loses what is in flight
	 * then), and b need not have run between a's tries on a loaded
	 * machine (with 1 ms tries, 1 run in 30 under load 16 saw only the
	 * first): at least one resend reached it */
	until = sv_now_ms() + 10000;
	while ((drops = stats_of(&P.b).fault_drops) < (tcp ? 2u : 4u) &&
	       sv_now_ms() < until)
		ASSERT_EQ(0, ibv_poll_cq(P.b.rcq, 1, &wc));
	if (tcp)
		ASSERT_GE(drops, 2);
	else
		ASSERT_EQ(4, drops);
	ASSERT_TRUE(drops <= 4);
	sv_pair_close(&P);
}

/* rnr=1: a receive is posted, but every send is answered RNR NAK: the
 * requester fails IBV_WC_RNR_RETRY_EXC_ERR after rnr_retry retries.  A
 * responder over a connection keeps the packet it NAKed, once; over
 * RoCE it drops it and NAKs each of the rnr_retry copies again. */
SV_TEST(faults_rnr_retry_exceeded)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct sv_pair P;
	struct sv_qp_stats sa, sb;
	uint64_t naks = sv_test_roce() ? 4 : 1;

	set_faults("rnr=1.0");
	o.rnr_retry = 3;
	o.min_rnr_timer = 1; /* 10 µs */
	sv_pair_open(&P, &o, &o);
	ASSERT_OK(sv_end_recv(&P.b, 2, 0, 64));
	ASSERT_OK(sv_end_send(&P.a, 1, 0, 64, 0));
	EXPECT_WC(P.a.scq, IBV_WC_RNR_RETRY_EXC_ERR, 1);
	sa = stats_of(&P.a);
	sb = stats_of(&P.b);
	ASSERT_GE(sb.fault_rnr, 1);
	ASSERT_EQ(naks, sb.rnr_nak_sent);
	ASSERT_EQ(naks, sa.rnr_nak_recv);
	NO_WC(P.b.rcq, 20); /* the receive was never taken */
	sv_pair_close(&P);
}

/*
 * delay_us=N: each request leaves N µs after its post, as through a
 * delay line, and its ACK is taken N after it came: one message arrives
 * no sooner than N after it was posted and completes no sooner than 2 N;
 * 8 posted together arrive about N later, not 8 N (they travel
 * together).  Refused as unimplemented before, so the open failed.
 */
SV_TEST(faults_delay_holds_each_request)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct sv_pair P;
	uint64_t t0, dt;

	set_faults("delay_us=50000");
	sv_pair_open(&P, &o, &o);
	ASSERT_OK(sv_end_recv(&P.b, 1, 0, 64));
	t0 = sv_now_ms();
	ASSERT_OK(sv_end_send(&P.a, 1, 0, 64, 0));
	EXPECT_WC(P.b.rcq, IBV_WC_SUCCESS, 1);
	dt = sv_now_ms() - t0;
	ASSERT_GE(dt, 50);
	EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 1);
	dt = sv_now_ms() - t0;
	ASSERT_GE(dt, 100); /* the request's way and the ACK's */
	for (uint32_t k = 0; k < 8; k++)
		ASSERT_OK(sv_end_recv(&P.b, 10 + k, 64 * k, 64));
	t0 = sv_now_ms();
	for (uint32_t k = 0; k < 8; k++)
		ASSERT_OK(sv_end_send(&P.a, 10 + k, 64 * k, 64, 0));
	for (uint32_t k = 0; k < 8; k++)
		EXPECT_WC(P.b.rcq, IBV_WC_SUCCESS, 10 + k);
	dt = sv_now_ms() - t0;
	printf("8 sends through a 50 ms delay line: %llu ms\n",
	       (unsigned long long)dt);
	ASSERT_GE(dt, 50);
	ASSERT_LE(dt, 8 * 50 - 1);
	for (uint32_t k = 0; k < 8; k++)
		EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 10 + k);
	dt = sv_now_ms() - t0;
	printf("... and their ACKs: %llu ms\n", (unsigned long long)dt);
	ASSERT_GE(dt, 100);
	ASSERT_LE(dt, 8 * 2 * 50 - 1);
	sv_pair_close(&P);
}

/* Posts a signalled read of len bytes: e's buf[off..] from the peer's
 * buf[off..]. */
static void post_read(struct sv_end *e, struct sv_end *peer, uint64_t id,
		      size_t off, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf + off,
			      .length = len,
			      .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)peer->buf + off;
	wr.wr.rdma.rkey = peer->mr->rkey;
	ASSERT_OK(ibv_post_send(e->qp, &wr, &bad));
}

/*
 * delay_us=N holds the answers too: a read's or an atomic's response is
 * taken N after it came (comp.c delay_back), so each completes no sooner
 * than 2 N after its post, the round trip.  8 reads posted together, and
 * one read of 1 MiB (256 packets of 4 KiB), complete about 2 N later,
 * not 8 or 256 times that: answers made together are taken together.
 * With faults on there are no direct one-sided operations (qp.c), so
 * every read and atomic goes both ways.  Before, the answers were not
 * held: a read completed N after its post.
 */
SV_TEST(faults_delay_holds_read_and_atomic)
{
	const uint32_t len = 4096, big = 1u << 20, atom = 16 * len + big;
	struct sv_end_opts o = sv_end_opts_default();
	struct sv_qp *qa;
	struct sv_pair P;
	uint64_t t0, dt, old, one;

	set_faults("delay_us=50000");
	/* every read from its own bytes, never written again: the rings'
	 * two mappings hide their ordering from TSan (label tsan) */
	o.buf_len = 2 * (size_t)big;
	o.mtu = IBV_MTU_4096;
	o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	o.qp_access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
		      IBV_ACCESS_REMOTE_ATOMIC;
	o.rd_atomic = 8;
	sv_pair_open(&P, &o, &o);
	qa = to_sqp(P.a.qp);

	/* one read */
	fill_msg(P.b.buf, len, 1);
	t0 = sv_now_ms();
	post_read(&P.a, &P.b, 1, 0, len);
	EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 1);
	dt = sv_now_ms() - t0;
	printf("a read through a 50 ms delay line: %llu ms\n",
	       (unsigned long long)dt);
	ASSERT_GE(dt, 100); /* the request's way and the answer's */
	ASSERT_EQ(-1, check_msg(P.a.buf, len, 1));
	/* what follows is judged against this round trip, measured here:
	 * held one after another, 8 reads would take 8 of them (the bound
	 * was a fixed 399 ms, which TSan's build passed at 449) */
	one = dt;

	/* one atomic */
	{
		struct ibv_sge sge = {.addr = (uintptr_t)P.a.buf + atom,
				      .length = 8,
				      .lkey = P.a.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 2,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		old = 41;
		memcpy(P.b.buf + atom, &old, 8);
		wr.wr.atomic.remote_addr = (uintptr_t)P.b.buf + atom;
		wr.wr.atomic.rkey = P.b.mr->rkey;
		wr.wr.atomic.compare_add = 1;
		t0 = sv_now_ms();
		ASSERT_OK(ibv_post_send(P.a.qp, &wr, &bad));
		EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 2);
		dt = sv_now_ms() - t0;
		printf("an atomic: %llu ms\n", (unsigned long long)dt);
		ASSERT_GE(dt, 100);
		memcpy(&old, P.a.buf + atom, 8);
		ASSERT_EQ(41, old);
		ASSERT_EQ(42, __atomic_load_n((uint64_t *)(P.b.buf + atom),
					      __ATOMIC_ACQUIRE));
	}

	/* 8 reads posted together travel together */
	for (uint32_t k = 0; k < 8; k++)
		fill_msg(P.b.buf + (size_t)(k + 1) * len, len, 10 + k);
	t0 = sv_now_ms();
	for (uint32_t k = 0; k < 8; k++)
		post_read(&P.a, &P.b, 10 + k, (size_t)(k + 1) * len, len);
	for (uint32_t k = 0; k < 8; k++)
		EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 10 + k);
	dt = sv_now_ms() - t0;
	printf("8 reads posted together: %llu ms\n", (unsigned long long)dt);
	ASSERT_GE(dt, 100);
	ASSERT_LE(dt, 4 * one);
	for (uint32_t k = 0; k < 8; k++)
		ASSERT_EQ(-1, check_msg(P.a.buf + (size_t)(k + 1) * len, len,
					10 + k));

	/* a read of 256 packets: one delay, not one per packet */
	fill_msg(P.b.buf + 16 * len, big, 20);
	t0 = sv_now_ms();
	post_read(&P.a, &P.b, 20, 16 * len, big);
	EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 20);
	dt = sv_now_ms() - t0;
	printf("a read of 1 MiB: %llu ms\n", (unsigned long long)dt);
	ASSERT_GE(dt, 100);
	ASSERT_LE(dt, 4 * one);
	ASSERT_EQ(-1, check_msg(P.a.buf + 16 * len, big, 20));

	ASSERT_EQ(0, LOAD(qa->stats.direct_ops));
	ASSERT_EQ(0, LOAD(to_sqp(P.b.qp)->stats.direct_ops));
	sv_pair_close(&P);
}

/*
 * The answers and the ACK/NAK word keep their order through the delay
 * line: a read, then a write to a bad key.  The responder answers the
 * read, then NAKs the write (remote access); the read must complete with
 * its data, then the write with IBV_WC_REM_ACCESS_ERR.  A NAK taken
 * before the read's answer fails the read instead.
 */
SV_TEST(faults_delay_keeps_answer_before_nak)
{
	const uint32_t len = 4096;
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_sge sge;
	struct ibv_send_wr wr = {0}, *bad;
	struct sv_pair P;
	uint64_t t0, dt;

	set_faults("delay_us=50000");
	if (sv_test_roce())	/* its timer is the QP's (67 ms): longer than */
		o.timeout = 18; /* the 100 ms round trip, 1.07 s */
	o.mtu = IBV_MTU_4096;
	o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		      IBV_ACCESS_REMOTE_WRITE;
	o.qp_access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	sv_pair_open(&P, &o, &o);
	fill_msg(P.b.buf, len, 5);
	t0 = sv_now_ms();
	post_read(&P.a, &P.b, 1, 0, len);
	sge = (struct ibv_sge){.addr = (uintptr_t)P.a.buf + len,
			       .length = 64,
			       .lkey = P.a.mr->lkey};
	wr.wr_id = 2;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)P.b.buf + len;
	wr.wr.rdma.rkey = P.b.mr->rkey ^ 0x5a5a00; /* no such key */
	ASSERT_OK(ibv_post_send(P.a.qp, &wr, &bad));
	EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 1);
	ASSERT_EQ(-1, check_msg(P.a.buf, len, 5));
	EXPECT_WC(P.a.scq, IBV_WC_REM_ACCESS_ERR, 2);
	dt = sv_now_ms() - t0;
	ASSERT_GE(dt, 100);
	sv_pair_close(&P);
}

/*
 * delay_us=N on UD: a datagram leaves N after its post (ud/send.c
 * sv_ud_send_run), so it arrives no sooner than N later; 8 posted
 * together arrive together, in order, about N later, not 8 N.  Before,
 * datagrams were not delayed.
 */
SV_TEST(faults_delay_holds_ud_datagrams)
{
	const uint32_t len = 256, qkey = 0x31313131u;
	struct ud_end s, r;
	struct ud_end_opts o = ud_end_opts(16, 64 * 1024, qkey);
	struct ibv_wc wc;
	uint64_t t0, dt;

	set_faults("delay_us=50000");
	o.ah = true;
	ud_end_open(&s, &o);
	ud_end_open(&r, &o);
	ASSERT_OK(ud_end_recv(&r, r.qp, 1, 0, UD_GRH + len));
	sv_fill(s.buf, len, 1);
	t0 = sv_now_ms();
	ASSERT_OK(ud_end_send(&s, s.qp, 1, IBV_WR_SEND, 0, len, s.ah,
			      r.qp->qp_num, qkey));
	WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
	dt = sv_now_ms() - t0;
	printf("a datagram through a 50 ms delay line: %llu ms\n",
	       (unsigned long long)dt);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(1, wc.wr_id);
	ASSERT_EQ(UD_GRH + len, wc.byte_len);
	ASSERT_EQ(-1, sv_check(r.buf + UD_GRH, len, 1));
	ASSERT_GE(dt, 50);
	EXPECT_WC(s.scq, IBV_WC_SUCCESS, 1);

	for (uint32_t k = 0; k < 8; k++) {
		ASSERT_OK(ud_end_recv(&r, r.qp, 10 + k,
				      (size_t)k * (UD_GRH + len),
				      UD_GRH + len));
		sv_fill(s.buf + (size_t)k * len, len, 10 + k);
	}
	t0 = sv_now_ms();
	for (uint32_t k = 0; k < 8; k++)
		ASSERT_OK(ud_end_send(&s, s.qp, 10 + k, IBV_WR_SEND,
				      (size_t)k * len, len, s.ah, r.qp->qp_num,
				      qkey));
	for (uint32_t k = 0; k < 8; k++) {
		WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(10 + k, wc.wr_id); /* in order */
		ASSERT_EQ(-1,
			  sv_check(r.buf + (size_t)k * (UD_GRH + len) + UD_GRH,
				   len, 10 + k));
	}
	dt = sv_now_ms() - t0;
	printf("8 datagrams posted together: %llu ms\n",
	       (unsigned long long)dt);
	ASSERT_GE(dt, 50);
	ASSERT_LE(dt, 8 * 50 - 1);
	for (uint32_t k = 0; k < 8; k++)
		EXPECT_WC(s.scq, IBV_WC_SUCCESS, 10 + k);
	ud_end_close(&s);
	ud_end_close(&r);
}

/* rnr=0.5: some sends are refused for a while, all arrive. */
SV_TEST(faults_rnr_some_recover)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct sv_pair P;

	set_faults("rnr=0.5,seed=2");
	o.min_rnr_timer = 1;
	sv_pair_open(&P, &o, &o);
	for (uint32_t k = 0; k < 50; k++) {
		ASSERT_OK(sv_end_recv(&P.b, k, 0, 64));
		ASSERT_OK(sv_end_send(&P.a, k, 0, 64, 0));
		EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, k);
		EXPECT_WC(P.b.rcq, IBV_WC_SUCCESS, k);
	}
	ASSERT_GE(stats_of(&P.b).fault_rnr, 5);
	sv_pair_close(&P);
}

/* access=1: a write, a read and an atomic each complete
 * IBV_WC_REM_ACCESS_ERR at the requester. */
SV_TEST(faults_access_write_read_atomic)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP};

	set_faults("access=1");
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct sv_end_opts o = sv_end_opts_default();
		struct sv_pair P;
		struct ibv_sge sge;
		struct ibv_send_wr wr = {0}, *bad;

		o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_ATOMIC;
		o.qp_access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_ATOMIC;
		sv_pair_open(&P, &o, &o);
		sge = (struct ibv_sge){.addr = (uintptr_t)P.a.buf,
				       .length = 8,
				       .lkey = P.a.mr->lkey};
		wr.wr_id = 7;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = ops[i];
		wr.send_flags = IBV_SEND_SIGNALED;
		if (ops[i] == IBV_WR_RDMA_WRITE || ops[i] == IBV_WR_RDMA_READ) {
			wr.wr.rdma.remote_addr = (uintptr_t)P.b.buf;
			wr.wr.rdma.rkey = P.b.mr->rkey;
		} else {
			wr.wr.atomic.remote_addr = (uintptr_t)P.b.buf;
			wr.wr.atomic.rkey = P.b.mr->rkey;
		}
		ASSERT_OK(ibv_post_send(P.a.qp, &wr, &bad));
		EXPECT_WC(P.a.scq, IBV_WC_REM_ACCESS_ERR, 7);
		ASSERT_EQ(1, stats_of(&P.b).fault_access);
		sv_pair_close(&P);
	}
}

/* drop=1 on UC: the message is lost, the sender completes (UC is not
 * acknowledged), the receiver sees nothing and goes on. */
SV_TEST(faults_drop_uc_lost)
{
	struct sv_pair P;
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_qp_init_attr ia = {0};

	set_faults("drop=1");
	sv_end_open(&P.a, &o);
	sv_end_open(&P.b, &o);
	/* the same ends, with UC QPs */
	for (int i = 0; i < 2; i++) {
		struct sv_end *e = i ? &P.b : &P.a;

		ASSERT_OK(ibv_destroy_qp(e->qp));
		ia.send_cq = e->scq;
		ia.recv_cq = e->rcq;
		ia.qp_type = IBV_QPT_UC;
		ia.sq_sig_all = 1;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		e->qp = ibv_create_qp(e->pd, &ia);
		ASSERT_NOT_NULL(e->qp);
	}
	for (int i = 0; i < 2; i++) {
		struct sv_end *e = i ? &P.b : &P.a, *peer = i ? &P.a : &P.b;
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
					.port_num = 1};

		ASSERT_OK(ibv_modify_qp(e->qp, &a,
					IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						IBV_QP_PORT |
						IBV_QP_ACCESS_FLAGS));
		a = (struct ibv_qp_attr){
			.qp_state = IBV_QPS_RTR,
			.path_mtu = IBV_MTU_1024,
			.dest_qp_num = peer->qp->qp_num,
			.rq_psn = 0x100,
			.ah_attr = {.dlid = peer->lid, .port_num = 1}};
		ASSERT_OK(ibv_modify_qp(
			e->qp, &a,
			IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				IBV_QP_DEST_QPN | IBV_QP_RQ_PSN));
	}
	for (int i = 0; i < 2; i++) {
		struct sv_end *e = i ? &P.b : &P.a;
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS,
					.sq_psn = 0x100};

		ASSERT_OK(
			ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
	}
	ASSERT_OK(sv_end_recv(&P.b, 2, 0, 4096));
	ASSERT_OK(sv_end_send(&P.a, 1, 0, 2048, 0));
	EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 1);
	NO_WC(P.b.rcq, 50);
	/* over RoCE each of its two packets was lost on the wire */
	ASSERT_EQ(sv_test_roce() ? 2 : 1, stats_of(&P.b).fault_drops);
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&P.b));
	sv_pair_close(&P);
}

/* A bad spec refuses softverbs0 (provider/lib/env.c's REFUSE policy):
 * ibv_get_device_list lists nothing, errno EINVAL, with one stderr line
 * naming the variable, the spec and the key; each in its own process
 * (read once). */
static int list_is_empty(void)
{
	struct ibv_device **l;
	int n;

	errno = 0;
	l = ibv_get_device_list(&n);
	if (!l || n != 0 || l[0])
		return 2;
	return errno == EINVAL ? 0 : 4;
}

static void bad_spec(const char *spec, const char *key)
{
	char lines[2][SV_CHILD_LINE];
	int n, rc;

	rc = sv_child_env("SOFTVERBS_FAULTS", spec, list_is_empty, lines, 2,
			  &n);
	if (rc)
		sv_test_fail(__FILE__, __LINE__, "spec '%s': child exit %d",
			     spec, rc);
	ASSERT_EQ(1, n); /* one line */
	if (!strstr(lines[0], "SOFTVERBS_FAULTS=") || !strstr(lines[0], spec) ||
	    !strstr(lines[0], key) || !strstr(lines[0], "refusing"))
		sv_test_fail(__FILE__, __LINE__, "spec '%s': said '%s'", spec,
			     lines[0]);
}

SV_TEST(faults_bad_spec_refuses_device)
{
	bad_spec("drop=1.5", "'drop'");
	bad_spec("rnr=-0.1", "'rnr'");
	bad_spec("access=x", "'access'");
	bad_spec("bogus=1", "'bogus'");
	bad_spec("drop=0.1,seed", "'seed'");
	bad_spec("seed=1,kill_at=", "'kill_at'");
	bad_spec("junk", "'junk'");
	bad_spec("drop=0.1,", "''");
}

/*
 * kill_at=N: the peer (a child with the spec) dies by SIGKILL after its
 * N-th packet; the survivor sees the statuses of a peer's death: its QP
 * in ERROR with IBV_EVENT_QP_FATAL, the receives left flushed
 * (IBV_WC_WR_FLUSH_ERR) after the messages that arrived.
 */
SV_TEST(faults_kill_at_peer_dies)
{
	const int nmsg = 10, kill_at = 4;
	int down[2], up[2], st, ok = 0, flushed = 0;
	uint32_t qpn, peer;
	struct ibv_async_event ev;
	struct sv_end e;
	pid_t pid;
	uint64_t end;

	sv_test_not_roce(SV_ROCE_NO_DEATH_NOTICE);
	ASSERT_OK(pipe(down));
	ASSERT_OK(pipe(up));
	fflush(NULL);
	pid = fork(); /* before any verbs object exists in the parent */
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		struct sv_end p;
		struct ibv_wc wc;
		char spec[32];

		alarm(60);
		close(down[1]);
		close(up[0]);
		snprintf(spec, sizeof(spec), "kill_at=%d", kill_at);
		setenv("SOFTVERBS_FAULTS", spec, 1);
		sv_end_open(&p, NULL);
		qpn = p.qp->qp_num;
		if (write(up[1], &qpn, 4) != 4 || read(down[0], &peer, 4) != 4)
			_exit(2);
		sv_end_connect(&p, peer, 0x1234);
		if (read(down[0], &qpn, 1) != 1) /* its receives are up */
			_exit(3);
		for (int i = 0; i < nmsg; i++) {
			if (sv_end_send(&p, (uint64_t)i, 0, 64, 0))
				_exit(4);
			if (!sv_wc_poll(p.scq, &wc, 10000) ||
			    wc.status != IBV_WC_SUCCESS)
				_exit(5);
		}
		_exit(0); /* never: the 4th send kills us */
	}
	close(down[0]);
	close(up[1]);
	sv_end_open(&e, NULL);
	ASSERT_EQ(4, read(up[0], &peer, 4));
	qpn = e.qp->qp_num;
	ASSERT_EQ(4, write(down[1], &qpn, 4));
	sv_end_connect(&e, peer, 0x1234);
	for (int i = 0; i < nmsg; i++)
		ASSERT_OK(sv_end_recv(&e, (uint64_t)i, 0, 64));
	ASSERT_EQ(1, write(down[1], "g", 1));
	end = sv_now_ms() + 20000;
	while (ok + flushed < nmsg) {
		struct ibv_wc wc;

		ASSERT_TRUE(sv_now_ms() < end);
		if (ibv_poll_cq(e.rcq, 1, &wc) != 1)
			continue;
		if (wc.status == IBV_WC_SUCCESS) {
			ASSERT_EQ(0, flushed); /* in order */
			ok++;
		} else {
			ASSERT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status);
			flushed++;
		}
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	/* over shared memory the 4th send was in our ring before the kill;
	 * over TCP it may not have left the peer */
	ASSERT_TRUE(ok == kill_at || (sv_test_wire() && ok == kill_at - 1));
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&e));
	ASSERT_OK(ibv_get_async_event(e.ctx, &ev));
	ASSERT_EQ(IBV_EVENT_QP_FATAL, ev.event_type);
	ibv_ack_async_event(&ev);
	close(down[1]);
	close(up[0]);
	sv_end_close(&e);
}

/*
 * No faults: two sends in one post, one receive.  The responder takes the
 * first and answers the second RNR NAK in the same run; the run's ACK of
 * the first must not overwrite that NAK (it did: the requester never
 * learnt of the RNR, and the second send waited forever instead of
 * failing after rnr_retry).
 */
SV_TEST(rnr_nak_not_hidden_by_ack_of_same_run)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_sge sge[2];
	struct ibv_send_wr wr[2], *bad;
	struct sv_pair P;

	o.rnr_retry = 1;
	o.min_rnr_timer = 1;
	sv_pair_open(&P, &o, &o);
	ASSERT_OK(sv_end_recv(&P.b, 9, 0, 64));
	for (int i = 0; i < 2; i++) {
		sge[i] = (struct ibv_sge){.addr = (uintptr_t)P.a.buf + 64 * i,
					  .length = 64,
					  .lkey = P.a.mr->lkey};
		wr[i] = (struct ibv_send_wr){.wr_id = (uint64_t)i,
					     .next = i ? NULL : &wr[1],
					     .sg_list = &sge[i],
					     .num_sge = 1,
					     .opcode = IBV_WR_SEND};
	}
	ASSERT_OK(ibv_post_send(P.a.qp, wr, &bad));
	EXPECT_WC(P.b.rcq, IBV_WC_SUCCESS, 9);
	EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 0);
	EXPECT_WC(P.a.scq, IBV_WC_RNR_RETRY_EXC_ERR, 1);
	sv_pair_close(&P);
}
