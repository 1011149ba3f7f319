/* SPDX-License-Identifier: MIT */
/* The QP state machine's transition table (qp_state.c). */
#ifndef SV_QP_STATE_H
#define SV_QP_STATE_H

#include <infiniband/verbs.h>
#include <stdbool.h>

extern const char *const sv_qp_state_names[];

/* mask without what a QP of this type ignores, as the kernel's uverbs
 * drops it before anything checks it (uverbs_cmd.c, modify_qp_mask):
 * the responder's attributes on an XRC_SEND QP, the requester's retry
 * and read/atomic ones on an XRC_RECV QP.  Programs set RC's whole mask
 * on both (perftest -c XRC); hardware takes it, and so must we. */
int sv_qp_mask_heeded(enum ibv_qp_type type, int mask);

/* True if cur -> next is a transition and mask (IBV_QP_STATE aside) has
 * every required attribute of a QP of this type and nothing that is not
 * allowed. */
bool sv_qp_mask_ok(enum ibv_qp_type type, enum ibv_qp_state cur,
		   enum ibv_qp_state next, int mask);

#endif
