// SPDX-License-Identifier: MIT
/*
 * RoCEv2 packets (roce.h): the headers an opcode carries written and
 * read in wire order, the ICRC (IBA A17.3.3: CRC-32 over the masked IP,
 * UDP and BTH headers, the rest of the packet), the checks a received
 * packet must pass before any field is believed, and the segmentation of
 * a message into FIRST/MIDDLE/LAST/ONLY packets.  Pure: no state but the
 * CRC tables, no I/O.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "roce.h"

const char *const sv_roce_verdict_names[SV_ROCE_VERDICTS] = {
	[SV_ROCE_OK] = "ok",
	[SV_ROCE_SHORT] = "short",
	[SV_ROCE_TVER] = "bad_tver",
	[SV_ROCE_OPCODE] = "bad_opcode",
	[SV_ROCE_TRUNC] = "truncated_headers",
	[SV_ROCE_PAD] = "bad_pad",
	[SV_ROCE_LEN] = "bad_length",
	[SV_ROCE_ICRC_BAD] = "bad_icrc",
	[SV_ROCE_QPT] = "opcode_not_for_qp_type",
	[SV_ROCE_SEG_LEN] = "bad_segment_length",
};

/* Extension headers in wire order (IBA 9.2), with their lengths. */
static const struct {
	uint32_t bit;
	uint8_t len;
} ext_order[] = {
	{SV_RH_DETH, 8},     {SV_RH_XRCETH, 4}, {SV_RH_RETH, 16},
	{SV_RH_ATOMETH, 28}, {SV_RH_AETH, 4},	{SV_RH_ATOMACK, 8},
	{SV_RH_IMM, 4},	     {SV_RH_IETH, 4},	{SV_RH_CNP, 16},
};

/* -- CRC-32 (IEEE 802.3, reflected), slicing by 8 ------------------- */

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_tab[0][i] = c;
	}
	for (int k = 1; k < 8; k++)
		for (int i = 0; i < 256; i++)
			crc_tab[k][i] = (crc_tab[k - 1][i] >> 8) ^
					crc_tab[0][crc_tab[k - 1][i] & 0xff];
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* The tables exist: sv_roce_icrc_start, which every ICRC begins with,
 * made them. */
static uint32_t crc_tables(uint32_t crc, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	for (; n >= 8; n -= 8, p += 8) {
		uint32_t a = crc ^ le32(p), b = le32(p + 4);

		crc = crc_tab[7][a & 0xff] ^ crc_tab[6][(a >> 8) & 0xff] ^
		      crc_tab[5][(a >> 16) & 0xff] ^ crc_tab[4][a >> 24] ^
		      crc_tab[3][b & 0xff] ^ crc_tab[2][(b >> 8) & 0xff] ^
		      crc_tab[1][(b >> 16) & 0xff] ^ crc_tab[0][b >> 24];
	}
	while (n--)
		crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
#define CRC_TARGET "pclmul,sse4.1"
#define FOLD(x, k, next)                                                \
	(_mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),  \
				     _mm_clmulepi64_si128(x, k, 0x11)), \
		       next))

/* The register x1, 16 bytes folded so far, on through n more (a
 * multiple of 16), then reduced to the CRC. */
__attribute__((target(CRC_TARGET))) static inline uint32_t
crc_fold_end(__m128i x1, const uint8_t *p, size_t n)
{
	const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
	const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
	const __m128i pu = _mm_set_epi64x(0x1f7011641, 0x1db710641);
	const __m128i low32 = _mm_set_epi32(0, 0, 0, -1);
	__m128i t;

	for (; n >= 16; p += 16, n -= 16)
		x1 = FOLD(x1, k3k4, _mm_loadu_si128((const __m128i *)p));
	/* 128 bits to 64 (the low half times x^(64+32) mod P), then to 32 */
	x1 = _mm_xor_si128(_mm_clmulepi64_si128(k3k4, x1, 0x01),
			   _mm_srli_si128(x1, 8));
	t = _mm_srli_si128(x1, 4);
	x1 = _mm_xor_si128(
		_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00), t);
	/* Barrett: q = (x mod x^32) * u, r = x + (q mod x^32) * P */
	t = _mm_and_si128(
		_mm_clmulepi64_si128(_mm_and_si128(x1, low32), pu, 0x10),
		low32);
	x1 = _mm_xor_si128(_mm_clmulepi64_si128(t, pu, 0x00), x1);
	return (uint32_t)_mm_extract_epi32(x1, 1);
}

/*
 * The CRC of 4 to 16 bytes the same way, one block: a CRC from 0 does
 * not change over leading zero bytes, so the bytes, the register added
 * into their first four (hence at least 4), go to the end of a zeroed
 * block (a masked load, which reads nothing past them, and a byte
 * shuffle) that crc_fold_end reduces.  A BTH's 12 bytes in 13.7 ns
 * against the tables' 18 (10^7 dependent calls).
 */
__attribute__((target("avx512bw,avx512vl," CRC_TARGET))) static uint32_t
crc_clmul_short(uint32_t crc, const uint8_t *p, size_t n)
{
	/* shuffle[n + i]: byte i of the block, byte i - (16 - n) of the
	 * bytes (0x80: a zero) */
	static const uint8_t shuffle[32] = {
		0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
		0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
		0,    1,    2,	  3,	4,    5,    6,	  7,
		8,    9,    10,	  11,	12,   13,   14,	  15};
	__m128i v = _mm_maskz_loadu_epi8((__mmask16)((1u << n) - 1), p);

	v = _mm_xor_si128(v, _mm_cvtsi32_si128((int)crc));
	v = _mm_shuffle_epi8(v,
			     _mm_loadu_si128((const __m128i *)(shuffle + n)));
	return crc_fold_end(v, p, 0);
}

/*
 * The same CRC by carry-less multiplication (Gopal et al., "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ", Intel, 2009):
 * four 128-bit lanes fold forward 64 bytes at a time, fold into one,
 * then 128 bits reduce to 32 (a fold and a Barrett reduction).  A fold
 * across d bits multiplies the low 64 bits by x^(d+32) mod P and the
 * high by x^(d-32) mod P (reflected, shifted left one); Barrett uses P
 * and floor(x^64 / P).  n >= 64 and a multiple of 16.  A 1 KiB payload
 * takes about a tenth of the tables' time, on both sides of every RoCE
 * packet.
 */
__attribute__((target(CRC_TARGET))) static uint32_t
crc_clmul(uint32_t crc, const uint8_t *p, size_t n)
{
	const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
	const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
	__m128i x1 = _mm_loadu_si128((const __m128i *)p),
		x2 = _mm_loadu_si128((const __m128i *)(p + 16)),
		x3 = _mm_loadu_si128((const __m128i *)(p + 32)),
		x4 = _mm_loadu_si128((const __m128i *)(p + 48));

	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
	for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
		x1 = FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)p));
		x2 = FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
		x3 = FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
		x4 = FOLD(x4, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
	}
	x1 = FOLD(x1, k3k4, x2);
	x1 = FOLD(x1, k3k4, x3);
	x1 = FOLD(x1, k3k4, x4);
	return crc_fold_end(x1, p, n);
}

#define VCRC_TARGET "avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1"
#define VFOLD(x, k, next)                                                     \
	_mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),       \
				  _mm512_clmulepi64_epi128(x, k, 0x11), next, \
				  0x96)

/* 64 bytes at p, stored at d on the way where d */
__attribute__((target(VCRC_TARGET), always_inline)) static inline __m512i
ld64(const uint8_t *p, uint8_t *d)
{
	__m512i v = _mm512_loadu_si512(p);

	if (d)
		_mm512_storeu_si512(d, v);
	return v;
}

/*
 * The same with VPCLMULQDQ: sixteen 128-bit lanes in four 512-bit
 * registers fold forward 256 bytes at a time (d = 2048), the four
 * registers fold into one (d = 512), its lanes into one (d = 384, 256,
 * 128), and crc_fold_end goes on.  n >= 256 and a multiple of 16: 1,040
 * bytes in 31 ns against crc_clmul's 74.  Where d, the bytes are
 * copied there as they are read: one pass over the source.
 */
__attribute__((target(VCRC_TARGET), always_inline)) static inline uint32_t
vclmul(uint32_t crc, const uint8_t *p, size_t n, uint8_t *d)
{
	const __m512i k2048 = _mm512_broadcast_i32x4(
		_mm_set_epi64x(0x1322d1430, 0x11542778a));
	const __m512i k512 = _mm512_broadcast_i32x4(
		_mm_set_epi64x(0x1c6e41596, 0x154442bd4));
	/* lane j of the last register to lane 3: d = 384, 256, 128, none */
	const __m512i klanes =
		_mm512_set_epi64(0, 0, 0x0ccaa009e, 0x1751997d0, 0x15a546366,
				 0x0f1da05aa, 0x174359406, 0x03db1ecdc);
#define AT(k) (d ? d + (k) : NULL)
	__m512i x0 = _mm512_xor_si512(
			ld64(p, AT(0)),
			_mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc))),
		x1 = ld64(p + 64, AT(64)), x2 = ld64(p + 128, AT(128)),
		x3 = ld64(p + 192, AT(192)), t;
	__m128i x;

	for (p += 256, d = AT(256), n -= 256; n >= 256;
	     p += 256, d = AT(256), n -= 256) {
		x0 = VFOLD(x0, k2048, ld64(p, AT(0)));
		x1 = VFOLD(x1, k2048, ld64(p + 64, AT(64)));
		x2 = VFOLD(x2, k2048, ld64(p + 128, AT(128)));
		x3 = VFOLD(x3, k2048, ld64(p + 192, AT(192)));
	}
	x1 = VFOLD(x0, k512, x1);
	x2 = VFOLD(x1, k512, x2);
	x3 = VFOLD(x2, k512, x3);
	for (; n >= 64; p += 64, d = AT(64), n -= 64)
		x3 = VFOLD(x3, k512, ld64(p, AT(0)));
#undef AT
	t = VFOLD(x3, klanes, _mm512_maskz_mov_epi64(0xc0, x3));
	x = _mm_xor_si128(_mm_xor_si128(_mm512_extracti32x4_epi32(t, 0),
					_mm512_extracti32x4_epi32(t, 1)),
			  _mm_xor_si128(_mm512_extracti32x4_epi32(t, 2),
					_mm512_extracti32x4_epi32(t, 3)));
	if (d && n) { /* the last 16-byte blocks from the copy */
		memcpy(d, p, n);
		p = d;
	}
	return crc_fold_end(x, p, n);
}

__attribute__((target(VCRC_TARGET))) static uint32_t
crc_vclmul(uint32_t crc, const uint8_t *p, size_t n)
{
	return vclmul(crc, p, n, NULL);
}

__attribute__((target(VCRC_TARGET))) static uint32_t
crc_vclmul_copy(uint32_t crc, uint8_t *d, const uint8_t *p, size_t n)
{
	return vclmul(crc, p, n, d);
}
#undef VFOLD
#undef FOLD

/* What the CPU has for the CRC, asked once: 1 PCLMULQDQ (crc_clmul),
 * 2 and AVX-512 BW and VL (crc_clmul_short), 3 and VPCLMULQDQ
 * (crc_vclmul); 0 none. */
static int crc_level(void)
{
	/* relaxed: threads that ask at once all find the same answer */
	static _Atomic int level = -1;
	int l = atomic_load_explicit(&level, memory_order_relaxed);

	if (l >= 0)
		return l;
	l = 0;
	if (__builtin_cpu_supports("pclmul") &&
	    __builtin_cpu_supports("sse4.1"))
		l = 1;
	if (l && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl"))
		l = 2;
	if (l == 2 && __builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("vpclmulqdq"))
		l = 3;
	atomic_store_explicit(&level, l, memory_order_relaxed);
	return l;
}

static bool have_clmul(void)
{
	return crc_level() >= 1;
}

static bool have_short(void)
{
	return crc_level() >= 2;
}

static bool have_vclmul(void)
{
	return crc_level() >= 3;
}
#endif

uint32_t sv_roce_icrc_add(uint32_t crc, const void *buf, size_t n)
{
#if defined(__x86_64__)
	if (n >= 4 && n <= 16 && have_short())
		return crc_clmul_short(crc, buf, n);
	if (n >= 64 && have_clmul()) {
		size_t m = n & ~(size_t)15;

		crc = m >= 256 && have_vclmul() ? crc_vclmul(crc, buf, m)
						: crc_clmul(crc, buf, m);
		buf = (const uint8_t *)buf + m;
		n -= m;
	}
#endif
	return crc_tables(crc, buf, n);
}

uint32_t sv_roce_icrc_copy(uint32_t crc, void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *p = src;

#if defined(__x86_64__)
	if (n >= 256 && have_vclmul()) {
		size_t m = n & ~(size_t)15;

		crc = crc_vclmul_copy(crc, d, p, m);
		d += m;
		p += m;
		n -= m;
	}
#endif
	if (n)
		memcpy(d, p, n);
	return sv_roce_icrc_add(crc, d, n);
}

uint32_t sv_roce_crc_tables(uint32_t crc, const void *buf, size_t n)
{
	pthread_once(&crc_once, crc_init);
	return crc_tables(crc, buf, n);
}

/* a * b modulo the CRC's polynomial, both reflected (bit 31 is x^0) */
static uint32_t gf2_mul(uint32_t a, uint32_t b)
{
	uint32_t p = 0;

	for (uint32_t m = 1u << 31; m; m >>= 1) {
		if (a & m)
			p ^= b;
		b = b & 1 ? (b >> 1) ^ 0xedb88320u : b >> 1;
	}
	return p;
}

/* x^(8 n) modulo the polynomial: what n zero bytes do to a register */
static uint32_t zeros_op(uint32_t n)
{
	uint32_t r = 1u << 31, sq = 1u << 23; /* x^0; x^8 */

	for (; n; n >>= 1, sq = gf2_mul(sq, sq))
		if (n & 1)
			r = gf2_mul(r, sq);
	return r;
}

/* The IPv4 ID k with which good_id0, the ICRC of an n-byte UDP payload
 * (ICRC included) with ID 0, becomes icrc, if one exists; -1 if none.
 * The ICRC is affine in the bytes it covers: with ID k it differs from
 * ID 0's by the CRC (register 0, no inversions) of k's two bytes followed
 * by the zeros that stand for the rest, the 22 bytes of the IPv4 and UDP
 * headers after the ID and the n - 4 bytes before the ICRC.  That is
 * linear in k's 16 bits: the difference is the XOR of one vector per bit
 * set.  The 16 vectors are independent (CRC-32 detects every burst of up
 * to 32 bits, and two bytes are one), so at most one k fits, and
 * eliminating them in echelon form finds it in 16 steps.  A damaged
 * packet fits some k with odds of 2^-16: the check keeps 16 of its 32
 * bits. */
static int icrc_solve_id(uint32_t icrc, uint32_t good_id0, size_t n,
			 struct sv_roce_idmemo *memo)
{
	struct sv_roce_idmemo own = {0};
	uint32_t d = icrc ^ good_id0, k = 0;

	if (!memo)
		memo = &own;
	if (memo->n != n) {
		/* the ID's bits reach the CRC high byte first, each byte
		 * from its bit 0 (reflected): the last, bit 7, is followed by
		 * n + 18 zero bytes, and each bit before it by one bit more,
		 * a multiplication by x; a row's highest bit is its pivot */
		uint32_t slot[32] = {0}, comb[32] = {0}, r = 0,
			 x = gf2_mul(crc_tab[0][0x80],
				     zeros_op((uint32_t)n + 18));
		static const uint8_t order[16] = {7,  6,  5,  4,  3,  2,  1, 0,
						  15, 14, 13, 12, 11, 10, 9, 8};

		for (uint32_t i = 0; i < 16; i++) {
			uint32_t v = x, c = 1u << order[i];

			x = x & 1 ? (x >> 1) ^ 0xedb88320u : x >> 1;
			while (v) {
				uint32_t b = 31 - (uint32_t)__builtin_clz(v);

				if (!slot[b]) {
					slot[b] = v;
					comb[b] = c;
					break;
				}
				v ^= slot[b];
				c ^= comb[b];
			}
		}
		for (int b = 31; b >= 0; b--)
			if (slot[b]) {
				memo->v[r] = slot[b];
				memo->c[r] = (uint16_t)comb[b];
				memo->piv[r++] = (uint8_t)b;
			}
		memo->rank = (uint8_t)r;
		memo->n = n;
	}
	/* pivots in falling order: a row changes no bit above its own */
	for (uint32_t j = 0; j < memo->rank; j++) {
		uint32_t m = -((d >> memo->piv[j]) & 1);

		d ^= memo->v[j] & m;
		k ^= memo->c[j] & m;
	}
	return d ? -1 : (int)k;
}

/* -- the opcode table's questions ----------------------------------- */

uint32_t sv_roce_op_mask(uint8_t opcode)
{
	uint8_t tp = SV_IB_TRANSPORT(opcode);
	const struct sv_ib_op *o;
	uint32_t m;

	if (tp == SV_IB_CNP)
		o = SV_IB_OPERATION(opcode) == SV_IB_CNP_OP ? &sv_ib_cnp : NULL;
	else
		o = &sv_ib_ops[SV_IB_OPERATION(opcode)];
	if (!o || !o->name || !(o->tps & (1u << (tp >> 5))))
		return 0;
	m = o->mask;
	if (tp == SV_IB_UD)
		m |= SV_RH_DETH;
	if (tp == SV_IB_XRC && (m & SV_RH_REQ))
		m |= SV_RH_XRCETH;
	return m;
}

const char *sv_roce_op_name(uint8_t opcode, char *buf, size_t cap)
{
	static const char *const tps[8] = {"RC", "UC",	"RD", "UD",
					   "",	 "XRC", "?6", "?7"};
	uint8_t tp = SV_IB_TRANSPORT(opcode);

	if (!sv_roce_op_mask(opcode))
		return NULL;
	if (tp == SV_IB_CNP)
		snprintf(buf, cap, "%s", sv_ib_cnp.name);
	else
		snprintf(buf, cap, "%s %s", tps[tp >> 5],
			 sv_ib_ops[SV_IB_OPERATION(opcode)].name);
	return buf;
}

uint32_t sv_roce_hdr_len(uint32_t mask)
{
	uint32_t n = SV_ROCE_BTH;

	for (size_t i = 0; i < sizeof(ext_order) / sizeof(ext_order[0]); i++)
		if (mask & ext_order[i].bit)
			n += ext_order[i].len;
	return n;
}

/* -- big-endian fields ---------------------------------------------- */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* -- IP and UDP ----------------------------------------------------- */

static bool is_v4_mapped(const uint8_t *a)
{
	static const uint8_t pre[12] = {0, 0, 0, 0, 0,	  0,
					0, 0, 0, 0, 0xff, 0xff};

	return !memcmp(a, pre, sizeof(pre));
}

bool sv_roce_ip_is_v4(const struct sv_roce_ip *ip)
{
	return is_v4_mapped(ip->src) && is_v4_mapped(ip->dst);
}

uint32_t sv_roce_ip_udp_put(uint8_t *out, const struct sv_roce_ip *ip,
			    uint32_t payload_len)
{
	uint8_t ttl = ip->ttl ? ip->ttl : 64;
	uint32_t dgram = 8 + payload_len;
	uint8_t *u;

	if (sv_roce_ip_is_v4(ip)) {
		uint32_t sum = 0;

		memset(out, 0, 20);
		out[0] = 0x45; /* version 4, 5 words: no options */
		put16(out + 2, (uint16_t)(20 + dgram));
		put16(out + 4, ip->ip_id);
		put16(out + 6, ip->no_df ? 0 : 0x4000);
		out[8] = ttl;
		out[9] = 17; /* UDP */
		memcpy(out + 12, ip->src + 12, 4);
		memcpy(out + 16, ip->dst + 12, 4);
		for (int i = 0; i < 20; i += 2)
			sum += get16(out + i);
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		put16(out + 10, (uint16_t)~sum);
		u = out + 20;
	} else {
		put32(out, 0x60000000u); /* version 6, class 0, flow 0 */
		put16(out + 4, (uint16_t)dgram);
		out[6] = 17;
		out[7] = ttl;
		memcpy(out + 8, ip->src, 16);
		memcpy(out + 24, ip->dst, 16);
		u = out + 40;
	}
	put16(u, ip->sport);
	put16(u + 2, ip->dport ? ip->dport : SV_ROCE_PORT);
	put16(u + 4, (uint16_t)dgram);
	put16(u + 6, 0);
	return (uint32_t)(u + 8 - out);
}

uint16_t sv_roce_udp6_csum(const uint8_t *ip6, uint32_t payload_len)
{
	const uint8_t *u = ip6 + 40;
	uint32_t dgram = 8 + payload_len;
	uint64_t sum = 17 + (uint64_t)dgram;

	for (int i = 8; i < 40; i += 2) /* the addresses */
		sum += get16(ip6 + i);
	for (uint32_t i = 0; i + 1 < dgram; i += 2)
		sum += i == 6 ? 0 : get16(u + i);
	if (dgram & 1)
		sum += (uint32_t)u[dgram - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	sum = ~sum & 0xffff;
	return sum ? (uint16_t)sum : 0xffff; /* 0 means none: not in v6 */
}

/* -- the ICRC ------------------------------------------------------- */

/* The ICRC's register after the masked IP and UDP headers of a datagram
 * of payload_len bytes over ip (the tables exist). */
static uint32_t icrc_ip_udp(const struct sv_roce_ip *ip, uint32_t payload_len)
{
	uint8_t m[SV_ROCE_IP6_UDP];
	uint32_t n;

	n = sv_roce_ip_udp_put(m, ip, payload_len);
	/* A17.3.3: what routers may change is ones */
	if (n == SV_ROCE_IP4_UDP) {
		m[1] = 0xff;	      /* TOS (DSCP, ECN) */
		m[8] = 0xff;	      /* TTL */
		m[10] = m[11] = 0xff; /* header checksum */
	} else {
		m[0] |= 0x0f;		   /* traffic class ... */
		m[1] = m[2] = m[3] = 0xff; /* ... and flow label */
		m[7] = 0xff;		   /* hop limit */
	}
	m[n - 2] = m[n - 1] = 0xff; /* UDP checksum */
	/* 0xdebb20e3: the register after the LRH's 8 bytes of ones that
	 * RoCEv2 does not have but IBA's ICRC began with */
	return crc_tables(0xdebb20e3u, m, n);
}

uint32_t sv_roce_icrc_start(const struct sv_roce_ip *ip, const uint8_t *hdr,
			    uint32_t hlen, uint32_t payload_len)
{
	struct sv_roce_hdrmemo *memo = ip->hmemo;
	uint8_t bth[SV_ROCE_BTH];
	uint32_t crc;

	pthread_once(&crc_once, crc_init);
	if (memo) {
		uint64_t key =
			1ull << 32 | (uint64_t)payload_len << 16 | ip->ip_id;
		uint32_t k = (payload_len * 7u + ip->ip_id) % SV_ROCE_HDRMEMO;

		if (memo->key[k] != key) {
			memo->crc[k] = icrc_ip_udp(ip, payload_len);
			memo->key[k] = key;
		}
		crc = memo->crc[k];
	} else {
		crc = icrc_ip_udp(ip, payload_len);
	}
	memcpy(bth, hdr, SV_ROCE_BTH);
	bth[4] = 0xff; /* BTH resv8a: FECN, BECN */
	crc = sv_roce_icrc_add(crc, bth, SV_ROCE_BTH);
	return sv_roce_icrc_add(crc, hdr + SV_ROCE_BTH, hlen - SV_ROCE_BTH);
}

/* -- encode --------------------------------------------------------- */

uint32_t sv_roce_hdr_put(uint8_t *h, const struct sv_roce_pkt *p)
{
	uint32_t m = sv_roce_op_mask(p->opcode);
	uint8_t pad = (m & SV_RH_PAYLOAD) ? (uint8_t)(-p->len & 3) : 0;
	uint8_t *x = h + SV_ROCE_BTH;

	if (!m)
		return 0;
	/* IBA 9.2: BTH */
	h[0] = p->opcode;
	h[1] = (uint8_t)((p->se ? 0x80 : 0) | (p->mig ? 0x40 : 0) | pad << 4);
	put16(h + 2, p->pkey);
	put32(h + 4, (uint32_t)p->fb << 24 | (p->dqpn & SV_PSN_MASK));
	put32(h + 8, (p->ack_req ? 0x80000000u : 0) | (p->psn & SV_PSN_MASK));
	if (m & SV_RH_DETH) {
		put32(x, p->qkey);
		put32(x + 4, p->src_qpn & 0xffffff);
		x += 8;
	}
	if (m & SV_RH_XRCETH) {
		put32(x, p->srqn & 0xffffff);
		x += 4;
	}
	if (m & SV_RH_RETH) {
		put64(x, p->reth.va);
		put32(x + 8, p->reth.rkey);
		put32(x + 12, p->reth.dma_len);
		x += 16;
	}
	if (m & SV_RH_ATOMETH) {
		put64(x, p->atomic.va);
		put32(x + 8, p->atomic.rkey);
		put64(x + 12, p->atomic.swap_add);
		put64(x + 20, p->atomic.compare);
		x += 28;
	}
	if (m & SV_RH_AETH) {
		put32(x, (uint32_t)p->syndrome << 24 | (p->msn & 0xffffff));
		x += 4;
	}
	if (m & SV_RH_ATOMACK) {
		put64(x, p->orig);
		x += 8;
	}
	if (m & SV_RH_IMM) {
		memcpy(x, &p->imm_be, 4);
		x += 4;
	}
	if (m & SV_RH_IETH) {
		put32(x, p->inv_rkey);
		x += 4;
	}
	if (m & SV_RH_CNP) {
		memset(x, 0, 16);
		x += 16;
	}
	return (uint32_t)(x - h);
}

uint32_t sv_roce_pkt_len(const struct sv_roce_pkt *p)
{
	uint32_t m = sv_roce_op_mask(p->opcode);

	if (!m || (p->len && !(m & SV_RH_PAYLOAD)) || p->len > SV_ROCE_MAX_PMTU)
		return 0;
	return sv_roce_hdr_len(m) + p->len + (-p->len & 3) + SV_ROCE_ICRC;
}

int sv_roce_build(uint8_t *out, size_t cap, const struct sv_roce_pkt *p,
		  const struct sv_roce_ip *ip)
{
	uint32_t m = sv_roce_op_mask(p->opcode), hlen, pad, total, crc;

	if (!m || (p->len && !(m & SV_RH_PAYLOAD)) || p->len > SV_ROCE_MAX_PMTU)
		return -EINVAL;
	hlen = sv_roce_hdr_len(m);
	pad = -p->len & 3;
	total = hlen + p->len + pad + SV_ROCE_ICRC;
	if (total > cap)
		return -ENOSPC;
	sv_roce_hdr_put(out, p);
	crc = sv_roce_icrc_start(ip, out, hlen, total);
	/* the payload copied and its CRC made in one pass where the CPU
	 * can (sv_roce_icrc_copy) */
	crc = sv_roce_icrc_copy(crc, out + hlen, p->payload, p->len);
	memset(out + hlen + p->len, 0, pad);
	crc = sv_roce_icrc_add(crc, out + hlen + p->len, pad);
	sv_roce_icrc_put(out + total - SV_ROCE_ICRC, sv_roce_icrc_end(crc));
	return (int)total;
}

/* -- decode --------------------------------------------------------- */

/* The extension headers at x (the mask's, all within the buffer). */
static void get_exts(const uint8_t *x, uint32_t m, struct sv_roce_pkt *p)
{
	if (m & SV_RH_DETH) {
		p->qkey = get32(x);
		p->src_qpn = get32(x + 4) & 0xffffff;
		x += 8;
	}
	if (m & SV_RH_XRCETH) {
		p->srqn = get32(x) & 0xffffff;
		x += 4;
	}
	if (m & SV_RH_RETH) {
		p->reth.va = get64(x);
		p->reth.rkey = get32(x + 8);
		p->reth.dma_len = get32(x + 12);
		x += 16;
	}
	if (m & SV_RH_ATOMETH) {
		p->atomic.va = get64(x);
		p->atomic.rkey = get32(x + 8);
		p->atomic.swap_add = get64(x + 12);
		p->atomic.compare = get64(x + 20);
		x += 28;
	}
	if (m & SV_RH_AETH) {
		p->syndrome = x[0];
		p->msn = get32(x) & 0xffffff;
		x += 4;
	}
	if (m & SV_RH_ATOMACK) {
		p->orig = get64(x);
		x += 8;
	}
	if (m & SV_RH_IMM) {
		memcpy(&p->imm_be, x, 4);
		x += 4;
	}
	if (m & SV_RH_IETH)
		p->inv_rkey = get32(x);
}

/* The ICRC of b (n bytes, the ICRC last) as ip would carry it. */
static uint32_t icrc_of(const uint8_t *b, size_t n, const struct sv_roce_ip *ip)
{
	uint32_t body = (uint32_t)n - SV_ROCE_ICRC;
	uint32_t crc = sv_roce_icrc_start(ip, b, SV_ROCE_BTH, (uint32_t)n);

	crc = sv_roce_icrc_add(crc, b + SV_ROCE_BTH, body - SV_ROCE_BTH);
	return sv_roce_icrc_end(crc);
}

void sv_roce_reseal(uint8_t *b, size_t n, const struct sv_roce_ip *ip)
{
	if (n >= SV_ROCE_BTH + SV_ROCE_ICRC)
		sv_roce_icrc_put(b + n - SV_ROCE_ICRC, icrc_of(b, n, ip));
}

enum sv_roce_verdict sv_roce_parse(const uint8_t *b, size_t n,
				   const struct sv_roce_ip *ip,
				   struct sv_roce_pkt *p)
{
	struct sv_roce_pkt k = {0};
	uint32_t m, hlen, body;

	if (n < SV_ROCE_BTH + SV_ROCE_ICRC)
		return SV_ROCE_SHORT;
	/* the UDP length field is 16 bits: nothing longer came from UDP */
	if (n > 0xffff - 8)
		return SV_ROCE_LEN;
	k.icrc = le32(b + n - SV_ROCE_ICRC);
	/* first: a damaged packet is that, not its damage's symptom */
	if (ip) {
		uint32_t good = icrc_of(b, n, ip);

		k.ip_id = ip->ip_id;
		if (good != k.icrc) {
			int id = ip->id_span > 1 && !ip->ip_id &&
						 sv_roce_ip_is_v4(ip)
					 ? icrc_solve_id(k.icrc, good, n,
							 ip->memo)
					 : -1;

			if (id < 0 || (uint32_t)id >= ip->id_span)
				return SV_ROCE_ICRC_BAD;
			k.ip_id = (uint16_t)id;
		}
	}
	if (b[1] & 0x0f)
		return SV_ROCE_TVER;
	m = sv_roce_op_mask(b[0]);
	if (!m)
		return SV_ROCE_OPCODE;
	hlen = sv_roce_hdr_len(m);
	if (hlen + SV_ROCE_ICRC > n)
		return SV_ROCE_TRUNC;
	body = (uint32_t)n - hlen - SV_ROCE_ICRC;
	k.pad = (b[1] >> 4) & 3;
	if (!(m & SV_RH_PAYLOAD)) {
		if (body)
			return SV_ROCE_LEN;
		if (k.pad)
			return SV_ROCE_PAD;
	} else if (k.pad > body) {
		return SV_ROCE_PAD;
	} else if (body - k.pad > SV_ROCE_MAX_PMTU) {
		return SV_ROCE_LEN;
	}
	k.opcode = b[0];
	k.mask = m;
	k.se = b[1] & 0x80;
	k.mig = b[1] & 0x40;
	k.pkey = get16(b + 2);
	k.fb = b[4];
	k.dqpn = get32(b + 4) & 0xffffff;
	k.ack_req = b[8] & 0x80;
	k.psn = get32(b + 8) & 0xffffff;
	get_exts(b + SV_ROCE_BTH, m, &k);
	k.payload = b + hlen;
	k.len = body - k.pad;
	*p = k;
	return SV_ROCE_OK;
}

enum sv_roce_verdict sv_roce_check_qpt(const struct sv_roce_pkt *p,
				       enum ibv_qp_type t)
{
	uint8_t want;

	switch (t) {
	case IBV_QPT_RC:
		want = SV_IB_RC;
		break;
	case IBV_QPT_UC:
		want = SV_IB_UC;
		break;
	case IBV_QPT_UD:
		want = SV_IB_UD;
		break;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		want = SV_IB_XRC;
		break;
	default:
		return SV_ROCE_QPT;
	}
	return SV_IB_TRANSPORT(p->opcode) == want ? SV_ROCE_OK : SV_ROCE_QPT;
}

enum sv_roce_verdict sv_roce_check_seg(const struct sv_roce_pkt *p,
				       uint32_t mtu)
{
	uint32_t pos = p->mask & SV_RH_ONLY;

	if (!(p->mask & SV_RH_PAYLOAD))
		return SV_ROCE_OK;
	if (p->mask & SV_RH_MIDDLE || pos == SV_RH_FIRST)
		return p->len == mtu ? SV_ROCE_OK : SV_ROCE_SEG_LEN;
	if (pos == SV_RH_LAST)
		return p->len && p->len <= mtu ? SV_ROCE_OK : SV_ROCE_SEG_LEN;
	return p->len <= mtu ? SV_ROCE_OK : SV_ROCE_SEG_LEN;
}

/* -- segmentation --------------------------------------------------- */

/* IBA 9.3.1: each kind's FIRST, MIDDLE, LAST, ONLY operation. */
static const uint8_t seg_ops[][4] = {
	[SV_ROCE_MSG_SEND] = {SV_IB_SEND_FIRST, SV_IB_SEND_MIDDLE,
			      SV_IB_SEND_LAST, SV_IB_SEND_ONLY},
	[SV_ROCE_MSG_SEND_IMM] = {SV_IB_SEND_FIRST, SV_IB_SEND_MIDDLE,
				  SV_IB_SEND_LAST_IMM, SV_IB_SEND_ONLY_IMM},
	[SV_ROCE_MSG_SEND_INV] = {SV_IB_SEND_FIRST, SV_IB_SEND_MIDDLE,
				  SV_IB_SEND_LAST_INV, SV_IB_SEND_ONLY_INV},
	[SV_ROCE_MSG_WRITE] = {SV_IB_WRITE_FIRST, SV_IB_WRITE_MIDDLE,
			       SV_IB_WRITE_LAST, SV_IB_WRITE_ONLY},
	[SV_ROCE_MSG_WRITE_IMM] = {SV_IB_WRITE_FIRST, SV_IB_WRITE_MIDDLE,
				   SV_IB_WRITE_LAST_IMM, SV_IB_WRITE_ONLY_IMM},
	[SV_ROCE_MSG_READ_RESP] = {SV_IB_READ_RESP_FIRST,
				   SV_IB_READ_RESP_MIDDLE, SV_IB_READ_RESP_LAST,
				   SV_IB_READ_RESP_ONLY},
};

int sv_roce_segment(uint8_t transport, enum sv_roce_msg kind, uint32_t len,
		    uint32_t mtu, uint32_t i, struct sv_roce_seg *out)
{
	uint32_t n, at;
	int pos;
	uint8_t op;

	if (mtu < 256 || mtu > SV_ROCE_MAX_PMTU || (mtu & (mtu - 1)) ||
	    (unsigned)kind >= sizeof(seg_ops) / sizeof(seg_ops[0]) ||
	    transport == SV_IB_CNP || SV_IB_OPERATION(transport))
		return -EINVAL;
	n = sv_roce_npkts(len, mtu);
	if (i >= n)
		return -EINVAL;
	pos = n == 1 ? 3 : i == 0 ? 0 : i == n - 1 ? 2 : 1;
	op = transport | seg_ops[kind][pos];
	if (!sv_roce_op_mask(op))
		return -EINVAL; /* e.g. a multi-packet UD send */
	at = i * mtu;
	out->opcode = op;
	out->off = at;
	out->len = len - at < mtu ? len - at : mtu;
	return 0;
}

uint16_t sv_roce_fl_sport(uint32_t fl)
{
	uint32_t lo = (fl & 0x3fff) ^ ((fl & 0xfc000) >> 14);

	return (uint16_t)(0xc000 | lo);
}

uint16_t sv_roce_sport(uint32_t qpn_a, uint32_t qpn_b)
{
	uint64_t v = (uint64_t)qpn_a * qpn_b;

	v ^= v >> 20;
	v ^= v >> 40;
	return sv_roce_fl_sport((uint32_t)(v & 0xfffff));
}

uint16_t sv_roce_sport_way(uint16_t pair_port, uint32_t from, uint32_t to)
{
	return (uint16_t)((pair_port & ~1u) | (from > to));
}

bool sv_roce_ud_hdr(const struct sv_roce_pkt *p, uint8_t tos, uint8_t ttl,
		    size_t cap, struct sv_ud_hdr *h)
{
	if ((p->pkey & 0x7fff) != 0x7fff || p->dqpn == SV_MCAST_QPN ||
	    p->dqpn < 2 || p->len > SV_UD_MTU || sizeof(*h) + p->len > cap)
		return false;
	h->src_qpn = p->src_qpn;
	h->dst_qpn = p->dqpn;
	h->qkey = p->qkey;
	h->len = p->len;
	h->rsvd = (uint32_t)tos << 8 | ttl;
	if (SV_IB_OPERATION(p->opcode) == SV_IB_SEND_ONLY_IMM) {
		h->flags |= SV_UD_IMM;
		h->imm = p->imm_be;
	}
	if (p->se)
		h->flags |= SV_UD_SOLICITED;
	return true;
}
