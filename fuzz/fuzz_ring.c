// SPDX-License-Identifier: MIT
/*
 * The engine against a hostile peer's shared memory: a victim RC or UC
 * QP is connected to a fake peer (env.h) and the input is a program of
 * commands that the peer carries out: records on the victim's request
 * ring (its responder) and response ring (its completer), ACK/NAK words,
 * the rnr word and the consumer indexes the victim reads, interleaved
 * with the victim's own posts and polls.  Records are decoded from the
 * input so that most pass the ring's header checks (right seq, aligned
 * rec_len, the PSN the responder expects, rkeys and addresses of the
 * victim's MR), and each field can still be anything.  Checked besides
 * the sanitizers: no byte outside the MR changes, every completion is
 * of a posted WR and comes once, no fd leaks.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "env.h"
#include "qp_state.h"
#include "rmem.h"

#define MAX_CMDS 96
#define MAX_IDS	 64
/* The peer's shared memory (when the input asks for it): an arena, a
 * key table of NKEYS entries, NDESC receive descriptors on its ring. */
#define ARENA_LEN 65536u
#define TABLE_LEN 8192u
#define NKEYS	  16
#define NDESC	  8
#define PEER_PD	  1
#define KEY(i)	  ((uint32_t)(i) << 8 | 0x5a)
#define IOVA(i)	  (0x100000ull * ((i) + 1))

enum cmd {
	CMD_REQ,     /* a request record on the victim's request ring */
	CMD_RSP,     /* a response record on its response ring */
	CMD_RAW,     /* raw bytes as a record, seq right */
	CMD_ACK,     /* the ack word the victim's completer reads */
	CMD_RNR,     /* the rnr word of the victim's request ring */
	CMD_TAIL,    /* a consumer index the victim's sender reads */
	CMD_CONSUME, /* take what the victim sent us, honestly */
	CMD_RECV,    /* the victim posts a receive */
	CMD_SEND,    /* the victim posts a send, write, read or atomic */
	CMD_DRIVE,   /* the victim polls */
	CMD_DESC,    /* a receive descriptor the victim's sends read */
	CMD_KEY,     /* a key table entry the victim's one-sided ops read */
	CMD_NCMD,
};

struct run {
	struct fz *f;
	struct fz_env *e;
	struct fz_peer *p;
	struct ibv_qp *qp;
	uint32_t req_psn; /* the PSN the victim's responder expects next */
	uint32_t sq_psn;  /* the victim's first send PSN */
	uint64_t ids[MAX_IDS];
	int nids;
	uint64_t next_id;
	bool shared;	/* the peer shares memory: the fields below */
	int afd, tfd;	/* arena and key table memfds */
	uint8_t *arena; /* our mapping of the arena */
	struct sv_rkey_entry *keys; /* the table's entries, mapped */
	uint8_t *table;
};

static uint64_t mr_va(struct run *r)
{
	struct fz *f = r->f;

	switch (fz_pick(f, 4)) {
	case 0:
		return fz_u64(f);
	case 1: /* at or just past either end */
		return (uint64_t)(uintptr_t)r->e->buf - 8 +
		       (fz_u8(f) & 1) * (FZ_MR_LEN + 8) + fz_u8(f) % 16;
	default:
		return (uint64_t)(uintptr_t)r->e->buf + fz_u16(f) % FZ_MR_LEN;
	}
}

static uint32_t rkey(struct run *r)
{
	switch (fz_pick(r->f, 4)) {
	case 0:
		return fz_u32(r->f);
	case 1:
		return r->e->mr->rkey ^ (1u << fz_pick(r->f, 32));
	default:
		return r->e->mr->rkey;
	}
}

static uint32_t length(struct fz *f, uint32_t typical)
{
	switch (fz_pick(f, 8)) {
	case 0:
		return fz_u32(f);
	case 1:
		return 0;
	default:
		return fz_u16(f) % typical;
	}
}

/* The extension header an opcode carries; its length. */
static uint32_t make_ext(struct run *r, uint8_t op, uint8_t *ext,
			 uint32_t msg_len)
{
	const struct sv_opcode_info *o = sv_opcode(op);
	struct fz *f = r->f;

	if (!o || !o->ext_len)
		return fz_pick(f, 8) ? 0 : fz_pick(f, 40);
	if (o->mask & SV_M_RETH) {
		struct sv_reth h = {.va = mr_va(r), .rkey = rkey(r)};

		h.dma_len = fz_pick(f, 4) ? msg_len : length(f, FZ_MR_LEN);
		memcpy(ext, &h, sizeof(h));
	} else if (o->mask & SV_M_ATOMETH) {
		struct sv_atometh a = {.va = mr_va(r), .rkey = rkey(r)};

		if (fz_pick(f, 4))
			a.va &= ~7ull;
		a.swap_add = fz_u64(f);
		a.compare = fz_u64(f);
		memcpy(ext, &a, sizeof(a));
	} else {
		struct sv_atomack a = {.orig = fz_u64(f)};

		memcpy(ext, &a, sizeof(a));
	}
	return o->ext_len;
}

static uint8_t opcode(struct fz *f, bool response)
{
	static const uint8_t req[] = {SV_OP_SEND,      SV_OP_SEND,
				      SV_OP_WRITE,     SV_OP_WRITE,
				      SV_OP_READ_REQ,  SV_OP_CMP_SWAP,
				      SV_OP_FETCH_ADD, SV_OP_WRITE_NOTE};
	uint8_t b = fz_u8(f);

	if (b >= 0xf0)
		return fz_u8(f); /* anything, PAD and unknown ones included */
	if (response)
		return b & 1 ? SV_OP_ATOMIC_RESP : SV_OP_READ_RESP;
	return req[b % sizeof(req)];
}

/* One record from the input onto ring t (the victim's request ring, or
 * its response ring). */
static void put_record(struct run *r, struct sv_ring *t, bool response)
{
	struct fz *f = r->f;
	struct sv_pkt h = {0};
	uint8_t ext[64];
	uint32_t ext_len, total, npsn_auto, plen;
	struct sv_pkt *rec;
	int err = 0;
	uint8_t mode;

	h.opcode = opcode(f, response);
	h.seg = fz_u8(f);
	if (h.seg < 0xf0)
		h.seg &= SV_SEG_ONLY; /* MIDDLE, FIRST, LAST or ONLY */
	h.flags = fz_u8(f);
	if (h.flags < 0xf0)
		h.flags &= SV_PKT_IMM | SV_PKT_SOLICITED | SV_PKT_PLACED;
	h.len = sv_opcode(h.opcode) &&
				(sv_opcode(h.opcode)->mask & SV_M_PAYLOAD)
			? length(f, 3000)
			: (fz_pick(f, 8) ? 0 : length(f, 100));
	h.msg_len = fz_pick(f, 4) ? h.len : length(f, FZ_MR_LEN);
	h.imm = fz_u32(f);
	ext_len = make_ext(r, h.opcode, ext, h.msg_len);
	npsn_auto = h.len > 1024 ? (h.len + 1023) / 1024 : 1;
	mode = fz_u8(f);
	switch (mode % 8) {
	case 0:
		h.npsn = fz_u32(f);
		break;
	case 1:
		h.npsn = fz_u8(f);
		break;
	default:
		h.npsn = npsn_auto;
	}
	switch ((mode >> 3) % 8) {
	case 0:
		h.psn = fz_u32(f);
		break;
	case 1:
		h.psn = sv_psn_add(response ? r->sq_psn : r->req_psn,
				   (uint32_t)(int8_t)fz_u8(f));
		break;
	default: /* what the victim expects, or asked for */
		h.psn = response ? sv_psn_add(r->sq_psn, fz_u8(f) % 8)
				 : r->req_psn;
	}
	/* the bytes that follow: h.len, unless it lies beyond what a 16 KiB
	 * ring takes (then the header still says h.len) */
	plen = h.len <= 4096 ? h.len : fz_u16(f) % 4096;
	total = (uint32_t)sizeof(h) + ext_len + plen;
	rec = sv_ring_reserve(t, total, &err);
	if (!rec)
		return; /* full: the victim has not consumed enough */
	memcpy(rec + 1, ext, ext_len);
	fz_take(f, (uint8_t *)(rec + 1) + ext_len, plen);
	h.rec_len = t->last_rec;
	if ((mode >> 6) == 3)
		h.rec_len = fz_pick(f, 2) ? fz_u32(f) : h.rec_len + 64;
	memcpy(rec, &h, offsetof(struct sv_pkt, seq));
	sv_ring_publish(t, rec);
	if (getenv("FZ_TRACE"))
		fprintf(stderr,
			"%s op %u seg %u flags %x psn %06x npsn %u "
			"len %u msg_len %u rec_len %u\n",
			response ? "rsp" : "req", h.opcode, h.seg, h.flags,
			h.psn, h.npsn, h.len, h.msg_len, h.rec_len);
	if (!response && h.psn == r->req_psn)
		r->req_psn = sv_psn_add(r->req_psn, h.npsn);
}

/* Raw bytes as a record at the head, published with the right seq. */
static void put_raw(struct run *r)
{
	struct fz *f = r->f;
	uint32_t len = 32 + fz_u8(f);
	struct sv_pkt *rec;
	int err = 0;

	rec = sv_ring_reserve(&r->p->l.tx, len, &err);
	if (!rec)
		return;
	fz_take(f, rec, len);
	sv_ring_publish(&r->p->l.tx, rec);
}

static void put_ack(struct run *r)
{
	struct fz *f = r->f;
	uint64_t psn = sv_psn_add(r->sq_psn, fz_u8(f) % 16 - 1);
	uint64_t syn = fz_u8(f);

	if (syn < 0xf0)
		syn %= 6;
	atomic_store(&r->p->l.rx.hdr->ack,
		     fz_pick(f, 8)
			     ? psn | syn << 24 | (uint64_t)fz_u8(f) << 32 |
				       (uint64_t)fz_u16(f) << 40
			     : fz_u64(f));
}

static void put_tail(struct run *r)
{
	struct fz *f = r->f;
	struct sv_ring *t = fz_pick(f, 2) ? &r->p->l.rx : &r->p->l.rsp_rx;
	uint64_t v = fz_pick(f, 2) ? fz_u64(f)
				   : t->tail + (uint64_t)(int8_t)fz_u8(f) * 64;

	atomic_store(&t->hdr->tail, v);
}

/* What the victim sent us, taken as an honest peer would (its ACK
 * aside: acks are CMD_ACK's business). */
static void consume(struct run *r)
{
	struct sv_ring *rings[] = {&r->p->l.rx, &r->p->l.rsp_rx};

	for (int i = 0; i < 2; i++) {
		struct sv_pkt pkt;
		const uint8_t *pl;
		int k = 0;

		while (k++ < 64 && sv_ring_peek(rings[i], &pkt, &pl) == 1) {
			if (getenv("FZ_TRACE"))
				fprintf(stderr,
					"victim sent op %u flags %x psn %06x "
					"npsn %u len %u\n",
					pkt.opcode, pkt.flags, pkt.psn,
					pkt.npsn, pkt.len);
			/* a response train carries data, but for a read of
			 * nothing (an empty one per call would never end) */
			FZ_CHECK(pkt.opcode != SV_OP_READ_RESP || pkt.len ||
				 !pkt.msg_len);
			sv_ring_consume(rings[i]);
		}
	}
}

static uint64_t new_id(struct run *r)
{
	uint64_t id = ++r->next_id;

	if (r->nids < MAX_IDS)
		r->ids[r->nids++] = id;
	return id;
}

static void post_recv(struct run *r)
{
	struct fz *f = r->f;
	struct ibv_sge sg[2];
	struct ibv_recv_wr wr = {.sg_list = sg}, *bad;
	int n = 1 + fz_pick(f, 2);

	for (int i = 0; i < n; i++) {
		uint32_t off = fz_u16(f) % FZ_MR_LEN;

		sg[i].addr = (uintptr_t)r->e->buf + off;
		sg[i].length = fz_u16(f) % (FZ_MR_LEN - off + 1);
		sg[i].lkey = r->e->mr->lkey;
	}
	wr.num_sge = n;
	if (r->nids >= MAX_IDS)
		return;
	wr.wr_id = new_id(r);
	if (ibv_post_recv(r->qp, &wr, &bad))
		r->nids--; /* refused: no completion will come */
}

static void post_send(struct run *r)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_SEND,
		IBV_WR_SEND_WITH_IMM,
		IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD,
	};
	struct fz *f = r->f;
	uint32_t off = fz_u16(f) % FZ_MR_LEN;
	struct ibv_sge sg = {.addr = (uintptr_t)r->e->buf + off,
			     .length = fz_u16(f) % (FZ_MR_LEN - off + 1),
			     .lkey = r->e->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sg,
				 .num_sge = 1,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.opcode = ops[fz_pick(f, sizeof(ops) / sizeof(ops[0]))];
	if (r->shared && fz_pick(f, 4)) { /* a key of the peer's table */
		uint32_t i = fz_pick(f, NKEYS);

		wr.wr.rdma.remote_addr = IOVA(i) + fz_u16(f) % 8192;
		wr.wr.rdma.rkey = KEY(i);
	} else {
		wr.wr.rdma.remote_addr = fz_u64(f);
		wr.wr.rdma.rkey = fz_u32(f);
	}
	if (wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		uint32_t rkey = wr.wr.rdma.rkey;

		sg.addr &= ~7ull;
		sg.length = 8;
		wr.wr.atomic.remote_addr &= ~7ull;
		wr.wr.atomic.rkey = rkey;
	}
	if (r->nids >= MAX_IDS)
		return;
	wr.wr_id = new_id(r);
	if (ibv_post_send(r->qp, &wr, &bad))
		r->nids--;
}

/* Key table entry i from the input: mostly a live MR inside the arena,
 * any field free to lie; gen left odd (being written) now and then. */
static void put_key(struct run *r, uint32_t i)
{
	struct fz *f = r->f;
	struct sv_rkey_entry *e = &r->keys[i % NKEYS];
	uint32_t gen = atomic_load(&e->gen);

	atomic_store(&e->gen, gen | 1);
	e->key = fz_pick(f, 8) ? KEY(i % NKEYS) : fz_u32(f);
	e->iova = fz_pick(f, 8) ? IOVA(i % NKEYS) : fz_u64(f);
	e->length = fz_pick(f, 4) ? fz_u16(f) : fz_u64(f);
	e->arena_off = fz_pick(f, 4) ? fz_u16(f) % ARENA_LEN : fz_u64(f);
	e->access = fz_pick(f, 8) ? 0xf : fz_u8(f);
	e->pd_id = fz_pick(f, 8) ? PEER_PD : fz_u32(f);
	atomic_store(&e->gen, fz_pick(f, 16) ? gen + 2 : gen | 1);
}

/* Receive descriptor from the input, mostly the one the victim's next
 * send reads (ring.h struct sv_rdesc), pieces mostly in the arena. */
static void put_desc(struct run *r)
{
	struct fz *f = r->f;
	uint32_t next = to_sqp(r->qp)->req.recv_msgs;
	uint32_t i = fz_pick(f, 4) ? next : next + fz_u8(f);
	struct sv_rdesc *d = &r->p->l.rx.desc[i % NDESC];

	d->nsge = fz_pick(f, 8) ? 1 + fz_pick(f, 3) : fz_u32(f);
	d->length = fz_pick(f, 4) ? FZ_MR_LEN : fz_u32(f);
	for (int k = 0; k < SV_RDESC_SGE; k++) {
		d->sge[k].off =
			fz_pick(f, 8) ? fz_u16(f) % ARENA_LEN : fz_u64(f);
		d->sge[k].len = fz_pick(f, 8) ? fz_u16(f) % 8192 : fz_u64(f);
	}
	atomic_store(&d->seq, fz_pick(f, 8) ? i + 1 : fz_u32(f));
}

static int sealed_memfd(size_t len)
{
	int fd = memfd_create("fz-peer", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	FZ_CHECK(fd >= 0 && !ftruncate(fd, (off_t)len) &&
		 !fcntl(fd, F_ADD_SEALS,
			F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
	return fd;
}

/* The peer's arena and key table, as rmem.c lays them out. */
static void share_open(struct run *r)
{
	struct sv_rkey_hdr h = {
		.magic = SV_RKEY_MAGIC,
		.version = SV_RKEY_VERSION,
		.entry_size = sizeof(struct sv_rkey_entry),
		.nentries = NKEYS,
		.entries_off = SV_RKEY_HDR_BYTES,
		.arena_size = ARENA_LEN,
	};

	r->afd = sealed_memfd(ARENA_LEN);
	r->tfd = sealed_memfd(TABLE_LEN);
	r->arena = mmap(NULL, ARENA_LEN, PROT_READ | PROT_WRITE, MAP_SHARED,
			r->afd, 0);
	r->table = mmap(NULL, TABLE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED,
			r->tfd, 0);
	FZ_CHECK(r->arena != MAP_FAILED && r->table != MAP_FAILED);
	memcpy(r->table, &h, sizeof(h));
	r->keys = (struct sv_rkey_entry *)(r->table + SV_RKEY_HDR_BYTES);
	for (uint32_t i = 0; i < NKEYS; i++)
		put_key(r, i);
	/* what one-sided operations the victim may do itself */
	atomic_store(&r->p->l.rx.hdr->qp_access,
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC);
	r->shared = true;
}

static void share_close(struct run *r)
{
	if (!r->shared)
		return;
	munmap(r->arena, ARENA_LEN);
	munmap(r->table, TABLE_LEN);
	close(r->afd);
	close(r->tfd);
}

static void run_cmds(struct run *r)
{
	struct fz *f = r->f;

	for (int i = 0; i < MAX_CMDS && !fz_empty(f); i++) {
		switch ((enum cmd)fz_pick(f, CMD_NCMD)) {
		case CMD_REQ:
			put_record(r, &r->p->l.tx, false);
			break;
		case CMD_RSP:
			put_record(r, &r->p->l.rsp_tx, true);
			break;
		case CMD_RAW:
			put_raw(r);
			break;
		case CMD_ACK:
			put_ack(r);
			break;
		case CMD_RNR:
			atomic_store(&r->p->l.tx.hdr->rnr, fz_u8(f) % 4);
			break;
		case CMD_TAIL:
			put_tail(r);
			break;
		case CMD_CONSUME:
			consume(r);
			break;
		case CMD_RECV:
			post_recv(r);
			break;
		case CMD_SEND:
			post_send(r);
			break;
		case CMD_DESC:
			if (r->shared)
				put_desc(r);
			break;
		case CMD_KEY:
			if (r->shared)
				put_key(r, fz_u8(f));
			break;
		case CMD_DRIVE:
		case CMD_NCMD:
			fz_drive(r->e, 1 + fz_pick(f, 4), r->ids, r->nids);
			break;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = {data, size};
	struct fz_env *e = fz_env();
	struct fz_peer p;
	struct run r = {.f = &f, .e = e, .p = &p};
	uint8_t cfg = fz_u8(&f);
	int fds = fz_count_fds();

	r.req_psn = (cfg & 1) ? SV_PSN_MASK - fz_u8(&f) % 4 : fz_u32(&f);
	r.req_psn &= SV_PSN_MASK;
	r.sq_psn = (cfg & 2) ? SV_PSN_MASK : fz_u32(&f) & SV_PSN_MASK;
	r.qp = fz_victim_create(e, (cfg & 4) ? IBV_QPT_UC : IBV_QPT_RC);
	FZ_CHECK(r.qp);
	FZ_CHECK(fz_peer_open(&p, (cfg & 0x20) ? NDESC : 0) == 0);
	if (cfg & 0x20)
		share_open(&r);
	/* receives posted before RTR are described at RTR (single copy) */
	for (int i = (cfg >> 3) & 3; i > 0; i--)
		post_recv(&r);
	FZ_CHECK(fz_victim_connect(r.qp, p.qpn, r.req_psn, r.sq_psn, true,
				   (cfg & 0x40) ? IBV_MTU_4096
						: IBV_MTU_1024) == 0);
	FZ_CHECK(fz_peer_handshake(
			 &p, e, r.qp,
			 r.shared
				 ? &(struct sv_shm_share){r.afd, r.tfd, PEER_PD}
				 : NULL) == 0);
	run_cmds(&r);
	fz_drive(e, 2, r.ids, r.nids);
	fz_env_check_guards(e);
	if (getenv("FZ_TRACE"))
		fprintf(stderr, "victim %s resp_psn %06x (peer at %06x)\n",
			sv_qp_state_names[r.qp->state], to_sqp(r.qp)->resp.psn,
			r.req_psn);
	FZ_CHECK(ibv_destroy_qp(r.qp) == 0);
	fz_env_drain(e, r.ids, r.nids);
	fz_peer_close(&p);
	share_close(&r);
	FZ_CHECK(fz_count_fds() == fds);
	return 0;
}
