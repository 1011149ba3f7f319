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

static int copy_addr(struct sockaddr **to, socklen_t *to_len,
		     const struct sockaddr *from, socklen_t len)
{
	*to = malloc(len);
	if (!*to)
		return -ENOMEM;
	memcpy(*to, from, len);
	*to_len = len;
	return 0;
}

/* The resolver's hints for ours: the QP type says stream or datagram,
 * the port space TCP or UDP (rdma-core's mapping), neither: any. */
static void resolver_hints(struct addrinfo *h, const struct rdma_addrinfo *r)
{
	memset(h, 0, sizeof(*h));
	if (r->ai_flags & RAI_PASSIVE)
		h->ai_flags |= AI_PASSIVE;
	if (r->ai_flags & RAI_NUMERICHOST)
		h->ai_flags |= AI_NUMERICHOST;
	h->ai_family = r->ai_family;
	if (r->ai_qp_type == IBV_QPT_UD)
		h->ai_socktype = SOCK_DGRAM;
	else if (r->ai_qp_type == IBV_QPT_RC || r->ai_qp_type == IBV_QPT_UC ||
		 r->ai_qp_type == IBV_QPT_XRC_SEND ||
		 r->ai_qp_type == IBV_QPT_XRC_RECV)
		h->ai_socktype = SOCK_STREAM;
	if (r->ai_port_space == RDMA_PS_TCP)
		h->ai_protocol = IPPROTO_TCP;
	else if (r->ai_port_space == RDMA_PS_UDP ||
		 r->ai_port_space == RDMA_PS_IPOIB)
		h->ai_protocol = IPPROTO_UDP;
	else if (r->ai_port_space == RDMA_PS_IB && h->ai_socktype)
		h->ai_protocol = h->ai_socktype == SOCK_STREAM ? IPPROTO_TCP
							       : IPPROTO_UDP;
}

/* r from the resolver's first IP answer: the address is the source of a
 * passive one, else the destination; the QP type and port space are the
 * hints', else the answer's. */
static int from_ai(struct rdma_addrinfo *r, const struct addrinfo *ai,
		   const struct rdma_addrinfo *hints)
{
	r->ai_qp_type = hints->ai_qp_type;
	if (!r->ai_qp_type)
		r->ai_qp_type =
			ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD : IBV_QPT_RC;
	r->ai_port_space = hints->ai_port_space;
	if (!r->ai_port_space)
		r->ai_port_space = ai->ai_protocol == IPPROTO_UDP
					   ? RDMA_PS_UDP
					   : ps_of(r->ai_qp_type);
	r->ai_family = ai->ai_family;
	if (ai->ai_flags & AI_PASSIVE) {
		r->ai_flags = RAI_PASSIVE;
		return copy_addr(&r->ai_src_addr, &r->ai_src_len, ai->ai_addr,
				 ai->ai_addrlen);
	}
	return copy_addr(&r->ai_dst_addr, &r->ai_dst_len, ai->ai_addr,
			 ai->ai_addrlen);
}

/*
 * As rdma-core's: one answer (the resolver's first IPv4 or IPv6 one),
 * or, with neither node nor service, the hints' own addresses (how
 * libfabric's verbs provider asks for an endpoint to a peer whose
 * address it holds); a source address in the hints is the answer's if
 * the resolver gave none.  EINVAL only with no node, service and hints.
 */
CM_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints,
			       struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo none;
	struct rdma_addrinfo *r;
	struct addrinfo h, *ai = NULL, *i;
	int ret = 0;

	if (!res || (!node && !service && !hints))
		return cm_err(EINVAL);
	if (!hints)
		hints = &none;
	if (hints->ai_family == AF_IB)
		return cm_err(EAFNOSUPPORT);
	if (node || service) {
		resolver_hints(&h, hints);
		ret = getaddrinfo(node, service, &h, &ai);
		if (ret) {
			/* rdma-core returns getaddrinfo's code itself */
			if (ret != EAI_SYSTEM)
				errno = EADDRNOTAVAIL;
			return ret;
		}
		for (i = ai; i; i = i->ai_next)
			if (i->ai_family == AF_INET || i->ai_family == AF_INET6)
				break;
		if (!i) {
			freeaddrinfo(ai);
			errno = EADDRNOTAVAIL;
			return EAI_FAMILY;
		}
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		if (ai)
			freeaddrinfo(ai);
		return cm_err(ENOMEM);
	}
	if (ai) {
		ret = from_ai(r, i, hints);
		freeaddrinfo(ai);
	} else {
		r->ai_flags = hints->ai_flags;
		r->ai_family = hints->ai_family;
		r->ai_qp_type = hints->ai_qp_type;
		r->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len && hints->ai_dst_addr)
			ret = copy_addr(&r->ai_dst_addr, &r->ai_dst_len,
					hints->ai_dst_addr, hints->ai_dst_len);
	}
	if (!ret && !r->ai_src_len && hints->ai_src_len && hints->ai_src_addr)
		ret = copy_addr(&r->ai_src_addr, &r->ai_src_len,
				hints->ai_src_addr, hints->ai_src_len);
	if (ret) {
		rdma_freeaddrinfo(r);
		return cm_err(-ret);
	}
	*res = r;
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
