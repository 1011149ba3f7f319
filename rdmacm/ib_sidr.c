// SPDX-License-Identifier: MIT
/*
 * SIDR (IBA 12.11, Service ID Resolution) for UD ids over RoCEv2: an
 * RDMA_PS_UDP id's rdma_connect to another host's IPv4 address sends a
 * SIDR REQ to the peer's QP1 (ib_link.c's sockets, resent as a REQ is:
 * ib_resend.c) and the listener answers a SIDR REP with its QPN and Q_Key,
 * as the kernel's CM does (cm.c cm_sidr_req_handler, cma.c
 * cma_sidr_rep_handler).  conn.c's state machine is unchanged: this file
 * turns its SIDR records into MADs and the peer's MADs into records.
 *
 * The SIDR REQ: request ID (our comm ID), P_Key 0xffff, service ID
 * (RDMA_PS_UDP << 16 | port), rdma_cm's cma_hdr then the program's 180
 * bytes.  The SIDR REP: the request ID and transaction ID of the REQ it
 * answers, a status (0 OK, 1 no such service, 2 rejected), the QPN, the
 * service ID, the Q_Key (RDMA_UDP_QKEY), 136 bytes of private data.
 *
 * A SIDR REQ carries no communication ID of its own answer, so a REQ
 * that comes again after its REP (the REP lost) would be a new request:
 * the REPs sent are kept (reps[], for a REQ's whole wait) and a REQ
 * again from the same address with the same request ID is answered
 * with its REP again.  A SIDR REQ for a service no id of this process
 * listens on is answered "unsupported" (status 1, as the kernel's CM
 * answers) only if no socket of this host holds the service's UDP port
 * (a bind of it succeeds): another process's UD listener holds it, and
 * the REQ is not ours to refuse.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm.h"
#include "ib_link.h"
#include "ib_mad.h"
#include "ib_stat.h"

/* The SIDR REP's status (IBA table 121; the kernel's ib_cm_sidr_status) */
#define SIDR_UNSUPPORTED 1 /* no such service */

static uint64_t service_of(const struct cm_id *c, const struct sockaddr_in *at)
{
	return cm_mad_service_id((uint16_t)c->id.ps, ntohs(at->sin_port));
}

int cm_ib_sidr_mad(struct cm_id *c, const struct cm_msg *m, struct cm_mad *d)
{
	unsigned int room;

	if (m->type == CM_MSG_SIDR_REQ) {
		d->attr = CM_MAD_SIDR_REQ;
		d->local_id = c->ib_lid; /* the request ID */
		d->pkey = 0xffff;
		d->service_id = service_of(c, cm_ib_dst(c));
		room = cm_mad_pdata_size(CM_MAD_SIDR_REQ) - CM_MAD_CMA_HDR_SIZE;
		if (m->pdata_len > room)
			return -EINVAL;
		memcpy(d->pdata + CM_MAD_CMA_HDR_SIZE, m->pdata, m->pdata_len);
		return cm_mad_cma_put(d->pdata, &c->id.route.addr.src_addr,
				      &c->id.route.addr.dst_addr);
	}
	/* the passive side's answer: the REQ's request and transaction IDs */
	d->attr = CM_MAD_SIDR_REP;
	d->tid = c->ib_tid;
	d->local_id = c->ib_rid;
	d->sidr_status = m->status;
	d->qpn = m->status ? 0 : m->qpn;
	d->qkey = m->status ? 0 : m->qkey;
	d->service_id = service_of(c, cm_ib_src(c));
	if (m->pdata_len > cm_mad_pdata_size(CM_MAD_SIDR_REP))
		return -EINVAL;
	memcpy(d->pdata, m->pdata, m->pdata_len);
	return 0;
}

bool cm_ib_sidr_record(struct cm_id *c, const struct cm_mad *d,
		       struct cm_msg *r)
{
	/* our request ID and the service we asked: anything else is not
	 * ours (conn.c takes it only in REQ_SENT, on a UD id) */
	if (d->local_id != c->ib_lid || !cm_is_ud(c) ||
	    d->service_id != service_of(c, cm_ib_dst(c)))
		return false;
	r->type = CM_MSG_SIDR_REP;
	r->status = d->sidr_status;
	r->qpn = d->qpn;
	r->qkey = d->qkey;
	r->pdata_len = CM_PDATA_SIDR_REP;
	memcpy(r->pdata, d->pdata, CM_PDATA_SIDR_REP);
	return true;
}

/*
 * The SIDR REPs sent, each for a REQ's whole wait (SOFTVERBS_CM_TIMEOUT_MS,
 * after which its sender gave up): the newest CM_IB_SIDR_REPS, an old one
 * overwritten first.
 */
#define CM_IB_SIDR_REPS 16
static struct sidr_rep {
	uint64_t until_ms; /* 0: free */
	uint32_t request_id;
	struct sockaddr_in src, dst; /* ours, the peer's */
	uint8_t mad[CM_MAD_SIZE];
} reps[CM_IB_SIDR_REPS];
static unsigned int reps_next;

void cm_ib_sidr_keep(struct cm_id *c, const uint8_t mad[CM_MAD_SIZE])
{
	struct sidr_rep *k = &reps[reps_next++ % CM_IB_SIDR_REPS];

	k->until_ms = cm_now_ms() + cm_core.rep_wait_ms;
	k->request_id = c->ib_rid;
	k->src = *cm_ib_src(c);
	k->dst = *cm_ib_dst(c);
	memcpy(k->mad, mad, CM_MAD_SIZE);
}

/* A MAD from src to dst's QP1 on a socket of its own (the id that sent
 * the first is closed, or there is none). */
static void send_alone(const struct sockaddr_in *src,
		       const struct sockaddr_in *dst,
		       const uint8_t mad[CM_MAD_SIZE], bool again)
{
	int fd = cm_ib_udp_socket(src, CM_IB_QP1_SPORT, true);

	if (fd < 0) {
		cm_log("SIDR REP to 0x%08x: no socket: %s\n",
		       ntohl(dst->sin_addr.s_addr), strerror(-fd));
		return;
	}
	cm_ib_send_raw(fd, src, dst, mad, CM_MAD_SIDR_REP, again, NULL);
	close(fd);
}

bool cm_ib_sidr_again(const struct cm_mad *d, const struct sockaddr_in *from)
{
	uint64_t now = cm_now_ms();

	for (int i = 0; i < CM_IB_SIDR_REPS; i++) {
		struct sidr_rep *k = &reps[i];

		if (!k->until_ms || now >= k->until_ms ||
		    k->request_id != d->local_id ||
		    k->dst.sin_addr.s_addr != from->sin_addr.s_addr)
			continue;
		cm_ib_count(CM_IB_DUP_REQ);
		cm_log("SIDR REQ again (request ID 0x%08x): its REP again\n",
		       d->local_id);
		send_alone(&k->src, &k->dst, k->mad, true);
		return true;
	}
	return false;
}

void cm_ib_sidr_unserved(const struct cm_mad *d, const struct sockaddr_in *from)
{
	struct sockaddr_storage src, dst;
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)&src;
	const struct sockaddr_in *d4 = (const struct sockaddr_in *)&dst;
	struct cm_mad rep = {.method = CM_MAD_METHOD_SEND,
			     .attr = CM_MAD_SIDR_REP,
			     .tid = d->tid,
			     .local_id = d->local_id,
			     .sidr_status = SIDR_UNSUPPORTED,
			     .service_id = d->service_id};
	uint8_t mad[CM_MAD_SIZE];
	uint16_t ps, port;
	int fd;

	/* believed only where the datagram agrees: from the address it
	 * came from, to an address of ours, for a service rdma_cm makes */
	if (cm_mad_service_split(d->service_id, &ps, &port) ||
	    ps != RDMA_PS_UDP ||
	    cm_mad_cma_get(d->pdata, htons(port), &src, &dst) ||
	    src.ss_family != AF_INET ||
	    s4->sin_addr.s_addr != from->sin_addr.s_addr ||
	    !cm_addr_is_local((const struct sockaddr *)&dst)) {
		cm_ib_count(CM_IB_DROP_NOT_OURS);
		cm_log("a SIDR REQ whose service or addresses are not ours: "
		       "dropped\n");
		return;
	}
	/* a UD listener (ours in another process, or anyone's) holds the
	 * port: not ours to say there is none */
	fd = cm_ib_udp_socket(d4, port, false);
	if (fd < 0) {
		cm_ib_count(CM_IB_DROP_NOT_OURS);
		cm_log("SIDR REQ for UDP port %u, held by another socket: "
		       "dropped\n",
		       port);
		return;
	}
	close(fd);
	if (cm_mad_encode(&rep, mad))
		return;
	cm_log("SIDR REQ for port %u, where nobody listens: unsupported\n",
	       port);
	send_alone(d4, from, mad, false);
}
