// SPDX-License-Identifier: MIT
/*
 * What a soak round does, derived from the session's seed so that both
 * sides know it without telling each other: the operations one side posts
 * (its direction), which the other side recomputes to check what arrives;
 * and the content of every byte, a keyed stream.
 */
#include "soak.h"

const char *const soak_kind_names[KIND_NR] = {"rc", "srq", "uc", "ud"};
const char *const soak_op_names[OP_NR] = {"send",      "send_imm", "write",
					  "write_imm", "read",	   "fetch_add",
					  "cmp_swap"};

uint64_t soak_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t soak_key(uint64_t seed, uint32_t tag, uint32_t dir, uint32_t a,
		  uint32_t b)
{
	return soak_mix(seed ^
			soak_mix(((uint64_t)tag << 56) ^ ((uint64_t)dir << 48) ^
				 ((uint64_t)a << 24) ^ b));
}

static uint64_t word(uint64_t key, uint64_t w)
{
	return soak_mix(key ^ (w * 0xd6e8feb86659fd93ull));
}

void soak_fill(uint8_t *dst, uint64_t key, uint64_t off, size_t len)
{
	uint64_t w = word(key, off / 8);

	for (size_t i = 0; i < len; i++) {
		uint64_t pos = off + i;

		if (i && !(pos % 8))
			w = word(key, pos / 8);
		dst[i] = (uint8_t)(w >> (8 * (pos % 8)));
	}
}

long soak_check(const uint8_t *dst, uint64_t key, uint64_t off, size_t len)
{
	uint64_t w = word(key, off / 8);

	for (size_t i = 0; i < len; i++) {
		uint64_t pos = off + i;

		if (i && !(pos % 8))
			w = word(key, pos / 8);
		if (dst[i] != (uint8_t)(w >> (8 * (pos % 8))))
			return (long)i;
	}
	return -1;
}

static uint32_t rnd(uint64_t *s)
{
	*s = soak_mix(*s);
	return (uint32_t)(*s >> 32);
}

/* 0..1 MiB, mostly small: 35% to 64 B, 35% to 4 KiB, 20% to 64 KiB. */
static uint32_t pick_len(uint64_t *r, uint32_t max)
{
	uint32_t c = rnd(r) % 100, len;

	if (c < 35)
		len = rnd(r) % 65;
	else if (c < 70)
		len = 65 + rnd(r) % 4032;
	else if (c < 90)
		len = 4097 + rnd(r) % 61440;
	else
		len = 65537 + rnd(r) % (SOAK_MAXMSG - 65536);
	return len > max ? rnd(r) % (max + 1) : len;
}

static enum soak_op pick_op(uint64_t *r, enum soak_kind kind)
{
	/* weights of send, send_imm, write, write_imm, read, fadd, cas */
	static const uint8_t w[KIND_NR][OP_NR] = {
		[KIND_RC] = {20, 20, 20, 10, 15, 8, 7},
		[KIND_SRQ] = {25, 25, 15, 10, 12, 7, 6},
		[KIND_UC] = {30, 30, 25, 15, 0, 0, 0},
		[KIND_UD] = {50, 50, 0, 0, 0, 0, 0},
	};
	uint32_t c = rnd(r) % 100;

	for (int op = 0; op < OP_NR; op++) {
		if (c < w[kind][op])
			return (enum soak_op)op;
		c -= w[kind][op];
	}
	return OP_SEND;
}

/* Cuts len into nsge pieces placed one after another in an area, with
 * holes between them (a gather or scatter that is not one copy). */
static int place(uint64_t *r, struct soak_opdesc *o, uint32_t *area_used,
		 uint32_t area_size, uint32_t min_first)
{
	uint32_t need = o->len + 3 * 128, rest = o->len;

	if (*area_used + need > area_size)
		return -1;
	for (int i = 0; i < o->nsge; i++) {
		uint32_t l = rest;

		if (i + 1 < o->nsge) {
			l = rest ? rnd(r) % (rest + 1) : 0;
			if (!i && l < min_first)
				l = min_first < rest ? min_first : rest;
		}
		*area_used += 64 + rnd(r) % 64;
		if (o->op == OP_FADD || o->op == OP_CAS)
			*area_used = (*area_used + 7) & ~7u; /* aligned */
		o->loff[i] = *area_used;
		o->llen[i] = l;
		*area_used += l;
		rest -= l;
	}
	*area_used = (*area_used + 7) & ~7u;
	return 0;
}

int soak_gen_ops(const struct soak_session *s, int dir, uint32_t round,
		 struct soak_dirstate *ds, struct soak_opdesc *ops)
{
	uint64_t r = soak_key(s->seed, 99, (uint32_t)dir, round, 0);
	uint32_t sendu = 0, winu = 0, readu = 0;
	uint32_t nrecv[SOAK_MAXQP] = {0};
	int n = 1 + (int)(rnd(&r) % (rnd(&r) % 4 ? 16 : SOAK_MAXOPS)), k = 0;

	for (int i = 0; i < n; i++) {
		struct soak_opdesc *o = &ops[k];
		enum soak_op op = pick_op(&r, s->kind);
		uint32_t max = s->kind == KIND_UD ? s->mtu : SOAK_MAXMSG;

		*o = (struct soak_opdesc){.op = (uint8_t)op,
					  .qpi = (uint8_t)(rnd(&r) % s->nqp)};
		if (soak_op_recv(op) && nrecv[o->qpi] == SOAK_DEPTH)
			continue; /* no receive left for it this round */
		if (op == OP_FADD || op == OP_CAS)
			o->len = 8;
		else
			o->len = pick_len(&r,
					  op == OP_READ ? SOAK_EXPAREA : max);
		if (op == OP_SEND && o->len < 8)
			o->len = 8; /* room for the sequence number */
		if (op == OP_READ && !o->len)
			o->len = 1;
		o->nsge = o->len ? 1 + rnd(&r) % (op == OP_READ ? 2 : 3) : 0;
		if (op == OP_FADD || op == OP_CAS)
			o->nsge = 1;
		if (op <= OP_WRITE_IMM && o->len <= s->max_inline)
			o->inl = rnd(&r) % 2;
		if (op <= OP_WRITE_IMM) {
			if (place(&r, o, &sendu, SOAK_SENDAREA,
				  op == OP_SEND ? 8 : 0))
				continue;
		} else if (place(&r, o, &readu, SOAK_READAREA, 0)) {
			continue;
		}
		if (op == OP_WRITE || op == OP_WRITE_IMM) {
			if (winu + o->len + 128 > SOAK_WINAREA)
				continue;
			winu += rnd(&r) % 128;
			o->roff = winu;
			winu += o->len;
			o->key = soak_key(s->seed, KEY_WRITE, (uint32_t)dir,
					  round, (uint32_t)k);
		} else if (op == OP_READ) {
			o->roff = rnd(&r) % (SOAK_EXPAREA - o->len + 1);
			o->key = soak_key(s->seed, KEY_EXP, (uint32_t)!dir,
					  round, 0);
		} else if (op == OP_FADD) {
			o->add = (uint64_t)rnd(&r) << 16 | rnd(&r);
			o->old = ds->ctr[o->qpi];
			ds->ctr[o->qpi] += o->add;
		} else if (op == OP_CAS) {
			o->add = (uint64_t)rnd(&r) << 32 | rnd(&r);
			o->old = ds->ctr[o->qpi];
			if (rnd(&r) % 4) {
				o->cmp = ds->ctr[o->qpi];
				ds->ctr[o->qpi] += o->add;
			} else {
				o->cmp = ds->ctr[o->qpi] ^ 1; /* to fail */
			}
		}
		if (soak_op_recv(op)) {
			o->seq = ds->seq[o->qpi]++;
			nrecv[o->qpi]++;
			if (op != OP_WRITE_IMM)
				o->key =
					soak_key(s->seed, KEY_MSG,
						 (uint32_t)dir, o->qpi, o->seq);
		}
		k++;
	}
	return k;
}
