/* SPDX-License-Identifier: MIT */
/*
 * Multicast groups (transport/mcast.c): a QP's attachments and a
 * context's groups, which the verbs (verbs/mcast.c) keep and the UD
 * transport reads, and the host's registry of members.
 */
#ifndef SV_MCAST_H
#define SV_MCAST_H

#include "objects.h"

/* One attachment of a QP: (gid, lid), on qp->ud.mcast. */
struct sv_mcast {
	struct sv_mcast *next;
	union ibv_gid gid;
	uint16_t lid;
};

/* A group some QP of the context is attached to (ctx->mcast_grps). */
struct sv_mcast_grp {
	struct sv_mcast_grp *next;
	union ibv_gid gid;
	uint32_t users; /* attachments of this context's QPs */
	uint32_t nqpn;	/* QPs in qpn[] */
	/* the context's QPs attached, sorted: who the UDP listener passes
	 * the group's datagrams to (at most a group's members on the host) */
	uint32_t qpn[SV_MAX_MCAST_QP_ATTACH];
	bool ip; /* the listener joined the IPv4 group */
};

/* Adds QPN qpn to the group's directory: 0, -ENOMEM past
 * SV_MAX_MCAST_QP_ATTACH members on the host, or -errno. */
int sv_mcast_registry_add(const union ibv_gid *gid, uint32_t qpn);
/* Removes QPN qpn from the group, and the group's directory with its
 * last member. */
void sv_mcast_registry_del(const union ibv_gid *gid, uint32_t qpn);

#endif
