// SPDX-License-Identifier: MIT
/*
 * The ids with a deadline armed (issue 27 item 3): the CM thread's
 * cm_conn_retry_all walks these at each wake-up, not every live id (it
 * walked every id: 1,000 established connections cost 1,000 steps per
 * wake-up under cm_core.lock, for nothing).  Intrusive: the node lives
 * in struct cm_id.  Arming is idempotent and cheap; an armed node stays
 * until its owner disarms it (the walk does, when it finds nothing due
 * any more, and cm_id_free does), so a missed disarm costs a step, never
 * a hang.  No locking of its own (cm_core.lock's callers).
 */
#ifndef SV_CM_TIMED_H
#define SV_CM_TIMED_H

#include <stdbool.h>
#include <stdint.h>

struct cm_timed_node {
	struct cm_timed_node *next, *prev;
	bool on; /* in the set */
};

struct cm_timed {
	struct cm_timed_node *head;
	unsigned int n;	 /* nodes in the set */
	uint64_t adds;	 /* insertions, ever: a walk that sees it move knows
			  * a node came in ahead of it */
	uint64_t walks;	 /* cm_conn_retry_all runs, ever (for tests) */
	uint64_t visits; /* nodes they looked at, ever (for tests) */
};

/* Puts n in the set (at its head) unless it is there. */
void cm_timed_arm(struct cm_timed *t, struct cm_timed_node *n);
/* Takes n out of the set if it is there. */
void cm_timed_disarm(struct cm_timed *t, struct cm_timed_node *n);

#endif
