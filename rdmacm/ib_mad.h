/* SPDX-License-Identifier: MIT */
/*
 * The IB connection manager's MADs (IBA vol 1 ch. 12, as the kernel's
 * CM sends them on QP1: class 0x07, class version 2, method Send) and
 * rdma_cm's private data header (the kernel's cma_hdr) first in a REQ's
 * and a SIDR REQ's private data: a codec and nothing else, no socket, no
 * state, so it is tested alone (tests/cm/test_ib_mad.c).
 *
 * A MAD is 256 bytes: the 24-byte common MAD header, then the CM
 * message (its fields at the IBA's byte and bit offsets, big-endian,
 * each attribute's private data filling the rest).  cm_mad_decode takes
 * a peer's bytes as hostile: the length, the versions, the class, the
 * method, the attribute and each field's range are checked, and what is
 * wrong is said by one verdict (a counter's name in cm_mad_verdict_name)
 * before anything reads the message.
 */
#ifndef SV_CM_IB_MAD_H
#define SV_CM_IB_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define CM_MAD_SIZE	     256
#define CM_MAD_HDR_SIZE	     24
#define CM_MAD_BASE_VERSION  1
#define CM_MAD_CLASS	     0x07	 /* IB_MGMT_CLASS_CM */
#define CM_MAD_CLASS_VERSION 2		 /* IB_CM_CLASS_VERSION */
#define CM_MAD_METHOD_SEND   0x03	 /* every CM message is a Send */
#define CM_MAD_PDATA_MAX     224	 /* RTU's and DREP's */
#define CM_MAD_INFO_MAX	     72		 /* REJ's ARI, SIDR REP's information */
#define CM_MAD_QKEY	     0x80010000u /* QP1's Q_Key (IB_QP1_QKEY) */
#define CM_MAD_CMA_HDR_SIZE  36		 /* rdma_cm's cma_hdr */
#define CM_MAD_CMA_VERSION   0

/* Attribute IDs (IBA table 104; the kernel's CM_*_ATTR_ID). */
enum cm_mad_attr {
	CM_MAD_CLASS_PORT_INFO = 0x0001,
	CM_MAD_REQ = 0x0010,
	CM_MAD_MRA = 0x0011,
	CM_MAD_REJ = 0x0012,
	CM_MAD_REP = 0x0013,
	CM_MAD_RTU = 0x0014,
	CM_MAD_DREQ = 0x0015,
	CM_MAD_DREP = 0x0016,
	CM_MAD_SIDR_REQ = 0x0017,
	CM_MAD_SIDR_REP = 0x0018,
	CM_MAD_LAP = 0x0019,
	CM_MAD_APR = 0x001a,
};

/* The REQ's transport service type (IBA 12.6.5). */
enum cm_mad_transport {
	CM_MAD_TS_RC = 0,
	CM_MAD_TS_UC = 1,
	CM_MAD_TS_XRC = 3, /* with extended transport type 1 */
};

/* rdma_cm's port spaces, bits 16-31 of the service ID (rdma_cma.h). */
#define CM_MAD_PS_TCP 0x0106
#define CM_MAD_PS_UDP 0x0111
#define CM_MAD_PS_IB  0x013f

/* What cm_mad_decode says of a peer's bytes; each but OK is a drop,
 * counted under cm_mad_verdict_name's name. */
enum cm_mad_verdict {
	CM_MAD_OK,
	CM_MAD_DROP_LEN,     /* not exactly 256 bytes */
	CM_MAD_DROP_VERSION, /* base version not 1 or class version not 2 */
	CM_MAD_DROP_CLASS,   /* not the CM class */
	CM_MAD_DROP_METHOD,  /* not a Send (a response, a Get...) */
	CM_MAD_DROP_ATTR,    /* an attribute ID the CM does not have */
	CM_MAD_DROP_UNSUPP,  /* LAP, APR, ClassPortInfo: not spoken here */
	CM_MAD_DROP_FIELD,   /* a field out of its range (a comm ID 0...) */
	CM_MAD_NVERDICTS
};
const char *cm_mad_verdict_name(enum cm_mad_verdict v);

/* A path (REQ primary or alternate; IBA 12.6.5). */
struct cm_mad_path {
	uint16_t local_lid, remote_lid; /* RoCE: 0xffff (permissive) */
	uint8_t local_gid[16], remote_gid[16];
	uint32_t flow_label; /* 20 bits */
	uint8_t rate;	     /* 6 bits */
	uint8_t tclass, hop_limit;
	uint8_t sl;	      /* 4 bits */
	uint8_t subnet_local; /* 1 bit */
	uint8_t ack_timeout;  /* 5 bits */
};

/*
 * One CM message, decoded.  Which fields an attribute carries is the
 * table in ib_mad.c; the others are zero after a decode and ignored by
 * an encode.  SIDR REQ and REP keep their request ID in local_id.
 */
struct cm_mad {
	/* the common MAD header */
	uint8_t method;
	uint16_t status;
	uint64_t tid;
	uint16_t attr; /* enum cm_mad_attr */
	uint32_t attr_mod;
	/* the CM message */
	uint32_t local_id, remote_id; /* communication IDs */
	uint64_t service_id;	      /* REQ, SIDR REQ, SIDR REP */
	uint64_t ca_guid;	      /* REQ, REP */
	uint32_t vendor_id;	      /* 24 bits: REQ, REP, SIDR REP */
	uint32_t qkey;		      /* REQ, REP, SIDR REP */
	uint32_t qpn;  /* 24 bits: REQ, REP, SIDR REP; DREQ: the remote */
	uint32_t eecn; /* 24 bits: REQ's local, REP's local */
	uint32_t remote_eecn;
	uint32_t psn; /* 24 bits: REQ, REP */
	uint8_t resp_res, init_depth;
	uint8_t remote_cm_timeout, local_cm_timeout; /* 5 bits each */
	uint8_t transport;			     /* 2 bits */
	uint8_t flow_ctrl;			     /* 1 bit */
	uint8_t retry, rnr_retry;		     /* 3 bits each */
	uint8_t max_cm_retries;			     /* 4 bits */
	uint8_t srq, rdc, sap;			     /* 1 bit each */
	uint8_t mtu;				     /* 4 bits: IBV_MTU_* */
	uint8_t ext_transport;			     /* 3 bits */
	uint8_t target_ack_delay;		     /* 5 bits (REP) */
	uint8_t failover;			     /* 2 bits (REP) */
	uint16_t pkey;				     /* REQ, SIDR REQ */
	struct cm_mad_path primary, alternate;	     /* REQ */
	uint8_t msg_kind;	 /* REJ: message rejected, MRA: message
				  * MRAed (0 REQ, 1 REP, 2 other) */
	uint8_t service_timeout; /* MRA, 5 bits */
	uint16_t reason;	 /* REJ */
	uint8_t sidr_status;	 /* SIDR REP */
	uint8_t info_len;	 /* REJ (7 bits), SIDR REP: bytes of info */
	uint8_t info[CM_MAD_INFO_MAX];
	uint8_t pdata[CM_MAD_PDATA_MAX]; /* cm_mad_pdata_size(attr) of it */
};

/* Bytes of private data the attribute carries (0 for an unknown one). */
unsigned int cm_mad_pdata_size(uint16_t attr);

/* m into 256 bytes at out (the header as the kernel's CM writes it:
 * base version 1, class 0x07, class version 2, m->method, m->tid...):
 * 0, or -EINVAL for an attribute cm_mad_decode would not take or a field
 * wider than its bits. */
int cm_mad_encode(const struct cm_mad *m, uint8_t out[CM_MAD_SIZE]);

/* A peer's n bytes into *m, checked; *m is written whatever the verdict
 * but means something only on CM_MAD_OK. */
enum cm_mad_verdict cm_mad_decode(const uint8_t *b, size_t n, struct cm_mad *m);

/* rdma_cm's service ID: (port space << 16) | port. */
static inline uint64_t cm_mad_service_id(uint16_t ps, uint16_t port)
{
	return (uint64_t)ps << 16 | port;
}

/* The port space and port of a service ID: 0, or -EINVAL if it is not
 * one rdma_cm makes (bits above 31 set, or an unknown port space). */
int cm_mad_service_split(uint64_t sid, uint16_t *ps, uint16_t *port);

/* rdma_cm's header (the kernel's struct cma_hdr: version 0, IP version
 * in the high nibble, the active side's source port, then the source and
 * destination addresses, an IPv4 one in the last 4 of its 16 bytes) into
 * the first 36 bytes of pdata: 0, or -EINVAL (families differ or are
 * not IP). */
int cm_mad_cma_put(uint8_t pdata[CM_MAD_CMA_HDR_SIZE],
		   const struct sockaddr *src, const struct sockaddr *dst);

/* The header back from a peer's private data: src with the port the
 * header carries, dst with dst_port (network order: the service ID's);
 * 0, or -EPROTO (version, IP version). */
int cm_mad_cma_get(const uint8_t pdata[CM_MAD_CMA_HDR_SIZE], uint16_t dst_port,
		   struct sockaddr_storage *src, struct sockaddr_storage *dst);

#endif
