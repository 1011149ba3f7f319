// SPDX-License-Identifier: MIT
/*
 * The engine's pure parts, in milliseconds: PSN arithmetic (24-bit,
 * modulo 2^24), the ring's record protocol (seq words, pads at the wrap,
 * flow control, what the receiver refuses), the ack word's codec, the QP
 * state transition table of RC, UC and UD against the IBA's (written out
 * here, not read from the provider), and the opcode table's properties.
 * Linked with the provider's ring.c, opcode.c and qp_state.c only.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crc32c.h"
#include "qp_state.h"
#include "ring.h"
#include "sv_test.h"
#include "wire.h"

SV_TEST(psn_diff_is_signed_24_bit)
{
	static const uint32_t base[] = {0,	  1,	    0x7fffff, 0x800000,
					0xfffffe, 0xffffff, 0x123456};

	ASSERT_EQ(1, sv_psn_diff(0, 0xffffff));
	ASSERT_EQ(-1, sv_psn_diff(0xffffff, 0));
	ASSERT_EQ(0x7fffff, sv_psn_diff(0x7fffff, 0));
	ASSERT_EQ(-0x800000, sv_psn_diff(0x800000, 0));
	/* bits above 24 do not count (IBA 9.7.1: the PSN field is 24) */
	ASSERT_EQ(0, sv_psn_diff(0x1000005, 5));
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
		for (int32_t d = -0x800000; d < 0x800000; d += 0x1357)
			ASSERT_EQ(d,
				  sv_psn_diff(sv_psn_add(base[i], (uint32_t)d),
					      base[i]));
}

SV_TEST(psn_add_wraps_at_2_24)
{
	ASSERT_EQ(0u, sv_psn_add(0xffffff, 1));
	ASSERT_EQ(5u, sv_psn_add(0xfffffe, 7));
	ASSERT_EQ(0xfffffeu, sv_psn_add(0xffffff, SV_PSN_MASK)); /* - 1 */
	ASSERT_EQ(0x10u, sv_psn_add(0x10, 1u << 24));
}

/* ring.h: the seq word the receiver polls holds ~sv_rec_seq of an older
 * position, never the seq it waits for, whatever the lap. */
SV_TEST(rec_seq_poison_never_matches)
{
	ASSERT_EQ(1u, sv_rec_seq(0)); /* a zero-filled ring looks empty */
	ASSERT_EQ(2u, sv_rec_seq(64));
	for (uint64_t size = 4096; size <= (1ull << 30); size <<= 1)
		for (uint64_t pos = size * 3; pos < size * 3 + 64 * 4096;
		     pos += 64 * 97)
			for (uint64_t k = 0; k <= 3; k++) {
				ASSERT_NE(sv_rec_seq(pos),
					  ~sv_rec_seq(pos - k * size));
				if (k)
					ASSERT_NE(sv_rec_seq(pos),
						  sv_rec_seq(pos - k * size));
			}
}

/* A receiver's ring and a sender's mapping of it, in this process. */
struct pair {
	struct sv_ring rx, tx;
	int fd;
};

static void pair_open(struct pair *p, uint64_t size)
{
	ASSERT_OK(sv_ring_create(&p->rx, size, 0, 0x1234, &p->fd));
	ASSERT_OK(sv_ring_attach(&p->tx, p->fd, 0x1234));
	ASSERT_EQ(size, p->tx.size);
}

static void pair_close(struct pair *p)
{
	sv_ring_unmap(&p->tx);
	sv_ring_unmap(&p->rx);
	close(p->fd);
}

/* Sends one record of plen payload bytes (byte i = tag + i); false when
 * the ring is full. */
static bool put(struct pair *p, uint32_t plen, uint8_t tag)
{
	int err = 0;
	struct sv_pkt *k = sv_ring_reserve(&p->tx, sizeof(*k) + plen, &err);

	ASSERT_OK(err);
	if (!k)
		return false;
	for (uint32_t i = 0; i < plen; i++)
		((uint8_t *)(k + 1))[i] = (uint8_t)(tag + i);
	memset(k, 0, offsetof(struct sv_pkt, seq));
	k->opcode = SV_OP_SEND;
	k->len = plen;
	k->psn = tag;
	k->rec_len = p->tx.last_rec;
	sv_ring_publish(&p->tx, k);
	return true;
}

static void take(struct pair *p, uint32_t plen, uint8_t tag)
{
	struct sv_pkt k;
	const uint8_t *pl;

	ASSERT_EQ(1, sv_ring_peek(&p->rx, &k, &pl));
	ASSERT_EQ(plen, k.len);
	ASSERT_EQ(tag, k.psn);
	for (uint32_t i = 0; i < plen; i++)
		ASSERT_EQ((uint8_t)(tag + i), pl[i]);
	sv_ring_consume(&p->rx);
}

SV_TEST(ring_records_round_trip_across_laps)
{
	/* up to half the ring: what the requester's and responder's
	 * trains are held to, so that one always fits an empty ring */
	static const uint32_t lens[] = {0, 1, 31, 32, 33, 100, 1000, 2048 - 32};
	struct pair p;
	struct sv_pkt k;
	const uint8_t *pl;
	uint8_t tag = 0;

	pair_open(&p, 4096);
	ASSERT_EQ(0, sv_ring_peek(&p.rx, &k, &pl)); /* new: empty */
	/* many laps of a 4 KiB ring, records of every size: pads at the
	 * wrap, records never split, each taken once in order */
	for (int i = 0; i < 2000; i++) {
		uint32_t n = lens[i % 8];

		ASSERT_TRUE(put(&p, n, tag));
		take(&p, n, tag);
		ASSERT_EQ(0, sv_ring_peek(&p.rx, &k, &pl));
		tag++;
	}
	ASSERT_TRUE(p.rx.tail > 10 * 4096);
	ASSERT_EQ(p.rx.tail, atomic_load(&p.rx.hdr->tail));
	pair_close(&p);
}

SV_TEST(ring_full_until_the_receiver_consumes)
{
	struct pair p;
	int n = 0;

	pair_open(&p, 4096);
	while (put(&p, 100, (uint8_t)n)) /* 192-byte records */
		n++;
	ASSERT_EQ(4096 / 192, n); /* everything that fits, nothing more */
	take(&p, 100, 0);
	take(&p, 100, 1);
	/* two records freed, but the next does not fit before the end:
	 * a pad and a record at 0 need the first line free again */
	ASSERT_TRUE(put(&p, 100, 0x77));
	for (int i = 2; i < n; i++)
		take(&p, 100, (uint8_t)i);
	take(&p, 100, 0x77);
	pair_close(&p);
}

SV_TEST(ring_reserve_refuses_a_corrupt_tail)
{
	struct pair p;
	int err = 0;

	pair_open(&p, 4096);
	ASSERT_TRUE(put(&p, 10, 1));
	atomic_store(&p.rx.hdr->tail, 1ull << 40); /* past our head */
	/* the cached tail serves until the ring looks full; then the
	 * sender reads the peer's and refuses it */
	for (int i = 0; i < 64 && !err; i++)
		if (!sv_ring_reserve(&p.tx, 64, &err))
			break;
	ASSERT_EQ(-EPROTO, err);
	pair_close(&p);
}

/* Writes a raw record header at the receiver's tail, seq right. */
static void raw(struct pair *p, uint8_t op, uint32_t len, uint32_t rec_len)
{
	struct sv_pkt *k =
		(struct sv_pkt *)(p->rx.data + (p->rx.tail & (p->rx.size - 1)));

	memset(k, 0, sizeof(*k));
	k->opcode = op;
	k->len = len;
	k->rec_len = rec_len;
	sv_ring_release(k, p->rx.tail);
}

SV_TEST(ring_peek_refuses_what_is_not_a_record)
{
	struct pair p;
	struct sv_pkt k;
	const uint8_t *pl;

	pair_open(&p, 4096);
	raw(&p, SV_OP_SEND, 0, 0); /* no length */
	ASSERT_EQ(-EPROTO, sv_ring_peek(&p.rx, &k, &pl));
	raw(&p, SV_OP_SEND, 0, 96); /* not 64-aligned */
	ASSERT_EQ(-EPROTO, sv_ring_peek(&p.rx, &k, &pl));
	raw(&p, SV_OP_SEND, 0, 4096 + 64); /* past the end */
	ASSERT_EQ(-EPROTO, sv_ring_peek(&p.rx, &k, &pl));
	raw(&p, SV_OP_SEND, 33, 64); /* payload past the record */
	ASSERT_EQ(-EPROTO, sv_ring_peek(&p.rx, &k, &pl));
	raw(&p, SV_OP_PAD, 0, 64); /* a pad that stops short of the end */
	ASSERT_EQ(-EPROTO, sv_ring_peek(&p.rx, &k, &pl));
	raw(&p, SV_OP_SEND, 32, 64); /* the largest payload a line holds */
	ASSERT_EQ(1, sv_ring_peek(&p.rx, &k, &pl));
	ASSERT_EQ(32u, k.len);
	sv_ring_consume(&p.rx);
	/* a stale seq (the previous lap's) is not a record */
	((struct sv_pkt *)(p.rx.data + 64))->seq = sv_rec_seq(64 - 4096);
	ASSERT_EQ(0, sv_ring_peek(&p.rx, &k, &pl));
	pair_close(&p);
}

SV_TEST(ring_peek_takes_a_pad_to_the_end)
{
	struct pair p;
	struct sv_pkt k;
	const uint8_t *pl;

	pair_open(&p, 4096);
	raw(&p, SV_OP_PAD, 0, 4096); /* a pad may fill the whole lap */
	ASSERT_EQ(0, sv_ring_peek(&p.rx, &k, &pl));
	ASSERT_EQ(4096u, p.rx.tail);
	pair_close(&p);
}

/* The highest ring offset a ping-pong of n records of plen bytes uses. */
static uint64_t pingpong_reach(struct pair *p, int n, uint32_t plen)
{
	uint64_t highest = 0;

	for (int i = 0; i < n; i++) {
		ASSERT_TRUE(put(p, plen, (uint8_t)i));
		if ((p->tx.last_pos & (p->tx.size - 1)) > highest)
			highest = p->tx.last_pos & (p->tx.size - 1);
		take(p, plen, (uint8_t)i);
	}
	return highest;
}

/* A ping-pong's records stay in the ring's first eighth (and one
 * record): each time the receiver has emptied the ring, the next record
 * past it starts the ring over. */
SV_TEST(ring_emptied_starts_over)
{
	struct pair p;
	uint64_t highest;

	pair_open(&p, 64 * SV_RING_REWIND);
	highest = pingpong_reach(&p, 2000, 4000);
	ASSERT_TRUE(p.rx.tail > 2 * p.rx.size); /* laps were made */
	ASSERT_TRUE(highest < p.tx.size / 8);
	pair_close(&p);
}

/* Records of 4,000 bytes put and taken until the lap is past an eighth
 * of the ring (where an emptied ring starts over); how many. */
static int past_an_eighth(struct pair *p)
{
	int n = 0;

	while (p->tx.head < p->tx.size / 8) {
		ASSERT_TRUE(put(p, 4000, (uint8_t)n));
		take(p, 4000, (uint8_t)n);
		n++;
	}
	return n;
}

/* After a start-over, an eighth of the ring is free at once, before the
 * receiver passes the pad: a burst that must not wait for room (RoCE's
 * receive path) fits, up to that. */
SV_TEST(ring_start_over_leaves_an_eighth)
{
	struct pair p;
	uint64_t size = 64 * SV_RING_REWIND;
	int n;

	pair_open(&p, size);
	/* to just past an eighth, each record taken: the next starts over */
	n = past_an_eighth(&p);
	ASSERT_TRUE(put(&p, 4000, (uint8_t)n++));
	ASSERT_EQ(0u, p.tx.last_pos & (size - 1)); /* started over */
	for (uint64_t got = 4032; got + 4032 <= size / 8; got += 4032)
		ASSERT_TRUE(put(&p, 4000, (uint8_t)n++));
	pair_close(&p);
}

/* An emptied ring is not started over for a record longer than where
 * the lap stands: after the pad it would not fit until the receiver
 * passed the pad, which is published only with it.  The reserve failed
 * with the ring empty, and a responder then waited for room for ever
 * (a 256 KiB response ring, a 64 KiB read answered at 32,832: perftest
 * ib_read_lat -c XRC -a).  It goes where the lap stands instead; a
 * shorter one still starts over. */
SV_TEST(ring_emptied_keeps_a_record_longer_than_the_start_over)
{
	struct pair p;
	uint64_t size = 16 * SV_RING_REWIND;	  /* a response ring's */
	uint32_t big = (uint32_t)(size / 4) - 64; /* its longest train */
	uint64_t at;

	pair_open(&p, size);
	/* just past an eighth, each record taken: the ring is empty */
	past_an_eighth(&p);
	at = p.tx.head;
	ASSERT_TRUE(at < big); /* longer than the lap so far */
	ASSERT_TRUE(put(&p, big, 0x5a));
	ASSERT_EQ(at, p.tx.last_pos); /* in place, no pad */
	take(&p, big, 0x5a);
	/* the next short one, on the emptied ring, starts over */
	ASSERT_TRUE(put(&p, 4000, 0x11));
	ASSERT_EQ(0u, p.tx.last_pos & (size - 1));
	take(&p, 4000, 0x11);
	pair_close(&p);
}

/* A ring marked no_rewind (a producer that drops what does not fit)
 * walks the whole lap as before. */
SV_TEST(ring_no_rewind_walks_the_lap)
{
	struct pair p;

	pair_open(&p, 64 * SV_RING_REWIND);
	p.tx.no_rewind = true;
	ASSERT_TRUE(pingpong_reach(&p, 2000, 4000) >= p.tx.size - 2 * 4032);
	pair_close(&p);
}

/* A receiver that lags keeps the whole ring: a ring that is not empty
 * is never started over early, so it holds as many records as before. */
SV_TEST(ring_busy_keeps_its_whole_lap)
{
	struct pair p;
	uint64_t size = 8 * SV_RING_REWIND;
	int n = 0;

	pair_open(&p, size);
	ASSERT_TRUE(put(&p, 100, 0xee)); /* one in, one out: empty */
	take(&p, 100, 0xee);
	while (put(&p, 4000, (uint8_t)n)) /* 4,032-byte records */
		n++;
	/* everything from offset 128 to the end, and the first line is
	 * the only free one after the wrap: nothing lost to a pad */
	ASSERT_EQ((int)((size - 128) / 4032), n);
	for (int i = 0; i < n; i++)
		take(&p, 4000, (uint8_t)i);
	pair_close(&p);
}

/* The look at the consumer index that decides a start-over checks it
 * as a full ring's does. */
SV_TEST(ring_start_over_refuses_a_corrupt_tail)
{
	struct pair p;
	int err = 0;

	pair_open(&p, 8 * SV_RING_REWIND);
	for (int i = 0; i < 5; i++) { /* 20 KiB in: past SV_RING_REWIND */
		ASSERT_TRUE(put(&p, 4000, (uint8_t)i));
		take(&p, 4000, (uint8_t)i);
	}
	atomic_store(&p.rx.hdr->tail, 1ull << 40); /* past our head */
	ASSERT_TRUE(sv_ring_reserve(&p.tx, 64, &err) == NULL);
	ASSERT_EQ(-EPROTO, err);
	pair_close(&p);
}

/* sv_ring_attach: a ring a peer hands us must be ours in every field. */
SV_TEST(ring_attach_validates_the_header)
{
	struct sv_ring r, bad;
	int fd;
	uint32_t *magic;

	ASSERT_OK(sv_ring_create(&r, 4096, 4, 7, &fd));
	ASSERT_EQ(-EPROTO, sv_ring_attach(&bad, fd, 8)); /* someone else's */
	magic = &r.hdr->magic;
	*magic ^= 1;
	ASSERT_EQ(-EPROTO, sv_ring_attach(&bad, fd, 7));
	*magic ^= 1;
	r.hdr->size = 8192; /* larger than the file */
	ASSERT_EQ(-EPROTO, sv_ring_attach(&bad, fd, 7));
	r.hdr->size = 4096;
	r.hdr->ndesc = 3; /* not a power of two */
	ASSERT_EQ(-EPROTO, sv_ring_attach(&bad, fd, 7));
	r.hdr->ndesc = 4;
	r.hdr->desc_off = 0;
	ASSERT_EQ(-EPROTO, sv_ring_attach(&bad, fd, 7));
	r.hdr->desc_off = SV_RING_DATA_OFF + 4096;
	ASSERT_OK(sv_ring_attach(&bad, fd, 7));
	ASSERT_EQ(4u, bad.ndesc);
	sv_ring_unmap(&bad);
	sv_ring_unmap(&r);
	close(fd);
	/* not sealed: the peer could shrink it under us */
	fd = memfd_create("unsealed", MFD_CLOEXEC);
	ASSERT_OK(ftruncate(fd, SV_RING_DATA_OFF + 4096));
	ASSERT_EQ(-EPROTO, sv_ring_attach(&bad, fd, 7));
	close(fd);
}

SV_TEST(ack_word_round_trips)
{
	static const uint32_t psns[] = {0, 1, 0x123456, 0xffffff};
	static const uint32_t seqs[] = {0, 1, 0xabcdef, 0xffffff};

	for (int i = 0; i < 4; i++)
		for (uint32_t syn = SV_ACK; syn <= SV_NAK_REM_OP; syn++)
			for (uint32_t timer = 0; timer < 32; timer += 7)
				for (int j = 0; j < 4; j++) {
					uint64_t a = sv_ack_word(
						psns[i], syn, timer, seqs[j]);

					ASSERT_EQ(psns[i], SV_ACK_PSN(a));
					ASSERT_EQ(syn, SV_ACK_SYN(a));
					ASSERT_EQ(timer, SV_ACK_TIMER(a));
					ASSERT_EQ(seqs[j], SV_ACK_SEQ(a));
				}
	/* a PSN or NAK count past 24 bits does not spill into the others */
	ASSERT_EQ(sv_ack_word(0, SV_NAK_SEQ, 3, 0),
		  sv_ack_word(1u << 24, SV_NAK_SEQ, 3, 1u << 24));
	/* the word before any ACK carries no syndrome a responder sends */
	ASSERT_TRUE(SV_ACK_SYN(SV_ACK_NONE) > SV_NAK_REM_OP);
	ASSERT_EQ(0u, SV_ACK_SEQ(SV_ACK_NONE));
}

/*
 * The IBA's transition table (11.2.4.2, "QP state transition
 * properties"; the kernel's qp_state_table): per transition, the
 * attributes required and those allowed besides, for RC, UC and UD.
 * Anything else must be refused.
 */
#define B(x) IBV_QP_##x
enum { T_RC, T_UC, T_UD };
struct trans {
	enum ibv_qp_state cur, next;
	int req[3], opt[3];
};

#define RC_PATH_OPT (B(ALT_PATH) | B(ACCESS_FLAGS) | B(PATH_MIG_STATE))
static const struct trans iba[] = {
	{IBV_QPS_RESET,
	 IBV_QPS_INIT,
	 {B(PKEY_INDEX) | B(PORT) | B(ACCESS_FLAGS),
	  B(PKEY_INDEX) | B(PORT) | B(ACCESS_FLAGS),
	  B(PKEY_INDEX) | B(PORT) | B(QKEY)},
	 {0, 0, 0}},
	{IBV_QPS_INIT,
	 IBV_QPS_INIT,
	 {0, 0, 0},
	 {B(PKEY_INDEX) | B(PORT) | B(ACCESS_FLAGS),
	  B(PKEY_INDEX) | B(PORT) | B(ACCESS_FLAGS),
	  B(PKEY_INDEX) | B(PORT) | B(QKEY)}},
	{IBV_QPS_INIT,
	 IBV_QPS_RTR,
	 {B(AV) | B(PATH_MTU) | B(DEST_QPN) | B(RQ_PSN) |
		  B(MAX_DEST_RD_ATOMIC) | B(MIN_RNR_TIMER),
	  B(AV) | B(PATH_MTU) | B(DEST_QPN) | B(RQ_PSN), 0},
	 {B(ALT_PATH) | B(ACCESS_FLAGS) | B(PKEY_INDEX),
	  B(ALT_PATH) | B(ACCESS_FLAGS) | B(PKEY_INDEX),
	  B(PKEY_INDEX) | B(QKEY)}},
	{IBV_QPS_RTR,
	 IBV_QPS_RTS,
	 {B(SQ_PSN) | B(TIMEOUT) | B(RETRY_CNT) | B(RNR_RETRY) |
		  B(MAX_QP_RD_ATOMIC),
	  B(SQ_PSN), B(SQ_PSN)},
	 {B(CUR_STATE) | RC_PATH_OPT | B(MIN_RNR_TIMER),
	  B(CUR_STATE) | RC_PATH_OPT, B(CUR_STATE) | B(QKEY)}},
	{IBV_QPS_RTS,
	 IBV_QPS_RTS,
	 {0, 0, 0},
	 {B(CUR_STATE) | RC_PATH_OPT | B(MIN_RNR_TIMER),
	  B(CUR_STATE) | RC_PATH_OPT, B(CUR_STATE) | B(QKEY)}},
	{IBV_QPS_RTS,
	 IBV_QPS_SQD,
	 {0, 0, 0},
	 {B(EN_SQD_ASYNC_NOTIFY), B(EN_SQD_ASYNC_NOTIFY),
	  B(EN_SQD_ASYNC_NOTIFY)}},
	{IBV_QPS_SQD,
	 IBV_QPS_RTS,
	 {0, 0, 0},
	 {B(CUR_STATE) | RC_PATH_OPT | B(MIN_RNR_TIMER),
	  B(CUR_STATE) | RC_PATH_OPT, B(CUR_STATE) | B(QKEY)}},
	{IBV_QPS_SQD,
	 IBV_QPS_SQD,
	 {0, 0, 0},
	 {B(AV) | RC_PATH_OPT | B(PKEY_INDEX) | B(MIN_RNR_TIMER) | B(TIMEOUT) |
		  B(RETRY_CNT) | B(RNR_RETRY) | B(MAX_QP_RD_ATOMIC) |
		  B(MAX_DEST_RD_ATOMIC),
	  B(AV) | RC_PATH_OPT | B(PKEY_INDEX), B(PKEY_INDEX) | B(QKEY)}},
	/* SQE: UC and UD only (an RC send error takes the QP to ERR) */
	{IBV_QPS_SQE,
	 IBV_QPS_RTS,
	 {0, 0, 0},
	 {B(CUR_STATE) | B(ACCESS_FLAGS), B(CUR_STATE) | B(ACCESS_FLAGS),
	  B(CUR_STATE) | B(QKEY)}},
};

/* Every attribute mask bit of ibv_modify_qp (but IBV_QP_STATE). */
#define ALL_BITS (((B(DEST_QPN) << 1) - 1) & ~B(STATE))

static const struct trans *iba_find(enum ibv_qp_state cur,
				    enum ibv_qp_state next)
{
	for (size_t i = 0; i < sizeof(iba) / sizeof(iba[0]); i++)
		if (iba[i].cur == cur && iba[i].next == next)
			return &iba[i];
	return NULL;
}

static void check_type(enum ibv_qp_type type, int t)
{
	for (int cur = IBV_QPS_RESET; cur <= IBV_QPS_ERR; cur++)
		for (int next = IBV_QPS_RESET; next <= IBV_QPS_ERR; next++) {
			const struct trans *x = iba_find(cur, next);
			/* to RESET and to ERR from anywhere, bare */
			bool bare =
				next == IBV_QPS_RESET || next == IBV_QPS_ERR;
			int req = x ? x->req[t] : 0, opt = x ? x->opt[t] : 0;

			if (!x && !bare) {
				/* no such transition, whatever the mask */
				ASSERT_FALSE(sv_qp_mask_ok(type, cur, next, 0));
				ASSERT_FALSE(sv_qp_mask_ok(type, cur, next,
							   ALL_BITS));
				continue;
			}
			ASSERT_TRUE(sv_qp_mask_ok(type, cur, next,
						  IBV_QP_STATE | req));
			ASSERT_TRUE(sv_qp_mask_ok(type, cur, next, req | opt));
			for (int b = IBV_QP_STATE << 1; b <= ALL_BITS;
			     b <<= 1) {
				if (req & b) /* each required one missing */
					ASSERT_FALSE(sv_qp_mask_ok(
						type, cur, next, req & ~b));
				else if (!(opt &
					   b) && /* each one not allowed */
					 sv_qp_mask_ok(type, cur, next,
						       req | b))
					sv_test_fail(__FILE__, __LINE__,
						     "%s -> %s allows %#x",
						     sv_qp_state_names[cur],
						     sv_qp_state_names[next],
						     b);
			}
		}
}

SV_TEST(qp_state_table_rc)
{
	check_type(IBV_QPT_RC, T_RC);
}

SV_TEST(qp_state_table_uc)
{
	check_type(IBV_QPT_UC, T_UC);
}

SV_TEST(qp_state_table_ud)
{
	check_type(IBV_QPT_UD, T_UD);
}

SV_TEST(qp_state_out_of_range_refused)
{
	ASSERT_FALSE(
		sv_qp_mask_ok(IBV_QPT_RC, IBV_QPS_ERR + 1, IBV_QPS_RESET, 0));
	ASSERT_FALSE(sv_qp_mask_ok(IBV_QPT_RC, IBV_QPS_RESET,
				   (enum ibv_qp_state)(IBV_QPS_ERR + 1), 0));
}

/* What each QP type heeds of a mask (the kernel's uverbs modify_qp_mask):
 * XRC_SEND drops the responder's two fields, XRC_RECV the requester's
 * three, every other type keeps all; nothing else is touched. */
SV_TEST(qp_mask_heeded_by_type)
{
	const int all = (1 << 21) - 1;
	const int resp = IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	const int req =
		IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

	ASSERT_EQ(all & ~resp, sv_qp_mask_heeded(IBV_QPT_XRC_SEND, all));
	ASSERT_EQ(all & ~req, sv_qp_mask_heeded(IBV_QPT_XRC_RECV, all));
	ASSERT_EQ(IBV_QP_STATE,
		  sv_qp_mask_heeded(IBV_QPT_XRC_SEND, IBV_QP_STATE | resp));
	ASSERT_EQ(IBV_QP_STATE | resp,
		  sv_qp_mask_heeded(IBV_QPT_XRC_RECV, IBV_QP_STATE | resp));
	ASSERT_EQ(IBV_QP_STATE | req,
		  sv_qp_mask_heeded(IBV_QPT_XRC_SEND, IBV_QP_STATE | req));
	ASSERT_EQ(IBV_QP_STATE,
		  sv_qp_mask_heeded(IBV_QPT_XRC_RECV, IBV_QP_STATE | req));
	ASSERT_EQ(all, sv_qp_mask_heeded(IBV_QPT_RC, all));
	ASSERT_EQ(all, sv_qp_mask_heeded(IBV_QPT_UC, all));
	ASSERT_EQ(all, sv_qp_mask_heeded(IBV_QPT_UD, all));
}

SV_TEST(opcode_table_properties)
{
	int named = 0;

	ASSERT_NULL(sv_opcode(0));
	ASSERT_NULL(sv_opcode(SV_OP_MAX));
	ASSERT_NULL(sv_opcode(SV_OP_PAD)); /* a ring filler, no packet */
	ASSERT_NULL(sv_opcode(0xff));
	for (int op = 0; op < SV_OP_MAX; op++) {
		const struct sv_opcode_info *o = sv_opcode((uint8_t)op);
		uint32_t m;

		if (!o)
			continue;
		named++;
		m = o->mask;
		/* a request or a response, never both */
		ASSERT_TRUE(!(m & SV_M_REQ) != !(m & SV_M_RESP));
		/* one extension at most, of its wire length */
		ASSERT_TRUE(__builtin_popcount(m & (SV_M_RETH | SV_M_ATOMETH |
						    SV_M_ATOMACK)) <= 1);
		if (m & SV_M_RETH)
			ASSERT_EQ(sizeof(struct sv_reth), o->ext_len);
		else if (m & SV_M_ATOMETH)
			ASSERT_EQ(sizeof(struct sv_atometh), o->ext_len);
		else if (m & SV_M_ATOMACK)
			ASSERT_EQ(sizeof(struct sv_atomack), o->ext_len);
		else
			ASSERT_EQ(0, o->ext_len);
		if (m & SV_M_RETH_FIRST) {
			ASSERT_TRUE(m & SV_M_RETH);
			ASSERT_EQ(0u, sv_ext_len(o, SV_SEG_LAST));
			ASSERT_EQ(0u, sv_ext_len(o, 0));
			ASSERT_EQ(o->ext_len, sv_ext_len(o, SV_SEG_FIRST));
		} else {
			ASSERT_EQ(o->ext_len, sv_ext_len(o, SV_SEG_LAST));
		}
		/* what consumes a receive has SEND or WRITE_IMM semantics */
		if (m & SV_M_RECV) {
			ASSERT_TRUE(o->handler == SV_H_SEND ||
				    o->handler == SV_H_NOTE);
			ASSERT_TRUE(m & SV_M_IMM_OK);
		}
		/* the target MR's access: exactly the one-sided requests */
		ASSERT_EQ(!!(m & (SV_M_RETH | SV_M_ATOMETH)), !!o->access);
		if (m & SV_M_ATOMIC) {
			ASSERT_TRUE(m & SV_M_ATOMETH);
			ASSERT_EQ(IBV_ACCESS_REMOTE_ATOMIC, o->access);
		}
		/* reads and atomics: answered, counted, RC and XRC only
		 * (IBA 9.8.5: XRC has RC's operations) */
		if (m & SV_M_RD_ATOMIC) {
			ASSERT_TRUE(m & SV_M_REQ);
			ASSERT_TRUE(o->handler == SV_H_READ ||
				    o->handler == SV_H_ATOMIC);
			ASSERT_EQ(SV_QPT(RC) | SV_QPT(XRC_SEND), o->qpts);
			ASSERT_FALSE(m & SV_M_PAYLOAD);
		}
		/* requests have a handler, responses none (the completer) */
		if (m & SV_M_REQ)
			ASSERT_NE(SV_H_NONE, o->handler);
		else
			ASSERT_EQ(SV_H_NONE, o->handler);
		if (m & SV_M_RESP)
			ASSERT_EQ(SV_QPT(RC), o->qpts);
		/* UD has sends only (IBA 9.8.4) */
		if (o->qpts & SV_QPT(UD))
			ASSERT_EQ(SV_H_SEND, o->handler);
		ASSERT_TRUE(o->qpts & SV_QPT(RC)); /* RC has everything */
	}
	ASSERT_EQ(8, named);
}

/* CRC-32C's check value (RFC 3720 B.4), in one piece and in pieces that
 * split the 8-byte steps of the SSE4.2 path anywhere. */
/* Bit by bit, as the definition: what the fast paths must agree with. */
static uint32_t crc32c_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
	uint32_t c = ~crc;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

/* The three-chain rounds (crc32c.c) at and around every length where
 * their blocks start and end, at every alignment, and continued from a
 * CRC so far at any split; and the pass that copies as it goes. */
SV_TEST(crc32c_long_buffers_match_the_definition)
{
	static const size_t lens[] = {
		0,	    1,		7,	     8,		  9,
		255,	    767,	768,	     769,	  1023,
		1536,	    2303,	2304,	     2305,	  12287,
		12288,	    12289,	12288 + 767, 12288 + 768, 24576 + 100,
		65536 + 24, 65536 + 88, 200003};
	size_t max = 200003 + 64;
	uint8_t *buf = malloc(max), *copy = malloc(max + 16);
	uint32_t seed = 12345;

	ASSERT_TRUE(buf != NULL && copy != NULL);
	for (size_t i = 0; i < max; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
		for (size_t off = 0; off < 9; off += 4) {
			const uint8_t *p = buf + off;
			size_t n = lens[li];
			uint32_t want = crc32c_bitwise(0, p, n);

			ASSERT_EQ(want, sv_crc32c(0, p, n));
			/* the copying pass: the same CRC, the same bytes,
			 * nothing written past them */
			memset(copy, 0xa5, n + 16);
			ASSERT_EQ(want, sv_crc32c_copy(0, copy + off, p, n));
			ASSERT_EQ(0, memcmp(copy + off, p, n));
			for (size_t k = 0; k < 16 - off; k++)
				ASSERT_EQ(0xa5, copy[off + n + k]);
			for (size_t cut = 1; cut < n; cut = cut * 3 + 5)
				ASSERT_EQ(want, sv_crc32c(sv_crc32c(0, p, cut),
							  p + cut, n - cut));
		}
	free(buf);
	free(copy);
}

SV_TEST(crc32c_check_values)
{
	static const char nine[] = "123456789";
	uint8_t zeros[32] = {0}, ones[32];

	ASSERT_EQ(0xe3069283u, sv_crc32c(0, nine, 9));
	for (size_t k = 0; k <= 9; k++)
		ASSERT_EQ(0xe3069283u,
			  sv_crc32c(sv_crc32c(0, nine, k), nine + k, 9 - k));
	ASSERT_EQ(0x8a9136aau, sv_crc32c(0, zeros, 32));
	memset(ones, 0xff, sizeof(ones));
	ASSERT_EQ(0x62a8ab43u, sv_crc32c(0, ones, 32));
	ASSERT_EQ(0u, sv_crc32c(0, NULL, 0));
}
