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
__attribute__((target("sse4.2"))) static uint32_t
crc_sse42(uint32_t c, const uint8_t *p, size_t n)
{
	uint64_t c64 = c;

	for (; n >= 8; n -= 8, p += 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c64 = __builtin_ia32_crc32di(c64, v);
	}
	c = (uint32_t)c64;
	for (; n; n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

uint32_t sv_crc32c(uint32_t crc, const void *buf, size_t n)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const uint8_t *p = buf;
	uint32_t c = ~crc;

#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc_sse42(c, p, n);
#endif
	pthread_once(&once, crc_table_init);
	for (; n; n--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return ~c;
}
