// SPDX-License-Identifier: MIT
/*
 * The fuzz targets' verbs world (env.h): a context, PD, CQ and guarded
 * MR made once, victim QPs, and the fake peer built from the provider's
 * own shm.c so its hellos are always well formed: what the input
 * controls is what a hostile peer controls after the handshake.
 */
#include "env.h"

#include <dirent.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

#define FZ_CQE	   4096
#define FZ_WAIT_NS 2000000000ull /* a handshake that takes longer fails */

static struct fz_env env;

struct fz_env *fz_env(void)
{
	struct ibv_device **list;
	size_t len = FZ_MR_LEN + 2 * FZ_GUARD_LEN;

	if (env.ctx)
		return &env;
	/* small rings: the inputs reach the wrap point and fill them */
	setenv("SOFTVERBS_RING_KB", "16", 0);
	list = ibv_get_device_list(NULL);
	FZ_CHECK(list && list[0]);
	env.ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	FZ_CHECK(env.ctx);
	env.pd = ibv_alloc_pd(env.ctx);
	env.cq = ibv_create_cq(env.ctx, FZ_CQE, NULL, NULL, 0);
	env.mem = aligned_alloc(4096, len);
	FZ_CHECK(env.pd && env.cq && env.mem);
	memset(env.mem, 0xa5, len);
	env.buf = env.mem + FZ_GUARD_LEN;
	env.mr = ibv_reg_mr(env.pd, env.buf, FZ_MR_LEN,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC);
	FZ_CHECK(env.mr);
	return &env;
}

void fz_env_check_guards(struct fz_env *e)
{
	for (size_t i = 0; i < FZ_GUARD_LEN; i++) {
		FZ_CHECK(e->mem[i] == 0xa5);
		FZ_CHECK(e->buf[FZ_MR_LEN + i] == 0xa5);
	}
}

static void check_wc(const struct ibv_wc *wc, uint64_t *ids, int n_ids)
{
	int i;

	if (getenv("FZ_TRACE")) /* to see what a seed reaches */
		fprintf(stderr, "wc id %llu %s op %d len %u\n",
			(unsigned long long)wc->wr_id,
			ibv_wc_status_str(wc->status), wc->opcode,
			wc->byte_len);
	FZ_CHECK((unsigned)wc->status <= IBV_WC_TM_RNDV_INCOMPLETE);
	for (i = 0; i < n_ids; i++)
		if (ids[i] == wc->wr_id)
			break;
	FZ_CHECK(i < n_ids); /* one completion per WR, and only ours */
	ids[i] = UINT64_MAX;
}

int fz_env_drain(struct fz_env *e, uint64_t *ids, int n_ids)
{
	struct ibv_wc wc[16];
	int n, total = 0;

	while ((n = ibv_poll_cq(e->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++)
			check_wc(&wc[i], ids, n_ids);
		total += n;
	}
	FZ_CHECK(n == 0);
	return total;
}

void fz_drive(struct fz_env *e, int times, uint64_t *ids, int n_ids)
{
	while (times-- > 0)
		fz_env_drain(e, ids, n_ids);
}

int fz_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	FZ_CHECK(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

ssize_t fz_send_fds(int s, const void *buf, size_t len, const int *fds,
		    int nfds)
{
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} u;
	struct iovec iov = {(void *)buf, len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	FZ_CHECK(nfds <= 8);
	memset(&u, 0, sizeof(u));
	if (nfds) {
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		u.c.cmsg_level = SOL_SOCKET;
		u.c.cmsg_type = SCM_RIGHTS;
		u.c.cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(&u.c), fds, nfds * sizeof(int));
	}
	return sendmsg(s, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

struct ibv_qp *fz_victim_create(struct fz_env *e, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.cap = {.max_send_wr = 16,
			.max_recv_wr = 16,
			.max_send_sge = 2,
			.max_recv_sge = 2,
			.max_inline_data = 64},
		.qp_type = type,
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);

	if (!qp)
		return NULL;
	if (type == IBV_QPT_RC)
		a.qp_access_flags |=
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (type == IBV_QPT_UD)
		a.qkey = 0x11111111;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  (type == IBV_QPT_UD ? IBV_QP_QKEY
						      : IBV_QP_ACCESS_FLAGS))) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

int fz_victim_connect(struct ibv_qp *qp, uint32_t dest_qpn, uint32_t rq_psn,
		      uint32_t sq_psn, bool rts, enum ibv_mtu mtu)
{
	bool rc = qp->qp_type == IBV_QPT_RC;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = dest_qpn,
		.rq_psn = rq_psn,
		.max_dest_rd_atomic = 4,
		.min_rnr_timer = 1,
		.ah_attr = {.port_num = 1, .dlid = sv_local_lid()},
	};
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
		   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

	if (rc)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (ibv_modify_qp(qp, &a, mask))
		return errno;
	if (!rts)
		return 0;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS,
		.sq_psn = sq_psn,
		.timeout = 14,
		.retry_cnt = 1,
		.rnr_retry = 1,
		.max_rd_atomic = 4,
	};
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (rc)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	return ibv_modify_qp(qp, &a, mask) ? errno : 0;
}

int fz_peer_open(struct fz_peer *p, uint32_t ndesc)
{
	int err;

	memset(p, 0, sizeof(*p));
	sv_link_init(&p->l);
	err = sv_link_bind(&p->l, SV_LINK_SOCK, &p->qpn);
	if (err)
		return err;
	err = sv_link_prepare(&p->l, &sv_shm_link_ops,
			      &(struct sv_link_conf){.my_qpn = p->qpn,
						     .ring_size = 16384,
						     .ndesc = ndesc});
	if (err)
		sv_link_close(&p->l, p->qpn, false);
	if (!err) /* awake: nobody reads our doorbells */
		sv_link_set_sleep(&p->l, false);
	return err;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int fz_peer_handshake(struct fz_peer *p, struct fz_env *e, struct ibv_qp *qp,
		      const struct sv_shm_share *share)
{
	struct sv_qp *v = to_sqp(qp);
	uint64_t deadline = now_ns() + FZ_WAIT_NS;
	int r;

	while ((r = sv_link_accept(&p->l, p->qpn, qp->qp_num)) == 0) {
		if (now_ns() > deadline)
			return -ETIMEDOUT;
		ibv_poll_cq(e->cq, 0, NULL); /* drives the victim's connect */
		sv_qp_drive(v, -1);
	}
	if (r < 0)
		return r;
	r = sv_shm_connect(&p->l, p->qpn, qp->qp_num, share);
	if (r)
		return r;
	while (v->link.state != SV_LINK_UP) {
		if (now_ns() > deadline || v->qpx.qp_base.state == IBV_QPS_ERR)
			return -ETIMEDOUT;
		sv_qp_drive(v, -1);
	}
	p->up = true;
	return 0;
}

void fz_peer_close(struct fz_peer *p)
{
	sv_link_close(&p->l, p->qpn, false);
	sv_link_unbind(&p->l);
}
