// SPDX-License-Identifier: MIT
/*
 * The IB CM's counters (ib_stat.h) in a "softverbs-stat" memfd of the
 * layout of provider/lib/stat.h, as each device context's: sealed
 * against any change of size, the counters' names inside, written under
 * a seqcount (odd while written) at each count, with cm_core.lock held
 * (one writer).  Its context number is 0 and it has no QP slots;
 * tools/softverbs-stat prints it as any other.  Made at the first count
 * (SOFTVERBS_TRANSPORT=roce's first MAD); if it cannot be made the CM
 * works and shows nothing.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "ib_stat.h"
#include "stat.h" /* provider/lib/stat.h: the table's layout */

static const char *const names[CM_IB_NCTR] = {
	[CM_IB_SENT] = "cm_mad_sent",
	[CM_IB_RESENT] = "cm_mad_resent",
	[CM_IB_RECV] = "cm_mad_recv",
	[CM_IB_DUP_REQ] = "cm_mad_dup_req",
	[CM_IB_DUP_REP] = "cm_mad_dup_rep",
	[CM_IB_GAVE_UP] = "cm_mad_gave_up",
	[CM_IB_SEND_ERR] = "cm_mad_send_err",
	[CM_IB_MRA] = "cm_mad_mra",
	[CM_IB_DROP_FAULT] = "cm_mad_drop_fault",
	[CM_IB_DROP_PKT] = "cm_mad_drop_pkt",
	[CM_IB_DROP_MAD] = "cm_mad_drop_mad",
	[CM_IB_DROP_NOT_OURS] = "cm_mad_drop_not_ours",
	[CM_IB_PASSED] = "cm_mad_passed",
	[CM_IB_PASS_LOST] = "cm_mad_pass_lost",
	[CM_IB_PASS_RECV] = "cm_mad_pass_recv",
	[CM_IB_DROP_PASS] = "cm_mad_drop_pass",
};

static struct sv_stat_hdr *tbl;
static bool tried;

static void open_table(void)
{
	struct sv_stat_hdr *h;
	int fd; /* stays open: softverbs-stat finds the table by it */

	tried = true;
	h = sv_stat_table_new(CM_IB_NCTR, 0, &fd);
	if (!h)
		return;
	for (int i = 0; i < CM_IB_NCTR; i++)
		strncpy(h->names[i], names[i], SV_STAT_NAME_LEN - 1);
	__atomic_store_n(&h->magic, SV_STAT_MAGIC, __ATOMIC_RELEASE);
	tbl = h;
}

void cm_ib_count(enum cm_ib_ctr k)
{
	struct timespec ts;
	uint64_t s;

	if (!tried)
		open_table();
	if (!tbl || k >= CM_IB_NCTR)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	s = tbl->seq;
	__atomic_store_n(&tbl->seq, s + 1, __ATOMIC_RELAXED);
	atomic_thread_fence(memory_order_release);
	tbl->total[k]++;
	tbl->updated_ns =
		(uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	__atomic_store_n(&tbl->seq, s + 2, __ATOMIC_RELEASE);
}
