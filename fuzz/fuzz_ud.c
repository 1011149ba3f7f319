// SPDX-License-Identifier: MIT
/*
 * UD datagrams (ud.c) as any process of the user can send them to a
 * QP's socket: the header (wire.h struct sv_ud_hdr) decoded from the
 * input so most pass sv_ud_hdr_ok and the QPN/qkey checks, each field
 * still free to lie; payloads up to past the MTU; raw datagrams of any
 * length; against receives of any shape (1-2 SGEs, smaller than the GRH
 * or the payload), in RTR/RTS, INIT or ERR.  Checked besides the
 * sanitizers: no byte outside the MR changes, each receive completes at
 * most once and a successful one never says more bytes than it had, the
 * payload of a datagram lands intact in a one-SGE receive.
 */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "env.h"

#define MAX_CMDS 64
#define MAX_IDS	 64
#define QKEY	 0x11111111u

struct rwr {
	uint64_t id;
	uint32_t len; /* bytes the receive takes */
	bool one_sge;
	uint64_t addr;
};

struct run {
	struct fz *f;
	struct fz_env *e;
	struct ibv_qp *qp;
	int sock; /* ours, unbound: any process can do this */
	struct rwr rq[MAX_IDS];
	int nrq, next_rq; /* posted; the next to complete */
	uint64_t next_id;
	/* the last datagram sent that a receive would take, for the
	 * content check */
	uint8_t last[SV_UD_MTU];
	uint32_t last_len;
	bool last_valid;
};

static void post_recv(struct run *r)
{
	struct fz *f = r->f;
	struct ibv_sge sg[2];
	struct ibv_recv_wr wr = {.sg_list = sg}, *bad;
	struct rwr *w = &r->rq[r->nrq];
	int n = 1 + (fz_pick(f, 4) == 0);

	if (r->nrq == MAX_IDS)
		return;
	w->len = 0;
	for (int i = 0; i < n; i++) {
		uint32_t off = fz_u16(f) % FZ_MR_LEN;

		sg[i].addr = (uintptr_t)r->e->buf + off;
		sg[i].length = fz_pick(f, 4)
				       ? FZ_MR_LEN - off
				       : fz_u16(f) % (FZ_MR_LEN - off + 1);
		sg[i].lkey = fz_pick(f, 16) ? r->e->mr->lkey : fz_u32(f);
		w->len += sg[i].length;
	}
	w->one_sge = n == 1;
	w->addr = sg[0].addr;
	w->id = wr.wr_id = ++r->next_id;
	wr.num_sge = n;
	if (!ibv_post_recv(r->qp, &wr, &bad))
		r->nrq++;
}

static void drain(struct run *r)
{
	struct ibv_wc wc;

	while (ibv_poll_cq(r->e->cq, 1, &wc) == 1) {
		struct rwr *w;

		/* receives complete in order (IBA 10.8.3) */
		FZ_CHECK(r->next_rq < r->nrq);
		w = &r->rq[r->next_rq++];
		if (getenv("FZ_TRACE"))
			fprintf(stderr, "wc %llu %s len %u flags %x\n",
				(unsigned long long)wc.wr_id,
				ibv_wc_status_str(wc.status), wc.byte_len,
				wc.wc_flags);
		FZ_CHECK(wc.wr_id == w->id);
		if (wc.status != IBV_WC_SUCCESS)
			continue;
		FZ_CHECK(wc.opcode == IBV_WC_RECV);
		FZ_CHECK(wc.byte_len >= SV_GRH_LEN && wc.byte_len <= w->len);
		if (w->one_sge && r->last_valid &&
		    wc.byte_len == SV_GRH_LEN + r->last_len)
			FZ_CHECK(!memcmp((uint8_t *)(uintptr_t)w->addr +
						 SV_GRH_LEN,
					 r->last, r->last_len));
	}
}

static void send_dgram(struct run *r, const void *buf, size_t len)
{
	struct sockaddr_un a;
	socklen_t al = sv_link_qp_addr(&a, r->qp->qp_num);
	struct sv_qp *v = to_sqp(r->qp);

	for (int tries = 0; tries < 4; tries++) {
		if (sendto(r->sock, buf, len, MSG_DONTWAIT,
			   (struct sockaddr *)&a, al) >= 0 ||
		    errno != EAGAIN)
			break;
		drain(r); /* its queue is full: let it take some */
	}
	/* one datagram at a time, taken or dropped before the next is
	 * sent: the receive path run here, under the QP's lock, so a
	 * progress thread that took it first has finished when we get the
	 * lock, and the content check knows which datagram it was.  With
	 * UD lanes a poll reads the socket only once the progress thread
	 * saw its edge (rung): raised here as that thread would, else the
	 * datagram waits for the thread and completes after the next one
	 * was sent, and the check compares it with the wrong bytes */
	sv_lock(&v->lock);
	atomic_store(&v->pfd[0].rung, true);
	sv_ud_recv_run(v, sv_srq_take);
	sv_unlock(&v->lock);
	drain(r);
}

static void cmd_datagram(struct run *r)
{
	struct fz *f = r->f;
	static uint8_t buf[sizeof(struct sv_ud_hdr) + SV_UD_MTU + 64];
	struct sv_ud_hdr h = {
		.magic = SV_UD_MAGIC,
		.version = SV_UD_VERSION,
		.dst_qpn = r->qp->qp_num,
		.qkey = QKEY,
	};
	uint32_t plen =
		fz_pick(f, 8) ? fz_u16(f) % 1500 : fz_u16(f) % (SV_UD_MTU + 64);

	h.flags = fz_u8(f);
	if (h.flags < 0xf0)
		/* a quarter: as from the network, maybe with a MAC (no
		 * secret here: dropped) */
		h.flags &=
			SV_UD_IMM | SV_UD_SOLICITED | SV_UD_GRH |
			((h.flags & 0x60) == 0x60 ? SV_UD_NET | SV_UD_MAC : 0);
	h.src_qpn = fz_u32(f);
	h.imm = fz_u32(f);
	h.len = plen;
	switch (fz_pick(f, 16)) {
	case 0:
		h.magic = fz_u32(f);
		break;
	case 1:
		h.version = fz_u16(f);
		break;
	case 2:
		h.dst_qpn = fz_u32(f);
		break;
	case 3:
		h.qkey = fz_u32(f);
		break;
	case 4:
		h.len = fz_pick(f, 2) ? fz_u32(f) : plen + 1;
		break;
	default:
		break;
	}
	fz_take(f, h.sgid, sizeof(h.sgid));
	fz_take(f, h.dgid, sizeof(h.dgid));
	memcpy(buf, &h, sizeof(h));
	fz_take(f, buf + sizeof(h), plen);
	r->last_valid = sv_ud_hdr_ok(&h, sizeof(h) + plen);
	r->last_len = plen <= SV_UD_MTU ? plen : 0;
	memcpy(r->last, buf + sizeof(h), r->last_len);
	send_dgram(r, buf, sizeof(h) + plen);
}

static void cmd_raw(struct run *r)
{
	uint8_t buf[256];
	size_t len = fz_u8(r->f);

	fz_take(r->f, buf, len);
	r->last_valid = false;
	send_dgram(r, buf, len);
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s, uint32_t sq_psn)
{
	struct ibv_qp_attr a = {.qp_state = s, .sq_psn = sq_psn};

	return ibv_modify_qp(
		qp, &a, IBV_QP_STATE | (s == IBV_QPS_RTS ? IBV_QP_SQ_PSN : 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int sock = -1;
	struct fz f = {data, size};
	struct fz_env *e = fz_env();
	struct run r = {.f = &f, .e = e};
	uint8_t cfg = fz_u8(&f);
	static bool warm;
	int fds;

	if (sock < 0)
		sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	FZ_CHECK(sock >= 0);
	r.sock = sock;
	if (!warm) {
		/* the context's UDP listener opens with its first UD QP and
		 * stays (ud.c): not this input's fds */
		struct ibv_qp *qp = fz_victim_create(e, IBV_QPT_UD);

		FZ_CHECK(qp && !ibv_destroy_qp(qp));
		warm = true;
	}
	fds = fz_count_fds();
	r.qp = fz_victim_create(e, IBV_QPT_UD);
	FZ_CHECK(r.qp);
	for (int i = cfg & 7; i > 0; i--)
		post_recv(&r);
	if (cfg & 0x10) /* else INIT: it takes nothing */
		FZ_CHECK(!to_state(r.qp, IBV_QPS_RTR, 0) &&
			 !to_state(r.qp, IBV_QPS_RTS, 0));
	for (int i = 0; i < MAX_CMDS && !fz_empty(&f); i++) {
		switch (fz_pick(&f, 6)) {
		case 0:
			post_recv(&r);
			break;
		case 1:
		case 2:
			cmd_datagram(&r);
			break;
		case 3:
			cmd_raw(&r);
			break;
		case 4:
			drain(&r);
			break;
		case 5:
			if (fz_pick(&f, 8) == 0)
				to_state(r.qp, IBV_QPS_ERR, 0);
			break;
		}
	}
	drain(&r);
	fz_env_check_guards(e);
	FZ_CHECK(ibv_destroy_qp(r.qp) == 0);
	drain(&r);
	FZ_CHECK(fz_count_fds() == fds);
	return 0;
}
