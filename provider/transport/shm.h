/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory transport (shm.c): a link (link.h) between QPs of one
 * host, the peer's rings mapped from the memfds its hello passes.  Its
 * ops table is link.h's sv_shm_link_ops (the hot path's direct branch).
 */
#ifndef SV_SHM_H
#define SV_SHM_H

#include "link.h"

/* What a hello offers of the sender's registered memory (rmem.c): fds
 * stay the caller's; -1 when it shares none. */
struct sv_shm_share {
	int arena_fd, table_fd;
	uint32_t pd_id;
};

/* Hands our receive rings to dest_qpn (the ops' step does; fuzz/'s peer
 * does it itself, with the memory it chose).  -EAGAIN: no such QP
 * (yet); -EACCES: its socket belongs to another user (said on stderr),
 * nothing was sent. */
int sv_shm_connect(struct sv_link *l, uint32_t my_qpn, uint32_t dest_qpn,
		   const struct sv_shm_share *share);

#endif
