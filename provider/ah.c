// SPDX-License-Identifier: MIT
/*
 * Address handles (IBA 10.2.2; ibv_create_ah(3)): where a UD send goes.
 * softverbs has one host, so an AH must name it: port 1 and our LID, or
 * a GID of this host's table.  The AH holds a reference on its PD.
 * ibv_init_ah_from_wc and ibv_create_ah_from_wc are in abi/derived.c.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "sv.h"

/* Once per process (all with SOFTVERBS_DEBUG): a program retrying must
 * not fill stderr. */
static void say_bad_ah(const char *fmt, ...)
{
	static atomic_bool said;
	va_list ap;

	if (atomic_exchange(&said, true) && !sv_debug)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* 0, or EINVAL with the reason on stderr. */
static int check_ah(const struct ibv_ah_attr *a)
{
	char buf[INET6_ADDRSTRLEN];

	if (a->port_num != 1) {
		say_bad_ah("softverbs: ibv_create_ah: port %u does not exist; "
			   "softverbs0 has port 1\n",
			   a->port_num);
		return EINVAL;
	}
	if (a->is_global) {
		if (a->grh.sgid_index >= SV_GID_TBL_LEN)
			return EINVAL;
		if (sv_gid_is_local(&a->grh.dgid))
			return 0;
		inet_ntop(AF_INET6, a->grh.dgid.raw, buf, sizeof(buf));
		say_bad_ah("softverbs: ibv_create_ah: GID %s is not on this "
			   "host; the TCP transport between hosts is not "
			   "implemented yet\n",
			   buf);
		return EINVAL;
	}
	if (a->dlid == sv_local_lid())
		return 0;
	say_bad_ah("softverbs: ibv_create_ah: LID 0x%04x is not this host's "
		   "(0x%04x); use a GID to reach another host\n",
		   a->dlid, sv_local_lid());
	return EINVAL;
}

SV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd,
				       struct ibv_ah_attr *attr)
{
	struct sv_ah *ah;
	int err;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	err = check_ah(attr);
	if (err) {
		errno = err;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->attr = *attr;
	if (attr->is_global &&
	    ibv_query_gid(pd->context, 1, attr->grh.sgid_index, &ah->sgid)) {
		free(ah);
		errno = EINVAL;
		return NULL;
	}
	ah->ibv.context = pd->context;
	ah->ibv.pd = pd;
	sv_pd_get(to_spd(pd));
	return &ah->ibv;
}

SV_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct sv_ah *ah;

	if (!ibah)
		return EINVAL;
	ah = to_sah(ibah);
	sv_pd_put(to_spd(ibah->pd));
	free(ah);
	return 0;
}
