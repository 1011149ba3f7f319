/* SPDX-License-Identifier: MIT */
/*
 * --explain: narrates each verbs step as it happens, on stderr (stdout
 * stays the original's, so scripts and --json are unaffected).  The
 * "why" of every step lives here, in one table, in the paper's order.
 */
#ifndef PP_EXPLAIN_H
#define PP_EXPLAIN_H

#include <stdbool.h>

enum pp_step {
	PP_STEP_GET_DEVICE_LIST,
	PP_STEP_OPEN_DEVICE,
	PP_STEP_QUERY_DEVICE_EX,
	PP_STEP_CREATE_COMP_CHANNEL,
	PP_STEP_ALLOC_PD,
	PP_STEP_ALLOC_DM,
	PP_STEP_REG_MR,
	PP_STEP_ADVISE_MR,
	PP_STEP_CREATE_CQ,
	PP_STEP_CREATE_QP,
	PP_STEP_QUERY_QP,
	PP_STEP_QP_INIT,
	PP_STEP_POST_RECV,
	PP_STEP_REQ_NOTIFY,
	PP_STEP_QUERY_PORT,
	PP_STEP_QUERY_GID,
	PP_STEP_CHOOSE_PSN,
	PP_STEP_EXCHANGE,
	PP_STEP_QP_RTR,
	PP_STEP_QP_RTS,
	PP_STEP_POST_SEND,
	PP_STEP_GET_CQ_EVENT,
	PP_STEP_POLL_CQ,
	PP_STEP_REFILL_RECV,
	PP_STEP_ACK_CQ_EVENTS,
	PP_STEP_DESTROY_QP,
	PP_STEP_DESTROY_CQ,
	PP_STEP_DEREG_MR,
	PP_STEP_FREE_DM,
	PP_STEP_DEALLOC_PD,
	PP_STEP_DESTROY_COMP_CHANNEL,
	PP_STEP_CLOSE_DEVICE,
	PP_STEP_FREE_DEVICE_LIST,
	PP_STEP_COUNT,
};

void pp_explain_enable(bool on);
bool pp_explain_enabled(void);

/*
 * Narrates a step: the call with its key arguments and what came back
 * (fmt), then why the program does it.  Steps of the ping-pong loop are
 * narrated the first time only.  No-op unless enabled.
 */
void pp_explain(enum pp_step step, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The sentence explaining a step (for tests and docs). */
const char *pp_explain_why(enum pp_step step);

#endif
