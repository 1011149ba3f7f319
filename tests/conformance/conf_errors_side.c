// SPDX-License-Identifier: MIT
/*
 * Errors on the right side (issue 28 item 1): whatever the target finds
 * wrong with its own resources (its receive WQE, an MR, a PD, access,
 * length) completes the target's WQE with the local error and the
 * initiator's with the remote error the IBA names (9.7.5.2, table 43 and
 * 9.9.3.1: NAK invalid request -> REM_INV_REQ_ERR, remote access ->
 * REM_ACCESS_ERR, remote operational -> REM_OP_ERR), as rxe's rxe_resp.c
 * states do.  One table, a row per case: the path (a send through the
 * ring, a send the sender places itself on shared memory, a write, read
 * or atomic done directly or by the responder) and the fault -> the
 * initiator's status and the target's.  Over shm and TCP (.tcp.): TCP has
 * no single copy and no direct one-sided operation, so its rows take the
 * responder's way.  Every row runs on a fresh pair; every row that
 * disagrees is printed before the test fails.  The race the table cannot
 * reach (a sender claimed the receive before its MR changed, and its
 * header arrives after) is played by a fake peer that sends the header
 * of a placed send itself.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "objects.h"
#include "pair.h"
#include "peer.h"

#define BIG   16384 /* placed on shm (> SOFTVERBS_SINGLE_COPY_COLD) */
#define SMALL 64    /* the ring's way */
#define NONE  (-1)  /* no completion on the target */

enum path {
	SEND_SMALL,
	SEND_BIG,
	WRITE,
	WRITE_IMM,
	READ,
	ATOMIC,
};

static const char *const path_names[] = {
	[SEND_SMALL] = "send 64 B",
	[SEND_BIG] = "send 16 KiB",
	[WRITE] = "write",
	[WRITE_IMM] = "write+imm",
	[READ] = "read",
	[ATOMIC] = "fetch-add",
};

/* What goes wrong on the target (b), and when: before its receive is
 * posted or after (with the receive still posted). */
enum fault {
	OK,	      /* nothing: the control rows */
	RECV_SHORT,   /* the receive is half the message */
	RECV_LKEY,    /* the receive names a key that is no MR */
	RECV_PD_PRE,  /* its MR moved to another PD, then posted */
	RECV_PD_POST, /* posted, then its MR moved to another PD */
	RECV_XLATE,   /* posted, then its MR moved to other memory */
	RECV_ACCESS,  /* posted, then its MR lost local write */
	RECV_GONE,    /* posted, then its MR deregistered */
	RECV_REREG,   /* posted, then its MR re-registered as it was */
	RKEY_BAD,     /* an rkey that is no MR */
	RKEY_BOUNDS,  /* past the MR's end */
	RKEY_ACCESS,  /* the MR lacks the remote access */
	RKEY_PD,      /* the MR moved to another PD */
	RKEY_XLATE,   /* the MR moved to other memory (old address) */
	RKEY_GONE,    /* the MR deregistered */
	QP_ACCESS,    /* the target QP does not allow the operation */
	ATOMIC_ALIGN, /* an atomic at an address not 8-aligned */
};

/* Where the target's receive and memory are (a row's `on`). */
enum on {
	RQ,	  /* the QP's own receive queue, memory the peer shares */
	SRQ,	  /* an SRQ's receives (lent to the QP for single copy) */
	UNSHARED, /* memory the provider cannot share (MAP_SHARED): no
		   * single copy, no direct one-sided operation on shm */
};

struct row {
	enum path path;
	enum fault fault;
	int init;   /* the initiator's status */
	int target; /* the receive's (for one-sided: the probe receive's) */
	enum on on;
};

#define L(x) IBV_WC_##x
static const struct row rows[] = {
	{SEND_SMALL, OK, L(SUCCESS), L(SUCCESS), RQ},
	{SEND_BIG, OK, L(SUCCESS), L(SUCCESS), RQ},
	/* IBA 9.7.5.2.2: too long for the receive */
	{SEND_SMALL, RECV_SHORT, L(REM_INV_REQ_ERR), L(LOC_LEN_ERR), RQ},
	{SEND_BIG, RECV_SHORT, L(REM_INV_REQ_ERR), L(LOC_LEN_ERR), RQ},
	/* IBA 9.7.5.2.4: the receive WQE is the responder's own fault */
	{SEND_SMALL, RECV_LKEY, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_BIG, RECV_LKEY, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_SMALL, RECV_PD_PRE, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_BIG, RECV_PD_PRE, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_SMALL, RECV_PD_POST, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_BIG, RECV_PD_POST, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_SMALL, RECV_XLATE, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_BIG, RECV_XLATE, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_SMALL, RECV_ACCESS, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_BIG, RECV_ACCESS, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_SMALL, RECV_GONE, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_BIG, RECV_GONE, L(REM_OP_ERR), L(LOC_PROT_ERR), RQ},
	{SEND_SMALL, RECV_REREG, L(SUCCESS), L(SUCCESS), RQ},
	{SEND_BIG, RECV_REREG, L(SUCCESS), L(SUCCESS), RQ},
	/* one-sided: IBA 9.9.3.1.2 class C, the target QP goes to ERROR
	 * (its probe receive flushes) */
	{WRITE, OK, L(SUCCESS), NONE, RQ},
	{WRITE, RKEY_BAD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{WRITE, RKEY_BOUNDS, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{WRITE, RKEY_ACCESS, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{WRITE, RKEY_PD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{WRITE, RKEY_XLATE, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{WRITE, RKEY_GONE, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{WRITE, QP_ACCESS, L(REM_INV_REQ_ERR), L(WR_FLUSH_ERR), RQ},
	{WRITE_IMM, OK, L(SUCCESS), L(SUCCESS), RQ},
	{WRITE_IMM, RKEY_BAD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{WRITE_IMM, RKEY_PD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{READ, OK, L(SUCCESS), NONE, RQ},
	{READ, RKEY_BAD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{READ, RKEY_BOUNDS, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{READ, RKEY_ACCESS, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{READ, RKEY_PD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{READ, RKEY_GONE, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{READ, QP_ACCESS, L(REM_INV_REQ_ERR), L(WR_FLUSH_ERR), RQ},
	{ATOMIC, OK, L(SUCCESS), NONE, RQ},
	{ATOMIC, RKEY_BAD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{ATOMIC, RKEY_ACCESS, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{ATOMIC, RKEY_PD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), RQ},
	{ATOMIC, QP_ACCESS, L(REM_INV_REQ_ERR), L(WR_FLUSH_ERR), RQ},
	{ATOMIC, ATOMIC_ALIGN, L(REM_INV_REQ_ERR), L(WR_FLUSH_ERR), RQ},
	/* receives of an SRQ: the same statuses */
	{SEND_SMALL, OK, L(SUCCESS), L(SUCCESS), SRQ},
	{SEND_BIG, OK, L(SUCCESS), L(SUCCESS), SRQ},
	{SEND_SMALL, RECV_SHORT, L(REM_INV_REQ_ERR), L(LOC_LEN_ERR), SRQ},
	{SEND_BIG, RECV_SHORT, L(REM_INV_REQ_ERR), L(LOC_LEN_ERR), SRQ},
	{SEND_SMALL, RECV_LKEY, L(REM_OP_ERR), L(LOC_PROT_ERR), SRQ},
	{SEND_BIG, RECV_LKEY, L(REM_OP_ERR), L(LOC_PROT_ERR), SRQ},
	{SEND_BIG, RECV_PD_PRE, L(REM_OP_ERR), L(LOC_PROT_ERR), SRQ},
	{SEND_BIG, RECV_PD_POST, L(REM_OP_ERR), L(LOC_PROT_ERR), SRQ},
	{SEND_BIG, RECV_XLATE, L(REM_OP_ERR), L(LOC_PROT_ERR), SRQ},
	{SEND_BIG, RECV_ACCESS, L(REM_OP_ERR), L(LOC_PROT_ERR), SRQ},
	{SEND_BIG, RECV_GONE, L(REM_OP_ERR), L(LOC_PROT_ERR), SRQ},
	{SEND_BIG, RECV_REREG, L(SUCCESS), L(SUCCESS), SRQ},
	{WRITE_IMM, OK, L(SUCCESS), L(SUCCESS), SRQ},
	/* an SRQ's receives are not the failed QP's: none flushes */
	{WRITE_IMM, RKEY_PD, L(REM_ACCESS_ERR), NONE, SRQ},
	/* memory that cannot be shared: the responder's way on shm too */
	{SEND_BIG, OK, L(SUCCESS), L(SUCCESS), UNSHARED},
	{SEND_BIG, RECV_PD_POST, L(REM_OP_ERR), L(LOC_PROT_ERR), UNSHARED},
	{SEND_BIG, RECV_GONE, L(REM_OP_ERR), L(LOC_PROT_ERR), UNSHARED},
	{WRITE, OK, L(SUCCESS), NONE, UNSHARED},
	{WRITE, RKEY_BOUNDS, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), UNSHARED},
	{WRITE, RKEY_PD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), UNSHARED},
	{WRITE, RKEY_GONE, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), UNSHARED},
	{READ, OK, L(SUCCESS), NONE, UNSHARED},
	{READ, RKEY_ACCESS, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), UNSHARED},
	{READ, RKEY_PD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), UNSHARED},
	{ATOMIC, OK, L(SUCCESS), NONE, UNSHARED},
	{ATOMIC, RKEY_BAD, L(REM_ACCESS_ERR), L(WR_FLUSH_ERR), UNSHARED},
	{ATOMIC, QP_ACCESS, L(REM_INV_REQ_ERR), L(WR_FLUSH_ERR), UNSHARED},
};

static const char *const on_names[] = {
	[RQ] = "",
	[SRQ] = "SRQ ",
	[UNSHARED] = "unshared ",
};
#undef L

static const char *const fault_names[] = {
	[OK] = "none",
	[RECV_SHORT] = "receive too short",
	[RECV_LKEY] = "receive lkey no MR",
	[RECV_PD_PRE] = "receive MR moved PD, then posted",
	[RECV_PD_POST] = "receive posted, MR moved PD",
	[RECV_XLATE] = "receive posted, MR changed translation",
	[RECV_ACCESS] = "receive posted, MR lost local write",
	[RECV_GONE] = "receive posted, MR deregistered",
	[RECV_REREG] = "receive posted, MR re-registered as was",
	[RKEY_BAD] = "rkey no MR",
	[RKEY_BOUNDS] = "past the MR",
	[RKEY_ACCESS] = "MR without the remote access",
	[RKEY_PD] = "MR moved PD",
	[RKEY_XLATE] = "MR changed translation",
	[RKEY_GONE] = "MR deregistered",
	[QP_ACCESS] = "QP without the access",
	[ATOMIC_ALIGN] = "misaligned atomic",
};

#define RACC                                                \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* What a row made on the target, undone after it. */
struct scene {
	struct sv_pair p;
	struct ibv_pd *pd2; /* the PD an MR moved to */
	void *mem2;	    /* the memory an MR moved to */
	size_t len2;
	uint8_t *tbuf;		/* the target's memory: b.buf, or mem3 */
	void *mem3;		/* UNSHARED: a MAP_SHARED mapping */
	struct ibv_srq *srq;	/* SRQ: the target QP's */
	struct ibv_mr *warm_mr; /* SRQ: the first message's receive */
	uint8_t warm[64];
};

static uint32_t msg_len(enum path path)
{
	return path == SEND_BIG ? BIG : path == ATOMIC ? 8 : SMALL;
}

/* The target's QP, again, on an SRQ. */
static void srq_qp(struct scene *s)
{
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 32, .max_sge = 4}};
	struct sv_end *b = &s->p.b;
	struct ibv_qp_init_attr ia = {
		.send_cq = b->scq,
		.recv_cq = b->rcq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {.max_send_wr = 32, .max_send_sge = 4},
	};

	s->srq = ibv_create_srq(b->pd, &sa);
	ASSERT_NOT_NULL(s->srq);
	ia.srq = s->srq;
	ASSERT_OK(ibv_destroy_qp(b->qp));
	b->qp = ibv_create_qp(b->pd, &ia);
	ASSERT_NOT_NULL(b->qp);
}

/* One message through the SRQ before the row's: a QP is lent an SRQ's
 * receives for single copy when it takes one (srq.c lend), so the row's
 * receive, posted behind this one, is lent to it. */
static void srq_warm_post(struct scene *s)
{
	struct ibv_sge sg = {(uintptr_t)s->warm, sizeof(s->warm), 0};
	struct ibv_recv_wr wr = {.wr_id = 9, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad;

	/* its own MR: the row's may change before this one is taken */
	s->warm_mr = ibv_reg_mr(s->p.b.pd, s->warm, sizeof(s->warm),
				IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(s->warm_mr);
	sg.lkey = s->warm_mr->lkey;
	ASSERT_OK(ibv_post_srq_recv(s->srq, &wr, &bad));
}

static void srq_warm_go(struct scene *s)
{
	ASSERT_OK(sv_end_send(&s->p.a, 9, 0, 64, 0));
	EXPECT_WC(s->p.b.rcq, IBV_WC_SUCCESS, 9);
	EXPECT_WC(s->p.a.scq, IBV_WC_SUCCESS, 9);
}

/* The target's MR, moved onto memory the provider cannot share. */
static void unshared_mr(struct scene *s)
{
	size_t len = s->p.b.o.buf_len;

	s->mem3 = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(s->mem3 != MAP_FAILED);
	ASSERT_OK(ibv_rereg_mr(s->p.b.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			       s->mem3, len, 0));
	s->tbuf = s->mem3;
}

static void open_scene(struct scene *s, const struct row *r)
{
	struct sv_end_opts o = sv_end_opts_default();

	memset(s, 0, sizeof(*s));
	o.mr_access = RACC;
	o.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		      IBV_ACCESS_REMOTE_ATOMIC;
	sv_end_open(&s->p.a, &o);
	o.psn = 0x5678;
	if (r->fault == QP_ACCESS)
		o.qp_access = 0;
	if (r->fault == RKEY_ACCESS)
		o.mr_access = IBV_ACCESS_LOCAL_WRITE;
	sv_end_open(&s->p.b, &o);
	s->tbuf = s->p.b.buf;
	if (r->on == SRQ)
		srq_qp(s);
	if (r->on == UNSHARED)
		unshared_mr(s);
	sv_end_connect(&s->p.a, s->p.b.qp->qp_num, s->p.b.o.psn);
	sv_end_connect(&s->p.b, s->p.a.qp->qp_num, s->p.a.o.psn);
	if (s->srq)
		srq_warm_post(s);
	s->pd2 = ibv_alloc_pd(s->p.b.ctx);
	ASSERT_NOT_NULL(s->pd2);
}

static void close_scene(struct scene *s)
{
	if (s->p.b.mr) { /* before its PD may go */
		ASSERT_OK(ibv_dereg_mr(s->p.b.mr));
		s->p.b.mr = NULL;
	}
	if (s->warm_mr)
		ASSERT_OK(ibv_dereg_mr(s->warm_mr));
	if (s->srq) { /* its QP first */
		ASSERT_OK(ibv_destroy_qp(s->p.b.qp));
		s->p.b.qp = NULL;
		ASSERT_OK(ibv_destroy_srq(s->srq));
	}
	ASSERT_OK(ibv_dealloc_pd(s->pd2));
	if (s->mem3)
		munmap(s->mem3, s->p.b.o.buf_len);
	sv_pair_close(&s->p);
	if (s->mem2)
		munmap(s->mem2, s->len2);
}

/* The target's MR changes under it (fault f); the receive or rkey still
 * names the old one. */
static void change_mr(struct scene *s, enum fault f)
{
	struct sv_end *b = &s->p.b;
	size_t len = b->o.buf_len;

	switch (f) {
	case RECV_PD_PRE:
	case RECV_PD_POST:
	case RKEY_PD:
		ASSERT_OK(ibv_rereg_mr(b->mr, IBV_REREG_MR_CHANGE_PD, s->pd2,
				       NULL, 0, 0));
		break;
	case RECV_XLATE:
	case RKEY_XLATE:
		s->mem2 = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ASSERT_TRUE(s->mem2 != MAP_FAILED);
		s->len2 = len;
		ASSERT_OK(ibv_rereg_mr(b->mr, IBV_REREG_MR_CHANGE_TRANSLATION,
				       NULL, s->mem2, len, 0));
		break;
	case RECV_ACCESS:
		ASSERT_OK(ibv_rereg_mr(b->mr, IBV_REREG_MR_CHANGE_ACCESS, NULL,
				       NULL, 0, 0));
		break;
	case RECV_REREG: /* nothing changes: the receive stays good */
		ASSERT_OK(ibv_rereg_mr(
			b->mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			b->o.mr_access ? b->o.mr_access
				       : IBV_ACCESS_LOCAL_WRITE));
		break;
	case RECV_GONE:
	case RKEY_GONE:
		ASSERT_OK(ibv_dereg_mr(b->mr));
		b->mr = NULL;
		break;
	default:
		break;
	}
}

/* The target's receive: for a send, the one it takes; for a one-sided
 * operation a probe that shows whether the target QP went to ERROR. */
static void post_target_recv(struct scene *s, const struct row *r,
			     uint32_t lkey)
{
	uint32_t len = msg_len(r->path);
	struct ibv_sge sg = {(uintptr_t)s->tbuf, len, lkey};
	struct ibv_recv_wr wr = {.wr_id = 2, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad;

	if (r->fault == RECV_SHORT)
		sg.length = len / 2;
	if (r->fault == RECV_LKEY)
		sg.lkey ^= 0x100;
	if (s->srq)
		ASSERT_OK(ibv_post_srq_recv(s->srq, &wr, &bad));
	else
		ASSERT_OK(ibv_post_recv(s->p.b.qp, &wr, &bad));
}

/* The initiator's WR for the row, aimed at the target's MR as the row
 * has it (rkey and address taken before any change). */
static void post_initiator(struct scene *s, const struct row *r, uint32_t rkey)
{
	struct sv_end *a = &s->p.a;
	uint64_t raddr = (uintptr_t)s->tbuf;
	struct ibv_sge sg = {(uintptr_t)a->buf, msg_len(r->path), a->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sg, .num_sge = 1};
	struct ibv_send_wr *bad;
	static const enum ibv_wr_opcode ops[] = {
		[SEND_SMALL] = IBV_WR_SEND,
		[SEND_BIG] = IBV_WR_SEND,
		[WRITE] = IBV_WR_RDMA_WRITE,
		[WRITE_IMM] = IBV_WR_RDMA_WRITE_WITH_IMM,
		[READ] = IBV_WR_RDMA_READ,
		[ATOMIC] = IBV_WR_ATOMIC_FETCH_AND_ADD,
	};

	sv_fill(a->buf, sg.length, 7);
	if (r->fault == RKEY_BAD)
		rkey ^= 0x100;
	if (r->fault == RKEY_BOUNDS)
		raddr += s->p.b.o.buf_len - sg.length / 2;
	if (r->fault == ATOMIC_ALIGN)
		raddr += 4;
	wr.opcode = ops[r->path];
	wr.imm_data = htobe32(0x1234);
	if (r->path == ATOMIC) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ASSERT_OK(ibv_post_send(a->qp, &wr, &bad));
}

static uint64_t placed_sends(struct sv_end *e)
{
	return __atomic_load_n(&to_sqp(e->qp)->stats.placed_sends,
			       __ATOMIC_RELAXED);
}

/* Runs one row; false (with a line saying why) if a status differs. */
static bool run_row(const struct row *r)
{
	bool pre = r->fault == RECV_PD_PRE;
	struct scene s;
	struct ibv_wc wi, wt;
	bool ok = true, got_t;
	uint32_t lkey, rkey;

	open_scene(&s, r);
	lkey = s.p.b.mr->lkey;
	rkey = s.p.b.mr->rkey;
	if (pre)
		change_mr(&s, r->fault);
	post_target_recv(&s, r, lkey);
	if (s.srq)
		srq_warm_go(&s);
	if (!pre)
		change_mr(&s, r->fault);
	post_initiator(&s, r, rkey);
	WAIT_WC(s.p.a.scq, &wi, SV_WC_TIMEOUT_MS);
	got_t = sv_wc_poll(s.p.b.rcq, &wt, r->target == NONE ? 20 : 2000);
	if ((int)wi.status != r->init ||
	    (r->target == NONE ? got_t
			       : !got_t || (int)wt.status != r->target)) {
		fprintf(stderr,
			"row %s%-11s | %-40s: initiator %s, target %s; "
			"expected %s, %s%s\n",
			on_names[r->on], path_names[r->path],
			fault_names[r->fault], ibv_wc_status_str(wi.status),
			got_t ? ibv_wc_status_str(wt.status) : "none",
			ibv_wc_status_str(r->init),
			r->target == NONE ? "none"
					  : ibv_wc_status_str(r->target),
			placed_sends(&s.p.a) ? " (placed)" : "");
		ok = false;
	}
	/* the control rows took the path they stand for (shm): placed,
	 * or not on memory that cannot be shared */
	if (r->path == SEND_BIG && r->fault == OK && !sv_test_wire() &&
	    placed_sends(&s.p.a) != (r->on != UNSHARED)) {
		fprintf(stderr, "row %s%-11s | %-40s: placed %" PRIu64 "\n",
			on_names[r->on], path_names[r->path],
			fault_names[r->fault], placed_sends(&s.p.a));
		ok = false;
	}
	/* nothing named the memory an MR moved to: no byte went there */
	for (size_t i = 0; s.mem2 && i < s.len2; i++) {
		if (((uint8_t *)s.mem2)[i]) {
			fprintf(stderr,
				"row %s%-11s | %-40s: byte %zu of the MR's new "
				"memory written\n",
				on_names[r->on], path_names[r->path],
				fault_names[r->fault], i);
			ok = false;
			break;
		}
	}
	close_scene(&s);
	return ok;
}

SV_TEST(errors_on_the_right_side)
{
	size_t n = sizeof(rows) / sizeof(rows[0]), bad = 0;

	for (size_t i = 0; i < n; i++)
		bad += !run_row(&rows[i]);
	if (bad)
		sv_test_fail(__FILE__, __LINE__, "%zu of %zu rows wrong", bad,
			     n);
}

/*
 * A placed send's header arrives for a receive whose MR changed after
 * the sender claimed it (rereg's withdrawal came too late): the
 * responder checks the receive as it stands (resp.c recv_placed) and
 * completes it LOC_PROT_ERR with a REM_OP NAK, for each way the MR can
 * change; also for a rereg that changes nothing, since the bytes may
 * have gone to the memory the MR left meanwhile (the WQE is stale).  The
 * peer is a fake (peer.h) that claims the receive, as req.c try_place
 * does, and writes the header itself.
 */
/* The fake peer claims the victim's receive 0 for a placed send, as
 * req.c try_place does, once the victim described it. */
static void claim_first(struct sv_fake *f, uint64_t end)
{
	uint32_t one = 1;

	ASSERT_TRUE(f->rx.ndesc > 0);
	while (!atomic_compare_exchange_strong(&f->rx.desc[0].seq, &one, 0)) {
		ASSERT_TRUE(sv_now_ms() < end);
		one = 1;
	}
}

/* A placed send of 64 bytes, as a single-copy sender's header says it. */
static struct sv_pkt placed_send(void)
{
	return (struct sv_pkt){.opcode = SV_OP_SEND,
			       .seg = SV_SEG_ONLY,
			       .flags = SV_PKT_PLACED,
			       .psn = 0x100,
			       .npsn = 1,
			       .msg_len = 64,
			       .rec_len = sv_peer_rec_len(0)};
}

/* v (its receives posted in INIT) to RTS toward the fake f, which takes
 * v's connection and answers with its hello (rings *ring, *rsp). */
static void fake_sender_up(struct sv_end *v, struct sv_fake *f, int *ring,
			   int *rsp)
{
	ASSERT_OK(sv_end_to_rtr(v, f->qpn, 0x100));
	ASSERT_OK(sv_end_to_rts(v));
	sv_fake_accept(f, v->qp->qp_num);
	*ring = sv_peer_ring(f->qpn, SV_RING_MAGIC, true, false);
	*rsp = sv_peer_ring(f->qpn, SV_RING_MAGIC, true, false);
	sv_fake_hello(f, v->qp->qp_num, (int[]){*ring, *rsp}, 2, 0);
}

/* f, having claimed v's first receive (wr_id), says it placed a send
 * there: that fails with LOC_PROT_ERR, f gets NAK remote operation
 * error, v goes to ERROR. */
static void placed_send_fails(struct sv_end *v, struct sv_fake *f,
			      uint64_t wr_id, uint64_t end)
{
	struct sv_pkt p = placed_send();

	sv_fake_put(f, &f->rx, &p, NULL, 0, p.rec_len);
	EXPECT_WC(v->rcq, IBV_WC_LOC_PROT_ERR, wr_id);
	while (SV_ACK_SYN(atomic_load(&f->rx.hdr->ack)) != SV_NAK_REM_OP)
		ASSERT_TRUE(sv_now_ms() < end);
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(v));
}

/* A peer that says it placed a send into a receive we never showed it in
 * shared memory (its buffer is a shared mapping, which never moves onto
 * the arena: no description) lies: the receive fails as a stale one
 * would, and never completes with bytes the peer did not send. */
SV_TEST(errors_placed_send_into_an_undescribed_receive)
{
	sv_test_needs_shm("a placed send's header");
	struct scene s = {0};
	struct sv_end *v = &s.p.b;
	uint64_t end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	uint8_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct ibv_sge sg = {(uintptr_t)shared, 256, 0};
	struct ibv_recv_wr wr = {.wr_id = 78, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad;
	struct ibv_mr *mr;
	struct sv_fake f;
	int ring, rsp;

	ASSERT_TRUE(shared != MAP_FAILED);
	sv_fake_bind(&f);
	sv_end_open(v, NULL);
	s.pd2 = ibv_alloc_pd(v->ctx);
	ASSERT_NOT_NULL(s.pd2);
	mr = ibv_reg_mr(v->pd, shared, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	sg.lkey = mr->lkey;
	ASSERT_OK(sv_end_to_init(v));
	ASSERT_OK(ibv_post_recv(v->qp, &wr, &bad));
	fake_sender_up(v, &f, &ring, &rsp);
	ASSERT_TRUE(f.rx.ndesc > 0);
	/* shown with no pieces: not placeable; the liar claims it anyway */
	while (atomic_load(&f.rx.desc[0].seq) != 1)
		ASSERT_TRUE(sv_now_ms() < end);
	ASSERT_EQ(0, f.rx.desc[0].nsge);
	claim_first(&f, end);
	placed_send_fails(v, &f, 78, end);
	close(ring);
	close(rsp);
	sv_fake_close(&f);
	ASSERT_OK(ibv_dereg_mr(mr));
	close_scene(&s);
	munmap(shared, 4096);
}

SV_TEST(errors_placed_send_into_a_changed_receive)
{
	sv_test_needs_shm("a placed send's header");
	static const enum fault faults[] = {RECV_PD_POST, RECV_XLATE,
					    RECV_ACCESS, RECV_GONE, RECV_REREG};

	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		struct scene s = {0};
		struct sv_end *v = &s.p.b;
		uint64_t end = sv_now_ms() + SV_WC_TIMEOUT_MS;
		int ring, rsp;
		struct sv_fake f;

		sv_fake_bind(&f);
		sv_end_open(v, NULL);
		s.pd2 = ibv_alloc_pd(v->ctx);
		ASSERT_NOT_NULL(s.pd2);
		ASSERT_OK(sv_end_to_init(v));
		ASSERT_OK(sv_end_recv(v, 77, 0, 256));
		fake_sender_up(v, &f, &ring, &rsp);
		claim_first(&f, end); /* then the MR changes */
		change_mr(&s, faults[i]);
		placed_send_fails(v, &f, 77, end);
		close(ring);
		close(rsp);
		sv_fake_close(&f);
		close_scene(&s);
	}
}
