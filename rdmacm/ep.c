// SPDX-License-Identifier: MIT
/*
 * The synchronous endpoint API of rdma_verbs.h's users: rdma_getaddrinfo
 * (names and ports through the system resolver, never a network lookup
 * of our own), rdma_create_ep / rdma_destroy_ep, and rdma_get_request
 * for listeners made without a channel.
 */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

static void free_one(struct rdma_addrinfo *r)
{
	free(r->ai_src_addr);
	free(r->ai_dst_addr);
	free(r->ai_src_canonname);
	free(r->ai_dst_canonname);
	free(r->ai_route);
	free(r->ai_connect);
	free(r);
}

CM_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *n = res->ai_next;

		free_one(res);
		res = n;
	}
}

static int ps_of(int qpt)
{
	return qpt == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
}

/* One rdma_addrinfo for one resolved address. */
static struct rdma_addrinfo *from_ai(const struct addrinfo *ai,
				     const struct rdma_addrinfo *hints)
{
	struct rdma_addrinfo *r = calloc(1, sizeof(*r));
	struct sockaddr *sa;

	if (!r)
		return NULL;
	sa = malloc(ai->ai_addrlen);
	if (!sa) {
		free(r);
		return NULL;
	}
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	r->ai_family = ai->ai_family;
	if (hints) {
		r->ai_flags = hints->ai_flags;
		r->ai_qp_type = hints->ai_qp_type;
		r->ai_port_space = hints->ai_port_space;
	}
	if (!r->ai_qp_type)
		r->ai_qp_type = r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD
								: IBV_QPT_RC;
	if (!r->ai_port_space)
		r->ai_port_space = ps_of(r->ai_qp_type);
	if (r->ai_flags & RAI_PASSIVE) {
		r->ai_src_addr = sa;
		r->ai_src_len = ai->ai_addrlen;
	} else {
		r->ai_dst_addr = sa;
		r->ai_dst_len = ai->ai_addrlen;
	}
	return r;
}

CM_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints,
			       struct rdma_addrinfo **res)
{
	struct addrinfo h = {0}, *ai, *i;
	struct rdma_addrinfo *head = NULL, **tail = &head, *r;
	int ret;

	if (!res || (!node && !service))
		return cm_err(EINVAL);
	if (hints) {
		if (hints->ai_family == AF_IB)
			return cm_err(EAFNOSUPPORT);
		h.ai_family = hints->ai_family;
		if (hints->ai_flags & RAI_PASSIVE)
			h.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			h.ai_flags |= AI_NUMERICHOST;
	}
	h.ai_socktype = SOCK_STREAM;
	ret = getaddrinfo(node, service, &h, &ai);
	if (ret) {
		/* rdma-core returns getaddrinfo's code itself */
		if (ret != EAI_SYSTEM)
			errno = EADDRNOTAVAIL;
		return ret;
	}
	for (i = ai; i; i = i->ai_next) {
		if (i->ai_family != AF_INET && i->ai_family != AF_INET6)
			continue;
		r = from_ai(i, hints);
		if (!r) {
			freeaddrinfo(ai);
			rdma_freeaddrinfo(head);
			return cm_err(ENOMEM);
		}
		*tail = r;
		tail = &r->ai_next;
	}
	freeaddrinfo(ai);
	if (!head) {
		errno = EADDRNOTAVAIL;
		return EAI_FAMILY;
	}
	*res = head;
	return 0;
}

CM_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
			     struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	struct cm_id *c;

	if (!id || !res)
		return cm_err(EINVAL);
	if (cm_id_create(NULL, &cm_id, NULL, res->ai_port_space,
			 res->ai_qp_type))
		return -1;
	c = cm_id_of(cm_id);
	if (res->ai_flags & RAI_PASSIVE) {
		if (rdma_bind_addr(cm_id, res->ai_src_addr))
			goto err;
		if (pd)
			cm_id->pd = pd;
		if (qp_init_attr) {
			c->ep_qp_attr = malloc(sizeof(*qp_init_attr));
			if (!c->ep_qp_attr) {
				errno = ENOMEM;
				goto err;
			}
			*c->ep_qp_attr = *qp_init_attr;
			c->ep_qp_attr->qp_type = res->ai_qp_type;
		}
		*id = cm_id;
		return 0;
	}
	if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr,
			      2000) ||
	    rdma_resolve_route(cm_id, 2000))
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = res->ai_qp_type;
		if (rdma_create_qp(cm_id, pd, qp_init_attr))
			goto err;
	}
	*id = cm_id;
	return 0;
err : {
	int e = errno;

	rdma_destroy_ep(cm_id);
	return cm_err(e);
}
}

CM_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

CM_EXPORT int rdma_get_request(struct rdma_cm_id *listen,
			       struct rdma_cm_id **id)
{
	struct cm_id *l = cm_id_of(listen);
	struct rdma_cm_event *ev;
	int ret;

	if (!listen || !id || !cm_channel_of(listen->channel)->sync)
		return cm_err(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (rdma_get_cm_event(listen->channel, &ev))
		return -1;
	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		ret = ECONNREFUSED;
		goto err;
	}
	if (ev->status) {
		ret = ev->status < 0 ? -ev->status : ev->status;
		goto err;
	}
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = EINVAL;
		goto err;
	}
	/* the new id is synchronous too, with its own channel, so that
	 * its events and the listener's next requests stay apart */
	{
		struct cm_channel *ch = cm_channel_create(true);

		if (!ch) {
			ret = ENOMEM;
			goto err;
		}
		pthread_mutex_lock(&cm_core.lock);
		ev->id->channel = &ch->ch;
		pthread_mutex_unlock(&cm_core.lock);
	}
	if (l->ep_qp_attr) {
		struct ibv_qp_init_attr a = *l->ep_qp_attr;

		if (rdma_create_qp(ev->id, listen->pd, &a)) {
			ret = errno;
			goto err;
		}
	}
	*id = ev->id;
	(*id)->event = ev;
	return 0;
err:
	listen->event = ev;
	return cm_err(ret);
}
