// SPDX-License-Identifier: MIT
/*
 * The RoCEv2 transport's link: its sockets and rings at RTR, its runs
 * (read what came, send what the engine published), and its ops table
 * (link.h).  roce_link.h says how the sockets find each link its
 * packets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "env.h"
#include "progress.h"
#include "roce_priv.h"

/* The counters of a link that has no QP's. */
static struct sv_qp_stats no_stats;

/* An address as the ICRC's pseudo header has it (IPv4-mapped). */
static void ip_of(const union sv_sockaddr *a, uint8_t out[16])
{
	memset(out, 0, 16);
	if (a->sa.sa_family == AF_INET6) {
		memcpy(out, &a->in6.sin6_addr, 16);
		return;
	}
	out[10] = out[11] = 0xff;
	memcpy(out + 12, &a->in.sin_addr, 4);
}

static void set_port(union sv_sockaddr *a, uint16_t port)
{
	if (a->sa.sa_family == AF_INET6)
		a->in6.sin6_port = htons(port);
	else
		a->in.sin_port = htons(port);
}

/* Whether the peer has the address we send from (me: ours, or the
 * unspecified one the kernel chooses for). */
static bool one_address(const union sv_sockaddr *me,
			const union sv_sockaddr *peer)
{
	union sv_sockaddr a = *me;
	uint8_t x[16], y[16];
	socklen_t len = sizeof(a);
	bool any = a.sa.sa_family == AF_INET6
			   ? IN6_IS_ADDR_UNSPECIFIED(&a.in6.sin6_addr)
			   : a.in.sin_addr.s_addr == htonl(INADDR_ANY);

	if (any) { /* the kernel's choice: ask it, as a connect does */
		int fd = socket(peer->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC,
				0);
		bool ok = fd >= 0 &&
			  !connect(fd, &peer->sa,
				   peer->sa.sa_family == AF_INET6
					   ? sizeof(peer->in6)
					   : sizeof(peer->in)) &&
			  !getsockname(fd, &a.sa, &len);

		if (fd >= 0)
			close(fd);
		if (!ok)
			return false;
	}
	ip_of(&a, x);
	ip_of(peer, y);
	return !memcmp(x, y, sizeof(x));
}

/* GRO on rx_fd if we send with GSO (r->gso): rx_fd may be another
 * link's of this process, GRO already on, whose bundles are read as
 * bundles; a relayed link's connection has none.  -ENOMEM. */
static int rx_gro(struct sv_roce *r)
{
	int on = 1;
	socklen_t len = sizeof(on);

	if (r->gso && !r->relayed)
		setsockopt(r->rx_fd, SOL_UDP, UDP_GRO, &on, sizeof(on));
	r->gro = !r->relayed &&
		 !getsockopt(r->rx_fd, SOL_UDP, UDP_GRO, &on, &len) && on;
	if (r->gro && !r->gbuf) {
		r->gbuf = malloc((size_t)SV_ROCE_GRO_MSGS * SV_ROCE_GRO_BUF);
		if (!r->gbuf)
			return -ENOMEM;
	}
	return 0;
}

/* The two sockets: rx bound to our :4791 and connected to the peer's
 * source port for the pair (the flow label's, if the address vector has
 * one, as rxe's); tx bound to that port on our address, IP ID
 * 0 and DF (IP_PMTUDISC_DO), so our ICRC is right (roce.h).  A pair
 * whose ends have one address sends each way from its own port
 * (sv_roce_sport_way).  -errno. */
static int open_sockets(struct sv_roce *r, const union sv_sockaddr *src,
			uint32_t flow_label)
{
	union sv_sockaddr me = *src, peer = r->dst;
	uint16_t sport = (uint16_t)sv_env_uint(SV_ENV_ROCE_SPORT);
	uint16_t tx_port, rx_port;
	socklen_t len = sizeof(me);
	int pmtu = IP_PMTUDISC_DO, err, gso;
	socklen_t glen = sizeof(gso);

	if (me.sa.sa_family != peer.sa.sa_family) {
		memset(&me, 0, sizeof(me));
		me.sa.sa_family = peer.sa.sa_family;
	}
	tx_port = rx_port = sport;
	if (!sport) {
		sport = flow_label ? sv_roce_fl_sport(flow_label)
				   : sv_roce_sport(r->my_qpn, r->peer_qpn);
		tx_port = rx_port = sport;
		if (one_address(&me, &peer)) {
			tx_port = sv_roce_sport_way(sport, r->my_qpn,
						    r->peer_qpn);
			rx_port = sv_roce_sport_way(sport, r->peer_qpn,
						    r->my_qpn);
		}
	}
	set_port(&me, SV_ROCE_PORT);
	set_port(&peer, rx_port);
	err = sv_roce_share_open(r, &me, &peer, rx_port);
	if (err)
		return err;
	if (r->relayed)
		sv_dbg("qp %06x: RoCEv2: another process has our four-tuple "
		       "(port %u): it relays ours\n",
		       r->my_qpn, rx_port);
	/* our address, as the kernel chose it (a relayed link's rx_fd is
	 * a unix socket: as the route to the peer gives it) */
	if (r->relayed)
		me = r->key_me;
	else if (getsockname(r->rx_fd, &me.sa, &len))
		return -errno;
	set_port(&me, tx_port);
	r->tx_fd = sv_roce_udp_socket(&me);
	if (r->tx_fd < 0)
		return r->tx_fd;
	if (me.sa.sa_family == AF_INET6)
		setsockopt(r->tx_fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu,
			   sizeof(pmtu));
	else
		setsockopt(r->tx_fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu,
			   sizeof(pmtu));
	/* UDP GSO and GRO where the kernel has them (4.18, 5.0 on) and the
	 * user allows */
	r->gso = sv_env_bool(SV_ENV_ROCE_GSO) &&
		 !getsockopt(r->tx_fd, SOL_UDP, UDP_SEGMENT, &gso, &glen);
	err = rx_gro(r);
	if (err)
		return err;
	ip_of(&me, r->ip.src);
	ip_of(&r->dst, r->ip.dst);
	r->ip.sport = tx_port;
	r->ip.dport = SV_ROCE_PORT;
	memcpy(r->rip.src, r->ip.dst, 16);
	memcpy(r->rip.dst, r->ip.src, 16);
	r->rip.sport = rx_port;
	r->rip.dport = SV_ROCE_PORT;
	r->rip.id_span = SV_ROCE_ID_ANY; /* rxe's IDs too (roce.h) */
	r->rip.memo = &r->idmemo;
	r->ip.hmemo = &r->hmemo;
	r->rip.hmemo = &r->rhmemo;
	return 0;
}

static int local_ring(struct sv_ring *g, uint64_t size, uint32_t qpn)
{
	int fd, err = sv_ring_create(g, size, 0, qpn, &fd);

	if (!err)
		close(fd); /* private: the mapping keeps it */
	return err;
}

/* Our four private rings: the engine's on both sides of us. */
static int make_rings(struct sv_link *l, const struct sv_link_conf *c)
{
	uint64_t rsp = c->ring_size / 4 < SV_RSP_RING_MIN ? SV_RSP_RING_MIN
							  : c->ring_size / 4;
	int err = local_ring(&l->rx, c->ring_size, c->my_qpn);

	if (!err && (err = local_ring(&l->rsp_rx, rsp, c->my_qpn)))
		sv_ring_unmap(&l->rx);
	if (!err && (err = local_ring(&l->tx, c->ring_size, c->peer_qpn))) {
		sv_ring_unmap(&l->rx);
		sv_ring_unmap(&l->rsp_rx);
	}
	if (!err && (err = local_ring(&l->rsp_tx, rsp, c->peer_qpn))) {
		sv_ring_unmap(&l->rx);
		sv_ring_unmap(&l->rsp_rx);
		sv_ring_unmap(&l->tx);
	}
	if (err)
		return err;
	/* what arrives goes into rx and rsp_rx, or is dropped: those never
	 * start over early, which leaves less room for a while (ring.c) */
	l->rx.no_rewind = l->rsp_rx.no_rewind = true;
	/* our copies of the peer's headers: nobody sleeps there */
	atomic_store(&l->tx.hdr->rx_sleep, 0);
	atomic_store(&l->rsp_tx.hdr->rx_sleep, 0);
	l->rx_ready = l->tx_ready = true;
	return 0;
}

static void free_roce(struct sv_roce *r)
{
	sv_roce_share_close(r);
	if (r->rx_fd >= 0)
		close(r->rx_fd);
	if (r->tx_fd >= 0)
		close(r->tx_fd);
	free(r->obuf);
	free(r->ibuf);
	free(r->gbuf);
	free(r->hold);
	free(r);
}

static int roce_prepare(struct sv_link *l, const struct sv_link_conf *c)
{
	struct sv_roce *r;
	int err;

	if (c->mtu < 256 || c->mtu > SV_ROCE_MAX_PMTU ||
	    (c->mtu & (c->mtu - 1)))
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->rx_fd = r->tx_fd = -1;
	r->ctx = c->ctx;
	r->pfd = c->pfd_conn;
	r->stats = c->stats ? c->stats : &no_stats;
	r->my_qpn = c->my_qpn;
	r->peer_qpn = c->peer_qpn;
	r->mtu = c->mtu;
	r->tp = c->uc ? SV_IB_UC : c->xrc ? SV_IB_XRC : SV_IB_RC;
	r->epsn = c->rq_psn & SV_PSN_MASK;
	r->dst = *c->dst;
	set_port(&r->dst, SV_ROCE_PORT);
	/* the batches' slots: headers, one MTU, pad and ICRC (and, to
	 * receive, room to see a longer datagram as one) */
	r->oslot = SV_ROCE_HDR_MAX + c->mtu + 8;
	r->islot = r->oslot + SV_ROCE_RX_SLACK;
	r->omax = sv_roce_out_slots(c->mtu);
	r->obuf = malloc((size_t)r->omax * r->oslot);
	r->ibuf = malloc((size_t)SV_ROCE_BATCH * r->islot);
	err = r->obuf && r->ibuf ? open_sockets(r, c->src, c->flow_label)
				 : -ENOMEM;
	if (!err)
		err = make_rings(l, c);
	if (err) {
		free_roce(r);
		return err;
	}
	l->peer_qpn = c->peer_qpn;
	l->train_max = 16 * c->mtu;
	l->priv.p = r;
	l->ops = &sv_roce_link_ops;
	sv_progress_add(r->ctx, r->pfd, r->rx_fd);
	return 0;
}

void sv_roce_orphaned(struct sv_roce *r)
{
	bool quiet = r->pfd->quiet;
	int err;

	sv_progress_del(r->ctx, r->pfd);
	err = sv_roce_share_rejoin(r);
	if (!err && rx_gro(r)) {
		int off = 0;

		/* no memory for bundles: none (a reader of GRO reads single
		 * datagrams too) */
		setsockopt(r->rx_fd, SOL_UDP, UDP_GRO, &off, sizeof(off));
		r->gro = false;
	}
	sv_dbg("qp %06x: RoCEv2: the process that relayed our four-tuple "
	       "let go: %s\n",
	       r->my_qpn,
	       err	    ? strerror(-err)
	       : r->relayed ? "another relays it"
			    : "ours");
	if (err)
		fprintf(stderr,
			"softverbs: qp %06x: RoCEv2: the process that relayed "
			"our QP pair's datagrams let go of them, and we cannot "
			"take them over (%s): the link hears nothing more\n",
			r->my_qpn, strerror(-err));
	if (r->rx_fd >= 0)
		sv_progress_add(r->ctx, r->pfd, r->rx_fd);
	if (quiet)
		sv_progress_quiet(r->ctx, r->pfd, true);
}

/* No message comes for a RoCE link on the QP's socket: a RoCE peer has
 * no hello. */
static int roce_take(struct sv_link *l, int sock, const struct sv_hello *h,
		     int *fds, int nfds, const void *body, uint32_t my_qpn,
		     uint32_t expect)
{
	(void)l, (void)sock, (void)h, (void)fds, (void)nfds, (void)body;
	(void)my_qpn, (void)expect;
	return -EPROTO;
}

static int roce_step(struct sv_link *l, int got, uint32_t my_qpn,
		     uint32_t expect, uint64_t now)
{
	(void)l, (void)got, (void)my_qpn, (void)expect, (void)now;
	return 0;
}

/* Up from RTR: what came in, then what we owe. */
static enum sv_link_state roce_run(struct sv_link *l, uint32_t peer_qpn,
				   uint64_t ack_timeout_ns,
				   uint64_t down_max_ns, uint64_t now)
{
	(void)peer_qpn, (void)ack_timeout_ns, (void)down_max_ns, (void)now;
	if (sv_roce_of(l))
		sv_roce_of(l)->more = false; /* the engine runs next */
	sv_roce_read_in(l);
	sv_roce_flush(l);
	return SV_LINK_UP;
}

/* The requester gives up an RNR'd packet: the peer holds none of ours
 * (IBA: an RNR-NAKed packet is dropped by its responder). */
static bool roce_rnr_abort(struct sv_link *l)
{
	(void)l;
	return true;
}

static uint64_t roce_next_ns(const struct sv_link *l, uint64_t now)
{
	const struct sv_roce *r = sv_roce_of(l);

	if (r && (sv_roce_held(r) ||
		  atomic_load_explicit(&r->mail_n, memory_order_relaxed)))
		return now + SV_ROCE_RETRY_NS; /* room for it by then; what
						* another member read for us */
	if (r && r->more)
		return now;   /* the engine fills what we emptied */
	if (r && r->hold_len) /* SOFTVERBS_FAULTS reorder */
		return r->retry_ns && r->retry_ns < sv_roce_hold_due(r)
			       ? r->retry_ns
			       : sv_roce_hold_due(r);
	return r && r->retry_ns ? r->retry_ns : UINT64_MAX;
}

static void roce_run_begin(struct sv_link *l)
{
	if (sv_roce_of(l))
		sv_roce_of(l)->defer = true;
}

static void roce_run_end(struct sv_link *l)
{
	struct sv_roce *r = sv_roce_of(l);

	if (!r)
		return;
	r->defer = false;
	if (sv_roce_held(r)) /* the completer made room */
		sv_roce_read_in(l);
	sv_roce_flush(l);
}

/* Datagrams wait unread while the app drives the QP (it polls its
 * memory for a write, say): the thread runs it (link.h, sv_readers). */
static bool roce_stalled(struct sv_link *l)
{
	struct sv_roce *r = sv_roce_of(l);
	int n = 0;

	if (!r || !sv_readers_look(&r->rd))
		return false;
	if (atomic_load_explicit(&r->mail_n, memory_order_relaxed))
		n = 1; /* another member read it for us (share.c) */
	else if (ioctl(r->rx_fd, SIOCINQ, &n))
		n = 0;
	if (n <= 0)
		return false;
	r->rd.loud = true; /* the app polls its memory, not the CQ */
	return true;
}

/* While the app drives the QP its polls read the socket: the thread
 * stops waking for each datagram (as over TCP), unless arrivals were
 * seen waiting unread (loud). */
static void roce_quiet(struct sv_link *l, bool quiet)
{
	struct sv_roce *r = sv_roce_of(l);
	int n = 0;

	if (!r)
		return;
	if (!quiet && r->pfd->quiet && !r->rd.loud &&
	    (atomic_load_explicit(&r->mail_n, memory_order_relaxed) ||
	     (!ioctl(r->rx_fd, SIOCINQ, &n) && n > 0)))
		r->rd.loud = true; /* left waiting when the app stopped */
	sv_progress_quiet(r->ctx, r->pfd, quiet && !r->rd.loud);
}

static void roce_set_lazy(struct sv_link *l, bool lazy)
{
	if (sv_roce_of(l))
		sv_roce_of(l)->lazy = lazy;
}

static void roce_close(struct sv_link *l, uint32_t my_qpn, bool bye)
{
	struct sv_roce *r = sv_roce_of(l);

	(void)my_qpn;
	if (!r)
		return;
	if (bye) { /* our last ACK: the peer's last send completes */
		r->defer = false;
		r->lazy = false;
		r->retry_ns = 0;
		sv_roce_flush(l);
	}
	sv_progress_del(r->ctx, r->pfd);
	free_roce(r);
	l->priv.p = NULL;
}

const struct sv_link_ops sv_roce_link_ops = {
	.name = "roce",
	.lossy = true,
	.msg_type = SV_MSG_ROCE,
	.prepare = roce_prepare,
	.take = roce_take,
	.step = roce_step,
	.run = roce_run,
	.flush = sv_roce_flush,
	.rnr_abort = roce_rnr_abort,
	.next_ns = roce_next_ns,
	.run_begin = roce_run_begin,
	.run_end = roce_run_end,
	.set_lazy = roce_set_lazy,
	.owed = sv_roce_owed,
	.stalled = roce_stalled,
	.quiet = roce_quiet,
	.close = roce_close,
};
