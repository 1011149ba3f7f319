// SPDX-License-Identifier: MIT
/*
 * The exported memory region verbs (mr.c, entry.h).  ibv_reg_mr and
 * ibv_reg_mr_iova are ibv_reg_mr_iova2 with the iova and access types
 * spelled as their ABI has them.
 */
#include <stdint.h>

#include <infiniband/verbs.h>

#include "entry.h"
#include "export.h"

/* verbs.h wraps these names in macros of the same name (inline helpers
 * that end in the functions below). */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					  size_t length, uint64_t iova,
					  unsigned int access)
{
	return sv_reg_mr_iova2(pd, addr, length, iova, access);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				    size_t length, int access)
{
	return sv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
			       (unsigned int)access);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					 size_t length, uint64_t iova,
					 int access)
{
	return sv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

SV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	return sv_dereg_mr(mr);
}

SV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			   void *addr, size_t length, int access)
{
	return sv_rereg_mr(mr, flags, pd, addr, length, access);
}
