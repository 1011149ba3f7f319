// SPDX-License-Identifier: MIT
/*
 * UD lanes (lane.h): the sender's table of lanes per destination QP
 * (offer, use, forget) and the receiver's lanes per UD QP (check, map,
 * take records, sleep flags, reap, close).  The datagrams' own checks and
 * delivery stay in ud/; here only what moves them through shared memory.
 */
#include "lane.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"
#include "sv.h"

#define SV_LANE_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
/* An offer not answered is made again after this (the datagram that
 * carried it may have been dropped: a full queue, a QP not yet in RTR). */
#define SV_LANE_REOFFER_NS 50000000ull
/* A destination that refused, or has no socket, is not offered a lane
 * again for this long: its datagrams go on the socket meanwhile. */
#define SV_LANE_BACKOFF_NS 1000000000ull

#define SEQ_OFF offsetof(struct sv_ud_hdr, rsvd)
#define SEQ_END (SEQ_OFF + sizeof(uint32_t))

enum tx_state {
	TX_OFFERED, /* made, offered with the datagrams until accepted */
	TX_ACTIVE,  /* accepted: datagrams go into it */
	TX_SOCKET,  /* none, until retry_ns: the socket only */
};

/* The sender's lane to one destination QP (under ctx->lane_lock). */
struct lane_tx {
	uint32_t qpn;
	enum tx_state st;
	int fd;			 /* the memfd while offered, else -1 */
	struct sv_lane_hdr *hdr; /* the mapping, NULL in TX_SOCKET */
	uint64_t head;		 /* records published */
	uint64_t tail;		 /* the receiver's tail, last seen */
	uint64_t when_ns;	 /* TX_OFFERED: last offer; TX_SOCKET: when
				  * a lane may be made again */
	uint64_t used;		 /* ctx->lane_clock at the last send (LRU) */
};

struct sv_lanes_tx {
	struct lane_tx v[SV_LANES_PER_CTX];
	uint32_t n;
	uint64_t clock;
	struct lane_tx *last; /* the last one used: ping-pongs hit it */
};

static void tx_unmap(struct lane_tx *t, bool tell)
{
	if (t->hdr) {
		if (tell) /* the receiver may unmap it */
			atomic_store(&t->hdr->tx_closed, 1);
		munmap(t->hdr, SV_LANE_BYTES);
	}
	if (t->fd >= 0)
		close(t->fd);
	t->hdr = NULL;
	t->fd = -1;
}

/* A new lane's memfd, sealed against any size change (so the receiver's
 * mapping can never fault), with its header. */
static int tx_make(struct lane_tx *t, uint32_t qpn)
{
	int fd = memfd_create("softverbs-ud-lane",
			      MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, SV_LANE_BYTES) ||
	    fcntl(fd, F_ADD_SEALS, SV_LANE_SEALS))
		goto err_close;
	p = mmap(NULL, SV_LANE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	if (p == MAP_FAILED)
		goto err_close;
	t->hdr = p;
	t->hdr->magic = SV_LANE_MAGIC;
	t->hdr->version = SV_LANE_VERSION;
	t->hdr->slots = SV_LANE_SLOTS;
	t->hdr->slot_size = SV_LANE_SLOT;
	t->hdr->dst_qpn = qpn;
	t->fd = fd;
	t->st = TX_OFFERED;
	t->head = t->tail = 0;
	t->when_ns = 0;
	return 0;

err_close:
	close(fd);
	return -errno;
}

/* The entry for qpn: found, or made (the least recently used one is
 * given up when the table is full). */
static struct lane_tx *tx_find(struct sv_lanes_tx *L, uint32_t qpn)
{
	struct lane_tx *t = L->last, *lru = NULL;

	if (t && t->qpn == qpn)
		return t;
	for (uint32_t i = 0; i < L->n; i++) {
		if (L->v[i].qpn == qpn)
			return L->last = &L->v[i];
		if (!lru || L->v[i].used < lru->used)
			lru = &L->v[i];
	}
	if (L->n < SV_LANES_PER_CTX) {
		t = &L->v[L->n++];
	} else {
		t = lru;
		tx_unmap(t, true);
	}
	memset(t, 0, sizeof(*t));
	t->qpn = qpn;
	t->fd = -1;
	t->st = TX_SOCKET; /* retry_ns 0: a lane is made at once */
	return L->last = t;
}

/* The record d of n bytes into the lane; -EAGAIN when it is full,
 * -EPROTO when the receiver's tail is not one (it broke its lane). */
static int tx_put(struct lane_tx *t, const void *d, size_t n, int sock)
{
	struct sv_ud_hdr *h;
	uint8_t *slot;

	if (t->head - t->tail >= SV_LANE_SLOTS) {
		/* acquire: the receiver is done with the slots before it */
		uint64_t tl = atomic_load_explicit(&t->hdr->tail,
						   memory_order_acquire);

		if (tl > t->head || t->head - tl > SV_LANE_SLOTS)
			return -EPROTO;
		t->tail = tl;
		if (t->head - t->tail >= SV_LANE_SLOTS)
			return -EAGAIN;
	}
	slot = (uint8_t *)t->hdr + SV_LANE_DATA_OFF +
	       (t->head & (SV_LANE_SLOTS - 1)) * SV_LANE_SLOT;
	h = (struct sv_ud_hdr *)slot;
	/* all but the seq word, which a reader may be polling */
	memcpy(slot + SEQ_END, (const uint8_t *)d + SEQ_END, n - SEQ_END);
	memcpy(slot, d, SEQ_OFF);
	/* release: the whole record before its seq */
	atomic_store_explicit((_Atomic uint32_t *)&h->rsvd,
			      sv_lane_seq(t->head), memory_order_release);
	t->head++;
	/* seq_cst: the record published before we read the flag (Dekker,
	 * against the receiver's flag up then its look at the lane) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&t->hdr->rx_sleep, memory_order_relaxed)) {
		struct sockaddr_un a;
		socklen_t alen = sv_link_qp_addr(&a, t->qpn);

		/* an empty datagram: its edge wakes the receiver's thread;
		 * a full queue has woken it already */
		sendto(sock, NULL, 0, MSG_DONTWAIT | MSG_NOSIGNAL,
		       (struct sockaddr *)&a, alen);
	}
	return 0;
}

int sv_lane_send(struct sv_qp *qp, const void *d, size_t n, uint32_t qpn,
		 int *offer_fd)
{
	struct sv_context *ctx = qp->ctx;
	struct lane_tx *t;
	uint64_t now;
	int ret = 1;

	*offer_fd = -1;
	pthread_mutex_lock(&ctx->lane_lock);
	if (!ctx->lanes) {
		ctx->lanes = calloc(1, sizeof(*ctx->lanes));
		if (!ctx->lanes)
			goto out;
	}
	t = tx_find(ctx->lanes, qpn);
	t->used = ++ctx->lanes->clock;
	if (t->st == TX_ACTIVE) {
		uint32_t s = atomic_load_explicit(&t->hdr->state,
						  memory_order_acquire);

		if (s == SV_LANE_ACCEPTED) {
			ret = tx_put(t, d, n, qp->link.listen_fd);
			if (ret != -EPROTO)
				goto out;
		}
		/* the receiver QP is gone, reaped the lane or broke it:
		 * what it held is lost; a new lane is offered */
		tx_unmap(t, false);
		t->st = TX_SOCKET;
		t->when_ns = 0;
		ret = 1;
	}
	now = sv_now_ns();
	if (t->st == TX_OFFERED) {
		uint32_t s = atomic_load_explicit(&t->hdr->state,
						  memory_order_acquire);

		if (s == SV_LANE_ACCEPTED) {
			close(t->fd); /* it has its own now */
			t->fd = -1;
			t->st = TX_ACTIVE;
			ret = tx_put(t, d, n, qp->link.listen_fd);
			if (ret != -EPROTO)
				goto out;
			s = SV_LANE_CLOSED;
		}
		if (s != SV_LANE_OFFERED) {
			tx_unmap(t, false);
			t->st = TX_SOCKET;
			t->when_ns = now + SV_LANE_BACKOFF_NS;
			ret = 1;
			goto out;
		}
		if (now - t->when_ns >= SV_LANE_REOFFER_NS) {
			t->when_ns = now;
			*offer_fd = t->fd;
		}
		goto out;
	}
	/* TX_SOCKET: a lane once the back-off is over */
	if (now >= t->when_ns) {
		if (tx_make(t, qpn)) {
			t->when_ns = now + SV_LANE_BACKOFF_NS;
			goto out;
		}
		t->when_ns = now;
		*offer_fd = t->fd;
	}
out:
	pthread_mutex_unlock(&ctx->lane_lock);
	if (!ret)
		atomic_store_explicit(
			&qp->ud.lane_tx,
			atomic_load_explicit(&qp->ud.lane_tx,
					     memory_order_relaxed) +
				1,
			memory_order_relaxed);
	return ret;
}

void sv_lane_gone(struct sv_context *ctx, uint32_t qpn)
{
	pthread_mutex_lock(&ctx->lane_lock);
	if (ctx->lanes) {
		struct lane_tx *t = tx_find(ctx->lanes, qpn);

		tx_unmap(t, false);
		t->st = TX_SOCKET;
		t->when_ns = sv_now_ns() + SV_LANE_BACKOFF_NS;
	}
	pthread_mutex_unlock(&ctx->lane_lock);
}

void sv_lane_unoffered(struct sv_context *ctx, uint32_t qpn)
{
	pthread_mutex_lock(&ctx->lane_lock);
	if (ctx->lanes) {
		struct lane_tx *t = tx_find(ctx->lanes, qpn);

		if (t->st == TX_OFFERED)
			t->when_ns = 0; /* with the next datagram */
	}
	pthread_mutex_unlock(&ctx->lane_lock);
}

void sv_lanes_tx_close(struct sv_context *ctx)
{
	if (!ctx->lanes)
		return;
	for (uint32_t i = 0; i < ctx->lanes->n; i++)
		tx_unmap(&ctx->lanes->v[i], true);
	free(ctx->lanes);
	ctx->lanes = NULL;
}

/* ---- receiver ---- */

static void rx_drop(struct sv_qp *qp, uint32_t i, uint32_t state)
{
	struct sv_lane_rx *l = &qp->ud.lanes[i];

	atomic_store(&l->hdr->state, state);
	munmap(l->hdr, SV_LANE_BYTES);
	qp->ud.lanes[i] = qp->ud.lanes[--qp->ud.nlanes];
	atomic_store_explicit(&qp->ud.lanes_accepted, qp->ud.nlanes,
			      memory_order_relaxed);
}

/* Lanes whose sender closed its context or died, once empty: unmapped
 * (what they hold is taken first, as a dead sender's datagrams queued in
 * a socket are). */
static void rx_reap(struct sv_qp *qp)
{
	for (uint32_t i = 0; i < qp->ud.nlanes;) {
		struct sv_lane_rx *l = &qp->ud.lanes[i];
		struct sv_ud_hdr h;
		const uint8_t *p;

		if (!sv_lane_peek(l, &h, &p) &&
		    (atomic_load(&l->hdr->tx_closed) ||
		     (kill(l->pid, 0) && errno == ESRCH)))
			rx_drop(qp, i, SV_LANE_CLOSED);
		else
			i++;
	}
}

/* Maps a lane offered with a datagram that passed the sender checks;
 * false if it is not one (its fd is closed either way). */
static bool rx_check(int fd, uint32_t qpn, struct stat *st,
		     struct sv_lane_hdr **out)
{
	struct sv_lane_hdr h, *p;
	int seals = fcntl(fd, F_GET_SEALS);

	/* sealed: it can never shrink under our mapping (SIGBUS) */
	if (seals < 0 || (seals & SV_LANE_SEALS) != SV_LANE_SEALS ||
	    fstat(fd, st) || !S_ISREG(st->st_mode) ||
	    st->st_size != (off_t)SV_LANE_BYTES)
		return false;
	p = mmap(NULL, SV_LANE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	if (p == MAP_FAILED)
		return false;
	memcpy(&h, p, offsetof(struct sv_lane_hdr, state));
	if (h.magic != SV_LANE_MAGIC || h.version != SV_LANE_VERSION ||
	    h.slots != SV_LANE_SLOTS || h.slot_size != SV_LANE_SLOT ||
	    h.dst_qpn != qpn) {
		munmap(p, SV_LANE_BYTES);
		return false;
	}
	*out = p;
	return true;
}

void sv_lane_offer(struct sv_qp *qp, int fd, pid_t pid)
{
	struct sv_lane_hdr *hdr;
	struct sv_lane_rx *l;
	struct stat st;

	if (!rx_check(fd, qp->qpx.qp_base.qp_num, &st, &hdr)) {
		sv_dbg("qp %06x: lane offer refused: not a lane\n",
		       qp->qpx.qp_base.qp_num);
		goto out;
	}
	for (uint32_t i = 0; i < qp->ud.nlanes; i++)
		if (qp->ud.lanes[i].dev == st.st_dev &&
		    qp->ud.lanes[i].ino == st.st_ino) {
			munmap(hdr, SV_LANE_BYTES); /* offered again */
			goto out;
		}
	rx_reap(qp);
	if (!sv_env_bool(SV_ENV_UD_LANES) || qp->ud.nlanes == SV_LANES_PER_QP ||
	    (!qp->ud.lanes &&
	     !(qp->ud.lanes =
		       calloc(SV_LANES_PER_QP, sizeof(*qp->ud.lanes))))) {
		atomic_store(&hdr->state, SV_LANE_REFUSED);
		munmap(hdr, SV_LANE_BYTES);
		goto out;
	}
	l = &qp->ud.lanes[qp->ud.nlanes++];
	atomic_store_explicit(&qp->ud.lanes_accepted, qp->ud.nlanes,
			      memory_order_relaxed);
	*l = (struct sv_lane_rx){
		.hdr = hdr, .pid = pid, .dev = st.st_dev, .ino = st.st_ino};
	/* as the QP's other lanes: a QP the progress thread has not looked
	 * at yet is polled by the app, or taken over (flags up, then a look
	 * at the lanes) within SV_ACTIVE_CHECK_MS */
	atomic_store(&hdr->rx_sleep, qp->ud.lane_sleep);
	/* whatever the sender wrote before: we start at record 0, its
	 * records are checked one by one */
	atomic_store(&hdr->state, SV_LANE_ACCEPTED);
out:
	close(fd);
}

int sv_lane_peek(struct sv_lane_rx *l, struct sv_ud_hdr *h,
		 const uint8_t **payload)
{
	const uint8_t *slot = (const uint8_t *)l->hdr + SV_LANE_DATA_OFF +
			      (l->tail & (SV_LANE_SLOTS - 1)) * SV_LANE_SLOT;

	/* acquire: the record's bytes are visible once its seq is */
	if (atomic_load_explicit(
		    (_Atomic uint32_t *)(slot +
					 offsetof(struct sv_ud_hdr, rsvd)),
		    memory_order_acquire) != sv_lane_seq(l->tail))
		return 0;
	/* our copy: the sender cannot change it under the checks */
	memcpy(h, slot, sizeof(*h));
	*payload = slot + sizeof(*h);
	return 1;
}

void sv_lane_consume(struct sv_lane_rx *l)
{
	l->tail++;
	/* release: done with the slot before the sender reuses it */
	atomic_store_explicit(&l->hdr->tail, l->tail, memory_order_release);
}

void sv_lanes_rx_sleep(struct sv_qp *qp, bool sleep)
{
	qp->ud.lane_sleep = sleep;
	/* stores only what changes: the senders read these lines */
	for (uint32_t i = 0; i < qp->ud.nlanes; i++) {
		_Atomic uint32_t *f = &qp->ud.lanes[i].hdr->rx_sleep;

		if (atomic_load_explicit(f, memory_order_relaxed) != sleep)
			atomic_store(f, sleep);
	}
}

void sv_lanes_rx_reap(struct sv_qp *qp)
{
	rx_reap(qp);
}

void sv_lanes_rx_close(struct sv_qp *qp)
{
	while (qp->ud.nlanes)
		rx_drop(qp, qp->ud.nlanes - 1, SV_LANE_CLOSED);
	free(qp->ud.lanes);
	qp->ud.lanes = NULL;
}
