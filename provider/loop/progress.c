// SPDX-License-Identifier: MIT
/*
 * The progress thread: one per context, always blocked in its event loop
 * (evloop.h) when it has nothing to do.  It knows callbacks, not QPs: each
 * fd is registered by its owner with the callback that handles it
 * (sv_pfd_set, sv_progress_add), each deadline is a timer in the loop's
 * heap armed by its owner (sv_progress_timer_start), work another thread
 * hands it is a callback queued behind the app's kick (sv_progress_async),
 * and the context's deadlines that live outside the heap (the doors'
 * waiting callers) are one function its opener passes to
 * sv_progress_start.  What the QP's callbacks do — who drives a QP, its
 * one timer, its link's events — is the engine's (engine/drive.c): the
 * loop is below the engine and the transports, and calls neither.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cpus.h"
#include "env.h"
#include "evloop.h"
#include "pcap.h"
#include "progress.h"
#include "stat.h"

struct sv_progress {
	pthread_t thread;
	struct sv_loop loop; /* the thread's only: fds, timers */
	struct sv_pfd db;    /* our app's kick (an eventfd only we hold) */
	atomic_bool stop;
	pthread_mutex_t async_lock;
	struct sv_async *asyncs;      /* to run (sv_progress_async) */
	sv_progress_next_cb *next_ns; /* the context's other deadlines */
	struct sv_async *async_rest;  /* taken from asyncs, not run yet (the
				       * thread's own: on_kick) */
};

/* The context whose loop this thread runs: a QP's timer callback may fire
 * while a reuse of the QP has zeroed its ctx (qp.c qp_get). */
static __thread struct sv_context *loop_ctx;

struct sv_context *sv_progress_ctx(void)
{
	return loop_ctx;
}

int sv_progress_timer_start(struct sv_context *ctx, struct sv_timer *t,
			    uint64_t when)
{
	return sv_timer_start(&ctx->prog->loop, t, when);
}

void sv_progress_timer_stop(struct sv_context *ctx, struct sv_timer *t)
{
	sv_timer_stop(&ctx->prog->loop, t);
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

/* Callbacks run per turn of the loop: thousands queued at once (every QP
 * of a program brought to RTR, each then calling its peer) were one
 * callback of half a second, while the doors' callers and our own
 * callers' answers waited (sv_scale, 4,096 pairs over TCP). */
#define ASYNC_BATCH 32

/* The app's kick: read it; then the callbacks queued for us, a batch per
 * turn (the rest kick us again). */
static void on_kick(struct sv_io *io, uint32_t revents)
{
	struct sv_progress *pg = container_of(io, struct sv_progress, db.io);
	struct sv_async *a;
	uint64_t v;

	(void)revents;
	if (read(pg->db.fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		sv_dbg("kick read: %s\n", strerror(errno));
	if (!pg->async_rest) {
		pthread_mutex_lock(&pg->async_lock);
		pg->async_rest = pg->asyncs;
		pg->asyncs = NULL;
		pthread_mutex_unlock(&pg->async_lock);
	}
	a = pg->async_rest;
	for (int n = 0; a && n < ASYNC_BATCH; n++) {
		struct sv_async *next = a->next;
		sv_async_cb *cb = a->cb;

		/* before the call: a request after it is a new one (and may
		 * set next and cb again) */
		atomic_store(&a->queued, false);
		cb(a);
		a = next;
	}
	pg->async_rest = a;
	if (a)
		sv_progress_kick(loop_ctx); /* the next turn goes on */
}

void sv_progress_async(struct sv_context *ctx, struct sv_async *a,
		       sv_async_cb *cb)
{
	struct sv_progress *pg = ctx->prog;

	if (atomic_load_explicit(&a->queued, memory_order_relaxed) ||
	    atomic_exchange(&a->queued, true))
		return; /* asked already */
	pthread_mutex_lock(&pg->async_lock);
	a->cb = cb;
	a->next = pg->asyncs;
	pg->asyncs = a;
	pthread_mutex_unlock(&pg->async_lock);
	sv_progress_kick(ctx);
}

static void pfd_rung(struct sv_async *a)
{
	struct sv_pfd *p = container_of(a, struct sv_pfd, bell);
	sv_io_cb *cb = __atomic_load_n(&p->io.cb, __ATOMIC_RELAXED);

	if (cb)
		cb(&p->io, EPOLLIN);
}

void sv_pfd_ring(struct sv_context *ctx, struct sv_pfd *p)
{
	sv_progress_async(ctx, &p->bell, pfd_rung);
}

/* SOFTVERBS_PROGRESS_CPUS (cpus.h): the CPUs this thread may run on.
 * "all" asks for every CPU; the kernel keeps those of the cgroup's
 * cpuset.  A list the kernel refuses leaves the mask as it was, said
 * once on stderr.  Unset: inherited. */
static void progress_cpus(void)
{
	const char *v = sv_env_str(SV_ENV_PROGRESS_CPUS);
	enum sv_cpus_kind kind = SV_CPUS_INHERIT;
	static atomic_bool said;
	cpu_set_t set;
	char why[96];
	int err;

	if (v && sv_cpus_parse(v, &kind, &set, why, sizeof(why)))
		kind = SV_CPUS_INHERIT; /* refused by env.c already */
	if (kind == SV_CPUS_INHERIT)
		return;
	if (kind == SV_CPUS_ALL) {
		CPU_ZERO(&set);
		for (int c = 0; c < CPU_SETSIZE; c++)
			CPU_SET(c, &set);
	}
	err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err && kind == SV_CPUS_LIST && !atomic_exchange(&said, true))
		fprintf(stderr,
			"softverbs: SOFTVERBS_PROGRESS_CPUS=%s: %s; the "
			"progress thread keeps the program's CPUs\n",
			v, strerror(err));
}

static void *progress_main(void *arg)
{
	struct sv_context *ctx = arg;
	struct sv_progress *pg = ctx->prog;

	loop_ctx = ctx;
	progress_cpus();
	/* named after its CPUs are set (tests/env/progress_cpus.sh waits
	 * for the name); top -H and gdb show it */
	pthread_setname_np(pthread_self(), "softverbs-prog");
	while (!atomic_load(&pg->stop)) {
		uint64_t now = sv_now_ns(), next, snext;
		int tmo;

		sv_loop_run_timers(&pg->loop, now);
		next = sv_loop_next(&pg->loop);
		/* the context's own deadlines: callers at the doors */
		if (pg->next_ns) {
			uint64_t c = pg->next_ns(ctx, now);

			if (c < next)
				next = c;
		}
		snext = sv_stat_refresh(ctx, now);
		if (snext < next)
			next = snext;
		tmo = timeout_ms(next);
		if (sv_pcap_on)
			sv_pcap_flush();
		sv_loop_poll(&pg->loop, tmo);
	}
	return NULL;
}

void sv_progress_add(struct sv_context *ctx, struct sv_pfd *p, int fd)
{
	uint32_t ev = EPOLLIN | EPOLLRDHUP;
	int err;

	/* hang-ups are level triggered; a listener or link doorbell we may
	 * not be able to empty at once (out of fds, QP busy) is not, so it
	 * never makes the thread spin (sv_pfd_set says which) */
	if (p->edge)
		ev |= EPOLLET;
	p->fd = fd;
	p->ctx = ctx;
	p->quiet = false;
	p->out = false;
	atomic_store_explicit(&p->hup, false, memory_order_relaxed);
	err = sv_io_start(&ctx->prog->loop, &p->io, fd, ev);
	if (err)
		sv_dbg("epoll add %d: %s\n", fd, strerror(-err));
}

/* New events for p, as its quiet and out say. */
static void modify(struct sv_context *ctx, struct sv_pfd *p)
{
	uint32_t ev = EPOLLRDHUP | EPOLLET;
	int err;

	if (!p->quiet)
		ev |= EPOLLIN;
	if (p->out) /* one socket both ways (tcp.c): room stays wanted */
		ev |= EPOLLOUT;
	err = sv_io_modify(&ctx->prog->loop, &p->io, ev);
	if (err)
		sv_dbg("epoll mod %d: %s\n", p->fd, strerror(-err));
}

void sv_progress_quiet(struct sv_context *ctx, struct sv_pfd *p, bool quiet)
{
	if (p->fd < 0 || p->quiet == quiet)
		return;
	/* back on: data already there is an event at once (MOD re-arms) */
	p->quiet = quiet;
	modify(ctx, p);
}

void sv_progress_want_out(struct sv_context *ctx, struct sv_pfd *p, bool out)
{
	if (p->fd < 0)
		return;
	p->out = out;
	modify(ctx, p);
}

void sv_progress_del(struct sv_context *ctx, struct sv_pfd *p)
{
	if (p->fd < 0)
		return;
	sv_io_stop(&ctx->prog->loop, &p->io);
	p->fd = -1;
}

void sv_progress_kick(struct sv_context *ctx)
{
	uint64_t one = 1;

	/* non-blocking, and only we hold it */
	if (write(ctx->prog->db.fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		sv_dbg("kick: %s\n", strerror(errno));
}

int sv_progress_start(struct sv_context *ctx, sv_progress_next_cb *next_ns)
{
	struct sv_progress *pg = calloc(1, sizeof(*pg));
	int err;

	if (!pg)
		return -ENOMEM;
	err = sv_loop_init(&pg->loop);
	if (err)
		goto err_free;
	pthread_mutex_init(&pg->async_lock, NULL);
	pg->next_ns = next_ns;
	sv_io_init(&pg->db.io, NULL);
	sv_pfd_set(&pg->db, on_kick, false);
	pg->db.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (pg->db.fd < 0) {
		err = -errno;
		goto err_loop;
	}
	ctx->prog = pg;
	sv_progress_add(ctx, &pg->db, pg->db.fd);
	err = -pthread_create(&pg->thread, NULL, progress_main, ctx);
	if (err)
		goto err_close;
	return 0;

err_close:
	close(pg->db.fd);
err_loop:
	pthread_mutex_destroy(&pg->async_lock);
	sv_loop_fini(&pg->loop);
err_free:
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
	sv_loop_fini(&pg->loop);
	close(pg->db.fd);
	pthread_mutex_destroy(&pg->async_lock);
	free(pg);
}
