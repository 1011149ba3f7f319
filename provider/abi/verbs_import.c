// SPDX-License-Identifier: MIT
/*
 * The exported shared-object verbs: ibv_import_device, ibv_import_pd,
 * ibv_import_mr, ibv_import_dm and their unimports (import.c, entry.h).
 */
#include <infiniband/verbs.h>

#include "entry.h"
#include "export.h"

SV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	return sv_import_device(cmd_fd);
}

SV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context,
				       uint32_t pd_handle)
{
	return sv_import_pd(context, pd_handle);
}

SV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	sv_unimport_pd(pd);
}

SV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	return sv_import_mr(pd, mr_handle);
}

SV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	sv_unimport_mr(mr);
}

SV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context,
				       uint32_t dm_handle)
{
	return sv_import_dm(context, dm_handle);
}

SV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	sv_unimport_dm(dm);
}
