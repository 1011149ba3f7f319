// SPDX-License-Identifier: MIT
/*
 * The exported context and protection domain verbs: each is the object's
 * entry point (context.c, entry.h) under its ABI name.
 */
#include <infiniband/verbs.h>

#include "entry.h"
#include "export.h"

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	return sv_open_device(dev);
}

SV_EXPORT int ibv_close_device(struct ibv_context *c)
{
	return sv_close_device(c);
}

SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	return sv_alloc_pd(c);
}

SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	return sv_dealloc_pd(pd);
}
