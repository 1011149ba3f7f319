// SPDX-License-Identifier: MIT
/*
 * Honest traffic that attacks the provider's own bookkeeping.
 * (a) The ring: the receiver polls the seq word of the record at its tail
 * (ring.h), where the previous lap left bytes behind; payloads chosen so
 * those bytes equal the seq it expects must never be taken for a record
 * (one send must make exactly one receive, with its own bytes).
 * (b) A CQ's QP set (cq.c): attaching and detaching QPs on a long-lived
 * CQ must take flat memory, and a poller must survive the churn.
 */
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>

#include "pair.h"
#include "wire.h"

#define RING	 (1u << 20) /* the default ring (qp.c) */
#define REC	 65536u	    /* a record filling 1/16 of it */
#define BIG	 (REC - (uint32_t)sizeof(struct sv_pkt))
#define TMAX	 65536u	 /* req.c train_max(): 1 MiB ring, MTU 1024 */
#define PSN_A	 0x1234u /* sv_end_opts_default().psn of end a */
#define SEQ_WORD offsetof(struct sv_pkt, seq)

static void default_ring(void)
{
	/* the provider reads it once, at the first QP of this process */
	unsetenv("SOFTVERBS_RING_KB");
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

/* Fills the first lap with 16 records of 64 KiB each from a.buf[0,BIG). */
static void fill_first_lap(struct sv_pair *p)
{
	struct ibv_wc wc;

	for (int i = 0; i < 16; i++)
		ASSERT_OK(sv_end_recv(&p->b, i, 0, BIG));
	for (int i = 0; i < 16; i++)
		ASSERT_OK(sv_end_send(&p->a, i, 0, BIG, 0));
	for (int i = 0; i < 16; i++) {
		WAIT_WC(p->b.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ((uint64_t)i, wc.wr_id);
		ASSERT_EQ(BIG, wc.byte_len);
		WAIT_WC(p->a.scq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	}
	ASSERT_EQ(0, memcmp(p->a.buf, p->b.buf, BIG));
}

/* One 32-byte send at the start of lap 2: exactly one receive, its own
 * bytes, and the connection still works both ways afterwards. */
static void one_send_one_recv(struct sv_pair *p)
{
	struct ibv_wc wc;

	memset(p->b.buf, 0xee, 8192);
	ASSERT_OK(sv_end_recv(&p->b, 100, 0, 64));
	ASSERT_OK(sv_end_recv(&p->b, 101, 4096, 64));
	sv_fill(p->a.buf + BIG, 32, 7);
	ASSERT_OK(sv_end_send(&p->a, 200, BIG, 32, 0));
	WAIT_WC(p->b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(100, wc.wr_id);
	ASSERT_EQ(32, wc.byte_len);
	ASSERT_EQ(-1, sv_check(p->b.buf, 32, 7));
	ASSERT_EQ(0xee, p->b.buf[32]);
	WAIT_WC(p->a.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(200, wc.wr_id);
	NO_WC(p->b.rcq, 100); /* no second receive from stale bytes */
	NO_WC(p->a.scq, 20);
	ASSERT_EQ(0xee, p->b.buf[4096]);
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&p->a));
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&p->b));

	/* receive 101 takes the next send, and b can still answer */
	sv_fill(p->a.buf, 1000, 8);
	ASSERT_OK(sv_end_send(&p->a, 201, 0, 64, 0));
	WAIT_WC(p->b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(101, wc.wr_id);
	ASSERT_EQ(64, wc.byte_len);
	ASSERT_EQ(-1, sv_check(p->b.buf + 4096, 64, 8));
	WAIT_WC(p->a.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_OK(sv_end_recv(&p->a, 300, 0, 1000));
	sv_fill(p->b.buf, 1000, 9);
	ASSERT_OK(sv_end_send(&p->b, 301, 0, 1000, 0));
	WAIT_WC(p->a.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(1000, wc.byte_len);
	ASSERT_EQ(-1, sv_check(p->a.buf, 1000, 9));
	WAIT_WC(p->b.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
}

/*
 * The report's reproduction: sixteen 65,504-byte sends of the 32-bit
 * value 16386 fill the 1 MiB ring with 64 KiB records; a 32-byte send
 * then lands at offset 0 of lap 2, and the receiver, expecting seq 16386
 * (sv_rec_seq(1 MiB + 64)) at offset 64, finds that value there in the
 * first lap's payload.
 */
SV_TEST(attack_ring_stale_seq_word)
{
	struct sv_pair p;

	default_ring();
	ASSERT_EQ(16386, sv_rec_seq(RING + 64));
	sv_pair_open(&p, NULL, NULL);
	for (uint32_t i = 0; i + 4 <= BIG; i += 4)
		put32(p.a.buf + i, 16386);
	fill_first_lap(&p);
	one_send_one_recv(&p);
	sv_pair_close(&p);
}

/*
 * As above, but the stale line at offset 64 is a whole, valid-looking
 * header: a one-segment SEND of 32 bytes with the PSN the receiver
 * expects next.  Without invalidation one send completes two receives,
 * the second with the first lap's bytes.
 */
SV_TEST(attack_ring_ghost_record)
{
	struct sv_pkt ghost = {
		.opcode = SV_OP_SEND,
		.seg = SV_SEG_ONLY,
		.psn = PSN_A + 16 * ((BIG + 1023) / 1024) + 1,
		.npsn = 1,
		.len = 32,
		.msg_len = 32,
		.rec_len = 64,
		.seq = sv_rec_seq(RING + 64),
	};
	struct sv_pair p;

	default_ring();
	sv_pair_open(&p, NULL, NULL);
	/* record offset 64 is payload offset 32 */
	memset(p.a.buf, 0, BIG);
	memcpy(p.a.buf + 32, &ghost, sizeof(ghost));
	memset(p.a.buf + 64, 'G', 32);
	fill_first_lap(&p);
	one_send_one_recv(&p);
	sv_pair_close(&p);
}

/* The sender's ring, replayed: where each record of a message lands. */
struct sim {
	uint64_t head;
};

static uint64_t sim_record(struct sim *s, uint32_t payload)
{
	uint64_t rec = (sizeof(struct sv_pkt) + payload + 63) & ~63ull;
	uint64_t off = s->head & (RING - 1), pos;

	if (off + rec > RING)
		s->head += RING - off; /* a pad to the end (ring.c) */
	pos = s->head;
	s->head += rec;
	return pos;
}

/*
 * Writes message bytes buf[0,len) for the ring positions it will occupy:
 * each 32-bit word that lands at offset 28 of a ring line holds the seq
 * the receiver expects on that line one lap later; the rest is a pattern.
 */
static void adversarial_msg(struct sim *s, uint8_t *buf, uint32_t len,
			    uint32_t seed)
{
	uint32_t sent = 0;

	sv_fill(buf, len, seed);
	do {
		uint32_t chunk = len - sent < TMAX ? len - sent : TMAX;
		uint64_t data = sim_record(s, chunk) + sizeof(struct sv_pkt);

		for (uint32_t k = 0; k + 4 <= chunk; k++) {
			uint64_t at = data + k;

			if ((at & 63) == SEQ_WORD)
				put32(buf + sent + k,
				      sv_rec_seq(at - SEQ_WORD + RING));
		}
		sent += chunk;
	} while (sent < len);
}

static uint32_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (uint32_t)(*x >> 11);
}

static uint32_t rnd_len(uint64_t *x)
{
	switch (rnd(x) % 4) {
	case 0:
		return rnd(x) % 100; /* header-line records, zero too */
	case 1:
		return rnd(x) % 8192;
	case 2:
		return BIG - 64 + rnd(x) % 128; /* around one 64 KiB record */
	default:
		return rnd(x) % (3 * TMAX); /* multi-train messages */
	}
}

/*
 * A randomized stream over several laps whose every payload is
 * adversarial_msg(): each receive must complete once, in order, with
 * its own length and bytes.
 */
SV_TEST(attack_ring_adversarial_stream)
{
	struct sv_end_opts o = sv_end_opts_default(), ob;
	struct sim s = {0};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint32_t msgs = 0;
	struct sv_pair p;

	default_ring();
	o.buf_len = RING;
	ob = o;
	ob.psn = 0x5678;
	sv_pair_open(&p, &o, &ob);
	while (s.head < 6ull * RING) {
		uint32_t off[16], len[16], n = 0, total = 0;
		struct ibv_wc wc;

		for (; n < 16; n++) {
			len[n] = rnd_len(&x);
			if (total + len[n] > RING)
				break;
			off[n] = total;
			total += len[n];
			adversarial_msg(&s, p.a.buf + off[n], len[n], msgs + n);
		}
		memset(p.b.buf, 0xee, total);
		for (uint32_t i = 0; i < n; i++)
			ASSERT_OK(sv_end_recv(&p.b, msgs + i, off[i], len[i]));
		for (uint32_t i = 0; i < n; i++)
			ASSERT_OK(
				sv_end_send(&p.a, msgs + i, off[i], len[i], 0));
		for (uint32_t i = 0; i < n; i++) {
			WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
			if (wc.status != IBV_WC_SUCCESS ||
			    wc.wr_id != msgs + i || wc.byte_len != len[i])
				sv_test_fail(__FILE__, __LINE__,
					     "message %u (%u bytes): status %d "
					     "wr_id %" PRIu64 " byte_len %u",
					     msgs + i, len[i], wc.status,
					     (uint64_t)wc.wr_id, wc.byte_len);
			WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		}
		ASSERT_EQ(0, memcmp(p.a.buf, p.b.buf, total));
		msgs += n;
	}
	NO_WC(p.b.rcq, 50);
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&p.b));
	ASSERT_GE(msgs, 100);
	sv_pair_close(&p);
}

/*
 * The ring itself, both ends in this process (ring.c is compiled into
 * the test: the library does not export it).  Drives the corner a
 * pair of processes reaches only by timing: the ring exactly full after
 * a record, where the line the next record starts on is the oldest
 * unconsumed header and must be left alone.
 */
#include "ring.c"

#define URING 4096u

/* Every line of the record's payload looks like a one-line SEND header
 * carrying the seq the receiver expects on that line one lap later. */
static void forge_record(uint8_t *rec, uint64_t pos, uint32_t rec_len)
{
	for (uint32_t l = 64; l < rec_len; l += 64) {
		struct sv_pkt f = {.opcode = SV_OP_SEND,
				   .seg = SV_SEG_ONLY,
				   .npsn = 1,
				   .rec_len = 64,
				   .seq = sv_rec_seq(pos + l + URING)};

		memcpy(rec + l, &f, sizeof(f));
	}
}

SV_TEST(attack_ring_exactly_full)
{
	struct sv_ring rx, tx;
	struct sv_pkt pkt;
	const uint8_t *pl;
	uint64_t x = 7, fulls = 0, pads = 0;
	uint32_t sent = 0, got = 0;
	int fd, r, err = 0;

	ASSERT_OK(sv_ring_create(&rx, URING, 0, 0x123456, &fd));
	ASSERT_OK(sv_ring_attach(&tx, fd, 0x123456));
	while (got < 20000) {
		uint64_t used = tx.head - tx.tail_cache;
		uint64_t to_end = URING - (tx.head & (URING - 1));
		uint32_t len;

		if (rnd(&x) % 2) { /* produce */
			struct sv_pkt *p,
				h = {.opcode = SV_OP_SEND, .seg = SV_SEG_ONLY};
			uint64_t head = tx.head;

			/* often exactly what is left: the ring becomes full */
			if (rnd(&x) % 3 == 0 && used < URING &&
			    URING - used <= to_end)
				len = (uint32_t)(URING - used) - 32;
			else
				len = rnd(&x) % 1024;
			p = sv_ring_reserve(&tx, 32 + len, &err);
			ASSERT_OK(err);
			if (!p)
				continue;
			pads += tx.last_pos != head;
			h.psn = sent++ & SV_PSN_MASK;
			h.npsn = 1;
			h.len = len;
			h.rec_len = tx.last_rec;
			forge_record((uint8_t *)p, tx.last_pos, tx.last_rec);
			memcpy(p, &h, offsetof(struct sv_pkt, seq));
			sv_ring_publish(&tx, p);
			if (tx.head - atomic_load(&rx.hdr->tail) == URING) {
				/* the oldest header is intact, not poisoned */
				const struct sv_pkt *o =
					(const void *)(tx.data +
						       (tx.head & (URING - 1)));

				ASSERT_EQ(sv_rec_seq(tx.head - URING),
					  atomic_load(
						  (_Atomic uint32_t *)&o->seq));
				fulls++;
			}
			continue;
		}
		r = sv_ring_peek(&rx, &pkt, &pl);
		ASSERT_GE(r, 0);
		if (!r) { /* empty: nothing published may be unseen */
			ASSERT_EQ(tx.head, rx.tail);
			continue;
		}
		ASSERT_EQ(SV_OP_SEND, pkt.opcode);
		ASSERT_EQ(got & SV_PSN_MASK, pkt.psn);
		ASSERT_GE(pkt.rec_len, 32 + pkt.len);
		sv_ring_consume(&rx);
		got++;
	}
	fprintf(stderr,
		"%u records, %" PRIu64 " with the ring full, %" PRIu64
		" after a pad\n",
		got, fulls, pads);
	ASSERT_GE(fulls, 100);
	ASSERT_GE(pads, 100);
	sv_ring_unmap(&tx);
	sv_ring_unmap(&rx);
	close(fd);
}

/* ---- (b) QP sets ---- */

static struct ibv_qp *qp_on(struct sv_end *e, struct ibv_cq *scq,
			    struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq,
		.recv_cq = rcq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 4,
			.max_recv_wr = 4,
			.max_send_sge = 1,
			.max_recv_sge = 1},
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);

	ASSERT_NOT_NULL(qp);
	return qp;
}

static size_t heap_used(void)
{
	return mallinfo2().uordblks;
}

/* QPs come and go on long-lived CQs: memory must not grow per cycle. */
SV_TEST(attack_qpset_flat_cycles)
{
	struct ibv_qp *keep[4];
	struct ibv_cq *scq, *rcq;
	struct sv_end e;
	size_t before, after;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	scq = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
	rcq = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(scq);
	ASSERT_NOT_NULL(rcq);
	for (int i = 0; i < 4; i++)
		keep[i] = qp_on(&e, scq, i & 1 ? scq : rcq);
	for (int i = 0; i < 64; i++) /* warm caches and free lists */
		ASSERT_OK(ibv_destroy_qp(qp_on(&e, scq, rcq)));
	before = heap_used();
	for (int i = 0; i < 2000; i++)
		ASSERT_OK(ibv_destroy_qp(qp_on(&e, scq, rcq)));
	after = heap_used();
	fprintf(stderr, "heap: %zu -> %zu bytes over 2000 cycles\n", before,
		after);
	if (after > before + 8192)
		sv_test_fail(__FILE__, __LINE__,
			     "2000 QP cycles grew the heap by %zu bytes",
			     after - before);
	for (int i = 0; i < 4; i++)
		ASSERT_OK(ibv_destroy_qp(keep[i]));
	ASSERT_OK(ibv_destroy_cq(rcq));
	ASSERT_OK(ibv_destroy_cq(scq));
	sv_end_close(&e);
}

#define MANY 1000

/* Creates then destroys MANY QPs all attached to cq at once. */
static void many_round(struct sv_end *e, struct ibv_cq *cq, struct ibv_qp **qps)
{
	for (int i = 0; i < MANY; i++)
		qps[i] = qp_on(e, cq, cq);
	/* not in creation order: detaching must move slots around */
	for (int i = 0; i < MANY; i += 2)
		ASSERT_OK(ibv_destroy_qp(qps[i]));
	for (int i = MANY - 1; i > 0; i -= 2)
		ASSERT_OK(ibv_destroy_qp(qps[i]));
}

/*
 * MANY QPs attached to one CQ at once, twice.  The first round grows
 * whatever the CQ keeps (and the context's free QPs); the second must
 * reuse it: an immutable set copied per attach and detach retires
 * O(MANY^2) bytes (8 MB here) every round.
 */
SV_TEST(attack_qpset_many_attached)
{
	struct rlimit rl;
	struct ibv_qp **qps = calloc(MANY, sizeof(*qps));
	struct ibv_cq *cq;
	struct sv_end e;
	size_t mid, after;

	ASSERT_NOT_NULL(qps);
	ASSERT_OK(getrlimit(RLIMIT_NOFILE, &rl));
	if (rl.rlim_cur < 4 * MANY && rl.rlim_max > rl.rlim_cur) {
		rl.rlim_cur = rl.rlim_max; /* one listener socket per QP */
		ASSERT_OK(setrlimit(RLIMIT_NOFILE, &rl));
	}
	if (rl.rlim_cur < 2 * MANY)
		sv_test_fail(__FILE__, __LINE__, "RLIMIT_NOFILE %lu < %d",
			     (unsigned long)rl.rlim_cur, 2 * MANY);
	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	cq = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	many_round(&e, cq, qps);
	mid = heap_used();
	many_round(&e, cq, qps);
	after = heap_used();
	fprintf(stderr, "heap: %zu after round 1, %zu after round 2\n", mid,
		after);
	if (after > mid + 65536)
		sv_test_fail(__FILE__, __LINE__,
			     "%d QPs on one CQ grew the heap by %zu bytes",
			     MANY, after - mid);
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
	free(qps);
}

struct churn {
	struct ibv_cq *cq;
	atomic_bool stop;
	atomic_uint got;
	const char *err;
};

static void *poller(void *arg)
{
	struct churn *c = arg;

	while (!atomic_load(&c->stop)) {
		struct ibv_wc wc[8];
		int n = ibv_poll_cq(c->cq, 8, wc);

		if (n < 0) {
			c->err = "ibv_poll_cq failed";
			break;
		}
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				c->err = "a receive completed with an error";
		atomic_fetch_add(&c->got, (unsigned int)n);
	}
	return NULL;
}

/*
 * One thread polls a CQ (driving every QP in its set) while another
 * creates and destroys QPs on that CQ and a connected QP keeps delivering
 * into it.  Run it under TSan too (build-tsan).
 */
SV_TEST(attack_qpset_poll_while_churn)
{
	struct churn c = {0};
	struct ibv_qp *held[8] = {0};
	uint64_t x = 42;
	struct sv_pair p;
	pthread_t t;
	struct ibv_wc wc;
	uint64_t end;
	int sent = 0;

	struct sv_end_opts ob = sv_end_opts_default();

	/* every receive fits: a poller descheduled on a loaded machine must
	 * not turn into an overrun */
	ob.cqe = 256;
	ob.psn = 0x5678;
	sv_pair_open(&p, NULL, &ob);
	c.cq = p.b.rcq;
	ASSERT_OK(pthread_create(&t, NULL, poller, &c));
	for (int i = 0; i < 400; i++) {
		uint32_t k = rnd(&x) % 8;

		if (held[k])
			ASSERT_OK(ibv_destroy_qp(held[k]));
		held[k] = qp_on(&p.b, p.b.scq, p.b.rcq);
		if (i % 4 == 0) {
			ASSERT_OK(sv_end_recv(&p.b, i, 0, 64));
			ASSERT_OK(sv_end_send(&p.a, i, 0, 64, 0));
			WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
			sent++;
		}
	}
	end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	while (atomic_load(&c.got) < (unsigned int)sent && sv_now_ms() < end)
		sched_yield();
	atomic_store(&c.stop, true);
	ASSERT_OK(pthread_join(t, NULL));
	if (c.err)
		sv_test_fail(__FILE__, __LINE__, "%s", c.err);
	ASSERT_EQ((unsigned int)sent, atomic_load(&c.got));
	for (int k = 0; k < 8; k++)
		if (held[k])
			ASSERT_OK(ibv_destroy_qp(held[k]));
	sv_pair_close(&p);
}
