// SPDX-License-Identifier: MIT
/*
 * Address handles (IBA 10.2.2; ibv_create_ah(3)): where a UD send goes.
 * An AH names port 1 and our LID, or a GID of this host's table, or a
 * multicast GID (a group, mcast.c: an IPv4-mapped one reaches other
 * hosts' members too), or another host's
 * IP address GID, IPv4-mapped or IPv6 (its datagrams go over UDP: ud/,
 * sv_ud_route).  The AH
 * holds a reference on its PD.
 * ibv_init_ah_from_wc and ibv_create_ah_from_wc are in abi/derived.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "transport.h"
#include "verbs.h"

/* 0, or EINVAL: an AH names port 1 (not "unset", as a QP's AV may) and
 * an address of this host. */
static int check_ah(const struct ibv_ah_attr *a)
{
	if (a->port_num != 1)
		return EINVAL;
	uint32_t grp;

	/* a multicast group (mcast.c): the GID names the group, whatever
	 * the LID; an IPv4 one (::ffff:224.0.0.0/4) reaches other hosts */
	if (a->is_global && (a->grh.dgid.raw[0] == 0xff ||
			     sv_mcast_ipv4(a->grh.dgid.raw, &grp)))
		return a->grh.sgid_index < SV_GID_TBL_LEN ? 0 : EINVAL;
	return sv_av_check(a, "ibv_create_ah", true);
}

struct ibv_ah *sv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sv_ah *ah;
	int err;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	/* an Ethernet port: a GRH, as rxe (rdma_check_ah_attr) */
	err = sv_ctx_is_roce(pd->context) ? sv_roce_av_check(attr)
					  : check_ah(attr);
	if (err) {
		errno = err;
		return NULL;
	}
	/* max_ah live per context: ENOMEM past it (rxe's pool) */
	if (sv_obj_get(to_sctx(pd->context), SV_OBJ_AH)) {
		errno = ENOMEM;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		sv_obj_put(to_sctx(pd->context), SV_OBJ_AH);
		errno = ENOMEM;
		return NULL;
	}
	ah->attr = *attr;
	err = sv_ud_route(to_sctx(pd->context), attr, &ah->ud_ip, &ah->ud_ip6);
	if (err) {
		free(ah);
		sv_obj_put(to_sctx(pd->context), SV_OBJ_AH);
		errno = -err;
		return NULL;
	}
	if (attr->is_global &&
	    sv_query_gid(pd->context, 1, attr->grh.sgid_index, &ah->sgid)) {
		free(ah);
		sv_obj_put(to_sctx(pd->context), SV_OBJ_AH);
		errno = EINVAL;
		return NULL;
	}
	ah->ibv.context = pd->context;
	ah->ibv.pd = pd;
	sv_pd_hold(pd);
	return &ah->ibv;
}

int sv_destroy_ah(struct ibv_ah *ibah)
{
	struct sv_ah *ah;

	if (!ibah)
		return EINVAL;
	ah = to_sah(ibah);
	sv_obj_put(to_sctx(ibah->context), SV_OBJ_AH);
	sv_pd_drop(ibah->pd);
	free(ah);
	return 0;
}
