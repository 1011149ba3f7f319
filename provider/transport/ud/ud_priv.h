/* SPDX-License-Identifier: MIT */
/*
 * What the files of the UD transport share (sv.h declares its calls for
 * the rest of the provider).  The UD transport (IBA 9.8.4): one SOCK_DGRAM
 * abstract Unix socket per UD QP, bound to its QPN's name, so any QP of
 * any process of the user reaches it with no set-up; between hosts, UDP
 * to a listener per context.  Its files, one topic each:
 *   send.c  the send path: one datagram per WQE (or per group member),
 *           on this host or over UDP, and the context's sockets for it
 *   recv.c  the receive path: the QP's socket and lanes into its receives
 *   mac.c   with a shared secret: the MAC of a datagram between hosts and
 *           each sender's replay window
 *   door.c  the context's UDP listener, which passes datagrams from other
 *           hosts on to their QPs' sockets, and its multicast groups
 */
#ifndef SV_UD_PRIV_H
#define SV_UD_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include "sv.h"
#include "wire.h"

/*
 * How long a send waits for room at its destination on this host (the
 * socket's queue, the kernel's max_dgram_qlen, often 10 datagrams, or
 * its lane), and the UDP listener holds a datagram for a QP whose socket
 * is full (sv_ud_door).  Only the receiving process's not running keeps
 * its queue full (it drains into its receives, or drops what has none),
 * so this is how long a process may be starved before we lose what it
 * would take: an HCA would have placed it.  A stopped receiver costs one
 * such wait; after that, datagrams to it are lost at once while its queue
 * stays full (qp->ud.stalled, sv_ud_door.stalled), so the sender's or the
 * listener's other traffic is not held up again.  200 ms lost
 * ud_fan_in_8_processes' datagrams beside two busy loops: a sender's
 * listener held one for the starved receiver 213 ms.
 */
#define SV_UD_HOLD_NS	    2000000000ull
#define SV_UD_SLOW_NS	    200000000ull /* a wait this long is said (debug) */
#define SV_UD_RETRY_TICK_NS 1000000ull

/* mac.c: seals the datagram d of n bytes (room for the trailer follows)
 * for another host: the new length.  Under qp->lock. */
size_t sv_ud_seal(struct sv_qp *qp, void *d, size_t n);
/* mac.c: checks a datagram from the network or with a MAC (*n bytes): true
 * if it may go on (the MAC taken off), else dropped and counted. */
bool sv_ud_auth_check(struct sv_qp *qp, struct sv_ud_hdr *h, size_t *n);
/* recv.c: a datagram the QP does not take is dropped and counted. */
void sv_ud_drop(struct sv_qp *qp);

#endif
