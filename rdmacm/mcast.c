// SPDX-License-Identifier: MIT
/*
 * Multicast joins: the group's GID is made from the IP multicast address
 * as RoCE does (IPv4: ::ffff:a.b.c.d, which softverbs' verbs also carry
 * to other hosts' members as that IPv4 group; IPv6: the address itself,
 * this host's processes only), the id's QP is attached with
 * ibv_attach_mcast, and MULTICAST_JOIN carries the group's address
 * vector (from the id's source GID), QPN 0xffffff and the qkey.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

static int mgid_of(const struct sockaddr *sa, union ibv_gid *mgid)
{
	memset(mgid, 0, sizeof(*mgid));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		if (!IN_MULTICAST(ntohl(in->sin_addr.s_addr)))
			return -EINVAL;
		/* RoCE's (the kernel's cma_iboe_set_mgid): the group's
		 * IPv4-mapped address, which the verbs carry to other hosts
		 * as that IPv4 group */
		mgid->raw[10] = 0xff;
		mgid->raw[11] = 0xff;
		memcpy(&mgid->raw[12], &in->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		if (!IN6_IS_ADDR_MULTICAST(&in6->sin6_addr))
			return -EINVAL;
		memcpy(mgid->raw, &in6->sin6_addr, 16);
		return 0;
	}
	return -EAFNOSUPPORT;
}

static bool same_addr(const struct sockaddr_storage *a,
		      const struct sockaddr *b)
{
	return !memcmp(a, b, cm_addr_len(b));
}

CM_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
				  void *context)
{
	struct cm_id *c = cm_id_of(id);
	struct cm_mcast *m;
	struct cm_event *e;
	union ibv_gid g;
	int idx, ret;

	if (!id || !addr || !id->verbs)
		return cm_err(EINVAL);
	m = calloc(1, sizeof(*m));
	if (!m)
		return cm_err(ENOMEM);
	ret = mgid_of(addr, &m->mgid);
	if (ret) {
		free(m);
		return cm_err(-ret);
	}
	memcpy(&m->addr, addr, cm_addr_len(addr));
	m->context = context;
	/* rdma-core attaches the QP when the join completes */
	if (id->qp) {
		ret = ibv_attach_mcast(id->qp, &m->mgid, 0xc000);
		if (ret) {
			free(m);
			return cm_err(ret);
		}
		m->attached = true;
	}
	pthread_mutex_lock(&cm_core.lock);
	m->next = c->mcasts;
	c->mcasts = m;
	e = cm_event_new(c, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
	if (e) {
		struct rdma_ud_param *u = &e->ev.param.ud;

		u->private_data = context;
		u->qp_num = 0xffffff;
		u->qkey = RDMA_UDP_QKEY;
		cm_addr_gid(&id->route.addr.src_addr, &g, &idx);
		u->ah_attr.is_global = 1;
		u->ah_attr.grh.dgid = m->mgid;
		u->ah_attr.grh.sgid_index = (uint8_t)idx;
		u->ah_attr.grh.hop_limit = 1;
		u->ah_attr.dlid = 0xc000;
		u->ah_attr.port_num = 1;
		cm_event_queue(c, e);
	}
	pthread_mutex_unlock(&cm_core.lock);
	return e ? cm_complete(c) : cm_err(ENOMEM);
}

CM_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
				     struct rdma_cm_join_mc_attr_ex *attr,
				     void *context)
{
	if (!attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return cm_err(EINVAL);
	if ((attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) &&
	    attr->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
	    attr->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return cm_err(EINVAL);
	return rdma_join_multicast(id, attr->addr, context);
}

/* Lock held or not held by the caller as noted: detaches and frees m. */
static void leave(struct cm_id *c, struct cm_mcast *m)
{
	if (m->attached && c->id.qp)
		ibv_detach_mcast(c->id.qp, &m->mgid, 0xc000);
	free(m);
}

CM_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *c = cm_id_of(id);
	struct cm_mcast **pp, *m = NULL;

	if (!id || !addr)
		return cm_err(EINVAL);
	pthread_mutex_lock(&cm_core.lock);
	for (pp = &c->mcasts; *pp; pp = &(*pp)->next) {
		if (same_addr(&(*pp)->addr, addr)) {
			m = *pp;
			*pp = m->next;
			break;
		}
	}
	pthread_mutex_unlock(&cm_core.lock);
	if (!m)
		return cm_err(EADDRNOTAVAIL);
	leave(c, m);
	return 0;
}

void cm_mcast_leave_all(struct cm_id *c)
{
	while (c->mcasts) {
		struct cm_mcast *m = c->mcasts;

		c->mcasts = m->next;
		leave(c, m);
	}
}
