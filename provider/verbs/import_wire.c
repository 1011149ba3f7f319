// SPDX-License-Identifier: MIT
/*
 * The import protocol between processes (wire/import.h): the asker's
 * side (sv_imp_ask: one request, its own reply socket, a deadline) and
 * the owner's (the progress thread reads cmd_peer).  Every request is
 * hostile input: exactly one fixed-size message with exactly one socket
 * passed, the right magic, version and op, or it is dropped (its fds
 * closed).  The owner never blocks on an asker: it answers with
 * MSG_DONTWAIT on the asker's socket and closes it (an MR's importer's:
 * keeps a copy, the import's lifeline, import.c), and reads a bounded
 * number of requests per wake-up, so a flood costs the thread turns,
 * never a stall.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import.h"
#include "progress.h"
#include "util.h"
#include "verbs.h"

#define IMP_BATCH   32	 /* requests read per wake-up */
#define IMP_MAX_FDS 4	 /* fds a request may carry before truncation */
#define IMP_WAIT_MS 5000 /* an asker's deadline for the owner's answer */

static int remaining_ms(uint64_t deadline)
{
	uint64_t now = sv_now_ns();

	return now >= deadline ? 0 : (int)((deadline - now) / 1000000 + 1);
}

static int send_req(int fd, const struct sv_imp_req *q, int reply_fd,
		    uint64_t deadline)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)q, .iov_len = sizeof(*q)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	memset(&u, 0, sizeof(u));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &reply_fd, sizeof(int));
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};

		if (sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) ==
		    (ssize_t)sizeof(*q))
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		/* the owner's queue is full: wait for room, not forever */
		if (poll(&p, 1, remaining_ms(deadline)) == 0)
			return -ETIMEDOUT;
	}
}

/* The fds an answer m carried: the first goes to *page if page is not
 * NULL, the second to *mem if mem is not NULL; any other is closed.
 * false if some were lost (truncated) or not asked for; then none is
 * kept. */
static bool rep_fds(struct msghdr *m, int *page, int *mem)
{
	bool ok = !(m->msg_flags & MSG_CTRUNC);

	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (page && *page < 0) {
				*page = fd;
			} else if (page && mem && *mem < 0) {
				*mem = fd;
			} else {
				close(fd);
				ok = false;
			}
		}
	}
	if (!ok) {
		if (page && *page >= 0)
			close(*page);
		if (mem && *mem >= 0)
			close(*mem);
		if (page)
			*page = -1;
		if (mem)
			*mem = -1;
	}
	return ok;
}

static int recv_rep(int fd, const struct sv_imp_req *q, struct sv_imp_rep *r,
		    uint64_t deadline, int *page, int *mem)
{
	union {
		char buf[CMSG_SPACE(IMP_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} u;
	uint8_t buf[sizeof(*r) + 1];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr m;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	for (;;) {
		int k = poll(&p, 1, remaining_ms(deadline));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -ETIMEDOUT;
		m = (struct msghdr){.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = u.buf,
				    .msg_controllen = sizeof(u.buf)};
		n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		break;
	}
	if (n >= 0 && !rep_fds(&m, page, mem))
		return -EPROTO; /* fds we did not ask for, or lost */
	if (n == 0)
		return -EPROTO; /* dropped unanswered: not a request it reads */
	if (n != (ssize_t)sizeof(*r))
		return n < 0 ? -errno : -EPROTO;
	memcpy(r, buf, sizeof(*r));
	if (r->magic != SV_IMP_MAGIC || r->version != SV_IMP_VERSION ||
	    r->op != q->op || r->handle != q->handle || r->status > 4095)
		return -EPROTO;
	return 0;
}

/* Asks the owner of cmd_fd fd: 0 and its answer in *r (whose status may
 * be an error of the import), or -errno: EIO the owner is gone (its end
 * closed), ETIMEDOUT no answer in IMP_WAIT_MS, EPROTO not an answer.
 * keep: where our end of the reply socket goes on success (an MR's
 * import watches it: the owner keeps the other end, import.c), or NULL;
 * page: where the fd the answer carried goes (-1: none; on failure
 * always -1), or NULL: an answer must carry none; mem: the same for a
 * second fd (NULL: none). */
int sv_imp_ask(int fd, uint16_t op, uint32_t handle, struct sv_imp_rep *r,
	       int *keep, int *page, int *mem)
{
	struct sv_imp_req q = {.magic = SV_IMP_MAGIC,
			       .version = SV_IMP_VERSION,
			       .op = op,
			       .handle = handle};
	uint64_t deadline = sv_now_ns() + IMP_WAIT_MS * 1000000ull;
	int sp[2], err;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp))
		return -errno;
	err = send_req(fd, &q, sp[1], deadline);
	close(sp[1]); /* the owner holds it now, or nobody */
	if (err == -EPIPE || err == -ECONNRESET || err == -ENOTCONN ||
	    err == -ECONNREFUSED)
		err = -EIO;
	if (page)
		*page = -1;
	if (mem)
		*mem = -1;
	if (!err)
		err = recv_rep(sp[0], &q, r, deadline, page, mem);
	if (err && page && *page >= 0) {
		close(*page);
		*page = -1;
	}
	if (err && mem && *mem >= 0) {
		close(*mem);
		*mem = -1;
	}
	if (!err && keep)
		*keep = sp[0];
	else
		close(sp[0]);
	return err;
}

/* The fds of m, all closed but the one socket a good request carries:
 * that fd, or -1. */
static int take_reply_fd(struct msghdr *m)
{
	int keep = -1, bad = !!(m->msg_flags & (MSG_CTRUNC | MSG_TRUNC));

	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (keep < 0 && !bad)
				keep = fd;
			else {
				close(fd);
				bad = 1;
			}
		}
	}
	if (keep >= 0 && bad) {
		close(keep);
		keep = -1;
	}
	return keep;
}

static bool is_socket(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISSOCK(st.st_mode);
}

/* The answer r with fds[0..n) (SCM_RIGHTS), never waiting. */
static void send_rep(int fd, const struct sv_imp_rep *r, const int *fds,
		     size_t n)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)r, .iov_len = sizeof(*r)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	if (n) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(n * sizeof(int));
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	}
	(void)!sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* One request read from cmd_peer; false when there is none left. */
static bool serve_one(struct sv_context *ctx, int peer)
{
	union {
		char buf[CMSG_SPACE(IMP_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct sv_imp_req q;
	uint8_t buf[sizeof(q) + 1];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct sv_imp_rep r;
	int fd, fds[2], dm_fd = -1;
	size_t nfds = 0;
	ssize_t n;

	n = recvmsg(peer, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EINTR;
	fd = take_reply_fd(&m);
	memcpy(&q, buf, sizeof(q));
	if (fd < 0 || n != (ssize_t)sizeof(q) || !is_socket(fd) ||
	    q.magic != SV_IMP_MAGIC || q.version != SV_IMP_VERSION || q.zero ||
	    q.op < SV_IMP_HELLO || q.op > SV_IMP_DM) {
		sv_dbg("import: a request dropped (%zd bytes, fd %d)\n", n, fd);
		if (fd >= 0)
			close(fd);
		return true;
	}
	memset(&r, 0, sizeof(r));
	r.magic = SV_IMP_MAGIC;
	r.version = SV_IMP_VERSION;
	r.op = q.op;
	r.handle = q.handle;
	r.pid = (uint32_t)getpid();
	r.status = (uint32_t)sv_import_answer(ctx, &q, &r, fd, &dm_fd);
	/* never waits: an asker that does not read loses its answer (an
	 * MR's or DM's importer: the owner kept a copy of fd, import.c); an
	 * MR's carries the revocation page (made before its answer, kept
	 * until this thread is stopped), a DM's that page and a copy of the
	 * DM's memfd (dm.c) */
	if (!r.status && ((q.op == SV_IMP_MR && r.shared) ||
			  (q.op == SV_IMP_DM && dm_fd >= 0))) {
		fds[nfds++] = ctx->imp_page_fd;
		if (q.op == SV_IMP_DM)
			fds[nfds++] = dm_fd;
	}
	send_rep(fd, &r, fds, nfds);
	if (dm_fd >= 0)
		close(dm_fd);
	close(fd);
	return true;
}

/* The progress thread: cmd_peer is readable (level-triggered: what is
 * left past the batch wakes us again, after the others' turns). */
static void cmd_event(struct sv_io *io, uint32_t revents)
{
	struct sv_pfd *p = container_of(io, struct sv_pfd, io);

	int peer = p->ctx->cmd_peer; /* set before the thread saw it */

	for (int i = 0; i < IMP_BATCH; i++)
		if (!serve_one(p->ctx, peer))
			break;
	/* every cmd_fd closed (the program closed the context's own too):
	 * nobody can ask any more, and a hang-up would wake us forever */
	if ((revents & (EPOLLHUP | EPOLLRDHUP)) &&
	    recv(peer, &(char){0}, 1, MSG_DONTWAIT | MSG_PEEK) == 0)
		sv_progress_del(p->ctx, p);
}

void sv_import_serve_start(struct sv_context *ctx)
{
	sv_pfd_set(&ctx->cmd_pfd, cmd_event, false);
	sv_progress_add(ctx, &ctx->cmd_pfd, ctx->cmd_peer);
}
