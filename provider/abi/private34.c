// SPDX-License-Identifier: MIT
/*
 * rdma-core's private provider interface (IBVERBS_PRIVATE_34), defined only
 * so that the hardware libraries perftest links (libmlx5, libefa,
 * librdmacm, loaded with BIND_NOW) resolve against us.  softverbs has no
 * kernel uverbs device behind it, so none of these can do anything: each
 * one fails with EOPNOTSUPP and touches none of its arguments.
 *
 * The prototypes are deliberately generic, not rdma-core's: these are
 * never legitimately called, and on the SysV ABIs we support (x86_64,
 * aarch64) a caller may pass any arguments to a function that reads none
 * of them; the caller owns the stack.  Only the return class matters, so
 * each stub returns what its real counterpart returns: an errno for the
 * ibv_cmd_* family and execute_ioctl, NULL + errno for the constructors,
 * nothing for the void ones.  ibv_query_gid_type and
 * ibv_read_ibdev_sysfs_file are real and live in the object code.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "export.h"

/* int ibv_cmd_xxx(...): rdma-core returns 0 or a positive errno. */
#define SV_PRIVATE_ERRNO(name)     \
	SV_EXPORT int name(void);  \
	SV_EXPORT int name(void)   \
	{                          \
		return EOPNOTSUPP; \
	}

/* Constructors: NULL with errno set. */
#define SV_PRIVATE_NULL(name)       \
	SV_EXPORT void *name(void); \
	SV_EXPORT void *name(void)  \
	{                           \
		errno = EOPNOTSUPP; \
		return NULL;        \
	}

/* void functions: nothing to report, nothing done. */
#define SV_PRIVATE_VOID(name)      \
	SV_EXPORT void name(void); \
	SV_EXPORT void name(void)  \
	{                          \
	}

SV_PRIVATE_ERRNO(execute_ioctl)
SV_PRIVATE_ERRNO(ibv_cmd_advise_mr)
SV_PRIVATE_ERRNO(ibv_cmd_alloc_dm)
SV_PRIVATE_ERRNO(ibv_cmd_alloc_mw)
SV_PRIVATE_ERRNO(ibv_cmd_alloc_pd)
SV_PRIVATE_ERRNO(ibv_cmd_attach_mcast)
SV_PRIVATE_ERRNO(ibv_cmd_close_xrcd)
SV_PRIVATE_ERRNO(ibv_cmd_create_ah)
SV_PRIVATE_ERRNO(ibv_cmd_create_counters)
SV_PRIVATE_ERRNO(ibv_cmd_create_cq)
SV_PRIVATE_ERRNO(ibv_cmd_create_cq_ex)
SV_PRIVATE_ERRNO(ibv_cmd_create_flow)
SV_PRIVATE_ERRNO(ibv_cmd_create_flow_action_esp)
SV_PRIVATE_ERRNO(ibv_cmd_create_qp)
SV_PRIVATE_ERRNO(ibv_cmd_create_qp_ex)
SV_PRIVATE_ERRNO(ibv_cmd_create_qp_ex2)
SV_PRIVATE_ERRNO(ibv_cmd_create_rwq_ind_table)
SV_PRIVATE_ERRNO(ibv_cmd_create_srq)
SV_PRIVATE_ERRNO(ibv_cmd_create_srq_ex)
SV_PRIVATE_ERRNO(ibv_cmd_create_wq)
SV_PRIVATE_ERRNO(ibv_cmd_dealloc_mw)
SV_PRIVATE_ERRNO(ibv_cmd_dealloc_pd)
SV_PRIVATE_ERRNO(ibv_cmd_dereg_mr)
SV_PRIVATE_ERRNO(ibv_cmd_destroy_ah)
SV_PRIVATE_ERRNO(ibv_cmd_destroy_counters)
SV_PRIVATE_ERRNO(ibv_cmd_destroy_cq)
SV_PRIVATE_ERRNO(ibv_cmd_destroy_flow)
SV_PRIVATE_ERRNO(ibv_cmd_destroy_flow_action)
SV_PRIVATE_ERRNO(ibv_cmd_destroy_qp)
SV_PRIVATE_ERRNO(ibv_cmd_destroy_rwq_ind_table)
SV_PRIVATE_ERRNO(ibv_cmd_destroy_srq)
SV_PRIVATE_ERRNO(ibv_cmd_destroy_wq)
SV_PRIVATE_ERRNO(ibv_cmd_detach_mcast)
SV_PRIVATE_ERRNO(ibv_cmd_free_dm)
SV_PRIVATE_ERRNO(ibv_cmd_get_context)
SV_PRIVATE_ERRNO(ibv_cmd_modify_cq)
SV_PRIVATE_ERRNO(ibv_cmd_modify_flow_action_esp)
SV_PRIVATE_ERRNO(ibv_cmd_modify_qp)
SV_PRIVATE_ERRNO(ibv_cmd_modify_qp_ex)
SV_PRIVATE_ERRNO(ibv_cmd_modify_srq)
SV_PRIVATE_ERRNO(ibv_cmd_modify_wq)
SV_PRIVATE_ERRNO(ibv_cmd_open_qp)
SV_PRIVATE_ERRNO(ibv_cmd_open_xrcd)
SV_PRIVATE_ERRNO(ibv_cmd_poll_cq)
SV_PRIVATE_ERRNO(ibv_cmd_post_recv)
SV_PRIVATE_ERRNO(ibv_cmd_post_send)
SV_PRIVATE_ERRNO(ibv_cmd_post_srq_recv)
SV_PRIVATE_ERRNO(ibv_cmd_query_context)
SV_PRIVATE_ERRNO(ibv_cmd_query_device_any)
SV_PRIVATE_ERRNO(ibv_cmd_query_mr)
SV_PRIVATE_ERRNO(ibv_cmd_query_port)
SV_PRIVATE_ERRNO(ibv_cmd_query_qp)
SV_PRIVATE_ERRNO(ibv_cmd_query_srq)
SV_PRIVATE_ERRNO(ibv_cmd_read_counters)
SV_PRIVATE_ERRNO(ibv_cmd_reg_dm_mr)
SV_PRIVATE_ERRNO(ibv_cmd_reg_dmabuf_mr)
SV_PRIVATE_ERRNO(ibv_cmd_reg_mr)
SV_PRIVATE_ERRNO(ibv_cmd_req_notify_cq)
SV_PRIVATE_ERRNO(ibv_cmd_rereg_mr)
SV_PRIVATE_ERRNO(ibv_cmd_resize_cq)

/* struct ibv_context *verbs_open_device(device, private_data) */
SV_PRIVATE_NULL(verbs_open_device)
/* struct verbs_context *_verbs_init_and_alloc_context(...) */
SV_PRIVATE_NULL(_verbs_init_and_alloc_context)

/* void verbs_set_ops(vctx, ops): no context of ours reaches a provider. */
SV_PRIVATE_VOID(verbs_set_ops)
/* void verbs_init_cq(cq, context, channel, cq_context) */
SV_PRIVATE_VOID(verbs_init_cq)
/* void verbs_uninit_context(vctx) */
SV_PRIVATE_VOID(verbs_uninit_context)
/* void __verbs_log(vctx, level, fmt, ...): providers log nothing here. */
SV_PRIVATE_VOID(__verbs_log)
/*
 * void verbs_register_driver_34(ops): libmlx5's and libefa's load-time
 * constructors call this.  We drive no hardware, so the registration is
 * dropped; those providers are never asked to match a device.
 */
SV_PRIVATE_VOID(verbs_register_driver_34)

/*
 * unsigned int __ioctl_final_num_attrs(num_attrs, link): sizes an ioctl
 * command buffer; answering with the count asked for is the safe identity.
 */
SV_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
					       const void *link);
SV_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
					       const void *link)
{
	return num_attrs;
}

/*
 * A data symbol, not a function: libmlx5 reads it (through its GOT) to
 * decide whether destroy may succeed after a device disassociation.
 * Same size as rdma-core's (bool, 1 byte), false as there.
 */
SV_EXPORT bool verbs_allow_disassociate_destroy;
