// SPDX-License-Identifier: MIT
/*
 * The IB connection manager's MADs on QP1 over RoCEv2: the link of an id
 * with c->ib (SOFTVERBS_TRANSPORT=roce, an RC or UC connection to or
 * from another host's IPv4 address), behind link.c's seam.  conn.c's
 * state machine is unchanged: its records (struct cm_msg) become MADs
 * here (ib_mad.c) on the way out and MADs become records on the way in,
 * so the kernel's CM on the other side (rxe, a RoCE NIC) or another
 * softverbs sees the REQ, REP, RTU, REJ, DREQ, DREP it expects.
 *
 * Sockets.  An id's MADs leave from an unconnected socket of its own
 * bound to (source address, 0xd872) with IP_PMTUDISC_DO, so Linux sends
 * IP ID 0 and our ICRC is right: 0xd872 is the port rxe sends QP1's
 * datagrams from (0xc000 | hash_32(1, 14), rxe_qp.c), so a softverbs
 * peer sees ours come from it too.  They arrive on one socket per
 * (source, destination) pair of the process (ports[]), bound to 4791
 * with SO_REUSEPORT and connected to (peer, 0xd872): the kernel gives a
 * connected socket its 4-tuple's datagrams before the reuseport group
 * (the RoCE links' and the UD door's), and the MAD's communication ID
 * names the id.  A listener also holds an unconnected socket on 4791
 * for the first REQ from a peer (cm_ib_accept); a REQ from a peer we
 * already have a socket for comes there and goes to its service's
 * listener.  Every datagram is hostile: the RoCE codec checks the packet
 * (a UD SEND to QPN 1 from QPN 1 with QP1's Q_Key), cm_mad_decode the
 * MAD, and it must name our communication ID (and the peer's, once
 * known); a REQ must name the listener's service and addresses the
 * datagram and GIDs agree with.  Anything else is dropped and logged
 * (SOFTVERBS_DEBUG).  A REQ, REP or DREQ is resent until answered
 * (ib_resend.c; a DREQ even after rdma_destroy_id: its orphans); a
 * REQ that comes again is answered with its REP again, a REP with its
 * RTU again, a DREQ after the id closed with its DREP again for a time
 * (timewait: ib_resend.c).  A UD id's SIDR REQ and REP: ib_sidr.c.
 * Counters: ib_stat.c.  An MRA holds our kept REQ or REP for the time
 * it asks (ib_resend.c cm_ib_mra).  A MAD for another process of the
 * host (two processes' sockets on one 4-tuple; a first REQ the
 * reuseport group gave us) is passed to it by its comm ID's prefix or
 * its service (ib_pass.c).  Not yet: LAP/APR, IPv6.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"
#include "env.h"
#include "ib_mad.h"
#include "ib_link.h"
#include "ib_stat.h"
#include "roce.h" /* provider/wire/roce.h: the RoCEv2 codec */
#include "util.h" /* provider/lib/util.h: container_of */

#define CM_IB_TIMEOUT 0x14 /* CM response timeouts: 4.3 s */
#define CM_IB_ACK_TO  0x13 /* the path's ACK timeout, as rxe's REQ */

static uint32_t ib_psn; /* our QP1's PSNs (lock held) */

static void mapped(uint8_t gid[16], const struct sockaddr_in *a)
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, &a->sin_addr, 4);
}

/* The largest IB MTU a RoCEv2 packet of which fits the link's MTU (the
 * kernel's iboe_get_mtu: GRH/IP, UDP, BTH, XRC, AtomicETH, ICRC). */
static uint8_t ib_mtu_of(int fd)
{
	int mtu = 1500;
	socklen_t l = sizeof(mtu);

	if (getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &l))
		mtu = 1500;
	mtu -= 40 + 8 + 12 + 4 + 28 + 4;
	if (mtu >= 4096)
		return IBV_MTU_4096;
	if (mtu >= 2048)
		return IBV_MTU_2048;
	if (mtu >= 1024)
		return IBV_MTU_1024;
	return mtu >= 512 ? IBV_MTU_512 : IBV_MTU_256;
}

int cm_ib_udp_socket(const struct sockaddr_in *at, uint16_t port, bool reuse)
{
	struct sockaddr_in a = *at;
	int on = 1, df = IP_PMTUDISC_DO;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	a.sin_port = htons(port);
	if ((reuse &&
	     setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on))) ||
	    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof(df)) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/*
 * The receiving sockets, one per (source, destination) address pair of
 * the process, shared by its ids (perftest -R holds two connections to
 * one peer): bound to 4791, connected to the peer's QP1 port; a MAD goes
 * to the id its communication ID names (cm_ib_port_read).  An id holds a
 * reference (c->ib_port: index + 1) and a dup of the fd as c->sock, so
 * link.c sees a link; the shared fd is in epoll (CM_TAG_IB_PORT | index).
 */
#define CM_IB_PORTS 64
static struct {
	int fd;	  /* -1 with refs 0 */
	int refs; /* ids holding it */
	uint32_t src, dst;
} ports[CM_IB_PORTS];

static int port_get(const struct cm_id *c)
{
	struct sockaddr_in peer = *cm_ib_dst(c);
	struct epoll_event ev = {.events = EPOLLIN};
	int free_at = -1, fd;

	for (int i = 0; i < CM_IB_PORTS; i++) {
		if (ports[i].refs &&
		    ports[i].src == cm_ib_src(c)->sin_addr.s_addr &&
		    ports[i].dst == peer.sin_addr.s_addr) {
			ports[i].refs++;
			return i;
		}
		if (!ports[i].refs && free_at < 0)
			free_at = i;
	}
	if (free_at < 0)
		return -EMFILE; /* 64 peers at once: said by the caller */
	fd = cm_ib_udp_socket(cm_ib_src(c), SV_ROCE_PORT, true);
	if (fd < 0)
		return fd;
	peer.sin_port = htons(CM_IB_QP1_SPORT);
	ev.data.u64 = CM_TAG_IB_PORT | (uint64_t)free_at;
	if (connect(fd, (struct sockaddr *)&peer, sizeof(peer)) ||
	    epoll_ctl(cm_core.epfd, EPOLL_CTL_ADD, fd, &ev)) {
		int e = -errno;

		close(fd);
		return e;
	}
	ports[free_at].fd = fd;
	ports[free_at].refs = 1;
	ports[free_at].src = cm_ib_src(c)->sin_addr.s_addr;
	ports[free_at].dst = peer.sin_addr.s_addr;
	return free_at;
}

void cm_ib_port_hold(int i)
{
	ports[i].refs++;
}

void cm_ib_port_put(int i)
{
	if (--ports[i].refs)
		return;
	epoll_ctl(cm_core.epfd, EPOLL_CTL_DEL, ports[i].fd, NULL);
	close(ports[i].fd);
	ports[i].fd = -1;
}

/*
 * The ids a MAD can be for, indexed (issue 27 item 3: route, req_known
 * and to_listener walked every live id for each MAD, under
 * cm_core.lock): by our communication ID on its receiving socket, by the
 * peer's with its address, and the listeners by service (port space and
 * port).  Keys may repeat (a peer picks its IDs; two listeners on one
 * port at two addresses): a lookup looks at each id of its key and
 * checks every field of it, as the walk did.  ids_looked counts the ids
 * looked at, for SOFTVERBS_DEBUG's exit line (say_counts).
 */
static struct cm_idtab by_lid, by_rid, by_service;
static uint64_t mads_routed, ids_looked;

static uint64_t lid_key(int port, uint32_t lid)
{
	return (uint64_t)(port + 1) << 32 | lid;
}

static uint64_t rid_key(uint32_t addr, uint32_t rid)
{
	return (uint64_t)addr << 32 | rid;
}

static uint64_t service_key(uint16_t ps, uint16_t port)
{
	return (uint64_t)ps << 16 | port;
}

#define ID_OF(n, member) container_of(n, struct cm_id, member)

/* The peer's communication ID is rid (0: not known), indexed. */
static int set_rid(struct cm_id *c, uint32_t rid)
{
	cm_idtab_remove(&by_rid, &c->ib_by_rid);
	c->ib_rid = rid;
	if (!rid)
		return 0;
	c->ib_by_rid.key = rid_key(cm_ib_dst(c)->sin_addr.s_addr, rid);
	return cm_idtab_insert(&by_rid, &c->ib_by_rid);
}

/* Our communication ID for c on its socket: the process's prefix (its
 * top 16 bits, no other process's on the host: ib_pass.c), the rest
 * random and odd, and no other id's on that socket (a MAD names one). */
static int pick_lid(struct cm_id *c)
{
	for (int tries = 0;; tries++) {
		if (getrandom(&c->ib_lid, sizeof(c->ib_lid), GRND_NONBLOCK) !=
		    sizeof(c->ib_lid))
			c->ib_lid = (uint32_t)cm_now_ms() ^
				    (uint32_t)c->serial << 8 ^ (uint32_t)tries;
		c->ib_lid = (uint32_t)cm_ib_pass_prefix() << 16 |
			    (c->ib_lid & 0xffff) | 1;
		c->ib_by_lid.key = lid_key(c->ib_port - 1, c->ib_lid);
		if (!cm_idtab_find(&by_lid, c->ib_by_lid.key) || tries >= 64)
			break;
	}
	return cm_idtab_insert(&by_lid, &c->ib_by_lid);
}

/* The id whose communication ID is lid on receiving socket i, or NULL. */
static struct cm_id *id_by_lid(int i, uint32_t lid)
{
	struct cm_idtab_node *n = cm_idtab_find(&by_lid, lid_key(i, lid));

	for (; n; n = cm_idtab_next(&by_lid, n)) {
		struct cm_id *c = ID_OF(n, ib_by_lid);

		ids_looked++;
		if (c->ib && c->ib_port == i + 1 && c->ib_lid == lid)
			return c;
	}
	return NULL;
}

/* SOFTVERBS_DEBUG, at exit, in a process that used the IB CM: what its
 * lookups and resend walks cost (the lock only if free: exit may come
 * while another thread holds it). */
__attribute__((destructor)) static void say_counts(void)
{
	uint64_t walks, visits;

	if (!cm_debug || pthread_mutex_trylock(&cm_core.lock))
		return;
	cm_ib_resend_counts(&walks, &visits);
	if (mads_routed || walks)
		cm_log("IB CM: %llu MADs routed, %llu ids looked at; %llu "
		       "resend walks, %llu ids visited\n",
		       (unsigned long long)mads_routed,
		       (unsigned long long)ids_looked,
		       (unsigned long long)walks, (unsigned long long)visits);
	pthread_mutex_unlock(&cm_core.lock);
}

int cm_ib_connect(struct cm_id *c)
{
	int i = port_get(c), ret;

	if (i < 0) {
		fprintf(stderr,
			"softverbs rdmacm: the IB CM's socket to a peer: %s\n",
			strerror(-i));
		return i;
	}
	cm_idtab_remove(&by_lid, &c->ib_by_lid); /* a link made again */
	set_rid(c, 0);
	c->ib_port = i + 1;
	c->sock = fcntl(ports[i].fd, F_DUPFD_CLOEXEC, 0);
	if (c->sock < 0) {
		ret = -errno;
		cm_link_close(c);
		return ret;
	}
	c->ib_mtu = ib_mtu_of(ports[i].fd);
	c->ib_send_fd = cm_ib_udp_socket(cm_ib_src(c), CM_IB_QP1_SPORT, true);
	if (c->ib_send_fd < 0) {
		ret = c->ib_send_fd;
		cm_link_close(c);
		return ret;
	}
	ret = pick_lid(c);
	if (ret)
		cm_link_close(c);
	return ret;
}

void cm_ib_close(struct cm_id *c)
{
	/* by_rid keeps it until it is freed (cm_ib_forget): a REQ that
	 * comes again for a connection closed since is still not new */
	cm_idtab_remove(&by_lid, &c->ib_by_lid);
	cm_idtab_remove(&by_service, &c->ib_by_service);
	cm_ib_pass_unlisten(c);
	if (c->destroying && c->ib_again && c->state == CM_DREQ_SENT &&
	    c->ib_again_state == CM_DREQ_SENT && c->ib_port &&
	    c->ib_send_fd >= 0)
		cm_ib_orphan_adopt(c);
	if (c->ib_port)
		cm_ib_port_put(c->ib_port - 1);
	c->ib_port = 0;
	cm_ib_again_drop(c);
	if (c->ib_send_fd >= 0)
		close(c->ib_send_fd);
	c->ib_send_fd = -1;
	if (c->ib_listen_fd >= 0) {
		epoll_ctl(cm_core.epfd, EPOLL_CTL_DEL, c->ib_listen_fd, NULL);
		close(c->ib_listen_fd);
	}
	c->ib_listen_fd = -1;
}

/* The REQ of conn.c's record m: rdma_cm's header then its data. */
static int req_of(struct cm_id *c, const struct cm_msg *m, struct cm_mad *d)
{
	d->service_id = cm_mad_service_id((uint16_t)c->id.ps,
					  ntohs(cm_ib_dst(c)->sin_port));
	d->ca_guid = be64toh(cm_core.dev_attr.node_guid);
	d->qpn = m->qpn;
	d->psn = m->psn;
	d->resp_res = m->resp_res;
	d->init_depth = m->init_depth;
	d->remote_cm_timeout = d->local_cm_timeout = CM_IB_TIMEOUT;
	d->transport = m->qp_type == IBV_QPT_UC ? CM_MAD_TS_UC : CM_MAD_TS_RC;
	d->retry = m->retry > 7 ? 7 : m->retry;
	d->rnr_retry = m->rnr_retry > 7 ? 7 : m->rnr_retry;
	d->max_cm_retries = 15;
	d->srq = m->srq ? 1 : 0;
	d->pkey = 0xffff;
	d->mtu = c->ib_mtu;
	d->primary.local_lid = d->primary.remote_lid = 0xffff;
	mapped(d->primary.local_gid, cm_ib_src(c));
	mapped(d->primary.remote_gid, cm_ib_dst(c));
	d->primary.hop_limit = 64;
	d->primary.ack_timeout = CM_IB_ACK_TO;
	if (m->pdata_len > cm_mad_pdata_size(CM_MAD_REQ) - CM_MAD_CMA_HDR_SIZE)
		return -EINVAL;
	memcpy(d->pdata + CM_MAD_CMA_HDR_SIZE, m->pdata, m->pdata_len);
	return cm_mad_cma_put(d->pdata, &c->id.route.addr.src_addr,
			      &c->id.route.addr.dst_addr);
}

/* conn.c's record m as its MAD: 0, or -errno. */
static int mad_of(struct cm_id *c, const struct cm_msg *m, struct cm_mad *d)
{
	memset(d, 0, sizeof(*d));
	d->method = CM_MAD_METHOD_SEND;
	d->tid = c->ib_lid;
	d->local_id = c->ib_lid;
	d->remote_id = c->ib_rid;
	switch (m->type) {
	case CM_MSG_REQ:
		d->attr = CM_MAD_REQ;
		return req_of(c, m, d);
	case CM_MSG_REP:
		/* the PSN we receive at (conn.c's remote.psn: swapped at
		 * the REQ, cm_ib_accept) */
		d->attr = CM_MAD_REP;
		d->qpn = m->qpn;
		d->psn = c->remote.psn;
		d->resp_res = m->resp_res;
		d->init_depth = m->init_depth;
		d->target_ack_delay = 15; /* as rxe's */
		d->rnr_retry = m->rnr_retry > 7 ? 7 : m->rnr_retry;
		d->srq = m->srq ? 1 : 0;
		d->ca_guid = be64toh(cm_core.dev_attr.node_guid);
		memcpy(d->pdata, m->pdata, m->pdata_len);
		return 0;
	case CM_MSG_RTU:
		d->attr = CM_MAD_RTU;
		return 0;
	case CM_MSG_DREQ:
		d->attr = CM_MAD_DREQ;
		d->qpn = c->remote.qpn;
		return 0;
	case CM_MSG_DREP:
		d->attr = CM_MAD_DREP;
		return 0;
	case CM_MSG_SIDR_REQ:
	case CM_MSG_SIDR_REP:
		return cm_ib_sidr_mad(c, m, d);
	case CM_MSG_REJ:
		d->attr = CM_MAD_REJ;
		d->msg_kind = c->state == CM_REP_RCVD		     ? 1
			      : c->listen && c->state <= CM_REQ_RCVD ? 0
								     : 2;
		d->reason = m->status;
		memcpy(d->pdata, m->pdata, m->pdata_len);
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

/* SOFTVERBS_CM_MAD_DROP's kind of attribute attr, or -1. */
static int drop_kind(uint16_t attr)
{
	switch (attr) {
	case CM_MAD_REQ:
	case CM_MAD_SIDR_REQ:
		return SV_CM_DROP_REQ;
	case CM_MAD_REP:
	case CM_MAD_SIDR_REP:
		return SV_CM_DROP_REP;
	case CM_MAD_RTU:
		return SV_CM_DROP_RTU;
	case CM_MAD_REJ:
		return SV_CM_DROP_REJ;
	case CM_MAD_DREQ:
		return SV_CM_DROP_DREQ;
	case CM_MAD_DREP:
		return SV_CM_DROP_DREP;
	default:
		return -1;
	}
}

/* Lock held: true if SOFTVERBS_CM_MAD_DROP says this MAD is lost. */
static bool drop_now(uint16_t attr)
{
	static unsigned int left[SV_CM_DROP_KINDS];
	static bool loaded;
	int k = drop_kind(attr);

	if (!loaded) {
		const char *v = sv_env_str(SV_ENV_CM_MAD_DROP);

		loaded = true;
		if (v && sv_env_cm_drop_parse(v, left))
			memset(left, 0, sizeof(left));
	}
	if (k < 0 || !left[k])
		return false;
	left[k]--;
	return true;
}

/* The 256 bytes of a MAD to the peer's QP1 as a RoCEv2 UD SEND (a new
 * PSN each time, the same transaction ID when resent, as the kernel's
 * MAD layer resends). */
int cm_ib_send_raw(int fd, const struct sockaddr_in *src,
		   const struct sockaddr_in *dst,
		   const uint8_t mad[CM_MAD_SIZE], uint16_t attr, bool again,
		   const void *c)
{
	uint8_t pkt[CM_MAD_SIZE + SV_ROCE_HDR_MAX + 8];
	struct sv_roce_pkt p = {.opcode = SV_IB_UD | SV_IB_SEND_ONLY,
				.pkey = 0xffff,
				.dqpn = 1,
				.psn = ib_psn++ & 0xffffff,
				.qkey = CM_MAD_QKEY,
				.src_qpn = 1,
				.payload = mad,
				.len = CM_MAD_SIZE};
	struct sv_roce_ip ip = {.sport = CM_IB_QP1_SPORT};
	struct sockaddr_in to = *dst;
	int n;

	if (drop_now(attr)) {
		cm_log("id %p: IB CM MAD 0x%04x %s: lost on purpose "
		       "(SOFTVERBS_CM_MAD_DROP)\n",
		       c, attr, again ? "resent" : "sent");
		cm_ib_count(again ? CM_IB_RESENT : CM_IB_SENT);
		cm_ib_count(CM_IB_DROP_FAULT);
		return 0;
	}
	mapped(ip.src, src);
	mapped(ip.dst, dst);
	n = sv_roce_build(pkt, sizeof(pkt), &p, &ip);
	if (n < 0)
		return n;
	to.sin_port = htons(SV_ROCE_PORT);
	if (sendto(fd, pkt, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&to,
		   sizeof(to)) != n) {
		cm_ib_count(CM_IB_SEND_ERR);
		return -errno;
	}
	cm_ib_count(again ? CM_IB_RESENT : CM_IB_SENT);
	cm_log("id %p: IB CM MAD 0x%04x %s (comm IDs 0x%08x 0x%08x)\n", c, attr,
	       again ? "resent" : "sent",
	       be32toh(*(const uint32_t *)(mad + CM_MAD_HDR_SIZE)),
	       be32toh(*(const uint32_t *)(mad + CM_MAD_HDR_SIZE + 4)));
	return 0;
}

static int send_bytes(struct cm_id *c, const uint8_t mad[CM_MAD_SIZE],
		      uint16_t attr, bool again)
{
	return cm_ib_send_raw(c->ib_send_fd, cm_ib_src(c), cm_ib_dst(c), mad,
			      attr, again, c);
}

static int send_mad(struct cm_id *c, const struct cm_mad *d)
{
	uint8_t mad[CM_MAD_SIZE];
	int ret = cm_mad_encode(d, mad);

	if (!ret)
		ret = send_bytes(c, mad, d->attr, false);
	if (!ret)
		cm_ib_again_arm(c, d->attr, mad);
	if (!ret && d->attr == CM_MAD_SIDR_REP)
		cm_ib_sidr_keep(c, mad); /* for its REQ again */
	if (!ret && d->attr == CM_MAD_DREP)
		cm_ib_timewait_arm(c, mad); /* for its DREQ again */
	return ret;
}

int cm_ib_send(struct cm_id *c, const struct cm_msg *m)
{
	struct cm_mad d;
	int ret = mad_of(c, m, &d);

	return ret ? ret : send_mad(c, &d);
}

/* The peer's MAD d as conn.c's record r: false if the active side takes
 * no such MAD, or it names other IDs. */
static bool record_of(struct cm_id *c, const struct cm_mad *d, struct cm_msg *r)
{
	memset(r, 0, sizeof(*r));
	r->magic = CM_MAGIC;
	r->version = CM_VERSION;
	r->qp_type = c->id.qp_type;
	mapped(r->gid, cm_ib_dst(c));
	if (d->attr == CM_MAD_SIDR_REP) /* its request ID is ours */
		return cm_ib_sidr_record(c, d, r);
	if (d->remote_id != c->ib_lid ||
	    (c->ib_rid && d->attr != CM_MAD_REJ && d->local_id != c->ib_rid))
		return false;
	switch (d->attr) {
	case CM_MAD_REP:
		/* the IB CM's starting PSNs are what each side receives at
		 * (the kernel's CM: the active side's rq_psn is its REQ's, its
		 * sq_psn the REP's), conn.c's what each sends from: swap */
		r->type = CM_MSG_REP;
		r->qpn = d->qpn;
		r->psn = c->psn;
		c->psn = d->psn;
		r->resp_res = d->resp_res;
		r->init_depth = d->init_depth;
		r->rnr_retry = d->rnr_retry;
		r->srq = d->srq;
		r->pdata_len = CM_PDATA_REP;
		memcpy(r->pdata, d->pdata, CM_PDATA_REP);
		return true;
	case CM_MAD_REJ:
		r->type = CM_MSG_REJ;
		r->status = d->reason > 255 ? 255 : (uint8_t)d->reason;
		r->pdata_len = CM_PDATA_REJ;
		memcpy(r->pdata, d->pdata, CM_PDATA_REJ);
		return true;
	case CM_MAD_DREQ:
		r->type = CM_MSG_DREQ;
		return d->qpn == (c->id.qp ? c->id.qp->qp_num : 0);
	case CM_MAD_DREP:
		r->type = CM_MSG_DREP;
		return true;
	case CM_MAD_RTU:
		r->type = CM_MSG_RTU;
		return c->listen != NULL;
	default:
		return false;
	}
}

/* A REP again: our RTU was lost (answer it again) or the peer resends. */
static bool rep_again(struct cm_id *c, const struct cm_mad *d)
{
	struct cm_mad rtu = {.method = CM_MAD_METHOD_SEND,
			     .attr = CM_MAD_RTU,
			     .tid = c->ib_lid,
			     .local_id = c->ib_lid,
			     .remote_id = c->ib_rid};

	if (d->attr != CM_MAD_REP || !c->ib_rid || d->local_id != c->ib_rid)
		return false;
	cm_ib_count(CM_IB_DUP_REP);
	if (c->state == CM_ESTABLISHED)
		send_mad(c, &rtu);
	return true;
}

bool cm_ib_take(const uint8_t *b, ssize_t n, struct cm_mad *d)
{
	struct sv_roce_pkt p;
	enum sv_roce_verdict rv;
	enum cm_mad_verdict v;

	cm_ib_count(CM_IB_RECV);
	rv = sv_roce_parse(b, (size_t)n, NULL, &p);
	if (rv != SV_ROCE_OK || p.opcode != (SV_IB_UD | SV_IB_SEND_ONLY) ||
	    p.dqpn != 1 || p.qkey != CM_MAD_QKEY || p.src_qpn != 1) {
		cm_ib_count(CM_IB_DROP_PKT);
		cm_log("IB CM: not a GSI MAD (%s): dropped\n",
		       rv < SV_ROCE_VERDICTS ? sv_roce_verdict_names[rv] : "?");
		return false;
	}
	v = cm_mad_decode(p.payload, p.len, d);
	if (v != CM_MAD_OK) {
		cm_ib_count(CM_IB_DROP_MAD);
		cm_log("IB CM: MAD dropped: %s\n", cm_mad_verdict_name(v));
		return false;
	}
	return true;
}

/* Lock held: MAD d to c; false if c was freed. */
static bool deliver(struct cm_id *c, const struct cm_mad *d)
{
	struct cm_msg r;

	if (rep_again(c, d))
		return true;
	if (d->attr == CM_MAD_MRA) {
		cm_ib_mra(c, d); /* its hold (ib_resend.c) */
		return true;
	}
	if (!record_of(c, d, &r)) {
		cm_ib_count(CM_IB_DROP_NOT_OURS);
		cm_log("id %p: MAD 0x%04x for comm IDs 0x%08x 0x%08x "
		       "not ours: dropped\n",
		       (void *)c, d->attr, d->remote_id, d->local_id);
		return true;
	}
	if (d->attr == CM_MAD_REP && set_rid(c, d->local_id)) {
		cm_log("id %p: no memory to index the REP's comm ID: "
		       "dropped\n",
		       (void *)c);
		set_rid(c, 0);
		return true; /* resent: it may fit then */
	}
	return !cm_conn_recv(c, &r);
}

void cm_ib_forget(struct cm_id *c)
{
	cm_idtab_remove(&by_rid, &c->ib_by_rid);
}

/* ids read their MADs from the shared socket (cm_ib_port_read) */
void cm_ib_read(struct cm_id *c)
{
	(void)c;
}

static void new_child(struct cm_id *l, const struct cm_mad *d,
		      const struct sockaddr_in *from);

/* A REQ or SIDR REQ (rx) to the listener of its service (which checks
 * the rest); one for no listener of ours goes to the process that
 * listens (ib_pass.c); a SIDR REQ nobody here listens for may be
 * answered "unsupported" (ib_sidr.c); else dropped. */
static void to_listener(const struct cm_mad *d, const struct cm_ib_rx *rx)
{
	struct sockaddr_in from4 = {.sin_family = AF_INET,
				    .sin_addr.s_addr = rx->from};
	const struct sockaddr_in *from = &from4;
	uint16_t ps, port;
	struct cm_idtab_node *n = NULL;

	mads_routed++;
	if (!cm_mad_service_split(d->service_id, &ps, &port))
		n = cm_idtab_find(&by_service, service_key(ps, port));
	for (; n; n = cm_idtab_next(&by_service, n)) {
		struct cm_id *c = ID_OF(n, ib_by_service);

		ids_looked++;
		if (c->state != CM_LISTEN || c->ib_listen_fd < 0 ||
		    ps != (uint16_t)c->id.ps ||
		    port != ntohs(cm_ib_src(c)->sin_port))
			continue;
		new_child(c, d, from);
		return;
	}
	if (cm_ib_pass(rx))
		return;
	if (d->attr == CM_MAD_SIDR_REQ) {
		if (!cm_ib_sidr_again(d, from))
			cm_ib_sidr_unserved(d, from);
		return;
	}
	cm_ib_count(CM_IB_DROP_NOT_OURS);
	cm_log("a REQ whose service is not a listener's of this process (not "
	       "this listener's): dropped\n");
}

/* The id MAD d on port i is for: ours by communication ID (a SIDR REP:
 * by its request ID), or for a REQ (a second connection from a peer we
 * have one with) the listener of its service. */
static void route(int i, const struct cm_mad *d, const struct cm_ib_rx *rx)
{
	uint32_t to = d->attr == CM_MAD_SIDR_REP ? d->local_id : d->remote_id;
	struct cm_id *c;

	if (d->attr == CM_MAD_REQ || d->attr == CM_MAD_SIDR_REQ) {
		to_listener(d, rx);
		return;
	}
	mads_routed++;
	c = id_by_lid(i, to);
	if (c) {
		deliver(c, d);
		return;
	}
	if (cm_ib_orphan_answered(i, d) || cm_ib_timewait_answered(i, d) ||
	    cm_ib_pass(rx)) /* another process's id on this 4-tuple */
		return;
	cm_ib_count(CM_IB_DROP_NOT_OURS);
	cm_log("IB CM MAD 0x%04x for comm ID 0x%08x: no such id: dropped\n",
	       d->attr, to);
}

void cm_ib_port_read(int i)
{
	uint8_t b[2048];
	struct cm_mad d;

	while (i >= 0 && i < CM_IB_PORTS && ports[i].refs) {
		ssize_t n = recv(ports[i].fd, b, sizeof(b), MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) /* ICMP: the peer's port is closed; MADs go on */
			continue;
		if (cm_ib_take(b, n, &d)) {
			struct cm_ib_rx rx = {b, (size_t)n, ports[i].dst,
					      ports[i].src, false};

			route(i, &d, &rx);
		}
	}
}

void cm_ib_passed(const struct cm_mad *d, const struct cm_ib_rx *rx,
		  bool to_service)
{
	int i;

	if (to_service) {
		to_listener(d, rx); /* rx->passed: never passed again */
		return;
	}
	for (i = 0; i < CM_IB_PORTS; i++)
		if (ports[i].refs && ports[i].src == rx->to &&
		    ports[i].dst == rx->from)
			break;
	if (i < CM_IB_PORTS) {
		route(i, d, rx);
		return;
	}
	cm_ib_count(CM_IB_DROP_NOT_OURS);
	cm_log("IB CM MAD 0x%04x passed to us: we talk to no such peer: "
	       "dropped\n",
	       d->attr);
}

int cm_ib_listen(struct cm_id *l)
{
	struct epoll_event ev = {.events = EPOLLIN,
				 .data.u64 = l->serial | CM_TAG_IB_LISTEN};
	int fd = cm_ib_udp_socket(cm_ib_src(l), SV_ROCE_PORT, true), on = 1;

	/* where a datagram was sent, its TOS and TTL: UD data passed on
	 * (ib_door.c) shows them */
	if (fd >= 0 &&
	    (setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on)) ||
	     setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof(on)) ||
	     setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &on, sizeof(on)))) {
		close(fd);
		fd = -errno;
	}
	if (fd < 0) {
		fprintf(stderr,
			"softverbs rdmacm: UDP port 4791 for the IB CM's "
			"REQs: %s\n",
			strerror(-fd));
		return fd;
	}
	l->ib_by_service.key =
		service_key((uint16_t)l->id.ps, ntohs(cm_ib_src(l)->sin_port));
	if (cm_idtab_insert(&by_service, &l->ib_by_service)) {
		close(fd);
		return -ENOMEM;
	}
	if (epoll_ctl(cm_core.epfd, EPOLL_CTL_ADD, fd, &ev)) {
		int e = -errno;

		cm_idtab_remove(&by_service, &l->ib_by_service);
		close(fd);
		return e;
	}
	l->ib_listen_fd = fd;
	cm_ib_pass_listen(l); /* said if not: l works without */
	return 0;
}

/* A REQ's addresses, believed only where the datagram agrees: the
 * active side is where it came from (its GID and cma_hdr say so too),
 * and the passive side an address of ours the listener is bound to. */
static bool req_addrs(const struct cm_id *l, const struct cm_mad *d,
		      const struct sockaddr_in *from,
		      struct sockaddr_storage *src,
		      struct sockaddr_storage *dst)
{
	uint16_t ps, port;
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)src;
	const struct sockaddr_in *d4 = (const struct sockaddr_in *)dst;
	uint8_t g[16];

	if (cm_mad_service_split(d->service_id, &ps, &port) ||
	    ps != (uint16_t)l->id.ps || port != ntohs(cm_ib_src(l)->sin_port) ||
	    cm_mad_cma_get(d->pdata, htons(port), src, dst) ||
	    src->ss_family != AF_INET ||
	    s4->sin_addr.s_addr != from->sin_addr.s_addr)
		return false;
	if (!cm_addr_is_local((const struct sockaddr *)dst))
		return false;
	if (d->attr == CM_MAD_REQ) { /* a SIDR REQ has no path */
		mapped(g, s4);
		if (memcmp(g, d->primary.local_gid, 16))
			return false;
		mapped(g, d4);
		if (memcmp(g, d->primary.remote_gid, 16))
			return false;
	}
	return cm_ib_src(l)->sin_addr.s_addr == INADDR_ANY ||
	       cm_ib_src(l)->sin_addr.s_addr == d4->sin_addr.s_addr;
}

/* A REQ resent (its REP lost, or not yet there): an id already has its
 * IDs, or NULL. */
static struct cm_id *req_known(const struct cm_mad *d,
			       const struct sockaddr_in *from)
{
	struct cm_idtab_node *n = cm_idtab_find(
		&by_rid, rid_key(from->sin_addr.s_addr, d->local_id));

	for (; n; n = cm_idtab_next(&by_rid, n)) {
		struct cm_id *o = ID_OF(n, ib_by_rid);

		ids_looked++;
		if (o->ib && o->ib_rid == d->local_id &&
		    cm_is_ud(o) == (d->attr == CM_MAD_SIDR_REQ) &&
		    cm_ib_dst(o)->sin_addr.s_addr == from->sin_addr.s_addr)
			return o;
	}
	return NULL;
}

/* conn.c's REQ (or SIDR REQ) record of d, for child c. */
static void req_record(struct cm_id *c, const struct cm_mad *d,
		       struct cm_msg *r)
{
	memset(r, 0, sizeof(*r));
	r->magic = CM_MAGIC;
	r->version = CM_VERSION;
	r->type = CM_MSG_REQ;
	r->qp_type = d->transport == CM_MAD_TS_UC ? IBV_QPT_UC : IBV_QPT_RC;
	mapped(r->gid, cm_ib_dst(c));
	cm_addr_to_wire(&c->id.route.addr.dst_addr, &r->src);
	cm_addr_to_wire(&c->id.route.addr.src_addr, &r->dst);
	if (d->attr == CM_MAD_SIDR_REQ) { /* a service, no QP of its own */
		r->type = CM_MSG_SIDR_REQ;
		r->qp_type = IBV_QPT_UD;
		r->pdata_len = CM_PDATA_SIDR_REQ;
		memcpy(r->pdata, d->pdata + CM_MAD_CMA_HDR_SIZE,
		       CM_PDATA_SIDR_REQ);
		return;
	}
	r->qpn = d->qpn;
	/* conn.c's remote.psn is what we receive at: ours to choose and
	 * say in the REP; the REQ's is what we send from (cm_ib_accept) */
	if (getrandom(&r->psn, sizeof(r->psn), GRND_NONBLOCK) != sizeof(r->psn))
		r->psn = (uint32_t)cm_now_ms();
	r->psn &= 0xffffff;
	r->resp_res = d->resp_res;
	r->init_depth = d->init_depth;
	r->retry = d->retry;
	r->rnr_retry = d->rnr_retry;
	r->srq = d->srq;
	r->pdata_len = CM_PDATA_REQ;
	memcpy(r->pdata, d->pdata + CM_MAD_CMA_HDR_SIZE, CM_PDATA_REQ);
}

/* Lock held: REQ d from `from` to listener l: a child id with its own
 * QP1 sockets, reported by conn.c as CONNECT_REQUEST. */
static void new_child(struct cm_id *l, const struct cm_mad *d,
		      const struct sockaddr_in *from)
{
	struct sockaddr_storage src, dst;
	struct cm_msg r;
	struct cm_id *c;
	uint32_t send_psn = d->psn;

	if (!req_addrs(l, d, from, &src, &dst)) {
		cm_ib_count(CM_IB_DROP_NOT_OURS);
		cm_log("id %p: a REQ whose service or addresses are not this "
		       "listener's: dropped\n",
		       (void *)l);
		return;
	}
	if (d->attr == CM_MAD_SIDR_REQ && cm_ib_sidr_again(d, from))
		return; /* answered: its REP again */
	c = req_known(d, from);
	if (c) { /* resent: never a second connection; its REP again */
		cm_ib_count(CM_IB_DUP_REQ);
		if (c->state == CM_REP_SENT && c->ib_again &&
		    c->ib_again_state == CM_REP_SENT)
			send_bytes(c, c->ib_again, CM_MAD_REP, true);
		return;
	}
	c = cm_id_new_child(l);
	if (!c)
		return;
	c->state = CM_REQ_WAIT;
	c->ib = true;
	memcpy(&c->id.route.addr.src_storage, &dst, sizeof(dst));
	memcpy(&c->id.route.addr.dst_storage, &src, sizeof(src));
	if (cm_ib_connect(c)) {
		cm_id_free(c);
		return;
	}
	if (set_rid(c, d->local_id)) { /* its REQ again finds it */
		cm_id_free(c);
		return;
	}
	c->ib_tid = d->tid;
	c->ib_flow = d->primary.flow_label;
	if (d->attr == CM_MAD_REQ && d->mtu < c->ib_mtu)
		c->ib_mtu = d->mtu;
	req_record(c, d, &r);
	if (cm_conn_recv(c, &r))
		return;	   /* refused (and freed) */
	c->psn = send_psn; /* the REQ's: what the active side receives at */
}

void cm_ib_accept(struct cm_id *l)
{
	uint8_t b[SV_UD_DOOR_BUF];
	struct cm_mad d;

	while (l->ib_listen_fd >= 0 && l->state == CM_LISTEN) {
		struct sockaddr_in from;
		uint32_t dst;
		uint8_t tos, ttl;
		ssize_t n = cm_ib_listen_recv(l->ib_listen_fd, b, sizeof(b),
					      &from, &dst, &tos, &ttl);

		if (n < 0 && n != -2 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0)
			continue;
		/* UD data to a QP the door would have had (ib_door.c) */
		if (cm_ib_door_pass(b, (size_t)n, sizeof(b), &from, dst, tos,
				    ttl))
			continue;
		if (!cm_ib_take(b, n, &d))
			continue;
		struct cm_ib_rx rx = {b, (size_t)n, from.sin_addr.s_addr, dst,
				      false};

		if (d.attr != CM_MAD_REQ && d.attr != CM_MAD_SIDR_REQ) {
			if (cm_ib_pass(&rx)) /* another process's comm ID */
				continue;
			cm_ib_count(CM_IB_DROP_NOT_OURS);
			cm_log("id %p: MAD 0x%04x at the listener: dropped\n",
			       (void *)l, d.attr);
			continue;
		}
		to_listener(&d, &rx); /* this one's, or another's */
	}
}
