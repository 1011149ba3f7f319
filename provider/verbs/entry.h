/* SPDX-License-Identifier: MIT */
/*
 * The verbs objects' entry points: what the ABI layer (abi/verbs_*.c)
 * calls.  sv_X implements the exported verb ibv_X with its whole contract
 * (return value, errno, stderr lines), so the exported function is a thin
 * call; the objects may call each other's entry points (verbs.h includes
 * this header), never an exported ibv_* name.  The entry points installed
 * in the context's ops tables are in verbs.h (sv_create_qp_ex...) and
 * engine.h (sv_post_send, sv_post_recv).  In verbs/, the layer that
 * implements them; abi/ includes no other provider header.
 */
#ifndef SV_ENTRY_H
#define SV_ENTRY_H

#include <infiniband/verbs.h>
#include <stdint.h>
#include <sys/types.h>

#include "abi/private_verbs.h"

/* Device (device.c). */
struct ibv_device **sv_get_device_list(int *num);
void sv_free_device_list(struct ibv_device **list);
const char *sv_get_device_name(struct ibv_device *dev);
__be64 sv_get_device_guid(struct ibv_device *dev);
int sv_get_device_index(struct ibv_device *dev);
const char *sv_get_sysfs_path(void);
/* Also the device's own files under dev->ibdev_path (ibv_devinfo's). */
int sv_read_sysfs_file(const char *dir, const char *file, char *buf,
		       size_t size);
int sv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr);
/* attr_len: how much of the caller's structure to fill (older binaries
 * have a shorter one); also the context's vctx.query_port. */
int sv_query_port(struct ibv_context *c, uint8_t port,
		  struct ibv_port_attr *attr, size_t attr_len);
int sv_query_gid(struct ibv_context *c, uint8_t port, int index,
		 union ibv_gid *gid);
int sv_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey);
int sv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index,
		      enum ibv_gid_type_sysfs *type);
int sv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index,
		    struct ibv_gid_entry *entry, uint32_t flags,
		    size_t entry_size);
ssize_t sv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *entries,
			   size_t max, uint32_t flags, size_t entry_size);
int sv_fork_init(void);
enum ibv_fork_status sv_is_fork_initialized(void);
int sv_dontfork_range(void *base, size_t size);
int sv_dofork_range(void *base, size_t size);

/* Context and PD (context.c). */
struct ibv_context *sv_open_device(struct ibv_device *dev);
int sv_close_device(struct ibv_context *c);
struct ibv_pd *sv_alloc_pd(struct ibv_context *c);
int sv_dealloc_pd(struct ibv_pd *pd);

/* Shared objects (import.c). */
struct ibv_context *sv_import_device(int cmd_fd);
struct ibv_pd *sv_import_pd(struct ibv_context *c, uint32_t pd_handle);
void sv_unimport_pd(struct ibv_pd *pd);
struct ibv_mr *sv_import_mr(struct ibv_pd *pd, uint32_t mr_handle);
void sv_unimport_mr(struct ibv_mr *mr);
struct ibv_dm *sv_import_dm(struct ibv_context *c, uint32_t dm_handle);
void sv_unimport_dm(struct ibv_dm *dm);

/* MR (mr.c). */
struct ibv_mr *sv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
			       uint64_t iova, unsigned int access);
int sv_dereg_mr(struct ibv_mr *mr);
int sv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
		size_t length, int access);

/* CQ (cq.c). */
struct ibv_cq *sv_create_cq(struct ibv_context *c, int cqe, void *cq_context,
			    struct ibv_comp_channel *channel, int comp_vector);
int sv_destroy_cq(struct ibv_cq *cq);
int sv_resize_cq(struct ibv_cq *cq, int cqe);

/* Completion channels and async events (channel.c). */
int sv_get_async_event(struct ibv_context *c, struct ibv_async_event *event);
void sv_ack_async_event(struct ibv_async_event *event);
struct ibv_comp_channel *sv_create_comp_channel(struct ibv_context *c);
int sv_destroy_comp_channel(struct ibv_comp_channel *channel);
int sv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
		    void **cq_context);
void sv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents);

/* QP (qp.c). */
struct ibv_qp *sv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
int sv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int sv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init);
struct ibv_qp_ex *sv_qp_to_qp_ex(struct ibv_qp *qp);
int sv_destroy_qp(struct ibv_qp *qp);

/* SRQ (srq.c). */
struct ibv_srq *sv_create_srq(struct ibv_pd *pd,
			      struct ibv_srq_init_attr *attr);
int sv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
int sv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int sv_destroy_srq(struct ibv_srq *srq);

/* AH (ah.c). */
struct ibv_ah *sv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int sv_destroy_ah(struct ibv_ah *ah);

/* Multicast (mcast.c). */
int sv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int sv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);

#endif
