// SPDX-License-Identifier: MIT
/*
 * Event queues behind real fds: completion channels (CQ events) and the
 * context's async events.  Each fd is an eventfd in semaphore mode that
 * counts queued events, so applications may poll()/epoll it and set
 * O_NONBLOCK as on hardware; ibv_get_*_event reads one count, then
 * dequeues one event.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core.h"
#include "engine.h"
#include "env.h"
#include "progress.h"
#include "verbs.h"

int sv_evq_init(struct sv_evq *q)
{
	q->fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	if (q->fd < 0)
		return -errno;
	pthread_mutex_init(&q->lock, NULL);
	sv_list_init(&q->events);
	return 0;
}

void sv_evq_destroy(struct sv_evq *q)
{
	while (!sv_list_empty(&q->events)) {
		struct sv_list *n = q->events.next;

		sv_list_del(n);
		free(container_of(n, struct sv_async_ev, node));
	}
	close(q->fd);
	pthread_mutex_destroy(&q->lock);
}

/*
 * Takes one count: blocks unless the app made the fd non-blocking.  As
 * rdma-core's read() on the kernel's fd: a signal whose handler has no
 * SA_RESTART ends the wait with -1/EINTR (qperf ends timed tests so).
 */
static int evq_take(struct sv_evq *q)
{
	uint64_t v;

	return read(q->fd, &v, sizeof(v)) == sizeof(v) ? 0 : -1;
}

static bool is_qp_event(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return true;
	default:
		return false;
	}
}

static bool is_srq_event(enum ibv_event_type t)
{
	return t == IBV_EVENT_SRQ_LIMIT_REACHED || t == IBV_EVENT_SRQ_ERR;
}

int sv_get_async_event(struct ibv_context *c, struct ibv_async_event *event)
{
	struct sv_context *ctx = to_sctx(c);
	struct sv_async_ev *a;

	if (evq_take(&ctx->async))
		return -1;
	pthread_mutex_lock(&ctx->async.lock);
	if (sv_list_empty(&ctx->async.events)) {
		pthread_mutex_unlock(&ctx->async.lock);
		errno = EAGAIN; /* its object was destroyed meanwhile */
		return -1;
	}
	a = container_of(ctx->async.events.next, struct sv_async_ev, node);
	sv_list_del(&a->node);
	*event = a->ev;
	if (event->event_type == IBV_EVENT_CQ_ERR)
		to_scq(event->element.cq)->async_got++;
	else if (is_qp_event(event->event_type))
		to_sqp(event->element.qp)->async_got++;
	else if (is_srq_event(event->event_type))
		to_ssrq(event->element.srq)->async_got++;
	pthread_mutex_unlock(&ctx->async.lock);
	free(a);
	return 0;
}

void sv_async_forget(struct sv_context *ctx, void *obj)
{
	struct sv_list *n, *next;

	pthread_mutex_lock(&ctx->async.lock);
	for (n = ctx->async.events.next; n != &ctx->async.events; n = next) {
		struct sv_async_ev *a =
			container_of(n, struct sv_async_ev, node);
		uint64_t v;

		next = n->next;
		if (a->ev.element.cq != obj &&
		    (void *)a->ev.element.qp != obj &&
		    (void *)a->ev.element.srq != obj)
			continue;
		/* take its count too, so the fd stays truthful */
		if (read(ctx->async.fd, &v, sizeof(v)) != sizeof(v))
			continue;
		sv_list_del(n);
		free(a);
	}
	pthread_mutex_unlock(&ctx->async.lock);
}

void sv_ack_async_event(struct ibv_async_event *event)
{
	pthread_mutex_t *m;
	pthread_cond_t *cond;
	uint32_t *count;

	if (event->event_type == IBV_EVENT_CQ_ERR) {
		struct ibv_cq *cq = event->element.cq;

		m = &cq->mutex;
		cond = &cq->cond;
		count = &cq->async_events_completed;
	} else if (is_qp_event(event->event_type)) {
		struct ibv_qp *qp = event->element.qp;

		m = &qp->mutex;
		cond = &qp->cond;
		count = &qp->events_completed;
	} else if (is_srq_event(event->event_type)) {
		struct ibv_srq *srq = event->element.srq;

		m = &srq->mutex;
		cond = &srq->cond;
		count = &srq->events_completed;
	} else {
		return;
	}
	pthread_mutex_lock(m);
	++*count;
	pthread_cond_broadcast(cond);
	pthread_mutex_unlock(m);
}

struct ibv_comp_channel *sv_create_comp_channel(struct ibv_context *c)
{
	struct sv_channel *ch = calloc(1, sizeof(*ch));
	int err;

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	err = sv_evq_init(&ch->evq);
	if (err) {
		free(ch);
		errno = -err;
		return NULL;
	}
	sv_list_init(&ch->cqs);
	ch->ibv.context = c;
	ch->ibv.fd = ch->evq.fd;
	ch->ibv.refcnt = 0;
	return &ch->ibv;
}

int sv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sv_channel *ch = to_schannel(channel);
	int busy;

	pthread_mutex_lock(&channel->context->mutex);
	busy = channel->refcnt;
	pthread_mutex_unlock(&channel->context->mutex);
	if (busy)
		return EBUSY;
	/* queued CQ nodes belong to their CQs: just forget them */
	sv_list_init(&ch->evq.events);
	sv_evq_destroy(&ch->evq);
	free(ch);
	return 0;
}

/* Whether an event waits: under the queue's lock, since the engine adds
 * them from the progress thread (sv_channel_signal). */
static bool evq_pending(struct sv_evq *q)
{
	bool has;

	pthread_mutex_lock(&q->lock);
	has = !sv_list_empty(&q->events);
	pthread_mutex_unlock(&q->lock);
	return has;
}

enum spin_pass { SPIN_FIRST, SPIN_AGAIN, SPIN_LAST };
enum qp_step { QP_QUIET, QP_RING_AGAIN, QP_DRIVE };

/* One step on each QP of ch's CQs; caller holds the context's qp_lock
 * (the list and the sets' membership). */
static void channel_qps(struct sv_channel *ch, enum qp_step step,
			uint64_t token)
{
	struct sv_list *n;

	sv_list_for_each(n, &ch->cqs)
	{
		struct sv_qp_set *set = atomic_load_explicit(
			&container_of(n, struct sv_cq, ch_node)->qps,
			memory_order_acquire);
		uint32_t k =
			atomic_load_explicit(&set->n, memory_order_acquire);

		for (uint32_t i = 0; i < k; i++) {
			struct sv_qp *qp = atomic_load_explicit(
				&set->qp[i], memory_order_acquire);

			if (step == QP_QUIET)
				sv_qp_spin_begin(qp, token);
			else if (step == QP_RING_AGAIN)
				sv_qp_spin_end(qp, token);
			else
				sv_qp_drive(qp, -1);
		}
	}
}

/* One pass of the spin over the QPs of ch's CQs (a QP completes nowhere
 * else; one on two of its CQs is seen twice, and its second look finds
 * nothing): so many idle QPs elsewhere in the context cost the wait
 * nothing.  The first pass takes the QPs' sleep flags down for the spin,
 * the last puts them up again before its runs (drive.c
 * sv_qp_spin_begin).  The last runs them even when the spin got its
 * event: a packet that came while the flags were down rang nobody, and
 * the app may wait next where no spin runs (its own poll of the
 * channel's fd).  A QP that joins a CQ meanwhile keeps its flags (not
 * ours); one that leaves takes ours along, as before. */
static void spin_pass(struct sv_channel *ch, uint64_t token,
		      enum spin_pass pass)
{
	struct sv_context *ctx = to_sctx(ch->ibv.context);

	pthread_rwlock_rdlock(&ctx->qp_lock);
	if (pass == SPIN_FIRST) {
		channel_qps(ch, QP_QUIET, token);
	} else if (pass == SPIN_LAST) {
		channel_qps(ch, QP_RING_AGAIN, token);
		/* seq_cst: flags up before the rings are looked at
		 * (Dekker) */
		atomic_thread_fence(memory_order_seq_cst);
	}
	channel_qps(ch, QP_DRIVE, 0);
	pthread_rwlock_unlock(&ctx->qp_lock);
}

/* Spins on the engine a little before sleeping: a wake-up across CPUs
 * costs ~50 us here, more than most answers take to arrive.  Meanwhile
 * peers need not ring us (sv_qp_spin_begin). */
static bool spin_for_event(struct sv_channel *ch)
{
	static _Atomic uint64_t tokens;
	uint64_t end = sv_now_ns() + sv_env_uint(SV_ENV_EVENT_SPIN_US) * 1000;
	uint64_t token = atomic_fetch_add(&tokens, 1) + 1;
	struct pollfd p = {.fd = ch->evq.fd, .events = POLLIN};
	enum spin_pass pass = SPIN_FIRST;
	bool got;

	for (;;) {
		spin_pass(ch, token, pass);
		got = evq_pending(&ch->evq);
		if (pass == SPIN_LAST)
			return got || poll(&p, 1, 0) == 1;
		pass = got || sv_now_ns() >= end ? SPIN_LAST : SPIN_AGAIN;
	}
}

/* fl_seen: valid, non-blocking, and calls since fcntl said so (<< 2). */
#define FL_VALID     1u
#define FL_NONBLOCK  2u
#define FL_CALL	     4u
#define FL_ASK_EVERY 64u /* calls: a flag the app changed is seen by then */

/*
 * Whether the app made the channel's fd non-blocking (so a wait must not
 * spin), without an fcntl a call: that cost a system call an event.  An
 * answer gone stale costs time once, never the fd's semantics, which the
 * read keeps: a blocking fd taken for non-blocking is read without the
 * spin first; a non-blocking one taken for blocking spins first, and its
 * read's EAGAIN then says so (sv_get_cq_event).
 */
static bool nonblocking(struct sv_channel *ch)
{
	uint32_t s = atomic_load_explicit(&ch->fl_seen, memory_order_relaxed);
	int fl;

	if ((s & FL_VALID) && s / FL_CALL < FL_ASK_EVERY) {
		atomic_store_explicit(&ch->fl_seen, s + FL_CALL,
				      memory_order_relaxed);
		return s & FL_NONBLOCK;
	}
	fl = fcntl(ch->evq.fd, F_GETFL);
	s = FL_VALID | (fl >= 0 && (fl & O_NONBLOCK) ? FL_NONBLOCK : 0);
	atomic_store_explicit(&ch->fl_seen, s, memory_order_relaxed);
	return s & FL_NONBLOCK;
}

int sv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq_out,
		    void **cq_context)
{
	struct sv_channel *ch = to_schannel(channel);
	struct sv_cq *cq;
	uint32_t rest;

	/* with an event queued, neither a spin nor the fd's flags: the
	 * read takes it at once (or another thread took it first, and the
	 * read is the wait the app asked for) */
	if (!evq_pending(&ch->evq) && !nonblocking(ch)) {
		sv_evq_spinning(&ch->evq);
		spin_for_event(ch);
		sv_evq_spinning(NULL);
	}
	pthread_mutex_lock(&ch->evq.lock);
	if (ch->evq.uncounted) { /* raised by a spin: no count to read */
		ch->evq.uncounted--;
	} else {
		pthread_mutex_unlock(&ch->evq.lock);
		if (evq_take(&ch->evq)) {
			if (errno == EAGAIN) /* non-blocking now */
				atomic_store_explicit(&ch->fl_seen,
						      FL_VALID | FL_NONBLOCK,
						      memory_order_relaxed);
			return -1;
		}
		pthread_mutex_lock(&ch->evq.lock);
	}
	rest = ch->evq.uncounted; /* the spin raised more than one */
	ch->evq.uncounted = 0;
	if (sv_list_empty(&ch->evq.events)) {
		pthread_mutex_unlock(&ch->evq.lock);
		sv_evq_count(&ch->evq, rest);
		errno = EAGAIN;
		return -1;
	}
	cq = container_of(ch->evq.events.next, struct sv_cq, ev_node);
	if (--cq->events_queued == 0)
		sv_list_del(&cq->ev_node);
	cq->events_got++;
	pthread_mutex_unlock(&ch->evq.lock);
	sv_evq_count(&ch->evq, rest);
	*cq_out = (struct ibv_cq *)&cq->ex;
	*cq_context = cq->ex.cq_context;
	return 0;
}

void sv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
