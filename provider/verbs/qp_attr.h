/* SPDX-License-Identifier: MIT */
/*
 * qp_attr.c's checks and stores, for qp.c: positive errno, nothing
 * changed on error.
 */
#ifndef SV_QP_ATTR_H
#define SV_QP_ATTR_H

#include "objects.h"

/* ibv_create_qp's init attributes, for a QP of ctx. */
int sv_qp_check_init_attr(struct ibv_context *ctx,
			  const struct ibv_qp_init_attr_ex *a);
/* ibv_modify_qp's values for the attributes present in mask. */
int sv_qp_check_attr(struct sv_qp *qp, const struct ibv_qp_attr *a, int mask);
/* Takes the attributes present in mask, checked. */
void sv_qp_store_attr(struct sv_qp *qp, const struct ibv_qp_attr *a, int mask);

#endif
