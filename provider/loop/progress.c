// SPDX-License-Identifier: MIT
/*
 * Who runs the engine.  The application thread does, inside poll and post
 * (sv_qp_drive): no thread hop and no system call while both sides poll.
 * Behind it, one progress thread per context that always blocks in
 * epoll: on the app's kick eventfd, on each QP's listener and connection
 * sockets (the peer's rings our doorbell: shm.c), and on timers.  While the
 * application polls, the thread only looks every few ms whether it still does;
 * once it stops (or arms a CQ for an event) the thread raises that QP's sleep
 * flags — peers then ring our doorbell — and drives its engine itself.  This is
 * decided per QP: an app may poll one CQ and leave another QP's sends to us.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shm.h"
#include "sv.h"
#include "tcp.h"

#define SV_ACTIVE_CHECK_MS 5

struct sv_progress {
	pthread_t thread;
	int epfd;
	struct sv_pfd db; /* our app's kick (an eventfd only we hold) */
	atomic_bool stop;

	atomic_bool forever; /* asleep with no timer to wake it */
};

void sv_qp_run(struct sv_qp *qp, uint64_t now)
{
	enum ibv_qp_state s = qp->attr.qp_state;

	if (s < IBV_QPS_RTR || s == IBV_QPS_ERR)
		return;
	if (__builtin_expect(qp->link.tcp != NULL, 0)) {
		/* a call whose hello was not in our listener's queue yet
		 * waits in a pending slot: the app's run takes it too (the
		 * listener's edge is gone) */
		if (sv_shm_has_pending(&qp->link))
			sv_qp_link_step(qp);
		else
			sv_qp_tcp_run(qp,
				      now); /* what arrived, into the rings */
		if (qp->attr.qp_state == IBV_QPS_ERR)
			return;
		sv_tcp_run_begin(&qp->link);
	} else if (qp->link.state == SV_LINK_CONNECTING) {
		sv_qp_link_step(qp);
	}
	/* acks first: the peer acked our send before it answered it, and
	 * programs waiting on events expect completions in that order */
	sv_comp_run(qp, now);
	sv_resp_run(qp);
	sv_req_run(qp);
	if (__builtin_expect(qp->link.tcp != NULL, 0))
		sv_tcp_run_end(&qp->link);
}

void sv_qp_drive(struct sv_qp *qp)
{
	enum ibv_qp_state s;

	/* the app drives it, even if it finds the lock taken: the progress
	 * thread keeps off (a hint: no locked instruction) */
	atomic_store_explicit(
		&qp->drives,
		atomic_load_explicit(&qp->drives, memory_order_relaxed) + 1,
		memory_order_relaxed);
	/* someone else in the engine for this QP: it makes the progress */
	if (!sv_trylock(&qp->lock))
		return;
	s = qp->attr.qp_state;
	/* as sv_qp_run: the link is only looked at from RTR on (a QP made
	 * again in the slot a poller still holds is being set up) */
	if (s >= IBV_QPS_RTR && s != IBV_QPS_ERR &&
	    __builtin_expect(qp->link.tcp != NULL, 0)) {
		/* our ACKs may wait for the app's reply, if a late one
		 * cannot make the peer time out: its timeout is unknown
		 * here, ours is the best guess (the thread looks every
		 * SV_ACTIVE_CHECK_MS) */
		uint64_t t = sv_qp_ack_timeout_ns(qp);

		sv_tcp_set_lazy(&qp->link, !qp->attr.timeout ||
						   t >= 4 * SV_ACTIVE_CHECK_MS *
								   1000000ull);
		sv_qp_run(qp, 0);
		sv_tcp_set_lazy(&qp->link, false);
	} else {
		sv_qp_run(qp, 0);
	}
	sv_unlock(&qp->lock);
}

/*
 * One look at every QP.  A QP the application drove since our last look is
 * its business: we take its sleep flags down and leave it.  Any other QP —
 * the app does not poll its CQs, or waits for an event on them — is ours:
 * flags up (peers then ring our doorbell), then we run its engine.
 * Returns the earliest timer of the QPs we own; *active tells whether the
 * app drives any (then we look again every SV_ACTIVE_CHECK_MS).
 */
static uint64_t look(struct sv_context *ctx, bool *active)
{
	uint64_t next = UINT64_MAX, now = sv_now_ns();
	struct sv_list *n;

	*active = false;
	pthread_rwlock_rdlock(&ctx->qp_lock);
	sv_list_for_each(n, &ctx->qps)
	{
		struct sv_qp *qp = container_of(n, struct sv_qp, ctx_node);
		uint64_t drives;
		bool mine, rung;

		/* the app's, unless undriven for a whole check period (a
		 * look right after another proves nothing) or armed */
		drives =
			atomic_load_explicit(&qp->drives, memory_order_relaxed);
		if (drives != qp->seen_drives)
			qp->active_ns = now;
		qp->seen_drives = drives;
		/* an XRC_RECV QP is always ours: it has no CQ, so no poll
		 * runs it (a spin in ibv_get_cq_event drives it, then sleeps
		 * with its flags down: the peer would not ring us) */
		mine = now - qp->active_ns >= SV_ACTIVE_CHECK_MS * 1000000ull ||
		       qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV ||
		       (qp->scq && atomic_load(&qp->scq->armed)) ||
		       (qp->rcq &&
			qp->qpx.qp_base.qp_type != IBV_QPT_XRC_RECV &&
			atomic_load(&qp->rcq->armed));
		/* never spin on a QP lock here: we may have preempted its
		 * holder on this CPU.  Busy means driven: look again soon. */
		if (!sv_trylock(&qp->lock)) {
			*active = true;
			continue;
		}
		/* the clock again, now that we hold the lock: the walk is
		 * long with thousands of QPs, and whoever held it before
		 * stamped the link with a later clock than our first read */
		now = sv_now_ns();
		rung = atomic_load_explicit(&qp->pfd[1].rung,
					    memory_order_relaxed);
		if (rung) {
			/* before draining: a ring after it is a new edge */
			atomic_store(&qp->pfd[1].rung, false);
			sv_qp_link_event(qp, sv_shm_check(&qp->link, -1));
		}
		if (!mine) {
			/* new rings start asleep (ring.c): this clears them */
			*active = true;
			sv_link_set_sleep(&qp->link, false);
			sv_lanes_rx_sleep(qp, false); /* UD lanes (lane.c) */
			/* over TCP its polls read what arrives: we stop
			 * watching (a wake-up per message took half the
			 * time of a small one across hosts), unless what
			 * arrives waits unread — the app drives the QP but
			 * polls its memory for an RDMA write our responder
			 * must do (ib_write_lat): then we run it on each
			 * arrival, not at the app's next poll (2.6-5.4 ms a
			 * round trip); and we send an ACK the app's polls
			 * let wait (sv_tcp_set_lazy) */
			if (qp->link.tcp) {
				bool stalled = sv_tcp_stalled(&qp->link);

				sv_tcp_quiet(&qp->link, true);
				if (rung || stalled ||
				    sv_tcp_owed(&qp->link, now))
					sv_qp_run(qp, now);
			}
			sv_unlock(&qp->lock);
			continue;
		}
		sv_link_set_sleep(&qp->link, true);
		sv_tcp_quiet(&qp->link, false);
		sv_lanes_rx_sleep(qp, true);
		/* seq_cst: flags up before we look at the rings (Dekker) */
		atomic_thread_fence(memory_order_seq_cst);
		sv_qp_run(qp, now);
		if (sv_shm_has_pending(&qp->link))
			sv_qp_link_step(qp);
		if (qp->sq_comp != qp->sq_post && qp->comp_deadline &&
		    qp->comp_deadline < next)
			next = qp->comp_deadline;
		if (sv_shm_next_ns(&qp->link, now) < next)
			next = sv_shm_next_ns(&qp->link, now);
		if (sv_tcp_next_ns(&qp->link) < next)
			next = sv_tcp_next_ns(&qp->link);
		if (qp->xrc_retry_ns && qp->xrc_retry_ns < next)
			next = qp->xrc_retry_ns; /* a forward to retry */
		if (qp->fault_rnr_until && qp->fault_rnr_until < next)
			next = qp->fault_rnr_until; /* SOFTVERBS_FAULTS rnr */
		if (qp->fault_delay_until && qp->fault_delay_until < next)
			next = qp->fault_delay_until; /* ... delay_us */
		if (qp->fault_ack_pending && qp->fault_ack_due < next)
			next = qp->fault_ack_due; /* ... on the way back */
		if (qp->fault_rsp_due && qp->sq_comp != qp->sq_post &&
		    qp->attr.qp_state != IBV_QPS_ERR &&
		    qp->fault_rsp_due < next)
			next = qp->fault_rsp_due; /* ... read/atomic answers */
		sv_unlock(&qp->lock);
	}
	pthread_rwlock_unlock(&ctx->qp_lock);
	if (sv_tcp_door_next_ns(ctx, now) < next)
		next = sv_tcp_door_next_ns(ctx, now);
	if (sv_ud_door_next_ns(ctx, now) < next)
		next = sv_ud_door_next_ns(ctx, now);
	return next;
}

/*
 * The QP of an event's fd, if it is still on the context's list (it may
 * have been destroyed since epoll_wait returned): QPs are type-stable
 * (qp.c), so its memory is a QP's whatever happened, and listed says in
 * O(1) what walking the list said (a walk per event is a pointer chase
 * through every QP of the context: 4,096 of them in `make scale`).
 * Caller holds ctx->qp_lock.
 */
static struct sv_qp *find_qp(struct sv_qp *want)
{
	return want && atomic_load_explicit(&want->listed, memory_order_relaxed)
		       ? want
		       : NULL;
}

void sv_qp_link_event(struct sv_qp *qp, enum sv_link_state st)
{
	/* after a goodbye the hang-up is expected: the peer said it all
	 * (a doorbell edge seen before the goodbye may bring us here) */
	if (st == qp->link.state || qp->link.state == SV_LINK_CLOSED)
		return;
	sv_dbg("qp %06x: link %s -> %s\n", qp->qpx.qp_base.qp_num,
	       sv_link_state_names[qp->link.state], sv_link_state_names[st]);
	sv_progress_del(qp->ctx, &qp->pfd[1]);
	sv_progress_del(qp->ctx, &qp->pfd[2]);
	if (st == SV_LINK_DEAD) {
		qp->link.state = SV_LINK_DEAD;
		/* its last words are still in the mapped rings: the ACKs of
		 * sends it took, and what it sent us */
		sv_comp_run(qp, sv_now_ns());
		if (qp->attr.qp_state != IBV_QPS_ERR)
			sv_resp_run(qp);
		if (qp->attr.qp_state == IBV_QPS_ERR)
			return;
		/* IBA: what was in flight can no longer be acknowledged */
		if (qp->sq_comp != qp->sq_post) {
			struct ibv_wc wc = {
				.status = IBV_WC_RETRY_EXC_ERR,
				.opcode = IBV_WC_SEND,
				.qp_num = qp->qpx.qp_base.qp_num,
			};

			wc.wr_id =
				qp->sq[qp->sq_comp & (qp->sq_size - 1)].wr_id;
			qp->sq_comp++;
			sv_cq_push(qp->scq, &wc, false);
		}
		sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
	} else {
		qp->link.state = st;
	}
}

/* Sends forwarded to an XRC SRQ arrived; it may be gone since
 * epoll_wait: only one still on the context's list is run. */
static void handle_xsrq(struct sv_context *ctx, struct sv_srq *srq)
{
	struct sv_list *n;

	pthread_mutex_lock(&ctx->xsrq_lock);
	sv_list_for_each(n, &ctx->xsrqs)
	{
		if (container_of(n, struct sv_srq, ctx_node) == srq) {
			sv_xsrq_recv_run(srq);
			break;
		}
	}
	pthread_mutex_unlock(&ctx->xsrq_lock);
}

/* Handles one epoll event; true if it was a doorbell. */
static bool handle(struct sv_context *ctx, struct sv_pfd *p)
{
	enum sv_pfd_kind kind = sv_pfd_kind(p);
	struct sv_qp *qp;

	if (kind == SV_PFD_DOORBELL && !p->qp) {
		uint64_t v;

		if (read(p->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			sv_dbg("doorbell read: %s\n", strerror(errno));
		return true;
	}
	if (kind == SV_PFD_XSRQ) {
		handle_xsrq(ctx, p->srq);
		return false;
	}
	if (kind == SV_PFD_UDOOR) {
		sv_ud_door_event(ctx);
		return false;
	}
	if (kind == SV_PFD_DOOR || kind == SV_PFD_DOOR_PEND) {
		sv_tcp_door_event(ctx, p);
		return false;
	}
	if (kind == SV_PFD_TCP) {
		/* like a doorbell: look() runs the QP if it is ours; if the
		 * app drives it, its next poll reads the socket (and sends
		 * what waits) */
		atomic_store(&p->rung, true);
		return true;
	}
	if (kind == SV_PFD_DOORBELL) {
		/* edge triggered; look() drains it under the QP's lock (the
		 * app may close the fd meanwhile) */
		atomic_store(&p->rung, true);
		return true;
	}
	pthread_rwlock_rdlock(&ctx->qp_lock);
	qp = find_qp(p->qp); /* it may be gone since epoll_wait */
	if (qp && kind == SV_PFD_UD) {
		/* with UD lanes, polls read the socket only once rung */
		atomic_store(&p->rung, true);
		/* edge triggered: drains all.  A QP the app holds is being
		 * driven (its poll drains the socket) or is looked at again
		 * by look() at once: never wait for it here, the thread also
		 * passes on the datagrams that reach the UDP listener (ud.c),
		 * maybe the very ones that app is polling for */
		if (sv_trylock(&qp->lock)) {
			sv_ud_recv_run(qp);
			sv_unlock(&qp->lock);
		}
	} else if (qp) {
		sv_lock(&qp->lock);
		if (kind == SV_PFD_LISTEN)
			sv_qp_link_step(qp);
		else if (p->fd >= 0)
			sv_qp_link_event(qp, sv_shm_check(&qp->link, p->fd));
		sv_unlock(&qp->lock);
	}
	pthread_rwlock_unlock(&ctx->qp_lock);
	return false;
}

static int timeout_ms(uint64_t next)
{
	uint64_t now = sv_now_ns();

	if (next == UINT64_MAX)
		return -1;
	if (next <= now)
		return 0;
	next = (next - now + 999999) / 1000000;
	return next > 60000 ? 60000 : (int)next;
}

static void *progress_main(void *arg)
{
	struct sv_context *ctx = arg;
	struct sv_progress *pg = ctx->prog;
	struct epoll_event ev[16];

	while (!atomic_load(&pg->stop)) {
		bool active;
		uint64_t next = look(ctx, &active);
		uint64_t snext = sv_stat_refresh(ctx, sv_now_ns());
		int tmo = timeout_ms(next), n;

		if (active && (tmo < 0 || tmo > SV_ACTIVE_CHECK_MS))
			tmo = SV_ACTIVE_CHECK_MS; /* see when it stops */
		/* the counters' timer is not work: new work still kicks us
		 * to arm its timers (sv_progress_note_work) */
		atomic_store(&pg->forever, tmo < 0);
		if (snext != UINT64_MAX && (tmo < 0 || timeout_ms(snext) < tmo))
			tmo = timeout_ms(snext);
		if (sv_pcap_on)
			sv_pcap_flush();
		n = epoll_wait(pg->epfd, ev, ARRAY_SIZE(ev), tmo);
		atomic_store(&pg->forever, false);
		for (int i = 0; i < n; i++)
			handle(ctx, ev[i].data.ptr);
	}
	return NULL;
}

void sv_progress_add(struct sv_context *ctx, struct sv_pfd *p, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = p};

	/* hang-ups are level triggered; a listener or link doorbell we may
	 * not be able to empty at once (out of fds, QP busy) is not, so it
	 * never makes the thread spin */
	if ((p->kind != SV_PFD_CONN && p->qp) || p->kind == SV_PFD_XSRQ ||
	    p->kind == SV_PFD_DOOR || p->kind == SV_PFD_DOOR_PEND)
		ev.events |= EPOLLET;
	p->fd = fd;
	p->quiet = false;
	p->out = false;
	if (epoll_ctl(ctx->prog->epfd, EPOLL_CTL_ADD, fd, &ev))
		sv_dbg("epoll add %d: %s\n", fd, strerror(errno));
}

void sv_progress_quiet(struct sv_context *ctx, struct sv_pfd *p, bool quiet)
{
	struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLET, .data.ptr = p};

	if (p->fd < 0 || p->quiet == quiet)
		return;
	/* back on: data already there is an event at once (MOD re-arms) */
	if (!quiet)
		ev.events |= EPOLLIN;
	if (p->out) /* one socket both ways (tcp.c): room stays wanted */
		ev.events |= EPOLLOUT;
	p->quiet = quiet;
	if (epoll_ctl(ctx->prog->epfd, EPOLL_CTL_MOD, p->fd, &ev))
		sv_dbg("epoll mod %d: %s\n", p->fd, strerror(errno));
}

void sv_progress_want_out(struct sv_context *ctx, struct sv_pfd *p, bool out)
{
	struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLET, .data.ptr = p};

	if (p->fd < 0)
		return;
	p->out = out;
	if (!p->quiet) /* one socket both ways (tcp.c): arrivals stay off */
		ev.events |= EPOLLIN;
	if (out)
		ev.events |= EPOLLOUT;
	if (epoll_ctl(ctx->prog->epfd, EPOLL_CTL_MOD, p->fd, &ev))
		sv_dbg("epoll mod %d: %s\n", p->fd, strerror(errno));
}

void sv_progress_del(struct sv_context *ctx, struct sv_pfd *p)
{
	if (p->fd < 0)
		return;
	epoll_ctl(ctx->prog->epfd, EPOLL_CTL_DEL, p->fd, NULL);
	p->fd = -1;
}

void sv_progress_note_work(struct sv_context *ctx)
{
	atomic_bool *f = &ctx->prog->forever;

	/* it sleeps with no timer: let it arm the new work's timers (a
	 * plain load first: no locked instruction on the fast path) */
	if (atomic_load_explicit(f, memory_order_relaxed) &&
	    atomic_exchange(f, false))
		sv_progress_kick(ctx);
}

void sv_progress_kick(struct sv_context *ctx)
{
	uint64_t one = 1;

	/* non-blocking, and only we hold it */
	if (write(ctx->prog->db.fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		sv_dbg("kick: %s\n", strerror(errno));
}

int sv_progress_start(struct sv_context *ctx)
{
	struct sv_progress *pg = calloc(1, sizeof(*pg));
	int err;

	if (!pg)
		return -ENOMEM;
	pg->epfd = epoll_create1(EPOLL_CLOEXEC);
	pg->db.kind = SV_PFD_DOORBELL;
	pg->db.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (pg->epfd < 0 || pg->db.fd < 0) {
		err = -errno;
		goto err_close;
	}
	ctx->prog = pg;
	sv_progress_add(ctx, &pg->db, pg->db.fd);
	err = -pthread_create(&pg->thread, NULL, progress_main, ctx);
	if (err)
		goto err_close;
	return 0;

err_close:
	if (pg->epfd >= 0)
		close(pg->epfd);
	if (pg->db.fd >= 0)
		close(pg->db.fd);
	free(pg);
	ctx->prog = NULL;
	return err;
}

void sv_progress_stop(struct sv_context *ctx)
{
	struct sv_progress *pg = ctx->prog;

	atomic_store(&pg->stop, true);
	sv_progress_kick(ctx);
	pthread_join(pg->thread, NULL);
	close(pg->epfd);
	close(pg->db.fd);
	free(pg);
}
