/* SPDX-License-Identifier: MIT */
/*
 * The IB CM's MADs passed between the softverbs processes of a host
 * (issue 26): over RoCEv2 every process is its own CM, and the kernel
 * gives a MAD to one of the host's sockets on UDP 4791 (a connected
 * socket of one 4-tuple, held by two processes; a member of the
 * SO_REUSEPORT group for a peer's first REQ) which may not be the one it
 * is for.  Each process names what it owns in the abstract Unix
 * namespace (per network namespace, like the QPs' names):
 *  - "softverbs/cm/id/PPPP": its communication IDs, whose top 16 bits
 *    are PPPP (a bind of the name makes the prefix the process's own on
 *    the host, so no two processes hand out one comm ID);
 *  - "softverbs/cm/svc/SSSS/PPPP/AAAAAAAA": a listener of port space
 *    SSSS, port PPPP, bound to IPv4 address AAAAAAAA (0: any).
 * A process given a MAD it has no id for sends it there as one datagram:
 * struct sv_cm_pass_hdr, then the RoCEv2 datagram as it came.  The owner
 * (rdmacm/ib_pass.c) takes it only from its own user (SCM_CREDENTIALS)
 * and checks every byte again as a MAD from the wire; a passed MAD is
 * never passed again.  Used by rdmacm (ib_pass.c) and by the UD door
 * (transport/ud/roce_ud.c), which may be the member given a first REQ.
 */
#ifndef SV_CM_PASS_H
#define SV_CM_PASS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#define SV_CM_PASS_MAGIC   0x53764350u /* "SvCP" */
#define SV_CM_PASS_VERSION 1
/* The RoCEv2 datagram a MAD travels in: BTH, DETH, 256 bytes, ICRC (280);
 * a passed one is never longer than this. */
#define SV_CM_PASS_PKT_MAX 320

enum sv_cm_pass_by {
	SV_CM_PASS_NONE = 0,	   /* not a CM MAD that names its owner */
	SV_CM_PASS_BY_ID = 1,	   /* our comm ID (a SIDR REP: request ID) */
	SV_CM_PASS_BY_SERVICE = 2, /* a REQ, SIDR REQ: the listener's */
};

/* A passed MAD's header; every field is checked by the owner. */
struct sv_cm_pass_hdr {
	uint32_t magic;	 /* SV_CM_PASS_MAGIC */
	uint8_t version; /* SV_CM_PASS_VERSION */
	uint8_t by;	 /* enum sv_cm_pass_by: which name it was sent to */
	uint16_t len;	 /* the datagram's bytes after this header */
	uint32_t from;	 /* the peer's IPv4 address, network order */
	uint32_t to;	 /* ours it was sent to, network order (not 0) */
};
_Static_assert(sizeof(struct sv_cm_pass_hdr) == 16, "wire ABI");

/* What a MAD is passed by: its owner's name's key. */
struct sv_cm_pass_key {
	enum sv_cm_pass_by by;
	uint32_t id;	   /* BY_ID: the comm ID it names as the receiver's */
	uint16_t ps, port; /* BY_SERVICE: its service ID's */
};

/* The comm IDs of prefix p's owner (ID >> 16 == p). */
socklen_t sv_cm_pass_id_addr(struct sockaddr_un *a, uint16_t prefix);
/* A listener's name: port space ps, port, IPv4 address addr (network
 * order, 0: any). */
socklen_t sv_cm_pass_service_addr(struct sockaddr_un *a, uint16_t ps,
				  uint16_t port, uint32_t addr);
/* RoCEv2 datagram b (n bytes): a CM MAD to QP1 that names its owner?
 * Its key (by SV_CM_PASS_NONE if not).  Only what picks the name is
 * read here: the owner checks the rest. */
struct sv_cm_pass_key sv_cm_pass_key_of(const uint8_t *b, size_t n);
/* Passes datagram b (n bytes, from `from` to `to`, IPv4 network order)
 * on unbound datagram socket fd to the owner k names (a listener's name
 * at `to` first, then at any address): 0 passed, or -errno (-ENOENT: no
 * such name; -EAGAIN: its queue is full). */
int sv_cm_pass_send(int fd, const struct sv_cm_pass_key *k, const uint8_t *b,
		    size_t n, uint32_t from, uint32_t to);

#endif
