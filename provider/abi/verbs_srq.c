// SPDX-License-Identifier: MIT
/*
 * The exported shared receive queue verbs (srq.c, entry.h).
 * ibv_post_srq_recv is inlined by verbs.h through the context's ops.
 */
#include <infiniband/verbs.h>

#include "entry.h"
#include "export.h"

SV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
					 struct ibv_srq_init_attr *attr)
{
	return sv_create_srq(pd, attr);
}

SV_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			     int mask)
{
	return sv_modify_srq(srq, attr, mask);
}

SV_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	return sv_query_srq(srq, attr);
}

SV_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	return sv_destroy_srq(srq);
}
