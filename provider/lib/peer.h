/* SPDX-License-Identifier: MIT */
/*
 * Who is at the other end of a TCP connection (issue 24, item 1): its
 * address, and if it is a socket of this host (our network namespace),
 * the user that owns it, found without root through NETLINK_SOCK_DIAG.
 * A service: it calls nothing of the provider and includes no layer
 * header, so libibverbs (provider/transport/tcp/) and librdmacm
 * (rdmacm/link.c) link a copy each, as env.c and auth.c.
 */
#ifndef SV_PEER_H
#define SV_PEER_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

/*
 * True if the address of fd's peer (getpeername) is want's address
 * (ports ignored): IPv4 a.b.c.d and IPv6 ::ffff:a.b.c.d compare equal;
 * IPv6 compares all 16 bytes, and for a link-local address (fe80::/10)
 * the scope id too when want names one (a GID carries no scope: want's
 * 0 is any interface).  False on any error.
 */
bool sv_peer_addr_is(int fd, const struct sockaddr *want);

/*
 * Who owns the other end of connected TCP socket fd, if that end is a
 * socket of this host (our network namespace): 0 and *uid.  -ENOENT: no
 * such socket on this host (the peer is another host, or another
 * network namespace).  Any other -errno: could not tell (the caller must
 * then refuse): -EAGAIN if the other end is still a request socket
 * (SYN_RECV: the handshake's last ACK not in) when our short deadline
 * passes, -ENOTCONN if it is closed (a timewait socket: its FIN acked),
 * -ETIMEDOUT if the kernel did not answer in time, -EPROTO on an answer
 * we cannot read.  The kernel reports uid 0 for those sockets; only a
 * full socket's uid is taken.  So the side that connected should ask
 * once the callee has answered (its socket is a full one by then), and
 * a caller that sent and closed is refused.
 *
 * Without root: one NETLINK_SOCK_DIAG request (inet_diag_req_v2,
 * SOCK_DIAG_BY_FAMILY, the exact 4-tuple of the other end: its source
 * is our getpeername, its destination our getsockname), idiag_uid of the
 * answer; the kernel finds the socket in its established hash, so the
 * cost does not grow with the sockets open.  IPv4, IPv6 and IPv4-mapped
 * IPv6 (a dual-stack listener's accepted socket, whose caller is an
 * AF_INET socket): an IPv4 tuple is asked in the other family too before
 * -ENOENT.  The netlink socket asked is in the calling thread's network
 * namespace, which must be fd's.  Never blocks: a deadline of its own
 * (SV_PEER_DEADLINE_MS).  Cost: 44-68 us a call on a loaded 2-CPU host,
 * the same with 11 or 4,001 TCP sockets open (test_peer's
 * peer_cost_10000_lookups), a third of it the netlink socket's
 * creation; once per connection set-up.
 */
int sv_peer_tcp_uid(int fd, uid_t *uid);

/* How long sv_peer_tcp_uid waits for the kernel's answers, at most */
#define SV_PEER_DEADLINE_MS 200

/*
 * The policy both transports apply to a TCP connection, on both sides
 * (the side that accepted and the side that connected): 0 if fd's peer
 * may be trusted as the peer at address want: its address is want's
 * (sv_peer_addr_is), and if it is on this host, its uid is ours
 * (getuid()); else -EACCES (address) or -EPERM (another user) or the
 * lookup's error (refuse on it too).  want NULL: only the uid check.
 *
 * The side that connected can check the callee's owner too: an accepted
 * socket's kernel uid is that of the listener's creator.
 */
int sv_peer_check(int fd, const struct sockaddr *want);

/*
 * sv_peer_check that never waits for the other end's handshake: a local
 * other end that is still a request socket (its listener's accept queue
 * is full, so the handshake's last ACK waits) is -EAGAIN at once, not
 * after SV_PEER_DEADLINE_MS.  For a progress thread (tcp.c's caller,
 * which calls the busy door again later instead).
 */
int sv_peer_check_now(int fd, const struct sockaddr *want);

/*
 * Why sv_peer_check refused (its return value, < 0), in words for the
 * one line a transport prints: "its address is not the peer's", "it is
 * another user's", "its owner on this host cannot be told (...)".
 */
const char *sv_peer_why(int err);

/*
 * Whether the kernel retransmits what we sent on TCP connection fd: data
 * unacknowledged past a retransmission timeout, the sign of a path that
 * is down (TCP_USER_TIMEOUT then ends it).  Bytes merely not acknowledged
 * yet are not that: the other host delays its ACKs (40 ms and more when
 * loaded), and a reader that is slow or stopped closes its window, which
 * the kernel probes without counting a retransmission.
 */
bool sv_peer_path_retransmits(int fd);

/* sa's address in words for those lines: "10.77.0.2" (an IPv4-mapped
 * IPv6 one too), "fd00:5e::2", or "?"; into buf (INET6_ADDRSTRLEN). */
const char *sv_peer_addr_str(const struct sockaddr *sa, char *buf, size_t len);
/* The address of fd's peer (getpeername) in words, as sv_peer_addr_str. */
const char *sv_peer_name(int fd, char *buf, size_t len);

#endif
