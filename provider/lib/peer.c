// SPDX-License-Identifier: MIT
/*
 * Who is at the other end of a TCP connection (peer.h): the address
 * compare, and the owner of a peer on this host, asked of the kernel's
 * socket table with NETLINK_SOCK_DIAG (as ss(8) does, no root needed).
 * A service like util.c and auth.c: it calls nothing of the provider.
 */
#include "peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>

/* A TCP address as IPv6 (IPv4 mapped), so both families compare alike. */
struct peer_addr {
	struct in6_addr a;
	uint16_t port;	/* network order */
	uint32_t scope; /* sin6_scope_id, 0 for IPv4 */
	bool v4;	/* a.b.c.d or ::ffff:a.b.c.d */
	int family;	/* the socket's own: AF_INET or AF_INET6 */
};

static bool to_peer_addr(const struct sockaddr *sa, socklen_t len,
			 struct peer_addr *p)
{
	memset(p, 0, sizeof(*p));
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;

		p->a.s6_addr[10] = 0xff;
		p->a.s6_addr[11] = 0xff;
		memcpy(&p->a.s6_addr[12], &in->sin_addr, 4);
		p->port = in->sin_port;
		p->v4 = true;
		p->family = AF_INET;
		return true;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		p->a = in6->sin6_addr;
		p->port = in6->sin6_port;
		p->scope = in6->sin6_scope_id;
		p->v4 = IN6_IS_ADDR_V4MAPPED(&p->a);
		p->family = AF_INET6;
		return true;
	}
	return false;
}

/* getpeername (peer) or getsockname (!peer) of fd, as a peer_addr. */
static int fd_addr(int fd, bool peer, struct peer_addr *p)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int r;

	r = peer ? getpeername(fd, (struct sockaddr *)&ss, &len)
		 : getsockname(fd, (struct sockaddr *)&ss, &len);
	if (r)
		return -errno;
	if (!to_peer_addr((struct sockaddr *)&ss, len, p))
		return -EAFNOSUPPORT;
	return 0;
}

bool sv_peer_addr_is(int fd, const struct sockaddr *want)
{
	struct peer_addr got, w;

	if (!want || fd_addr(fd, true, &got))
		return false;
	/* want's length is its family's: the callers pass a sockaddr_in
	 * or sockaddr_in6 (or a union of them) */
	if (!to_peer_addr(want,
			  want->sa_family == AF_INET
				  ? sizeof(struct sockaddr_in)
				  : sizeof(struct sockaddr_in6),
			  &w))
		return false;
	if (memcmp(&got.a, &w.a, sizeof(got.a)))
		return false;
	/* fe80::/10 is one address per interface */
	if (IN6_IS_ADDR_LINKLOCAL(&w.a) && w.scope && got.scope != w.scope)
		return false;
	return true;
}

/* Monotonic milliseconds. */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The kernel's answer about one socket: its state and owner. */
struct diag_answer {
	uint8_t state; /* TCP_ESTABLISHED ..., TCP_SYN_RECV */
	bool full;     /* a full socket: its uid is its creator's */
	uid_t uid;
};

/*
 * Only a full socket has an owner.  The kernel also answers for a
 * request socket (state SYN_RECV: the handshake's last ACK not yet in)
 * and a timewait one (TIME_WAIT, or FIN_WAIT2: closed by its owner, its
 * FIN acked), with uid 0, which would pass for root's.  Their state does
 * not tell them (a full socket may be in FIN_WAIT2 too); their answer
 * does: it carries no attributes, and a full socket's always carries
 * INET_DIAG_SHUTDOWN (inet_diag_msg_attrs_fill, Linux 3.7 on).
 */
static bool full_socket(const struct nlmsghdr *h)
{
	const struct inet_diag_msg *m = NLMSG_DATA(h);
	const char *p = (const char *)(m + 1);
	const char *end = (const char *)h + h->nlmsg_len;

	while (p + NLA_HDRLEN <= end) {
		const struct nlattr *a = (const void *)p;

		if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end)
			return false;
		if ((a->nla_type & NLA_TYPE_MASK) == INET_DIAG_SHUTDOWN)
			return true;
		p += NLA_ALIGN(a->nla_len);
	}
	return false;
}

/*
 * One SOCK_DIAG_BY_FAMILY request on netlink socket nl for the socket
 * whose own source is src and destination dst, asked in family.  0 and
 * *ans, -ENOENT if the kernel has none, or -errno.  Waits for the answer
 * until deadline (now_ms()).
 */
static int ask(int nl, int family, const struct peer_addr *src,
	       const struct peer_addr *dst, uint32_t seq, int64_t deadline,
	       struct diag_answer *ans)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req;
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	/* an inet_diag_msg and its attributes; aligned for nlmsghdr */
	uint32_t buf[2048];

	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST; /* one socket, not a dump */
	req.nlh.nlmsg_seq = seq;
	req.r.sdiag_family = family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;
	req.r.id.idiag_sport = src->port;
	req.r.id.idiag_dport = dst->port;
	if (family == AF_INET) {
		memcpy(req.r.id.idiag_src, &src->a.s6_addr[12], 4);
		memcpy(req.r.id.idiag_dst, &dst->a.s6_addr[12], 4);
	} else {
		memcpy(req.r.id.idiag_src, &src->a, 16);
		memcpy(req.r.id.idiag_dst, &dst->a, 16);
	}
	req.r.id.idiag_if = src->scope;
	req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

	if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) != sizeof(req))
		return errno ? -errno : -EIO;
	for (;;) {
		struct sockaddr_nl from;
		socklen_t flen = sizeof(from);
		struct pollfd pfd = {.fd = nl, .events = POLLIN};
		const struct nlmsghdr *h;
		int64_t left = deadline - now_ms();
		ssize_t n;

		n = recvfrom(nl, buf, sizeof(buf), MSG_DONTWAIT,
			     (struct sockaddr *)&from, &flen);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			if (left <= 0)
				return -ETIMEDOUT;
			if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		if (from.nl_pid != 0) /* only the kernel answers */
			continue;
		for (h = (const void *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq)
				continue; /* an old request's late answer */
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
					return -EPROTO;
				return e->error ? e->error : -EPROTO;
			}
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
				const struct inet_diag_msg *m = NLMSG_DATA(h);

				if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
					return -EPROTO;
				ans->state = m->idiag_state;
				ans->full = full_socket(h);
				ans->uid = m->idiag_uid;
				return 0;
			}
		}
	}
}

static int lookup(int nl, const struct peer_addr *peer,
		  const struct peer_addr *me, int64_t deadline, uid_t *uid)
{
	static _Atomic uint32_t seqs;
	struct diag_answer ans;
	int family = peer->family, err;

	/* an IPv4 tuple: the other end may be AF_INET while we are a
	 * dual-stack AF_INET6 socket, or the reverse; the kernel's lookup
	 * of either family finds both, ask the other one if not */
	err = ask(nl, family, peer, me, ++seqs, deadline, &ans);
	if (err == -ENOENT && peer->v4)
		err = ask(nl, family == AF_INET ? AF_INET6 : AF_INET, peer, me,
			  ++seqs, deadline, &ans);
	if (err)
		return err;
	if (!ans.full) /* no owner yet (SYN_RECV), or no more */
		return ans.state == TCP_SYN_RECV ? -EAGAIN : -ENOTCONN;
	*uid = ans.uid;
	return 0;
}

/* sv_peer_tcp_uid; wait: whether to wait (to the deadline) for a
 * request socket at the other end to become a full one. */
static int tcp_uid(int fd, uid_t *uid, bool wait)
{
	struct peer_addr peer, me;
	int64_t deadline = now_ms() + SV_PEER_DEADLINE_MS;
	unsigned int wait_us = 50;
	int nl, err;

	err = fd_addr(fd, true, &peer);
	if (!err)
		err = fd_addr(fd, false, &me);
	if (err)
		return err;
	nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    NETLINK_SOCK_DIAG);
	if (nl < 0)
		return -errno;
	/*
	 * The other end is its source and our destination.  A request
	 * socket becomes a full one when the handshake's last ACK arrives,
	 * at once on this host: wait for it, with the deadline.
	 */
	for (;;) {
		struct timespec ts;

		err = lookup(nl, &peer, &me, deadline, uid);
		if (err != -EAGAIN || !wait || now_ms() >= deadline)
			break;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)wait_us * 1000;
		nanosleep(&ts, NULL);
		if (wait_us < 5000)
			wait_us *= 2;
	}
	close(nl);
	return err;
}

int sv_peer_tcp_uid(int fd, uid_t *uid)
{
	return tcp_uid(fd, uid, true);
}

static int check(int fd, const struct sockaddr *want, bool wait)
{
	struct peer_addr gone;
	uid_t uid;
	int err;

	/* a caller that left before we look has no address to compare:
	 * it is closed, not a stranger */
	if (want && fd_addr(fd, true, &gone))
		return -ENOTCONN;
	if (want && !sv_peer_addr_is(fd, want))
		return -EACCES;
	err = tcp_uid(fd, &uid, wait);
	if (err == -ENOENT)
		return 0; /* another host: its address is all we can check */
	if (err)
		return err;
	return uid == getuid() ? 0 : -EPERM;
}

int sv_peer_check(int fd, const struct sockaddr *want)
{
	return check(fd, want, true);
}

int sv_peer_check_now(int fd, const struct sockaddr *want)
{
	return check(fd, want, false);
}

const char *sv_peer_why(int err)
{
	switch (err) {
	case -EACCES:
		return "its address is not the peer's";
	case -EPERM:
		return "it is another user's, on this host";
	case -EAGAIN:
		return "its owner on this host cannot be told (its handshake "
		       "is not complete)";
	case -ENOTCONN:
		return "its owner on this host cannot be told (it is closed)";
	default:
		return "its owner on this host cannot be told (the kernel's "
		       "socket table did not answer)";
	}
}

const char *sv_peer_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	const struct sockaddr_in6 *a6 = (const void *)sa;
	const struct sockaddr_in *a4 = (const void *)sa;
	const void *a = NULL;
	int family = AF_INET;

	if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
		a = &a6->sin6_addr.s6_addr[12];
	} else if (sa->sa_family == AF_INET6) {
		a = &a6->sin6_addr;
		family = AF_INET6;
	} else if (sa->sa_family == AF_INET) {
		a = &a4->sin_addr;
	}
	if (!a || !inet_ntop(family, a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

const char *sv_peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &sl))
		ss.ss_family = AF_UNSPEC;
	return sv_peer_addr_str((struct sockaddr *)&ss, buf, len);
}

bool sv_peer_path_retransmits(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int unacked = -1;

	/* icsk_retransmits: RTOs since data was last acknowledged (a
	 * zero-window probe counts in tcpi_probes and tcpi_backoff, not
	 * here) */
	if (!getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) &&
	    len >= offsetof(struct tcp_info, tcpi_snd_ssthresh))
		return ti.tcpi_retransmits;
	/* no tcp_info: anything not acknowledged is suspect */
	return ioctl(fd, SIOCOUTQ, &unacked) || unacked;
}
