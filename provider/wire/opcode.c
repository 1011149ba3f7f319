// SPDX-License-Identifier: MIT
/*
 * The wire opcodes as data (wire.h): header extensions, properties and
 * the responder's handler for each, as the kernel's rxe_opcode.c does.
 * The requester, responder and completer test these properties instead
 * of switching on opcodes.
 */
#include <infiniband/verbs.h>

#include "wire.h"

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
