/* SPDX-License-Identifier: MIT */
/*
 * Conformance helpers for UD: one end (device, PD, registered buffer, one
 * CQ or two, optional completion channel, a UD QP, optional AH to our own
 * port) and the posts of a datagram and of a receive.  One copy for
 * conf_ud.c, conf_ud_lane.c, conf_mcast.c, conf_mcast_udp.c and
 * conf_faults.c.  As pair.h: public verbs only, failures fail the test.
 */
#ifndef SV_CONF_UD_END_H
#define SV_CONF_UD_END_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pair.h"

/* The 40-byte GRH in front of every UD receive (IBA 9.8.4). */
#define UD_GRH 40

/* How to build one end; start from ud_end_opts(). */
struct ud_end_opts {
	uint32_t send_wr, recv_wr; /* the QP's queues */
	uint32_t sge;		   /* max_send_sge = max_recv_sge */
	int cqe;		   /* entries of each CQ */
	bool two_cqs;		   /* sends on scq, receives on cq */
	bool channel;		   /* the CQs on a completion channel */
	size_t len;		   /* registered buffer, bytes */
	uint32_t qkey;
	bool ready; /* the QP to RTS (ud_end_ready) */
	bool ah;    /* an AH to our own port by LID */
};

struct ud_end {
	struct sv_end e; /* the device and PD (sv_end_open_ctx) */
	struct ud_end_opts o;
	struct ibv_comp_channel *ch; /* NULL unless o.channel */
	struct ibv_cq *scq, *cq;     /* sends, receives: equal unless
				      * o.two_cqs */
	struct ibv_qp *qp;	     /* NULL: ud_end_close skips it */
	struct ibv_mr *mr;
	struct ibv_ah *ah; /* NULL unless o.ah */
	uint8_t *buf;	   /* o.len bytes, registered */
};

/* depth for both queues, one SGE, 4 * depth CQ entries, one CQ, ready. */
struct ud_end_opts ud_end_opts(uint32_t depth, size_t len, uint32_t qkey);
void ud_end_open(struct ud_end *u, const struct ud_end_opts *o);
void ud_end_close(struct ud_end *u);
/* Another QP of type t on the end's PD and CQs, in RESET; depth 0: the
 * end's queues; flags: ibv_create_qp_ex's create_flags (0: none). */
struct ibv_qp *ud_end_qp(struct ud_end *u, enum ibv_qp_type t, uint32_t depth,
			 uint32_t flags);
/* RESET -> INIT (qkey, port 1) -> RTR -> RTS (sq_psn 7). */
void ud_end_ready(struct ibv_qp *qp, uint32_t qkey);
/* A receive of buf[off, off+len) on qp; the verbs' rc. */
int ud_end_recv(struct ud_end *u, struct ibv_qp *qp, uint64_t id, size_t off,
		uint32_t len);
/* A signalled datagram of buf[off, off+len) on qp to (ah, qpn, qkey),
 * with immediate 0xabcd1234 if op carries one; the verbs' rc. */
int ud_end_send(struct ud_end *u, struct ibv_qp *qp, uint64_t id,
		enum ibv_wr_opcode op, size_t off, uint32_t len,
		struct ibv_ah *ah, uint32_t qpn, uint32_t qkey);

#endif
