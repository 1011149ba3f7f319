// SPDX-License-Identifier: MIT
/*
 * The key table and arena a peer publishes for one-sided operations
 * (rmem.c): the two memfds of a hello, with a table header and entries
 * decoded from the input (valid-looking mostly, any field may lie, and
 * sizes, seals and alignment vary), then sv_rpeer_get as the engine
 * calls it at RTS and sv_rpeer_resolve / sv_rpeer_at for requests aimed
 * at those entries.  Checked besides the sanitizers: whatever resolves
 * lies inside our mapping of the arena (and is written to, so a wrong
 * answer faults), and a refused table maps nothing.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "env.h"
#include "rmem.h"

#define MAX_QUERIES 32
#define NENT	    16

static int memfd(uint64_t size, bool seal)
{
	int fd = memfd_create("fz-rmem", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	FZ_CHECK(fd >= 0);
	FZ_CHECK(!ftruncate(fd, (off_t)size));
	if (seal)
		FZ_CHECK(!fcntl(fd, F_ADD_SEALS,
				F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
	return fd;
}

static void make_table(struct fz *f, int fd, uint64_t table_size,
		       uint64_t arena_size, struct sv_rkey_entry *ent)
{
	struct sv_rkey_hdr h = {
		.magic = SV_RKEY_MAGIC,
		.version = SV_RKEY_VERSION,
		.entry_size = sizeof(struct sv_rkey_entry),
		.nentries = NENT,
		.entries_off = SV_RKEY_HDR_BYTES,
		.arena_size = arena_size,
	};

	switch (fz_pick(f, 12)) {
	case 0:
		h.magic = fz_u32(f);
		break;
	case 1:
		h.version = fz_u32(f);
		break;
	case 2:
		h.entry_size = fz_u32(f);
		break;
	case 3:
		h.nentries = fz_pick(f, 2) ? fz_u32(f) : fz_u8(f);
		break;
	case 4:
		h.entries_off = fz_pick(f, 2) ? fz_u64(f) : fz_u16(f);
		break;
	case 5:
		h.arena_size = fz_u64(f);
		break;
	default:
		break;
	}
	FZ_CHECK(pwrite(fd, &h, sizeof(h), 0) == sizeof(h));
	for (int i = 0; i < NENT; i++) {
		struct sv_rkey_entry *e = &ent[i];

		e->gen = fz_pick(f, 8) ? 2 : fz_u32(f);
		e->key =
			fz_pick(f, 8) ? (0x5a5a0000u | (uint32_t)i) : fz_u32(f);
		e->iova = fz_pick(f, 4) ? 0x10000ull * (i + 1) : fz_u64(f);
		e->length = fz_pick(f, 4) ? fz_u16(f) : fz_u64(f);
		e->arena_off = fz_pick(f, 4) ? fz_u16(f) : fz_u64(f);
		e->access = fz_pick(f, 4) ? 0xf : fz_u32(f);
		e->pd_id = fz_pick(f, 4) ? 1 : fz_u32(f);
	}
	if (table_size >= SV_RKEY_HDR_BYTES + sizeof(*ent) * NENT)
		FZ_CHECK(pwrite(fd, ent, NENT * sizeof(*ent),
				SV_RKEY_HDR_BYTES) ==
			 (ssize_t)(NENT * sizeof(*ent)));
}

/* A request aimed at entry i, mostly inside it. */
static void query(struct fz *f, struct sv_rpeer *p, uint8_t *base,
		  uint64_t arena_size, const struct sv_rkey_entry *ent)
{
	const struct sv_rkey_entry *e = &ent[fz_pick(f, NENT)];
	uint32_t key = fz_pick(f, 8) ? e->key : fz_u32(f);
	uint32_t pd = fz_pick(f, 8) ? e->pd_id : fz_u32(f);
	uint64_t va = e->iova + (fz_pick(f, 4) ? fz_u16(f) : fz_u64(f));
	uint64_t len = fz_pick(f, 4) ? fz_u16(f) : fz_u64(f);
	unsigned int access = fz_u8(f) & 0xf;
	uint8_t *r = sv_rpeer_resolve(p, key, pd, va, len, access);

	if (getenv("FZ_TRACE"))
		fprintf(stderr, "resolve %x pd %u len %llu: %s\n", key, pd,
			(unsigned long long)len, r ? "yes" : "no");
	if (r) {
		FZ_CHECK(len && r >= base &&
			 r - base <= (ptrdiff_t)arena_size &&
			 len <= arena_size - (uint64_t)(r - base));
		memset(r, 0x77, len);
	}
	r = sv_rpeer_at(p, va, len); /* a receive descriptor's piece */
	if (r) {
		FZ_CHECK(r >= base && len <= arena_size - (uint64_t)(r - base));
		memset(r, 0x66, len);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = {data, size};
	struct fz_env *e = fz_env();
	struct sv_rkey_entry ent[NENT];
	uint64_t arena_size = 4096ull << fz_pick(&f, 5);
	uint64_t table_size = SV_RKEY_HDR_BYTES +
			      (fz_pick(&f, 8) ? 4096 : fz_u16(&f) & ~4095u);
	int fds = fz_count_fds(), afd, tfd;
	struct sv_rpeer *p;
	uint8_t *base;

	afd = memfd(arena_size, fz_pick(&f, 16));
	tfd = memfd(table_size, fz_pick(&f, 16));
	make_table(&f, tfd, table_size, arena_size, ent);
	p = sv_rpeer_get(to_sctx(e->ctx), afd, fz_pick(&f, 32) ? tfd : afd);
	if (getenv("FZ_TRACE"))
		fprintf(stderr, "table %s\n", p ? "mapped" : "refused");
	if (p) {
		base = sv_rpeer_at(p, 0, arena_size);
		FZ_CHECK(base);
		for (int i = 0; i < MAX_QUERIES && !fz_empty(&f); i++)
			query(&f, p, base, arena_size, ent);
		sv_rpeer_put(to_sctx(e->ctx), p);
	}
	close(afd);
	close(tfd);
	FZ_CHECK(fz_count_fds() == fds);
	return 0;
}
