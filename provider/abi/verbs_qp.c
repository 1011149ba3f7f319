// SPDX-License-Identifier: MIT
/*
 * The exported queue pair verbs (qp.c, entry.h).  Posting is not here:
 * verbs.h inlines ibv_post_send/ibv_post_recv through the context's ops.
 */
#include <infiniband/verbs.h>

#include "entry.h"
#include "export.h"

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
				       struct ibv_qp_init_attr *attr)
{
	return sv_create_qp(pd, attr);
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			    int mask)
{
	return sv_modify_qp(qp, attr, mask);
}

SV_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			   int mask, struct ibv_qp_init_attr *init)
{
	return sv_query_qp(qp, attr, mask, init);
}

SV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	return sv_qp_to_qp_ex(qp);
}

SV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	return sv_destroy_qp(qp);
}
