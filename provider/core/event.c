// SPDX-License-Identifier: MIT
/*
 * Events queued for the program: an async event on the context's queue,
 * a completion event on a CQ's channel.  The engine and the CQ's push raise
 * them from below the verbs, so this producer side is in core/; the
 * consumer side (ibv_get_async_event, ibv_get_cq_event, the queues' fds)
 * is verbs/channel.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "objects.h"

void sv_evq_count(struct sv_evq *q, uint64_t n)
{
	if (n && write(q->fd, &n, sizeof(n)) != sizeof(n))
		sv_dbg("event fd: %s\n", strerror(errno));
}

void sv_async_event(struct sv_context *ctx, const struct ibv_async_event *e)
{
	struct sv_async_ev *a = malloc(sizeof(*a));

	if (!a)
		return;
	a->ev = *e;
	pthread_mutex_lock(&ctx->async.lock);
	sv_list_add_tail(&ctx->async.events, &a->node);
	pthread_mutex_unlock(&ctx->async.lock);
	sv_evq_count(&ctx->async, 1);
}

static __thread struct sv_evq *spin_evq;

void sv_evq_spinning(struct sv_evq *q)
{
	spin_evq = q;
}

/* Queues one event for cq; called with no CQ lock held.  Raised by the
 * thread that spins for it, it needs no count: that thread takes it
 * next, and the eventfd's write and read cost two system calls an
 * event (rc_pingpong -e). */
void sv_channel_signal(struct sv_channel *ch, struct sv_cq *cq)
{
	bool own = spin_evq == &ch->evq;

	pthread_mutex_lock(&ch->evq.lock);
	if (cq->events_queued++ == 0)
		sv_list_add_tail(&ch->evq.events, &cq->ev_node);
	ch->evq.uncounted += own;
	pthread_mutex_unlock(&ch->evq.lock);
	if (!own)
		sv_evq_count(&ch->evq, 1);
}
