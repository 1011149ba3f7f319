// SPDX-License-Identifier: MIT
/*
 * The CM's link between processes.  On one host: SOCK_SEQPACKET Unix
 * sockets in the abstract namespace (one per network namespace, nothing
 * on disk), a listener named after (port space, address, port), one
 * connection per connecting id; SO_PEERCRED is checked on both sides
 * (the same uid, or nothing is read).  To another host (c->tcp, chosen
 * by rdma_resolve_addr; or forced by SOFTVERBS_TRANSPORT=tcp): a TCP
 * connection to (address, port), which the listener id's own TCP socket
 * (addr.c's port reservation, in LISTEN) accepts; the same 300-byte
 * records framed on the stream (exactly 300 bytes per message, partial
 * reads kept in the id).  TCP has no peer identity: whoever reaches the
 * port may connect (as with the kernel's rdma_cm over RoCE); every
 * record is checked as on one host, the addresses a REQ claims are
 * replaced by the socket's own, and a REQ's or REP's GID must be the
 * GID of the address the bytes came from (IPv4-mapped, or the IPv6
 * address itself; else the link is dropped),
 * so a peer cannot point our QP at a third host.  A listener holds at
 * most CM_HALF_OPEN accepted links waiting for their first record, each
 * for CM_TCP_REQ_WAIT_MS, the oldest dropped first: a flood of silent
 * callers cannot take the program's fds.  Every socket is
 * non-blocking and one thread per process (epoll) reads them, finishes
 * TCP connects and drives conn.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cm.h"
#include "peer.h" /* provider/lib/peer.h: who is at the other end */

#define CM_LINK_BACKLOG 4096
/* an accepted stream's REQ must come within this, or it is dropped;
 * a TCP connect waits at least CM_TCP_CONNECT_MS (rdma_resolve_addr's
 * timeout if longer) before UNREACHABLE */
#define CM_TCP_REQ_WAIT_MS 3000
#define CM_TCP_CONNECT_MS  2000
/* an active side whose link the listener closed unanswered dials again
 * (redial) at most this often, within its first connect's deadline */
#define CM_TCP_REDIALS 3
/* epoll data: an id's serial; with this bit, a listener's TCP socket */
#define CM_TAG_TCP_LISTEN (1ULL << 63)

/* "\0softverbs-cm<kind>/<ps>/<address or any>/<port>"; returns its
 * length.  kind "" is a listener, "-bound" an id's explicit bind. */
static socklen_t name_of(struct sockaddr_un *un, const char *kind,
			 enum rdma_port_space ps, const struct sockaddr *sa,
			 bool any)
{
	char host[INET6_ADDRSTRLEN] = "any";
	struct in6_addr a6;
	uint16_t port;
	int n;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		port = ntohs(in->sin_port);
		if (!any && in->sin_addr.s_addr != htonl(INADDR_ANY))
			inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
	} else {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		port = ntohs(in6->sin6_port);
		a6 = in6->sin6_addr;
		if (!any && !IN6_IS_ADDR_UNSPECIFIED(&a6)) {
			if (IN6_IS_ADDR_V4MAPPED(&a6))
				inet_ntop(AF_INET, &a6.s6_addr[12], host,
					  sizeof(host));
			else
				inet_ntop(AF_INET6, &a6, host, sizeof(host));
		}
	}
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	n = snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1,
		     "softverbs-cm%s/%d/%s/%u", kind, (int)ps, host, port);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

static socklen_t link_name(struct sockaddr_un *un, enum rdma_port_space ps,
			   const struct sockaddr *sa, bool any)
{
	return name_of(un, "", ps, sa, any);
}

uint64_t cm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Lock held.  An explicitly bound id holds a datagram socket named after
 * its address: a connect that finds no listener but this name knows the
 * port is taken by an id that may listen in a moment (rdma_bind_addr,
 * port sent to the peer, then rdma_listen: qperf -cm1), and retries.
 */
int cm_link_mark_bound(struct cm_id *c)
{
	struct sockaddr_un un;
	socklen_t len = name_of(&un, "-bound", c->id.ps,
				&c->id.route.addr.src_addr, false);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&un, len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	c->bound_fd = fd;
	return 0;
}

/* Lock held: is c's destination (or its port's wildcard) bound by an id? */
bool cm_link_dst_bound(struct cm_id *c)
{
	struct sockaddr_un un;
	bool bound = false;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return false;
	for (int any = 0; any < 2 && !bound; any++) {
		socklen_t len = name_of(&un, "-bound", c->id.ps,
					&c->id.route.addr.dst_addr, any);

		bound = !connect(fd, (struct sockaddr *)&un, len);
	}
	close(fd);
	return bound;
}

void cm_link_kick(void)
{
	uint64_t one = 1;

	if (write(cm_core.wake_fd, &one, sizeof(one)) != sizeof(one))
		cm_log("CM thread wake-up failed (%d)\n", errno);
}

/* The peer must be us (the same uid): SO_PEERCRED, not a claim. */
static int peer_ok(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return -errno;
	if (cr.uid != geteuid()) {
		cm_log("CM peer pid %d uid %u is not our uid %u: refused\n",
		       cr.pid, cr.uid, geteuid());
		return -EACCES;
	}
	return 0;
}

static int watch(struct cm_id *c)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
				 .data.u64 = c->serial};

	return epoll_ctl(cm_core.epfd, EPOLL_CTL_ADD, c->sock, &ev) ? -errno
								    : 0;
}

/* TCP options of every CM stream: no Nagle (one record each way at a
 * time), and keep-alives, so a peer host that vanishes after
 * ESTABLISHED is DISCONNECTED within ~11 s. */
static void tcp_opts(int fd)
{
	int one = 1, idle = 5, intvl = 2, cnt = 3;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* The TCP socket a listener takes the rendezvous on: its reserved port's,
 * or a UD listener's TCP socket at its UDP port's number. */
static int rdv_fd(const struct cm_id *c)
{
	return c->sidr_fd >= 0 ? c->sidr_fd : c->port_fd;
}

/* The listener's TCP socket (its reserved port) accepts the rendezvous
 * of ids on other hosts. */
static int tcp_listen(struct cm_id *c)
{
	struct epoll_event ev = {.events = EPOLLIN,
				 .data.u64 = c->serial | CM_TAG_TCP_LISTEN};

	int one = 1;

	/* the connections it accepts hold its port (local side) while they
	 * live and in TIME_WAIT: with SO_REUSEADDR they inherit, they do not
	 * keep the port from the program's next listener (addr.c) */
	if (setsockopt(rdv_fd(c), SOL_SOCKET, SO_REUSEADDR, &one,
		       sizeof(one)) ||
	    listen(rdv_fd(c), CM_LINK_BACKLOG) ||
	    epoll_ctl(cm_core.epfd, EPOLL_CTL_ADD, rdv_fd(c), &ev))
		return -errno;
	c->port_watched = true;
	return 0;
}

/* Lock held: c's TCP connection to its destination, maybe still in
 * progress (c->connecting: the CM thread finishes it). */
static int tcp_connect(struct cm_id *c)
{
	const struct sockaddr *dst = &c->id.route.addr.dst_addr;
	struct sockaddr_storage src = c->id.route.addr.src_storage;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP,
				 .data.u64 = c->serial};
	uint64_t wait = c->timeout_ms > CM_TCP_CONNECT_MS ? c->timeout_ms
							  : CM_TCP_CONNECT_MS;
	int fd, ret;

	fd = socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	tcp_opts(fd);
	/* from the id's address, so the peer sees the address of our GID
	 * (port 0: the id's own socket holds its port) */
	if (src.ss_family == dst->sa_family &&
	    !cm_addr_is_any((struct sockaddr *)&src)) {
		if (src.ss_family == AF_INET)
			((struct sockaddr_in *)&src)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&src)->sin6_port = 0;
		if (bind(fd, (struct sockaddr *)&src,
			 cm_addr_len((struct sockaddr *)&src)))
			cm_log("id %p: TCP link's bind: %d\n", (void *)c,
			       errno);
	}
	if (connect(fd, dst, cm_addr_len(dst)) && errno != EINPROGRESS) {
		ret = -errno;
		close(fd);
		return ret;
	}
	c->sock = fd;
	c->connecting = true; /* even if done: the first EPOLLOUT says so */
	c->rlen = 0;
	c->heard = false;
	c->deadline_ms = cm_now_ms() + wait;
	if (!c->redials)
		c->dial_until_ms = c->deadline_ms;
	else if (c->deadline_ms > c->dial_until_ms)
		c->deadline_ms = c->dial_until_ms;
	if (epoll_ctl(cm_core.epfd, EPOLL_CTL_ADD, fd, &ev)) {
		ret = -errno;
		cm_link_close(c);
		return ret;
	}
	cm_conn_timed(c);
	cm_link_kick(); /* the CM thread's timeout sees the deadline */
	return 0;
}

int cm_link_listen(struct cm_id *c, int backlog)
{
	struct sockaddr_un un;
	socklen_t len =
		link_name(&un, c->id.ps, &c->id.route.addr.src_addr, false);
	int fd, ret;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&un, len) ||
	    listen(fd, CM_LINK_BACKLOG)) {
		ret = errno == EADDRINUSE ? -EADDRINUSE : -errno;
		close(fd);
		return ret;
	}
	(void)backlog; /* conn.c counts the program's backlog */
	c->sock = fd;
	ret = watch(c);
	/* last, once connects can succeed: the IP port listens too, and
	 * accepts the TCP rendezvous of other hosts' ids */
	if (!ret && c->port_fd >= 0) {
		int err = c->id.ps == RDMA_PS_UDP ? cm_addr_sidr_socket(c) : 0;

		if (err)
			fprintf(stderr,
				"softverbs rdmacm: UD listener: TCP port %u: "
				"%s: SIDR from other hosts cannot reach it\n",
				ntohs(rdma_get_src_port(&c->id)),
				strerror(-err));
		else
			ret = tcp_listen(c);
	}
	if (!ret && cm_core.roce &&
	    (c->id.ps == RDMA_PS_TCP || c->id.ps == RDMA_PS_UDP) &&
	    c->id.route.addr.src_addr.sa_family == AF_INET)
		ret = cm_ib_listen(c); /* the IB CM's (SIDR) REQs too */
	if (ret)
		cm_link_close(c);
	return ret;
}

/* Lock held.  Connects c to the listener of its destination (the exact
 * address, then the wildcard of its port); -ECONNREFUSED when nobody
 * listens there. */
int cm_link_connect(struct cm_id *c)
{
	struct sockaddr_un un;
	int fd, ret = -ECONNREFUSED;

	if (c->tcp)
		return tcp_connect(c);
	if (c->ib)
		return cm_ib_connect(c);
	for (int any = 0; any < 2 && ret == -ECONNREFUSED; any++) {
		socklen_t len = link_name(&un, c->id.ps,
					  &c->id.route.addr.dst_addr, any);

		fd = socket(AF_UNIX,
			    SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&un, len)) {
			ret = errno == ENOENT ? -ECONNREFUSED : -errno;
			/* EAGAIN: its queue is full (a flood): say busy */
			close(fd);
			continue;
		}
		ret = peer_ok(fd);
		if (ret) {
			close(fd);
			return ret;
		}
	}
	if (ret)
		return ret;
	c->sock = fd;
	ret = watch(c);
	if (ret)
		cm_link_close(c);
	return ret;
}

static bool redial(struct cm_id *c);

int cm_link_send(struct cm_id *c, const struct cm_msg *m)
{
	ssize_t n;

	if (c->sock < 0)
		return -ENOTCONN;
	if (c->ib)
		return cm_ib_send(c, m);
	/* never block on a peer: a peer that does not read its few CM
	 * messages is a dead one */
	n = send(c->sock, m, sizeof(*m), MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n == (ssize_t)sizeof(*m))
		return 0;
	/* our REQ on a link the listener reset unanswered: it goes on the
	 * next (redial) */
	if (n < 0 && (errno == ECONNRESET || errno == EPIPE) && m == &c->req &&
	    redial(c))
		return 0;
	if (n > 0) /* TCP: half a record breaks the framing: end it */
		shutdown(c->sock, SHUT_RDWR);
	return n < 0 ? -errno : -EPIPE;
}

/* Lock held: c's link is the accepted socket `fd`. */
int cm_link_adopt(struct cm_id *c, int fd)
{
	c->sock = fd;
	return watch(c);
}

/*
 * Half-open links: a listener's accepted connections whose first record
 * has not come.  At most CM_HALF_OPEN wait per listener, each until its
 * deadline; one more drops the oldest, so a flood of silent callers costs
 * the listener CM_HALF_OPEN fds, never the program's own, and a real
 * caller (whose REQ follows its connect at once) still gets through.  Not
 * the listen backlog (conn.c counts it for the REQs that came): rping's
 * 3 would let a flood push a real caller out before its REQ is read.  A
 * pass takes at most CM_ACCEPT_BATCH, so a stream accepted in one pass
 * is read (epoll) before CM_HALF_OPEN newer ones can push it out.
 */
#define CM_HALF_OPEN	64
#define CM_ACCEPT_BATCH (CM_HALF_OPEN / 2)

/* Lock held: c's first record came, or c is closing. */
static void half_open_leave(struct cm_id *c)
{
	struct cm_id *l = c->half_of;

	if (!l)
		return;
	if (c->half_prev)
		c->half_prev->half_next = c->half_next;
	else
		l->half_head = c->half_next;
	if (c->half_next)
		c->half_next->half_prev = c->half_prev;
	else
		l->half_tail = c->half_prev;
	c->half_of = c->half_next = c->half_prev = NULL;
	l->nhalf--;
}

/* Lock held: drops listener l's oldest silent caller; false if none. */
static bool half_open_drop_oldest(struct cm_id *l)
{
	struct cm_id *o = l->half_head;

	if (!o)
		return false;
	cm_log("listener %p: %u callers silent: dropping the oldest (%p)\n",
	       (void *)l, l->nhalf, (void *)o);
	cm_id_free(o); /* unreported: nobody holds it; closes its link */
	return true;
}

/* Lock held: c (just accepted by l) waits for its first record until
 * its deadline, the newest of l's half-open links. */
static void half_open_join(struct cm_id *l, struct cm_id *c, uint64_t wait_ms)
{
	while (l->nhalf >= CM_HALF_OPEN && half_open_drop_oldest(l))
		;
	c->deadline_ms = cm_now_ms() + wait_ms;
	cm_conn_timed(c);
	c->half_of = l;
	c->half_prev = l->half_tail;
	c->half_next = NULL;
	if (l->half_tail)
		l->half_tail->half_next = c;
	else
		l->half_head = c;
	l->half_tail = c;
	l->nhalf++;
}

/* Lock held: listener l's links leave its queue (l is closing); their
 * deadlines still end them. */
static void half_open_forget(struct cm_id *l)
{
	while (l->half_head)
		half_open_leave(l->half_head);
}

void cm_link_close(struct cm_id *c)
{
	half_open_leave(c);
	half_open_forget(c);
	c->auth = CM_AUTH_OFF;
	if (c->port_watched) {
		epoll_ctl(cm_core.epfd, EPOLL_CTL_DEL, rdv_fd(c), NULL);
		c->port_watched = false;
	}
	c->connecting = false;
	c->rlen = 0;
	cm_ib_close(c);
	if (c->sock < 0)
		return;
	epoll_ctl(cm_core.epfd, EPOLL_CTL_DEL, c->sock, NULL);
	close(c->sock);
	c->sock = -1;
}

/*
 * Lock held: one connection waiting on lfd (listener l's), or -1.  Out
 * of fds (the program's own: ours are at most CM_HALF_OPEN), l's oldest
 * silent caller makes room, or else the spare fd takes the caller only
 * to close it: it hears no at once, and its connection does not sit in
 * the kernel's queue waking the CM thread for ever.
 */
static int accept_one(struct cm_id *l, int lfd)
{
	if (cm_core.spare_fd < 0) /* given up, and not taken back then */
		cm_core.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0)
			return fd;
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE) {
			if (half_open_drop_oldest(l))
				continue;
			if (cm_core.spare_fd >= 0) {
				close(cm_core.spare_fd);
				fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
				if (fd >= 0)
					close(fd);
				cm_core.spare_fd =
					open("/dev/null", O_RDONLY | O_CLOEXEC);
				if (fd >= 0 && cm_core.spare_fd >= 0)
					continue;
			}
			cm_log("accept on listener %p: out of fds\n",
			       (void *)l);
			return -1;
		}
		if (errno != EAGAIN)
			cm_log("accept on listener %p: %d\n", (void *)l, errno);
		return -1;
	}
}

static void read_all(struct cm_id *c);

/* Lock held: takes the waiting connections of listener l (a batch). */
static void accept_all(struct cm_id *l)
{
	for (int i = 0; i < CM_ACCEPT_BATCH; i++) {
		int fd = accept_one(l, l->sock);
		struct cm_id *c;

		if (fd < 0)
			return;
		if (peer_ok(fd)) {
			close(fd);
			continue;
		}
		c = cm_conn_incoming(l, fd);
		if (c) {
			half_open_join(l, c, CM_TCP_REQ_WAIT_MS);
			read_all(c); /* its REQ may be here already */
		}
	}
}

/* Lock held: takes the waiting TCP connections of listener l (a batch);
 * each is an unreported child until its REQ comes (or its deadline). */
static void accept_tcp(struct cm_id *l)
{
	for (int i = 0; i < CM_ACCEPT_BATCH; i++) {
		int fd = accept_one(l, rdv_fd(l));
		struct cm_id *c;

		if (fd < 0)
			return;
		tcp_opts(fd);
		c = cm_conn_incoming(l, fd);
		if (!c)
			continue;
		c->tcp = true;
		half_open_join(l, c, CM_TCP_REQ_WAIT_MS);
		if (cm_auth_needed() && cm_auth_start(c)) {
			cm_conn_lost(c); /* unreported: freed */
			continue;
		}
		read_all(c); /* its first record may be here already */
	}
}

/* The socket's address as one of ours: a v4-mapped IPv6 address (a
 * dual-stack listener's) as the IPv4 address it is. */
static int sock_addr(int fd, bool peer, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);
	struct sockaddr_in6 in6;
	struct sockaddr_in *in = (void *)ss;

	memset(ss, 0, sizeof(*ss));
	if (peer ? getpeername(fd, (struct sockaddr *)ss, &len)
		 : getsockname(fd, (struct sockaddr *)ss, &len))
		return -errno;
	memcpy(&in6, ss, sizeof(in6));
	if (ss->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
		memset(ss, 0, sizeof(*ss));
		in->sin_family = AF_INET;
		in->sin_port = in6.sin6_port;
		memcpy(&in->sin_addr, &in6.sin6_addr.s6_addr[12], 4);
	}
	return 0;
}

/* A GID a TCP peer at `sa` may claim: its address's (IPv4-mapped, or
 * the IPv6 address itself); on loopback (SOFTVERBS_TRANSPORT=tcp on one
 * host) any GID of this host's table, as over the Unix link. */
static bool gid_ok(const struct sockaddr *sa, const uint8_t *gid)
{
	union ibv_gid want;

	if (sa->sa_family == AF_INET &&
	    (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) ==
		    127)
		return true;
	if (sa->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr))
		return true;
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return false;
	cm_addr_mapped_gid(sa, &want);
	return !memcmp(want.raw, gid, 16);
}

/* Lock held: what a TCP peer's checked record claims against what its
 * socket says: a REQ's (or SIDR REQ's) addresses are the socket's (the
 * port the active side's id holds is its claim), a REQ's or REP's (SIDR
 * too) GID the peer's own address.  0 or -EPROTO. */
static int tcp_check(struct cm_id *c, struct cm_msg *m)
{
	struct sockaddr_storage peer, local;
	uint16_t port = m->src.port;
	bool req = m->type == CM_MSG_REQ || m->type == CM_MSG_SIDR_REQ;

	if (!req && m->type != CM_MSG_REP && m->type != CM_MSG_SIDR_REP)
		return 0;
	if (sock_addr(c->sock, true, &peer) ||
	    sock_addr(c->sock, false, &local))
		return -EPROTO;
	if (!gid_ok((struct sockaddr *)&peer, m->gid)) {
		cm_log("id %p: TCP peer's GID is not its address's\n",
		       (void *)c);
		return -EPROTO;
	}
	if (req) {
		cm_addr_to_wire((struct sockaddr *)&peer, &m->src);
		m->src.port = port;
		cm_addr_to_wire((struct sockaddr *)&local, &m->dst);
	}
	return 0;
}

/*
 * Lock held: an active side's TCP link to a listener closed (or was
 * reset) before a byte came back, with no secret's handshake on it.  A
 * listener under a flood drops its oldest silent callers
 * (half_open_drop_oldest), and a loaded caller can be one of them before
 * its REQ goes or is read: nothing of ours was taken.  As the IB CM
 * resends a REQ that got no answer, we dial again, at most
 * CM_TCP_REDIALS times and within the first connect's deadline; else the
 * close is the peer's answer (UNREACHABLE).  With a secret a close
 * unanswered is its refusal (cm_auth_closed), never dialled again.
 */
static bool may_redial(const struct cm_id *c)
{
	return c->tcp && c->state == CM_REQ_SENT && !c->heard && !c->auth &&
	       !cm_auth_needed() && c->redials < CM_TCP_REDIALS &&
	       cm_now_ms() < c->dial_until_ms;
}

/* Lock held: dials c again if may_redial; true if it did (a dial that
 * fails at once is reported here). */
static bool redial(struct cm_id *c)
{
	int err;

	if (!may_redial(c))
		return false;
	cm_log("id %p: the listener closed our TCP link unanswered: "
	       "dialling again (%u)\n",
	       (void *)c, c->redials + 1u);
	c->redials++;
	cm_link_close(c);
	c->rep_until_ms = 0;
	err = tcp_connect(c);
	if (err)
		cm_conn_lost(c); /* CM_REQ_SENT: UNREACHABLE */
	return true;
}

/*
 * Lock held: a TCP stream's other end, if it is a socket of this host,
 * must be our user's (NETLINK_SOCK_DIAG: provider/lib/peer.c), as SO_PEERCRED
 * says on the Unix link; another host's is not known (the secret, when
 * there is one, proves it).  The side that accepted asks at the first
 * record, the side that connected once its connect is done (the callee's
 * socket is a full one then), before its REQ goes.  0 or -errno.
 */
static int tcp_peer_ours(struct cm_id *c)
{
	static bool said;
	int err = sv_peer_check(c->sock, NULL);

	if (!err || (err == -ENOTCONN && may_redial(c)))
		return err; /* closed unanswered: connect_done dials again */
	cm_log("id %p: the other end of its TCP link is not ours (%d): "
	       "refused\n",
	       (void *)c, err);
	if (!said) {
		said = true;
		fprintf(stderr,
			"softverbs rdmacm: a CM connection %s a socket on "
			"this host refused: %s\n",
			c->connecting ? "to" : "from", sv_peer_why(err));
	}
	return err;
}

/* Lock held: c's peer failed the secret's handshake: an active side's
 * connect ends UNREACHABLE -EACCES, a passive one is dropped unreported. */
static void refuse(struct cm_id *c)
{
	if (c->state == CM_REQ_SENT) {
		cm_link_close(c);
		cm_conn_link_up(c, -EACCES);
	} else {
		cm_conn_lost(c);
	}
}

/* Lock held: the bytes of c's TCP stream, 300 at a time. */
static void read_stream(struct cm_id *c)
{
	struct cm_msg m;

	while (c->sock >= 0) {
		ssize_t n = recv(c->sock, (char *)&c->rbuf + c->rlen,
				 sizeof(c->rbuf) - c->rlen, MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			if (redial(c))
				return;
			if (c->auth && c->state == CM_REQ_SENT) {
				cm_auth_closed(c);
				refuse(c);
			} else {
				cm_conn_lost(c);
			}
			return;
		}
		c->heard = true;
		c->rlen += (unsigned int)n;
		if (c->rlen < sizeof(c->rbuf))
			continue;
		c->rlen = 0;
		m = c->rbuf;
		if (c->state == CM_REQ_WAIT && !c->peer_checked) {
			if (tcp_peer_ours(c)) {
				cm_conn_lost(c); /* unreported: freed */
				return;
			}
			c->peer_checked = true;
		}
		if (c->auth) {
			if (cm_auth_recv(c, &m)) {
				refuse(c);
				return;
			}
			if (!c->auth && c->state == CM_REQ_SENT) {
				/* both proved it: our REQ goes now */
				c->deadline_ms = 0;
				cm_conn_link_up(c, 0);
			}
			continue;
		}
		half_open_leave(c);
		if (cm_msg_check(&m, sizeof(m)) && cm_auth_asked(c, &m)) {
			refuse(c);
			return;
		}
		if (cm_msg_check(&m, sizeof(m)) || tcp_check(c, &m)) {
			cm_log("id %p: malformed CM record on TCP: "
			       "dropping the connection\n",
			       (void *)c);
			cm_conn_lost(c);
			return;
		}
		if (cm_conn_recv(c, &m))
			return; /* c is gone */
	}
}

/* Lock held: c's TCP connect has an answer (EPOLLOUT or an error). */
static void connect_done(struct cm_id *c)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
				 .data.u64 = c->serial};
	socklen_t len = sizeof(int);
	int err = 0;

	if (getsockopt(c->sock, SOL_SOCKET, SO_ERROR, &err, &len))
		err = errno;
	if ((err == ECONNRESET || err == EPIPE) && redial(c))
		return; /* reset at once: as closed unanswered */
	if (!err) {
		struct sockaddr_storage peer, local;

		/* EPOLLOUT without an error can still be "not yet" */
		if (sock_addr(c->sock, true, &peer))
			return;
		/* TCP's simultaneous open: a port nobody listens on that the
		 * kernel also picked as our source connects to itself */
		if (!sock_addr(c->sock, false, &local) &&
		    !memcmp(&local, &peer, sizeof(local)))
			err = ECONNREFUSED;
		else if ((err = tcp_peer_ours(c)) == -ENOTCONN && redial(c))
			return; /* closed before our REQ went */
		else if (err)
			err = EPERM; /* UNREACHABLE, -EPERM: no REQ went */
		else if (epoll_ctl(cm_core.epfd, EPOLL_CTL_MOD, c->sock, &ev))
			err = errno;
	}
	if (!err) {
		c->connecting = false;
		c->deadline_ms = 0;
		if (cm_auth_needed()) {
			/* the REQ waits for both proofs (read_stream) */
			err = -cm_auth_start(c);
			if (!err) {
				c->deadline_ms =
					cm_now_ms() + CM_TCP_REQ_WAIT_MS;
				cm_conn_timed(c);
				return;
			}
		}
	}
	if (err)
		cm_link_close(c);
	cm_conn_link_up(c, -err);
}

/* Lock held: every message c's peer has sent, then its end. */
static void read_all(struct cm_id *c)
{
	struct cm_msg m;

	if (c->tcp) {
		read_stream(c);
		return;
	}
	if (c->ib) {
		cm_ib_read(c);
		return;
	}
	while (c->sock >= 0) {
		ssize_t n =
			recv(c->sock, &m, sizeof(m), MSG_DONTWAIT | MSG_TRUNC);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			cm_conn_lost(c);
			return;
		}
		half_open_leave(c);
		if (cm_msg_check(&m, n)) {
			cm_log("id %p: malformed CM message (%zd bytes): "
			       "dropping the connection\n",
			       (void *)c, n);
			cm_conn_lost(c);
			return;
		}
		if (cm_conn_recv(c, &m))
			return; /* c is gone */
	}
}

static void *cm_thread(void *arg)
{
	struct epoll_event evs[32];
	int timeout = -1;
	uint64_t v;

	(void)arg;
	for (;;) {
		/* ids waiting for a listener retry every millisecond; TCP
		 * links have deadlines */
		int n = epoll_wait(cm_core.epfd, evs, 32, timeout);

		pthread_mutex_lock(&cm_core.lock);
		for (int i = 0; i < n; i++) {
			struct cm_id *c;

			if (!evs[i].data.u64) { /* cm_link_kick */
				if (read(cm_core.wake_fd, &v, sizeof(v)) < 0)
					cm_log("wake-up read: %d\n", errno);
				continue;
			}
			if (evs[i].data.u64 & CM_TAG_IB_PASS) {
				cm_ib_pass_read(evs[i].data.u64 &
						~CM_TAG_IB_PASS);
				continue;
			}
			if (evs[i].data.u64 & CM_TAG_IB_PORT) {
				cm_ib_port_read(
					(int)(evs[i].data.u64 & 0xffff));
				continue;
			}
			c = cm_id_find(evs[i].data.u64 &
				       ~(CM_TAG_TCP_LISTEN | CM_TAG_IB_LISTEN));
			if (c && (evs[i].data.u64 & CM_TAG_IB_LISTEN)) {
				cm_ib_accept(c);
				continue;
			}
			if (c && (evs[i].data.u64 & CM_TAG_TCP_LISTEN)) {
				if (c->port_watched)
					accept_tcp(c);
				continue;
			}
			if (!c || c->sock < 0)
				continue; /* closed since epoll_wait */
			if (c->connecting)
				connect_done(c);
			else if (c->state == CM_LISTEN)
				accept_all(c);
			else
				read_all(c);
		}
		timeout = cm_ib_resend_all(cm_conn_retry_all());
		pthread_mutex_unlock(&cm_core.lock);
	}
	return NULL;
}

/* Lock held; once per process. */
int cm_thread_start(void)
{
	pthread_attr_t a;
	sigset_t all, old;
	int ret;

	if (cm_core.thread_started)
		return 0;
	struct epoll_event wake = {.events = EPOLLIN, .data.u64 = 0};

	cm_core.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (cm_core.epfd < 0)
		return -errno;
	cm_core.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	cm_core.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cm_core.wake_fd < 0 ||
	    epoll_ctl(cm_core.epfd, EPOLL_CTL_ADD, cm_core.wake_fd, &wake)) {
		ret = -errno;
		close(cm_core.epfd);
		cm_core.epfd = -1;
		return ret;
	}
	/* the program's signals are for its own threads; not the faults
	 * of our own accesses: blocked, the kernel kills the process at the
	 * first one, and a write to heap memory that a registration is
	 * moving onto the arena faults and must wait in rmem's handler
	 * (the CM thread writes its events there: ucmatose's client died
	 * when ibv_reg_mr moved the page of a queued event) */
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGFPE);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&cm_core.thread, &a, cm_thread, NULL);
	if (!ret) /* by its creator: named before anyone looks (top -H) */
		pthread_setname_np(cm_core.thread, "softverbs-cm");
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		close(cm_core.epfd);
		cm_core.epfd = -1;
		return -ret;
	}
	cm_core.thread_started = true;
	return 0;
}
