/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory transport's calls (shm.c): QPN allocation, connect,
 * accept, liveness and close of a link between QPs of one host.
 */
#ifndef SV_SHM_H
#define SV_SHM_H

#include "link.h"

#define SV_QPN_ANY 0xffffffffu

void sv_link_init(struct sv_link *l);
/* Takes a free QPN by binding its listener; *qpn on success. */
int sv_shm_bind(struct sv_link *l, uint32_t *qpn);
/* At RTR: everything the link needs (receive ring, doorbell, socket), so
 * running out of fds is an error now, not later.  -errno. */
int sv_shm_prepare(struct sv_link *l, uint32_t my_qpn, uint64_t ring_size);
/* Hands our receive ring and doorbell to dest_qpn.  -EAGAIN: no such QP
 * (yet); -EACCES: its socket belongs to another user (said on stderr),
 * nothing was sent. */
int sv_shm_connect(struct sv_link *l, uint32_t my_qpn, uint32_t dest_qpn);
/* Accepts hellos; expect is the peer QPN or SV_QPN_ANY.  Returns 1 when a
 * transmit ring was mapped, 0 otherwise, -EMFILE (or -ENFILE...) when a
 * connection or our peer's fds could not be taken (out of fds). */
int sv_shm_accept(struct sv_link *l, uint32_t my_qpn, uint32_t expect);
void sv_shm_drop_tx(struct sv_link *l);
/* Connections accepted whose hello has not been read yet. */
bool sv_shm_has_pending(const struct sv_link *l);
/* When a connecting link next needs a look (UINT64_MAX: on events). */
uint64_t sv_shm_next_ns(const struct sv_link *l, uint64_t now);
/* Reads what arrived on a connection socket: the new link state. */
enum sv_link_state sv_shm_check(struct sv_link *l, int fd);
void sv_shm_close(struct sv_link *l, uint32_t my_qpn, bool bye);
/* The next retry time after a failure; *wait_ns doubles (1..100 ms). */
uint64_t sv_shm_backoff(uint64_t *wait_ns, uint64_t now);
/* Empties our doorbell for this link (caller holds the QP's lock). */
void sv_shm_drain_doorbell(struct sv_link *l);

#endif
