// SPDX-License-Identifier: MIT
/*
 * The exported device verbs: the device list, sysfs answers, the device,
 * port, GID and P_Key queries, and fork.  Each is the object's entry point
 * (device.c, entry.h) under its ABI name; what is only ABI is here: the
 * 48-byte compat port query and the variadic sysfs read.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <infiniband/verbs.h>

#include "entry.h"
#include "export.h"
#include "private_verbs.h"

#undef ibv_get_device_list
#undef ibv_query_port

SV_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	return sv_get_device_list(num);
}

SV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	sv_free_device_list(list);
}

SV_EXPORT const char *ibv_get_device_name(struct ibv_device *dev)
{
	return sv_get_device_name(dev);
}

SV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *dev)
{
	return sv_get_device_guid(dev);
}

SV_EXPORT int ibv_get_device_index(struct ibv_device *dev)
{
	return sv_get_device_index(dev);
}

SV_EXPORT const char *ibv_get_sysfs_path(void)
{
	return sv_get_sysfs_path();
}

SV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
				  size_t size)
{
	return sv_read_sysfs_file(dir, file, buf, size);
}

/* IBVERBS_PRIVATE_34: a file of the device's sysfs directory, its name
 * made from a format. */
SV_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					struct ibv_device *dev,
					const char *fnfmt, ...)
{
	char file[256];
	va_list ap;

	va_start(ap, fnfmt);
	vsnprintf(file, sizeof(file), fnfmt, ap);
	va_end(ap);
	return sv_read_sysfs_file(dev->ibdev_path, file, buf, size);
}

SV_EXPORT int ibv_query_device(struct ibv_context *ctx,
			       struct ibv_device_attr *attr)
{
	return sv_query_device(ctx, attr);
}

/* The compat entry: callers built before port_cap_flags2 own 48 bytes
 * (newer ones reach sv_query_port through the context's vctx). */
SV_EXPORT int ibv_query_port(struct ibv_context *c, uint8_t port,
			     struct _compat_ibv_port_attr *attr)
{
	return sv_query_port(c, port, (struct ibv_port_attr *)attr,
			     offsetof(struct ibv_port_attr, port_cap_flags2));
}

SV_EXPORT int ibv_query_gid(struct ibv_context *c, uint8_t port, int index,
			    union ibv_gid *gid)
{
	return sv_query_gid(c, port, index, gid);
}

SV_EXPORT int ibv_query_pkey(struct ibv_context *c, uint8_t port, int index,
			     __be16 *pkey)
{
	return sv_query_pkey(c, port, index, pkey);
}

SV_EXPORT int ibv_query_gid_type(struct ibv_context *c, uint8_t port,
				 unsigned int index,
				 enum ibv_gid_type_sysfs *type)
{
	return sv_query_gid_type(c, port, index, type);
}

SV_EXPORT int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port,
				uint32_t index, struct ibv_gid_entry *entry,
				uint32_t flags, size_t entry_size)
{
	return sv_query_gid_ex(c, port, index, entry, flags, entry_size);
}

SV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *c,
				       struct ibv_gid_entry *entries,
				       size_t max, uint32_t flags,
				       size_t entry_size)
{
	return sv_query_gid_table(c, entries, max, flags, entry_size);
}

SV_EXPORT int ibv_fork_init(void)
{
	return sv_fork_init();
}

SV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return sv_is_fork_initialized();
}

SV_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	return sv_dontfork_range(base, size);
}

SV_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	return sv_dofork_range(base, size);
}
