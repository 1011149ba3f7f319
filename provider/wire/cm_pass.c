// SPDX-License-Identifier: MIT
/*
 * The IB CM's MADs passed to the process of the host they are for
 * (cm_pass.h): the names, and what a MAD is passed by.  The MAD's fields
 * are read at their places in IBA tables 106-120 (the offsets below are
 * from the MAD's start: a 24-byte common header, then the CM's data); the
 * whole MAD is checked by its owner, not here.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cm_pass.h"
#include "roce.h"

#define MAD_SIZE       256
#define MAD_CLASS      1  /* management class: 0x07, the CM */
#define MAD_ATTR       16 /* attribute ID, 16 bits */
#define MAD_LOCAL_ID   24 /* local comm ID; a SIDR REQ's, REP's request ID */
#define MAD_REMOTE_ID  28 /* remote comm ID (REP, RTU, REJ, MRA, DREQ, DREP) */
#define MAD_SERVICE_ID 32 /* REQ, SIDR REQ: 64 bits */
#define CM_CLASS       0x07
#define CM_QKEY	       0x80010000u

static socklen_t named(struct sockaddr_un *a, int n)
{
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

socklen_t sv_cm_pass_id_addr(struct sockaddr_un *a, uint16_t prefix)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* sun_path[0] = 0: the abstract namespace, per network namespace */
	return named(a, snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
				 "softverbs/cm/id/%04x", prefix));
}

socklen_t sv_cm_pass_service_addr(struct sockaddr_un *a, uint16_t ps,
				  uint16_t port, uint32_t addr)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	return named(a, snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
				 "softverbs/cm/svc/%04x/%04x/%08x", ps, port,
				 ntohl(addr)));
}

static uint32_t be32_at(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

struct sv_cm_pass_key sv_cm_pass_key_of(const uint8_t *b, size_t n)
{
	struct sv_cm_pass_key k = {.by = SV_CM_PASS_NONE};
	struct sv_roce_pkt p;
	const uint8_t *m;
	uint64_t sid;

	/* the door asks of every RoCE datagram: BTH's opcode (UD SEND_ONLY)
	 * and DQPN (1) first, without parsing */
	if (n < SV_ROCE_BTH || n > SV_CM_PASS_PKT_MAX ||
	    b[0] != (SV_IB_UD | SV_IB_SEND_ONLY) || b[5] || b[6] || b[7] != 1)
		return k;
	if (sv_roce_parse(b, n, NULL, &p) ||
	    p.opcode != (SV_IB_UD | SV_IB_SEND_ONLY) || p.dqpn != 1 ||
	    p.qkey != CM_QKEY || p.len != MAD_SIZE ||
	    p.payload[MAD_CLASS] != CM_CLASS)
		return k;
	m = p.payload;
	switch ((uint16_t)(m[MAD_ATTR] << 8 | m[MAD_ATTR + 1])) {
	case 0x0010: /* REQ */
	case 0x0017: /* SIDR REQ */
		sid = (uint64_t)be32_at(m + MAD_SERVICE_ID) << 32 |
		      be32_at(m + MAD_SERVICE_ID + 4);
		if (sid >> 32) /* not an rdma_cm port space's */
			return k;
		k.by = SV_CM_PASS_BY_SERVICE;
		k.ps = (uint16_t)(sid >> 16);
		k.port = (uint16_t)sid;
		return k;
	case 0x0018: /* SIDR REP: the request ID is the asker's */
		k.id = be32_at(m + MAD_LOCAL_ID);
		break;
	case 0x0011: /* MRA */
	case 0x0012: /* REJ */
	case 0x0013: /* REP */
	case 0x0014: /* RTU */
	case 0x0015: /* DREQ */
	case 0x0016: /* DREP */
		k.id = be32_at(m + MAD_REMOTE_ID);
		break;
	default: /* LAP, APR, ClassPortInfo: not spoken */
		return k;
	}
	if (k.id)
		k.by = SV_CM_PASS_BY_ID;
	return k;
}

/* One try to the name a names: 0 or -errno. */
static int send_to(int fd, const struct sockaddr_un *a, socklen_t alen,
		   const struct sv_cm_pass_hdr *h, const uint8_t *b, size_t n)
{
	struct iovec iov[2] = {{(void *)h, sizeof(*h)}, {(void *)b, n}};
	struct msghdr m = {.msg_name = (void *)a,
			   .msg_namelen = alen,
			   .msg_iov = iov,
			   .msg_iovlen = 2};

	return sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

int sv_cm_pass_send(int fd, const struct sv_cm_pass_key *k, const uint8_t *b,
		    size_t n, uint32_t from, uint32_t to)
{
	struct sv_cm_pass_hdr h = {.magic = SV_CM_PASS_MAGIC,
				   .version = SV_CM_PASS_VERSION,
				   .by = (uint8_t)k->by,
				   .len = (uint16_t)n,
				   .from = from,
				   .to = to};
	struct sockaddr_un a;
	socklen_t alen;
	int ret;

	if (fd < 0)
		return -EBADF;
	if (n > SV_CM_PASS_PKT_MAX || !to)
		return -EINVAL;
	if (k->by == SV_CM_PASS_BY_ID) {
		alen = sv_cm_pass_id_addr(&a, (uint16_t)(k->id >> 16));
		return send_to(fd, &a, alen, &h, b, n);
	}
	if (k->by != SV_CM_PASS_BY_SERVICE)
		return -EINVAL;
	/* a listener bound to the address it came to, else to any */
	alen = sv_cm_pass_service_addr(&a, k->ps, k->port, to);
	ret = send_to(fd, &a, alen, &h, b, n);
	if (ret != -ECONNREFUSED && ret != -ENOENT)
		return ret;
	alen = sv_cm_pass_service_addr(&a, k->ps, k->port, 0);
	return send_to(fd, &a, alen, &h, b, n);
}
