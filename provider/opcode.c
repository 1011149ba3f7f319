// SPDX-License-Identifier: MIT
/*
 * The wire opcodes as data (wire.h): header extensions, properties and
 * the responder's handler for each, as the kernel's rxe_opcode.c does.
 * The requester, responder and completer test these properties instead
 * of switching on opcodes.
 */
#include <infiniband/verbs.h>

#include "wire.h"

const struct sv_opcode_info sv_opcodes[SV_OP_MAX] = {
	[SV_OP_SEND] = {"SEND",
			SV_M_PAYLOAD | SV_M_IMM_OK | SV_M_RECV | SV_M_REQ, 0, 0,
			SV_H_SEND},
	[SV_OP_WRITE] = {"RDMA_WRITE",
			 SV_M_RETH | SV_M_RETH_FIRST | SV_M_PAYLOAD |
				 SV_M_IMM_OK | SV_M_REQ,
			 sizeof(struct sv_reth), IBV_ACCESS_REMOTE_WRITE,
			 SV_H_WRITE},
	[SV_OP_READ_REQ] = {"RDMA_READ_REQUEST",
			    SV_M_RETH | SV_M_REQ | SV_M_RD_ATOMIC,
			    sizeof(struct sv_reth), IBV_ACCESS_REMOTE_READ,
			    SV_H_READ},
	[SV_OP_CMP_SWAP] = {"COMPARE_SWAP",
			    SV_M_ATOMETH | SV_M_REQ | SV_M_RD_ATOMIC |
				    SV_M_ATOMIC,
			    sizeof(struct sv_atometh), IBV_ACCESS_REMOTE_ATOMIC,
			    SV_H_ATOMIC},
	[SV_OP_FETCH_ADD] = {"FETCH_ADD",
			     SV_M_ATOMETH | SV_M_REQ | SV_M_RD_ATOMIC |
				     SV_M_ATOMIC,
			     sizeof(struct sv_atometh),
			     IBV_ACCESS_REMOTE_ATOMIC, SV_H_ATOMIC},
	[SV_OP_READ_RESP] = {"RDMA_READ_RESPONSE", SV_M_PAYLOAD | SV_M_RESP, 0,
			     0, SV_H_NONE},
	[SV_OP_ATOMIC_RESP] = {"ATOMIC_ACKNOWLEDGE", SV_M_ATOMACK | SV_M_RESP,
			       sizeof(struct sv_atomack), 0, SV_H_NONE},
	[SV_OP_WRITE_NOTE] = {"RDMA_WRITE_IMM_NOTE",
			      SV_M_IMM_OK | SV_M_RECV | SV_M_REQ, 0, 0,
			      SV_H_NOTE},
};
