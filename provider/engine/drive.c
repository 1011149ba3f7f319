// SPDX-License-Identifier: MIT
/*
 * Who drives a QP's engine, and when.  The application thread does,
 * inside poll and post (sv_qp_drive): no thread hop and no system call
 * while both sides poll.  Behind it the context's progress thread
 * (loop/progress.c) runs the callbacks of this file: a QP's listener,
 * doorbell, peer connection and UD socket (sv_qp_on_*, which verbs/qp.c
 * registers with the loop), its one timer, and the visits other threads
 * ask for (sv_qp_visit).  While the application polls a QP, the thread
 * only looks every few ms whether it still does (that QP's timer); once
 * it stops (or arms a CQ for an event) the thread raises that QP's sleep
 * flags — peers then ring our doorbell — and drives its engine itself.
 * This is decided per QP: an app may poll one CQ and leave another QP's
 * sends to us.  A wake-up looks only at the QPs it concerns (an event of
 * theirs, a timer due, a visit asked for), never at every QP: a QP with
 * nothing pending has no timer and costs nothing, nor does an idle one
 * the app's polls of its CQ drive (parked: one check per CQ).
 *
 * Why here and not in loop/: this is the engine's policy (it runs the
 * requester, responder and completer, and reads their deadlines and the
 * link's), and the loop is below the engine and the transports: it knows
 * callbacks and timers, and calls up to none of them.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "engine.h"
#include "evloop.h"
#include "inject.h"
#include "progress.h"
#include "resp.h"
#include "transport.h"

#define SV_ACTIVE_CHECK_MS 5
#define SV_ACTIVE_CHECK_NS (SV_ACTIVE_CHECK_MS * 1000000ull)

void sv_qp_run(struct sv_qp *qp, uint64_t now)
{
	enum ibv_qp_state s = qp->attr.qp_state;

	if (s < IBV_QPS_RTR || s == IBV_QPS_ERR)
		return;
	if (__builtin_expect(sv_link_runs(&qp->link), 0)) {
		/* a call whose hello was not in our listener's queue yet
		 * waits in a pending slot: the app's run takes it too (the
		 * listener's edge is gone) */
		if (sv_link_has_pending(&qp->link))
			sv_qp_link_step(qp);
		else
			sv_qp_link_run(qp,
				       now); /* what arrived, into the rings */
		if (qp->attr.qp_state == IBV_QPS_ERR)
			return;
		sv_link_run_begin(&qp->link);
	} else if (qp->link.state == SV_LINK_CONNECTING) {
		sv_qp_link_step(qp);
	}
	/* acks first: the peer acked our send before it answered it, and
	 * programs waiting on events expect completions in that order */
	sv_comp_run(qp, now);
	sv_resp_run(qp);
	sv_req_run(qp);
	if (__builtin_expect(sv_link_runs(&qp->link), 0))
		sv_link_run_end(&qp->link);
}

/*
 * A QP with send entries outstanding that waits only for the peer: all
 * of them on the link (sq.send == sq.post, none stopped by a failure),
 * the peer's ACK/NAK word as the completer last took it, no response
 * record on the response ring, no RNR timer running, and the oldest
 * entry neither failed nor finished (the completer would complete it).
 * Its run would only read those words again: the completer's ACK timer
 * on an up shared-memory link without loss only re-arms itself (comp.c:
 * a late ACK there is a slow peer, never an error; over TCP it is not,
 * runs_idle() skips it only while its timer is not due), and a peer that
 * goes away changes the link's state, which idle() checks.  Without this,
 * ibv_srq_pingpong -q N ran all N QPs' engines on every poll, each with
 * its one send in flight (issue 27).  Caller holds qp->lock.
 */
static bool acked_only(struct sv_qp *qp)
{
	const struct sv_swqe *w = &qp->sq.wqe[qp->sq.comp & (qp->sq.size - 1)];

	return qp->sq.send == qp->sq.post && !qp->sq.stopped &&
	       !qp->comp.rnr_wait && !w->status && !w->done &&
	       !sv_ring_ready(&qp->link.rsp_rx) &&
	       sv_link_ack_get(&qp->link) == qp->comp.ack;
}

/* What idle() and runs_idle() both ask of the engine: an RC or UC QP in
 * RTS, its link up both ways, no fault injected, no XRC forward to retry,
 * no read being answered, no RNR NAK standing, nothing on the receive ring,
 * nothing to read ahead. */
static bool engine_idle(struct sv_qp *qp)
{
	enum ibv_qp_type t;

	/* the state first: a CQ's set may still name a destroyed QP whose
	 * slot is being made again (QPs are type-stable), and creation
	 * writes the type without the QP's lock; a QP is RTS only after a
	 * modify, which takes it */
	if (qp->attr.qp_state != IBV_QPS_RTS)
		return false;
	t = qp->qpx.qp_base.qp_type;
	return (t == IBV_QPT_RC || t == IBV_QPT_UC) &&
	       qp->link.state == SV_LINK_UP && qp->link.tx_ready &&
	       qp->link.rx_ready && !__builtin_expect(sv_inject.on, 0) &&
	       !qp->xrc.retry_ns && !qp->resp.rd_sent && !qp->resp.rnr &&
	       !sv_ring_ready(&qp->link.rx) && sv_resp_warm_done(qp);
}

/*
 * Whether a run of the QP's engine would find nothing to do: an RC or UC
 * QP in RTS on a shared-memory link with no send queue entry outstanding
 * (nothing to send, no ACK or timer to wait for), no record at its
 * ring's tail (one load: a line only the peer's next packet changes),
 * no read being answered, nothing to read ahead.  Then only a record
 * from the peer or a post (post.c runs the requester, and the entry
 * makes this false) gives it work, and a poll skips its run: the poll
 * of a CQ fed by many idle QPs costs a lock and a few loads for each
 * (issue 27), not four engine passes.  Also idle: a QP whose entries
 * are all on the link and wait only for the peer's ACK (acked_only).
 * Conservative: anything else (a RoCE link, faults injected, an XRC
 * forward to retry) runs; a TCP link has its own test, runs_idle().
 * Caller holds qp->lock.
 */
static bool idle(struct sv_qp *qp)
{
	return engine_idle(qp) && sv_link_rings_shared(&qp->link) &&
	       (qp->sq.comp == qp->sq.post || acked_only(qp));
}

/*
 * idle() for a link that runs (TCP), asked only by a poll whose CQ's
 * readiness set (set) was just asked which connections have bytes waiting
 * (sv_drive_ready): the QP was not among them (readable, taken here),
 * the engine is idle, its send entries (if any) wait only for the peer's
 * ACK and their timer is not due (over TCP it retransmits: comp.c), no
 * connection waits in its listener, and the link says it is idle
 * (sv_link_idle: its connection in the set, nothing to send).
 * Then a run would only read the socket and find nothing: a poll of a
 * CQ with 1,000 idle TCP QPs costs one epoll_wait and a lock and a few
 * loads for each, not 1,000 recv(2)s.  Caller holds qp->lock.
 */
static bool runs_idle(struct sv_qp *qp, int set)
{
	if (atomic_load_explicit(&qp->readable, memory_order_relaxed)) {
		/* before the run reads: bytes after it are found again */
		atomic_store_explicit(&qp->readable, false,
				      memory_order_relaxed);
		return false;
	}
	if (!engine_idle(qp) || sv_link_has_pending(&qp->link))
		return false;
	if (qp->sq.comp != qp->sq.post &&
	    !(acked_only(qp) && qp->comp.deadline &&
	      sv_now_ns() < qp->comp.deadline))
		return false;
	return sv_link_idle(&qp->link, set);
}

bool sv_drive_ready(int set, uint32_t nqps)
{
	struct sv_link *l[SV_READYSET_MAX];

	/* level triggered: more than a call's worth ready are the next
	 * call's (the kernel returns the ones it gave last) */
	for (uint32_t calls = 0; calls <= nqps / SV_READYSET_MAX; calls++) {
		int n = sv_readyset_wait(set, l, SV_READYSET_MAX);

		if (n < 0)
			return false;
		for (int i = 0; i < n; i++)
			atomic_store_explicit(
				&container_of(l[i], struct sv_qp, link)
					 ->readable,
				true, memory_order_relaxed);
		if (n < SV_READYSET_MAX)
			break;
	}
	return true;
}

/*
 * A thread of the app spins in ibv_get_cq_event (verbs/channel.c): it
 * runs the QPs of its channel's CQs itself.  A QP whose CQ is armed is the
 * progress thread's (look), with its sleep flags up, so each packet of a
 * peer rang our doorbell and woke the thread to do what the spin does:
 * rc_pingpong -e took 20-30 us a round trip here against 0.5-1.2 polled
 * (two system calls and a thread switch a packet, each side).  The flags
 * come down while the app spins and go up again when it stops, before it
 * sleeps (its last pass after that: look's Dekker order).  Only flags
 * that were up, and only by the spin that took them down (token); a look
 * of the thread meanwhile leaves them down.  A second spinner at worst
 * lets a doorbell ring, as before.  rc_pingpong -e at 8 B: 16.3-19.3 us
 * a round trip before, 15.0-16.5 after (bench/results/events; the
 * thread's wake-ups for the posts are much of the rest: post.c
 * tell_thread).
 */
static bool quiet_by(struct sv_qp *qp, uint64_t token)
{
	return atomic_load_explicit(&qp->prog.quiet_token,
				    memory_order_relaxed) == token;
}

void sv_qp_spin_begin(struct sv_qp *qp, uint64_t token)
{
	/* under the lock: the link's rings may be unmapped meanwhile */
	sv_lock(&qp->lock);
	if (quiet_by(qp, 0) && sv_link_rings_shared(&qp->link) &&
	    sv_link_sleeping(&qp->link)) {
		sv_link_set_sleep(&qp->link, false);
		atomic_store_explicit(&qp->prog.quiet_token, token,
				      memory_order_relaxed);
	}
	sv_unlock(&qp->lock);
}

void sv_qp_spin_end(struct sv_qp *qp, uint64_t token)
{
	if (!quiet_by(qp, token))
		return;
	sv_lock(&qp->lock);
	if (quiet_by(qp, token)) {
		atomic_store_explicit(&qp->prog.quiet_token, 0,
				      memory_order_relaxed);
		sv_link_set_sleep(&qp->link, true);
	}
	sv_unlock(&qp->lock);
}

void sv_qp_drive(struct sv_qp *qp, int set)
{
	enum ibv_qp_state s;

	/* the app drives it, even if it finds the lock taken: the progress
	 * thread keeps off (a hint: no locked instruction) */
	atomic_store_explicit(
		&qp->prog.drives,
		atomic_load_explicit(&qp->prog.drives, memory_order_relaxed) +
			1,
		memory_order_relaxed);
	/* someone else in the engine for this QP, or waiting to be (the
	 * progress thread taking a caller's connection): it makes the
	 * progress */
	if (!sv_trylock_polite(&qp->lock))
		return;
	s = qp->attr.qp_state;
	/* as sv_qp_run: the link is only looked at from RTR on (a QP made
	 * again in the slot a poller still holds is being set up) */
	if (s >= IBV_QPS_RTR && s != IBV_QPS_ERR &&
	    __builtin_expect(sv_link_runs(&qp->link), 0)) {
		uint64_t t;

		if (set >= 0 && runs_idle(qp, set)) {
			sv_unlock(&qp->lock);
			return;
		}
		/* our ACKs may wait for the app's reply, if a late one
		 * cannot make the peer time out: its timeout is unknown
		 * here, ours is the best guess (the thread looks every
		 * SV_ACTIVE_CHECK_MS) */
		t = sv_qp_ack_timeout_ns(qp);
		sv_stat_add(qp, poll_runs, 1);
		sv_link_set_lazy(&qp->link,
				 !qp->attr.timeout ||
					 t >= 4 * SV_ACTIVE_CHECK_MS *
							 1000000ull);
		sv_qp_run(qp, 0);
		sv_link_set_lazy(&qp->link, false);
		/* a state held for the reply (tcp/mirror.c state_may_wait)
		 * goes at our next poll, or else at the thread's next look:
		 * it must look within a check period.  It does for a QP the
		 * app drives; one it took (asleep) is asked to. */
		if (sv_link_owed(&qp->link, UINT64_MAX))
			sv_qp_note_work(qp, sv_now_ns() + SV_ACTIVE_CHECK_NS);
	} else if (!idle(qp)) {
		sv_stat_add(qp, poll_runs, 1);
		sv_qp_run(qp, 0);
	}
	sv_unlock(&qp->lock);
}

/* The one next deadline of a QP the thread owns: the earliest of its
 * timers (UINT64_MAX: none).  Caller holds qp->lock. */
static uint64_t next_ns(struct sv_qp *qp, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	if (qp->sq.comp != qp->sq.post && qp->comp.deadline &&
	    qp->comp.deadline < next)
		next = qp->comp.deadline;
	if (sv_link_next_ns(&qp->link, now) < next)
		next = sv_link_next_ns(&qp->link, now);
	if (qp->xrc.retry_ns && qp->xrc.retry_ns < next)
		next = qp->xrc.retry_ns; /* a forward to retry */
	if (qp->inject.rnr_until && qp->inject.rnr_until < next)
		next = qp->inject.rnr_until; /* SOFTVERBS_FAULTS rnr */
	if (qp->inject.delay_until && qp->inject.delay_until < next)
		next = qp->inject.delay_until; /* ... delay_us */
	if (qp->inject.ack_pending && qp->inject.ack_due < next)
		next = qp->inject.ack_due; /* ... on the way back */
	if (qp->inject.rsp_due && qp->sq.comp != qp->sq.post &&
	    qp->attr.qp_state != IBV_QPS_ERR && qp->inject.rsp_due < next)
		next = qp->inject.rsp_due; /* ... read/atomic answers */
	return next;
}

static void park_check(struct sv_timer *t, uint64_t now);

/*
 * Parking.  A QP the app drives is looked at once per check period, to
 * see that it still does: per QP, that is O(QPs) looks a second (500 idle
 * TCP QPs on a polled CQ: 7,700 looks in 0.5 s, each a lock and an ioctl).
 * But an idle QP on a receive CQ the app keeps polling needs no look of
 * its own: those polls run it (a record on its ring, bytes on its socket
 * found by the CQ's readiness set, a post of the app's asks for a look).
 * So such a QP is left to the polls (parked: no timer), and one timer of
 * the context checks, once a period, that each CQ with parked QPs is still
 * polled; the QPs of one that was not are looked at then, as their own
 * timers would have.  Idle: the engine (engine_idle), nothing on the send
 * queue, no call pending, nothing owed or held by the link, not stalled,
 * and for a link that runs (TCP) its connection in the CQ's readiness set
 * with nothing to send (sv_link_idle).  Caller holds qp->lock.
 */
static bool parkable(struct sv_qp *qp, bool stalled)
{
	struct sv_cq *cq = qp->rcq;
	uint64_t polls;
	int set;

	if (!cq || qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV)
		return false;
	polls = atomic_load_explicit(&cq->polls, memory_order_relaxed);
	if (polls == qp->prog.seen_polls)
		return false; /* not polled since our last look */
	qp->prog.seen_polls = polls;
	if (stalled || !engine_idle(qp) || qp->sq.comp != qp->sq.post ||
	    sv_link_has_pending(&qp->link) ||
	    sv_link_owed(&qp->link, UINT64_MAX))
		return false;
	if (!sv_link_runs(&qp->link))
		return sv_link_rings_shared(&qp->link);
	/* acquire: the set was made by the poller that stored it (cq.c
	 * ready_set), and epoll_ctl on it must come after */
	set = atomic_load_explicit(&cq->ready_set, memory_order_acquire);
	return set >= 0 && sv_link_idle(&qp->link, set);
}

/* Leaves qp to its receive CQ's polls; the context's check timer runs
 * while any CQ has parked QPs.  The progress thread, under qp->lock. */
static void park(struct sv_context *ctx, struct sv_qp *qp, uint64_t now)
{
	struct sv_cq *cq = qp->rcq;

	qp->prog.parked = true;
	pthread_mutex_lock(&ctx->park_lock);
	if (!cq->park_listed) {
		cq->park_listed = true;
		cq->park_seen =
			atomic_load_explicit(&cq->polls, memory_order_relaxed);
		sv_list_add_tail(&ctx->park_cqs, &cq->park_node);
	}
	pthread_mutex_unlock(&ctx->park_lock);
	if (!ctx->park_timer.idx) {
		ctx->park_timer.cb = park_check;
		if (sv_progress_timer_start(ctx, &ctx->park_timer,
					    now + SV_ACTIVE_CHECK_NS))
			sv_dbg("no memory for the park check's timer\n");
	}
}

void sv_drive_cq_gone(struct sv_cq *cq)
{
	struct sv_context *ctx = cq->ctx;

	pthread_mutex_lock(&ctx->park_lock);
	if (cq->park_listed)
		sv_list_del(&cq->park_node);
	cq->park_listed = false;
	pthread_mutex_unlock(&ctx->park_lock);
}

/*
 * One look at one QP (the progress thread; caller holds ctx->qp_lock for
 * reading, and qp is listed).  A QP the application drove in the last
 * check period is its business: we take its sleep flags down and leave it.
 * Any other QP — the app does not poll its CQs, or waits for an event on
 * them — is ours: flags up (peers then ring our doorbell), then we run its
 * engine.  Returns when to look at it again: the app's QP at the end of its
 * check period, ours at its earliest timer, UINT64_MAX for never (its
 * events, or new work, bring us back).
 */
static uint64_t look(struct sv_qp *qp, bool swept)
{
	uint64_t now = sv_now_ns(), drives, next;
	bool mine, rung, stalled = false;

	/* the app's, unless undriven for a whole check period (a look right
	 * after another proves nothing) or armed.  Swept from a parked
	 * state (park_check): what moved drives meanwhile was the polls of
	 * a CQ that has stopped, not the app driving this QP since */
	drives = atomic_load_explicit(&qp->prog.drives, memory_order_relaxed);
	swept = swept && qp->prog.parked;
	if (drives != qp->prog.seen_drives && !swept)
		qp->prog.active_ns = now;
	qp->prog.seen_drives = drives;
	qp->prog.parked = false;
	/* an XRC_RECV QP is always ours: it has no CQ, so no poll runs it
	 * (a spin in ibv_get_cq_event drives it, then sleeps with its flags
	 * down: the peer would not ring us) */
	mine = now - qp->prog.active_ns >= SV_ACTIVE_CHECK_NS ||
	       qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV ||
	       (qp->scq && atomic_load(&qp->scq->armed)) ||
	       (qp->rcq && qp->qpx.qp_base.qp_type != IBV_QPT_XRC_RECV &&
		atomic_load(&qp->rcq->armed));
	/* never spin on a QP lock here: we may have preempted its holder on
	 * this CPU.  Busy means driven: look again soon. */
	if (!sv_trylock(&qp->lock)) {
		atomic_store(&qp->look_at, now + SV_ACTIVE_CHECK_NS);
		return now + SV_ACTIVE_CHECK_NS;
	}
	sv_stat_add(qp, progress_looks, 1);
	if (swept)
		sv_stat_add(qp, progress_swept, 1);
	rung = atomic_load_explicit(&qp->pfd[1].rung, memory_order_relaxed);
	if (rung) {
		/* before draining: a ring after it is a new edge */
		atomic_store(&qp->pfd[1].rung, false);
		sv_qp_link_event(qp, sv_link_check(&qp->link, -1));
	}
	if (!mine) {
		/* new rings start asleep (ring.c): this clears them */
		sv_link_set_sleep(&qp->link, false);
		sv_lanes_rx_sleep(qp, false); /* UD lanes (lane.c) */
		/* a caller that came while the app held the QP: its runs take
		 * it over TCP (sv_qp_run), but a shared-memory link that is
		 * up has no run to do it */
		if (sv_link_has_pending(&qp->link))
			sv_qp_link_step(qp);
		/* over TCP its polls read what arrives: we stop watching (a
		 * wake-up per message took half the time of a small one
		 * across hosts), unless what arrives waits unread — the app
		 * drives the QP but polls its memory for an RDMA write our
		 * responder must do (ib_write_lat): then we run it on each
		 * arrival, not at the app's next poll (2.6-5.4 ms a round
		 * trip); and we send an ACK the app's polls let wait
		 * (sv_link_set_lazy) */
		if (sv_link_runs(&qp->link)) {
			stalled = sv_link_stalled(&qp->link);
			sv_link_quiet(&qp->link, true);
			if (rung || stalled || sv_link_owed(&qp->link, now))
				sv_qp_run(qp, now);
		}
		if (parkable(qp, stalled)) {
			park(qp->ctx, qp, now);
			atomic_store(&qp->look_at,
				     0); /* a post asks for a look */
			sv_unlock(&qp->lock);
			return UINT64_MAX;
		}
		next = qp->prog.active_ns + SV_ACTIVE_CHECK_NS;
		atomic_store(&qp->look_at, next);
		sv_unlock(&qp->lock);
		return next;
	}
	/* not while an app thread spins on it: it runs it, and puts the
	 * flags up again when it stops (sv_qp_spin_end) */
	if (quiet_by(qp, 0))
		sv_link_set_sleep(&qp->link, true);
	sv_link_quiet(&qp->link, false);
	sv_lanes_rx_sleep(qp, true);
	/* seq_cst: flags up before we look at the rings (Dekker) */
	atomic_thread_fence(memory_order_seq_cst);
	sv_qp_run(qp, now);
	if (sv_link_has_pending(&qp->link))
		sv_qp_link_step(qp);
	next = next_ns(qp, now);
	/* under the lock: new work posted after it sees when we look again
	 * and asks for a look if it is due sooner (sv_qp_note_work); before
	 * it, our run saw it */
	atomic_store(&qp->look_at, next == UINT64_MAX ? 0 : next);
	sv_unlock(&qp->lock);
	return next;
}

static void qp_timer(struct sv_timer *t, uint64_t now);

/*
 * Looks at qp if it is still on the context's list (it may have been
 * destroyed since its event or timer was set): QPs are type-stable
 * (qp.c), so its memory is a QP's whatever happened, and listed says in
 * O(1) whether it is alive.  Then its one timer goes where look() says.
 * The progress thread only.
 */
static void visit_as(struct sv_qp *qp, bool swept)
{
	struct sv_context *ctx = sv_progress_ctx();
	uint64_t next = UINT64_MAX;

	pthread_rwlock_rdlock(&ctx->qp_lock);
	if (atomic_load_explicit(&qp->listed, memory_order_relaxed))
		next = look(qp, swept);
	pthread_rwlock_unlock(&ctx->qp_lock);
	if (next == UINT64_MAX) {
		sv_progress_timer_stop(ctx, &qp->timer);
		return;
	}
	qp->timer.cb = qp_timer;
	if (sv_progress_timer_start(ctx, &qp->timer, next)) {
		/* no room in the heap: new work kicks us again */
		sv_dbg("qp %06x: no memory for its timer\n",
		       qp->qpx.qp_base.qp_num);
		atomic_store(&qp->look_at, 0);
	}
}

static void visit(struct sv_qp *qp)
{
	visit_as(qp, false);
}

/* The parked QPs of cq into q[], *n of them (at most cap); a QP's prog
 * is read under its lock (its creation zeroes it there).  A QP whose lock
 * is taken is someone's to drive: it is looked at too, as its timer would
 * have.  Only a try: park_lock comes after a QP's lock. */
static void parked_of(struct sv_cq *cq, struct sv_qp **q, uint32_t *n,
		      uint32_t cap)
{
	struct sv_qp_set *set =
		atomic_load_explicit(&cq->qps, memory_order_acquire);
	uint32_t k = atomic_load_explicit(&set->n, memory_order_acquire);

	for (uint32_t i = 0; i < k && *n < cap; i++) {
		struct sv_qp *qp =
			atomic_load_explicit(&set->qp[i], memory_order_acquire);
		bool parked = true;

		if (sv_trylock(&qp->lock)) {
			parked = qp->prog.parked;
			sv_unlock(&qp->lock);
		}
		if (parked)
			q[(*n)++] = qp;
	}
}

/*
 * The context's park check (see park): a CQ polled since the last check
 * keeps its QPs parked; the parked QPs of one that was not are looked at
 * now (visit_as swept), outside park_lock, which comes after a QP's lock.
 * The CQ's set is read under park_lock (its destroy takes the CQ off the
 * list first: sv_drive_cq_gone).  The progress thread.
 */
static void park_check(struct sv_timer *t, uint64_t now)
{
	struct sv_context *ctx = sv_progress_ctx();
	struct sv_list *pos, *next;
	struct sv_qp **q = NULL;
	uint32_t n = 0, cap = 0;
	bool more;

	(void)t;
	pthread_mutex_lock(&ctx->park_lock);
	for (pos = ctx->park_cqs.next; pos != &ctx->park_cqs; pos = next) {
		struct sv_cq *cq = container_of(pos, struct sv_cq, park_node);
		uint64_t polls =
			atomic_load_explicit(&cq->polls, memory_order_relaxed);
		uint32_t k = atomic_load_explicit(
			&atomic_load_explicit(&cq->qps, memory_order_acquire)
				 ->n,
			memory_order_acquire);
		struct sv_qp **grown;

		next = pos->next;
		if (polls != cq->park_seen) {
			cq->park_seen = polls;
			continue;
		}
		grown = realloc(q, (size_t)(cap + k) * sizeof(*q));
		if (!grown)
			continue; /* next time */
		q = grown;
		cap += k;
		parked_of(cq, q, &n, cap);
		sv_list_del(pos);
		cq->park_listed = false;
	}
	more = !sv_list_empty(&ctx->park_cqs);
	pthread_mutex_unlock(&ctx->park_lock);
	for (uint32_t i = 0; i < n; i++)
		visit_as(q[i], true);
	free(q);
	if (more && !ctx->park_timer.idx &&
	    sv_progress_timer_start(ctx, &ctx->park_timer,
				    now + SV_ACTIVE_CHECK_NS))
		sv_dbg("no memory for the park check's timer\n");
}

static void qp_timer(struct sv_timer *t, uint64_t now)
{
	(void)now;
	visit(container_of(t, struct sv_qp, timer));
}

/* The QP of a pfd's event: read before the callback switched (a reused
 * QP's zeroed pfd has no QP). */
static struct sv_qp *pfd_qp(struct sv_io *io)
{
	return container_of(io, struct sv_pfd, io)->qp;
}

void sv_qp_on_doorbell(struct sv_io *io, uint32_t revents)
{
	struct sv_pfd *p = container_of(io, struct sv_pfd, io);

	/* edge triggered; look() drains it under the QP's lock (the app may
	 * close the fd meanwhile).  A TCP link's socket too: look() runs
	 * the QP if it is ours; if the app drives it, its next poll reads
	 * the socket (and sends what waits).  A hang-up is said before the
	 * rung: its reader must read on to the end of what came, the peer's
	 * last bytes and its EOF, which this same edge announced (no new
	 * edge follows the FIN) */
	if (revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		atomic_store(&p->hup, true);
	atomic_store(&p->rung, true);
	if (p->qp)
		visit(p->qp);
}

/* Runs step on qp under its lock if qp is still listed. */
static void locked(struct sv_qp *qp, struct sv_pfd *p,
		   void (*step)(struct sv_qp *, struct sv_pfd *))
{
	struct sv_context *ctx = sv_progress_ctx();

	pthread_rwlock_rdlock(&ctx->qp_lock);
	if (atomic_load_explicit(&qp->listed, memory_order_relaxed)) {
		sv_lock(&qp->lock);
		step(qp, p);
		sv_unlock(&qp->lock);
	}
	pthread_rwlock_unlock(&ctx->qp_lock);
}

static void listen_step(struct sv_qp *qp, struct sv_pfd *p)
{
	(void)p;
	sv_qp_link_step(qp);
}

/*
 * A caller in the QP's listener, or a pending caller's hello (link.c).
 * Taken by whoever holds the QP: a QP the app drives is held by its poll
 * most of the time, and waiting for it here took 3-21 ms (the lock is not
 * fair, and its holder may be preempted); its next run takes the caller
 * (sv_qp_run: the link has a connection pending).
 */
void sv_qp_on_listen(struct sv_io *io, uint32_t revents)
{
	struct sv_qp *qp = pfd_qp(io);
	struct sv_context *ctx = sv_progress_ctx();

	(void)revents;
	if (!qp)
		return;
	atomic_store_explicit(&qp->link.accept_due, true, memory_order_relaxed);
	pthread_rwlock_rdlock(&ctx->qp_lock);
	if (atomic_load_explicit(&qp->listed, memory_order_relaxed) &&
	    sv_trylock(&qp->lock)) {
		listen_step(qp, container_of(io, struct sv_pfd, io));
		sv_unlock(&qp->lock);
	}
	pthread_rwlock_unlock(&ctx->qp_lock);
	visit(qp);
}

static void conn_step(struct sv_qp *qp, struct sv_pfd *p)
{
	if (p->fd >= 0)
		sv_qp_link_event(qp, sv_link_check(&qp->link, p->fd));
}

void sv_qp_on_conn(struct sv_io *io, uint32_t revents)
{
	struct sv_qp *qp = pfd_qp(io);

	(void)revents;
	if (!qp)
		return;
	locked(qp, container_of(io, struct sv_pfd, io), conn_step);
	visit(qp);
}

void sv_qp_on_ud(struct sv_io *io, uint32_t revents)
{
	struct sv_pfd *p = container_of(io, struct sv_pfd, io);
	struct sv_context *ctx = sv_progress_ctx();
	struct sv_qp *qp = p->qp;

	(void)revents;
	if (!qp)
		return;
	pthread_rwlock_rdlock(&ctx->qp_lock);
	if (atomic_load_explicit(&qp->listed, memory_order_relaxed)) {
		/* with UD lanes, polls read the socket only once rung */
		atomic_store(&p->rung, true);
		/* edge triggered: drains all.  A QP the app holds is being
		 * driven (its poll drains the socket) or is looked at again
		 * soon (its timer): never wait for it here, the thread also
		 * passes on the datagrams that reach the UDP listener (ud.c),
		 * maybe the very ones that app is polling for */
		if (sv_trylock(&qp->lock)) {
			sv_ud_recv_run(qp, sv_srq_take);
			sv_unlock(&qp->lock);
		}
	}
	pthread_rwlock_unlock(&ctx->qp_lock);
	visit(qp);
}

/* A visit another thread asked for (sv_qp_visit), on the thread. */
static void on_visit(struct sv_async *a)
{
	visit(container_of(a, struct sv_qp, visit));
}

void sv_qp_visit(struct sv_qp *qp)
{
	sv_progress_async(qp->ctx, &qp->visit, on_visit);
}

void sv_qp_note_work(struct sv_qp *qp, uint64_t due)
{
	uint64_t at = atomic_load_explicit(&qp->look_at, memory_order_relaxed);

	/* the thread looks at it by then anyway (a plain load first: no
	 * locked instruction on the fast path) */
	if (at && due >= at)
		return;
	/* it will not look by itself (0), or later than the new work is
	 * due (a delay line's request, a QP it held with a far ACK
	 * timer): a look arms the new work's timers.  One asks (1: a
	 * visit is queued); a look after our work stores its own time. */
	if (atomic_compare_exchange_strong(&qp->look_at, &at, 1))
		sv_qp_visit(qp);
}

uint64_t sv_drive_doors_next_ns(struct sv_context *ctx, uint64_t now)
{
	uint64_t next = sv_transport_door_next_ns(ctx, now);
	uint64_t ud = sv_ud_door_next_ns(ctx, now);

	return ud < next ? ud : next;
}
