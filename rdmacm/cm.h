/* SPDX-License-Identifier: MIT */
/*
 * softverbs' librdmacm: the private side of rdma_cm_id and
 * rdma_event_channel, and what crosses the files of rdmacm/.  One lock
 * (cm_core.lock) guards every id, channel and queue: the connection
 * manager moves a few messages per connection, never data.
 */
#ifndef SV_CM_H
#define SV_CM_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "idtab.h"
#include "timed.h"
#include "wire.h"

#define CM_EXPORT __attribute__((visibility("default")))

/* What an id is doing; names in cm_state_names for logs. */
enum cm_state {
	CM_IDLE,
	CM_BOUND,	  /* rdma_bind_addr done */
	CM_ADDR_RESOLVED, /* rdma_resolve_addr done */
	CM_ROUTE_RESOLVED,
	CM_LISTEN,
	CM_REQ_WAIT,  /* passive: socket accepted, its REQ not yet read */
	CM_REQ_RCVD,  /* passive: CONNECT_REQUEST reported */
	CM_REQ_RETRY, /* active: the port is bound but not listening yet */
	CM_REQ_SENT,  /* active: REQ sent, waiting for REP/REJ */
	CM_REP_RCVD,  /* active: REP read, RTU not yet sent */
	CM_REP_SENT,  /* passive: accepted, waiting for RTU */
	CM_ESTABLISHED,
	CM_DREQ_SENT,
	CM_DISCONNECTED,
	CM_UD_DONE, /* UD: SIDR finished (either side) */
	CM_FAILED,  /* rejected, unreachable: only destroy is left */
	CM_NSTATES
};
extern const char *const cm_state_names[CM_NSTATES];

/* The shared secret's handshake on a TCP link (link_auth.c). */
enum cm_auth_state {
	CM_AUTH_OFF,   /* none (no secret, Unix link) or done */
	CM_AUTH_HELLO, /* our HELLO sent, the peer's awaited */
	CM_AUTH_PROOF, /* our PROOF sent, the peer's awaited */
};
#define CM_AUTH_NONCE 32

struct cm_channel {
	struct rdma_event_channel ch; /* ch.fd: an eventfd, readable while
				       * head is not NULL */
	struct cm_event *head, *tail; /* queued, not yet got */
	bool armed;		      /* the eventfd's count is 1 */
	bool sync;		      /* made for one id (no channel given) */
	bool dead;		      /* destroyed; waiters keep the memory */
	int waiters; /* threads in rdma_get_cm_event; the last one out of
		      * a dead channel frees it (channel.c) */
};

struct cm_event {
	struct rdma_cm_event ev; /* what the program sees: first */
	struct cm_id *owner;	 /* ev.id's private side */
	struct cm_event *next;
	bool held; /* DISCONNECTED: held back once (channel.c) */
	uint8_t pdata[CM_PDATA_MAX];
};

struct cm_mcast {
	struct cm_mcast *next;
	struct sockaddr_storage addr;
	union ibv_gid mgid;
	void *context;
	bool attached;
};

struct cm_id {
	struct rdma_cm_id id; /* what the program sees: first */
	uint64_t serial;      /* the CM thread's epoll handle (never reused) */
	struct cm_idtab_node by_serial; /* in cm_core.by_serial, key serial */
	struct cm_timed_node timed;	/* in cm_core.timed: a deadline armed */
	struct cm_id *next, *prev;	/* every live id (cm_core.ids) */
	enum cm_state state;
	int sock;	/* the CM link (SEQPACKET or TCP) or listener, or -1 */
	int port_fd;	/* holds the IP port in the kernel's space, or -1; a
			 * listener's accepts the TCP rendezvous */
	bool tcp;	/* the link is a TCP stream (another host, or
			 * SOFTVERBS_TRANSPORT=tcp) */
	bool ib;	/* the link is the IB CM's MADs on QP1 over
			 * RoCEv2 (ib_link.c): sock receives them */
	int ib_send_fd; /* ib: the unconnected socket they leave by */
	int ib_port;	/* ib: its receiving socket's index + 1, or 0 */
	uint32_t ib_lid, ib_rid; /* ib: our and the peer's comm IDs (SIDR:
				  * the active side's request ID) */
	uint64_t ib_tid;	 /* ib, SIDR passive: the REQ's transaction
				  * ID, which its REP repeats */
	uint8_t ib_mtu;		 /* ib: the path MTU (enum ibv_mtu) */
	uint32_t ib_flow;	 /* ib: the REQ's flow label (the QP's) */
	uint8_t *ib_again;	 /* ib: the REQ, REP or DREQ resent until
				  * answered (CM_MAD_SIZE bytes), or NULL */
	uint64_t ib_again_ms;	 /* ib: when it goes again */
	uint8_t ib_again_n;	 /* ib: resent so far */
	uint8_t ib_again_state;	 /* ib: the state that waits for its answer */
	/* ib_link.c's indexes (issue 27 item 3: each MAD walked every id) */
	struct cm_idtab_node ib_by_lid;	    /* ib: key its port and ib_lid */
	struct cm_idtab_node ib_by_rid;	    /* ib, ib_rid known: key the peer's
					     * address and ib_rid */
	struct cm_idtab_node ib_by_service; /* IB CM listener: key its
					     * port space and port */
	struct cm_timed_node ib_again_node; /* ib_again set: ib_resend.c's
					     * list, which it walks */
	int ib_listen_fd;  /* listener, SOFTVERBS_TRANSPORT=roce: UDP 4791,
			    * where the IB CM's REQs come, or -1 */
	int ib_pass_fd;	   /* IB CM listener: its service's abstract name,
			    * where other processes pass its REQs
			    * (ib_pass.c), or -1 */
	bool connecting;   /* active TCP: connect() not finished yet */
	bool port_watched; /* listener: its TCP socket is in the CM's epoll */
	int sidr_fd;	   /* UD listener: a TCP socket at its (UDP) port, which
			    * takes other hosts' SIDR REQs (link.c), or -1 */
	uint64_t deadline_ms;	/* TCP: connect or the REQ due by then */
	uint64_t dial_until_ms; /* active TCP: the first connect's deadline,
				 * which a dial again (link.c) keeps */
	uint8_t redials;	/* active TCP: dialled again so far */
	bool heard;		/* TCP: a byte came on this link */
	/* link.c's half-open streams: a listener's accepted links whose
	 * first record has not come, oldest first (at most CM_HALF_OPEN) */
	struct cm_id *half_head, *half_tail; /* listener */
	unsigned int nhalf;		     /* listener: how many */
	struct cm_id *half_of;		     /* child: its listener, while in
					      * that queue, else NULL */
	struct cm_id *half_next, *half_prev; /* child: in that queue */
	bool peer_checked; /* TCP: the other end's owner was checked */
	uint8_t auth;	   /* enum cm_auth_state */
	uint8_t nonce[2][CM_AUTH_NONCE]; /* the active side's, the passive's */
	int timeout_ms;	    /* rdma_resolve_addr's, for the TCP connect */
	unsigned int rlen;  /* TCP: bytes of rbuf read so far */
	struct cm_msg rbuf; /* TCP: the record being read */
	int bound_fd; /* says "bound here" to connecting ids (link.c), or -1 */
	struct cm_msg req;	 /* active: the REQ, kept for a retry */
	uint64_t retry_until_ms; /* active: REQ_RETRY gives up then */
	uint64_t grace_until_ms; /* active: retried without a bound port */
	uint64_t rep_until_ms;	 /* active: the REQ sent, no REP (or SIDR
				  * REP, or REJ) by then is UNREACHABLE */
	unsigned int unacked;	 /* events got and not acked */
	unsigned int queued;	 /* events queued and not got */
	pthread_cond_t acked;	 /* rdma_destroy_id / migrate wait here */
	bool destroying;
	bool peer_gone;	      /* its link saw EOF before it could report it */
	struct cm_id *listen; /* passive: the listener it came from */
	int backlog, pending; /* listener: CONNECT_REQUESTs not answered */
	uint8_t resp_res, init_depth, retry, rnr_retry;
	uint32_t psn;	      /* our starting PSN (send) */
	struct cm_msg remote; /* the peer's REQ or REP */
	bool have_remote;
	struct ibv_qp_init_attr *ep_qp_attr; /* rdma_create_ep listener */
	struct cm_mcast *mcasts;
	struct ibv_ece local_ece;
	bool reuseaddr;
	int afonly_int; /* RDMA_OPTION_ID_AFONLY, as IPV6_V6ONLY */
	uint8_t tos;
};

#define CM_GID_CACHE 16
/* How long rdma_disconnect's DREQ waits for its DREP before the id is
 * DISCONNECTED anyway (the IB CM's DREQ retries, then timewait) */
#define CM_DREP_WAIT_MS 2000u

struct cm_core {
	pthread_mutex_t lock;
	struct cm_id *ids;	   /* list head */
	struct cm_idtab by_serial; /* the same ids by serial (cm_id_find) */
	struct cm_timed timed;	   /* ids with a deadline (cm_conn_retry_all) */
	uint64_t next_serial;
	int epfd;     /* the CM thread's sockets */
	int wake_fd;  /* eventfd in epfd (serial 0): retries to run */
	int spare_fd; /* /dev/null, given up to accept (and drop) a caller
		       * when the process is out of fds (link.c) */
	bool thread_started;
	pthread_t thread;
	struct ibv_context *ctx; /* softverbs0, opened once */
	struct ibv_pd *pd;	 /* the default PD */
	struct ibv_xrcd *xrcd;	 /* XRC ids' domain (cm_xrcd), opened once */
	struct ibv_device_attr dev_attr;
	int gid_tbl_len;
	union ibv_gid gids[CM_GID_CACHE]; /* the table at start-up: asked
					   * per connection, it is costly */
	int ngids;
	uint16_t lid;
	bool force_tcp; /* SOFTVERBS_TRANSPORT=tcp: rendezvous over TCP on
			 * one host too */
	bool roce;	/* SOFTVERBS_TRANSPORT=roce: the IB CM's MADs to
			 * other hosts (ib_link.c) */
	unsigned int rep_wait_ms; /* how long a REQ waits for its answer
				   * (SOFTVERBS_CM_TIMEOUT_MS) */
};
extern struct cm_core cm_core;

static inline struct cm_id *cm_id_of(struct rdma_cm_id *id)
{
	return (struct cm_id *)id;
}

static inline struct cm_channel *cm_channel_of(struct rdma_event_channel *c)
{
	return (struct cm_channel *)c;
}

/* errno and -1, as librdmacm returns errors */
static inline int cm_err(int e)
{
	errno = e;
	return -1;
}

/* core.c */
int cm_core_init(void); /* 0 or -errno; opens the device once */
int cm_id_create(struct rdma_event_channel *channel, struct rdma_cm_id **id,
		 void *context, enum rdma_port_space ps, enum ibv_qp_type qpt);
struct cm_id *cm_id_new_child(struct cm_id *listener); /* lock held */
struct cm_id *cm_id_find(uint64_t serial);	       /* lock held */
bool cm_is_ud(const struct cm_id *c);

/* channel.c (lock held for every one) */
struct cm_event *cm_event_new(struct cm_id *c, enum rdma_cm_event_type type,
			      int status);
void cm_event_queue(struct cm_id *c, struct cm_event *e);
void cm_channel_drop_events(struct cm_id *c); /* queued ones of c */
struct cm_channel *cm_channel_create(bool sync);
bool cm_channel_pending(struct rdma_event_channel *channel); /* no lock */
void cm_channel_destroy(struct cm_channel *ch);
int cm_wait_acked(struct cm_id *c); /* waits for c->unacked == 0 */
int cm_complete(struct cm_id *c);   /* sync ids: waits for their event */

/* addr.c */
int cm_addr_is_local(const struct sockaddr *sa);
bool cm_addr_is_any(const struct sockaddr *sa);
bool cm_addr_is_loopback(const struct sockaddr *sa);
int cm_addr_gid(const struct sockaddr *sa, union ibv_gid *gid, int *index);
int cm_addr_route_src(const struct sockaddr *dst, struct sockaddr *src);
void cm_addr_mapped_gid(const struct sockaddr *sa, union ibv_gid *gid);
bool cm_addr_is_multicast(const struct sockaddr *sa);
int cm_addr_reserve(struct cm_id *c, const struct sockaddr *sa);
/* A UD id's TCP socket at its UDP port's number (c->sidr_fd), for SIDR
 * from other hosts: 0 or -errno (the number is a TCP user's). */
int cm_addr_sidr_socket(struct cm_id *c);
socklen_t cm_addr_len(const struct sockaddr *sa);
void cm_addr_to_wire(const struct sockaddr *sa, struct cm_wire_addr *w);
void cm_addr_from_wire(const struct cm_wire_addr *w,
		       struct sockaddr_storage *ss);
void cm_route_fill(struct cm_id *c);

/* link.c: the CM's messages between processes (the transport seam) */
int cm_link_listen(struct cm_id *c, int backlog);
int cm_link_connect(struct cm_id *c); /* 0, or -errno to report */
int cm_link_send(struct cm_id *c, const struct cm_msg *m);
int cm_link_adopt(struct cm_id *c, int fd);
int cm_link_mark_bound(struct cm_id *c);
bool cm_link_dst_bound(struct cm_id *c);
void cm_link_kick(void); /* the CM thread re-reads what to retry */
uint64_t cm_now_ms(void);
void cm_link_close(struct cm_id *c);
int cm_thread_start(void);

/* ib_link.c: the IB CM's MADs on QP1 over RoCEv2, the link of an id
 * with c->ib (lock held for each) */
#define CM_TAG_IB_LISTEN (1ULL << 62) /* epoll data: a listener's REQs */
#define CM_TAG_IB_PORT	 (1ULL << 61) /* epoll data: a peer's QP1 socket */
#define CM_TAG_IB_PASS                                                     \
	(1ULL << 60)		       /* epoll data: MADs passed to us by \
					* another process (ib_pass.c): the \
					* listener's serial, 0 our comm IDs' */
void cm_ib_pass_read(uint64_t serial); /* every MAD passed there */
void cm_ib_port_read(int i);	       /* every MAD waiting on socket i */
int cm_ib_connect(struct cm_id *c);    /* 0 or -errno */
int cm_ib_listen(struct cm_id *l);     /* 0 or -errno */
void cm_ib_accept(struct cm_id *l);    /* every REQ waiting */
int cm_ib_send(struct cm_id *c, const struct cm_msg *m);
void cm_ib_read(struct cm_id *c); /* every MAD waiting; may free c */
void cm_ib_close(struct cm_id *c);
void cm_ib_forget(struct cm_id *c); /* c is being freed: out of the index */
/* The REQs, REPs and DREQs not yet answered sent again when due (a REP
 * whose retries ran out ends UNREACHABLE): timeout (the CM thread's
 * epoll timeout, -1 none) lowered to the next one due */
int cm_ib_resend_all(int timeout);

/* link_auth.c: the shared secret on TCP links (lock held for each) */
bool cm_auth_needed(void);	    /* a secret is set (or unreadable) */
int cm_auth_start(struct cm_id *c); /* our HELLO; 0 or -errno */
/* The peer's handshake record: 0 taken (c->auth CM_AUTH_OFF once both
 * proved it), or -EACCES: refused (said once on stderr) */
int cm_auth_recv(struct cm_id *c, const struct cm_msg *m);
bool cm_auth_asked(struct cm_id *c, const struct cm_msg *m); /* says so */
void cm_auth_closed(struct cm_id *c);			     /* says so */

/* conn.c: the state machine, called by link.c with the lock held */
bool cm_conn_recv(struct cm_id *c, const struct cm_msg *m); /* true: c freed */
void cm_conn_lost(struct cm_id *c); /* may free c (never reported) */
struct cm_id *cm_conn_incoming(struct cm_id *listener, int sock);
void cm_conn_link_up(struct cm_id *c, int err); /* TCP connect's end */
int cm_conn_retry_all(void); /* lock held; epoll's timeout: -1 none */
/* Lock held: c has a deadline or a retry for cm_conn_retry_all (after
 * every change that may give it one: a missed call is a hang) */
void cm_conn_timed(struct cm_id *c);
int cm_conn_process_rep(struct cm_id *c, struct cm_event *e);
void cm_id_free(struct cm_id *c); /* lock held; unlinks and frees */

/* qp.c */
struct ibv_xrcd *cm_xrcd(void); /* NULL and errno on failure */
int cm_qp_to_rtr_rts(struct cm_id *c);
void cm_qp_to_err(struct cm_id *c);
void cm_ud_ah_attr(struct cm_id *c, struct ibv_ah_attr *ah);

/* mcast.c */
void cm_mcast_leave_all(struct cm_id *c);

extern bool cm_debug;
void cm_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
