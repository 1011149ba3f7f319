// SPDX-License-Identifier: MIT
/*
 * The ids by serial (issue 27 item 3): a chained hash table the CM thread
 * looks every epoll event's id up in, in O(1) however many ids live
 * (a walk of the id list cost O(N) per event: 1,000 connections at once
 * made a million steps under cm_core.lock).  Intrusive: the node lives
 * in struct cm_id.  No locking of its own (cm_core.lock's callers).
 */
#ifndef SV_CM_IDTAB_H
#define SV_CM_IDTAB_H

#include <stdint.h>

struct cm_idtab_node {
	uint64_t key; /* the id's serial (never 0, never reused) */
	struct cm_idtab_node *next;
};

struct cm_idtab {
	struct cm_idtab_node **b; /* nb chains, nb a power of two, or NULL */
	unsigned int nb, n;
	uint64_t probes; /* nodes looked at by finds, ever (for tests) */
};

/* 0, or -ENOMEM when the first table cannot be had (a growth that fails
 * keeps the table: longer chains, still right). */
int cm_idtab_insert(struct cm_idtab *t, struct cm_idtab_node *n);
void cm_idtab_remove(struct cm_idtab *t, struct cm_idtab_node *n);
struct cm_idtab_node *cm_idtab_find(struct cm_idtab *t, uint64_t key);
/* The next node after n (found) with n's key, or NULL: tables whose keys
 * may repeat (ib_link.c's) look at each. */
struct cm_idtab_node *cm_idtab_next(struct cm_idtab *t,
				    struct cm_idtab_node *n);

#endif
