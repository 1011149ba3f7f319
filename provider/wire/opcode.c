// SPDX-License-Identifier: MIT
/*
 * The wire opcodes as data (wire.h): header extensions, properties and
 * the responder's handler for each, as the kernel's rxe_opcode.c does.
 * The requester, responder and completer test these properties instead
 * of switching on opcodes.
 */
#include <infiniband/verbs.h>

#include "wire.h"
#include "roce.h"

#define RC  SV_QPT(RC)
#define UC  SV_QPT(UC)
#define UD  SV_QPT(UD)
#define XRC SV_QPT(XRC_SEND) /* IBA 9.8.5: XRC has RC's operations */

/* clang-format off: one row per opcode */
const struct sv_opcode_info sv_opcodes[SV_OP_MAX] = {
	[SV_OP_SEND] =
		{
			.name = "SEND",
			.mask = SV_M_PAYLOAD | SV_M_IMM_OK | SV_M_RECV |
				SV_M_REQ,
			.qpts = RC | UC | UD | XRC,
			.handler = SV_H_SEND,
		},
	[SV_OP_WRITE] =
		{
			.name = "RDMA_WRITE",
			.mask = SV_M_RETH | SV_M_RETH_FIRST | SV_M_PAYLOAD |
				SV_M_IMM_OK | SV_M_REQ,
			.qpts = RC | UC | XRC,
			.ext_len = sizeof(struct sv_reth),
			.access = IBV_ACCESS_REMOTE_WRITE,
			.handler = SV_H_WRITE,
		},
	[SV_OP_READ_REQ] =
		{
			.name = "RDMA_READ_REQUEST",
			.mask = SV_M_RETH | SV_M_REQ | SV_M_RD_ATOMIC,
			.qpts = RC | XRC,
			.ext_len = sizeof(struct sv_reth),
			.access = IBV_ACCESS_REMOTE_READ,
			.handler = SV_H_READ,
		},
	[SV_OP_CMP_SWAP] =
		{
			.name = "COMPARE_SWAP",
			.mask = SV_M_ATOMETH | SV_M_REQ | SV_M_RD_ATOMIC |
				SV_M_ATOMIC,
			.qpts = RC | XRC,
			.ext_len = sizeof(struct sv_atometh),
			.access = IBV_ACCESS_REMOTE_ATOMIC,
			.handler = SV_H_ATOMIC,
		},
	[SV_OP_FETCH_ADD] =
		{
			.name = "FETCH_ADD",
			.mask = SV_M_ATOMETH | SV_M_REQ | SV_M_RD_ATOMIC |
				SV_M_ATOMIC,
			.qpts = RC | XRC,
			.ext_len = sizeof(struct sv_atometh),
			.access = IBV_ACCESS_REMOTE_ATOMIC,
			.handler = SV_H_ATOMIC,
		},
	[SV_OP_READ_RESP] =
		{
			.name = "RDMA_READ_RESPONSE",
			.mask = SV_M_PAYLOAD | SV_M_RESP,
			.qpts = RC,
		},
	[SV_OP_ATOMIC_RESP] =
		{
			.name = "ATOMIC_ACKNOWLEDGE",
			.mask = SV_M_ATOMACK | SV_M_RESP,
			.qpts = RC,
			.ext_len = sizeof(struct sv_atomack),
		},
	[SV_OP_WRITE_NOTE] =
		{
			.name = "RDMA_WRITE_IMM_NOTE",
			.mask = SV_M_IMM_OK | SV_M_RECV | SV_M_REQ,
			.qpts = RC | UC | XRC,
			.handler = SV_H_NOTE,
		},
};
/* clang-format on */

/*
 * The IBA's opcodes for RoCEv2 (roce.h): IBA 9.2 table 40's operations,
 * the headers each carries in wire order (9.3) and the transports that
 * have it.  The transport adds its own: DETH on UD, XRCETH on XRC's
 * requests (sv_roce_op_mask).  RD is not spoken.
 */
#define TP_RCX	(SV_TP(RC) | SV_TP(XRC))
#define TP_CONN (SV_TP(RC) | SV_TP(UC) | SV_TP(XRC))
#define TP_ALL	(TP_CONN | SV_TP(UD))
#define REQ	SV_RH_REQ
#define RESP	SV_RH_RESP
#define PAY	SV_RH_PAYLOAD
#define FIRST	SV_RH_FIRST
#define MIDDLE	SV_RH_MIDDLE
#define LAST	SV_RH_LAST
#define ONLY	SV_RH_ONLY

/* one row per operation */
const struct sv_ib_op sv_ib_ops[32] = {
	[SV_IB_SEND_FIRST] = {"SEND_FIRST", REQ | PAY | FIRST, TP_CONN},
	[SV_IB_SEND_MIDDLE] = {"SEND_MIDDLE", REQ | PAY | MIDDLE, TP_CONN},
	[SV_IB_SEND_LAST] = {"SEND_LAST", REQ | PAY | LAST, TP_CONN},
	[SV_IB_SEND_LAST_IMM] = {"SEND_LAST_IMM", REQ | SV_RH_IMM | PAY | LAST,
				 TP_CONN},
	[SV_IB_SEND_ONLY] = {"SEND_ONLY", REQ | PAY | ONLY, TP_ALL},
	[SV_IB_SEND_ONLY_IMM] = {"SEND_ONLY_IMM", REQ | SV_RH_IMM | PAY | ONLY,
				 TP_ALL},
	[SV_IB_WRITE_FIRST] = {"WRITE_FIRST", REQ | SV_RH_RETH | PAY | FIRST,
			       TP_CONN},
	[SV_IB_WRITE_MIDDLE] = {"WRITE_MIDDLE", REQ | PAY | MIDDLE, TP_CONN},
	[SV_IB_WRITE_LAST] = {"WRITE_LAST", REQ | PAY | LAST, TP_CONN},
	[SV_IB_WRITE_LAST_IMM] = {"WRITE_LAST_IMM",
				  REQ | SV_RH_IMM | PAY | LAST, TP_CONN},
	[SV_IB_WRITE_ONLY] = {"WRITE_ONLY", REQ | SV_RH_RETH | PAY | ONLY,
			      TP_CONN},
	[SV_IB_WRITE_ONLY_IMM] = {"WRITE_ONLY_IMM",
				  REQ | SV_RH_RETH | SV_RH_IMM | PAY | ONLY,
				  TP_CONN},
	[SV_IB_READ_REQ] = {"READ_REQUEST", REQ | SV_RH_RETH | ONLY, TP_RCX},
	[SV_IB_READ_RESP_FIRST] = {"READ_RESPONSE_FIRST",
				   RESP | SV_RH_AETH | PAY | FIRST, TP_RCX},
	[SV_IB_READ_RESP_MIDDLE] = {"READ_RESPONSE_MIDDLE", RESP | PAY | MIDDLE,
				    TP_RCX},
	[SV_IB_READ_RESP_LAST] = {"READ_RESPONSE_LAST",
				  RESP | SV_RH_AETH | PAY | LAST, TP_RCX},
	[SV_IB_READ_RESP_ONLY] = {"READ_RESPONSE_ONLY",
				  RESP | SV_RH_AETH | PAY | ONLY, TP_RCX},
	[SV_IB_ACK] = {"ACKNOWLEDGE", RESP | SV_RH_AETH | ONLY, TP_RCX},
	[SV_IB_ATOMIC_ACK] = {"ATOMIC_ACKNOWLEDGE",
			      RESP | SV_RH_AETH | SV_RH_ATOMACK | ONLY, TP_RCX},
	[SV_IB_CMP_SWAP] = {"COMPARE_SWAP", REQ | SV_RH_ATOMETH | ONLY, TP_RCX},
	[SV_IB_FETCH_ADD] = {"FETCH_ADD", REQ | SV_RH_ATOMETH | ONLY, TP_RCX},
	[SV_IB_SEND_LAST_INV] = {"SEND_LAST_INVALIDATE",
				 REQ | SV_RH_IETH | PAY | LAST, TP_RCX},
	[SV_IB_SEND_ONLY_INV] = {"SEND_ONLY_INVALIDATE",
				 REQ | SV_RH_IETH | PAY | ONLY, TP_RCX},
};

/* A17.9: a congestion notification, to the QP that should slow down. */
const struct sv_ib_op sv_ib_cnp = {"CNP", SV_RH_CNP, SV_TP(CNP)};
