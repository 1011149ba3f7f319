// SPDX-License-Identifier: MIT
/*
 * The RoCEv2 link's sockets: made (sv_roce_udp_socket), read
 * (sv_roce_recv), and shared by the links of one process that have one
 * four-tuple.  A link's
 * socket is bound to our :4791 and connected to the peer's address and
 * the pair's UDP source port (roce_link.h), and the source port comes
 * from the two QPNs in 14 bits: among 100 QP pairs between two hosts,
 * two share a port one run in four.  The kernel then has two sockets
 * for one four-tuple and gives each datagram to one of them; the other
 * link's peer was never answered (ucmatose -c 100 hung both ends).
 *
 * So a link whose four-tuple a link of this process has already takes a
 * duplicate of that link's socket, and the links of one four-tuple (a
 * group) pass each other what they read: whoever reads the socket, under
 * share_lock, puts each datagram whose BTH names another member's QPN in
 * that member's mailbox before it lets go of the lock, and a member
 * empties its mailbox before it reads the socket, under the same lock.
 * Each member's epoll entry sees an arrival only if the datagram is
 * still in the socket when the loop asks (epoll checks again), so whoever
 * fills an empty mailbox rings its owner (sv_pfd_ring), who looks under
 * the lock after it and finds what is its: in the socket or in its
 * mailbox.  Without the ring, a member whose traffic the others read
 * waited for its own timer (an RNR-NAKed send came back 69 ms later, not
 * 10 us).  A full mailbox drops (the peer resends, as for a loss on the
 * wire).
 *
 * Links of other processes cannot share a socket this way, and two
 * sockets of one four-tuple would split its datagrams.  So the first
 * link of a four-tuple in a process claims it: a listening abstract unix
 * socket named after it (per network namespace, as the four-tuple is),
 * which its group's members hold duplicates of.  A link of another
 * process whose bind finds the name taken connects to it instead (both
 * ends check that the other is our user, SO_PEERCRED) and says its QPN:
 * it is relayed.  Whoever of the claiming process takes a datagram,
 * checked, for a QPN that is none of its links' (in.c take) accepts
 * what waits on the claim and keeps the datagram for the connection
 * that said that QPN; at the end of its batch, what it kept for each
 * leaves as one message (sv_roce_share_flush), which the relayed link
 * reads as the socket's GRO bundles.  Nothing waits on the relay: a
 * full connection drops (the peer resends).  When the claiming process lets
 * go (its last link of the four-tuple gone, or the process), the
 * relayed link reads EOF and takes the four-tuple over
 * (sv_roce_share_rejoin): it claims it, or joins a link of its own
 * process that has, or another process that was quicker.  Until then
 * its peer resends.  A NIC would demultiplex by QPN; here the kernel
 * demultiplexes by four-tuple and we do the rest.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "progress.h"
#include "roce_priv.h"

#define MAIL SV_ROCE_MAIL
/* Buckets of the process's links, by source port. */
#define BUCKETS 256u
/* The connections of relayed links of other processes this process
 * holds, at most; and what one says first. */
#define RELAYS	    64u
#define RELAY_MAGIC 0x73767272u
#define NO_QPN	    UINT32_MAX

struct relay_hello {
	uint32_t magic, qpn;
};

/* A relayed link of another process, on the four-tuple (me, peer) we
 * claim: its QPN once it said it (NO_QPN before), its connection, and
 * the datagrams for it read since the reader's batch began (out_n of
 * them, out_len bytes at out, each its length, 2 bytes, and itself),
 * which leave as one message when the batch ends (sv_roce_share_flush)
 * or out is full: one system call, and one buffer of the kernel's, a
 * batch (a message a datagram took 30% of a stream's datagrams to fill
 * the connection's buffer, each a wait for the ACK timer) */
struct relay {
	union sv_sockaddr me, peer;
	uint32_t qpn;
	int fd;
	uint8_t *out;
	uint32_t out_len, out_n;
};

static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv_roce *bucket[BUCKETS];
static struct relay relay[RELAYS];
static uint32_t relays;

static bool same_addr(const union sv_sockaddr *a, const union sv_sockaddr *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return false;
	if (a->sa.sa_family == AF_INET6)
		return a->in6.sin6_port == b->in6.sin6_port &&
		       !memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16);
	return a->in.sin_port == b->in.sin_port &&
	       a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
}

static struct sv_roce **head_of(uint16_t sport)
{
	return &bucket[sport % BUCKETS];
}

int sv_roce_udp_socket(const union sv_sockaddr *addr)
{
	int one = 1, fd = socket(addr->sa.sa_family,
				 SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, &addr->sa, sv_sockaddr_len(addr))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* A control message's room: UDP_GRO's segment size. */
union gro_cmsg {
	char buf[CMSG_SPACE(sizeof(int))];
	struct cmsghdr h;
};

/* Up to SV_ROCE_GRO_MSGS messages of rx_fd into gbuf's buffers, at v,
 * with room for a control message each if c: recvmmsg's count (-1 and
 * errno as it says). */
static int recv_into_gbuf(struct sv_roce *r, struct mmsghdr *m, struct iovec *v,
			  union gro_cmsg *c)
{
	int got;

	for (int i = 0; i < SV_ROCE_GRO_MSGS; i++) {
		v[i].iov_base = r->gbuf + (size_t)i * SV_ROCE_GRO_BUF;
		v[i].iov_len = SV_ROCE_GRO_BUF;
		m[i].msg_hdr =
			(struct msghdr){.msg_iov = &v[i], .msg_iovlen = 1};
		if (c) {
			m[i].msg_hdr.msg_control = c[i].buf;
			m[i].msg_hdr.msg_controllen = sizeof(c[i].buf);
		}
	}
	do
		got = recvmmsg(r->rx_fd, m, SV_ROCE_GRO_MSGS, MSG_DONTWAIT,
			       NULL);
	while (got < 0 && errno == EINTR);
	return got;
}

/* The bundles of a GRO socket into segments at iptr: how many. */
static int recv_gro(struct sv_roce *r)
{
	struct mmsghdr m[SV_ROCE_GRO_MSGS];
	struct iovec v[SV_ROCE_GRO_MSGS];
	union gro_cmsg c[SV_ROCE_GRO_MSGS];
	uint32_t k = 0;
	int got = recv_into_gbuf(r, m, v, c);

	if (got <= 0)
		return 0;
	for (int i = 0; i < got; i++) {
		struct msghdr *h = &m[i].msg_hdr;
		uint8_t *d = v[i].iov_base;
		uint32_t len = m[i].msg_len, seg = len;

		for (struct cmsghdr *x = CMSG_FIRSTHDR(h); x;
		     x = CMSG_NXTHDR(h, x))
			if (x->cmsg_level == SOL_UDP &&
			    x->cmsg_type == UDP_GRO &&
			    x->cmsg_len >= CMSG_LEN(sizeof(int))) {
				int g;

				memcpy(&g, CMSG_DATA(x), sizeof(g));
				if (g > 0 && (uint32_t)g < len)
					seg = (uint32_t)g;
			}
		if (h->msg_flags & MSG_TRUNC)
			seg = len = r->islot + 1; /* none of ours: too long */
		else if (seg < len)
			roce_count(r, roce_gro_reads);
		/* GRO bundles 64 at most, but another process's GSO message
		 * reaches us whole through a veth (up to UDP_MAX_SEGMENTS,
		 * 128 in newer kernels): what finds no room is lost */
		for (uint32_t off = 0; off < len; off += seg) {
			if (k == SV_ROCE_RX_SEGS) {
				roce_count(r, roce_drop_full);
				continue;
			}
			r->iptr[k] = d + off;
			r->ilen[k++] = len - off < seg ? len - off : seg;
		}
	}
	r->inext = 0;
	r->icount = k;
	r->ifull = got == SV_ROCE_GRO_MSGS;
	r->rd.in += k; /* by whom: sv_roce_read_in */
	return (int)k;
}

/* A relayed link's connection: messages of datagrams, each its length
 * (2 bytes) and itself (sv_roce_share_relay), into segments at iptr, as
 * recv_gro's bundles; checked, as the other process is hostile until it
 * is: a length of 0 or past its message ends that message.  How many. */
static int recv_relayed(struct sv_roce *r)
{
	struct mmsghdr m[SV_ROCE_GRO_MSGS];
	struct iovec v[SV_ROCE_GRO_MSGS];
	uint32_t k = 0;
	int got;

	if (!r->gbuf) {
		r->gbuf = malloc((size_t)SV_ROCE_GRO_MSGS * SV_ROCE_GRO_BUF);
		if (!r->gbuf)
			return 0; /* it waits in the connection */
	}
	got = recv_into_gbuf(r, m, v, NULL);
	/* the relay's end: ECONNRESET, or EOF, a message of no bytes */
	if (got < 0 && errno != EAGAIN)
		r->orphan = true;
	for (int i = 0; i < got && !r->orphan; i++) {
		const uint8_t *d = v[i].iov_base;
		uint32_t len = m[i].msg_len, off = 0;
		uint16_t n;

		if (!len)
			r->orphan = true;
		if (m[i].msg_hdr.msg_flags & MSG_TRUNC)
			len = 0; /* none of ours: too long */
		while (len - off > sizeof(n)) {
			memcpy(&n, d + off, sizeof(n));
			off += (uint32_t)sizeof(n);
			if (!n || n > len - off)
				break;
			if (k == SV_ROCE_RX_SEGS)
				roce_count(r, roce_drop_full);
			else {
				r->iptr[k] = (uint8_t *)d + off;
				r->ilen[k++] = n > r->islot ? r->islot + 1 : n;
			}
			off += n;
		}
	}
	r->inext = 0;
	r->icount = k;
	r->ifull = got == SV_ROCE_GRO_MSGS;
	r->rd.in += k; /* by whom: sv_roce_read_in */
	return (int)k;
}

int sv_roce_recv(struct sv_roce *r)
{
	struct mmsghdr m[SV_ROCE_BATCH];
	struct iovec v[SV_ROCE_BATCH];
	int got;

	if (r->relayed)
		return recv_relayed(r);
	if (r->gro)
		return recv_gro(r);
	for (int i = 0; i < SV_ROCE_BATCH; i++) {
		v[i].iov_base = r->iptr[i] = r->ibuf + (size_t)i * r->islot;
		v[i].iov_len = r->islot;
		m[i].msg_hdr =
			(struct msghdr){.msg_iov = &v[i], .msg_iovlen = 1};
	}
	do
		got = recvmmsg(r->rx_fd, m, SV_ROCE_BATCH, MSG_DONTWAIT, NULL);
	while (got < 0 && errno == EINTR);
	if (got <= 0) /* EAGAIN; ECONNREFUSED: an ICMP error, no data */
		return 0;
	for (int i = 0; i < got; i++)
		r->ilen[i] = m[i].msg_hdr.msg_flags & MSG_TRUNC ? r->islot + 1
								: m[i].msg_len;
	r->inext = 0;
	r->icount = (uint32_t)got;
	r->ifull = got == SV_ROCE_BATCH;
	r->rd.in += (uint64_t)got; /* by whom: sv_roce_read_in */
	return got;
}

/* The first link of r's four-tuple but r that holds its socket (not
 * relayed; caller holds share_lock). */
static struct sv_roce *group_of(const struct sv_roce *r)
{
	for (struct sv_roce *o = *head_of(r->sport); o; o = o->snext)
		if (o != r && !o->relayed &&
		    same_addr(&o->key_me, &r->key_me) &&
		    same_addr(&o->key_peer, &r->key_peer))
			return o;
	return NULL;
}

/* The member of r's group whose QP is qpn (caller holds share_lock). */
static struct sv_roce *member(const struct sv_roce *r, uint32_t qpn)
{
	for (struct sv_roce *o = *head_of(r->sport); o; o = o->snext)
		if (o != r && o->my_qpn == qpn && !o->relayed &&
		    same_addr(&o->key_me, &r->key_me) &&
		    same_addr(&o->key_peer, &r->key_peer))
			return o;
	return NULL;
}

/* "ADDR:PORT" of a. */
static void addr_text(const union sv_sockaddr *a, char *buf, size_t n)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (a->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &a->in6.sin6_addr, ip, sizeof(ip));
		snprintf(buf, n, "[%s]:%u", ip, ntohs(a->in6.sin6_port));
	} else {
		inet_ntop(AF_INET, &a->in.sin_addr, ip, sizeof(ip));
		snprintf(buf, n, "%s:%u", ip, ntohs(a->in.sin_port));
	}
}

/* The 18 bytes of a's address (IPv4 mapped) and port, as hex. */
static int addr_hex(const union sv_sockaddr *a, char *out)
{
	uint8_t b[18] = {[10] = 0xff, [11] = 0xff};
	int k = 0;

	if (a->sa.sa_family == AF_INET6) {
		memcpy(b, &a->in6.sin6_addr, 16);
		memcpy(b + 16, &a->in6.sin6_port, 2);
	} else {
		memcpy(b + 12, &a->in.sin_addr, 4);
		memcpy(b + 16, &a->in.sin_port, 2);
	}
	for (int i = 0; i < 18; i++)
		k += sprintf(out + k, "%02x", b[i]);
	return k;
}

/* The abstract name of r's four-tuple's claim, in u: its length. */
static socklen_t claim_name(const struct sv_roce *r, struct sockaddr_un *u)
{
	static const char tag[] = "softverbs-roce ";
	char *at = u->sun_path + 1;
	int n = (int)sizeof(tag) - 1;

	memset(u, 0, sizeof(*u));
	u->sun_family = AF_UNIX;
	memcpy(at, tag, (size_t)n);
	n += addr_hex(&r->key_me, at + n);
	n += addr_hex(&r->key_peer, at + n); /* 1 + 15 + 72 bytes */
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

/* "... <- ..." of r's four-tuple, for what we say of it. */
static void tuple_text(const struct sv_roce *r, char *buf, size_t n)
{
	char me[64], peer[64];

	addr_text(&r->key_me, me, sizeof(me));
	addr_text(&r->key_peer, peer, sizeof(peer));
	snprintf(buf, n, "%s <- %s", me, peer);
}

/* The kernel's word that the other end of the unix socket fd is our
 * user (SO_PEERCRED). */
static bool our_user(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) &&
	       len == sizeof(cr) && (cr.uid == getuid() || cr.uid == geteuid());
}

/* The claim of r's four-tuple for this process: its listening abstract
 * unix socket, or -EADDRINUSE when another process has it. */
static int claim(const struct sv_roce *r)
{
	struct sockaddr_un u;
	socklen_t len = claim_name(r, &u);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&u, len) || listen(fd, RELAYS)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* r relayed by the process that claims its four-tuple: a connection to
 * that claim that has said r's QPN; -ECONNREFUSED if nobody claims it
 * (any more), other -errno said on stderr. */
static int join(const struct sv_roce *r)
{
	struct relay_hello h = {.magic = RELAY_MAGIC, .qpn = r->my_qpn};
	struct sockaddr_un u;
	socklen_t len = claim_name(r, &u);
	char t[160];
	int err, fd = socket(AF_UNIX,
			     SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&u, len))
		err = -errno;
	else if (!our_user(fd))
		err = -EACCES;
	else if (send(fd, &h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h))
		err = -EIO; /* a new connection's first message: room */
	else
		return fd;
	close(fd);
	if (err == -ECONNREFUSED)
		return err;
	tuple_text(r, t, sizeof(t));
	if (err == -EAGAIN) /* its backlog is full: none of ours */
		err = -EADDRINUSE;
	fprintf(stderr,
		"softverbs: qp %06x: RoCEv2: the QP pairs on %s (one UDP "
		"source port) are another process's, which cannot relay "
		"ours: %s\n",
		r->my_qpn, t,
		err == -EACCES ? "it is not our user" : strerror(-err));
	return err;
}

/* me as the kernel will have it once a socket bound to it connects to
 * peer: a wildcard address becomes the one the route to peer gives (two
 * links, one bound to our address and one to the wildcard, have one
 * four-tuple once connected). */
static void local_of(const union sv_sockaddr *me, const union sv_sockaddr *peer,
		     union sv_sockaddr *out)
{
	static const uint8_t any6[16];
	union sv_sockaddr got;
	socklen_t len = sizeof(got);
	bool any = me->sa.sa_family == AF_INET6
			   ? !memcmp(&me->in6.sin6_addr, any6, 16)
			   : me->in.sin_addr.s_addr == htonl(INADDR_ANY);
	int fd;

	*out = *me;
	if (!any)
		return;
	fd = socket(peer->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (!connect(fd, &peer->sa, sv_sockaddr_len(peer)) &&
	    !getsockname(fd, &got.sa, &len) &&
	    got.sa.sa_family == me->sa.sa_family) {
		if (got.sa.sa_family == AF_INET6)
			out->in6.sin6_addr = got.in6.sin6_addr;
		else
			out->in.sin_addr = got.in.sin_addr;
	}
	close(fd);
}

/* A new socket of r's four-tuple: bound to bind_me, connected to
 * key_peer; -errno. */
static int own_socket(const struct sv_roce *r)
{
	int rcv = 4 << 20, fd = sv_roce_udp_socket(&r->bind_me);

	if (fd < 0)
		return fd;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	if (connect(fd, &r->key_peer.sa, sv_sockaddr_len(&r->key_peer))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* r's receive socket in *fd and its claim in *lock (-1: relayed), as
 * sv_roce_share_open says (caller holds share_lock); -errno. */
static int open_rx(struct sv_roce *r, int *fd, int *lock)
{
	struct sv_roce *o = group_of(r);

	r->relayed = false;
	if (o) {
		*lock = fcntl(o->claim_fd, F_DUPFD_CLOEXEC, 0);
		if (*lock < 0)
			return -errno;
		*fd = fcntl(o->rx_fd, F_DUPFD_CLOEXEC, 0);
		if (*fd < 0) {
			int err = -errno;

			close(*lock);
			return err;
		}
		/* the whole group: o's older members are shared already,
		 * o itself may not be */
		atomic_store_explicit(&o->shared, true, memory_order_release);
		atomic_store_explicit(&r->shared, true, memory_order_release);
		return 0;
	}
	/* claimed, or relayed; a claim let go of between our bind and our
	 * connect is claimed again */
	for (int tries = 0; tries < 4; tries++) {
		*lock = claim(r);
		if (*lock >= 0) {
			*fd = own_socket(r);
			if (*fd >= 0)
				return 0;
			close(*lock);
			return *fd;
		}
		if (*lock != -EADDRINUSE)
			return *lock;
		*fd = join(r);
		if (*fd >= 0) {
			*lock = -1;
			r->relayed = true;
			return 0;
		}
		if (*fd != -ECONNREFUSED)
			return *fd;
	}
	return -EADDRINUSE;
}

int sv_roce_share_open(struct sv_roce *r, const union sv_sockaddr *me,
		       const union sv_sockaddr *peer, uint16_t sport)
{
	int fd, lock, err;

	local_of(me, peer, &r->key_me);
	r->key_peer = *peer;
	r->bind_me = *me;
	r->sport = sport;
	pthread_mutex_lock(&share_lock);
	err = open_rx(r, &fd, &lock);
	if (!err) {
		r->rx_fd = fd;
		r->claim_fd = lock;
		r->snext = *head_of(sport);
		*head_of(sport) = r;
		r->listed = true;
	}
	pthread_mutex_unlock(&share_lock);
	return err;
}

/* Relay i goes, the rest kept in the order they came: the first to
 * say a QPN has it (caller holds share_lock). */
static void relay_drop(uint32_t i)
{
	close(relay[i].fd);
	free(relay[i].out);
	relays--;
	memmove(&relay[i], &relay[i + 1], (relays - i) * sizeof(relay[0]));
}

void sv_roce_share_close(struct sv_roce *r)
{
	if (!r->listed)
		return;
	pthread_mutex_lock(&share_lock);
	for (struct sv_roce **p = head_of(r->sport); *p; p = &(*p)->snext)
		if (*p == r) {
			*p = r->snext;
			break;
		}
	r->listed = false;
	if (r->claim_fd >= 0)
		close(r->claim_fd);
	r->claim_fd = -1;
	/* the process's last link of the four-tuple let go of it (the
	 * claim's name is free): the relayed links of other processes read
	 * EOF and take it over */
	for (uint32_t i = 0; !r->relayed && !group_of(r) && i < relays;) {
		if (same_addr(&relay[i].me, &r->key_me) &&
		    same_addr(&relay[i].peer, &r->key_peer))
			relay_drop(i);
		else
			i++;
	}
	free(r->mail);
	r->mail = NULL;
	atomic_store_explicit(&r->mail_n, 0, memory_order_relaxed);
	pthread_mutex_unlock(&share_lock);
}

int sv_roce_share_rejoin(struct sv_roce *r)
{
	int fd = -1, lock = -1, err;

	pthread_mutex_lock(&share_lock);
	err = r->listed ? open_rx(r, &fd, &lock) : -EBADF;
	if (err) {
		/* deaf: a socket nothing reaches, where the dead connection
		 * would say EOF at every read; the peer's retries, and ours,
		 * run out */
		r->relayed = true;
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    0);
	}
	if (fd >= 0 && dup3(fd, r->rx_fd, O_CLOEXEC) < 0 && !err)
		err = -errno;
	if (fd >= 0)
		close(fd);
	if (!err)
		r->claim_fd = lock; /* a relayed link had none */
	else if (lock >= 0)
		close(lock);
	r->orphan = false;
	pthread_mutex_unlock(&share_lock);
	return err;
}

/* The relay of QPN qpn on r's four-tuple, or -1 (caller holds
 * share_lock). */
static int relay_find(const struct sv_roce *r, uint32_t qpn)
{
	for (uint32_t i = 0; i < relays; i++)
		if (relay[i].qpn == qpn &&
		    same_addr(&relay[i].me, &r->key_me) &&
		    same_addr(&relay[i].peer, &r->key_peer))
			return (int)i;
	return -1;
}

/* Takes the connections waiting on r's claim, and the QPNs they say
 * (caller holds share_lock).  A connection of another user is refused
 * by the kernel's word (SO_PEERCRED), one past RELAYS, or that says
 * anything but one hello with a QPN nobody here has said, is closed. */
static void admit(const struct sv_roce *r)
{
	static bool said;
	int room = 4 << 20;

	for (int k = 0; k < (int)RELAYS; k++) {
		int fd = accept4(r->claim_fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			break; /* none waits; or out of fds: another time */
		if (!our_user(fd) || relays == RELAYS) {
			if (relays == RELAYS && !said) {
				said = true;
				fprintf(stderr,
					"softverbs: RoCEv2: %u QP pairs of "
					"other processes relayed here "
					"already: no more\n",
					RELAYS);
			}
			close(fd);
			continue;
		}
		/* the relay's room: what our socket holds (SO_RCVBUF), as
		 * far as the kernel lets us (wmem_max) */
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &room, sizeof(room));
		relay[relays++] = (struct relay){.me = r->key_me,
						 .peer = r->key_peer,
						 .qpn = NO_QPN,
						 .fd = fd};
	}
	for (uint32_t i = 0; i < relays;) {
		struct relay_hello h[2];
		ssize_t n;

		if (relay[i].qpn != NO_QPN ||
		    !same_addr(&relay[i].me, &r->key_me) ||
		    !same_addr(&relay[i].peer, &r->key_peer)) {
			i++;
			continue;
		}
		n = recv(relay[i].fd, h, sizeof(h), MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN) {
			i++; /* connected, not said yet */
			continue;
		}
		if (n == (ssize_t)sizeof(h[0]) && h[0].magic == RELAY_MAGIC &&
		    h[0].qpn <= 0xffffff && relay_find(r, h[0].qpn) < 0) {
			relay[i++].qpn = h[0].qpn;
			continue;
		}
		relay_drop(i);
	}
}

/* Relay i's waiting datagrams leave as one message, counted in r's
 * counters; false if it hung up (it is gone: i is the next one's).
 * Caller holds share_lock. */
static bool relay_send(struct sv_roce *r, uint32_t i)
{
	struct relay *x = &relay[i];
	ssize_t k;

	if (!x->out_len)
		return true;
	k = send(x->fd, x->out, x->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (k < 0 && errno != EAGAIN && errno != ENOBUFS) {
		relay_drop(i);
		return false;
	}
	if (k == (ssize_t)x->out_len)
		sv_stats_add(r->stats, roce_passed, x->out_n);
	else /* full: lost, as on a wire; the peer resends */
		sv_stats_add(r->stats, roce_drop_full, x->out_n);
	x->out_len = x->out_n = 0;
	return true;
}

/* d, n bytes, kept for relay i's next message, which goes first if d
 * would not fit; false if the relay hung up (it is gone).  Caller holds
 * share_lock. */
static bool relay_keep(struct sv_roce *r, uint32_t i, const uint8_t *d,
		       uint32_t n)
{
	struct relay *x = &relay[i];
	uint16_t len = (uint16_t)n;

	if (x->out_len + sizeof(len) + n > SV_ROCE_RELAY_MSG &&
	    !relay_send(r, i))
		return false;
	if (!x->out && !(x->out = malloc(SV_ROCE_RELAY_MSG))) {
		roce_count(r, roce_drop_full); /* lost, as on a wire */
		return true;
	}
	memcpy(x->out + x->out_len, &len, sizeof(len));
	memcpy(x->out + x->out_len + sizeof(len), d, n);
	x->out_len += (uint32_t)sizeof(len) + n;
	x->out_n++;
	r->relay_owed = true;
	return true;
}

bool sv_roce_share_relay(struct sv_roce *r, const uint8_t *d, uint32_t n,
			 uint32_t qpn)
{
	bool went;
	int i;

	if (r->claim_fd < 0 || n > SV_ROCE_RELAY_MSG - sizeof(uint16_t))
		return false; /* relayed ourselves: nobody is relayed here */
	pthread_mutex_lock(&share_lock);
	i = relay_find(r, qpn);
	if (i < 0) {
		admit(r);
		i = relay_find(r, qpn);
	}
	went = i >= 0 && relay_keep(r, (uint32_t)i, d, n);
	pthread_mutex_unlock(&share_lock);
	return went;
}

void sv_roce_share_flush(struct sv_roce *r)
{
	if (!r->relay_owed)
		return;
	r->relay_owed = false;
	pthread_mutex_lock(&share_lock);
	for (uint32_t i = 0; i < relays;)
		if (!relay[i].out_len || !same_addr(&relay[i].me, &r->key_me) ||
		    !same_addr(&relay[i].peer, &r->key_peer) ||
		    relay_send(r, i))
			i++;
	pthread_mutex_unlock(&share_lock);
}

/* A datagram of n bytes into o's mailbox; false if it is full (caller
 * holds share_lock). */
static bool mail_put(struct sv_roce *o, const uint8_t *d, uint32_t n)
{
	uint32_t k = atomic_load_explicit(&o->mail_n, memory_order_relaxed);

	if (!o->mail)
		o->mail = malloc((size_t)MAIL * o->islot);
	if (!o->mail || k == MAIL || n > o->islot)
		return false;
	k = (o->mail_head + k) % MAIL;
	memcpy(o->mail + (size_t)k * o->islot, d, n);
	o->mail_len[k] = n;
	atomic_fetch_add_explicit(&o->mail_n, 1, memory_order_relaxed);
	return true;
}

/* Our mailbox into our slots (caller holds share_lock): how many. */
static uint32_t mail_take(struct sv_roce *r)
{
	uint32_t k = atomic_load_explicit(&r->mail_n, memory_order_relaxed);

	if (k > SV_ROCE_BATCH)
		k = SV_ROCE_BATCH;
	for (uint32_t i = 0; i < k; i++) {
		uint32_t at = (r->mail_head + i) % MAIL;

		r->iptr[i] = r->ibuf + (size_t)i * r->islot;
		memcpy(r->iptr[i], r->mail + (size_t)at * r->islot,
		       r->mail_len[at]);
		r->ilen[i] = r->mail_len[at];
	}
	r->mail_head = (r->mail_head + k) % MAIL;
	atomic_fetch_sub_explicit(&r->mail_n, k, memory_order_relaxed);
	r->inext = 0;
	r->icount = k;
	return k;
}

/* The destination QPN in a datagram's BTH (bytes 5-7), or our own when it has
 * none (too short: the parser drops it as ours). */
static uint32_t dqpn_of(const struct sv_roce *r, const uint8_t *d, uint32_t n)
{
	if (n < SV_ROCE_BTH || n > r->islot)
		return r->my_qpn;
	return (uint32_t)d[5] << 16 | (uint32_t)d[6] << 8 | d[7];
}

bool sv_roce_share_read(struct sv_roce *r)
{
	bool more;
	int got;

	pthread_mutex_lock(&share_lock);
	if (mail_take(r)) {
		pthread_mutex_unlock(&share_lock);
		return true; /* the socket next */
	}
	got = sv_roce_recv(r);
	for (int i = 0; i < got; i++) {
		uint8_t *d = r->iptr[i];
		uint32_t q = dqpn_of(r, d, r->ilen[i]);
		struct sv_roce *o = q == r->my_qpn ? NULL : member(r, q);

		if (!o)
			continue; /* ours, or nobody's: take() judges */
		if (mail_put(o, d, r->ilen[i])) {
			roce_count(r, roce_passed);
			/* its first: its owner is told (the socket's edge
			 * may never say: epoll reports only what is still
			 * there to read).  o is listed, so its QP and context
			 * live while we hold share_lock */
			if (atomic_load_explicit(&o->mail_n,
						 memory_order_relaxed) == 1)
				sv_pfd_ring(o->ctx, o->pfd);
		} else
			roce_count(r, roce_drop_full);
		r->ilen[i] = SV_ROCE_GONE;
	}
	more = got > 0 && r->ifull;
	pthread_mutex_unlock(&share_lock);
	return more;
}
