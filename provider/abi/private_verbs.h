/* SPDX-License-Identifier: MIT */
/*
 * Declarations from rdma-core's driver.h (not installed by libibverbs-dev)
 * that the ABI layer calls and the object code implements.  The object
 * code may include this header to get the exact prototype it must define.
 */
#ifndef SV_PRIVATE_VERBS_H
#define SV_PRIVATE_VERBS_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/* GID types as sysfs names them: "IB/RoCE v1" and "RoCE v2". */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

/* IBVERBS_PRIVATE_34; ibv_devinfo prints a GID only when this returns 0. */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type);

/* IBVERBS_1.0/1.1 exports that rdma-core's driver.h (not verbs.h) declares. */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, struct ibv_device *dev,
			      const char *fnfmt, ...)
	__attribute__((format(printf, 4, 5)));
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

#endif
