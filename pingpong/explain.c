// SPDX-License-Identifier: MIT
/*
 * The narration of --explain: one sentence per verbs step saying why the
 * program takes it, in the spirit of Kerr's walk through the code.
 * Output goes to stderr, prefixed so it is easy to tell apart.
 */
#include "explain.h"

#include <stdarg.h>
#include <stdio.h>

static bool enabled;
static bool seen[PP_STEP_COUNT];

static const struct {
	bool once; /* loop steps: narrate the first occurrence only */
	const char *why;
} steps[PP_STEP_COUNT] = {
	[PP_STEP_GET_DEVICE_LIST] =
		{false,
		 "find the RDMA devices this host has; the first one is used "
		 "unless -d names another."},
	[PP_STEP_OPEN_DEVICE] =
		{false,
		 "a context is our handle on the device: every other verbs "
		 "object is created through it."},
	[PP_STEP_QUERY_DEVICE_EX] =
		{false,
		 "ODP, timestamps and device memory are optional features, "
		 "so ask the device before relying on them."},
	[PP_STEP_CREATE_COMP_CHANNEL] =
		{false,
		 "with -e the program sleeps until a completion arrives; "
		 "the channel is the file descriptor it sleeps on."},
	[PP_STEP_ALLOC_PD] =
		{false,
		 "a protection domain groups the memory regions and queue "
		 "pairs that may be used together."},
	[PP_STEP_ALLOC_DM] =
		{false,
		 "-j keeps the message buffer in the adapter's own memory "
		 "instead of host RAM."},
	[PP_STEP_REG_MR] =
		{false,
		 "the adapter reads and writes host memory directly, so the "
		 "buffer is pinned and given keys the adapter checks."},
	[PP_STEP_ADVISE_MR] =
		{false,
		 "on-demand paging faults pages in lazily; prefetching moves "
		 "that cost out of the timed loop."},
	[PP_STEP_CREATE_CQ] =
		{false,
		 "the adapter reports finished sends and receives as entries "
		 "in a completion queue, big enough for every receive posted "
		 "plus the one send."},
	[PP_STEP_CREATE_QP] =
		{false,
		 "a reliable-connected queue pair is the endpoint: a send "
		 "queue and a receive queue bound to the completion queue."},
	[PP_STEP_QUERY_QP] =
		{false,
		 "if the message fits in the work request itself (inline), "
		 "the adapter need not fetch it from memory: less latency."},
	[PP_STEP_QP_INIT] =
		{false,
		 "INIT binds the QP to a port and partition key; receives may "
		 "be posted from here on."},
	[PP_STEP_POST_RECV] =
		{false,
		 "a message can only land in a receive posted beforehand, so "
		 "rx-depth receives are queued before the peer can send."},
	[PP_STEP_REQ_NOTIFY] =
		{false,
		 "arm the CQ so the next completion wakes the channel; it "
		 "must be re-armed after every event."},
	[PP_STEP_QUERY_PORT] =
		{false,
		 "the port's LID is half of our address on an InfiniBand "
		 "fabric; the peer needs it to reach us."},
	[PP_STEP_QUERY_GID] =
		{false,
		 "with -g the GID is the routable address (RoCE or across "
		 "subnets), sent to the peer with the LID."},
	[PP_STEP_CHOOSE_PSN] =
		{false,
		 "each side picks a random starting packet sequence number; "
		 "the peer must expect exactly that number."},
	[PP_STEP_EXCHANGE] =
		{false,
		 "verbs has no way to find the peer's QP, so both sides swap "
		 "LID, QPN, PSN and GID over an ordinary TCP socket."},
	[PP_STEP_QP_RTR] =
		{false,
		 "Ready To Receive: now the QP knows the remote LID/GID, QP "
		 "number and PSN, and the path MTU."},
	[PP_STEP_QP_RTS] =
		{false,
		 "Ready To Send: timeouts, retry counts and our own PSN are "
		 "set, and the QP may transmit."},
	[PP_STEP_POST_SEND] =
		{true,
		 "the send work request points at the registered buffer; the "
		 "client sends first, the server answers each message."},
	[PP_STEP_GET_CQ_EVENT] =
		{true,
		 "sleep until the completion channel fires, then re-arm the CQ "
		 "before polling so no completion is missed."},
	[PP_STEP_POLL_CQ] =
		{true,
		 "poll the completion queue: an iteration ends when both its "
		 "send and its receive have completed."},
	[PP_STEP_REFILL_RECV] =
		{true,
		 "receives are consumed one per message; they are topped up "
		 "before fewer than two remain."},
	[PP_STEP_ACK_CQ_EVENTS] =
		{false,
		 "every CQ event must be acknowledged or destroying the CQ "
		 "would wait for ever."},
	[PP_STEP_DESTROY_QP] =
		{false,
		 "teardown runs in the reverse order of creation: the QP "
		 "first, since it uses the CQ and MR."},
	[PP_STEP_DESTROY_CQ] = {false,
				"no QP feeds the CQ any more, so it can go."},
	[PP_STEP_DEREG_MR] =
		{false,
		 "unpin the buffer; the adapter may no longer touch it."},
	[PP_STEP_FREE_DM] = {false,
			     "give the device memory back to the adapter."},
	[PP_STEP_DEALLOC_PD] = {false, "the protection domain is empty now."},
	[PP_STEP_DESTROY_COMP_CHANNEL] = {false,
					  "no CQ uses the channel any more."},
	[PP_STEP_CLOSE_DEVICE] =
		{false, "release the context and with it the device."},
	[PP_STEP_FREE_DEVICE_LIST] =
		{false, "the device list was only needed to open the device."},
};

void pp_explain_enable(bool on)
{
	enabled = on;
}

bool pp_explain_enabled(void)
{
	return enabled;
}

const char *pp_explain_why(enum pp_step step)
{
	return step < PP_STEP_COUNT ? steps[step].why : NULL;
}

void pp_explain(enum pp_step step, const char *fmt, ...)
{
	va_list ap;

	if (!enabled || step >= PP_STEP_COUNT)
		return;
	if (steps[step].once && seen[step])
		return;
	seen[step] = true;
	fprintf(stderr, "[explain] ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n[explain]     why: %s\n", steps[step].why);
}
