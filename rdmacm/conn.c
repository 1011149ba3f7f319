// SPDX-License-Identifier: MIT
/*
 * Connection set-up and tear-down, the IB CM's exchange between the two
 * processes: REQ → REP → RTU, REJ, DREQ → DREP, and UD's SIDR REQ → REP.
 * The program's calls (rdma_connect/accept/reject/establish/disconnect/
 * notify) and the messages link.c reads (cm_conn_recv, cm_conn_lost,
 * cm_conn_incoming) meet here under cm_core.lock; each turns into the
 * events librdmacm's man pages describe.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cm.h"
#include "util.h" /* provider/lib/util.h: container_of */

/* How long a connect waits for an explicitly bound port to listen, and
 * for any port (the time hardware's route lookup and REQ take: perftest
 * -R re-creates its listener between two connections). */
#define CM_LISTEN_WAIT_MS  2000
#define CM_LISTEN_GRACE_MS 250
/* Lock held: a message from c with its address and QP filled in. */
static void msg_init(struct cm_id *c, struct cm_msg *m, uint8_t type)
{
	union ibv_gid gid;
	int idx;

	memset(m, 0, sizeof(*m));
	m->magic = CM_MAGIC;
	m->version = CM_VERSION;
	m->type = type;
	m->qp_type = c->id.qp_type;
	m->qpn = c->id.qp ? c->id.qp->qp_num : 0;
	m->psn = c->psn;
	m->lid = cm_core.lid;
	if (!cm_addr_gid(&c->id.route.addr.src_addr, &gid, &idx))
		memcpy(m->gid, gid.raw, 16);
	m->resp_res = c->resp_res;
	m->init_depth = c->init_depth;
	m->retry = c->retry;
	m->rnr_retry = c->rnr_retry;
	m->ece_vendor = c->local_ece.vendor_id;
	m->ece_options = c->local_ece.options;
}

static void msg_pdata(struct cm_msg *m, const void *p, uint8_t len)
{
	if (p && len) {
		memcpy(m->pdata, p, len);
		m->pdata_len = len;
	}
}

static uint32_t new_psn(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)random();
	return v & 0xffffff;
}

/* Lock held: an event for c whose private data is m's, padded to the
 * size IB reports for its message type (the kernel's rdma_cm does). */
static struct cm_event *event_with(struct cm_id *c,
				   enum rdma_cm_event_type type, int status,
				   const struct cm_msg *m)
{
	struct cm_event *e = cm_event_new(c, type, status);
	uint8_t len;

	if (!e || !m)
		return e;
	len = (uint8_t)cm_pdata_limit(m->type);
	memcpy(e->pdata, m->pdata, m->pdata_len);
	if (cm_is_ud(c)) {
		e->ev.param.ud.private_data = e->pdata;
		e->ev.param.ud.private_data_len = len;
	} else {
		struct rdma_conn_param *p = &e->ev.param.conn;

		p->private_data = e->pdata;
		p->private_data_len = len;
		p->responder_resources = m->init_depth;
		p->initiator_depth = m->resp_res;
		p->flow_control = m->flow_control;
		p->retry_count = m->retry;
		p->rnr_retry_count = m->rnr_retry;
		p->srq = m->srq;
		p->qp_num = m->qpn;
	}
	return e;
}

static void queue(struct cm_id *c, enum rdma_cm_event_type type, int status,
		  const struct cm_msg *m)
{
	struct cm_event *e = event_with(c, type, status, m);

	if (e)
		cm_event_queue(c, e);
	else
		cm_log("id %p: no memory for %s: lost\n", (void *)c,
		       rdma_event_str(type));
}

/* Lock held: the end of c's attempt, with the event that says why. */
static void fail(struct cm_id *c, enum rdma_cm_event_type type, int status,
		 const struct cm_msg *m)
{
	cm_link_close(c);
	c->state = CM_FAILED;
	queue(c, type, status, m);
}

struct cm_id *cm_conn_incoming(struct cm_id *l, int fd)
{
	struct cm_id *c = cm_id_new_child(l);

	if (!c) {
		close(fd);
		return NULL;
	}
	c->state = CM_REQ_WAIT;
	if (cm_link_adopt(c, fd)) {
		cm_id_free(c);
		return NULL;
	}
	return c;
}

/*
 * Whether listener l takes request m by QP type, as the kernel's cma
 * does: a SIDR REQ only on a UD listener, a REQ of the listener's own
 * type, an XRC initiator's on an XRC target's listener (the kernel sees
 * a REQ of transport XRC as XRC_TGT; ibv_qp_type's XRC_RECV).
 */
static bool req_type_ok(const struct cm_id *l, const struct cm_msg *m)
{
	unsigned int want = m->qp_type;

	if (m->type == CM_MSG_SIDR_REQ)
		return l->id.qp_type == IBV_QPT_UD;
	if (want == IBV_QPT_XRC_SEND)
		want = IBV_QPT_XRC_RECV;
	return l->id.qp_type != IBV_QPT_UD &&
	       (unsigned int)l->id.qp_type == want;
}

/* Lock held: a REQ (or SIDR REQ) on a passive id; true if c was freed. */
static bool on_req(struct cm_id *c, const struct cm_msg *m)
{
	struct cm_id *l = c->listen;
	bool ud = m->type == CM_MSG_SIDR_REQ;
	struct sockaddr_storage peer, local;
	struct cm_msg rej;
	struct cm_event *e;

	if (!l || l->destroying) {
		cm_id_free(c);
		return true;
	}
	if (!req_type_ok(l, m) || l->pending >= l->backlog) {
		/* the kernel's cma refuses a request of another QP type
		 * than its listener's (cma_check_req_qp_type), and ucma one
		 * over the backlog: the active side sees a consumer reject
		 * (a SIDR one: status 2, IB_SIDR_REJECT) */
		if (!req_type_ok(l, m))
			cm_log("id %p: a %s REQ of QP type %u to a listener of "
			       "type %u: rejected\n",
			       (void *)l, ud ? "SIDR" : "CM",
			       (unsigned int)m->qp_type,
			       (unsigned int)l->id.qp_type);
		msg_init(c, &rej, ud ? CM_MSG_SIDR_REP : CM_MSG_REJ);
		rej.status = ud ? 2 : CM_REJ_CONSUMER_DEFINED;
		cm_link_send(c, &rej);
		cm_id_free(c);
		return true;
	}
	c->remote = *m;
	c->have_remote = true;
	cm_addr_from_wire(&m->src, &peer);
	memcpy(&c->id.route.addr.dst_storage, &peer, sizeof(peer));
	cm_addr_from_wire(&m->dst, &local);
	/* a wildcard listener: this connection's local address is the one
	 * the active side reached */
	memcpy(&c->id.route.addr.src_storage, &local, sizeof(local));
	cm_route_fill(c);
	c->resp_res = m->init_depth;
	c->init_depth = m->resp_res;
	c->psn = new_psn();
	c->state = CM_REQ_RCVD;
	l->pending++;
	e = event_with(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m);
	if (!e) {
		l->pending--;
		cm_id_free(c);
		return true;
	}
	e->ev.listen_id = &l->id;
	if (ud) {
		e->ev.param.ud.qp_num = m->qpn;
		e->ev.param.ud.qkey = RDMA_UDP_QKEY;
		cm_ud_ah_attr(c, &e->ev.param.ud.ah_attr);
	}
	cm_event_queue(c, e);
	return false;
}

/* Lock held: SIDR REP on an active UD id. */
static void on_sidr_rep(struct cm_id *c, const struct cm_msg *m)
{
	struct cm_event *e;

	cm_link_close(c);
	if (m->status) {
		/* kernel cma: UNREACHABLE with the SIDR status */
		c->state = CM_FAILED;
		queue(c, RDMA_CM_EVENT_UNREACHABLE, m->status, m);
		return;
	}
	/* what the data path will use: a QP that can be one (not QP0/1)
	 * and a qkey a sender may use (IBA 10.2.5: not a controlled one) */
	if (m->qpn < 2 || (m->qkey & 0x80000000u)) {
		cm_log("id %p: SIDR REP with QPN %u qkey 0x%x: refused\n",
		       (void *)c, m->qpn, m->qkey);
		c->state = CM_FAILED;
		queue(c, RDMA_CM_EVENT_UNREACHABLE, -EPROTO, NULL);
		return;
	}
	c->remote = *m;
	c->have_remote = true;
	c->state = CM_UD_DONE;
	e = event_with(c, RDMA_CM_EVENT_ESTABLISHED, 0, m);
	if (!e)
		return;
	e->ev.param.ud.qp_num = m->qpn;
	e->ev.param.ud.qkey = m->qkey;
	cm_ud_ah_attr(c, &e->ev.param.ud.ah_attr);
	cm_event_queue(c, e);
}

/* Lock held: the peer ended the connection (DREQ, DREP or its end). */
static void disconnected(struct cm_id *c)
{
	cm_link_close(c);
	c->state = CM_DISCONNECTED;
	queue(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL);
}

bool cm_conn_recv(struct cm_id *c, const struct cm_msg *m)
{
	bool unreported = c->state == CM_REQ_WAIT;
	struct cm_msg drep;

	cm_log("id %p (%s): message %u\n", (void *)c, cm_state_names[c->state],
	       m->type);
	switch (c->state) {
	case CM_REQ_WAIT:
		if (m->type == CM_MSG_REQ || m->type == CM_MSG_SIDR_REQ)
			return on_req(c, m);
		break;
	case CM_REQ_SENT:
		if (m->type == CM_MSG_REP && !cm_is_ud(c)) {
			c->remote = *m;
			c->have_remote = true;
			c->resp_res = m->init_depth;
			c->init_depth = m->resp_res;
			c->state = CM_REP_RCVD;
			queue(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, m);
			return false;
		}
		if (m->type == CM_MSG_SIDR_REP && cm_is_ud(c)) {
			on_sidr_rep(c, m);
			return false;
		}
		if (m->type == CM_MSG_REJ) {
			cm_qp_to_err(c);
			fail(c, RDMA_CM_EVENT_REJECTED, m->status, m);
			return false;
		}
		break;
	case CM_REP_SENT:
		if (m->type == CM_MSG_RTU) {
			c->state = CM_ESTABLISHED;
			queue(c, RDMA_CM_EVENT_ESTABLISHED, 0, NULL);
			return false;
		}
		if (m->type == CM_MSG_REJ) { /* the active side's QP failed */
			fail(c, RDMA_CM_EVENT_REJECTED, m->status, m);
			return false;
		}
		break;
	case CM_ESTABLISHED:
	case CM_DREQ_SENT:
	case CM_REP_RCVD:
		if (m->type == CM_MSG_DREQ) {
			/* the kernel answers a DREQ itself */
			msg_init(c, &drep, CM_MSG_DREP);
			cm_link_send(c, &drep);
		}
		if (m->type == CM_MSG_DREQ || m->type == CM_MSG_DREP) {
			if (c->state == CM_REP_RCVD)
				c->peer_gone = true;
			else
				disconnected(c);
			return false;
		}
		break;
	default:
		break;
	}
	cm_log("id %p (%s): unexpected message %u: dropping the link\n",
	       (void *)c, cm_state_names[c->state], m->type);
	cm_conn_lost(c);
	return unreported; /* cm_conn_lost freed it */
}

void cm_conn_lost(struct cm_id *c)
{
	cm_link_close(c);
	switch (c->state) {
	case CM_REQ_WAIT:
		cm_id_free(c); /* never reported: nobody holds it */
		return;
	case CM_REQ_RCVD:
	case CM_REP_RCVD:
		c->peer_gone = true; /* said when the program answers */
		return;
	case CM_REQ_SENT:
	case CM_REP_SENT:
		/* IB: the REQ's or REP's retries run out */
		c->state = CM_FAILED;
		queue(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
		return;
	case CM_ESTABLISHED:
	case CM_DREQ_SENT:
		disconnected(c);
		return;
	default:
		return;
	}
}

/* The program's connection parameters against the device's limits
 * (rdma-core's ucma_valid_param) and the message's private data. */
static int check_param(struct cm_id *c, const struct rdma_conn_param *p,
		       unsigned int pdata_max)
{
	if (c->id.ps == RDMA_PS_TCP && !c->id.qp && !p)
		return EINVAL;
	if (!p)
		return 0;
	if (p->private_data_len > pdata_max ||
	    (p->private_data_len && !p->private_data))
		return EINVAL;
	if (c->id.ps != RDMA_PS_TCP)
		return 0;
	if (p->responder_resources != RDMA_MAX_RESP_RES &&
	    p->responder_resources > cm_core.dev_attr.max_qp_rd_atom)
		return EINVAL;
	if (p->initiator_depth != RDMA_MAX_INIT_DEPTH &&
	    p->initiator_depth > cm_core.dev_attr.max_qp_init_rd_atom)
		return EINVAL;
	return 0;
}

/*
 * Lock held: c's REQ to its destination's listener.  Nobody listening
 * is REJECTED with status 8, as IB's CM answers (rdma-core reports "invalid
 * service ID"); but a port an id has bound explicitly is waited for, up
 * to CM_LISTEN_WAIT_MS (REQ_RETRY, driven by the CM thread): programs
 * send the port to their peer between rdma_bind_addr and rdma_listen,
 * and on hardware the route lookup gives them the time to listen.  Any
 * other port is retried for CM_LISTEN_GRACE_MS before the REJECTED.
 */
static void connect_result(struct cm_id *c, int ret)
{
	if (ret == -ECONNREFUSED && cm_now_ms() < c->retry_until_ms &&
	    (cm_now_ms() < c->grace_until_ms || cm_link_dst_bound(c))) {
		if (c->state != CM_REQ_RETRY) {
			c->state = CM_REQ_RETRY;
			cm_conn_timed(c);
			cm_link_kick();
		}
		return;
	}
	if (ret == -ECONNREFUSED) {
		fail(c, RDMA_CM_EVENT_REJECTED, CM_REJ_INVALID_SERVICE_ID,
		     NULL);
		return;
	}
	if (!ret && !c->connecting) { /* else when its TCP connect ends */
		ret = cm_link_send(c, &c->req);
		if (!ret) {
			c->rep_until_ms = cm_now_ms() + cm_core.rep_wait_ms;
			cm_link_kick(); /* the CM thread's timeout sees it */
		}
	}
	if (ret)
		fail(c, RDMA_CM_EVENT_UNREACHABLE, ret, NULL);
	else
		c->state = CM_REQ_SENT;
	cm_conn_timed(c); /* a REP's deadline, or the TCP connect's */
}

static void try_connect(struct cm_id *c)
{
	connect_result(c, cm_link_connect(c));
}

/* Lock held: c's TCP connect ended (0 or -errno): the REQ goes now, or
 * nobody listening is retried or REJECTED as on one host. */
void cm_conn_link_up(struct cm_id *c, int err)
{
	if (c->state == CM_REQ_SENT)
		connect_result(c, err);
	else if (err)
		cm_link_close(c);
}

/* True once now is at or past until; else the earlier of *next and
 * until is the thread's next look. */
static bool past(uint64_t until, uint64_t now, uint64_t *next)
{
	if (now >= until)
		return true;
	if (until < *next)
		*next = until;
	return false;
}

/* Whether c has something for cm_conn_retry_all: a retry, or a
 * deadline it looks at (the tests below, one each). */
static bool has_timer(const struct cm_id *c)
{
	if (c->state == CM_REQ_RETRY)
		return true;
	if (c->state == CM_REQ_SENT && !c->connecting && c->rep_until_ms)
		return true;
	if (c->state == CM_DREQ_SENT && c->rep_until_ms)
		return true;
	return c->deadline_ms && c->sock >= 0 &&
	       (c->connecting || c->state == CM_REQ_WAIT || c->auth);
}

void cm_conn_timed(struct cm_id *c)
{
	cm_timed_arm(&cm_core.timed, &c->timed);
}

/* Lock held: c's retry, or its deadline if past (else *next lowered to
 * it).  True if c was freed. */
static bool run_timer(struct cm_id *c, uint64_t now, uint64_t *next)
{
	if (c->state == CM_REQ_RETRY) {
		try_connect(c);
		if (c->state == CM_REQ_RETRY)
			*next = now + 1;
	}
	if (c->state == CM_REQ_SENT && !c->connecting && c->rep_until_ms) {
		if (past(c->rep_until_ms, now, next)) {
			cm_log("id %p: no answer to the REQ in %u ms\n",
			       (void *)c, cm_core.rep_wait_ms);
			fail(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
		}
		return false;
	}
	if (c->state == CM_DREQ_SENT && c->rep_until_ms) {
		if (past(c->rep_until_ms, now, next)) {
			cm_log("id %p: no DREP in %u ms\n", (void *)c,
			       CM_DREP_WAIT_MS);
			disconnected(c);
		}
		return false;
	}
	if (!c->deadline_ms || c->sock < 0 ||
	    !(c->connecting || c->state == CM_REQ_WAIT || c->auth))
		return false;
	if (!past(c->deadline_ms, now, next))
		return false;
	cm_log("id %p (%s): TCP link past its deadline\n", (void *)c,
	       cm_state_names[c->state]);
	if (c->state == CM_REQ_WAIT) {
		cm_id_free(c);
		return true;
	}
	cm_link_close(c);
	if (c->state == CM_REQ_SENT)
		fail(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
	return false;
}

#ifdef SV_CM_CHECK_TIMED
/* Debug builds (SV_CM_CHECK_TIMED): every id with a timer is in the
 * set (a missed cm_conn_timed is an id that would never time out). */
static void check_timed(void)
{
	for (struct cm_id *c = cm_core.ids; c; c = c->next) {
		if (has_timer(c) && !c->timed.on) {
			fprintf(stderr,
				"softverbs rdmacm: id %p (%s) has a timer "
				"but is not in the timed set\n",
				(void *)c, cm_state_names[c->state]);
			abort();
		}
	}
}
#endif

/*
 * Lock held: retries ids waiting for a listener (each millisecond) and
 * ends TCP links past their deadline: a connect with no answer is
 * UNREACHABLE (-ETIMEDOUT), an accepted stream whose REQ did not come is
 * dropped unreported.  Walks only the ids with a timer (cm_core.timed),
 * each left there while it has one.  Returns the CM thread's epoll
 * timeout.
 */
int cm_conn_retry_all(void)
{
	uint64_t now = cm_now_ms(), next = UINT64_MAX;
	uint64_t adds = cm_core.timed.adds;
	struct cm_timed_node *t, *tn;

	cm_core.timed.walks++;
	for (t = cm_core.timed.head; t; t = tn) {
		struct cm_id *c = container_of(t, struct cm_id, timed);

		tn = t->next;
		cm_core.timed.visits++;
		if (!run_timer(c, now, &next) && !has_timer(c))
			cm_timed_disarm(&cm_core.timed, &c->timed);
	}
#ifdef SV_CM_CHECK_TIMED
	check_timed();
#endif
	if (cm_core.timed.adds != adds)
		return 0; /* armed ahead of the walk: look again at once */
	if (next == UINT64_MAX)
		return -1;
	return next > now ? (int)(next - now) : 0;
}

/* SOFTVERBS_DEBUG: what the CM thread's walks cost, said at exit (the
 * lock only if free: exit may come while another thread holds it). */
__attribute__((destructor)) static void say_walks(void)
{
	if (!cm_debug || pthread_mutex_trylock(&cm_core.lock))
		return;
	cm_log("CM thread: %llu walks of the timed ids, %llu ids visited\n",
	       (unsigned long long)cm_core.timed.walks,
	       (unsigned long long)cm_core.timed.visits);
	pthread_mutex_unlock(&cm_core.lock);
}

CM_EXPORT int rdma_connect(struct rdma_cm_id *id,
			   struct rdma_conn_param *conn_param)
{
	struct cm_id *c = cm_id_of(id);
	bool ud;
	int ret;

	if (!id)
		return cm_err(EINVAL);
	ud = cm_is_ud(c);
	ret = check_param(c, conn_param, ud ? CM_PDATA_SIDR_REQ : CM_PDATA_REQ);
	if (ret)
		return cm_err(ret);
	pthread_mutex_lock(&cm_core.lock);
	if (c->state != CM_ROUTE_RESOLVED) {
		pthread_mutex_unlock(&cm_core.lock);
		return cm_err(EINVAL);
	}
	c->init_depth =
		conn_param && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH
			? conn_param->initiator_depth
			: cm_core.dev_attr.max_qp_init_rd_atom;
	c->resp_res = conn_param && conn_param->responder_resources !=
					      RDMA_MAX_RESP_RES
			      ? conn_param->responder_resources
			      : cm_core.dev_attr.max_qp_rd_atom;
	c->retry = conn_param ? conn_param->retry_count : 7;
	c->rnr_retry = conn_param ? conn_param->rnr_retry_count : 7;
	c->psn = new_psn();
	msg_init(c, &c->req, ud ? CM_MSG_SIDR_REQ : CM_MSG_REQ);
	if (conn_param) {
		msg_pdata(&c->req, conn_param->private_data,
			  conn_param->private_data_len);
		c->req.flow_control = conn_param->flow_control;
		c->req.srq = conn_param->srq;
		if (!c->id.qp)
			c->req.qpn = conn_param->qp_num & 0xffffff;
	}
	if (c->id.qp)
		c->req.srq = !!c->id.qp->srq;
	cm_addr_to_wire(&id->route.addr.src_addr, &c->req.src);
	cm_addr_to_wire(&id->route.addr.dst_addr, &c->req.dst);
	c->retry_until_ms = cm_now_ms() + CM_LISTEN_WAIT_MS;
	c->grace_until_ms = cm_now_ms() + CM_LISTEN_GRACE_MS;
	try_connect(c);
	pthread_mutex_unlock(&cm_core.lock);
	return cm_complete(c);
}

/* From rdma_get_cm_event, no lock: an active id with a QP moves it to
 * RTR and RTS and sends the RTU; the program sees ESTABLISHED (or
 * CONNECT_ERROR), as with rdma-core. */
int cm_conn_process_rep(struct cm_id *c, struct cm_event *e)
{
	struct cm_msg m;
	int ret;

	if (!c->id.qp)
		return 0; /* the program calls rdma_establish */
	ret = cm_qp_to_rtr_rts(c);
	pthread_mutex_lock(&cm_core.lock);
	if (!ret && c->state == CM_REP_RCVD) {
		msg_init(c, &m, CM_MSG_RTU);
		cm_link_send(c, &m);
		c->state = CM_ESTABLISHED;
		e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
		if (c->peer_gone)
			disconnected(c);
	} else {
		msg_init(c, &m, CM_MSG_REJ);
		m.status = CM_REJ_CONSUMER_DEFINED;
		cm_link_send(c, &m);
		cm_link_close(c);
		c->state = CM_FAILED;
		e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
		e->ev.status = ret ? ret : -ECONNABORTED;
	}
	pthread_mutex_unlock(&cm_core.lock);
	return 0;
}

CM_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_id_of(id);
	struct cm_msg m;

	if (!id || id->qp)
		return cm_err(EINVAL);
	pthread_mutex_lock(&cm_core.lock);
	if (c->state != CM_REP_RCVD) {
		pthread_mutex_unlock(&cm_core.lock);
		return cm_err(EINVAL);
	}
	msg_init(c, &m, CM_MSG_RTU);
	cm_link_send(c, &m);
	c->state = CM_ESTABLISHED;
	if (c->peer_gone)
		disconnected(c);
	pthread_mutex_unlock(&cm_core.lock);
	return 0;
}

CM_EXPORT int rdma_accept(struct rdma_cm_id *id,
			  struct rdma_conn_param *conn_param)
{
	struct cm_id *c = cm_id_of(id);
	bool ud;
	struct cm_msg m;
	int ret;

	if (!id)
		return cm_err(EINVAL);
	ud = cm_is_ud(c);
	ret = check_param(c, conn_param, ud ? CM_PDATA_SIDR_REP : CM_PDATA_REP);
	if (ret)
		return cm_err(ret);
	pthread_mutex_lock(&cm_core.lock);
	if (c->state != CM_REQ_RCVD) {
		pthread_mutex_unlock(&cm_core.lock);
		return cm_err(EINVAL);
	}
	if (!conn_param || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH)
		c->init_depth =
			c->init_depth < cm_core.dev_attr.max_qp_init_rd_atom
				? c->init_depth
				: cm_core.dev_attr.max_qp_init_rd_atom;
	else
		c->init_depth = conn_param->initiator_depth;
	if (!conn_param || conn_param->responder_resources == RDMA_MAX_RESP_RES)
		c->resp_res = c->resp_res < cm_core.dev_attr.max_qp_rd_atom
				      ? c->resp_res
				      : cm_core.dev_attr.max_qp_rd_atom;
	else
		c->resp_res = conn_param->responder_resources;
	c->retry = c->remote.retry;
	c->rnr_retry = conn_param ? conn_param->rnr_retry_count : 7;
	pthread_mutex_unlock(&cm_core.lock);

	if (!ud) {
		ret = cm_qp_to_rtr_rts(c);
		if (ret)
			return cm_err(-ret);
	}

	pthread_mutex_lock(&cm_core.lock);
	if (c->state != CM_REQ_RCVD) { /* destroyed meanwhile is the
					* program's race; anything else */
		pthread_mutex_unlock(&cm_core.lock);
		return cm_err(EINVAL);
	}
	if (c->listen)
		c->listen->pending--;
	msg_init(c, &m, ud ? CM_MSG_SIDR_REP : CM_MSG_REP);
	if (conn_param) {
		msg_pdata(&m, conn_param->private_data,
			  conn_param->private_data_len);
		m.flow_control = conn_param->flow_control;
		if (!id->qp) {
			m.qpn = conn_param->qp_num & 0xffffff;
			m.srq = conn_param->srq;
		}
	}
	if (id->qp)
		m.srq = !!id->qp->srq;
	m.qkey = RDMA_UDP_QKEY;
	ret = c->peer_gone ? -EPIPE : cm_link_send(c, &m);
	if (ret) {
		cm_qp_to_err(c);
		fail(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
	} else if (ud) {
		cm_link_close(c);
		c->state = CM_UD_DONE;
	} else {
		c->state = CM_REP_SENT;
	}
	pthread_mutex_unlock(&cm_core.lock);
	if (ud) {
		if (cm_channel_of(id->channel)->sync && id->event) {
			rdma_ack_cm_event(id->event);
			id->event = NULL;
		}
		return 0;
	}
	return cm_complete(c);
}

static int reject(struct rdma_cm_id *id, const void *pdata, uint8_t len,
		  uint8_t reason)
{
	struct cm_id *c = cm_id_of(id);
	bool ud;
	struct cm_msg m;

	if (!id)
		return cm_err(EINVAL);
	ud = cm_is_ud(c);
	if (len > (ud ? CM_PDATA_SIDR_REP : CM_PDATA_REJ) || (len && !pdata))
		return cm_err(EINVAL);
	pthread_mutex_lock(&cm_core.lock);
	if (c->state != CM_REQ_RCVD) {
		pthread_mutex_unlock(&cm_core.lock);
		return cm_err(EINVAL);
	}
	if (c->listen)
		c->listen->pending--;
	msg_init(c, &m, ud ? CM_MSG_SIDR_REP : CM_MSG_REJ);
	m.status = ud ? 2 /* IB_SIDR_REJECT */ : reason;
	msg_pdata(&m, pdata, len);
	cm_link_send(c, &m);
	cm_link_close(c);
	c->state = CM_FAILED;
	pthread_mutex_unlock(&cm_core.lock);
	return 0;
}

CM_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			  uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len,
		      CM_REJ_CONSUMER_DEFINED);
}

CM_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			      uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, CM_REJ_VENDOR_OPTION);
}

CM_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_id_of(id);
	struct cm_msg m;
	int ret = 0;

	if (!id)
		return cm_err(EINVAL);
	cm_qp_to_err(c);
	pthread_mutex_lock(&cm_core.lock);
	switch (c->state) {
	case CM_ESTABLISHED:
	case CM_REP_SENT:
	case CM_REP_RCVD:
	case CM_REQ_SENT:
		msg_init(c, &m, CM_MSG_DREQ);
		if (cm_link_send(c, &m)) {
			disconnected(c); /* the peer is gone already */
		} else {
			/* IB: a DREQ whose DREP does not come ends in
			 * timewait, reported DISCONNECTED; a peer's host
			 * answers it even after its process ended, but a
			 * datagram link's peer is the process (ib_link.c) */
			c->state = CM_DREQ_SENT;
			c->rep_until_ms = cm_now_ms() + CM_DREP_WAIT_MS;
			cm_conn_timed(c);
			cm_link_kick();
		}
		break;
	case CM_DREQ_SENT:
	case CM_DISCONNECTED:
		break; /* the kernel's rdma_disconnect says 0 here too */
	default:
		ret = EINVAL;
	}
	pthread_mutex_unlock(&cm_core.lock);
	return ret ? cm_err(ret) : 0;
}

CM_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct cm_id *c = cm_id_of(id);

	if (!id || event != IBV_EVENT_COMM_EST)
		return cm_err(EINVAL);
	pthread_mutex_lock(&cm_core.lock);
	/* data arrived before the RTU: the connection is up (IBA 12.6.9) */
	if (c->state == CM_REP_SENT) {
		c->state = CM_ESTABLISHED;
		queue(c, RDMA_CM_EVENT_ESTABLISHED, 0, NULL);
	}
	pthread_mutex_unlock(&cm_core.lock);
	return 0;
}
