/* SPDX-License-Identifier: MIT */
/*
 * The verbs world the provider fuzz targets run in (env.c): one context
 * with a PD, a CQ and a guarded MR, made once per process; a victim QP
 * per input; and a fake peer that is the provider's own link code
 * (shm.c) with no QP behind it, so the harness holds the producer side
 * of the victim's rings and writes into them whatever the input says.
 */
#ifndef SV_FUZZ_ENV_H
#define SV_FUZZ_ENV_H

#include <infiniband/verbs.h>

#include "engine.h"
#include "fuzz.h"
#include "progress.h"
#include "shm.h"
#include "transport.h"

#define FZ_MR_LEN    8192u /* the registered bytes */
#define FZ_GUARD_LEN 4096u /* unregistered bytes on each side of them */

struct fz_env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint8_t *mem;	   /* guard, MR, guard */
	uint8_t *buf;	   /* mem + FZ_GUARD_LEN: the MR's first byte */
	struct ibv_mr *mr; /* every access flag */
};

/* The process's environment (made at the first call; aborts if the
 * device cannot be opened: nothing to fuzz then). */
struct fz_env *fz_env(void);
/* Aborts if a byte outside the MR changed (a write the engine should
 * have refused). */
void fz_env_check_guards(struct fz_env *e);
/* Polls the CQ empty, checking what a completion can be: wr_id among
 * the n_ids outstanding (each taken once, set to ~0), status in range.
 * Returns completions seen. */
int fz_env_drain(struct fz_env *e, uint64_t *ids, int n_ids);
/* Open file descriptors (a leak is a bug too). */
int fz_count_fds(void);

/* sendmsg of buf with fds (SCM_RIGHTS), never blocking; its result. */
ssize_t fz_send_fds(int s, const void *buf, size_t len, const int *fds,
		    int nfds);

/* A victim RC or UC QP in INIT (all access flags), or NULL. */
struct ibv_qp *fz_victim_create(struct fz_env *e, enum ibv_qp_type type);
/* Victim to RTR toward dest_qpn, expecting rq_psn, with path MTU mtu;
 * then to RTS with sq_psn if rts.  0 or errno. */
int fz_victim_connect(struct ibv_qp *qp, uint32_t dest_qpn, uint32_t rq_psn,
		      uint32_t sq_psn, bool rts, enum ibv_mtu mtu);

/* The fake peer: a link with a listener (its QPN in qpn). */
struct fz_peer {
	struct sv_link l; /* l.tx: the victim's request ring, l.rsp_tx: its
			   * response ring (we produce); l.rx/l.rsp_rx:
			   * ours, which the victim produces into */
	uint32_t qpn;
	bool up;
};

/* Binds the fake peer's listener and makes its rings (ring_size as the
 * victim's; ndesc receive descriptors on its request ring).  0 or
 * -errno. */
int fz_peer_open(struct fz_peer *p, uint32_t ndesc);
/* Takes the victim's hello and sends ours (offering share's memory, if
 * not NULL): both directions up when it returns 0 (the victim driven by
 * polling e->cq meanwhile).  -errno. */
int fz_peer_handshake(struct fz_peer *p, struct fz_env *e, struct ibv_qp *qp,
		      const struct sv_shm_share *share);
void fz_peer_close(struct fz_peer *p);

/* Polls the victim's CQ a few times (each poll drives its engine) and
 * keeps the completions' ids checked as fz_env_drain does. */
void fz_drive(struct fz_env *e, int times, uint64_t *ids, int n_ids);

#endif
