// SPDX-License-Identifier: MIT
/*
 * IP addresses to softverbs0: which addresses are this host's (the
 * interfaces of this network namespace, and loopback), the GID the
 * device's table holds for one (::ffff:a.b.c.d for an IPv4 address, the
 * address itself for an IPv6 one, the link-local GID for an address the
 * table does not have), and ports: an id's (address, port) is held
 * by a real socket of the kernel's TCP (or, for RDMA_PS_UDP, UDP, and a
 * TCP socket at the same number for SIDR's rendezvous) space, so port 0
 * picks a free port and two ids never share one.  Another
 * host's IPv4 or IPv6 address is reached if the kernel has a route to it
 * (the TCP rendezvous of link.c); its source is the route's, as on RoCE.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"

socklen_t cm_addr_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					 : sizeof(struct sockaddr_in);
}

bool cm_addr_is_any(const struct sockaddr *sa)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;

	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &any6,
		       sizeof(any6));
}

/* 127.0.0.0/8, ::1 or ::ffff:127.x.y.z: the host's loopback, which no
 * RDMA device has (a kernel's rdma_bind_addr finds no device there). */
bool cm_addr_is_loopback(const struct sockaddr *sa)
{
	const struct in6_addr *a6;

	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)
				      ->sin_addr.s_addr) >>
			24) == 127;
	if (sa->sa_family != AF_INET6)
		return false;
	a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(a6) ||
	       (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
}

bool cm_addr_is_multicast(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(
			((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	return sa->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_MULTICAST(
		       &((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* 1 if `sa` names an interface of this host (or loopback), else 0. */
int cm_addr_is_local(const struct sockaddr *sa)
{
	struct ifaddrs *ifa, *i;
	int found = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
			return 1;
	} else if (IN6_IS_ADDR_LOOPBACK(
			   &((const struct sockaddr_in6 *)sa)->sin6_addr)) {
		return 1;
	}
	if (cm_addr_is_any(sa))
		return 1; /* connecting to 0.0.0.0 is connecting to us */
	if (sa->sa_family == AF_INET
		    ? IN_MULTICAST(ntohl(((const struct sockaddr_in *)sa)
						 ->sin_addr.s_addr))
		    : IN6_IS_ADDR_MULTICAST(
			      &((const struct sockaddr_in6 *)sa)->sin6_addr))
		return 1; /* a group: its members are softverbs0's */
	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != sa->sa_family)
			continue;
		if (sa->sa_family == AF_INET)
			found = ((struct sockaddr_in *)i->ifa_addr)
					->sin_addr.s_addr ==
				((const struct sockaddr_in *)sa)
					->sin_addr.s_addr;
		else
			found = !memcmp(
				&((struct sockaddr_in6 *)i->ifa_addr)
					 ->sin6_addr,
				&((const struct sockaddr_in6 *)sa)->sin6_addr,
				16);
	}
	freeifaddrs(ifa);
	return found;
}

/* The GID softverbs0 answered at start-up for `sa` and its index: the
 * entry of the address (IPv4-mapped for an IPv4 address, the address
 * itself for an IPv6 one) if the table has it, else entry 0 (an address
 * added later, or a link-local IPv6 address, maps to entry 0 too). */
int cm_addr_gid(const struct sockaddr *sa, union ibv_gid *gid, int *index)
{
	union ibv_gid want;

	if (!cm_core.ngids)
		return -EIO;
	/* a wildcard names no entry (and must not match the table's unused,
	 * zero, entries) */
	if (sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6) &&
	    !cm_addr_is_any(sa)) {
		cm_addr_mapped_gid(sa, &want);
		for (int i = 1; i < cm_core.ngids; i++) {
			if (!memcmp(&cm_core.gids[i], &want, sizeof(want))) {
				*gid = cm_core.gids[i];
				*index = i;
				return 0;
			}
		}
	}
	*index = 0;
	*gid = cm_core.gids[0];
	return 0;
}

/* The GID of an IP address, as RoCE's: ::ffff:a.b.c.d for an IPv4
 * address, the address itself for an IPv6 one (v4-mapped included);
 * zeros for another family. */
void cm_addr_mapped_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET) {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12],
		       &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		       16);
	}
}

/*
 * The source address the kernel's routing picks toward IPv4 or IPv6
 * `dst` (a UDP socket's connect sends nothing): 0 and `src` (port 0, as
 * long as dst's family's sockaddr), or -errno (-ENETUNREACH: no route).
 */
int cm_addr_route_src(const struct sockaddr *dst, struct sockaddr *src)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd, ret = 0;

	if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6)
		return -EAFNOSUPPORT;
	fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, dst, cm_addr_len(dst)) ||
	    getsockname(fd, (struct sockaddr *)&ss, &len))
		ret = -errno;
	close(fd);
	if (ret)
		return ret;
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	memcpy(src, &ss, cm_addr_len((struct sockaddr *)&ss));
	return 0;
}

static uint16_t port_of(const struct sockaddr *sa)
{
	return ntohs(sa->sa_family == AF_INET
			     ? ((const struct sockaddr_in *)sa)->sin_port
			     : ((const struct sockaddr_in6 *)sa)->sin6_port);
}

/*
 * Lock held: bind(2) said EADDRINUSE for `sa`.  The TCP connections a
 * listener accepted (link.c's rendezvous) hold its port while they live
 * and in TIME_WAIT, where the kernel's rdma_cm port space has nothing:
 * the port is free again for an id once nobody listens on it.  They
 * carry SO_REUSEADDR (the listener's), so a bind with it passes them
 * and still fails against a listener or a plain bind; another id of
 * ours that holds the port is EADDRINUSE too.  true: `fd` is bound.
 */
static bool rebind_ok(struct cm_id *c, const struct sockaddr *sa, int fd)
{
	int one = 1;

	if (c->id.ps == RDMA_PS_UDP || !port_of(sa))
		goto in_use;
	for (struct cm_id *o = cm_core.ids; o; o = o->next) {
		const struct sockaddr *os = &o->id.route.addr.src_addr;

		if (o != c && o->port_fd >= 0 && o->id.ps != RDMA_PS_UDP &&
		    !o->listen && port_of(os) == port_of(sa))
			goto in_use;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, sa, cm_addr_len(sa)))
		goto in_use;
	return true;
in_use:
	errno = EADDRINUSE;
	return false;
}

/* Lock held.  A UD id holds a UDP port: other hosts' ids send their SIDR
 * REQ to its TCP socket at the same address and port number (link.c
 * listens on it), taken at bind (a port picked for 0 is one free in both
 * spaces) or at listen; a TCP user of an explicit number keeps SIDR from
 * crossing hosts (rdma_listen says so; this host is served). */
int cm_addr_sidr_socket(struct cm_id *c)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss), ilen = sizeof(int);
	int fd, one = 1, v6only = 0;

	if (c->sidr_fd >= 0)
		return 0;
	if (getsockname(c->port_fd, (struct sockaddr *)&ss, &len))
		return -errno;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6 &&
	    !getsockopt(c->port_fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &ilen))
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only,
			   sizeof(v6only));
	if (bind(fd, (struct sockaddr *)&ss, len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	c->sidr_fd = fd;
	return 0;
}

static int reserve(struct cm_id *c, const struct sockaddr *sa);

/*
 * Lock held.  Holds (address, port) of `sa` for c in the kernel's port
 * space and records the result (the port picked for 0) as c's source.
 * A UD id's port 0 is one whose number TCP has free too (SIDR's
 * rendezvous), tried a few times.
 */
int cm_addr_reserve(struct cm_id *c, const struct sockaddr *sa)
{
	int ret;

	for (int i = 0; i < 16; i++) {
		ret = reserve(c, sa);
		if (ret || c->id.ps != RDMA_PS_UDP)
			return ret;
		if (!cm_addr_sidr_socket(c) || port_of(sa))
			return 0; /* explicit: rdma_listen says it */
		close(c->port_fd);
		c->port_fd = -1;
	}
	return reserve(c, sa); /* the UDP port alone: this host's */
}

/* The address c's socket binds for `sa`: an IPv4 wildcard without
 * RDMA_OPTION_ID_AFONLY as the IPv6 wildcard of a dual-stack socket, so
 * IPv6 peers reach it too (the kernel's rdma_cm: a wildcard listener
 * that is not AFONLY takes requests of both families); `sa` otherwise.
 * true when it is the dual-stack one. */
static bool bind_as(struct cm_id *c, const struct sockaddr *sa,
		    struct sockaddr_in6 *any6)
{
	if (sa->sa_family != AF_INET || !cm_addr_is_any(sa) || c->afonly_int)
		return false;
	memset(any6, 0, sizeof(*any6));
	any6->sin6_family = AF_INET6;
	any6->sin6_port = ((const struct sockaddr_in *)sa)->sin_port;
	any6->sin6_addr = in6addr_any;
	return true;
}

static int reserve(struct cm_id *c, const struct sockaddr *sa)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 any6;
	socklen_t len = sizeof(ss);
	int type = c->id.ps == RDMA_PS_UDP ? SOCK_DGRAM : SOCK_STREAM;
	bool dual = bind_as(c, sa, &any6);
	int fd = -1, one = 1, off = 0;

	if (dual) {
		fd = socket(AF_INET6, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd >= 0 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off,
					  sizeof(off))) {
			close(fd);
			fd = -1;
		}
		if (fd >= 0)
			sa = (const struct sockaddr *)&any6;
		else
			dual = false; /* no IPv6 here: IPv4 alone */
	}
	if (fd < 0)
		fd = socket(sa->sa_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
	if (fd < 0)
		return -errno;
	if (c->reuseaddr)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sa->sa_family == AF_INET6 && !dual) /* rdma_cm's default: both */
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &c->afonly_int,
			   sizeof(int));
	if (bind(fd, sa, cm_addr_len(sa)) &&
	    (errno != EADDRINUSE || !rebind_ok(c, sa, fd))) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (dual) { /* the id's address stays the IPv4 wildcard it asked */
		struct sockaddr_in in = {
			.sin_family = AF_INET,
			.sin_port = ((struct sockaddr_in6 *)&ss)->sin6_port,
			.sin_addr.s_addr = htonl(INADDR_ANY)};

		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, &in, sizeof(in));
		len = sizeof(in);
	}
	c->port_fd = fd;
	memset(&c->id.route.addr.src_storage, 0, sizeof(ss));
	memcpy(&c->id.route.addr.src_storage, &ss, len);
	return 0;
}

void cm_addr_to_wire(const struct sockaddr *sa, struct cm_wire_addr *w)
{
	memset(w, 0, sizeof(*w));
	w->family = sa->sa_family;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		w->port = in->sin_port;
		memcpy(w->addr, &in->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		w->port = in6->sin6_port;
		w->scope_id = in6->sin6_scope_id;
		memcpy(w->addr, &in6->sin6_addr, 16);
	}
}

void cm_addr_from_wire(const struct cm_wire_addr *w,
		       struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (w->family == AF_INET) {
		struct sockaddr_in *in = (void *)ss;

		in->sin_family = AF_INET;
		in->sin_port = w->port;
		memcpy(&in->sin_addr, w->addr, 4);
	} else {
		struct sockaddr_in6 *in6 = (void *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = w->port;
		in6->sin6_scope_id = w->scope_id;
		memcpy(&in6->sin6_addr, w->addr, 16);
	}
}

/* Lock held: one path record, this host's port to itself. */
void cm_route_fill(struct cm_id *c)
{
	struct ibv_sa_path_rec *p = c->id.route.path_rec;
	int idx;

	if (!p)
		p = calloc(1, sizeof(*p));
	if (!p)
		return;
	cm_addr_gid(&c->id.route.addr.src_addr, &p->sgid, &idx);
	cm_addr_gid(&c->id.route.addr.dst_addr, &p->dgid, &idx);
	if (c->tcp || c->ib) /* another host: its address's GID */
		cm_addr_mapped_gid(&c->id.route.addr.dst_addr, &p->dgid);
	p->slid = p->dlid = htobe16(cm_core.lid);
	p->pkey = htobe16(0xffff);
	p->mtu = IBV_MTU_4096;
	p->mtu_selector = 2;
	p->reversible = 1;
	p->numb_path = 1;
	p->hop_limit = 64;
	p->rate = 3;
	p->packet_life_time = 14;
	c->id.route.path_rec = p;
	c->id.route.num_paths = 1;
	memcpy(&c->id.route.addr.addr.ibaddr.sgid, &p->sgid, 16);
	memcpy(&c->id.route.addr.addr.ibaddr.dgid, &p->dgid, 16);
	c->id.route.addr.addr.ibaddr.pkey = htobe16(0xffff);
}
