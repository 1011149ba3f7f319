// SPDX-License-Identifier: MIT
/*
 * The RoCEv2 codec (provider/wire/roce.c) alone, in milliseconds: every
 * opcode built and parsed back field by field over IPv4 and IPv6, the
 * header layouts and lengths written out here from IBA 9.2-9.3 (not read
 * from the provider's table), the ICRC's masks (what it covers and what
 * it must not), the parser's reason for each malformed packet, every
 * truncation of every opcode in a buffer of exactly its size, and the
 * segmenter.  roce_wire.py checks the same bytes against zlib and tshark.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roce.h"
#include "sv_test.h"

static const uint8_t v4a[16] = {0, 0, 0,    0,	  0,  0,  0, 0,
				0, 0, 0xff, 0xff, 10, 77, 0, 1};
static const uint8_t v4b[16] = {0, 0, 0,    0,	  0,  0,  0, 0,
				0, 0, 0xff, 0xff, 10, 77, 0, 2};
static const uint8_t v6a[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0,
				0,    0, 0, 0, 0, 0, 0, 1};
static const uint8_t v6b[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0,
				0,    0, 0, 0, 0, 0, 0, 2};

static struct sv_roce_ip ip_of(bool v6)
{
	struct sv_roce_ip ip = {.sport = 49152};

	memcpy(ip.src, v6 ? v6a : v4a, 16);
	memcpy(ip.dst, v6 ? v6b : v4b, 16);
	return ip;
}

static uint32_t rnd(void)
{
	return (uint32_t)random() << 16 ^ (uint32_t)random();
}

/* A packet of opcode op with every field random, payload if it has one. */
static struct sv_roce_pkt random_pkt(uint8_t op, uint8_t *payload, uint32_t len)
{
	struct sv_roce_pkt p = {
		.opcode = op,
		.se = rnd() & 1,
		.mig = rnd() & 1,
		.ack_req = rnd() & 1,
		.pkey = (uint16_t)rnd(),
		.dqpn = rnd() & 0xffffff,
		.psn = rnd() & 0xffffff,
		.srqn = rnd() & 0xffffff,
		.qkey = rnd(),
		.src_qpn = rnd() & 0xffffff,
		.reth = {(uint64_t)rnd() << 32 | rnd(), rnd(), rnd()},
		.atomic = {.va = (uint64_t)rnd() << 32 | rnd(),
			   .rkey = rnd(),
			   .swap_add = (uint64_t)rnd() << 32 | rnd(),
			   .compare = (uint64_t)rnd() << 32 | rnd()},
		.syndrome = (uint8_t)rnd(),
		.msn = rnd() & 0xffffff,
		.orig = (uint64_t)rnd() << 32 | rnd(),
		.imm_be = rnd(),
		.inv_rkey = rnd(),
	};

	if (sv_roce_op_mask(op) & SV_RH_PAYLOAD) {
		for (uint32_t i = 0; i < len; i++)
			payload[i] = (uint8_t)rnd();
		p.payload = payload;
		p.len = len;
	}
	return p;
}

/* The fields of a's headers equal b's. */
static void assert_same(const struct sv_roce_pkt *a,
			const struct sv_roce_pkt *b)
{
	uint32_t m = sv_roce_op_mask(a->opcode);

	ASSERT_EQ(a->opcode, b->opcode);
	ASSERT_EQ(m, b->mask);
	ASSERT_EQ(a->se, b->se);
	ASSERT_EQ(a->mig, b->mig);
	ASSERT_EQ(a->ack_req, b->ack_req);
	ASSERT_EQ(a->pkey, b->pkey);
	ASSERT_EQ(a->dqpn, b->dqpn);
	ASSERT_EQ(a->psn, b->psn);
	ASSERT_EQ(0, b->tver);
	if (m & SV_RH_DETH) {
		ASSERT_EQ(a->qkey, b->qkey);
		ASSERT_EQ(a->src_qpn, b->src_qpn);
	}
	if (m & SV_RH_XRCETH)
		ASSERT_EQ(a->srqn, b->srqn);
	if (m & SV_RH_RETH) {
		ASSERT_EQ(a->reth.va, b->reth.va);
		ASSERT_EQ(a->reth.rkey, b->reth.rkey);
		ASSERT_EQ(a->reth.dma_len, b->reth.dma_len);
	}
	if (m & SV_RH_ATOMETH) {
		ASSERT_EQ(a->atomic.va, b->atomic.va);
		ASSERT_EQ(a->atomic.rkey, b->atomic.rkey);
		ASSERT_EQ(a->atomic.swap_add, b->atomic.swap_add);
		ASSERT_EQ(a->atomic.compare, b->atomic.compare);
	}
	if (m & SV_RH_AETH) {
		ASSERT_EQ(a->syndrome, b->syndrome);
		ASSERT_EQ(a->msn, b->msn);
	}
	if (m & SV_RH_ATOMACK)
		ASSERT_EQ(a->orig, b->orig);
	if (m & SV_RH_IMM)
		ASSERT_EQ(a->imm_be, b->imm_be);
	if (m & SV_RH_IETH)
		ASSERT_EQ(a->inv_rkey, b->inv_rkey);
	ASSERT_EQ(a->len, b->len);
	ASSERT_EQ((4 - (a->len & 3)) & 3, b->pad);
	if (a->len)
		ASSERT_TRUE(!memcmp(a->payload, b->payload, a->len));
}

/* IBA table 40 as this test reads it: the opcodes that exist. */
static bool exists(uint8_t op)
{
	uint8_t tp = op & 0xe0, o = op & 0x1f;

	switch (tp) {
	case SV_IB_RC:
	case SV_IB_XRC:
		return o <= 0x14 || o == 0x16 || o == 0x17;
	case SV_IB_UC:
		return o <= 0x0b;
	case SV_IB_UD:
		return o == 0x04 || o == 0x05;
	case SV_IB_CNP:
		return o == 0x01;
	default:
		return false;
	}
}

SV_TEST(opcode_table_is_iba_table_40)
{
	int n = 0;

	for (int op = 0; op < 256; op++) {
		char name[64];

		ASSERT_EQ(exists((uint8_t)op),
			  sv_roce_op_mask((uint8_t)op) != 0);
		ASSERT_EQ(exists((uint8_t)op),
			  sv_roce_op_name((uint8_t)op, name, sizeof(name)) !=
				  NULL);
		n += exists((uint8_t)op);
	}
	ASSERT_EQ(23 + 12 + 2 + 23 + 1, n);
}

SV_TEST(every_opcode_round_trips_v4_and_v6)
{
	static uint8_t payload[SV_ROCE_MAX_PMTU], buf[8192];
	static const uint32_t lens[] = {0, 1,	2,    3,    4,
					5, 255, 1024, 4093, 4096};

	srandom(26);
	for (int op = 0; op < 256; op++) {
		if (!sv_roce_op_mask((uint8_t)op))
			continue;
		for (int v6 = 0; v6 < 2; v6++) {
			for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]);
			     l++) {
				struct sv_roce_ip ip = ip_of(v6);
				struct sv_roce_pkt p, q;
				int n;

				p = random_pkt((uint8_t)op, payload, lens[l]);
				n = sv_roce_build(buf, sizeof(buf), &p, &ip);
				ASSERT_GE(n, 16);
				ASSERT_EQ(0, n % 4); /* pad: a multiple of 4 */
				ASSERT_EQ(
					SV_ROCE_OK,
					sv_roce_parse(buf, (size_t)n, &ip, &q));
				assert_same(&p, &q);
				/* without the address: the same, unchecked */
				ASSERT_EQ(SV_ROCE_OK,
					  sv_roce_parse(buf, (size_t)n, NULL,
							&q));
				assert_same(&p, &q);
			}
		}
	}
}

/* Header lengths and offsets written out from IBA 9.2-9.3. */
SV_TEST(header_layout_is_the_iba_one)
{
	static const struct {
		uint8_t op;
		uint32_t hlen;
	} want[] = {
		{0x04, 12}, /* RC SEND_ONLY: BTH */
		{0x05, 16}, /* + ImmDt */
		{0x06, 28}, /* RC WRITE_FIRST: + RETH */
		{0x07, 12}, /* WRITE_MIDDLE */
		{0x0b, 32}, /* WRITE_ONLY_IMM: RETH ImmDt */
		{0x0c, 28}, /* READ_REQUEST: RETH */
		{0x0d, 16}, /* READ_RESPONSE_FIRST: AETH */
		{0x0e, 12}, /* READ_RESPONSE_MIDDLE */
		{0x11, 16}, /* ACK: AETH */
		{0x12, 24}, /* ATOMIC_ACK: AETH AtomicAckETH */
		{0x13, 40}, /* CMP_SWAP: AtomicETH */
		{0x17, 16}, /* SEND_ONLY_INV: IETH */
		{0x64, 20}, /* UD SEND_ONLY: DETH */
		{0x65, 24}, /* UD SEND_ONLY_IMM: DETH ImmDt */
		{0xa4, 16}, /* XRC SEND_ONLY: XRCETH */
		{0xab, 36}, /* XRC WRITE_ONLY_IMM: XRCETH RETH ImmDt */
		{0xb1, 16}, /* XRC ACK: no XRCETH on responses */
		{0xb4, 44}, /* XRC FETCH_ADD: XRCETH AtomicETH */
		{0x81, 28}, /* CNP: 16 reserved */
	};
	struct sv_roce_pkt p = {.opcode = 0xab,
				.pkey = 0xffff,
				.dqpn = 0x123456,
				.psn = 0xabcdef,
				.ack_req = true,
				.se = true,
				.srqn = 0x654321,
				.reth = {0x1122334455667788ull, 0x99aabbcc, 7},
				.imm_be = 0x04030201};
	static const uint8_t xrc_write_imm[36] = {
		0xab, 0x80, 0xff, 0xff, 0,    0x12, 0x34, 0x56, /* BTH */
		0x80, 0xab, 0xcd, 0xef, 0,    0x65, 0x43, 0x21, /* XRCETH */
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, /* RETH */
		0x99, 0xaa, 0xbb, 0xcc, 0,    0,    0,	  7,
		0x01, 0x02, 0x03, 0x04, /* ImmDt, as posted */
	};
	uint8_t h[SV_ROCE_HDR_MAX];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ASSERT_EQ(want[i].hlen,
			  sv_roce_hdr_len(sv_roce_op_mask(want[i].op)));
	ASSERT_EQ(36u, sv_roce_hdr_put(h, &p));
	ASSERT_TRUE(!memcmp(h, xrc_write_imm, sizeof(xrc_write_imm)));
	/* the pad count from the length: 3 bytes of pad for 5 */
	p.len = 5;
	sv_roce_hdr_put(h, &p);
	ASSERT_EQ(0x80 | 3 << 4, h[1]);
	p.opcode = 0x42; /* RD: not spoken */
	ASSERT_EQ(0u, sv_roce_hdr_put(h, &p));
}

/* The ICRC's CRC-32 is zlib's: "123456789" is 0xcbf43926. */
SV_TEST(icrc_crc_is_crc32_ieee)
{
	struct sv_roce_ip ip = ip_of(false);
	uint8_t bth[12] = {0x04};

	sv_roce_icrc_start(&ip, bth, 12, 16); /* makes the tables */
	ASSERT_EQ(0xcbf43926u, sv_roce_icrc_end(sv_roce_icrc_add(
				       0xffffffffu, "123456789", 9)));
	/* in pieces as at once: the long (8 at a time) path too */
	{
		uint8_t b[100];
		uint32_t a, c;

		for (int i = 0; i < 100; i++)
			b[i] = (uint8_t)(i * 7 + 3);
		a = sv_roce_icrc_add(0xffffffffu, b, 100);
		c = sv_roce_icrc_add(sv_roce_icrc_add(0xffffffffu, b, 37),
				     b + 37, 63);
		ASSERT_EQ(a, c);
	}
}

/* The CRC by carry-less multiplication (64 bytes and more, where the CPU
 * has it) is the tables' at every length, alignment and register. */
SV_TEST(icrc_fast_crc_is_the_tables_one)
{
	static uint8_t b[4200];

	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)rnd();
	for (size_t n = 0; n <= 1100; n += n < 200 ? 1 : 37)
		for (size_t off = 0; off < 16; off += 5) {
			uint32_t crc = rnd();

			ASSERT_EQ(sv_roce_crc_tables(crc, b + off, n),
				  sv_roce_icrc_add(crc, b + off, n));
		}
	ASSERT_EQ(sv_roce_crc_tables(0xffffffffu, b, 4200),
		  sv_roce_icrc_add(0xffffffffu, b, 4200));
	/* the CRC of a copy made on the way: the same CRC, the same bytes,
	 * nothing written past n */
	for (size_t n = 0; n <= 1100; n += n < 300 ? 1 : 37)
		for (size_t off = 0; off < 16; off += 5) {
			static uint8_t d[1200];
			uint32_t crc = rnd();

			memset(d, 0x5a, sizeof(d));
			ASSERT_EQ(sv_roce_crc_tables(crc, b + off, n),
				  sv_roce_icrc_copy(crc, d + 3 + off, b + off,
						    n));
			ASSERT_OK(memcmp(d + 3 + off, b + off, n));
			ASSERT_EQ(0x5a, d[3 + off + n]);
			ASSERT_EQ(0x5a, d[2 + off]);
		}
	/* the check value of CRC-32 at a length the fast path takes */
	memset(b, 'a', 64);
	ASSERT_EQ(sv_roce_crc_tables(0xffffffffu, b, 64),
		  sv_roce_icrc_add(0xffffffffu, b, 64));
}

/* One SEND_ONLY of 5 bytes over ip; returns its length. */
static int one_send(uint8_t *buf, const struct sv_roce_ip *ip)
{
	struct sv_roce_pkt p = {.opcode = SV_IB_SEND_ONLY,
				.pkey = 0xffff,
				.dqpn = 0x11,
				.psn = 7,
				.payload = (const uint8_t *)"hello",
				.len = 5};

	return sv_roce_build(buf, 64, &p, ip);
}

/* A17.3.3: the variant fields are outside the ICRC, the rest inside. */
SV_TEST(icrc_covers_what_a17_says)
{
	for (int v6 = 0; v6 < 2; v6++) {
		struct sv_roce_ip ip = ip_of(v6), o;
		struct sv_roce_pkt q;
		uint8_t buf[64];
		int n = one_send(buf, &ip);

		ASSERT_EQ(12 + 8 + 4, n);
		/* TTL / hop limit: outside */
		o = ip;
		o.ttl = 1;
		ASSERT_EQ(SV_ROCE_OK, sv_roce_parse(buf, (size_t)n, &o, &q));
		/* BTH byte 4 (FECN/BECN): outside, and reported */
		buf[4] = 0xc0;
		ASSERT_EQ(SV_ROCE_OK, sv_roce_parse(buf, (size_t)n, &ip, &q));
		ASSERT_EQ(0xc0, q.fb);
		/* ports, addresses: inside */
		o = ip;
		o.sport++;
		ASSERT_EQ(SV_ROCE_ICRC_BAD,
			  sv_roce_parse(buf, (size_t)n, &o, &q));
		o = ip;
		o.src[15] ^= 1;
		ASSERT_EQ(SV_ROCE_ICRC_BAD,
			  sv_roce_parse(buf, (size_t)n, &o, &q));
		/* every other byte of the packet: inside */
		for (int i = 0; i < n; i++) {
			if (i == 4)
				continue;
			buf[i] ^= 0x10;
			ASSERT_EQ(SV_ROCE_ICRC_BAD,
				  sv_roce_parse(buf, (size_t)n, &ip, &q));
			buf[i] ^= 0x10;
		}
	}
}

/* The IPv4 ID and DF are inside: what a UDP-socket receiver cannot see. */
SV_TEST(icrc_covers_ipv4_id_and_df)
{
	struct sv_roce_ip ip = ip_of(false), o;
	struct sv_roce_pkt q;
	uint8_t buf[64];
	int n;

	ip.ip_id = 0x2e32; /* as rxe sends: random */
	n = one_send(buf, &ip);
	ASSERT_EQ(SV_ROCE_OK, sv_roce_parse(buf, (size_t)n, &ip, &q));
	o = ip;
	o.ip_id = 0; /* what a UDP socket's receiver would guess */
	ASSERT_EQ(SV_ROCE_ICRC_BAD, sv_roce_parse(buf, (size_t)n, &o, &q));
	o = ip;
	o.no_df = true;
	ASSERT_EQ(SV_ROCE_ICRC_BAD, sv_roce_parse(buf, (size_t)n, &o, &q));
	/* so such a receiver passes NULL: everything but the ICRC checked */
	ASSERT_EQ(SV_ROCE_OK, sv_roce_parse(buf, (size_t)n, NULL, &q));
}

/* The IPv4 ID is solved from the ICRC: a receiver with id_span s takes
 * a packet built with any ID below s, says which (each checked against
 * a packet built with that ID, at every length an MTU's segments take),
 * refuses every ID from s on, and refuses damage.  IDs: a GSO run's 0,
 * 1, 2... (softverbs), and a kernel's counter through 0 (rxe). */
SV_TEST(icrc_solves_the_ip_id)
{
	static uint8_t payload[4096];
	uint32_t lens[] = {0, 1, 5, 1024, 1023, 4096};
	struct sv_roce_idmemo memo = {0}; /* one, across lengths */
	uint32_t ids[100], nid = 0, damage_passed = 0;

	srandom(29);
	for (uint32_t i = 0; i < 70; i++)
		ids[nid++] = i;
	ids[nid++] = 0xfffe; /* rxe's counter, about to wrap */
	ids[nid++] = 0xffff;
	ids[nid++] = 0x8000;
	ids[nid++] = 0x1234;
	while (nid < sizeof(ids) / sizeof(ids[0]))
		ids[nid++] = rnd() & 0xffff;
	for (uint32_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)rnd();
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		struct sv_roce_pkt p = {.opcode = SV_IB_SEND_MIDDLE,
					.pkey = 0xffff,
					.dqpn = 0x11,
					.psn = 7,
					.payload = payload,
					.len = lens[l]};
		struct sv_roce_ip ip = ip_of(false), rx = ip_of(false);
		struct sv_roce_pkt q;
		static uint8_t buf[4200];
		int n;

		rx.memo = l % 2 ? &memo : NULL; /* with a memo, and without */
		for (uint32_t j = 0; j < nid; j++) {
			uint32_t id = ids[j];

			ip.ip_id = (uint16_t)id;
			n = sv_roce_build(buf, sizeof(buf), &p, &ip);
			ASSERT_EQ(sv_roce_pkt_len(&p), (uint32_t)n);
			rx.id_span = SV_ROCE_ID_ANY;
			memset(&q, 0, sizeof(q));
			ASSERT_EQ(SV_ROCE_OK,
				  sv_roce_parse(buf, (size_t)n, &rx, &q));
			ASSERT_EQ(id, q.ip_id);
			/* a span takes what is below it */
			rx.id_span = 64;
			ASSERT_EQ(id < 64 ? SV_ROCE_OK : SV_ROCE_ICRC_BAD,
				  sv_roce_parse(buf, (size_t)n, &rx, &q));
			/* without the span, only ID 0 */
			rx.id_span = 0;
			ASSERT_EQ(id == 0 ? SV_ROCE_OK : SV_ROCE_ICRC_BAD,
				  sv_roce_parse(buf, (size_t)n, &rx, &q));
			/* a flipped bit is damage at every ID: a CRC-32
			 * catches any error of three bits or fewer, and
			 * with the ID's 16 bits solved for, 1 in 2^16
			 * others pass */
			rx.id_span = SV_ROCE_ID_ANY;
			for (uint32_t f = 0; f < 8; f++) {
				uint32_t at = rnd() % (uint32_t)(n - 1);

				at += at >= 4; /* not BTH byte 4: masked */

				buf[at] ^= (uint8_t)(1u << f);
				damage_passed +=
					sv_roce_parse(buf, (size_t)n, &rx,
						      &q) != SV_ROCE_ICRC_BAD;
				buf[at] ^= (uint8_t)(1u << f);
			}
			/* so does one in the ID's own field's neighbour:
			 * a sender's address other than the one we expect */
			rx.src[15] ^= 1;
			ASSERT_EQ(SV_ROCE_ICRC_BAD,
				  sv_roce_parse(buf, (size_t)n, &rx, &q));
			rx.src[15] ^= 1;
		}
	}
	/* 4,800 damaged packets: at 2^-16 each, any that passes is a 7 %
	 * event; deterministic here (the seed is fixed) */
	ASSERT_EQ(0, damage_passed);
}

/* The headers' memo gives the ICRC the memo-less path gives: across
 * lengths and IDs (every slot taken many times over, keys colliding),
 * v4 and v6, in both orders of first and second use. */
SV_TEST(icrc_header_memo_is_the_plain_icrc)
{
	static uint8_t payload[1100];
	uint8_t hdr[SV_ROCE_HDR_MAX];
	struct sv_roce_pkt p = {
		.opcode = SV_IB_WRITE_FIRST,
		.pkey = 0xffff,
		.dqpn = 0x11,
		.psn = 7,
		.reth = {.va = 0x1000, .rkey = 5, .dma_len = 9}};

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)rnd();
	p.payload = payload;
	for (int v6 = 0; v6 < 2; v6++) {
		static struct sv_roce_hdrmemo memo;
		struct sv_roce_ip plain = ip_of(v6), m = ip_of(v6);

		memset(&memo, 0, sizeof(memo));
		m.hmemo = &memo;
		for (int pass = 0; pass < 2; pass++)
			for (uint32_t len = 0; len < sizeof(payload);
			     len += len < 70 ? 1 : 64)
				for (uint32_t id = 0; id < 70; id += 3) {
					uint32_t h, t = sv_roce_hdr_len(
							    sv_roce_op_mask(
								    p.opcode));

					p.len = len;
					plain.ip_id = m.ip_id =
						(uint16_t)(pass ? 69 - id : id);
					sv_roce_hdr_put(hdr, &p);
					h = t + len + (-len & 3) + 4;
					ASSERT_EQ(sv_roce_icrc_start(&plain,
								     hdr, t, h),
						  sv_roce_icrc_start(&m, hdr, t,
								     h));
				}
	}
}

/* Writes b with its ICRC fixed for ip: a malformed packet that is
 * otherwise well sent. */
static void reseal(uint8_t *b, size_t n, const struct sv_roce_ip *ip)
{
	uint32_t c = sv_roce_icrc_start(ip, b, 12, (uint32_t)n);

	c = sv_roce_icrc_add(c, b + 12, n - 16);
	sv_roce_icrc_put(b + n - 4, sv_roce_icrc_end(c));
}

SV_TEST(malformed_packets_get_their_reason)
{
	static const struct {
		const char *what;
		uint8_t bytes[48];
		size_t n;
		enum sv_roce_verdict v;
	} bad[] = {
		{"nothing", {0}, 0, SV_ROCE_SHORT},
		{"BTH without ICRC", {0x04, 0, 0xff, 0xff}, 12, SV_ROCE_SHORT},
		{"15 bytes", {0x04}, 15, SV_ROCE_SHORT},
		{"TVer 1", {0x04, 0x01, 0xff, 0xff}, 16, SV_ROCE_TVER},
		{"RD SEND_ONLY", {0x44}, 16, SV_ROCE_OPCODE},
		{"RC opcode 0x15", {0x15}, 16, SV_ROCE_OPCODE},
		{"UC READ_REQUEST", {0x2c}, 44, SV_ROCE_OPCODE},
		{"UD SEND_FIRST", {0x60}, 40, SV_ROCE_OPCODE},
		{"opcode 0xff", {0xff}, 16, SV_ROCE_OPCODE},
		{"RETH cut", {0x0a}, 20, SV_ROCE_TRUNC},
		{"AtomicETH cut", {0x13}, 43, SV_ROCE_TRUNC},
		{"DETH cut", {0x64}, 19, SV_ROCE_TRUNC},
		{"AETH cut", {0x11}, 16, SV_ROCE_TRUNC},
		{"XRCETH cut", {0xa4}, 16, SV_ROCE_TRUNC},
		{"pad 3 of 2 bytes", {0x04, 0x30}, 18, SV_ROCE_PAD},
		{"pad 1 of none", {0x04, 0x10}, 16, SV_ROCE_PAD},
		{"pad on an ACK", {0x11, 0x10}, 20, SV_ROCE_PAD},
		{"bytes after an ACK", {0x11}, 24, SV_ROCE_LEN},
		{"payload on READ_REQUEST", {0x0c}, 36, SV_ROCE_LEN},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sv_roce_ip ip = ip_of(false);
		/* exactly n bytes: past them is ASan's */
		uint8_t *b = malloc(bad[i].n ? bad[i].n : 1);
		struct sv_roce_pkt q = {.opcode = 0x5a};

		memcpy(b, bad[i].bytes, bad[i].n);
		if (bad[i].n >= 16)
			reseal(b, bad[i].n, &ip);
		if (sv_roce_parse(b, bad[i].n, &ip, &q) != bad[i].v)
			sv_test_fail(__FILE__, __LINE__, "%s: %s, want %s",
				     bad[i].what,
				     sv_roce_verdict_names[sv_roce_parse(
					     b, bad[i].n, &ip, &q)],
				     sv_roce_verdict_names[bad[i].v]);
		ASSERT_EQ(bad[i].v, sv_roce_parse(b, bad[i].n, NULL, &q));
		ASSERT_EQ(0x5a, q.opcode); /* written only on success */
		free(b);
	}
	/* longer than UDP can carry, and a payload over 4096 */
	{
		size_t n = 12 + 4100 + 4;
		uint8_t *b = calloc(1, 0x10000);
		struct sv_roce_pkt q;

		b[0] = 0x04;
		ASSERT_EQ(SV_ROCE_LEN, sv_roce_parse(b, n, NULL, &q));
		ASSERT_EQ(SV_ROCE_LEN, sv_roce_parse(b, 0x10000, NULL, &q));
		free(b);
	}
	for (int v = 0; v < SV_ROCE_VERDICTS; v++)
		ASSERT_NOT_NULL(sv_roce_verdict_names[v]);
}

SV_TEST(every_truncation_is_refused_in_bounds)
{
	static uint8_t payload[300], full[512];

	srandom(7);
	for (int op = 0; op < 256; op++) {
		struct sv_roce_ip ip = ip_of(op & 1);
		struct sv_roce_pkt p, q;
		int n;

		if (!sv_roce_op_mask((uint8_t)op))
			continue;
		p = random_pkt((uint8_t)op, payload, 257);
		n = sv_roce_build(full, sizeof(full), &p, &ip);
		ASSERT_GE(n, 16);
		for (int k = 0; k < n; k++) {
			uint8_t *b = malloc(k ? (size_t)k : 1);

			memcpy(b, full, (size_t)k);
			/* cut: the last 4 bytes are no ICRC of it */
			ASSERT_NE(SV_ROCE_OK,
				  sv_roce_parse(b, (size_t)k, &ip, &q));
			/* unchecked it may parse; never past its end */
			if (sv_roce_parse(b, (size_t)k, NULL, &q) ==
			    SV_ROCE_OK) {
				ASSERT_TRUE(q.payload >= b);
				ASSERT_LE(q.payload + q.len + q.pad + 4, b + k);
			}
			free(b);
		}
	}
}

SV_TEST(build_refuses_what_it_cannot_write)
{
	struct sv_roce_ip ip = ip_of(false);
	struct sv_roce_pkt p = {.opcode = SV_IB_ACK, .len = 1};
	uint8_t buf[64], big[SV_ROCE_MAX_PMTU + 1] = {0};

	ASSERT_EQ(-EINVAL, sv_roce_build(buf, sizeof(buf), &p, &ip));
	p.opcode = 0x40; /* RD */
	p.len = 0;
	ASSERT_EQ(-EINVAL, sv_roce_build(buf, sizeof(buf), &p, &ip));
	p.opcode = SV_IB_SEND_ONLY;
	p.payload = big;
	p.len = sizeof(big);
	ASSERT_EQ(-EINVAL, sv_roce_build(buf, sizeof(buf), &p, &ip));
	p.len = 48; /* 12 + 48 + 4 = 64 fits; 49 (+ 3 pad: 68) does not */
	ASSERT_EQ(64, sv_roce_build(buf, sizeof(buf), &p, &ip));
	p.len = 49;
	ASSERT_EQ(-ENOSPC, sv_roce_build(buf, sizeof(buf), &p, &ip));
}

SV_TEST(opcode_must_match_the_qp_type)
{
	struct sv_roce_pkt p = {.opcode = 0x04};

	ASSERT_EQ(SV_ROCE_OK, sv_roce_check_qpt(&p, IBV_QPT_RC));
	ASSERT_EQ(SV_ROCE_QPT, sv_roce_check_qpt(&p, IBV_QPT_UC));
	ASSERT_EQ(SV_ROCE_QPT, sv_roce_check_qpt(&p, IBV_QPT_UD));
	p.opcode = 0x64;
	ASSERT_EQ(SV_ROCE_OK, sv_roce_check_qpt(&p, IBV_QPT_UD));
	ASSERT_EQ(SV_ROCE_QPT, sv_roce_check_qpt(&p, IBV_QPT_RC));
	p.opcode = 0xa4;
	ASSERT_EQ(SV_ROCE_OK, sv_roce_check_qpt(&p, IBV_QPT_XRC_RECV));
	ASSERT_EQ(SV_ROCE_OK, sv_roce_check_qpt(&p, IBV_QPT_XRC_SEND));
	ASSERT_EQ(SV_ROCE_QPT, sv_roce_check_qpt(&p, IBV_QPT_RC));
	p.opcode = 0x24;
	ASSERT_EQ(SV_ROCE_OK, sv_roce_check_qpt(&p, IBV_QPT_UC));
	ASSERT_EQ(SV_ROCE_QPT, sv_roce_check_qpt(&p, IBV_QPT_RAW_PACKET));
	p.opcode = 0x81; /* CNP: for the transport to take before */
	ASSERT_EQ(SV_ROCE_QPT, sv_roce_check_qpt(&p, IBV_QPT_RC));
}

/* Segments a message, checks each packet against check_seg, returns the
 * opcodes in ops. */
static int segs(uint8_t tp, enum sv_roce_msg k, uint32_t len, uint32_t mtu,
		uint8_t *ops, int max)
{
	uint32_t n = sv_roce_npkts(len, mtu), sum = 0;

	ASSERT_LE(n, (uint32_t)max);
	for (uint32_t i = 0; i < n; i++) {
		struct sv_roce_seg s;
		struct sv_roce_pkt p;

		ASSERT_OK(sv_roce_segment(tp, k, len, mtu, i, &s));
		ASSERT_EQ(sum, s.off);
		sum += s.len;
		ops[i] = s.opcode;
		p.mask = sv_roce_op_mask(s.opcode);
		p.len = s.len;
		ASSERT_EQ(SV_ROCE_OK, sv_roce_check_seg(&p, mtu));
	}
	ASSERT_EQ(len, sum);
	return (int)n;
}

SV_TEST(segmenter_gives_first_middle_last_only)
{
	uint8_t ops[8];
	struct sv_roce_seg s;
	struct sv_roce_pkt p;

	ASSERT_EQ(1, segs(SV_IB_RC, SV_ROCE_MSG_SEND, 0, 1024, ops, 8));
	ASSERT_EQ(0x04, ops[0]);
	ASSERT_EQ(1, segs(SV_IB_RC, SV_ROCE_MSG_SEND, 1024, 1024, ops, 8));
	ASSERT_EQ(0x04, ops[0]);
	ASSERT_EQ(2, segs(SV_IB_RC, SV_ROCE_MSG_SEND, 1025, 1024, ops, 8));
	ASSERT_EQ(0x00, ops[0]);
	ASSERT_EQ(0x02, ops[1]);
	ASSERT_EQ(4, segs(SV_IB_RC, SV_ROCE_MSG_SEND_IMM, 4096, 1024, ops, 8));
	ASSERT_TRUE(!memcmp(ops, "\x00\x01\x01\x03", 4));
	ASSERT_EQ(3, segs(SV_IB_UC, SV_ROCE_MSG_WRITE_IMM, 600, 256, ops, 8));
	ASSERT_TRUE(!memcmp(ops, "\x26\x27\x29", 3));
	ASSERT_EQ(1, segs(SV_IB_XRC, SV_ROCE_MSG_WRITE_IMM, 8, 4096, ops, 8));
	ASSERT_EQ(0xab, ops[0]);
	ASSERT_EQ(2, segs(SV_IB_RC, SV_ROCE_MSG_READ_RESP, 8192, 4096, ops, 8));
	ASSERT_TRUE(!memcmp(ops, "\x0d\x0f", 2));
	ASSERT_EQ(2, segs(SV_IB_RC, SV_ROCE_MSG_SEND_INV, 300, 256, ops, 8));
	ASSERT_TRUE(!memcmp(ops, "\x00\x16", 2));
	ASSERT_EQ(1, segs(SV_IB_UD, SV_ROCE_MSG_SEND_IMM, 4096, 4096, ops, 8));
	ASSERT_EQ(0x65, ops[0]);
	/* what the transports lack, bad MTUs, past the end */
	ASSERT_EQ(-EINVAL, sv_roce_segment(SV_IB_UD, SV_ROCE_MSG_SEND, 4097,
					   4096, 0, &s));
	ASSERT_EQ(-EINVAL, sv_roce_segment(SV_IB_UC, SV_ROCE_MSG_READ_RESP, 8,
					   1024, 0, &s));
	ASSERT_EQ(-EINVAL, sv_roce_segment(SV_IB_UC, SV_ROCE_MSG_SEND_INV, 8,
					   1024, 0, &s));
	ASSERT_EQ(-EINVAL,
		  sv_roce_segment(SV_IB_RC, SV_ROCE_MSG_SEND, 8, 1000, 0, &s));
	ASSERT_EQ(-EINVAL,
		  sv_roce_segment(SV_IB_RC, SV_ROCE_MSG_SEND, 8, 8192, 0, &s));
	ASSERT_EQ(-EINVAL,
		  sv_roce_segment(SV_IB_RC, SV_ROCE_MSG_SEND, 8, 1024, 1, &s));
	ASSERT_EQ(-EINVAL, sv_roce_segment(SV_IB_RC, (enum sv_roce_msg)99, 8,
					   1024, 0, &s));
	ASSERT_EQ(-EINVAL,
		  sv_roce_segment(0x05, SV_ROCE_MSG_SEND, 8, 1024, 0, &s));
	/* the largest message: no overflow in the offsets */
	ASSERT_OK(sv_roce_segment(SV_IB_RC, SV_ROCE_MSG_WRITE, 0xffffffffu, 256,
				  sv_roce_npkts(0xffffffffu, 256) - 1, &s));
	ASSERT_EQ(0x08, s.opcode);
	ASSERT_EQ(255u, s.len);
	/* check_seg refuses what the segmenter never makes */
	p.mask = sv_roce_op_mask(0x00); /* FIRST */
	p.len = 1023;
	ASSERT_EQ(SV_ROCE_SEG_LEN, sv_roce_check_seg(&p, 1024));
	p.mask = sv_roce_op_mask(0x01); /* MIDDLE */
	p.len = 1025;
	ASSERT_EQ(SV_ROCE_SEG_LEN, sv_roce_check_seg(&p, 1024));
	p.mask = sv_roce_op_mask(0x02); /* LAST */
	p.len = 0;
	ASSERT_EQ(SV_ROCE_SEG_LEN, sv_roce_check_seg(&p, 1024));
	p.mask = sv_roce_op_mask(0x04); /* ONLY */
	p.len = 1025;
	ASSERT_EQ(SV_ROCE_SEG_LEN, sv_roce_check_seg(&p, 1024));
	p.mask = sv_roce_op_mask(0x11); /* ACK: no payload, passes */
	p.len = 0;
	ASSERT_EQ(SV_ROCE_OK, sv_roce_check_seg(&p, 1024));
}

/* The source port rxe sent from, seen on the wire (rxe-vm.md: its QP
 * 0x16 to our 0x0abcde, port 64298), is ours for that pair, both ways,
 * and always in 0xc000-0xffff. */
SV_TEST(source_port_is_the_kernels)
{
	ASSERT_EQ(64298, sv_roce_sport(0x16, 0x0abcde));
	ASSERT_EQ(64298, sv_roce_sport(0x0abcde, 0x16));
	for (uint32_t a = 1; a < 0xffffff; a = a * 7 + 3)
		for (uint32_t b = 2; b < 0xffffff; b = b * 5 + 1)
			ASSERT_GE(sv_roce_sport(a, b), 0xc000);
}

/* A pair whose two ends have one address (two processes on one host):
 * each way its own port, both in 0xc000-0xffff, the same at both ends
 * (the one a sends from is the one b's socket is connected to), and
 * neither far from the pair's. */
SV_TEST(source_ports_of_a_pair_on_one_address_differ_by_way)
{
	for (uint32_t a = 1; a < 0xffffff; a = a * 7 + 3)
		for (uint32_t b = 2; b < 0xffffff; b = b * 5 + 1) {
			uint16_t s = sv_roce_sport(a, b);
			uint16_t ab = sv_roce_sport_way(s, a, b);
			uint16_t ba =
				sv_roce_sport_way(sv_roce_sport(b, a), b, a);

			if (a == b)
				continue;
			ASSERT_TRUE(ab != ba);
			ASSERT_GE(ab, 0xc000);
			ASSERT_GE(ba, 0xc000);
			ASSERT_EQ(s & ~1u, ab & ~1u);
			ASSERT_EQ(s & ~1u, ba & ~1u);
		}
}
