// SPDX-License-Identifier: MIT
/*
 * The public verbs softverbs does not implement (yet): ECE, device
 * memory import, dma-buf MRs.  Each fails the way its contract says a
 * missing feature fails -- a positive EOPNOTSUPP, or NULL with errno =
 * EOPNOTSUPP -- and never pretends to succeed.  Also the few historical entry
 * points that have nothing to do in a library with no kernel device behind it.
 */
#include <errno.h>
#include <stddef.h>

#include <infiniband/verbs.h>

#include "export.h"

/* Enhanced Connection Establishment: no options to negotiate. */
SV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

/* dma-buf memory is device memory; we only register host memory. */
SV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					   size_t length, uint64_t iova, int fd,
					   int access)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/*
 * 1 only if data is guaranteed to land in order, else 0 (verbs.h).
 * We make no such promise, so 0: the caller keeps its own ordering
 * (e.g. polls a flag written last), which is always correct.
 */
SV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp,
					 enum ibv_wr_opcode op, uint32_t flags)
{
	return 0;
}

/*
 * RoCE L2 resolution (GID -> MAC, VLAN) goes through the kernel's
 * neighbour table for a real netdev; we have none.  Its contract, unlike
 * the verbs', is a negative errno (rdma-core returns -EINVAL,
 * -EHOSTUNREACH), so -EOPNOTSUPP, with errno set too.
 */
SV_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
					  struct ibv_ah_attr *attr,
					  uint8_t eth_mac[6], uint16_t *vid)
{
	errno = EOPNOTSUPP;
	return -EOPNOTSUPP;
}

/*
 * ibv_register_driver@IBVERBS_1.1 (no default version: nothing can link
 * to it any more): how pre-2017 out-of-tree drivers registered.  We load
 * no drivers, so the registration is ignored.
 */
SV_EXPORT void sv_register_driver_1_1(const char *name, void *init_func);
SV_EXPORT void sv_register_driver_1_1(const char *name, void *init_func)
{
}
SV_SYMVER(sv_register_driver_1_1, ibv_register_driver, "IBVERBS_1.1");
