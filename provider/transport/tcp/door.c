// SPDX-License-Identifier: MIT
/*
 * The TCP transport's door: the context's listener on the well-known
 * port, shared by every process of the user on the host (SO_REUSEPORT).
 * It reads a caller's hello and passes the socket to the QP it names,
 * through that QP's Unix socket (link.c takes it, SV_MSG_TCP), or answers
 * that there is no such QP; and it keeps the context's TCP state
 * (struct sv_tcp_ctx).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "auth.h"
#include "crc32c.h"
#include "peer.h"
#include "progress.h"
#include "tcp_priv.h"

/*
 * The door: the context's listener on the well-known port.  A caller
 * must say hello within SV_HELLO_WAIT_NS.  While the table of callers not
 * heard yet is full, the rest wait in the kernel's accept queue; a caller
 * silent for DOOR_EVICT_NS gives its place to the next one, so a flood of
 * silent callers costs a few fds and delays a caller by that much, never
 * our progress.  (Dropping the oldest at once, as before, made a burst of
 * honest callers (thousands of QPs connecting at once) drop each other
 * before their hellos could be read.)
 */
#define DOOR_PENDING  128
#define DOOR_EVICT_NS 200000000ull
/* Callers taken per turn of the loop: the rest wait in the accept queue
 * for the next turn, so that the thread's other work (this process's own
 * callers reading their answers, its QPs) runs between.  Taking a whole
 * queue at once was one callback of 0.35-0.45 s with 4,096 pairs calling
 * (each caller an accept, a read, an answer and a hand-off), longer than
 * the callers' own wait for an answer. */
#define DOOR_BATCH 16

struct door_pend {
	struct sv_pfd pfd;
	uint64_t since;
	uint32_t got;
	struct sv_tcp_hello h;
};

struct sv_tcp_door {
	struct sv_pfd lfd;
	bool queued; /* callers left in the accept queue: the table was full
		      * (the listener is edge-triggered: accept again when a
		      * place frees, not on its next event) */
	struct door_pend pend[DOOR_PENDING];
	int spare[2]; /* given up for an accept and a forward when the
		       * process is out of fds, so that callers are
		       * answered, not left waiting */
};

static struct sv_tcp_ctx *tcp_ctx(struct sv_context *ctx)
{
	return atomic_load_explicit(&ctx->tp_state[SV_TP_TCP],
				    memory_order_acquire);
}

static struct sv_tcp_door *door_of(struct sv_context *ctx)
{
	struct sv_tcp_ctx *tc = tcp_ctx(ctx);

	return tc ? atomic_load_explicit(&tc->door, memory_order_acquire)
		  : NULL;
}

static void door_spares(struct sv_tcp_door *d)
{
	for (int i = 0; i < 2; i++)
		if (d->spare[i] < 0)
			d->spare[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* A spare fd given up, for a call that failed for want of one. */
static bool give_spare(struct sv_tcp_door *d, int i)
{
	if (errno != EMFILE || d->spare[i] < 0)
		return false;
	close(d->spare[i]);
	d->spare[i] = -1;
	return true;
}

/* The door's socket: IPv6 and IPv4 on one (dual-stack, IPV6_V6ONLY off:
 * an IPv4 caller arrives v4-mapped), or IPv4 only where the kernel has
 * no IPv6.  SO_REUSEPORT: every process of the user shares the port.
 * The fd, or -1 and errno. */
static int door_socket(void)
{
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons(sv_transport_port()),
				  .sin6_addr = IN6ADDR_ANY_INIT};
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(sv_transport_port()),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	int one = 1, off = 0, fd, err;
	bool v6 = true;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off))) {
		if (fd >= 0)
			close(fd);
		v6 = false;
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    0);
	}
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if ((v6 ? bind(fd, (struct sockaddr *)&a6, sizeof(a6))
		: bind(fd, (struct sockaddr *)&a, sizeof(a))) ||
	    listen(fd, SOMAXCONN)) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

static void door_io(struct sv_io *io, uint32_t revents);

struct sv_tcp_ctx *sv_tcp_door_open(struct sv_context *ctx, bool *opened)
{
	static atomic_bool said;
	struct sv_tcp_door *d;
	struct sv_tcp_ctx *tc;
	int fd;

	*opened = false;
	/* the secret read and its keys derived now (at RTR), not in the
	 * first set-up: 5-6 ms more for a first connection across two
	 * namespaces when they were (bench/tcp_trust.sh) */
	sv_auth_on();
	pthread_mutex_lock(&ctx->door_lock);
	tc = tcp_ctx(ctx);
	if (!tc) {
		tc = calloc(1, sizeof(*tc));
		if (!tc)
			goto out;
		atomic_store_explicit(&ctx->tp_state[SV_TP_TCP], tc,
				      memory_order_release);
	}
	if (atomic_load(&tc->door) || tc->failed)
		goto out;
	fd = door_socket();
	if (fd < 0)
		goto fail;
	d = calloc(1, sizeof(*d));
	if (!d) {
		close(fd);
		goto fail;
	}
	sv_pfd_set(&d->lfd, door_io, true);
	d->spare[0] = d->spare[1] = -1;
	door_spares(d);
	for (int i = 0; i < DOOR_PENDING; i++) {
		sv_pfd_set(&d->pend[i].pfd, door_io, true);
		d->pend[i].pfd.fd = -1;
	}
	atomic_store_explicit(&tc->door, d, memory_order_release);
	sv_progress_add(ctx, &d->lfd, fd);
	*opened = true;
	goto out;
fail:
	tc->failed = true;
	if (!atomic_exchange(&said, true))
		fprintf(stderr,
			"softverbs: cannot listen on TCP port %u (%s): QPs of "
			"this process cannot be reached from other hosts; "
			"another user's programs may hold it: set "
			"SOFTVERBS_TCP_PORT on both hosts\n",
			sv_transport_port(), strerror(errno));
out:
	pthread_mutex_unlock(&ctx->door_lock);
	return tc;
}

static void pend_drop(struct sv_context *ctx, struct door_pend *p)
{
	int fd = p->pfd.fd;

	sv_progress_del(ctx, &p->pfd);
	if (fd >= 0)
		close(fd);
}

/* A place among the context's calls at the doors (CALLS_MAX), or false:
 * the call waits for one. */
bool sv_tcp_call_admit(struct sv_tcp *t)
{
	if (t->admitted)
		return true;
	if (atomic_fetch_add_explicit(&t->tctx->calls, 1,
				      memory_order_relaxed) >= CALLS_MAX) {
		atomic_fetch_sub_explicit(&t->tctx->calls, 1,
					  memory_order_relaxed);
		return false;
	}
	t->admitted = true;
	return true;
}

/* The call left the doors (passed on, answered, given up): its place
 * is the next call's. */
void sv_tcp_call_leave(struct sv_tcp *t)
{
	if (!t->admitted)
		return;
	t->admitted = false;
	atomic_fetch_sub_explicit(&t->tctx->calls, 1, memory_order_relaxed);
}

/* After the progress thread stopped (its epoll set is gone). */
void sv_tcp_door_close(struct sv_context *ctx)
{
	struct sv_tcp_ctx *tc = tcp_ctx(ctx);
	struct sv_tcp_door *d = tc ? atomic_load(&tc->door) : NULL;

	if (tc)
		atomic_store(&ctx->tp_state[SV_TP_TCP], NULL);
	free(tc);
	if (!d)
		return;
	for (int i = 0; i < DOOR_PENDING; i++)
		if (d->pend[i].pfd.fd >= 0)
			close(d->pend[i].pfd.fd);
	for (int i = 0; i < 2; i++)
		if (d->spare[i] >= 0)
			close(d->spare[i]);
	if (d->lfd.fd >= 0)
		close(d->lfd.fd);
	free(d);
}

/* Passes a caller to the QP it asked for, through that QP's socket
 * (taken by link.c's accept, SV_MSG_TCP); else answers why not.  Every
 * well-formed hello is answered PASSED first, and a QP that does not
 * exist then NO_QP: the same bytes a QP that refuses the caller sends
 * (sv_tcp_take), so the door tells nobody which QPs exist. */
static void forward(struct sv_tcp_door *d, int fd, const struct sv_tcp_hello *h)
{
	struct sv_hello m = {.magic = SV_HELLO_MAGIC,
			     .version = SV_HELLO_VERSION,
			     .type = SV_MSG_TCP,
			     .src_qpn = h->src_qpn,
			     .dst_qpn = h->dst_qpn};
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov[2] = {{&m, sizeof(m)}, {(void *)h, sizeof(*h)}};
	struct msghdr msg = {.msg_iov = iov,
			     .msg_iovlen = 2,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	struct sockaddr_un a;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	int s;

	if (!sv_tcp_answer(fd, SV_TCP_PASSED)) {
		/* the caller gave up (reset) after its hello came: its
		 * QP would only find it gone */
		sv_dbg("tcp door: QP %06x's caller left before its answer\n",
		       h->dst_qpn);
		return;
	}
	s = socket(AF_UNIX, SV_LINK_SOCK | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0 && give_spare(d, 1))
		s = socket(AF_UNIX, SV_LINK_SOCK | SOCK_NONBLOCK | SOCK_CLOEXEC,
			   0);
	if (s < 0) {
		sv_tcp_answer(fd, SV_TCP_BUSY);
		return;
	}
	if (connect(s, (struct sockaddr *)&a,
		    sv_link_qp_addr(&a, h->dst_qpn))) {
		sv_tcp_answer(fd, errno == EAGAIN ? SV_TCP_BUSY : SV_TCP_NO_QP);
		goto out;
	}
	/* the name is anyone's: only a QP of our user gets our callers */
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len) ||
	    cr.uid != getuid()) {
		sv_tcp_answer(fd, SV_TCP_NO_QP);
		goto out;
	}
	memset(&u, 0, sizeof(u));
	u.c.cmsg_level = SOL_SOCKET;
	u.c.cmsg_type = SCM_RIGHTS;
	u.c.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&u.c), &fd, sizeof(int));
	if (sendmsg(s, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		sv_tcp_answer(fd, SV_TCP_BUSY);
out:
	close(s);
}

static void pend_read(struct sv_context *ctx, struct sv_tcp_door *d,
		      struct door_pend *p)
{
	ssize_t n = recv(p->pfd.fd, (uint8_t *)&p->h + p->got,
			 sizeof(p->h) - p->got, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		pend_drop(ctx, p);
		return;
	}
	p->got += (uint32_t)n;
	/* magic and version sit where every version has them: a caller of
	 * another version is told so, not left to wait for its answer */
	if (p->got >= 8 && p->h.magic == SV_TCP_MAGIC &&
	    p->h.version != SV_TCP_VERSION) {
		sv_dbg("tcp door: a hello of version %u: refused\n",
		       p->h.version);
		sv_tcp_answer(p->pfd.fd, SV_TCP_VERSION_REFUSED);
		pend_drop(ctx, p);
		return;
	}
	if (p->got < sizeof(p->h))
		return;
	if (sv_tcp_hello_ok(&p->h) && p->h.dst_qpn <= SV_PSN_MASK &&
	    p->h.src_qpn <= SV_PSN_MASK) {
		/* with a secret, a caller without it learns nothing more */
		if (sv_tcp_hello_secret_ok(&p->h, p->pfd.fd))
			forward(d, p->pfd.fd, &p->h);
		else
			sv_tcp_answer(p->pfd.fd, SV_TCP_SECRET_REFUSED);
	}
	pend_drop(ctx, p); /* the QP holds its own copy now */
}

/* A free place for a caller, else the oldest caller's if it has been
 * silent for DOOR_EVICT_NS, else NULL (the table is full of callers that
 * may yet speak). */
static struct door_pend *door_place(struct sv_tcp_door *d, uint64_t now)
{
	struct door_pend *old = NULL;

	for (int i = 0; i < DOOR_PENDING; i++) {
		if (d->pend[i].pfd.fd < 0)
			return &d->pend[i];
		if (!old || d->pend[i].since < old->since)
			old = &d->pend[i];
	}
	return sv_ns_since(now, old->since) >= DOOR_EVICT_NS ? old : NULL;
}

static void door_accept(struct sv_context *ctx, struct sv_tcp_door *d)
{
	uint64_t now = sv_now_ns();
	int fd;

	d->queued = false;
	for (int taken = 0;; taken++) {
		struct door_pend *p = door_place(d, now);

		if (!p || taken == DOOR_BATCH) {
			d->queued = true; /* the rest wait in the kernel */
			return;
		}
		fd = accept4(d->lfd.fd, NULL, NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && give_spare(d, 0))
			fd = accept4(d->lfd.fd, NULL, NULL,
				     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		if (p->pfd.fd >= 0)
			sv_dbg("tcp door: a caller silent for %llu ms gives "
			       "its place to the next\n",
			       (unsigned long long)sv_ns_since(now, p->since) /
				       1000000);
		pend_drop(ctx, p);
		p->since = now;
		p->got = 0;
		sv_progress_add(ctx, &p->pfd, fd);
		pend_read(ctx, d, p);
	}
	if (errno != EAGAIN && errno != EINTR)
		sv_dbg("tcp door: accept: %s\n", strerror(errno));
}

static void door_event(struct sv_context *ctx, struct sv_pfd *p)
{
	struct sv_tcp_door *d = door_of(ctx);

	if (!d)
		return;
	if (p == &d->lfd)
		door_accept(ctx, d);
	else if (p->fd >= 0)
		pend_read(ctx, d, container_of(p, struct door_pend, pfd));
	door_spares(d); /* what was given up, back */
	if (d->queued && p != &d->lfd)
		door_accept(ctx, d); /* a place may have freed */
}

uint64_t sv_tcp_door_next_ns(struct sv_context *ctx, uint64_t now)
{
	struct sv_tcp_door *d = door_of(ctx);
	uint64_t next = UINT64_MAX;

	if (!d)
		return next;
	for (int i = 0; i < DOOR_PENDING; i++) {
		struct door_pend *p = &d->pend[i];

		if (p->pfd.fd < 0)
			continue;
		if (sv_ns_since(now, p->since) >= SV_HELLO_WAIT_NS)
			pend_drop(ctx, p); /* silent too long */
		else if (p->since + SV_HELLO_WAIT_NS < next)
			next = p->since + SV_HELLO_WAIT_NS;
	}
	if (d->queued) {
		/* callers wait in the kernel: the next turn takes more if a
		 * place is free, else when the oldest of ours has been
		 * silent for DOOR_EVICT_NS */
		door_accept(ctx, d);
		if (d->queued && door_place(d, now))
			next = now;
		else if (d->queued) {
			uint64_t evict = UINT64_MAX;

			for (int i = 0; i < DOOR_PENDING; i++)
				if (d->pend[i].since + DOOR_EVICT_NS < evict)
					evict = d->pend[i].since +
						DOOR_EVICT_NS;
			if (evict < next)
				next = evict;
		}
	}
	return next;
}

/* The door's callback in the progress thread's loop, for its listener
 * (callers) and each pending caller's socket (its hello). */
static void door_io(struct sv_io *io, uint32_t revents)
{
	struct sv_pfd *p = container_of(io, struct sv_pfd, io);

	(void)revents;
	door_event(p->ctx, p);
}
