/* SPDX-License-Identifier: MIT */
/*
 * What every fuzz target shares: libFuzzer's entry points, a reader that
 * turns the fuzzer's bytes into the choices a structure-aware decoder
 * makes (running dry yields zeros, never an error), and the check that
 * turns a broken invariant into a crash the fuzzer keeps.
 */
#ifndef SV_FUZZ_H
#define SV_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The fuzzer's bytes, consumed front to back. */
struct fz {
	const uint8_t *p;
	size_t n;
};

static inline bool fz_empty(const struct fz *f)
{
	return f->n == 0;
}

static inline void fz_take(struct fz *f, void *out, size_t len)
{
	size_t k = len < f->n ? len : f->n;

	memcpy(out, f->p, k);
	memset((uint8_t *)out + k, 0, len - k);
	f->p += k;
	f->n -= k;
}

static inline uint8_t fz_u8(struct fz *f)
{
	uint8_t v;

	fz_take(f, &v, 1);
	return v;
}

static inline uint16_t fz_u16(struct fz *f)
{
	uint16_t v;

	fz_take(f, &v, 2);
	return v;
}

static inline uint32_t fz_u32(struct fz *f)
{
	uint32_t v;

	fz_take(f, &v, 4);
	return v;
}

static inline uint64_t fz_u64(struct fz *f)
{
	uint64_t v;

	fz_take(f, &v, 8);
	return v;
}

/* A choice among n (n > 0). */
static inline uint32_t fz_pick(struct fz *f, uint32_t n)
{
	return fz_u8(f) % n;
}

/* A broken invariant: a crash for the fuzzer, with what broke. */
#define FZ_CHECK(c)                                                     \
	do {                                                            \
		if (!(c)) {                                             \
			fprintf(stderr,                                 \
				"fuzz invariant broken at %s:%d: %s\n", \
				__FILE__, __LINE__, #c);                \
			abort();                                        \
		}                                                       \
	} while (0)

#endif
