// SPDX-License-Identifier: MIT
/*
 * The exported event verbs: completion channels and the context's async
 * events (channel.c, entry.h).
 */
#include <infiniband/verbs.h>

#include "entry.h"
#include "export.h"

SV_EXPORT int ibv_get_async_event(struct ibv_context *c,
				  struct ibv_async_event *event)
{
	return sv_get_async_event(c, event);
}

SV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	sv_ack_async_event(event);
}

SV_EXPORT struct ibv_comp_channel *
ibv_create_comp_channel(struct ibv_context *c)
{
	return sv_create_comp_channel(c);
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	return sv_destroy_comp_channel(channel);
}

SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel,
			       struct ibv_cq **cq, void **cq_context)
{
	return sv_get_cq_event(channel, cq, cq_context);
}

SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	sv_ack_cq_events(cq, nevents);
}
