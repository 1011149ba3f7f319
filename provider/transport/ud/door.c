// SPDX-License-Identifier: MIT
/*
 * The UD transport's listener, one per context with a UD QP: datagrams
 * from other hosts arrive over UDP at the well-known port
 * (SOFTVERBS_TCP_PORT, 4791, as RoCEv2).  Every such context listens
 * there with SO_REUSEPORT (one dual-stack socket: IPv6 and IPv4), as the
 * TCP door (tcp.h); the one the kernel picks checks the datagram (its
 * CRC, unless it carries a MAC: mac.c), puts the source address in the
 * GRH's sgid (what a RoCE receiver sees: the IP header's), marks it as
 * from the network (SV_UD_NET) and passes it on, unchanged otherwise, to
 * the QP's socket by its QPN, where it is checked again like any other
 * (recv.c).  A datagram for a QP whose socket is full is held for up to
 * SV_UD_HOLD_NS.  Lost on the way (a stopped process's listener takes its
 * share and holds it) is lost, as on a wire.
 *
 * Multicast between hosts: a group whose MGID is IPv4-mapped multicast
 * (mcast.c) is that IPv4 group too.  The listener joins it while a QP of
 * the context is attached (IP_MULTICAST_ALL off: it hears only its own
 * groups; sv_ud_mcast_join).  It takes a datagram sent to a group
 * (IP_PKTINFO: the IP header's destination) only with DQPN 0xffffff and a
 * GRH naming that group, and passes it to each QP of its context attached
 * to it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "auth.h"
#include "crc32c.h"
#include "env.h"
#include "lane.h"
#include "progress.h"
#include "shm.h"
#include "tcp.h"
#include "transport.h"
#include "ud_priv.h"
#include "wire.h"

/* A datagram that arrived while its QP's socket was full waits here
 * (and the listener is out of epoll: the UDP socket's buffer holds the
 * rest) for up to SV_UD_HOLD_NS: a receiver that is starved catches
 * up, a stopped one loses them. */
struct sv_ud_door {
	/* held on every door_pump: the progress thread's (it waits for
	 * it), and a poll's of ours (sv_ud_door_poll, inside its
	 * qp->lock: a trylock); a pump takes no other lock that waits
	 * (mcast_lock: a trylock) */
	pthread_mutex_t pump;
	int fd;
	uint32_t held;	  /* bytes in d, 0: none */
	uint32_t dst;	  /* d's IP destination (network order): a group? */
	uint32_t mc_next; /* a group's: members below this QPN have it */
	uint32_t stalled; /* a QPN whose full socket outlasted a hold: its
			   * datagrams are dropped, not held, until it takes
			   * one again; 0: none */
	socklen_t slen;	  /* d's source address length */
	uint64_t since, next_ns;
	uint8_t tos, ttl;	      /* d's IP header's (IPv4) */
	struct sv_roce_idmemo idmemo; /* RoCEv2 ICRCs' IP IDs (roce_ud.c) */
	struct sv_qp_stats stats;     /* what we dropped of RoCEv2 */
	struct {
		struct sv_ud_hdr h;
		uint8_t data[SV_UD_MTU + sizeof(struct sv_ud_mac)];
	} d;
};

static void door_event(struct sv_io *io, uint32_t revents);

void sv_ud_door_open(struct sv_context *ctx)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(sv_transport_port()),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons(sv_transport_port()),
				  .sin6_addr = IN6ADDR_ANY_INIT};
	static atomic_bool said;
	int one = 1, off = 0, buf = 4 << 20, err;
	struct sv_ud_door *d;
	bool v6 = true;

	if (sv_transport_mode() == SV_TRANSPORT_SHM)
		return; /* SOFTVERBS_TRANSPORT=shm: this host only */
	pthread_mutex_lock(&ctx->door_lock);
	if (ctx->udoor_st || ctx->udoor_failed)
		goto out;
	d = calloc(1, sizeof(*d));
	if (!d) {
		errno = ENOMEM;
		goto fail;
	}
	pthread_mutex_init(&d->pump, NULL);
	/* IPv6 and IPv4 on one socket (IPv4 senders arrive v4-mapped; the
	 * IPv4 options below apply to them), or IPv4 only where the kernel
	 * has no IPv6 */
	d->fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->fd < 0 ||
	    setsockopt(d->fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off))) {
		if (d->fd >= 0)
			close(d->fd);
		v6 = false;
		d->fd = socket(AF_INET,
			       SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	}
	ctx->ud_fwd_fd =
		socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->fd < 0 || ctx->ud_fwd_fd < 0)
		goto fail;
	setsockopt(d->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(d->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	setsockopt(d->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	/* a datagram's destination says if it went to a group; and only
	 * the groups this listener joined reach it, not every group a
	 * socket of the host joined */
	if (setsockopt(d->fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) ||
	    setsockopt(d->fd, IPPROTO_IP, IP_MULTICAST_ALL, &(int){0},
		       sizeof(int)))
		goto fail;
	/* a RoCEv2 datagram's receive shows its IPv4 header (roce_ud.c) */
	setsockopt(d->fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
	setsockopt(d->fd, IPPROTO_IP, IP_RECVTTL, &one, sizeof(one));
	if (v6 ? bind(d->fd, (struct sockaddr *)&a6, sizeof(a6))
	       : bind(d->fd, (struct sockaddr *)&a, sizeof(a)))
		goto fail;
	/* release: stat.c's refresh on the progress thread reads it */
	__atomic_store_n(&ctx->udoor_stats, &d->stats, __ATOMIC_RELEASE);
	ctx->udoor_st = d;
	sv_pfd_set(&ctx->udoor, door_event, false);
	sv_progress_add(ctx, &ctx->udoor, d->fd);
	goto out;
fail:
	err = errno;
	if (d && d->fd >= 0)
		close(d->fd);
	free(d);
	if (ctx->ud_fwd_fd >= 0)
		close(ctx->ud_fwd_fd);
	ctx->ud_fwd_fd = -1;
	ctx->udoor_failed = true;
	if (!atomic_exchange(&said, true))
		fprintf(stderr,
			"softverbs: UDP port %u: %s: datagrams from other "
			"hosts will not reach this process's UD QPs\n",
			sv_transport_port(), strerror(err));
out:
	pthread_mutex_unlock(&ctx->door_lock);
}

static bool door_pump(struct sv_context *ctx, struct sv_ud_door *d,
		      uint64_t now, bool live);

/* Takes the listener out of its port's SO_REUSEPORT group: the kernel
 * steers no datagram to a connected member, while what it queued stays
 * readable.  0, or -1 with errno. */
static int door_leave_group(struct sv_ud_door *d)
{
	union sv_sockaddr a;
	socklen_t len = sizeof(a);

	if (getsockname(d->fd, &a.sa, &len))
		return -1;
	if (a.sa.sa_family == AF_INET6)
		a.in6.sin6_addr = in6addr_loopback;
	else
		a.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return connect(d->fd, &a.sa, len);
}

/* Passes on all that d holds and has queued, a held datagram waiting
 * for room until end at most. */
static void door_drain(struct sv_context *ctx, struct sv_ud_door *d,
		       uint64_t end)
{
	struct timespec tick = {0, SV_UD_RETRY_TICK_NS};

	for (;;) {
		bool more, held;

		pthread_mutex_lock(&d->pump);
		more = door_pump(ctx, d, sv_now_ns(), false);
		held = d->held;
		pthread_mutex_unlock(&d->pump);
		if (!more || sv_now_ns() >= end)
			return;
		if (held)
			nanosleep(&tick, NULL);
	}
}

void sv_ud_door_close(struct sv_context *ctx)
{
	struct sv_ud_door *d = ctx->udoor_st;

	/* the progress thread has stopped (its epoll is gone).  What the
	 * kernel gave our listener is other processes' QPs' too: passed on
	 * before it closes, waiting for a full QP socket as a sender does
	 * (SV_UD_HOLD_NS at most); only a process that is killed loses
	 * its listener's share, as a wire would.  First out of the port's
	 * group: the kernel picks no connected socket of it, so nothing
	 * more comes once the queue is drained (still in the group, a
	 * sender's next datagrams came after the last drain and went with
	 * the socket: a whole sender's 32 of ud_fan_in_8_processes under
	 * load).  Connected to our own port on loopback, whose source only
	 * a listener could be, and listeners never send. */
	if (d) {
		uint64_t end = sv_now_ns() + SV_UD_HOLD_NS;
		struct timespec tick = {0, SV_UD_RETRY_TICK_NS};

		if (door_leave_group(d))
			sv_dbg("udp: leaving the port's group: %s\n",
			       strerror(errno));
		door_drain(ctx, d, end);
		/* a datagram the kernel steered to us just before is
		 * queued after its lookup: one tick for it */
		nanosleep(&tick, NULL);
		door_drain(ctx, d, end);
		close(d->fd);
		__atomic_store_n(&ctx->udoor_stats, NULL, __ATOMIC_RELAXED);
		ctx->udoor_st = NULL;
		atomic_store(&ctx->udoor_holds, false);
		pthread_mutex_destroy(&d->pump);
		free(d);
	}
	if (ctx->ud_fwd_fd >= 0)
		close(ctx->ud_fwd_fd);
	if (ctx->ud_tx_fd >= 0)
		close(ctx->ud_tx_fd);
	if (ctx->ud_tx6_fd >= 0)
		close(ctx->ud_tx6_fd);
	ctx->ud_fwd_fd = ctx->ud_tx_fd = ctx->ud_tx6_fd = -1;
}

/* Passes d's datagram (n bytes) to QP qpn's socket: 0 passed or lost
 * (no such QP), -1 when its socket is full. */
static int pass_to(struct sv_context *ctx, struct sv_ud_door *d, size_t n,
		   uint32_t qpn)
{
	struct sockaddr_un a;
	socklen_t alen = sv_link_qp_addr(&a, qpn);

	if (sendto(ctx->ud_fwd_fd, &d->d, n, MSG_DONTWAIT | MSG_NOSIGNAL,
		   (struct sockaddr *)&a, alen) >= 0)
		return 0;
	if (errno == EAGAIN || errno == ENOBUFS)
		return -1;
	if ((d->d.h.flags & SV_UD_ROCE) &&
	    (errno == ECONNREFUSED || errno == ENOENT))
		__atomic_store_n(&d->stats.roce_drop_qpn,
				 d->stats.roce_drop_qpn + 1, __ATOMIC_RELAXED);
	sv_dbg("udp: datagram for %06x lost: %s\n", qpn, strerror(errno));
	return 0;
}

/* A datagram that arrived at the listener, n bytes in d: 0 passed on,
 * or dropped (malformed, bad CRC, no such QP: lost, as on a wire), -1
 * when the QP's socket is full.  One sent to a group goes to each QP of
 * this context attached to it (none: dropped), in QPN order, mc_next
 * remembering who has it. */
static int door_pass(struct sv_context *ctx, struct sv_ud_door *d, size_t n)
{
	uint32_t m[SV_MAX_MCAST_QP_ATTACH];
	int k;

	if (!IN_MULTICAST(ntohl(d->dst))) {
		uint32_t qpn = d->d.h.dst_qpn;

		if (pass_to(ctx, d, n, qpn)) {
			if (qpn != d->stalled)
				return -1;
			sv_dbg("udp: datagram for %06x lost: it is stalled\n",
			       qpn);
			return 0; /* its queue is full, as on a wire */
		}
		if (qpn == d->stalled)
			d->stalled = 0; /* it takes again */
		return 0;
	}
	k = sv_mcast_ctx_members(ctx, d->d.h.dgid, m, SV_MAX_MCAST_QP_ATTACH);
	if (k < 0)
		return -1; /* attach holds the list: a moment */
	for (int i = 0; i < k; i++) {
		if (m[i] < d->mc_next)
			continue;
		if (pass_to(ctx, d, n, m[i]))
			return -1;
		d->mc_next = m[i] + 1;
	}
	return 0;
}

/* Checks a datagram from the network (d->dst: where it was sent) and
 * makes it what the QP's socket takes: false to drop it.  Sent to a group
 * it must be a multicast (DQPN 0xffffff) with a GRH naming that group;
 * sent to us, not a multicast. */
static bool door_check(struct sv_context *ctx, struct sv_ud_door *d, size_t *np,
		       const union sv_sockaddr *src, socklen_t slen)
{
	bool mc = IN_MULTICAST(ntohl(d->dst));
	uint32_t crc, grp;
	size_t n = *np;

	/* not ours: a RoCEv2 packet (UD over RoCE, roce_ud.c), from IPv4
	 * to one of our addresses */
	if (n <= sizeof(d->d) && (n < 4 || d->d.h.magic != SV_UD_MAGIC) &&
	    src->sa.sa_family == AF_INET && slen == sizeof(src->in) && d->dst &&
	    !mc) {
		/* QP1's: an IB CM MAD, passed to the process it is for */
		if (sv_ud_roce_qp1(ctx->ud_fwd_fd, &d->stats, &d->d, n,
				   &src->in, d->dst))
			return false;
		return sv_ud_roce_take(&d->idmemo, &d->stats, &d->d, np,
				       sizeof(d->d), &src->in, d->dst, d->tos,
				       d->ttl);
	}
	if (n > sizeof(d->d) ||
	    (src->sa.sa_family != AF_INET && src->sa.sa_family != AF_INET6) ||
	    slen != sv_sockaddr_len(src) || !sv_ud_hdr_ok(&d->d.h, n) ||
	    (d->d.h.dst_qpn == SV_MCAST_QPN) != mc ||
	    d->d.h.dst_qpn > SV_PSN_MASK ||
	    (mc && (!(d->d.h.flags & SV_UD_GRH) ||
		    !sv_mcast_ipv4(d->d.h.dgid, &grp) || grp != d->dst))) {
		sv_dbg("udp: datagram dropped: malformed\n");
		return false;
	}
	crc = d->d.h.rsvd;
	d->d.h.rsvd = 0;
	/* with a MAC, its QP checks every bit (and counts what fails; this
	 * process may have no secret to check it with) */
	if (!(d->d.h.flags & SV_UD_MAC) && sv_crc32c(0, &d->d, n) != crc) {
		sv_dbg("udp: datagram for %06x dropped: bad CRC\n",
		       d->d.h.dst_qpn);
		return false;
	}
	d->d.h.flags |= SV_UD_NET; /* the QP asks a secret's proof of it */
	/* the sender's address is the IP header's, not its word (from
	 * this host, the GID it names: any of ours is the same host).
	 * Without a GRH too, for the receive's slid (recv.c: a LID of
	 * SOFTVERBS_SUBNET); zero from this host */
	if (src->sa.sa_family == AF_INET6 &&
	    !IN6_IS_ADDR_LOOPBACK(&src->in6.sin6_addr)) {
		memcpy(d->d.h.sgid, &src->in6.sin6_addr, 16);
	} else if (src->sa.sa_family == AF_INET &&
		   (ntohl(src->in.sin_addr.s_addr) >> 24) != 127) {
		memset(d->d.h.sgid, 0, 10);
		d->d.h.sgid[10] = d->d.h.sgid[11] = 0xff;
		memcpy(&d->d.h.sgid[12], &src->in.sin_addr.s_addr, 4);
	} else if (!(d->d.h.flags & SV_UD_GRH)) {
		memset(d->d.h.sgid, 0, sizeof(d->d.h.sgid));
	}
	return true;
}

/* One datagram from the listener into d (its source in *src, an IPv4
 * one as AF_INET even on the dual-stack socket; d->dst where it was
 * sent): its length, or -1 when none is waiting. */
static ssize_t door_recv(struct sv_ud_door *d, union sv_sockaddr *src)
{
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(struct in_pktinfo)) +
			 2 * CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = {&d->d, sizeof(d->d)};
	struct msghdr m = {.msg_name = src,
			   .msg_namelen = sizeof(*src),
			   .msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(d->fd, &m, MSG_DONTWAIT | MSG_TRUNC);

	d->dst = 0;
	d->mc_next = 0;
	d->tos = d->ttl = 0;
	d->slen = m.msg_namelen;
	if (n < 0)
		return -1;
	if (d->slen == sizeof(src->in6) && src->sa.sa_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&src->in6.sin6_addr)) {
		struct sockaddr_in in = {.sin_family = AF_INET,
					 .sin_port = src->in6.sin6_port};

		memcpy(&in.sin_addr, &src->in6.sin6_addr.s6_addr[12], 4);
		memset(src, 0, sizeof(*src));
		src->in = in;
		d->slen = sizeof(in);
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			d->dst = pi.ipi_addr.s_addr;
		} else if (c->cmsg_level == IPPROTO_IP &&
			   c->cmsg_type == IP_TTL &&
			   c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int v;

			memcpy(&v, CMSG_DATA(c), sizeof(v));
			d->ttl = (uint8_t)v;
		} else if (c->cmsg_level == IPPROTO_IP &&
			   c->cmsg_type == IP_TOS &&
			   c->cmsg_len >= CMSG_LEN(1)) {
			d->tos = *(const uint8_t *)CMSG_DATA(c);
		}
	return n;
}

/* Passes on what arrived: the held datagram first, then a bounded batch
 * (the rest wakes us again: the fd is level-triggered); never waits.
 * live: the progress thread runs (the listener goes out of its epoll
 * while a datagram is held).  false when all was taken. */
static bool door_pump(struct sv_context *ctx, struct sv_ud_door *d,
		      uint64_t now, bool live)
{
	if (d->held) {
		if (door_pass(ctx, d, d->held)) {
			if (now - d->since < SV_UD_HOLD_NS) {
				d->next_ns = now + SV_UD_RETRY_TICK_NS;
				return true;
			}
			sv_dbg("udp: datagram for %06x lost: its socket was "
			       "full "
			       "for %llu ms\n",
			       d->d.h.dst_qpn,
			       (unsigned long long)(now - d->since) / 1000000);
			if (!IN_MULTICAST(ntohl(d->dst)))
				d->stalled = d->d.h.dst_qpn;
		} else if (now - d->since > SV_UD_SLOW_NS) {
			sv_dbg("udp: datagram for %06x passed after %llu ms\n",
			       d->d.h.dst_qpn,
			       (unsigned long long)(now - d->since) / 1000000);
		}
		d->held = 0;
		atomic_store_explicit(&ctx->udoor_holds, false,
				      memory_order_relaxed);
		/* the burst goes on: our polls pump on */
		atomic_store_explicit(&ctx->udoor_busy_ns, now + SV_UD_BUSY_NS,
				      memory_order_relaxed);
		if (live)
			sv_progress_add(ctx, &ctx->udoor, d->fd);
	}
	for (int i = 0; i < 64; i++) {
		union sv_sockaddr src;
		ssize_t n = door_recv(d, &src);

		if (n < 0)
			return false; /* EAGAIN: all taken */
		size_t len = (size_t)n;

		if (!door_check(ctx, d, &len, &src, d->slen))
			continue;
		n = (ssize_t)len;
		/* datagrams come: our readers' polls pump for a while */
		if (i == 0)
			atomic_store_explicit(&ctx->udoor_busy_ns,
					      now + SV_UD_BUSY_NS,
					      memory_order_relaxed);
		if (door_pass(ctx, d, (size_t)n)) {
			/* the QP's socket is full: hold it, and the rest
			 * in the UDP socket's buffer */
			d->held = (uint32_t)n;
			d->since = now;
			__atomic_store_n(&d->stats.ud_door_holds,
					 d->stats.ud_door_holds + 1,
					 __ATOMIC_RELAXED);
			d->next_ns = now + SV_UD_RETRY_TICK_NS;
			atomic_store_explicit(&ctx->udoor_holds, true,
					      memory_order_release);
			if (live)
				sv_progress_del(ctx, &ctx->udoor);
			return true;
		}
	}
	return true;
}

/* The listener's callback in the progress thread's loop: datagrams. */
static void door_event(struct sv_io *io, uint32_t revents)
{
	struct sv_context *ctx = container_of(io, struct sv_pfd, io)->ctx;
	struct sv_ud_door *d = ctx->udoor_st;

	(void)revents;
	if (!d)
		return;
	pthread_mutex_lock(&d->pump);
	door_pump(ctx, d, sv_now_ns(), true);
	pthread_mutex_unlock(&d->pump);
}

/*
 * A poll of a UD QP of ctx's (recv.c).  A Unix datagram socket queues 10
 * datagrams (net.unix.max_dgram_qlen), so a burst from another host fills
 * the QP's at once, and the listener holds the next one: retried only
 * each SV_UD_RETRY_TICK_NS, it passed 10 a millisecond while the UDP
 * socket's buffer overflowed behind it.  ib_send_bw -c UD between two
 * hosts lost a quarter of its 2,000 sends there and waited for them
 * forever.  So while datagrams come (SV_UD_BUSY_NS after one came or a
 * held one went on), the polls pump too: the poll that emptied its
 * socket (recv.c reads it while the listener holds) passes on what is
 * held and the batch behind it, with no wake-up of the thread for each
 * 10 datagrams.  The tick stays for a QP of another process, whose polls
 * cannot reach our listener.  Never waits: the thread pumping now, or
 * another poll, does it.
 */
void sv_ud_door_poll(struct sv_context *ctx)
{
	uint64_t busy =
		atomic_load_explicit(&ctx->udoor_busy_ns, memory_order_relaxed);
	struct sv_ud_door *d;
	uint64_t now;

	if (!busy)
		return;
	if ((now = sv_now_ns()) >= busy) {
		/* quiet again: no clock per poll till the next datagram (a
		 * pump that set a new time keeps it) */
		atomic_compare_exchange_strong_explicit(
			&ctx->udoor_busy_ns, &busy, 0, memory_order_relaxed,
			memory_order_relaxed);
		return;
	}
	d = atomic_load_explicit(&ctx->udoor_st, memory_order_acquire);
	/* the thread pumping now does it */
	if (!d || pthread_mutex_trylock(&d->pump))
		return;
	door_pump(ctx, d, now, true);
	pthread_mutex_unlock(&d->pump);
}

uint64_t sv_ud_door_next_ns(struct sv_context *ctx, uint64_t now)
{
	struct sv_ud_door *d = ctx->udoor_st;
	uint64_t next;

	if (!d ||
	    !atomic_load_explicit(&ctx->udoor_holds, memory_order_relaxed))
		return UINT64_MAX;
	pthread_mutex_lock(&d->pump);
	if (d->held && now >= d->next_ns)
		door_pump(ctx, d, now, true);
	next = d->held ? d->next_ns : UINT64_MAX;
	pthread_mutex_unlock(&d->pump);
	return next;
}

/* The interfaces an IPv4 group is joined on: every IPv4 one that is up
 * and does multicast, not lo; with SOFTVERBS_TRANSPORT=tcp (one host) lo
 * only.  Up to max ifindexes, each once. */
static int mcast_ifs(int *idx, int max)
{
	bool lo = sv_transport_mode() == SV_TRANSPORT_TCP;
	struct ifaddrs *ifs;
	int n = 0;

	if (getifaddrs(&ifs))
		return -errno;
	for (struct ifaddrs *i = ifs; i && n < max; i = i->ifa_next) {
		unsigned int k;
		int j;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    !(i->ifa_flags & IFF_UP) ||
		    !!(i->ifa_flags & IFF_LOOPBACK) != lo ||
		    (!lo && !(i->ifa_flags & IFF_MULTICAST)))
			continue;
		k = if_nametoindex(i->ifa_name);
		for (j = 0; j < n && idx[j] != (int)k; j++)
			;
		if (k && j == n)
			idx[n++] = (int)k;
	}
	freeifaddrs(ifs);
	return n;
}

int sv_ud_mcast_join(struct sv_context *ctx, uint32_t grp, bool join)
{
	int idx[32], n, ok = 0, err = 0;

	pthread_mutex_lock(&ctx->door_lock);
	if (!ctx->udoor_st)
		goto out; /* no listener (shm only, or it failed: said) */
	n = mcast_ifs(idx, 32);
	if (n < 0)
		err = n;
	for (int i = 0; i < n; i++) {
		struct ip_mreqn m = {.imr_multiaddr.s_addr = grp,
				     .imr_ifindex = idx[i]};

		if (!setsockopt(ctx->udoor_st->fd, IPPROTO_IP,
				join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
				&m, sizeof(m)))
			ok++;
		else
			err = -errno; /* ENOBUFS: igmp_max_memberships */
	}
	if (ok || !join || n == 0)
		err = 0; /* no interface: the group is this host's */
out:
	pthread_mutex_unlock(&ctx->door_lock);
	if (err)
		sv_dbg("udp: joining group %08x: %s\n", ntohl(grp),
		       strerror(-err));
	return err;
}
