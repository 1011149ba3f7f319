/* SPDX-License-Identifier: MIT */
/*
 * A hostile peer's side of the shared-memory connection protocol
 * (provider/shm.h): the QP sockets, hellos with fds, and receive rings as
 * the provider builds them, so a test can hand a victim QP exactly what
 * it wants to, well formed or not.  Built on the provider's own wire
 * definitions: no mirror to keep in step.
 */
#ifndef SV_CONF_PEER_H
#define SV_CONF_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm.h"

/* A hello from src_qpn to dst_qpn, of this build's version. */
struct sv_hello sv_peer_hello(uint32_t src_qpn, uint32_t dst_qpn);

/* A receive ring memfd with a header as sv_ring_create writes it (magic
 * as given), sealed unless told not to, its rx_sleep flag as given. */
int sv_peer_ring(uint32_t rx_qpn, uint32_t magic, bool seal, bool asleep);

/* Connects to QP qpn's socket; fails the test if nobody listens. */
int sv_peer_connect(uint32_t qpn);
/* Binds and listens on QP qpn's socket; -1 if it is taken. */
int sv_peer_listen(uint32_t qpn);

/* sendmsg of buf and nfds fds (SCM_RIGHTS); its result. */
ssize_t sv_peer_send(int fd, const void *buf, size_t len, const int *fds,
		     int nfds);
/* The same, failing the test unless sendmsg takes it all. */
void sv_send_fds(int fd, const void *buf, size_t len, const int *fds, int nfds);
/* Receives one hello (blocking) and up to SV_HELLO_FDS fds; recvmsg's
 * result. */
ssize_t sv_peer_recv(int fd, struct sv_hello *h, int fds[SV_HELLO_FDS],
		     int *nfds);

#endif
