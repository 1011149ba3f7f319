// SPDX-License-Identifier: MIT
/*
 * The exported completion queue verbs (cq.c, entry.h).  Polling and
 * arming are not here: verbs.h inlines them through the context's ops.
 */
#include <infiniband/verbs.h>

#include "entry.h"
#include "export.h"

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe,
				       void *cq_context,
				       struct ibv_comp_channel *channel,
				       int comp_vector)
{
	return sv_create_cq(c, cqe, cq_context, channel, comp_vector);
}

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	return sv_destroy_cq(cq);
}

SV_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	return sv_resize_cq(cq, cqe);
}
