/* SPDX-License-Identifier: MIT */
/*
 * rsockets' wire format between two softverbs processes (ours, not
 * rdma-core's: both ends run this library).  Shared with the conformance
 * test that plays a hostile peer (tests/cm/conf_rsocket.c).
 *
 * - The hello rides in the CM's private data (REQ, then REP): where the
 *   sender's receive ring is (address, rkey, size) and how many receives
 *   it posted.
 * - Stream bytes: RDMA WRITE WITH IMMEDIATE into the peer's ring at the
 *   stream position modulo the ring size, never across the ring's end;
 *   the immediate (big endian) is the byte count.  Each costs the peer
 *   one posted receive.  With a zero-copy lane (a second QP each side,
 *   named in the hello) the bytes come by plain RDMA WRITE on the lane
 *   first, then a zero-length WRITE WITH IMMEDIATE on the connection's QP
 *   says how many.
 * - Control: a SEND of one struct rs_ctrl.  Every control message carries
 *   the sender's cumulative counters: stream bytes it has read (the ring
 *   space the peer may reuse) and receives it has re-posted (the
 *   message credits the peer gets back).
 * - riowrite: a plain RDMA WRITE into a window the peer announced with
 *   RS_CTRL_IOMAP; no receive is consumed.
 * All fields are little endian.
 */
#ifndef SV_RS_WIRE_H
#define SV_RS_WIRE_H

#include <stdint.h>

#define RS_MAGIC   0x52535631u /* "RSV1" */
#define RS_VERSION 1

struct rs_hello {
	uint32_t magic;
	uint8_t version;
	uint8_t pad[3];
	uint64_t ring_addr; /* the sender's receive ring */
	uint32_t ring_rkey;
	uint32_t ring_size; /* bytes, RS_RING_MIN..RS_RING_MAX */
	uint32_t rq_depth;  /* receives posted, RS_RQ_MIN..RS_RQ_MAX */
	uint32_t lane_qpn;  /* its zero-copy lane's QP (rsocket_lane.c); 0 */
} __attribute__((packed));

_Static_assert(sizeof(struct rs_hello) <= 56, "fits a REQ's private data");

enum rs_ctrl_type {
	RS_CTRL_CREDIT = 1, /* counters only */
	RS_CTRL_FIN,	    /* no more stream bytes from the sender */
	RS_CTRL_IOMAP,	    /* a window for riowrite (replaces overlaps) */
	RS_CTRL_UNMAP,	    /* the window at offset is gone */
	RS_CTRL_LANE,	    /* the active side's lane is up: write on yours */
	RS_CTRL_NTYPES
};

struct rs_ctrl {
	uint32_t magic;
	uint8_t type; /* enum rs_ctrl_type */
	uint8_t pad[3];
	uint64_t consumed; /* cumulative stream bytes read by the sender */
	uint64_t recvs;	   /* cumulative receives it re-posted */
	uint64_t offset;   /* IOMAP/UNMAP: the window's riomap offset */
	uint64_t addr;	   /* IOMAP: its address and length, rkey */
	uint64_t len;
	uint32_t rkey;
	uint32_t pad2;
} __attribute__((packed));

#define RS_RING_MIN 4096u
#define RS_RING_MAX (16u << 20)
#define RS_RQ_MIN   16u
#define RS_RQ_MAX   1024u

#endif
