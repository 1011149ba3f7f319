// SPDX-License-Identifier: MIT
/*
 * The IBVERBS_1.0 compat symbols (name@IBVERBS_1.0 beside name@@IBVERBS_1.1).
 * rdma-core keeps them for binaries linked before 2006: they take the
 * pre-1.1 structures (struct ibv_device_1_0, ibv_context_1_0, ... wrapping
 * the real objects), which softverbs never creates.
 *
 * Why they only fail: serving 1.0 means a second object model of wrappers
 * for an ABI no Debian binary uses; failing honestly is better than a
 * half-translation that would corrupt an old program's memory.
 * ibv_get_device_list@1.0 fails, so no 1.0 object can ever exist and the
 * others are unreachable in a correct program; they still fail cleanly.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "export.h"

/* The entry of every 1.0 program: no device list, "Function not implemented".
 */
SV_EXPORT void *sv_compat_get_device_list(int *num_devices);
SV_EXPORT void *sv_compat_get_device_list(int *num_devices)
{
	if (num_devices)
		*num_devices = 0;
	errno = ENOSYS;
	return NULL;
}
SV_SYMVER(sv_compat_get_device_list, ibv_get_device_list, "IBVERBS_1.0");

/* Creators and lookups: NULL with errno = EOPNOTSUPP. */
#define SV_COMPAT_NULL(name)                    \
	SV_EXPORT void *sv_compat_##name(void); \
	SV_EXPORT void *sv_compat_##name(void)  \
	{                                       \
		errno = EOPNOTSUPP;             \
		return NULL;                    \
	}                                       \
	SV_SYMVER(sv_compat_##name, ibv_##name, "IBVERBS_1.0");

/* Verbs returning 0 or a positive errno. */
#define SV_COMPAT_ERRNO(name)                 \
	SV_EXPORT int sv_compat_##name(void); \
	SV_EXPORT int sv_compat_##name(void)  \
	{                                     \
		return EOPNOTSUPP;            \
	}                                     \
	SV_SYMVER(sv_compat_##name, ibv_##name, "IBVERBS_1.0");

/* Event reads: -1 with errno, as their man pages say. */
#define SV_COMPAT_MINUS1(name)                \
	SV_EXPORT int sv_compat_##name(void); \
	SV_EXPORT int sv_compat_##name(void)  \
	{                                     \
		errno = EOPNOTSUPP;           \
		return -1;                    \
	}                                     \
	SV_SYMVER(sv_compat_##name, ibv_##name, "IBVERBS_1.0");

/* void verbs: there is nothing to release or acknowledge. */
#define SV_COMPAT_VOID(name)                   \
	SV_EXPORT void sv_compat_##name(void); \
	SV_EXPORT void sv_compat_##name(void)  \
	{                                      \
	}                                      \
	SV_SYMVER(sv_compat_##name, ibv_##name, "IBVERBS_1.0");

SV_COMPAT_VOID(free_device_list)
SV_COMPAT_NULL(get_device_name)
SV_COMPAT_NULL(open_device)
SV_COMPAT_ERRNO(close_device)
SV_COMPAT_MINUS1(get_async_event)
SV_COMPAT_VOID(ack_async_event)
SV_COMPAT_ERRNO(query_device)
SV_COMPAT_ERRNO(query_port)
SV_COMPAT_ERRNO(query_gid)
SV_COMPAT_ERRNO(query_pkey)
SV_COMPAT_NULL(alloc_pd)
SV_COMPAT_ERRNO(dealloc_pd)
SV_COMPAT_NULL(reg_mr)
SV_COMPAT_ERRNO(dereg_mr)
SV_COMPAT_NULL(create_cq)
SV_COMPAT_ERRNO(resize_cq)
SV_COMPAT_ERRNO(destroy_cq)
SV_COMPAT_MINUS1(get_cq_event)
SV_COMPAT_VOID(ack_cq_events)
SV_COMPAT_NULL(create_srq)
SV_COMPAT_ERRNO(modify_srq)
SV_COMPAT_ERRNO(query_srq)
SV_COMPAT_ERRNO(destroy_srq)
SV_COMPAT_NULL(create_qp)
SV_COMPAT_ERRNO(query_qp)
SV_COMPAT_ERRNO(modify_qp)
SV_COMPAT_ERRNO(destroy_qp)
SV_COMPAT_NULL(create_ah)
SV_COMPAT_ERRNO(destroy_ah)
SV_COMPAT_ERRNO(attach_mcast)
SV_COMPAT_ERRNO(detach_mcast)

/* __be64 ibv_get_device_guid(device): 0 is no GUID; errno says why. */
SV_EXPORT uint64_t sv_compat_get_device_guid(void *device);
SV_EXPORT uint64_t sv_compat_get_device_guid(void *device)
{
	errno = EOPNOTSUPP;
	return 0;
}
SV_SYMVER(sv_compat_get_device_guid, ibv_get_device_guid, "IBVERBS_1.0");
