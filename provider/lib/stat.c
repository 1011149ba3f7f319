// SPDX-License-Identifier: MIT
/*
 * Counters shown outside the process, with no daemon and nothing written
 * outside it: each context makes a memfd named "softverbs-stat" (stat.h:
 * its layout), sealed against any change of size, and its progress
 * thread copies the QPs' counters (struct sv_qp_stats, objects.h) into it
 * every SV_STAT_PERIOD_NS while the context has QPs, under a seqcount
 * (plain stores: only other processes read the table, and they check
 * the seq around their copy).  softverbs-stat PID
 * finds it among /proc/PID/fd and maps it read-only (the kernel checks
 * the reader may: the same user, or root).  A QP destroyed adds its
 * counters to the context's totals (sv_stat_qp_gone).
 *
 * The engine counts in struct sv_qp_stats, in the QP, with plain relaxed
 * stores (sv_stat_add): nothing on the hot path knows about this file.
 * If the memfd cannot be made the device works and shows nothing.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "objects.h"
#include "stat.h"

struct sv_stat {
	int fd;
	struct sv_stat_hdr *hdr;  /* the mapping, SV_STAT_SIZE bytes */
	uint64_t next_ns;	  /* next refresh */
	uint64_t gone[SV_STAT_N]; /* destroyed QPs' counters, summed */
	pthread_mutex_t lock;	  /* gone[], refresh */
};

/* The counters' names, in struct sv_qp_stats's order. */
#define F(x)                                        \
	{                                           \
#x, offsetof(struct sv_qp_stats, x) \
	}
#define W(i, x)                                                             \
	{                                                                   \
		"wc_" x, offsetof(struct sv_qp_stats, wc_err) + 8 * ((i)-1) \
	}
static const struct {
	const char *name;
	size_t off;
} names[] = {
	F(tx_pkts),
	F(tx_bytes),
	F(rx_pkts),
	F(rx_bytes),
	F(retrans_pkts),
	F(ack_timeouts),
	F(read_gaps),
	F(seq_nak_sent),
	F(seq_nak_recv),
	F(rnr_nak_sent),
	F(rnr_nak_recv),
	F(fault_drops),
	F(fault_reorders),
	F(fault_reorders_out),
	F(fault_rnr),
	F(fault_access),
	F(direct_ops),
	F(placed_sends),
	F(cold_sends),
	F(warmed_recvs),
	F(ud_drops),
	F(err_wc),
	F(tcp_sends),
	F(tcp_reads),
	F(tcp_records),
	F(tcp_slow_acks),
	F(tcp_calls_paced),
	F(ud_auth_drops),
	F(ud_replay_drops),
	F(roce_drop_short),
	F(roce_drop_tver),
	F(roce_drop_opcode),
	F(roce_drop_trunc),
	F(roce_drop_pad),
	F(roce_drop_len),
	F(roce_drop_icrc),
	F(roce_drop_qpt),
	F(roce_drop_seg),
	F(roce_drop_qpn),
	F(roce_drop_full),
	F(ud_door_holds),
	F(roce_reacks),
	F(roce_stale_acks),
	F(roce_icrc_id),
	F(roce_passed),
	F(roce_acks),
	F(roce_acks_joined),
	F(roce_gso_sends),
	F(roce_gro_reads),
	F(roce_ud_too_long),
	F(uc_seq_drops),
	F(progress_looks),
	F(progress_swept),
	F(poll_runs),
	W(1, "loc_len_err"),
	W(2, "loc_qp_op_err"),
	W(3, "loc_eec_op_err"),
	W(4, "loc_prot_err"),
	W(5, "wr_flush_err"),
	W(6, "mw_bind_err"),
	W(7, "bad_resp_err"),
	W(8, "loc_access_err"),
	W(9, "rem_inv_req_err"),
	W(10, "rem_access_err"),
	W(11, "rem_op_err"),
	W(12, "retry_exc_err"),
	W(13, "rnr_retry_exc_err"),
	W(14, "loc_rdd_viol_err"),
	W(15, "rem_inv_rd_req_err"),
	W(16, "rem_abort_err"),
	W(17, "inv_eecn_err"),
	W(18, "inv_eec_state_err"),
	W(19, "fatal_err"),
	W(20, "resp_timeout_err"),
	W(21, "general_err"),
	W(22, "tm_err"),
	W(23, "tm_rndv_incomplete"),
	W(24, "other_err"),
};
#undef F
#undef W
/* a field added to struct sv_qp_stats must be named here */
static_assert(ARRAY_SIZE(names) == SV_STAT_N, "name every counter");
static_assert(SV_STAT_N <= SV_STAT_MAX_CTR, "stat.h: SV_STAT_MAX_CTR");

static _Atomic uint32_t ctx_ids;

int sv_stat_open(struct sv_context *ctx)
{
	struct sv_stat *s = calloc(1, sizeof(*s));
	struct sv_stat_hdr *h;

	if (!s)
		return -ENOMEM;
	h = sv_stat_table_new(SV_STAT_N, atomic_fetch_add(&ctx_ids, 1) + 1,
			      &s->fd);
	if (!h)
		goto err_free;
	s->hdr = h;
	pthread_mutex_init(&s->lock, NULL);
	for (size_t i = 0; i < SV_STAT_N; i++)
		strncpy(h->names[i], names[i].name, SV_STAT_NAME_LEN - 1);
	/* last: a reader takes the table for ours once it sees the magic */
	__atomic_store_n(&h->magic, SV_STAT_MAGIC, __ATOMIC_RELEASE);
	ctx->stat = s;
	return 0;

err_free:
	free(s);
	return -errno;
}

void sv_stat_close(struct sv_context *ctx)
{
	struct sv_stat *s = ctx->stat;

	if (!s)
		return;
	ctx->stat = NULL;
	munmap(s->hdr, SV_STAT_SIZE);
	close(s->fd);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static uint64_t ctr_of(const struct sv_qp_stats *st, size_t i)
{
	return __atomic_load_n(
		(const uint64_t *)((const uint8_t *)st + names[i].off),
		__ATOMIC_RELAXED);
}

static uint64_t ctr(const struct sv_qp *qp, size_t i)
{
	return ctr_of(&qp->stats, i);
}

void sv_stat_qp_gone(struct sv_qp *qp)
{
	struct sv_stat *s = qp->ctx->stat;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < SV_STAT_N; i++)
		s->gone[i] += ctr(qp, i);
	s->hdr->qps_gone++;
	pthread_mutex_unlock(&s->lock);
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t sv_stat_refresh(struct sv_context *ctx, uint64_t now)
{
	const struct sv_qp_stats *us;
	struct sv_stat *s = ctx->stat;
	struct sv_stat_hdr *h;
	uint64_t tot[SV_STAT_N];
	uint32_t n = 0, live = 0;
	struct sv_list *l;

	if (!s)
		return UINT64_MAX;
	if (now < s->next_ns)
		return s->next_ns;
	h = s->hdr;
	/* the walk's own start: now is the loop's, before its timers ran
	 * (under load their runs took seconds, and four times that kept
	 * the table stale past sv_idle's 5 s) */
	now = sv_now_ns();
	pthread_mutex_lock(&s->lock);
	memcpy(tot, s->gone, sizeof(tot));
	/* the UD listener's drops (RoCEv2 datagrams for no QP of ours, or
	 * none's: ud/roce.c) are the context's */
	/* acquire: the door (ud/door.c) is opened, and its pointer
	 * published, by an app thread while this thread may refresh */
	us = __atomic_load_n(&ctx->udoor_stats, __ATOMIC_ACQUIRE);
	if (us)
		for (size_t i = 0; i < SV_STAT_N; i++)
			tot[i] += ctr_of(us, i);
	/* odd: a reader retries; the stores below come after it */
	__atomic_store_n(&h->seq, h->seq + 1, __ATOMIC_RELAXED);
	atomic_thread_fence(memory_order_release);
	pthread_rwlock_rdlock(&ctx->qp_lock);
	sv_list_for_each(l, &ctx->qps)
	{
		struct sv_qp *qp = container_of(l, struct sv_qp, ctx_node);
		struct sv_stat_slot *sl = (struct sv_stat_slot *)(h + 1) + n;

		live++;
		sv_lock(&qp->lock); /* its attributes; counters need none */
		for (size_t i = 0; i < SV_STAT_N; i++) {
			uint64_t v = ctr(qp, i);

			tot[i] += v;
			if (n < SV_STAT_SLOTS)
				sl->c[i] = v;
		}
		if (n < SV_STAT_SLOTS) {
			sl->qpn = qp->qpx.qp_base.qp_num;
			sl->dest_qpn = qp->attr.dest_qp_num;
			sl->qp_type = (uint8_t)qp->qpx.qp_base.qp_type;
			sl->qp_state = (uint8_t)qp->attr.qp_state;
			n++;
		}
		sv_unlock(&qp->lock);
	}
	pthread_rwlock_unlock(&ctx->qp_lock);
	memcpy(h->total, tot, sizeof(tot));
	h->nqps = n;
	h->qps_live = live;
	h->updated_ns = real_ns();
	__atomic_store_n(&h->seq, h->seq + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&s->lock);
	/* at most once a period, whatever wakes the thread, and at least
	 * four walks' time after this one ended: with thousands of QPs (or
	 * under TSan) a walk can outlast the period, and walks back to back
	 * held qp_lock's read side for ever, starving create_qp's write
	 * side (limit_qp_count ran past 60 s under TSan) */
	{
		uint64_t end = sv_now_ns(), gap = 4 * (end - now);

		s->next_ns =
			end +
			(gap > SV_STAT_PERIOD_NS ? gap : SV_STAT_PERIOD_NS);
	}
	/* no QPs, nothing moves: no timer (a wake-up after the period,
	 * for a new QP's link, refreshes) */
	return live ? s->next_ns : UINT64_MAX;
}
