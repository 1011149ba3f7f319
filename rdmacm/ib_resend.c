// SPDX-License-Identifier: MIT
/*
 * MAD retransmission for the IB CM over RoCEv2 (ib_link.c's links), as
 * the kernel's CM (cm.c, mad.c): a REQ, REP or DREQ kept (c->ib_again)
 * and sent again until its answer comes or its tries run out; a DREQ
 * whose id is destroyed before its DREP kept in orphans[] with the id's
 * sockets.  The CM thread drives it (cm_ib_resend_all, cm.h); ib_link.c
 * keeps and drops (cm_ib_again_arm, cm_ib_again_drop), holds on an MRA
 * (cm_ib_mra) and hands over (cm_ib_orphan_adopt, cm_ib_orphan_answered:
 * ib_link.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"
#include "ib_link.h"
#include "ib_mad.h"
#include "ib_stat.h"
#include "util.h" /* provider/lib/util.h: container_of */

/*
 * MAD retransmission, as the kernel's CM (cm.c, mad.c): a REQ, REP or
 * DREQ goes again every again_ms until its answer moves the id out of
 * the state that waits for it, at most CM_IB_RETRIES times (rdma_cm's
 * CMA_MAX_CM_RETRIES).  A REQ's whole wait is SOFTVERBS_CM_TIMEOUT_MS
 * (then UNREACHABLE, conn.c), a REP's the same (then UNREACHABLE,
 * -ETIMEDOUT, as the kernel's IB_CM_REP_ERROR), a DREQ's CM_DREP_WAIT_MS
 * (then DISCONNECTED, conn.c): each split into CM_IB_RETRIES + 1 tries.
 * The kernel's tries last 4.3 s (response timeout 20) plus twice the
 * packet life time; 64 s / 16 is 4 s.
 */
#define CM_IB_RETRIES 15

static unsigned int again_ms(uint8_t state)
{
	unsigned int w =
		state == CM_DREQ_SENT ? CM_DREP_WAIT_MS : cm_core.rep_wait_ms;

	w /= CM_IB_RETRIES + 1;
	return w < 10 ? 10 : w;
}

/* The ids with a MAD kept (c->ib_again), which cm_ib_resend_all walks
 * (issue 27 item 3: it walked every live id at each CM-thread wake-up
 * while one waited); lock held.  walks and visits count for
 * SOFTVERBS_DEBUG's exit line (cm_ib_say_counts). */
static struct cm_timed again_ids;

void cm_ib_again_drop(struct cm_id *c)
{
	cm_timed_disarm(&again_ids, &c->ib_again_node);
	free(c->ib_again);
	c->ib_again = NULL;
}

/* Lock held: MAD mad, just sent, is kept to go again if it waits for an
 * answer. */
void cm_ib_again_arm(struct cm_id *c, uint16_t attr,
		     const uint8_t mad[CM_MAD_SIZE])
{
	uint8_t st = attr == CM_MAD_REQ || attr == CM_MAD_SIDR_REQ ? CM_REQ_SENT
		     : attr == CM_MAD_REP			   ? CM_REP_SENT
		     : attr == CM_MAD_DREQ ? CM_DREQ_SENT
					   : CM_NSTATES;

	if (st == CM_NSTATES)
		return;
	if (!c->ib_again) {
		c->ib_again = malloc(CM_MAD_SIZE);
		if (!c->ib_again)
			return; /* sent once, as before: the wait ends it */
		cm_timed_arm(&again_ids, &c->ib_again_node);
	}
	memcpy(c->ib_again, mad, CM_MAD_SIZE);
	c->ib_again_state = st;
	c->ib_again_n = 0;
	c->ib_again_ms = cm_now_ms() + again_ms(st);
	cm_link_kick(); /* the CM thread's timeout sees it */
}

/* The longest wait an MRA may ask for: 4.096 us x 2^31 is 2.4 hours;
 * the kernel's rdma_cm asks 2^24 (68.7 s, CMA_CM_MRA_SETTING) of every
 * REQ a userspace listener has not accepted yet. */
#define CM_MRA_HOLD_MAX_MS 300000u

static bool again_hold(struct cm_id *c, uint8_t msg_kind,
		       uint8_t service_timeout)
{
	uint8_t st = msg_kind == 0 ? CM_REQ_SENT : CM_REP_SENT;
	uint64_t hold, now = cm_now_ms();

	if (msg_kind > 1 || !c->ib_again || c->ib_again_state != st ||
	    c->state != st || c->ib_again[16] != 0 ||
	    c->ib_again[17] != (msg_kind ? CM_MAD_REP : CM_MAD_REQ))
		return false;
	/* 4.096 us x 2^service_timeout, in ms; then the usual try (as
	 * the kernel's cm_mra_handler: the MRA's time and a packet's
	 * life, then the MAD goes again) */
	hold = (4096ull << (service_timeout & 31)) / 1000000u;
	if (hold > CM_MRA_HOLD_MAX_MS)
		hold = CM_MRA_HOLD_MAX_MS;
	hold += again_ms(st);
	if (c->ib_again_ms < now + hold)
		c->ib_again_ms = now + hold;
	/* a REQ's whole wait (conn.c) lasts past the hold by one try */
	if (st == CM_REQ_SENT && c->rep_until_ms &&
	    c->rep_until_ms < c->ib_again_ms + again_ms(st))
		c->rep_until_ms = c->ib_again_ms + again_ms(st);
	cm_link_kick();
	return true;
}

void cm_ib_mra(struct cm_id *c, const struct cm_mad *d)
{
	if (again_hold(c, d->msg_kind, d->service_timeout)) {
		cm_ib_count(CM_IB_MRA);
		cm_log("id %p: MRA: our %s waits 4.096 us x 2^%u\n", (void *)c,
		       d->msg_kind ? "REP" : "REQ", d->service_timeout);
		return;
	}
	cm_ib_count(CM_IB_DROP_NOT_OURS);
	cm_log("id %p: MRA for no MAD we keep: dropped\n", (void *)c);
}

/* The kept MAD's attribute (a REQ_SENT id's may be a SIDR REQ). */
static uint16_t again_attr(const struct cm_id *c)
{
	return (uint16_t)(c->ib_again[16] << 8 | c->ib_again[17]);
}

/*
 * A DREQ whose id is destroyed before its DREP came (rping's client
 * destroys its id just after rdma_disconnect) goes on being resent, as
 * the kernel's CM goes on after the process: the id's two sockets are
 * kept until the DREP (or a DREQ of the peer's) names it or its tries
 * run out, and the process's exit waits for that, CM_DREP_WAIT_MS at
 * most (orphans_wait).
 */
#define CM_IB_ORPHANS 16
static struct orphan {
	bool used;
	uint8_t n; /* resent so far */
	int fd, port;
	uint32_t lid, rid;
	uint64_t next_ms;
	struct sockaddr_in src, dst;
	uint8_t mad[CM_MAD_SIZE];
} orphans[CM_IB_ORPHANS];
static int norphans;
static pid_t orphans_pid;
static pthread_cond_t orphans_gone = PTHREAD_COND_INITIALIZER;

/* Lock held: c, being destroyed, leaves its DREQ here: true if taken
 * (with c's sockets). */
bool cm_ib_orphan_adopt(struct cm_id *c)
{
	for (int i = 0; i < CM_IB_ORPHANS; i++) {
		struct orphan *o = &orphans[i];

		if (o->used)
			continue;
		o->used = true;
		o->n = c->ib_again_n;
		o->fd = c->ib_send_fd;
		o->port = c->ib_port - 1;
		o->lid = c->ib_lid;
		o->rid = c->ib_rid;
		o->next_ms = c->ib_again_ms;
		o->src = *cm_ib_src(c);
		o->dst = *cm_ib_dst(c);
		memcpy(o->mad, c->ib_again, CM_MAD_SIZE);
		__atomic_add_fetch(&norphans, 1, __ATOMIC_RELAXED);
		orphans_pid = getpid();
		c->ib_send_fd = -1;
		c->ib_port = 0;
		cm_link_kick();
		return true;
	}
	return false;
}

static void orphan_end(struct orphan *o)
{
	o->used = false;
	close(o->fd);
	cm_ib_port_put(o->port);
	if (!__atomic_sub_fetch(&norphans, 1, __ATOMIC_RELAXED))
		pthread_cond_broadcast(&orphans_gone);
}

/* Lock held: MAD d on port i answers an orphan's DREQ: true if so. */
bool cm_ib_orphan_answered(int i, const struct cm_mad *d)
{
	for (int k = 0; k < CM_IB_ORPHANS; k++) {
		struct orphan *o = &orphans[k];
		struct cm_mad drep = {.method = CM_MAD_METHOD_SEND,
				      .attr = CM_MAD_DREP,
				      .tid = o->lid,
				      .local_id = o->lid,
				      .remote_id = o->rid};
		uint8_t mad[CM_MAD_SIZE];

		if (!o->used || o->port != i || d->remote_id != o->lid ||
		    d->local_id != o->rid ||
		    (d->attr != CM_MAD_DREP && d->attr != CM_MAD_DREQ))
			continue;
		if (d->attr == CM_MAD_DREQ && !cm_mad_encode(&drep, mad))
			cm_ib_send_raw(o->fd, &o->src, &o->dst, mad,
				       CM_MAD_DREP, false, NULL);
		cm_log("a destroyed id's DREQ answered (comm ID 0x%08x)\n",
		       o->lid);
		orphan_end(o);
		return true;
	}
	return false;
}

/* The orphans' resends; next lowered to the next one due. */
static void orphans_resend(uint64_t now, uint64_t *next)
{
	for (int k = 0; k < CM_IB_ORPHANS; k++) {
		struct orphan *o = &orphans[k];

		if (!o->used)
			continue;
		if (now >= o->next_ms) {
			if (o->n >= CM_IB_RETRIES) {
				cm_ib_count(CM_IB_GAVE_UP);
				orphan_end(o);
				continue;
			}
			o->n++;
			cm_ib_send_raw(o->fd, &o->src, &o->dst, o->mad,
				       CM_MAD_DREQ, true, NULL);
			o->next_ms = now + again_ms(CM_DREQ_SENT);
		}
		if (o->next_ms < *next)
			*next = o->next_ms;
	}
}

/*
 * Timewait, as the kernel's CM keeps a connection's IDs after its DREP
 * (IBA 12.9.7): a DREQ that comes again (our DREP was lost) is answered
 * with the same DREP for CM_DREP_WAIT_MS, the DREQ sender's whole wait.
 * Each entry holds a dup of the id's sending socket and a reference to
 * its receiving one, so the DREQ still arrives after the id is closed.
 * CM_IB_TIMEWAIT at most: the oldest is ended early for a new one.
 */
#define CM_IB_TIMEWAIT 16
static struct timewait {
	int fd; /* -1: free */
	int port;
	uint32_t lid, rid;
	uint64_t until_ms;
	struct sockaddr_in src, dst;
	uint8_t mad[CM_MAD_SIZE];
} timewait[CM_IB_TIMEWAIT] = {[0 ... CM_IB_TIMEWAIT - 1] = {.fd = -1}};
static unsigned int ntimewait, timewait_next;

static void timewait_drop(struct timewait *t)
{
	close(t->fd);
	t->fd = -1;
	cm_ib_port_put(t->port);
	ntimewait--;
}

void cm_ib_timewait_arm(struct cm_id *c, const uint8_t mad[CM_MAD_SIZE])
{
	struct timewait *t = &timewait[timewait_next++ % CM_IB_TIMEWAIT];
	int fd;

	if (!c->ib_port || c->ib_send_fd < 0)
		return;
	fd = fcntl(c->ib_send_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return; /* no timewait: a DREQ again goes unanswered */
	if (t->fd >= 0)
		timewait_drop(t);
	t->fd = fd;
	t->port = c->ib_port - 1;
	cm_ib_port_hold(t->port);
	t->lid = c->ib_lid;
	t->rid = c->ib_rid;
	t->until_ms = cm_now_ms() + CM_DREP_WAIT_MS;
	t->src = *cm_ib_src(c);
	t->dst = *cm_ib_dst(c);
	memcpy(t->mad, mad, CM_MAD_SIZE);
	ntimewait++;
	cm_link_kick(); /* the CM thread's timeout sees its end */
}

bool cm_ib_timewait_answered(int i, const struct cm_mad *d)
{
	for (int k = 0; k < CM_IB_TIMEWAIT; k++) {
		struct timewait *t = &timewait[k];

		if (t->fd < 0 || t->port != i || d->attr != CM_MAD_DREQ ||
		    d->remote_id != t->lid || d->local_id != t->rid)
			continue;
		cm_log("timewait: a DREQ again (comm ID 0x%08x): its DREP "
		       "again\n",
		       t->lid);
		cm_ib_send_raw(t->fd, &t->src, &t->dst, t->mad, CM_MAD_DREP,
			       true, NULL);
		return true;
	}
	return false;
}

/* The timewaits past their time ended; next lowered to the next end. */
static void timewait_end(uint64_t now, uint64_t *next)
{
	for (int k = 0; k < CM_IB_TIMEWAIT && ntimewait; k++) {
		struct timewait *t = &timewait[k];

		if (t->fd < 0)
			continue;
		if (now >= t->until_ms)
			timewait_drop(t);
		else if (t->until_ms < *next)
			*next = t->until_ms;
	}
}

/* At the process's exit: its orphans' DREPs waited for, CM_DREP_WAIT_MS
 * at most (the CM thread still runs). */
__attribute__((destructor)) static void orphans_wait(void)
{
	struct timespec ts;

	/* looked at unlocked first: a child forked while the CM thread held
	 * the lock has it held for ever, and no orphans of its own */
	if (!cm_core.thread_started ||
	    !__atomic_load_n(&norphans, __ATOMIC_RELAXED) ||
	    orphans_pid != getpid())
		return;
	pthread_mutex_lock(&cm_core.lock);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (CM_DREP_WAIT_MS + 999) / 1000; /* whole seconds */
	while (norphans && orphans_pid == getpid() &&
	       pthread_cond_timedwait(&orphans_gone, &cm_core.lock, &ts) !=
		       ETIMEDOUT)
		;
	pthread_mutex_unlock(&cm_core.lock);
}

void cm_ib_resend_counts(uint64_t *walks, uint64_t *visits)
{
	*walks = again_ids.walks;
	*visits = again_ids.visits;
}

int cm_ib_resend_all(int timeout)
{
	uint64_t now = cm_now_ms(), next = UINT64_MAX;
	struct cm_timed_node *a, *an;
	int t;

	if (!again_ids.n && !norphans && !ntimewait)
		return timeout;
	again_ids.walks++;
	for (a = again_ids.head; a; a = an) {
		struct cm_id *c = container_of(a, struct cm_id, ib_again_node);

		an = a->next;
		again_ids.visits++;
		if (c->state != c->ib_again_state || c->ib_send_fd < 0) {
			cm_ib_again_drop(c); /* answered, or the id moved on */
			continue;
		}
		if (now < c->ib_again_ms) {
			if (c->ib_again_ms < next)
				next = c->ib_again_ms;
			continue;
		}
		if (c->ib_again_n >= CM_IB_RETRIES) {
			cm_log("id %p: MAD 0x%04x unanswered after %u "
			       "retries\n",
			       (void *)c, again_attr(c), CM_IB_RETRIES);
			cm_ib_count(CM_IB_GAVE_UP);
			cm_ib_again_drop(c);
			if (c->state == CM_REP_SENT)
				cm_conn_lost(c); /* UNREACHABLE, -ETIMEDOUT */
			continue; /* a REQ's, a DREQ's wait ends it */
		}
		c->ib_again_n++;
		cm_ib_send_raw(c->ib_send_fd, cm_ib_src(c), cm_ib_dst(c),
			       c->ib_again, again_attr(c), true, c);
		c->ib_again_ms = now + again_ms(c->ib_again_state);
		if (c->ib_again_ms < next)
			next = c->ib_again_ms;
	}
	orphans_resend(now, &next);
	timewait_end(now, &next);
	if (next == UINT64_MAX)
		return timeout;
	t = next > now ? (int)(next - now) : 0;
	return timeout < 0 || t < timeout ? t : timeout;
}
