// SPDX-License-Identifier: MIT
/*
 * QPs and SRQs on an id, through the public verbs only: rdma_create_qp
 * and _ex (CQs and completion channels made when the program gives
 * none, as rdma-core does), the attributes of each state
 * (rdma_init_qp_attr) from what the CM exchanged, and the moves
 * INIT → RTR → RTS the library makes for the program.  The ECE calls.
 * XRC as rdma-core's cma.c: one domain for the process's XRC ids
 * (cm_xrcd), in which rdma_create_qp makes XRC_RECV QPs and
 * rdma_create_srq XRC SRQs, so that a passive id's QP and SRQ meet; the
 * attributes of each state are the kernel IB CM's for XRC_INI/XRC_TGT.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

#define CM_MIN_RNR_TIMER 12 /* 0.64 ms */
#define CM_ACK_TIMEOUT	 14 /* 67 ms */

/* Lock held or not: c's peer as an address vector (GRH with its GID). */
void cm_ud_ah_attr(struct cm_id *c, struct ibv_ah_attr *ah)
{
	union ibv_gid g;
	int idx = 0;

	memset(ah, 0, sizeof(*ah));
	cm_addr_gid(&c->id.route.addr.src_addr, &g, &idx);
	ah->is_global = 1;
	memcpy(ah->grh.dgid.raw, c->remote.gid, 16);
	ah->grh.sgid_index = (uint8_t)idx;
	ah->grh.hop_limit = 64;
	ah->grh.flow_label = c->ib ? c->ib_flow : 0; /* the REQ's */
	ah->dlid = c->remote.lid;
	ah->port_num = 1;
}

static enum ibv_mtu port_mtu(void)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(cm_core.ctx, 1, &pa))
		return IBV_MTU_1024;
	return pa.active_mtu;
}

/* The XRC domain of the process's XRC ids (rdma-core's ucma_get_xrcd: a
 * private one, opened at the first use and kept with the device). */
struct ibv_xrcd *cm_xrcd(void)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};
	struct ibv_xrcd *x;

	pthread_mutex_lock(&cm_core.lock);
	if (!cm_core.xrcd)
		cm_core.xrcd = ibv_open_xrcd(cm_core.ctx, &xa);
	x = cm_core.xrcd;
	pthread_mutex_unlock(&cm_core.lock);
	return x;
}

CM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id,
				struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct cm_id *c = cm_id_of(id);
	enum ibv_qp_state want;
	enum ibv_qp_type qpt;
	bool ud;
	int mask, ret = 0;

	if (!id || !qp_attr || !qp_attr_mask)
		return cm_err(EINVAL);
	ud = cm_is_ud(c) || id->ps == RDMA_PS_UDP;
	/* the kernel CM's masks: UC has none of RC's acknowledgement,
	 * retry and read/atomic attributes, an XRC initiator no responder
	 * ones, a target no requester ones but TIMEOUT */
	qpt = id->qp ? id->qp->qp_type : id->qp_type;
	want = qp_attr->qp_state;
	memset(qp_attr, 0, sizeof(*qp_attr));
	qp_attr->qp_state = want;
	mask = IBV_QP_STATE;
	pthread_mutex_lock(&cm_core.lock);
	switch (want) {
	case IBV_QPS_INIT:
		qp_attr->pkey_index = 0;
		qp_attr->port_num = 1;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (ud) {
			qp_attr->qkey = RDMA_UDP_QKEY;
			mask |= IBV_QP_QKEY;
		} else {
			qp_attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_ATOMIC;
			mask |= IBV_QP_ACCESS_FLAGS;
		}
		break;
	case IBV_QPS_RTR:
		if (ud)
			break;
		if (!c->have_remote) {
			ret = EINVAL;
			break;
		}
		/* an IB CM link's: what its REQ said (the interface's) */
		qp_attr->path_mtu =
			c->ib ? (enum ibv_mtu)c->ib_mtu : port_mtu();
		qp_attr->dest_qp_num = c->remote.qpn;
		qp_attr->rq_psn = c->remote.psn;
		cm_ud_ah_attr(c, &qp_attr->ah_attr);
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
		if (qpt == IBV_QPT_XRC_SEND || qpt == IBV_QPT_UC)
			break;
		qp_attr->max_dest_rd_atomic = c->resp_res;
		qp_attr->min_rnr_timer = CM_MIN_RNR_TIMER;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		break;
	case IBV_QPS_RTS:
		qp_attr->sq_psn = c->psn;
		mask |= IBV_QP_SQ_PSN;
		if (ud || qpt == IBV_QPT_UC)
			break;
		if (!c->have_remote) {
			ret = EINVAL;
			break;
		}
		qp_attr->timeout = CM_ACK_TIMEOUT;
		mask |= IBV_QP_TIMEOUT;
		if (qpt == IBV_QPT_XRC_RECV)
			break;
		qp_attr->retry_cnt = c->retry > 7 ? 7 : c->retry;
		qp_attr->rnr_retry = c->rnr_retry > 7 ? 7 : c->rnr_retry;
		qp_attr->max_rd_atomic = c->init_depth;
		mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	case IBV_QPS_ERR:
	case IBV_QPS_RESET:
		break;
	default:
		ret = EINVAL;
	}
	pthread_mutex_unlock(&cm_core.lock);
	if (ret)
		return cm_err(ret);
	*qp_attr_mask = mask;
	return 0;
}

static int move(struct cm_id *c, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = {.qp_state = s};
	int mask, ret;

	if (rdma_init_qp_attr(&c->id, &a, &mask))
		return -errno;
	ret = ibv_modify_qp(c->id.qp, &a, mask);
	return ret ? -ret : 0;
}

/* No lock: RTR then RTS from what the CM exchanged (0 or -errno). */
int cm_qp_to_rtr_rts(struct cm_id *c)
{
	int ret;

	if (!c->id.qp)
		return 0;
	ret = move(c, IBV_QPS_RTR);
	return ret ? ret : move(c, IBV_QPS_RTS);
}

void cm_qp_to_err(struct cm_id *c)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	if (c->id.qp)
		ibv_modify_qp(c->id.qp, &a, IBV_QP_STATE);
}

static void destroy_cqs(struct rdma_cm_id *id)
{
	/* an XRC_RECV id's receive CQ is its XRC SRQ's: it goes with it */
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq == id->recv_cq)
			id->send_cq = NULL;
		id->recv_cq = NULL;
	}
	if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel == id->recv_cq_channel)
			id->send_cq_channel = NULL;
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

/* CQs (each with its completion channel) for the sizes not zero. */
static int create_cqs(struct rdma_cm_id *id, uint32_t send, uint32_t recv)
{
	if (recv) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, (int)recv, id,
					    id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, (int)send, id,
					    id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	destroy_cqs(id);
	return -1;
}

/*
 * id->qp is the program's, and the CM thread's too: it names the QP in
 * the messages it makes and moves it to ERR on a REJ, under cm_core.lock.
 * So the QP is made known, and forgotten, under that lock: the thread
 * sees a QP that lives or none (a QP destroyed beside its DREP raced, and
 * the slot may hold another QP by then).
 */
static void set_qp(struct rdma_cm_id *id, struct ibv_qp *qp)
{
	pthread_mutex_lock(&cm_core.lock);
	id->qp = qp;
	pthread_mutex_unlock(&cm_core.lock);
}

static int init_qp(struct cm_id *c, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT};
	int mask, ret;

	if (rdma_init_qp_attr(&c->id, &a, &mask))
		return errno;
	ret = ibv_modify_qp(qp, &a, mask);
	if (ret || !cm_is_ud(c))
		return ret;
	a.qp_state = IBV_QPS_RTR;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	if (ret)
		return ret;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = c->psn;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

CM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id,
				struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *c = cm_id_of(id);
	struct ibv_qp *qp;
	int ret;

	if (!id || !attr || id->qp || !id->verbs)
		return cm_err(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd ? id->pd : cm_core.pd;
	} else if (attr->pd->context != id->verbs) {
		return cm_err(EINVAL);
	}
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return cm_err(EINVAL);
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		/* no PD, CQs or SRQ of its own (the verbs refuse an SRQ):
		 * the domain, where the id's XRC SRQ is */
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = cm_xrcd();
			if (!attr->xrcd)
				return -1;
			attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
		}
		qp = ibv_create_qp_ex(id->verbs, attr);
		if (!qp)
			return -1;
		ret = init_qp(c, qp);
		if (ret) {
			ibv_destroy_qp(qp);
			return cm_err(ret);
		}
		if (!id->pd)
			id->pd = attr->pd;
		set_qp(id, qp);
		return 0;
	}
	if (create_cqs(id,
		       attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
		       attr->recv_cq || id->recv_cq ? 0
						    : attr->cap.max_recv_wr))
		return -1;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		ret = errno;
		goto err_cqs;
	}
	if (!c->psn)
		c->psn = qp->qp_num & 0xffffff; /* rdma_connect picks anew */
	ret = init_qp(c, qp);
	if (ret)
		goto err_qp;
	id->pd = qp->pd;
	set_qp(id, qp);
	return 0;

err_qp:
	ibv_destroy_qp(qp);
err_cqs:
	destroy_cqs(id);
	return cm_err(ret ? ret : EINVAL);
}

CM_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex a;
	int ret;

	if (!id || !qp_init_attr)
		return cm_err(EINVAL);
	memset(&a, 0, sizeof(a));
	memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	if (!pd && !id->verbs)
		return cm_err(EINVAL);
	ret = rdma_create_qp_ex(id, &a);
	if (!ret)
		memcpy(qp_init_attr, &a, sizeof(*qp_init_attr));
	return ret;
}

CM_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	struct ibv_qp *qp = id->qp;
	/* an XRC_RECV QP made on an id of another type: same rule */
	bool xrc = qp && qp->qp_type == IBV_QPT_XRC_RECV;

	set_qp(id, NULL);
	ibv_destroy_qp(qp);
	if (!xrc || !id->srq)
		destroy_cqs(id);
}

CM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id,
				 struct ibv_srq_init_attr_ex *attr)
{
	bool made_cq = false;
	struct ibv_srq *srq;

	if (!id || !attr || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return cm_err(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : cm_core.pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (attr->srq_type == IBV_SRQT_XRC) {
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ||
		    !attr->xrcd) {
			attr->xrcd = cm_xrcd(); /* the XRC_RECV QPs' */
			if (!attr->xrcd)
				return -1;
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			/* rdma_get_recv_comp polls id->recv_cq */
			if (!id->recv_cq) {
				if (create_cqs(id, 0, attr->attr.max_wr))
					return -1;
				made_cq = true;
			}
			attr->cq = id->recv_cq;
		}
		attr->comp_mask |=
			IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		int e = errno;

		/* only what this call made: the id's QP may use the others */
		if (made_cq)
			destroy_cqs(id);
		return cm_err(e);
	}
	if (!id->pd)
		id->pd = attr->pd;
	id->srq = srq;
	return 0;
}

CM_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			      struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ax;
	int ret;

	if (!id || !attr)
		return cm_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, attr, sizeof(*attr));
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ax.srq_type =
		id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	ax.pd = pd;
	ret = rdma_create_srq_ex(id, &ax);
	memcpy(attr, &ax, sizeof(*attr));
	return ret;
}

CM_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
	destroy_cqs(id);
}

CM_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || !ece || ece->comp_mask)
		return cm_err(EINVAL);
	cm_id_of(id)->local_ece = *ece;
	return 0;
}

CM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cm_id *c = cm_id_of(id);

	if (!id || !ece)
		return cm_err(EINVAL);
	pthread_mutex_lock(&cm_core.lock);
	memset(ece, 0, sizeof(*ece));
	if (c->have_remote) {
		ece->vendor_id = c->remote.ece_vendor;
		ece->options = c->remote.ece_options;
	}
	pthread_mutex_unlock(&cm_core.lock);
	return 0;
}
