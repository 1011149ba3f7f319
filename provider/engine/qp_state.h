/* SPDX-License-Identifier: MIT */
/* The QP state machine's transition table (qp_state.c). */
#ifndef SV_QP_STATE_H
#define SV_QP_STATE_H

#include <infiniband/verbs.h>
#include <stdbool.h>

extern const char *const sv_qp_state_names[];

/* True if cur -> next is a transition and mask (IBV_QP_STATE aside) has
 * every required attribute of a QP of this type and nothing that is not
 * allowed. */
bool sv_qp_mask_ok(enum ibv_qp_type type, enum ibv_qp_state cur,
		   enum ibv_qp_state next, int mask);

#endif
