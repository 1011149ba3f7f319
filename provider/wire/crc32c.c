// SPDX-License-Identifier: MIT
/*
 * CRC-32C (Castagnoli), the TCP transport's frame check (tcp.h): the
 * SSE4.2 instruction where the CPU has it, else a table.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

static uint32_t crc_table[256];

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[i] = c;
	}
}

#if defined(__x86_64__)
/*
 * The instruction takes 3 cycles and can start one a cycle, so one chain
 * runs at a third of its speed.  Long buffers go in rounds of three
 * blocks of BLOCK bytes each, run as three independent chains (the first
 * from the CRC so far, the others from 0) and joined by linearity: for
 * the register r, over GF(2),
 *	r(x, A B C) = Z_2L r(x, A) + Z_L r(0, B) + r(0, C)
 * where Z_n is r over n zero bytes, a 32x32 matrix applied here as four
 * byte-indexed tables.  Rounds of SMALL blocks then take what is left,
 * one chain the last bytes.
 */
#define BLOCK 4096u
#define SMALL 256u

struct crc_shift {
	uint32_t t[4][256];
};
/* Z_L, Z_2L for L = BLOCK and L = SMALL */
static struct crc_shift shift_tab[2][2];

__attribute__((target("sse4.2"))) static uint64_t
crc_chain(uint64_t c, const uint8_t *p, size_t n)
{
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	for (; n; n--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return c;
}

static uint32_t shift(const struct crc_shift *z, uint32_t v)
{
	return z->t[0][v & 0xff] ^ z->t[1][(v >> 8) & 0xff] ^
	       z->t[2][(v >> 16) & 0xff] ^ z->t[3][v >> 24];
}

/* Z_n's image of each register bit, spread into byte tables. */
static void shift_init(struct crc_shift *z, size_t n)
{
	static const uint8_t zeros[BLOCK];
	uint32_t img[32];

	for (int i = 0; i < 32; i++) {
		uint64_t c = 1u << i;

		for (size_t left = n; left; left -= BLOCK < left ? BLOCK : left)
			c = crc_chain(c, zeros, BLOCK < left ? BLOCK : left);
		img[i] = (uint32_t)c;
	}
	for (int k = 0; k < 4; k++)
		for (int b = 0; b < 256; b++) {
			uint32_t v = 0;

			for (int j = 0; j < 8; j++)
				if (b & (1 << j))
					v ^= img[8 * k + j];
			z->t[k][b] = v;
		}
}

static void shift_tab_init(void)
{
	shift_init(&shift_tab[0][0], BLOCK);
	shift_init(&shift_tab[0][1], 2 * BLOCK);
	shift_init(&shift_tab[1][0], SMALL);
	shift_init(&shift_tab[1][1], 2 * SMALL);
}

/* The rounds, and with dst the bytes copied there as they are read (one
 * pass over the source: the TCP transport's receive, which checks a
 * frame and puts it in a ring). */
__attribute__((target("sse4.2"))) static uint32_t
crc_sse42(uint32_t c, uint8_t *dst, const uint8_t *p, size_t n)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	static const size_t len[2] = {BLOCK, SMALL};

	if (n >= 3 * SMALL)
		pthread_once(&once, shift_tab_init);
	for (int s = 0; s < 2; s++) {
		size_t l = len[s];

		for (; n >= 3 * l; n -= 3 * l, p += 3 * l) {
			uint64_t a = c, b = 0, d = 0;

			for (size_t i = 0; i < l; i += 8) {
				uint64_t va, vb, vd;

				memcpy(&va, p + i, 8);
				memcpy(&vb, p + l + i, 8);
				memcpy(&vd, p + 2 * l + i, 8);
				a = __builtin_ia32_crc32di(a, va);
				b = __builtin_ia32_crc32di(b, vb);
				d = __builtin_ia32_crc32di(d, vd);
				if (dst) {
					memcpy(dst + i, &va, 8);
					memcpy(dst + l + i, &vb, 8);
					memcpy(dst + 2 * l + i, &vd, 8);
				}
			}
			c = shift(&shift_tab[s][1], (uint32_t)a) ^
			    shift(&shift_tab[s][0], (uint32_t)b) ^ (uint32_t)d;
			if (dst)
				dst += 3 * l;
		}
	}
	if (dst)
		memcpy(dst, p, n);
	return (uint32_t)crc_chain(c, p, n);
}
#endif

static uint32_t crc_table_run(uint32_t c, const uint8_t *p, size_t n)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, crc_table_init);
	for (; n; n--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

uint32_t sv_crc32c(uint32_t crc, const void *buf, size_t n)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc_sse42(~crc, NULL, buf, n);
#endif
	return ~crc_table_run(~crc, buf, n);
}

uint32_t sv_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc_sse42(~crc, dst, src, n);
#endif
	memcpy(dst, src, n);
	return ~crc_table_run(~crc, dst, n);
}
