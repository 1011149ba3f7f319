// SPDX-License-Identifier: MIT
/*
 * UD multicast among the processes of one host (ibv_attach_mcast(3),
 * rxe's semantics): the verbs, and the counts that keep a context's
 * groups (ctx->mcast_grps) and a QP's attachments (qp->ud.mcast).  The
 * registry of members, and the lookups the UD transport makes when it
 * sends and receives, are transport/mcast.c, whose head comment says how
 * groups work on one host and between hosts.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mcast.h"
#include "transport.h"
#include "verbs.h"

/* ib_attach_mcast's checks (the kernel's core): a multicast GID, a UD
 * QP, a multicast LID on an InfiniBand port (IBA 4.1.3: 0xc000-0xfffe). */
static int check_args(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	uint32_t grp;

	if (!qp || !gid)
		return EINVAL;
	/* the kernel's rdma_is_multicast_addr: IPv4-mapped ones too */
	if ((gid->raw[0] != 0xff && !sv_mcast_ipv4(gid->raw, &grp)) ||
	    qp->qp_type != IBV_QPT_UD)
		return EINVAL;
	if (lid < 0xc000 || lid == 0xffff)
		return EINVAL;
	return 0;
}

static struct sv_mcast_grp *grp_find(struct sv_context *ctx,
				     const union ibv_gid *gid)
{
	for (struct sv_mcast_grp *g = ctx->mcast_grps; g; g = g->next)
		if (!memcmp(&g->gid, gid, sizeof(*gid)))
			return g;
	return NULL;
}

/* Drops one attachment from the context's counts.  ctx->mcast_lock. */
static void grp_put(struct sv_context *ctx, const union ibv_gid *gid)
{
	struct sv_mcast_grp **pp = &ctx->mcast_grps;
	uint32_t ip;

	ctx->mcast_nattach--;
	for (; *pp; pp = &(*pp)->next) {
		struct sv_mcast_grp *g = *pp;

		if (memcmp(&g->gid, gid, sizeof(*gid)))
			continue;
		if (!--g->users) {
			*pp = g->next;
			if (g->ip && sv_mcast_ipv4(g->gid.raw, &ip))
				sv_ud_mcast_join(ctx, ip, false);
			free(g);
			ctx->mcast_ngrp--;
		}
		return;
	}
}

/* Counts one more attachment to gid in the context: 0, or -ENOMEM past
 * max_mcast_grp groups or max_total_mcast_qp_attach attachments (rxe's
 * errors).  ctx->mcast_lock. */
static int grp_get(struct sv_context *ctx, const union ibv_gid *gid)
{
	struct sv_mcast_grp *g = grp_find(ctx, gid);
	uint32_t ip;

	if (ctx->mcast_nattach >= SV_MAX_TOTAL_MCAST_QP_ATTACH)
		return -ENOMEM;
	if (!g) {
		int err;

		if (ctx->mcast_ngrp >= SV_MAX_MCAST_GRP)
			return -ENOMEM;
		g = calloc(1, sizeof(*g));
		if (!g)
			return -ENOMEM;
		/* an IPv4 group: the listener joins it (between hosts) */
		if (sv_mcast_ipv4(gid->raw, &ip)) {
			err = sv_ud_mcast_join(ctx, ip, true);
			if (err) {
				free(g);
				/* igmp_max_memberships: the limit is ours */
				return err == -ENOBUFS ? -ENOMEM : err;
			}
			g->ip = true;
		}
		g->gid = *gid;
		g->next = ctx->mcast_grps;
		ctx->mcast_grps = g;
		ctx->mcast_ngrp++;
	}
	g->users++;
	ctx->mcast_nattach++;
	return 0;
}

/* Adds (add) or removes QPN qpn in the group's sorted list of this
 * context's members: 0, or -ENOMEM when full.  ctx->mcast_lock. */
static int grp_member(struct sv_context *ctx, const union ibv_gid *gid,
		      uint32_t qpn, bool add)
{
	struct sv_mcast_grp *g = grp_find(ctx, gid);
	uint32_t i = 0;

	if (!g)
		return 0;
	while (i < g->nqpn && g->qpn[i] < qpn)
		i++;
	if (!add) {
		if (i < g->nqpn && g->qpn[i] == qpn) {
			memmove(&g->qpn[i], &g->qpn[i + 1],
				(g->nqpn - i - 1) * sizeof(g->qpn[0]));
			g->nqpn--;
		}
		return 0;
	}
	if (g->nqpn >= SV_MAX_MCAST_QP_ATTACH)
		return -ENOMEM;
	memmove(&g->qpn[i + 1], &g->qpn[i], (g->nqpn - i) * sizeof(g->qpn[0]));
	g->qpn[i] = qpn;
	g->nqpn++;
	return 0;
}

/* 0, or a positive errno (the verb's contract). */
static int attach(struct sv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	struct sv_context *ctx = qp->ctx;
	struct sv_mcast *m;
	int err;

	pthread_mutex_lock(&ctx->mcast_lock);
	for (m = qp->ud.mcast; m; m = m->next)
		if (m->lid == lid && !memcmp(&m->gid, gid, sizeof(*gid)))
			break;
	if (m) { /* uverbs: attaching again is a no-op that succeeds */
		err = 0;
		goto out;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		err = ENOMEM;
		goto out;
	}
	m->gid = *gid;
	m->lid = lid;
	err = -grp_get(ctx, gid);
	if (err)
		goto err_free;
	if (!sv_mcast_attached(qp, gid->raw)) {
		err = -grp_member(ctx, gid, qp->qpx.qp_base.qp_num, true);
		if (err)
			goto err_put;
		err = -sv_mcast_registry_add(gid, qp->qpx.qp_base.qp_num);
		if (err) {
			grp_member(ctx, gid, qp->qpx.qp_base.qp_num, false);
			goto err_put;
		}
	}
	sv_lock(&qp->lock);
	m->next = qp->ud.mcast;
	qp->ud.mcast = m;
	sv_unlock(&qp->lock);
	goto out;

err_put:
	grp_put(ctx, gid);
err_free:
	free(m);
out:
	pthread_mutex_unlock(&ctx->mcast_lock);
	return err;
}

/* Removes the attachment m (on qp->ud.mcast): the registry entry goes with
 * the QP's last attachment to that GID.  ctx->mcast_lock held. */
static void detach(struct sv_qp *qp, struct sv_mcast *m)
{
	struct sv_mcast **pp = &qp->ud.mcast;

	sv_lock(&qp->lock);
	while (*pp != m)
		pp = &(*pp)->next;
	*pp = m->next;
	sv_unlock(&qp->lock);
	if (!sv_mcast_attached(qp, m->gid.raw)) {
		sv_mcast_registry_del(&m->gid, qp->qpx.qp_base.qp_num);
		grp_member(qp->ctx, &m->gid, qp->qpx.qp_base.qp_num, false);
	}
	grp_put(qp->ctx, &m->gid);
	free(m);
}

void sv_mcast_detach_all(struct sv_qp *qp)
{
	if (!qp->ud.mcast)
		return;
	pthread_mutex_lock(&qp->ctx->mcast_lock);
	while (qp->ud.mcast)
		detach(qp, qp->ud.mcast);
	pthread_mutex_unlock(&qp->ctx->mcast_lock);
}

int sv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	int err = check_args(qp, gid, lid);

	return err ? err : attach(to_sqp(qp), gid, lid);
}

/* uverbs: detaching what is not attached is EINVAL. */
int sv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	struct sv_context *ctx;
	struct sv_mcast *m;
	int err = check_args(qp, gid, lid);

	if (err)
		return err;
	ctx = to_sqp(qp)->ctx;
	pthread_mutex_lock(&ctx->mcast_lock);
	for (m = to_sqp(qp)->ud.mcast; m; m = m->next)
		if (m->lid == lid && !memcmp(&m->gid, gid, sizeof(*gid)))
			break;
	if (m)
		detach(to_sqp(qp), m);
	pthread_mutex_unlock(&ctx->mcast_lock);
	return m ? 0 : EINVAL;
}
