/* SPDX-License-Identifier: MIT */
/*
 * A hostile peer's side of the shared-memory connection protocol
 * (provider/transport/shm.h): the QP sockets, hellos with fds, and receive
 * rings as the provider builds them, so a test can hand a victim QP exactly
 * what it wants to, well formed or not.  Built on the provider's own wire
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
/* A sealed ring of SV_PEER_RING_SIZE data bytes followed by ndesc receive
 * descriptors (ring.h: struct sv_rdesc), as sv_ring_create makes it. */
int sv_peer_ring_desc(uint32_t rx_qpn, uint32_t ndesc);
#define SV_PEER_RING_SIZE 65536u

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

/* A victim's ring the fake peer produces into, mapped read-write. */
struct sv_peer_tx {
	struct sv_ring_hdr *hdr;
	uint8_t *data;
	uint64_t size; /* data bytes, from the victim's header */
	uint64_t head; /* our next write position */
	size_t map_len;
	struct sv_rdesc *desc; /* the victim's receive descriptors, if any */
	uint32_t ndesc;
};

/*
 * A fake peer QP (the test speaks for it): a QPN whose listener it holds,
 * and what the victim's hello gave it: the victim's request ring and
 * response ring, mapped, and its shared memory (-1: none).  We ring the
 * victim's doorbell on afd, its connection to us, as a real peer does.
 */
struct sv_fake {
	uint32_t qpn;
	int lfd, afd, cfd;     /* our listener, the victim's, ours to it */
	struct sv_peer_tx rx;  /* the victim's request ring */
	struct sv_peer_tx rsp; /* the victim's response ring */
	int arena_fd, table_fd;
	uint32_t pd_id; /* the victim QP's PD in its key table */
};

/* Takes a free QPN by binding its listener. */
void sv_fake_bind(struct sv_fake *f);
/* Accepts the victim's connection and reads its hello (after the victim
 * went to RTR toward f->qpn); fails the test on anything unexpected. */
void sv_fake_accept(struct sv_fake *f, uint32_t victim_qpn);
/* Connects to the victim and sends our hello with these fds. */
void sv_fake_hello(struct sv_fake *f, uint32_t victim_qpn, const int *fds,
		   int nfds, uint32_t pd_id);
/* Bytes a record of plen payload bytes occupies (aligned). */
uint32_t sv_peer_rec_len(uint32_t plen);
/* Writes one record at t's head (its header but seq, payload), publishes
 * it with the seq of its position as a real requester does, moves the
 * head by advance and rings the victim's doorbell. */
void sv_fake_put(struct sv_fake *f, struct sv_peer_tx *t,
		 const struct sv_pkt *pkt, const void *payload, uint32_t plen,
		 uint64_t advance);
void sv_fake_close(struct sv_fake *f);

#endif
