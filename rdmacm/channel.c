// SPDX-License-Identifier: MIT
/*
 * Event channels: a queue of events per channel and an eventfd as its
 * fd, readable exactly while an event is pending (librdmacm's contract) and the
 * program's O_NONBLOCK on it makes rdma_get_cm_event fail with EAGAIN.
 * Also the acknowledgement rule: rdma_destroy_id waits for the acks of
 * the events it got, and the order of a DISCONNECTED after the
 * completions the peer made possible before it (hold_disconnect), and
 * a channel destroyed under a thread waiting in rdma_get_cm_event: that
 * thread sleeps for ever, as the kernel's reader does (channel_park).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cm.h"

struct cm_channel *cm_channel_create(bool sync)
{
	struct cm_channel *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return NULL;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	ch->sync = sync;
	return ch;
}

/*
 * rdma_destroy_event_channel closes the fd and frees the channel
 * (librdmacm's does both).  A thread still inside rdma_get_cm_event
 * keeps the memory: the last one out frees it (channel_leave).  The fd
 * is closed under the lock, so a lock holder that finds the channel
 * alive finds its fd open.
 */
void cm_channel_destroy(struct cm_channel *ch)
{
	struct cm_event *e, *n;
	bool last;

	pthread_mutex_lock(&cm_core.lock);
	for (e = ch->head; e; e = n) {
		n = e->next;
		free(e);
	}
	ch->head = ch->tail = NULL;
	close(ch->ch.fd);
	ch->dead = true;
	last = !ch->waiters;
	pthread_mutex_unlock(&cm_core.lock);
	if (last)
		free(ch);
}

struct cm_event *cm_event_new(struct cm_id *c, enum rdma_cm_event_type type,
			      int status)
{
	struct cm_event *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->ev.id = &c->id;
	e->ev.event = type;
	e->ev.status = status;
	e->owner = c;
	return e;
}

/* Lock held: the fd is readable exactly while the queue is not empty.
 * Only lock holders read or write it, and only when `armed` says the
 * read cannot block; waiters poll it without the lock. */
static void set_readable(struct cm_channel *ch, bool on)
{
	uint64_t v = 1;

	if (on == ch->armed)
		return;
	if (on ? write(ch->ch.fd, &v, sizeof(v)) != sizeof(v)
	       : read(ch->ch.fd, &v, sizeof(v)) != sizeof(v))
		cm_log("event channel fd %d: %s failed (%d)\n", ch->ch.fd,
		       on ? "write" : "read", errno);
	/* written under the lock; cm_channel_pending reads it without */
	__atomic_store_n(&ch->armed, on, __ATOMIC_RELEASE);
}

/*
 * Whether the channel may have an event, without the lock or a system
 * call (rsockets' data path asks at every progress; rdma_get_cm_event
 * costs the lock and an fcntl).  A stale false is as good as an event
 * queued just after the question: the next progress sees it.
 */
bool cm_channel_pending(struct rdma_event_channel *channel)
{
	return __atomic_load_n(&cm_channel_of(channel)->armed,
			       __ATOMIC_ACQUIRE);
}

/* Lock held.  The id's channel gets it. */
void cm_event_queue(struct cm_id *c, struct cm_event *e)
{
	struct cm_channel *ch = cm_channel_of(c->id.channel);

	e->next = NULL;
	if (ch->tail)
		ch->tail->next = e;
	else
		ch->head = e;
	ch->tail = e;
	c->queued++;
	set_readable(ch, true);
	cm_log("queued %s status %d for id %p (%s)\n",
	       rdma_event_str(e->ev.event), e->ev.status, (void *)c,
	       cm_state_names[c->state]);
}

/* Lock held: the queued (not yet got) events of c leave its channel. */
void cm_channel_drop_events(struct cm_id *c)
{
	struct cm_channel *ch = cm_channel_of(c->id.channel);
	struct cm_event **pp = &ch->head, *e;

	ch->tail = NULL;
	while ((e = *pp)) {
		if (e->owner == c || e->ev.listen_id == &c->id) {
			*pp = e->next;
			e->owner->queued--;
			free(e);
			continue;
		}
		ch->tail = e;
		pp = &e->next;
	}
	set_readable(ch, ch->head != NULL);
}

CM_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_channel *ch;
	int ret = cm_core_init();

	if (ret) {
		errno = -ret;
		return NULL;
	}
	ch = cm_channel_create(false);
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	return &ch->ch;
}

CM_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (channel)
		cm_channel_destroy(cm_channel_of(channel));
}

/* Takes the head event, or NULL; lock held. */
static struct cm_event *pop(struct cm_channel *ch)
{
	struct cm_event *e = ch->head;

	if (!e)
		return NULL;
	ch->head = e->next;
	if (!ch->head)
		ch->tail = NULL;
	e->owner->queued--;
	e->owner->unacked++;
	set_readable(ch, ch->head != NULL);
	return e;
}

/*
 * Lock held, the channel non-blocking: whether the head event is a
 * DISCONNECTED to hold back once, and then the CQs of its id's QP.
 *
 * On an HCA the peer's ACKs and messages become completions as they
 * arrive, long before its DREQ: a program that polls its CQ and reads
 * its (non-blocking) channel in turn has polled them before it sees
 * DISCONNECTED.  Ours are made when someone runs the QP's engine, and
 * the peer's ACK may come only just before its DREQ (its program was
 * not scheduled earlier).  libfabric's ofi_rxm, preempted between an
 * empty poll and its event read, then closed the QP at DISCONNECTED
 * first: ibv_destroy_qp removes unpolled completions (as mlx5 does) and
 * vrb_ep_close reported the ACKed send as "Work Request Flushed Error".
 * So the first read that finds DISCONNECTED runs the QP's engine and
 * answers EAGAIN, the event left at the head (the fd stays readable):
 * the program's next CQ poll finds those completions, its next read
 * the event.  A blocking read is given the event at once: the program
 * waits there, perhaps in a thread of its own, and may be destroying
 * the QP meanwhile.
 */
static bool hold_disconnect(struct cm_channel *ch, struct ibv_cq **scq,
			    struct ibv_cq **rcq)
{
	struct cm_event *e = ch->head;
	struct ibv_qp *qp;

	if (!e || e->held || e->ev.event != RDMA_CM_EVENT_DISCONNECTED)
		return false;
	qp = e->owner->id.qp;
	if (!qp || qp->qp_type == IBV_QPT_UD)
		return false;
	e->held = true;
	/* a fresh edge for a program that waits edge-triggered (UCX's async
	 * thread): its loop ends at our EAGAIN, and the fd stays readable
	 * (one more count: set_readable's read takes them all) */
	if (write(ch->ch.fd, &(uint64_t){1}, sizeof(uint64_t)) !=
	    sizeof(uint64_t))
		cm_log("event channel fd %d: write failed (%d)\n", ch->ch.fd,
		       errno);
	*scq = qp->send_cq;
	*rcq = qp->recv_cq != qp->send_cq ? qp->recv_cq : NULL;
	return true;
}

/* A waiter leaves the channel (returning, or cancelled in poll); the
 * last waiter of a destroyed channel frees it. */
static void channel_leave(void *arg)
{
	struct cm_channel *ch = arg;
	bool free_it;

	pthread_mutex_lock(&cm_core.lock);
	free_it = !--ch->waiters && ch->dead;
	pthread_mutex_unlock(&cm_core.lock);
	if (free_it)
		free(ch);
}

/*
 * The channel was destroyed while this thread waited for its event.
 * The kernel's reader of a closed rdma_ucm fd is in the same place: it
 * still holds the file, nothing wakes it, and it never returns.  It must
 * not return here either: an error makes rping, whose CM thread waits
 * while main destroys the channel and exits, fail (exit 255).  It holds
 * no lock and no memory of ours; exit() ends it.
 */
static _Noreturn void channel_park(void)
{
	for (;;)
		pause();
}

/* The wait itself: 0 and *event, -EAGAIN, -errno of the poll, or
 * -ESHUTDOWN when the channel was destroyed meanwhile. */
static int wait_event(struct cm_channel *ch, struct rdma_cm_event **event)
{
	struct ibv_cq *scq = NULL, *rcq = NULL;
	struct pollfd pfd = {.events = POLLIN};
	struct cm_event *e;
	bool held;
	int fl, ret;

	pthread_mutex_lock(&cm_core.lock);
	fl = ch->dead ? 0 : fcntl(ch->ch.fd, F_GETFL);
	if (fl < 0) {
		ret = -errno;
		pthread_mutex_unlock(&cm_core.lock);
		return ret;
	}
	for (;;) {
		if (ch->dead) {
			pthread_mutex_unlock(&cm_core.lock);
			return -ESHUTDOWN;
		}
		held = (fl & O_NONBLOCK) && hold_disconnect(ch, &scq, &rcq);
		e = held ? NULL : pop(ch);
		pfd.fd = ch->ch.fd;
		pthread_mutex_unlock(&cm_core.lock);
		if (held) {
			/* a poll of no entries: our libibverbs runs the
			 * engine of the QPs of an empty CQ and takes none */
			if (scq)
				ibv_poll_cq(scq, 0, NULL);
			if (rcq)
				ibv_poll_cq(rcq, 0, NULL);
			return -EAGAIN;
		}
		if (e)
			break;
		/* none: EAGAIN if the program set O_NONBLOCK on the fd, as
		 * the kernel's read would; else wait for one.  Destroyed
		 * from here on, the fd may be closed (POLLNVAL) or another
		 * file's: whatever wakes us, `dead` is checked first. */
		if (fl & O_NONBLOCK)
			return -EAGAIN;
		if (poll(&pfd, 1, -1) < 0)
			return -errno;
		pthread_mutex_lock(&cm_core.lock);
	}
	if (e->ev.event == RDMA_CM_EVENT_CONNECT_RESPONSE)
		cm_conn_process_rep(e->owner, e);
	*event = &e->ev;
	return 0;
}

/* ch->waiters counts the threads in here, so that a destroy under them
 * frees nothing they read (cm_channel_destroy, channel_leave). */
CM_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				struct rdma_cm_event **event)
{
	struct cm_channel *ch;
	int ret;

	if (!channel || !event)
		return cm_err(EINVAL);
	ch = cm_channel_of(channel);
	pthread_mutex_lock(&cm_core.lock);
	ch->waiters++;
	pthread_mutex_unlock(&cm_core.lock);
	pthread_cleanup_push(channel_leave, ch);
	ret = wait_event(ch, event);
	pthread_cleanup_pop(1);
	if (ret == -ESHUTDOWN)
		channel_park();
	return ret ? cm_err(-ret) : 0;
}

CM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *e = (struct cm_event *)event;
	struct cm_id *c;

	if (!event)
		return cm_err(EINVAL);
	c = e->owner;
	pthread_mutex_lock(&cm_core.lock);
	if (c->unacked)
		c->unacked--;
	pthread_cond_broadcast(&c->acked);
	pthread_mutex_unlock(&cm_core.lock);
	free(e);
	return 0;
}

/* Lock held: the man page's rule for rdma_destroy_id. */
int cm_wait_acked(struct cm_id *c)
{
	while (c->unacked)
		pthread_cond_wait(&c->acked, &cm_core.lock);
	return 0;
}

/*
 * A synchronous id (no channel given) waits for the event of what it
 * just started and turns a failure into errno, as rdma-core's
 * ucma_complete; the event stays in id->event until the next call.
 */
int cm_complete(struct cm_id *c)
{
	struct rdma_cm_event *ev;
	int ret;

	if (!cm_channel_of(c->id.channel)->sync)
		return 0;
	if (c->id.event) {
		rdma_ack_cm_event(c->id.event);
		c->id.event = NULL;
	}
	ret = rdma_get_cm_event(c->id.channel, &ev);
	if (ret)
		return ret;
	c->id.event = ev;
	if (!ev->status)
		return 0;
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		return cm_err(ECONNREFUSED);
	return cm_err(ev->status < 0 ? -ev->status : ev->status);
}
