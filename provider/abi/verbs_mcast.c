// SPDX-License-Identifier: MIT
/*
 * The exported multicast verbs (mcast.c, entry.h).
 */
#include <infiniband/verbs.h>

#include "entry.h"
#include "export.h"

SV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			       uint16_t lid)
{
	return sv_attach_mcast(qp, gid, lid);
}

SV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			       uint16_t lid)
{
	return sv_detach_mcast(qp, gid, lid);
}
