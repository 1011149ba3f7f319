// SPDX-License-Identifier: MIT
/*
 * The connection manager's objects: the device it opens once, ids
 * (create, destroy, bind, resolve, listen, options, migrate) and the
 * small getters.  Connection set-up is conn.c's, the CM's messages are
 * link.c's, addresses addr.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"
#include "env.h"  /* provider/lib/env.h: the SOFTVERBS_* table */
#include "util.h" /* provider/lib/util.h: container_of */

struct cm_core cm_core = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.epfd = -1,
	.wake_fd = -1,
	.spare_fd = -1,
	.next_serial = 1,
};
bool cm_debug;

const char *const cm_state_names[CM_NSTATES] = {
	[CM_IDLE] = "idle",
	[CM_BOUND] = "bound",
	[CM_ADDR_RESOLVED] = "addr-resolved",
	[CM_ROUTE_RESOLVED] = "route-resolved",
	[CM_LISTEN] = "listen",
	[CM_REQ_WAIT] = "req-wait",
	[CM_REQ_RCVD] = "req-rcvd",
	[CM_REQ_RETRY] = "req-retry",
	[CM_REQ_SENT] = "req-sent",
	[CM_REP_RCVD] = "rep-rcvd",
	[CM_REP_SENT] = "rep-sent",
	[CM_ESTABLISHED] = "established",
	[CM_DREQ_SENT] = "dreq-sent",
	[CM_DISCONNECTED] = "disconnected",
	[CM_UD_DONE] = "ud-done",
	[CM_FAILED] = "failed",
};

void cm_log(const char *fmt, ...)
{
	va_list ap;

	if (!cm_debug)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "softverbs rdmacm[%d]: ", getpid());
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* Opens softverbs0 once for the process (rdma_get_devices' contract:
 * devices stay open while the library is loaded). */
static int open_device(void)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	int n;

	list = ibv_get_device_list(&n);
	if (!list)
		return -errno;
	if (n < 1) {
		ibv_free_device_list(list);
		return -ENODEV;
	}
	cm_core.ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!cm_core.ctx)
		return -ENODEV;
	if (ibv_query_device(cm_core.ctx, &cm_core.dev_attr) ||
	    ibv_query_port(cm_core.ctx, 1, &pa))
		return -ENODEV;
	cm_core.gid_tbl_len = pa.gid_tbl_len;
	for (int i = 0; i < pa.gid_tbl_len && i < CM_GID_CACHE; i++) {
		if (ibv_query_gid(cm_core.ctx, 1, i, &cm_core.gids[i]))
			break;
		cm_core.ngids = i + 1;
	}
	cm_core.lid = pa.lid;
	cm_core.pd = ibv_alloc_pd(cm_core.ctx);
	return cm_core.pd ? 0 : -ENOMEM;
}

int cm_core_init(void)
{
	int ret = 0;

	pthread_mutex_lock(&cm_core.lock);
	if (!cm_core.ctx) {
		/* our copy of env.c's table: libibverbs says what is bad
		 * (and refuses to list softverbs0 if it must) */
		sv_env_quiet = true;
		cm_debug = sv_env_bool(SV_ENV_DEBUG);
		cm_core.force_tcp =
			sv_env_uint(SV_ENV_TRANSPORT) == SV_TRANSPORT_TCP;
		cm_core.roce =
			sv_env_uint(SV_ENV_TRANSPORT) == SV_TRANSPORT_ROCE;
		cm_core.rep_wait_ms =
			(unsigned int)sv_env_uint(SV_ENV_CM_TIMEOUT_MS);
		/* the secret read and OpenSSL's HMAC fetched now (tens of
		 * ms once), not in a connection's set-up */
		(void)cm_auth_needed();
		ret = open_device();
		if (ret && cm_core.ctx) {
			ibv_close_device(cm_core.ctx);
			cm_core.ctx = NULL;
		}
	}
	if (!ret)
		ret = cm_thread_start();
	pthread_mutex_unlock(&cm_core.lock);
	return ret;
}

struct cm_id *cm_id_find(uint64_t serial)
{
	struct cm_idtab_node *n = cm_idtab_find(&cm_core.by_serial, serial);

	return n ? container_of(n, struct cm_id, by_serial) : NULL;
}

bool cm_is_ud(const struct cm_id *c)
{
	return c->id.qp_type == IBV_QPT_UD;
}

/* Lock held: a new id on `channel`, linked in the list. */
static struct cm_id *id_new(struct rdma_event_channel *channel, void *context,
			    enum rdma_port_space ps, enum ibv_qp_type qpt)
{
	struct cm_id *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->id.channel = channel;
	c->id.context = context;
	c->id.ps = ps;
	c->id.qp_type = qpt;
	c->sock = -1;
	c->port_fd = -1;
	c->sidr_fd = -1;
	c->bound_fd = -1;
	c->ib_send_fd = -1;
	c->ib_listen_fd = -1;
	c->ib_pass_fd = -1;
	c->serial = cm_core.next_serial++;
	c->by_serial.key = c->serial;
	if (cm_idtab_insert(&cm_core.by_serial, &c->by_serial)) {
		free(c);
		return NULL;
	}
	c->resp_res = RDMA_MAX_RESP_RES;
	c->init_depth = RDMA_MAX_INIT_DEPTH;
	pthread_cond_init(&c->acked, NULL);
	c->next = cm_core.ids;
	if (c->next)
		c->next->prev = c;
	cm_core.ids = c;
	return c;
}

/* conn.c's way to make a passive side's id (lock held). */
struct cm_id *cm_id_new_child(struct cm_id *listener)
{
	struct cm_id *c = id_new(listener->id.channel, listener->id.context,
				 listener->id.ps, listener->id.qp_type);

	if (!c)
		return NULL;
	c->listen = listener;
	c->id.verbs = cm_core.ctx;
	c->id.port_num = 1;
	c->id.route.addr.src_storage = listener->id.route.addr.src_storage;
	return c;
}

void cm_id_free(struct cm_id *c)
{
	cm_idtab_remove(&cm_core.by_serial, &c->by_serial);
	cm_timed_disarm(&cm_core.timed, &c->timed);
	cm_ib_forget(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		cm_core.ids = c->next;
	if (c->next)
		c->next->prev = c->prev;
	cm_link_close(c);
	if (c->port_fd >= 0)
		close(c->port_fd);
	if (c->sidr_fd >= 0)
		close(c->sidr_fd);
	if (c->bound_fd >= 0)
		close(c->bound_fd);
	free(c->id.route.path_rec);
	free(c->ep_qp_attr);
	pthread_cond_destroy(&c->acked);
	free(c);
}

static enum ibv_qp_type ps_qp_type(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD
							: IBV_QPT_RC;
}

int cm_id_create(struct rdma_event_channel *channel, struct rdma_cm_id **id,
		 void *context, enum rdma_port_space ps, enum ibv_qp_type qpt)
{
	struct cm_channel *sync_ch = NULL;
	struct cm_id *c;
	int ret = cm_core_init();

	if (ret)
		return cm_err(-ret);
	if (!id || (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP &&
		    ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB))
		return cm_err(EINVAL);
	if (!channel) {
		sync_ch = cm_channel_create(true);
		if (!sync_ch)
			return cm_err(ENOMEM);
		channel = &sync_ch->ch;
	}
	pthread_mutex_lock(&cm_core.lock);
	c = id_new(channel, context, ps, qpt);
	pthread_mutex_unlock(&cm_core.lock);
	if (!c) {
		if (sync_ch)
			cm_channel_destroy(sync_ch);
		return cm_err(ENOMEM);
	}
	*id = &c->id;
	return 0;
}

CM_EXPORT int rdma_create_id(struct rdma_event_channel *channel,
			     struct rdma_cm_id **id, void *context,
			     enum rdma_port_space ps)
{
	return cm_id_create(channel, id, context, ps, ps_qp_type(ps));
}

/* Lock held: a listener takes the children nobody was told about. */
static void drop_unreported_children(struct cm_id *l)
{
	struct cm_id *c, *n;

	for (c = cm_core.ids; c; c = n) {
		n = c->next;
		if (c->listen != l)
			continue;
		if (c->state == CM_REQ_WAIT ||
		    (c->state == CM_REQ_RCVD && c->queued && !c->unacked)) {
			cm_channel_drop_events(c);
			cm_id_free(c);
		} else {
			c->listen = NULL;
		}
	}
}

CM_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_id_of(id);
	struct cm_channel *ch;

	if (!id)
		return cm_err(EINVAL);
	ch = cm_channel_of(id->channel);
	if (ch->sync && id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	pthread_mutex_lock(&cm_core.lock);
	c->destroying = true;
	cm_mcast_leave_all(c);
	/* tell the peer as the kernel would (a DREQ or a REJ): our link's
	 * close is what it sees */
	cm_link_close(c);
	if (c->state == CM_LISTEN)
		drop_unreported_children(c);
	if (c->listen && c->state == CM_REQ_RCVD)
		c->listen->pending--;
	cm_channel_drop_events(c);
	cm_wait_acked(c);
	cm_id_free(c);
	pthread_mutex_unlock(&cm_core.lock);
	if (ch->sync)
		cm_channel_destroy(ch);
	return 0;
}

/* `mark`: an explicit bind, which connecting ids may wait for (a
 * program that binds, tells its peer the port, then listens). */
static int bind_addr(struct rdma_cm_id *id, struct sockaddr *addr, bool mark)
{
	struct cm_id *c = cm_id_of(id);
	int ret;

	if (!id || !addr ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return cm_err(addr && addr->sa_family == AF_IB ? EAFNOSUPPORT
							       : EINVAL);
	pthread_mutex_lock(&cm_core.lock);
	if (c->state != CM_IDLE) {
		pthread_mutex_unlock(&cm_core.lock);
		return cm_err(EINVAL);
	}
	ret = cm_addr_reserve(c, addr);
	if (!ret && mark) {
		ret = cm_link_mark_bound(c);
		if (ret) {
			close(c->port_fd);
			c->port_fd = -1;
			if (c->sidr_fd >= 0)
				close(c->sidr_fd);
			c->sidr_fd = -1;
		}
	}
	if (!ret)
		c->state = CM_BOUND;
	pthread_mutex_unlock(&cm_core.lock);
	if (ret)
		return cm_err(-ret);
	/* a specific address binds the device; a wildcard does too here,
	 * softverbs0 being the only one.  A loopback address names no
	 * device (the kernel's bind finds none: ENODEV): the id is bound,
	 * with no device till rdma_resolve_addr or a connection request
	 * gives it softverbs0.  libfabric's verbs provider asks
	 * rdma_bind_addr of "localhost" whether the device has it; were it
	 * yes, it would tell peers on other hosts 127.0.0.1 as its address
	 * (Open MPI's ofi MTL across hosts, tests/netns/netns_mpi.sh). */
	id->verbs = cm_addr_is_loopback(addr) ? NULL : cm_core.ctx;
	id->port_num = id->verbs ? 1 : 0;
	return 0;
}

CM_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return bind_addr(id, addr, true);
}

/* The wildcard source for `dst`'s family. */
static void any_for(const struct sockaddr *dst, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = dst->sa_family;
}

/* The wildcard source *src becomes address `a` (its port kept). */
static void set_src(struct sockaddr_storage *src, const struct sockaddr *a)
{
	uint16_t port = src->ss_family == AF_INET
				? ((struct sockaddr_in *)src)->sin_port
				: ((struct sockaddr_in6 *)src)->sin6_port;

	memset(src, 0, sizeof(*src));
	memcpy(src, a, cm_addr_len(a));
	if (src->ss_family == AF_INET)
		((struct sockaddr_in *)src)->sin_port = port;
	else
		((struct sockaddr_in6 *)src)->sin6_port = port;
}

/*
 * Lock held: where c's destination is.  An address of this host is
 * reached over the Unix link (or TCP when SOFTVERBS_TRANSPORT=tcp says
 * so); another host's IPv4 or IPv6 address the kernel routes to over the
 * TCP rendezvous, from the route's source address (the GID of the
 * interface the route uses, as RoCE's rdma_resolve_addr); else -errno.
 * Another host's link-local IPv6 address is refused: a GID carries no
 * scope, so the verbs cannot reach it (-EHOSTUNREACH: ADDR_ERROR).  UD ids
 * too: a UD listener also listens on TCP at its port number for the
 * SIDR REQ (link.c), and the data goes over the verbs' UDP path.
 */
static int resolve_dst(struct cm_id *c, const struct sockaddr *dst)
{
	struct sockaddr_storage *src = &c->id.route.addr.src_storage;
	char host[INET6_ADDRSTRLEN] = "?";
	struct sockaddr_storage route;
	int ret;

	if (cm_addr_is_local(dst)) {
		c->tcp = cm_core.force_tcp;
		/* the kernel's route to an address of ours leaves from that
		 * address: it is the source (and its GID the id's) */
		if (cm_addr_is_any((struct sockaddr *)src) &&
		    src->ss_family == dst->sa_family && !cm_addr_is_any(dst) &&
		    !cm_addr_is_multicast(dst))
			set_src(src, dst);
		return 0;
	}
	if (dst->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_LINKLOCAL(
		    &((const struct sockaddr_in6 *)dst)->sin6_addr)) {
		inet_ntop(AF_INET6,
			  &((const struct sockaddr_in6 *)dst)->sin6_addr, host,
			  sizeof(host));
		fprintf(stderr,
			"softverbs rdmacm: %s is another host's link-local "
			"address, which a GID cannot name: use its global "
			"IPv6 or IPv4 address: ADDR_ERROR\n",
			host);
		return -EHOSTUNREACH;
	}
	ret = cm_addr_route_src(dst, (struct sockaddr *)&route);
	if (ret)
		return ret;
	if (cm_addr_is_any((struct sockaddr *)src))
		set_src(src, (struct sockaddr *)&route);
	/* SOFTVERBS_TRANSPORT=roce: an RC or UC connection to another
	 * host's IPv4 address speaks the IB CM's MADs (ib_link.c), a UD
	 * id's SIDR too (ib_sidr.c) */
	c->ib = cm_core.roce && dst->sa_family == AF_INET &&
		(cm_is_ud(c) ? c->id.ps == RDMA_PS_UDP
			     : c->id.ps == RDMA_PS_TCP);
	c->tcp = !c->ib;
	return 0;
}

CM_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id,
				struct sockaddr *src_addr,
				struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *c = cm_id_of(id);
	struct sockaddr_storage any;
	struct cm_event *e;
	int ret = 0, status;

	if (!id || !dst_addr ||
	    (dst_addr->sa_family != AF_INET && dst_addr->sa_family != AF_INET6))
		return cm_err(EINVAL);
	if (c->state == CM_IDLE) {
		if (!src_addr) {
			any_for(dst_addr, &any);
			src_addr = (struct sockaddr *)&any;
		}
		if (bind_addr(id, src_addr, false))
			return -1;
	}
	pthread_mutex_lock(&cm_core.lock);
	if (c->state != CM_BOUND) {
		pthread_mutex_unlock(&cm_core.lock);
		return cm_err(EINVAL);
	}
	memcpy(&id->route.addr.dst_storage, dst_addr, cm_addr_len(dst_addr));
	c->timeout_ms = timeout_ms;
	status = resolve_dst(c, dst_addr);
	e = cm_event_new(c,
			 status ? RDMA_CM_EVENT_ADDR_ERROR
				: RDMA_CM_EVENT_ADDR_RESOLVED,
			 status);
	if (!e) {
		ret = ENOMEM;
	} else {
		if (!status) {
			c->state = CM_ADDR_RESOLVED;
			id->verbs = cm_core.ctx; /* (a loopback source's) */
			id->port_num = 1;
		}
		cm_event_queue(c, e);
	}
	pthread_mutex_unlock(&cm_core.lock);
	if (ret)
		return cm_err(ret);
	return cm_complete(c);
}

CM_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *c = cm_id_of(id);
	struct cm_event *e;

	if (!id)
		return cm_err(EINVAL);
	pthread_mutex_lock(&cm_core.lock);
	if (c->state != CM_ADDR_RESOLVED) {
		pthread_mutex_unlock(&cm_core.lock);
		return cm_err(EINVAL);
	}
	cm_route_fill(c);
	e = cm_event_new(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	if (e) {
		c->state = CM_ROUTE_RESOLVED;
		cm_event_queue(c, e);
	}
	pthread_mutex_unlock(&cm_core.lock);
	if (!e)
		return cm_err(ENOMEM);
	(void)timeout_ms;
	return cm_complete(c);
}

CM_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *c = cm_id_of(id);
	int ret;

	if (!id)
		return cm_err(EINVAL);
	pthread_mutex_lock(&cm_core.lock);
	if (c->state != CM_BOUND) {
		pthread_mutex_unlock(&cm_core.lock);
		return cm_err(EINVAL);
	}
	c->backlog = backlog > 0 ? backlog : 1024;
	ret = cm_link_listen(c, c->backlog);
	if (!ret)
		c->state = CM_LISTEN;
	pthread_mutex_unlock(&cm_core.lock);
	return ret ? cm_err(-ret) : 0;
}

static __be16 port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

CM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return port_of(&id->route.addr.src_addr);
}

CM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return port_of(&id->route.addr.dst_addr);
}

CM_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;
	int ret = cm_core_init();

	if (ret) {
		if (num_devices)
			*num_devices = 0;
		errno = -ret;
		return NULL;
	}
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = cm_core.ctx;
	if (num_devices)
		*num_devices = 1;
	return list;
}

CM_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

CM_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] =
			"RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] =
			"RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] =
			"RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned int)event < sizeof(names) / sizeof(names[0]) &&
	    names[event])
		return names[event];
	return "UNKNOWN EVENT";
}

CM_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
			      void *optval, size_t optlen)
{
	struct cm_id *c = cm_id_of(id);

	if (!id || !optval)
		return cm_err(EINVAL);
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			if (optlen != sizeof(uint8_t))
				return cm_err(EINVAL);
			c->tos = *(uint8_t *)optval;
			return 0;
		case RDMA_OPTION_ID_REUSEADDR:
		case RDMA_OPTION_ID_AFONLY:
			if (optlen != sizeof(int))
				return cm_err(EINVAL);
			if (optname == RDMA_OPTION_ID_REUSEADDR)
				c->reuseaddr = !!*(int *)optval;
			else
				c->afonly_int = !!*(int *)optval;
			return 0;
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			return optlen == sizeof(uint8_t) ? 0 : cm_err(EINVAL);
		}
	} else if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
		/* a path given by the program: our route is the host's */
		return optlen >= sizeof(struct ibv_path_data) ? 0
							      : cm_err(EINVAL);
	}
	return cm_err(ENOSYS);
}

CM_EXPORT int rdma_migrate_id(struct rdma_cm_id *id,
			      struct rdma_event_channel *channel)
{
	struct cm_id *c = cm_id_of(id);
	struct cm_channel *old, *sync_ch = NULL;
	struct cm_event *moved = NULL, **tail = &moved, **pp, *e;

	if (!id)
		return cm_err(EINVAL);
	if (!channel) {
		sync_ch = cm_channel_create(true);
		if (!sync_ch)
			return cm_err(ENOMEM);
		channel = &sync_ch->ch;
	}
	old = cm_channel_of(id->channel);
	if (old->sync && id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	pthread_mutex_lock(&cm_core.lock);
	/* the id's queued events follow it, in order */
	for (pp = &old->head; (e = *pp);) {
		if (e->owner == c) {
			*pp = e->next;
			e->next = NULL;
			*tail = e;
			tail = &e->next;
			c->queued--;
			continue;
		}
		pp = &e->next;
	}
	old->tail = NULL;
	for (e = old->head; e; e = e->next)
		old->tail = e;
	cm_channel_drop_events(c); /* re-arms the old fd */
	cm_wait_acked(c);
	id->channel = channel;
	while ((e = moved)) {
		moved = e->next;
		cm_event_queue(c, e);
	}
	pthread_mutex_unlock(&cm_core.lock);
	if (old->sync)
		cm_channel_destroy(old);
	return 0;
}
