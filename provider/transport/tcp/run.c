// SPDX-License-Identifier: MIT
/*
 * The TCP transport's link over time, and its ops table (link.h): each
 * run (connect again, read, send, the user timeout), the ACK timer's
 * retransmit, the app-driven modes (lazy ACKs, a quiet socket), the
 * deadline it needs, and its close.
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

/* A path that is down looks like a slow peer to TCP, which retransmits
 * for minutes: our data unacknowledged by the peer's host for twice the
 * QP's ACK timeout breaks the connection instead.  A stopped peer process
 * is not that: its kernel still acknowledges. */
static void user_timeout(struct sv_tcp *t, uint64_t ack_timeout_ns)
{
	unsigned int ms = 0;

	if (ack_timeout_ns < UINT64_MAX / 4) {
		uint64_t v = 2 * ack_timeout_ns / 1000000;

		ms = v < 1000 ? 1000 : v > 600000 ? 600000 : (unsigned int)v;
	}
	if (ms == t->user_timeout_ms || t->conn != CONN_READY)
		return;
	setsockopt(t->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
	t->user_timeout_ms = ms;
}

/* Whether our call (connecting, or its hello waiting for an answer)
 * needs a look now: its socket had an event (check, or the doorbell's
 * flag the thread has not taken yet), or its deadline passed.  An app
 * that polls a CQ runs every QP on it: 4,096 links calling at once cost
 * two system calls each per poll (a poll(2) and a recv(2) that find
 * nothing), and the app's thread took 4-5 times the CPU of the progress
 * thread whose door passes the calls (perf, 4,096 pairs over TCP). */
static bool call_due(struct sv_tcp *t, uint64_t now)
{
	if (t->conn != CONN_CONNECTING && t->conn != CONN_HELLO)
		return true;
	/* a quiet socket (EPOLLIN off, sv_tcp_quiet) raises no event: looked
	 * at by every run, as before */
	if (!t->io && now < t->deadline_ns && !t->pfd->quiet &&
	    !atomic_load_explicit(&t->pfd->rung, memory_order_relaxed))
		return false;
	t->io = false;
	/* taken here, before the socket is read (a new event sets it
	 * again): else, while the app holds the QP, the thread cannot take
	 * it and every poll reads the socket again */
	atomic_store_explicit(&t->pfd->rung, false, memory_order_relaxed);
	return true;
}

enum sv_link_state sv_tcp_run(struct sv_link *l, uint32_t peer_qpn,
			      uint64_t ack_timeout_ns, uint64_t down_max_ns,
			      uint64_t now)
{
	struct sv_tcp *t = l->tcp;

	if (!now)
		now = sv_now_ns();
	if (t->down_since && sv_ns_since(now, t->down_since) > down_max_ns &&
	    !t->gone) {
		sv_dbg("qp %06x: tcp: no connection for %llu ms: the peer is "
		       "gone\n",
		       t->my_qpn,
		       (unsigned long long)(now - t->down_since) / 1000000);
		t->gone = true;
	}
	(void)peer_qpn; /* the link's since RTR (sv_tcp_prepare) */
	sv_tcp_pend_step(l, now);
	if (call_due(t, now)) {
		if (t->conn < CONN_HELLO && !t->closed && !t->gone)
			sv_tcp_connect_step(l, now); /* (not after a bye) */
		if (t->conn == CONN_HELLO)
			sv_tcp_read_ack(l, now);
	}
	if (t->conn == CONN_READY)
		user_timeout(t, ack_timeout_ns);
	sv_tcp_read_in(l);
	sv_tcp_flush(l);
	if (t->gone)
		sv_tcp_eof_ack(l);
	if (t->proto_err || t->gone)
		return SV_LINK_DEAD;
	if (t->closed)
		return SV_LINK_CLOSED;
	if (t->conn == CONN_READY && l->tx_ready)
		return SV_LINK_UP;
	/* a peer QP that exists but does not answer (stopped, or its half
	 * of the set-up waits at a stopped door) is slow, not gone: its
	 * requests' timers wait for it, as for a stopped peer on shared
	 * memory (comp.c) */
	return t->alive ? SV_LINK_UP : SV_LINK_CONNECTING;
}

bool sv_tcp_setup_waits(const struct sv_link *l, uint64_t now)
{
	const struct sv_tcp *t = l->tcp;

	uint64_t since;

	if (!t || t->turned_away || t->closed || t->gone || t->proto_err)
		return false;
	since = t->was_up ? t->redial_ns : t->first_call_ns;
	if (!since)
		return false;
	/* the peer's doors passed a call of ours lately: they work through
	 * a queue (thousands of links calling at once on a loaded host),
	 * and ours waits in it; a host that passes none (silent, a black
	 * hole) runs out of tries */
	return sv_ns_since(now, since) < SETUP_WAIT_MAX_NS ||
	       sv_tcp_host_passed(t->tctx, &t->dst, now, SETUP_WAIT_MAX_NS);
}

void sv_tcp_retransmit(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;
	uint64_t now = sv_now_ns();

	if (!t || t->closed || t->gone || t->conn != CONN_READY)
		return;
	/* the peer's host takes what we send (its kernel acknowledges it,
	 * or will: sv_peer_path_retransmits; bytes not yet acknowledged
	 * broke hundreds of live links among 2,048 pairs on a loaded host,
	 * the peer's delayed ACKs): a new connection would resend
	 * nothing that was lost.  The peer is slow (thousands of QPs
	 * setting up at once, a stopped process), and a new call only adds
	 * to the doors' work; 4,096 pairs over TCP failed on that.  For a
	 * while after it was last heard: a path that takes bytes and never
	 * answers (a black hole) is called again then, and runs out of
	 * tries.  What we could not write yet (olen) waits for the peer's
	 * window, which a new connection would not open sooner. */
	if (sv_ns_since(now, t->heard_ns) < SLOW_PEER_MAX_NS &&
	    !sv_peer_path_retransmits(t->fd)) {
		count_call(t, tcp_slow_acks);
		return;
	}
	sv_dbg("qp %06x: tcp: ACK timeout: connecting again to resend\n",
	       t->my_qpn);
	sv_tcp_close_conn(t, now);
	t->wait_ns = 0;
	if (t->first)
		t->next_ns = now; /* at once; the peer sees the close */
}

void sv_tcp_run_begin(struct sv_link *l)
{
	if (l->tcp)
		l->tcp->defer = true;
}

void sv_tcp_run_end(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;

	if (!t)
		return;
	t->defer = false;
	sv_tcp_flush(l);
	/* the window of the polls that may skip their read (read_may_wait)
	 * opens as the poll that read the socket empty returns (mirror.c
	 * took_all marked it; none has skipped yet): what it did after the
	 * read is not the app's time to reply */
	if (t->lazy && t->drained_ns && !t->skipped)
		t->drained_ns = sv_now_ns();
}

void sv_tcp_set_lazy(struct sv_link *l, bool lazy)
{
	if (l->tcp)
		l->tcp->lazy = lazy;
}

bool sv_tcp_owed(const struct sv_link *l, uint64_t now)
{
	const struct sv_tcp *t = l->tcp;

	/* (a challenged caller's proof is read by the thread too) */
	return t && ((t->owed_ns &&
		      sv_ns_since(now, t->owed_ns) >= SV_TCP_ACK_DELAY_NS) ||
		     t->pend_fd >= 0);
}

/* Bytes of the peer's wait unread in our socket. */
static bool unread(const struct sv_tcp *t)
{
	int n = 0;

	return t->conn == CONN_READY && !ioctl(t->fd, SIOCINQ, &n) && n > 0;
}

static void go_loud(struct sv_tcp *t, const char *why)
{
	sv_dbg("qp %06x: tcp: arrivals waited unread %s: the thread takes "
	       "each while it reads a share of them\n",
	       t->my_qpn, why);
	t->rd.loud = true;
}

bool sv_tcp_stalled(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;
	bool was_loud;

	if (!t)
		return false;
	was_loud = t->rd.loud;
	if (!sv_readers_look(&t->rd)) {
		if (was_loud && !t->rd.loud)
			sv_dbg("qp %06x: tcp: the app's polls read what "
			       "comes again: the thread stops watching\n",
			       t->my_qpn);
		return false;
	}
	if (!unread(t))
		return false;
	go_loud(t, "while the app drives");
	return true;
}

void sv_tcp_quiet(struct sv_link *l, bool quiet)
{
	struct sv_tcp *t = l->tcp;

	if (!t)
		return;
	/* the app stopped driving it with something waiting: it drives it
	 * between waits of its own (on its memory, say) */
	if (!quiet && t->pfd->quiet && !t->rd.loud && unread(t))
		go_loud(t, "till the app stopped driving");
	/* a call's socket stays loud: its answer must raise the event that
	 * the app's polls wait for (call_due); it waited unread till the
	 * call's deadline, up to 8 s, when the thread quieted it */
	sv_progress_quiet(t->ctx, t->pfd,
			  quiet && !t->rd.loud && t->conn == CONN_READY);
}

void sv_tcp_spare(struct sv_link *l, bool hold)
{
	struct sv_tcp *t = l->tcp;

	if (!t)
		return;
	if (!hold && t->spare >= 0) {
		close(t->spare);
		t->spare = -1;
	} else if (hold && t->spare < 0 && t->conn != CONN_READY) {
		t->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
}

int sv_tcp_fd(const struct sv_link *l)
{
	return l->tcp && l->tcp->conn == CONN_READY ? l->tcp->fd : -1;
}

uint64_t sv_tcp_next_ns(const struct sv_link *l)
{
	const struct sv_tcp *t = l->tcp;
	uint64_t next = UINT64_MAX;

	if (!t || t->closed || t->gone)
		return UINT64_MAX; /* no more calls: nothing to time */
	switch (t->conn) {
	case CONN_NONE:
		next = t->next_ns;
		break;
	case CONN_CONNECTING: /* or EPOLLOUT when it is made */
	case CONN_HELLO:
		next = t->deadline_ns;
		break;
	case CONN_READY:
		break;
	}
	/* a challenged caller's proof comes as an event, else it ends */
	if (t->pend_fd >= 0 && t->pend_deadline < next)
		next = t->pend_deadline;
	return next;
}

void sv_tcp_close(struct sv_link *l, bool bye)
{
	struct sv_tcp *t = l->tcp;

	if (!t)
		return;
	t->defer = false; /* an engine's run ends here (QP to ERROR) */
	t->lazy = false;
	if (bye && t->conn == CONN_READY) {
		sv_tcp_flush(l); /* what we acked, then goodbye */
		if (t->oi == t->on) {
			sv_tcp_out_reset(t);
			sv_tcp_put_frame(t, SV_TF_BYE, 0, 0, 0, NULL, 0, true);
			sv_tcp_flush(l);
		}
		/* a socket closed with bytes unread sends a reset, and the
		 * kernel drops what it has not sent yet: our last words (a
		 * NAK) would be lost.  The peer's bytes are for nobody now. */
		while (t->conn == CONN_READY &&
		       recv(t->fd, t->ibuf, IBUF_LEN, MSG_DONTWAIT) > 0)
			;
	}
	sv_tcp_drop_conn(t);
	sv_tcp_pend_forget(t, true);
	if (t->spare >= 0)
		close(t->spare);
	free(t->obuf);
	free(t->ibuf);
	free(t);
	l->tcp = NULL;
}

/* A caller the door passed us on the QP's socket (link.c): sock is the
 * Unix connection it came on, fds[0] the caller's socket, body its
 * hello. */
static int take(struct sv_link *l, int sock, const struct sv_hello *h, int *fds,
		int nfds, const void *body, uint32_t my_qpn, uint32_t expect)
{
	struct sv_tcp_hello th;
	int fd, err;

	if (nfds != 1 || h->dst_qpn != my_qpn)
		return -EPROTO;
	memcpy(&th, body, sizeof(th));
	fd = fds[0];
	fds[0] = -1; /* sv_tcp_take's, answered and closed on a refusal */
	/* a refusal's why goes to the debug line (link.c); the caller
	 * closes sock.  -EAGAIN and -EMFILE mean something else there (a
	 * hello still coming; its fds not installed) */
	err = sv_tcp_take(l, fd, &th, my_qpn, expect);
	if (err < 0)
		return err == -EAGAIN || err == -EMFILE ? -EPROTO : err;
	close(sock); /* the Unix connection has done its part */
	return 1;
}

/* After the listener's accepts: the link itself moves on in run. */
static int step(struct sv_link *l, int got, uint32_t my_qpn, uint32_t expect,
		uint64_t now)
{
	(void)my_qpn;
	(void)expect;
	(void)now;
	if (got < 0 && !l->tx_ready)
		return got;
	return 0;
}

static uint64_t next_ns(const struct sv_link *l, uint64_t now)
{
	(void)now;
	return sv_tcp_next_ns(l);
}

/*
 * Whether an app's poll may skip the link's run (link.h ops.idle): the
 * connection is up and in every readiness set of the QP's CQs, so a
 * poll that did not find it readable there knows a read would find
 * nothing (a poll then costs one epoll_wait, not a recv(2) per link: 500
 * idle links on a polled CQ made a round trip 1.1-1.3 ms, 0.32-0.36 ms
 * now, sv_idle 500 500 poll at load 4-5); nothing of
 * ours waits to go (sv_tcp_all_sent: with a state held for a lazy ACK,
 * polls run the link until it is pushed); no challenged caller, no
 * hang-up said, and the user timeout set (the run after the connection
 * came up sets it).  Anything else — a call, a connection down, a peer
 * gone — runs as before, every poll.
 */
static bool tcp_idle(struct sv_link *l, int set)
{
	struct sv_tcp *t = l->tcp;
	int i;

	if (!t || t->unwatched || t->conn != CONN_READY || !l->tx_ready ||
	    t->closed || t->gone || t->proto_err || t->pend_fd >= 0 ||
	    !t->user_timeout_ms ||
	    atomic_load_explicit(&t->pfd->hup, memory_order_relaxed) ||
	    !sv_tcp_all_sent(l))
		return false;
	for (i = 0; i < t->nsets; i++)
		if (t->sets[i] == set)
			return true;
	/* a QP is on two CQs at most; this time the run reads what came
	 * before the set knew */
	if (t->nsets < 2 && sv_readyset_join(set, t->fd, l))
		t->sets[t->nsets++] = set;
	else
		t->unwatched = true;
	return false;
}

/* An event on the link's socket (fd -1: the QP's doorbell watch, which
 * is the connection's, or our call's): the next run looks at the call
 * (call_due); a connection up is read by every run anyway. */
static enum sv_link_state check(struct sv_link *l, int fd)
{
	(void)fd;
	if (l->tcp)
		l->tcp->io = true;
	return l->state;
}

static void tcp_close(struct sv_link *l, uint32_t my_qpn, bool bye)
{
	struct sv_pfd *pend_pfd = l->tcp ? l->tcp->pend_pfd : NULL;
	sv_io_cb *pend_cb = l->tcp ? l->tcp->pend_cb : NULL;
	bool pend_edge = l->tcp ? l->tcp->pend_edge : false;

	(void)my_qpn;
	sv_tcp_close(l, bye);
	/* the QP's watches, back to what shared memory set (pfd_conn kept
	 * its callback: the doorbell's) */
	if (pend_pfd && pend_cb)
		sv_pfd_set(pend_pfd, pend_cb, pend_edge);
}

const struct sv_link_ops sv_tcp_link_ops = {
	.name = "tcp",
	.msg_type = SV_MSG_TCP,
	.msg_body = sizeof(struct sv_tcp_hello),
	.prepare = sv_tcp_prepare,
	.take = take,
	.spare = sv_tcp_spare,
	.step = step,
	.run = sv_tcp_run,
	.check = check,
	.flush = sv_tcp_flush,
	.rnr_abort = sv_tcp_rnr_abort,
	.retransmit = sv_tcp_retransmit,
	.setup_waits = sv_tcp_setup_waits,
	.next_ns = next_ns,
	.idle = tcp_idle,
	.run_begin = sv_tcp_run_begin,
	.run_end = sv_tcp_run_end,
	.set_lazy = sv_tcp_set_lazy,
	.owed = sv_tcp_owed,
	.stalled = sv_tcp_stalled,
	.quiet = sv_tcp_quiet,
	.close = tcp_close,
	.ctx_close = sv_tcp_door_close,
	.door_next_ns = sv_tcp_door_next_ns,
};
