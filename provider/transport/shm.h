/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory transport's calls (shm.c): QPN allocation, connect,
 * accept, liveness and close of a link between QPs of one host.
 */
#ifndef SV_SHM_H
#define SV_SHM_H

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "link.h"

#define SV_QPN_ANY 0xffffffffu

/*
 * The connection protocol (a test's hostile peer speaks it too).  A QP's
 * socket is an abstract Unix name; a hello carries SCM_RIGHTS fds.
 */
#define SV_HELLO_MAGIC	 0x5356686cu /* "SVhl" */
#define SV_HELLO_VERSION 4	     /* 4: doorbells on the connection */

/* A QP's socket type: connections (hang-up = death) that keep message
 * boundaries, so a doorbell is one 1-byte message and never a stream. */
#define SV_SHM_SOCK SOCK_SEQPACKET

enum sv_msg_type {
	SV_MSG_HELLO = 1, /* carries [ring memfd, response ring memfd] and,
			   * when the sender shares its registered memory,
			   * [arena memfd, key table] */
	SV_MSG_BYE = 2,	  /* orderly close: the peer QP is going */
	SV_MSG_TCP = 3,	  /* from our user's TCP door (tcp.c): a caller
			   * from the network for this QP; carries its
			   * socket and, after the hello, its struct
			   * sv_tcp_hello */
};

/* Any 1-byte message on a connection is a doorbell: the sender published
 * something in a ring we share with it (or freed room in one). */
#define SV_DOORBELL_LEN 1

struct sv_hello {
	uint32_t magic;	  /* SV_HELLO_MAGIC */
	uint16_t version; /* SV_HELLO_VERSION */
	uint16_t type;	  /* enum sv_msg_type */
	uint32_t src_qpn; /* the sender's QPN */
	uint32_t dst_qpn; /* the QPN it believes it talks to */
	uint32_t pd_id;	  /* the sender QP's PD in its key table */
	uint32_t rsvd;
};
static_assert(sizeof(struct sv_hello) == 24, "wire ABI");

/* The abstract socket name of QP qpn: per network namespace, no file. */
static inline socklen_t sv_shm_qp_addr(struct sockaddr_un *a, uint32_t qpn)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* sun_path[0] = 0: the abstract namespace, per network namespace */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "softverbs/qp/%06x", qpn);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* What a hello offers of the sender's registered memory (rmem.c): fds
 * stay the caller's; -1 when it shares none. */
struct sv_shm_share {
	int arena_fd, table_fd;
	uint32_t pd_id;
};

#define SV_HELLO_FDS 4 /* the most fds a hello carries */

/* The smallest response ring we make: a quarter of it (the responder's
 * train, resp.c) holds one MTU of the largest path MTU, 4096. */
#define SV_RSP_RING_MIN 16384u

void sv_link_init(struct sv_link *l);
/* Takes a free QPN by binding its listener (type SV_SHM_SOCK), or a UD
 * QP's datagram socket (SOCK_DGRAM: the abstract namespace is one for
 * both, so QPNs stay unique); *qpn on success. */
int sv_shm_bind(struct sv_link *l, int type, uint32_t *qpn);
/* At RTR: everything the link needs (receive ring with ndesc receive
 * descriptors, response ring, socket), so
 * running out of fds is an error now, not later.  -errno. */
int sv_shm_prepare(struct sv_link *l, uint32_t my_qpn, uint64_t ring_size,
		   uint32_t ndesc);
/* Hands our receive rings to dest_qpn.  -EAGAIN: no such QP
 * (yet); -EACCES: its socket belongs to another user (said on stderr),
 * nothing was sent. */
int sv_shm_connect(struct sv_link *l, uint32_t my_qpn, uint32_t dest_qpn,
		   const struct sv_shm_share *share);
/* Accepts hellos; expect is the peer QPN or SV_QPN_ANY.  Returns 1 when a
 * transmit ring was mapped, 0 otherwise, -EMFILE (or -ENFILE...) when a
 * connection or our peer's fds could not be taken (out of fds). */
int sv_shm_accept(struct sv_link *l, uint32_t my_qpn, uint32_t expect);
void sv_shm_drop_tx(struct sv_link *l);
/* Connections accepted whose hello has not been read yet. */
bool sv_shm_has_pending(const struct sv_link *l);
/* When a connecting link next needs a look (UINT64_MAX: on events). */
uint64_t sv_shm_next_ns(const struct sv_link *l, uint64_t now);
/* Reads what arrived on a connection socket (doorbells, a goodbye, a
 * hang-up): the new link state.  A hang-up with a goodbye waiting on the
 * link's other socket is CLOSED: the peer says goodbye on both first. */
enum sv_link_state sv_shm_check(struct sv_link *l, int fd);
void sv_shm_close(struct sv_link *l, uint32_t my_qpn, bool bye);
/* A datagram's sender is our user: its SCM_CREDENTIALS (the socket has
 * SO_PASSCRED); false if there were none.  UD (ud.c) and XRC forwarding
 * (xrc.c) take nothing from anyone else. */
bool sv_shm_sender_ok(struct msghdr *m);
/* The next retry time after a failure; *wait_ns doubles (1..100 ms). */
uint64_t sv_shm_backoff(uint64_t *wait_ns, uint64_t now);

#endif
