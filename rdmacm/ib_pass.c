// SPDX-License-Identifier: MIT
/*
 * The IB CM's MADs that the kernel gave the wrong process of the host
 * (issue 26), passed to the one they are for.  Over RoCEv2 each process
 * is its own CM (ib_link.c), and the kernel picks which socket on UDP
 * 4791 gets a datagram, knowing nothing of comm IDs:
 *  - two processes talking to one peer address hold one 4-tuple (two
 *    connected sockets, (ours, 4791) to (peer, 0xd872)), and the kernel
 *    gives every MAD of it to one of them;
 *  - a peer's first REQ is unconnected: the reuseport group picks one
 *    member, a listener of another process or its UD door
 *    (provider/transport/ud/roce_ud.c), or a process that talks to that
 *    peer already (its connected socket).
 * So each process names what it owns in the abstract Unix namespace
 * (provider/wire/cm_pass.h): its comm IDs, whose top 16 bits are a
 * prefix it holds on the host by binding "softverbs/cm/id/PPPP" (one
 * bind: no two processes hand out one comm ID, and the prefix says whose
 * a MAD is), and each listener's service (port space, port, address).
 * A MAD no id of ours takes goes there as one datagram with where it came
 * from and to, MSG_DONTWAIT (a full queue loses it, as a wire would; the
 * peer resends).  A MAD of our own prefix, or one that came passed, is
 * never passed (no loops: it goes to one owner, once).
 *
 * The owner trusts nothing in it.  The sender must be our user (SO_
 * PASSCRED: the kernel's SCM_CREDENTIALS, which the sender cannot forge;
 * our real or effective uid, as the UD and XRC sockets take,
 * provider/transport/link.c sv_link_sender_ok): a process of another
 * user could otherwise say a MAD came from any peer address, which it
 * cannot send from on the wire.  SO_PEERCRED does not apply (unconnected
 * datagrams from anyone).  The header must be whole and agree with the
 * MAD (the key it was sent by is recomputed from the MAD: our prefix on
 * our comm IDs' socket, the listener's service on its own); then the
 * datagram is read as from the wire (cm_ib_take: the RoCEv2 codec and
 * the MAD's checks) and goes where a MAD on our own socket goes, except
 * that it goes no further.  What a stranger can make us hold: nothing;
 * each datagram is read, checked and dropped or run in place, at most
 * PASS_BATCH per wake-up (the kernel's queue, max_dgram_qlen and the
 * socket's buffer, bounds the rest); fds sent with one are closed.
 * A name held by a process of another user: we pick another prefix; a
 * listener's service squatted is said (SOFTVERBS_DEBUG) and its REQs
 * that reach another process are lost to that name's holder, which could
 * read them from the wire anyway (RoCE has no secrecy).
 * Counted: cm_mad_passed, _pass_lost, _pass_recv, _drop_pass (ib_stat.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cm.h"
#include "cm_pass.h" /* provider/wire/cm_pass.h: the names, the header */
#include "ib_link.h"
#include "ib_stat.h"
#include "link.h" /* provider/transport/link.h: sv_link_sender_ok */

#define PASS_TRIES 64 /* prefixes tried before going without a name */
#define PASS_BATCH 64 /* datagrams read per wake-up (level-triggered) */

static int id_fd = -1;	/* our comm IDs' name, bound */
static bool id_tried;	/* the prefix is picked */
static uint16_t prefix; /* the top 16 bits of our comm IDs */
static int out_fd = -1; /* unbound: what we pass leaves by */

/* An abstract datagram socket bound to a, with SO_PASSCRED, in the CM
 * thread's epoll (CM_TAG_IB_PASS | tag): its fd or -errno. */
static int bound(const struct sockaddr_un *a, socklen_t alen, uint64_t tag)
{
	struct epoll_event ev = {.events = EPOLLIN,
				 .data.u64 = CM_TAG_IB_PASS | tag};
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int on = 1;

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) ||
	    bind(fd, (const struct sockaddr *)a, alen) ||
	    epoll_ctl(cm_core.epfd, EPOLL_CTL_ADD, fd, &ev)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

uint16_t cm_ib_pass_prefix(void)
{
	struct sockaddr_un a;
	int fd = -EADDRINUSE;

	if (id_tried)
		return prefix;
	id_tried = true;
	for (int i = 0; i < PASS_TRIES && fd == -EADDRINUSE; i++) {
		if (getrandom(&prefix, sizeof(prefix), GRND_NONBLOCK) !=
		    sizeof(prefix))
			prefix = (uint16_t)(cm_now_ms() ^ (uint64_t)getpid() ^
					    (uint64_t)i << 8);
		fd = bound(&a, sv_cm_pass_id_addr(&a, prefix), 0);
	}
	if (fd < 0)
		cm_log("IB CM: no name for our comm IDs (%s): MADs for them "
		       "that reach another process are lost there\n",
		       strerror(-fd));
	else
		id_fd = fd;
	return prefix;
}

bool cm_ib_pass(const struct cm_ib_rx *rx)
{
	struct sv_cm_pass_key k;
	int ret;

	if (rx->passed)
		return false; /* passed once: no further */
	k = sv_cm_pass_key_of(rx->b, rx->n);
	if (k.by == SV_CM_PASS_NONE ||
	    (k.by == SV_CM_PASS_BY_ID && id_tried && k.id >> 16 == prefix))
		return false; /* ours (gone), or names nobody */
	if (out_fd < 0)
		out_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ret = sv_cm_pass_send(out_fd, &k, rx->b, rx->n, rx->from, rx->to);
	if (ret == -ECONNREFUSED || ret == -ENOENT)
		return false; /* no process has it: the caller's to drop */
	if (ret) {
		cm_ib_count(CM_IB_PASS_LOST);
		cm_log("IB CM MAD for %s 0x%x: another process's, lost on "
		       "the way: %s\n",
		       k.by == SV_CM_PASS_BY_ID ? "comm ID" : "port",
		       k.by == SV_CM_PASS_BY_ID ? k.id : k.port,
		       strerror(-ret));
		return true;
	}
	cm_ib_count(CM_IB_PASSED);
	cm_log("IB CM MAD for %s 0x%x: passed to the process that has it\n",
	       k.by == SV_CM_PASS_BY_ID ? "comm ID" : "port",
	       k.by == SV_CM_PASS_BY_ID ? k.id : k.port);
	return true;
}

int cm_ib_pass_listen(struct cm_id *l)
{
	struct sockaddr_un a;
	socklen_t alen = sv_cm_pass_service_addr(&a, (uint16_t)l->id.ps,
						 ntohs(cm_ib_src(l)->sin_port),
						 cm_ib_src(l)->sin_addr.s_addr);
	int fd = bound(&a, alen, l->serial);

	if (fd < 0) {
		cm_log("id %p: the listener's name for REQs other processes "
		       "get (%s): %s\n",
		       (void *)l, a.sun_path + 1, strerror(-fd));
		return fd;
	}
	l->ib_pass_fd = fd;
	return 0;
}

void cm_ib_pass_unlisten(struct cm_id *l)
{
	if (l->ib_pass_fd < 0)
		return;
	epoll_ctl(cm_core.epfd, EPOLL_CTL_DEL, l->ib_pass_fd, NULL);
	close(l->ib_pass_fd);
	l->ib_pass_fd = -1;
}

/* The sender's credentials in m are our user's (sv_link_sender_ok);
 * fds it sent are closed. */
static bool sender_ours(struct msghdr *m)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue; /* none are taken */
		for (size_t j = 0; j < k; j++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + j * sizeof(int), sizeof(fd));
			close(fd);
		}
	}
	return sv_link_sender_ok(m);
}

/* A passed datagram: h then its datagram (n bytes in all), sent to the
 * socket of listener l (NULL: our comm IDs'): NULL if it may be read as a
 * MAD, else why not. */
static const char *pass_refused(const struct sv_cm_pass_hdr *h, ssize_t n,
				const struct cm_id *l)
{
	struct sv_cm_pass_key k;

	if (n < (ssize_t)sizeof(*h) || h->magic != SV_CM_PASS_MAGIC ||
	    h->version != SV_CM_PASS_VERSION)
		return "not a passed MAD (length, magic, version)";
	if (h->len != (size_t)n - sizeof(*h) || h->len > SV_CM_PASS_PKT_MAX ||
	    !h->from || !h->to)
		return "a malformed header (length, addresses)";
	k = sv_cm_pass_key_of((const uint8_t *)(h + 1), h->len);
	if (k.by != h->by || k.by == SV_CM_PASS_NONE)
		return "not a CM MAD that names its owner as it says";
	if (!l &&
	    (k.by != SV_CM_PASS_BY_ID || !id_tried || k.id >> 16 != prefix))
		return "not one of our comm IDs";
	if (l && (k.by != SV_CM_PASS_BY_SERVICE || k.ps != (uint16_t)l->id.ps ||
		  k.port != ntohs(cm_ib_src(l)->sin_port)))
		return "not this listener's service";
	return NULL;
}

/* One datagram from pass socket fd (of listener serial, 0: our comm
 * IDs'): checked, run or dropped.  false when none was waiting. */
static bool pass_one(int fd, uint64_t serial)
{
	union {
		char buf[CMSG_SPACE(sizeof(struct ucred)) +
			 CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct {
		struct sv_cm_pass_hdr h;
		uint8_t b[SV_CM_PASS_PKT_MAX];
	} m;
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	struct cm_id *l = serial ? cm_id_find(serial) : NULL;
	const char *why = NULL;
	struct cm_mad d;

	if (n < 0)
		return errno == EINTR;
	if (!sender_ours(&mh))
		why = "the sender is not our user";
	else if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		why = "too long";
	else if (serial && (!l || l->ib_pass_fd != fd))
		why = "its listener is gone";
	else
		why = pass_refused(&m.h, n, l);
	if (why) {
		cm_ib_count(CM_IB_DROP_PASS);
		cm_log("IB CM: a MAD passed to us by another process: %s: "
		       "dropped\n",
		       why);
		return true;
	}
	cm_ib_count(CM_IB_PASS_RECV);
	if (cm_ib_take(m.b, m.h.len, &d)) {
		struct cm_ib_rx rx = {m.b, m.h.len, m.h.from, m.h.to, true};

		cm_ib_passed(&d, &rx, m.h.by == SV_CM_PASS_BY_SERVICE);
	}
	return true;
}

void cm_ib_pass_read(uint64_t serial)
{
	for (int i = 0; i < PASS_BATCH; i++) {
		struct cm_id *l = serial ? cm_id_find(serial) : NULL;
		int fd = serial ? (l ? l->ib_pass_fd : -1) : id_fd;

		if (fd < 0 || !pass_one(fd, serial))
			return;
	}
}
