/* SPDX-License-Identifier: MIT */
/*
 * The connection manager's own messages (REQ/REP/RTU/REJ/DREQ/DREP and
 * UD's SIDR REQ/REP) between processes: one fixed-size record per
 * SOCK_SEQPACKET message, checked field by field by cm_msg_check before
 * anything reads it.  Private data limits are the IBA's as rdma_cm
 * applies them to IP addresses (kernel cma.c: a 36-byte cma_hdr taken
 * out of the REQ's 92 and the SIDR REQ's 216 bytes).
 */
#ifndef SV_CM_WIRE_H
#define SV_CM_WIRE_H

#include <assert.h>
#include <errno.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <stdint.h>

#define CM_MAGIC   0x53564d43u /* "SVMC" */
#define CM_VERSION 1

#define CM_PDATA_REQ	  56  /* IB_CM_REQ_PRIVATE_DATA_SIZE 92 - 36 */
#define CM_PDATA_REP	  196 /* IB_CM_REP_PRIVATE_DATA_SIZE */
#define CM_PDATA_REJ	  148 /* IB_CM_REJ_PRIVATE_DATA_SIZE */
#define CM_PDATA_SIDR_REQ 180 /* IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE 216 - 36 */
#define CM_PDATA_SIDR_REP 136 /* IB_CM_SIDR_REP_PRIVATE_DATA_SIZE */
#define CM_PDATA_MAX	  196

/* IBA 12.6.7.2 reject reasons, as the REJECTED event's status */
#define CM_REJ_INVALID_SERVICE_ID 8
#define CM_REJ_CONSUMER_DEFINED	  28
#define CM_REJ_VENDOR_OPTION	  35 /* rdma_reject_ece */

enum cm_msg_type {
	CM_MSG_REQ = 1,
	CM_MSG_REP,
	CM_MSG_RTU,
	CM_MSG_REJ,
	CM_MSG_DREQ,
	CM_MSG_DREP,
	CM_MSG_SIDR_REQ,
	CM_MSG_SIDR_REP,
	CM_MSG_NTYPES
};

struct cm_wire_addr {
	uint16_t family; /* AF_INET or AF_INET6 */
	uint16_t port;	 /* network order */
	uint32_t scope_id;
	uint8_t addr[16]; /* IPv4 in the first 4 bytes */
};
static_assert(sizeof(struct cm_wire_addr) == 24, "wire layout");

struct cm_msg {
	uint32_t magic;	   /* CM_MAGIC: catches a stranger */
	uint16_t version;  /* CM_VERSION */
	uint8_t type;	   /* enum cm_msg_type */
	uint8_t pdata_len; /* bytes of pdata used, <= the type's limit */
	uint32_t qpn;	   /* the sender's QP (REQ, REP, SIDR REP) */
	uint32_t psn;	   /* its starting PSN */
	uint32_t qkey;	   /* SIDR REP */
	uint8_t qp_type;   /* IBV_QPT_RC / UC / UD / XRC_SEND (REQ) */
	uint8_t resp_res;  /* REQ/REP: responder resources offered */
	uint8_t init_depth;
	uint8_t flow_control;
	uint8_t retry;	   /* retry_count (REQ) */
	uint8_t rnr_retry; /* rnr_retry_count */
	uint8_t srq;
	uint8_t status; /* REJ: reason; SIDR REP: 0 ok, else rejected */
	uint16_t lid;	/* the sender's port LID */
	uint16_t pad;
	uint8_t gid[16];	      /* the sender's GID for this connection */
	struct cm_wire_addr src, dst; /* REQ: the active side's view */
	uint32_t ece_vendor, ece_options;
	uint8_t pdata[CM_PDATA_MAX];
};
static_assert(sizeof(struct cm_msg) == 300, "wire layout");

/* The largest private data each message carries. */
static inline unsigned int cm_pdata_limit(uint8_t type)
{
	switch (type) {
	case CM_MSG_REQ:
		return CM_PDATA_REQ;
	case CM_MSG_REP:
		return CM_PDATA_REP;
	case CM_MSG_REJ:
		return CM_PDATA_REJ;
	case CM_MSG_SIDR_REQ:
		return CM_PDATA_SIDR_REQ;
	case CM_MSG_SIDR_REP:
		return CM_PDATA_SIDR_REP;
	default:
		return 0;
	}
}

/* Every byte a peer sent, before anything believes it: 0 or -EPROTO. */
static inline int cm_msg_check(const struct cm_msg *m, long len)
{
	static const uint8_t qpts[] = {2 /* RC */, 3 /* UC */, 4 /* UD */,
				       9 /* XRC_SEND: to an XRC_RECV id */};
	bool qpt_ok = false;

	if (len != (long)sizeof(*m) || m->magic != CM_MAGIC ||
	    m->version != CM_VERSION || m->type == 0 ||
	    m->type >= CM_MSG_NTYPES || m->pdata_len > cm_pdata_limit(m->type))
		return -EPROTO;
	for (unsigned int i = 0; i < sizeof(qpts); i++)
		qpt_ok |= m->qp_type == qpts[i];
	if ((m->type == CM_MSG_REQ || m->type == CM_MSG_SIDR_REQ) && !qpt_ok)
		return -EPROTO;
	if (m->qpn > 0xffffff || m->psn > 0xffffff)
		return -EPROTO;
	if (m->type == CM_MSG_REQ || m->type == CM_MSG_SIDR_REQ) {
		if ((m->src.family != AF_INET && m->src.family != AF_INET6) ||
		    (m->dst.family != AF_INET && m->dst.family != AF_INET6))
			return -EPROTO;
	}
	return 0;
}

#endif
