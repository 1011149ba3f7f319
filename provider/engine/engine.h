/* SPDX-License-Identifier: MIT */
/*
 * The engine (engine/, layer 2): requester, responder, completer,
 * posting, the error transition, the SRQ's responder side and the XRC
 * receive path, as the verbs objects and the progress thread call them.
 */
#ifndef SV_ENGINE_H
#define SV_ENGINE_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "objects.h"
#include "wire.h"

/* The responder's side (engine/srq.c).  The responder's WQE for the
 * message at hand: the first the QP holds (lent), else the SRQ's oldest
 * moved into its RQ; false if there is none.  Lends the QP more for
 * single copy, raises
 * IBV_EVENT_SRQ_LIMIT_REACHED when it crosses an armed limit.  Caller
 * holds qp->lock. */
bool sv_srq_take(struct sv_srq *srq, struct sv_qp *qp);
/* Gives the SRQ back the WQEs lent to qp that its peer has not claimed
 * (before its link closes: to ERROR, RESET).  Caller holds qp->lock. */
void sv_srq_return(struct sv_qp *qp);
/* WQEs an RC QP on an SRQ may hold lent (its RQ's slots, verbs/qp.c):
 * the SRQ's slots, at least SV_SRQ_LEND_MIN and at most SV_SRQ_LEND.
 * Enough for a send window (ib_send_bw's 128): with 64, half of it found
 * no described receive, went through the ring unplaced and filled it,
 * and the rest waited off the link while the sender spun (issue 27). */
#define SV_SRQ_LEND	256
#define SV_SRQ_LEND_MIN 64

/* QP: the error transition and the link's close (engine/qp_error.c),
 * the extended post ops (post.c). */
void sv_qp_to_error(struct sv_qp *qp, enum ibv_event_type ev);
void sv_qp_link_close(struct sv_qp *qp, bool bye);
void sv_qp_init_ex_ops(struct sv_qp *qp, uint64_t send_ops_flags);
int sv_qp_ex_check_ops(enum ibv_qp_type type, uint64_t send_ops_flags);
/* The local ACK timeout (IBA 9.7.6.1.3; at least SV_MIN_ACK_TIMEOUT_NS,
 * UINT64_MAX / 2 for 0: infinite) (comp.c). */
uint64_t sv_qp_ack_timeout_ns(const struct sv_qp *qp);
/* The QP's link (engine/qp_link.c); caller holds qp->lock.  One step
 * up (connect, the peer's hello): what makes the link impossible
 * (-errno: another user's socket, out of fds; said on stderr), else 0. */
int sv_qp_link_connect(struct sv_qp *qp);
/* The same, and a link that cannot come up takes the QP to ERROR. */
void sv_qp_link_step(struct sv_qp *qp);
/* The link's peer said goodbye (st CLOSED) or vanished (DEAD). */
void sv_qp_link_event(struct sv_qp *qp, enum sv_link_state st);
/* Says on stderr, once, why the link cannot come up (what failed, err). */
void sv_qp_link_error(struct sv_qp *qp, const char *what, int err);
/* A link that runs by itself (TCP): its turn (engine/qp_link.c).  Caller
 * holds qp->lock. */
void sv_qp_link_run(struct sv_qp *qp, uint64_t now);

/* The engine (req.c, resp.c, comp.c).  Caller holds qp->lock. */
/* Scatters into a WQE's local SGEs (read data, atomic results) at its
 * cursor; -EFAULT if the memory went, -EINVAL past the SGEs. */
int sv_swqe_scatter(struct sv_qp *qp, struct sv_swqe *w, const uint8_t *src,
		    uint32_t len);
void sv_req_run(struct sv_qp *qp);
void sv_resp_run(struct sv_qp *qp);
void sv_comp_run(struct sv_qp *qp, uint64_t now_ns);
/* Completes the finished WQEs at the head of the send queue, in order
 * (the requester calls it after executing one-sided WQEs itself). */
void sv_comp_advance(struct sv_qp *qp);
/* A send WR finished with status st: the queue's oldest slot is free,
 * and its completion goes to the send CQ if it is signalled or failed. */
void sv_comp_wr(struct sv_qp *qp, uint64_t wr_id, uint32_t opcode,
		uint32_t flags, uint32_t length, enum ibv_wc_status st);
/* An RDMA write, read or atomic done inside its post, if it can be
 * (req.c); false: nothing done, post it as usual. */
bool sv_req_post_direct(struct sv_qp *qp, const struct ibv_send_wr *wr);
/* Drops the responses SOFTVERBS_FAULTS delay_us holds (reset, destroy). */
void sv_comp_fault_free(struct sv_qp *qp);
/* IBA table 45: an RNR NAK timer code in ns (comp.c). */
uint64_t sv_rnr_timer_ns(uint8_t code);
/* Retransmission: the send state back to psn (req.c). */
void sv_req_rewind(struct sv_qp *qp, uint32_t psn);

/* The abstract socket name of XRC SRQ srqn of domain (engine/xrc.c). */
struct sockaddr_un;
socklen_t sv_xsrq_addr(struct sockaddr_un *a, const char *domain,
		       uint32_t srqn);
/* The responder of an XRC_RECV QP (engine/xrc.c), for the message whose
 * packet names srqn: binds the SRQ if it is of our context (qp->srq,
 * qp->rcq), else marks the message to be forwarded.  Caller holds qp->lock. */
int sv_xrc_bind(struct sv_qp *qp, uint32_t srqn);
void sv_xrc_unbind(struct sv_qp *qp);
/* A forwarded send: its bytes in order; at the last, handed to the SRQ's
 * process.  0, -EAGAIN (its queue is full: retry), -ENOENT (no SRQ of
 * that number in our domain), -EMSGSIZE. */
int sv_xrc_fwd_data(struct sv_qp *qp, const struct sv_pkt *p,
		    const uint8_t *data);
int sv_xrc_fwd_send(struct sv_qp *qp, const struct sv_pkt *p);

/* A receive WQE and its SGEs from a work request already checked
 * (post.c; SRQs too). */
void sv_rwqe_fill(struct sv_rwqe *r, struct ibv_sge *sge,
		  const struct ibv_recv_wr *wr);

/* Shows the peer receives [from, rq_post) for single-copy sends (post.c).
 * Caller holds qp->lock. */
void sv_rq_describe(struct sv_qp *qp, uint32_t from);
/* The peer may no longer place into posted receives with a piece in
 * the arena's [off, off + len): an MR under them changes (verbs/mr.c
 * rereg, dereg).  Each is described again as not placeable, taken with a
 * CAS as the sender claims one (req.c try_place); one claimed already is
 * the sender's and is marked stale: a placed send into it fails (resp.c
 * recv_placed), as one into a receive whose MR no longer checks out.
 * Caller holds qp->lock. */
void sv_rq_withdraw(struct sv_qp *qp, uint64_t off, uint64_t len);

/* Data path entry points, installed in context ops. */
int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		 struct ibv_send_wr **bad);
/* ibv_bind_mw's WR (verbs/mw.c): one BIND_MW of a type 1 window, which
 * ibv_post_send refuses; 0 or a positive errno. */
int sv_post_bind_mw(struct ibv_qp *qp, struct ibv_send_wr *wr);
int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad);

/* Who drives a QP's engine (engine/drive.c). */
/* New send work while the app may not poll: the thread must see its
 * timers, if it does not look at qp by due (the work's earliest deadline
 * the caller knows, UINT64_MAX: none) anyway. */
void sv_qp_note_work(struct sv_qp *qp, uint64_t due);
/* Asks the thread to look at qp soon (any thread; qp is type-stable). */
void sv_qp_visit(struct sv_qp *qp);
/* The callbacks of a QP's fds (sv_pfd_set), in the progress thread:
 * listener (hellos, edge), our connection or a TCP link's socket (rung,
 * edge), a peer's connection to us (goodbye or hang-up, level), a UD
 * QP's datagram socket (edge).  Each looks at the QP after. */
void sv_qp_on_listen(struct sv_io *io, uint32_t revents);
void sv_qp_on_doorbell(struct sv_io *io, uint32_t revents);
void sv_qp_on_conn(struct sv_io *io, uint32_t revents);
void sv_qp_on_ud(struct sv_io *io, uint32_t revents);
/* The context's deadlines outside the loop's heap (the doors' callers in
 * wait, TCP's and UDP's): the progress thread's next_ns. */
uint64_t sv_drive_doors_next_ns(struct sv_context *ctx, uint64_t now);
/* Runs the engine for one QP if it has work; the fast path of poll/post.
 * set: the caller's CQ's readiness set, just asked (sv_drive_ready), so a
 * link that runs (TCP) and was not found readable may be skipped; -1:
 * none, every such link runs. */
void sv_qp_drive(struct sv_qp *qp, int set);
/* An app thread's spin in ibv_get_cq_event drives qp (drive.c): its sleep
 * flags come down for it (token: the spin's, never 0) and go up again
 * after it, before the app sleeps. */
void sv_qp_spin_begin(struct sv_qp *qp, uint64_t token);
void sv_qp_spin_end(struct sv_qp *qp, uint64_t token);
/* Asks a CQ's readiness set (transport/link.h) which of its nqps QPs'
 * connections have bytes waiting, and marks those QPs (readable) for
 * the poll's sv_qp_drive; false if it could not be asked (then the
 * poll passes no set). */
bool sv_drive_ready(int set, uint32_t nqps);
/* cq is being destroyed: the progress thread's park check forgets it. */
void sv_drive_cq_gone(struct sv_cq *cq);
/* now: the time if the caller knows it, else 0 (the engine may skip
 * its timers to save clock reads). */
void sv_qp_run(struct sv_qp *qp, uint64_t now);

#endif
