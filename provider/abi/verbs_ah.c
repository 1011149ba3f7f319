// SPDX-License-Identifier: MIT
/*
 * The exported address handle verbs (ah.c, entry.h).  The AH built from
 * a work completion is derived.c's.
 */
#include <infiniband/verbs.h>

#include "entry.h"
#include "export.h"

SV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd,
				       struct ibv_ah_attr *attr)
{
	return sv_create_ah(pd, attr);
}

SV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	return sv_destroy_ah(ah);
}
