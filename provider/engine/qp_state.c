// SPDX-License-Identifier: MIT
/*
 * The QP state machine's rules: which transitions exist, and for each
 * the attribute mask bits it requires and those it allows (IBA 11.2.4.2,
 * table "QP state transition properties").  Anything else is EINVAL.
 * The table is RC's; UC's is RC's without the attributes of
 * acknowledgement, retry and RDMA read/atomic, which UC has none of.
 * UD has a table of its own; XRC's two QP types are RC's halves.
 */
#include "qp_state.h"

#define B(x) IBV_QP_##x

/* clang-format off: the table reads as the IBA prints it */
static const struct sv_qp_trans {
	int required;
	int optional;
	bool valid;
} rc_trans[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_INIT] = {.valid = true,
					  .required = B(PKEY_INDEX) | B(PORT) |
						      B(ACCESS_FLAGS)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_INIT] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_INIT] = {.valid = true,
					  .optional = B(PKEY_INDEX) | B(PORT) |
						      B(ACCESS_FLAGS)},
			[IBV_QPS_RTR] = {.valid = true,
					 .required = B(AV) | B(PATH_MTU) |
						     B(DEST_QPN) | B(RQ_PSN) |
						     B(MAX_DEST_RD_ATOMIC) |
						     B(MIN_RNR_TIMER),
					 .optional = B(ALT_PATH) |
						     B(ACCESS_FLAGS) |
						     B(PKEY_INDEX)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_RTR] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_RTS] = {.valid = true,
					 .required = B(SQ_PSN) | B(TIMEOUT) |
						     B(RETRY_CNT) |
						     B(RNR_RETRY) |
						     B(MAX_QP_RD_ATOMIC),
					 .optional = B(CUR_STATE) |
						     B(ALT_PATH) |
						     B(ACCESS_FLAGS) |
						     B(MIN_RNR_TIMER) |
						     B(PATH_MIG_STATE)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_RTS] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_RTS] = {.valid = true,
					 .optional =
						 B(CUR_STATE) |
						 B(ACCESS_FLAGS) | B(ALT_PATH) |
						 B(PATH_MIG_STATE) |
						 B(MIN_RNR_TIMER)},
			[IBV_QPS_SQD] = {.valid = true,
					 .optional = B(EN_SQD_ASYNC_NOTIFY)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_SQD] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_RTS] = {.valid = true,
					 .optional = B(CUR_STATE) |
						     B(ACCESS_FLAGS) |
						     B(ALT_PATH) |
						     B(MIN_RNR_TIMER) |
						     B(PATH_MIG_STATE)},
			[IBV_QPS_SQD] = {.valid = true,
					 .optional =
						 B(AV) | B(ALT_PATH) |
						 B(ACCESS_FLAGS) |
						 B(PKEY_INDEX) | B(MIN_RNR_TIMER) |
						 B(PATH_MIG_STATE) |
						 B(TIMEOUT) | B(RETRY_CNT) |
						 B(RNR_RETRY) |
						 B(MAX_QP_RD_ATOMIC) |
						 B(MAX_DEST_RD_ATOMIC)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_SQE] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_RTS] = {.valid = true,
					 .optional = B(CUR_STATE) |
						     B(ACCESS_FLAGS)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_ERR] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_ERR] = {.valid = true},
		},
};

/* UD (IBA 11.2.4.2; the kernel's ib_modify_qp_is_ok): a qkey, no path
 * attributes, no destination, no PSN but the send queue's. */
static const struct sv_qp_trans ud_trans[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_INIT] = {.valid = true,
					  .required = B(PKEY_INDEX) | B(PORT) |
						      B(QKEY)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_INIT] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_INIT] = {.valid = true,
					  .optional = B(PKEY_INDEX) | B(PORT) |
						      B(QKEY)},
			[IBV_QPS_RTR] = {.valid = true,
					 .optional = B(PKEY_INDEX) | B(QKEY)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_RTR] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_RTS] = {.valid = true,
					 .required = B(SQ_PSN),
					 .optional = B(CUR_STATE) | B(QKEY)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_RTS] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_RTS] = {.valid = true,
					 .optional = B(CUR_STATE) | B(QKEY)},
			[IBV_QPS_SQD] = {.valid = true,
					 .optional = B(EN_SQD_ASYNC_NOTIFY)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_SQD] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_RTS] = {.valid = true,
					 .optional = B(CUR_STATE) | B(QKEY)},
			[IBV_QPS_SQD] = {.valid = true,
					 .optional = B(PKEY_INDEX) | B(QKEY)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_SQE] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_RTS] = {.valid = true,
					 .optional = B(CUR_STATE) | B(QKEY)},
			[IBV_QPS_ERR] = {.valid = true},
		},
	[IBV_QPS_ERR] =
		{
			[IBV_QPS_RESET] = {.valid = true},
			[IBV_QPS_ERR] = {.valid = true},
		},
};

/* clang-format on */

const char *const sv_qp_state_names[] = {
	[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT",
	[IBV_QPS_RTR] = "RTR",	   [IBV_QPS_RTS] = "RTS",
	[IBV_QPS_SQD] = "SQD",	   [IBV_QPS_SQE] = "SQE",
	[IBV_QPS_ERR] = "ERR",
};

/* What only a reliable connection has (IBA 11.2.4.2: not for UC). */
#define RC_ONLY                                                           \
	(B(TIMEOUT) | B(RETRY_CNT) | B(RNR_RETRY) | B(MAX_QP_RD_ATOMIC) | \
	 B(MAX_DEST_RD_ATOMIC) | B(MIN_RNR_TIMER))

/* XRC (the kernel's qp_state_table, IB_QPT_XRC_INI / IB_QPT_XRC_TGT): the
 * initiator is RC without the responder's attributes, the target RC
 * without the requester's retry and read/atomic ones (it keeps TIMEOUT
 * and SQ_PSN at RTS, as the table has them). */
#define RESPONDER_ONLY (B(MAX_DEST_RD_ATOMIC) | B(MIN_RNR_TIMER))
#define REQUESTER_ONLY (B(RETRY_CNT) | B(RNR_RETRY) | B(MAX_QP_RD_ATOMIC))

int sv_qp_mask_heeded(enum ibv_qp_type type, int mask)
{
	if (type == IBV_QPT_XRC_SEND)
		return mask & ~RESPONDER_ONLY;
	if (type == IBV_QPT_XRC_RECV)
		return mask & ~REQUESTER_ONLY;
	return mask;
}

bool sv_qp_mask_ok(enum ibv_qp_type type, enum ibv_qp_state cur,
		   enum ibv_qp_state next, int mask)
{
	const struct sv_qp_trans *t;
	int required, optional;

	if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR)
		return false;
	t = type == IBV_QPT_UD ? &ud_trans[cur][next] : &rc_trans[cur][next];
	if (!t->valid)
		return false;
	required = t->required;
	optional = t->optional;
	if (type == IBV_QPT_UC) {
		required &= ~RC_ONLY;
		optional &= ~RC_ONLY;
	} else if (type == IBV_QPT_XRC_SEND) {
		required &= ~RESPONDER_ONLY;
		optional &= ~RESPONDER_ONLY;
	} else if (type == IBV_QPT_XRC_RECV) {
		required &= ~REQUESTER_ONLY;
		optional &= ~REQUESTER_ONLY;
	}
	mask &= ~IBV_QP_STATE;
	if ((mask & required) != required)
		return false;
	return !(mask & ~(required | optional));
}
