// SPDX-License-Identifier: MIT
/*
 * The XRC_RECV QP's side of delivery (IBA 9.8.5, 11.8; verbs/xrc.c's head
 * comment says what a domain is): each message names an XRC SRQ (XRCETH).
 * An SRQ of the QP's own context is bound for the message (sv_xrc_bind)
 * and the responder works as on an RC QP with an SRQ; a send for an SRQ of
 * another context or process of the domain is assembled (sv_xrc_fwd_data)
 * and forwarded, one datagram, to that SRQ's socket (sv_xrc_fwd_send),
 * whose name (sv_xsrq_addr) holds the domain and the SRQ number.  The
 * owner's side, which takes a forwarded message into its next WQE, is
 * verbs/xrc.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core.h"
#include "engine.h"
#include "wire.h"

/* The abstract socket name of an XRC SRQ: the domain and the number, so
 * a forward for another domain's SRQ finds nothing. */
socklen_t sv_xsrq_addr(struct sockaddr_un *a, const char *domain, uint32_t srqn)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "softverbs/xsrq/%s/%06x", domain, srqn);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* An SRQ of our context in our domain, by number, with a reference
 * (destroy is EBUSY until sv_xrc_unbind).  Caller holds qp->lock. */
static struct sv_srq *find_local(struct sv_qp *qp, uint32_t srqn)
{
	struct sv_context *ctx = qp->ctx;
	struct sv_srq *found = NULL;
	struct sv_list *n;

	pthread_mutex_lock(&ctx->xsrq_lock);
	sv_list_for_each(n, &ctx->xsrqs)
	{
		struct sv_srq *srq = container_of(n, struct sv_srq, ctx_node);

		if (srq->srqn == srqn &&
		    !strcmp(srq->xrcd->id, qp->xrc.xrcd->id)) {
			atomic_fetch_add(&srq->users, 1);
			found = srq;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->xsrq_lock);
	return found;
}

int sv_xrc_bind(struct sv_qp *qp, uint32_t srqn)
{
	struct sv_srq *srq;

	if (qp->srq || qp->xrc.fwd)
		return qp->xrc.srqn == srqn ? 0 : -EINVAL;
	qp->xrc.srqn = srqn;
	srq = find_local(qp, srqn);
	if (!srq) {
		qp->xrc.fwd = true;
		return 0;
	}
	qp->srq = srq;
	qp->rcq = srq->cq;
	qp->max_recv_sge = SV_MAX_SRQ_SGE; /* the one slot holds any WQE */
	return 0;
}

/* A WQE still held is the SRQ's, which the next message may not name:
 * it completes flushed (only a message the requester gave up on after
 * RNR leaves one), as on an RC QP on an SRQ that goes to ERROR. */
void sv_xrc_unbind(struct sv_qp *qp)
{
	if (qp->srq && qp->rq.comp != qp->rq.post) {
		struct ibv_wc wc = {.wr_id = qp->rq.wqe[0].wr_id,
				    .status = IBV_WC_WR_FLUSH_ERR,
				    .opcode = IBV_WC_RECV,
				    .qp_num = qp->qpx.qp_base.qp_num};

		qp->rq.comp = qp->rq.post;
		sv_cq_push(qp->rcq, &wc, false);
		sv_stat_wc(qp, wc.status);
	}
	if (qp->srq) /* release: our last take before a destroy */
		atomic_fetch_sub_explicit(&qp->srq->users, 1,
					  memory_order_release);
	qp->srq = NULL;
	qp->rcq = NULL; /* the CQ may go with its SRQ */
	qp->xrc.fwd = false;
}

int sv_xrc_fwd_data(struct sv_qp *qp, const struct sv_pkt *p,
		    const uint8_t *data)
{
	struct sv_xrc_hdr *h;

	if (p->seg & SV_SEG_FIRST) {
		size_t need = sizeof(*h) + p->msg_len;

		if (p->msg_len > SV_XRC_MSG_MAX)
			return -EMSGSIZE;
		if (qp->xrc.cap < need) {
			uint8_t *b = realloc(qp->xrc.buf, need);

			if (!b)
				return -ENOMEM;
			qp->xrc.buf = b;
			qp->xrc.cap = (uint32_t)need;
		}
		h = (struct sv_xrc_hdr *)qp->xrc.buf;
		memset(h, 0, sizeof(*h));
		h->len = p->msg_len;
		qp->resp.off = 0;
	}
	h = (struct sv_xrc_hdr *)qp->xrc.buf;
	if (p->len > h->len - qp->resp.off)
		return -EINVAL;
	memcpy(qp->xrc.buf + sizeof(*h) + qp->resp.off, data, p->len);
	qp->resp.off += p->len;
	return 0;
}

/* The forwarding socket of an XRC_RECV QP, made at its first use. */
static int fwd_socket(struct sv_qp *qp)
{
	int sz = 4 * (int)(sizeof(struct sv_xrc_hdr) + SV_XRC_FWD_MAX);

	if (qp->xrc.sock >= 0)
		return 0;
	qp->xrc.sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (qp->xrc.sock < 0)
		return -errno;
	setsockopt(qp->xrc.sock, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	return 0;
}

/* The header of the message assembled in xrc_buf, for packet p (its
 * last). */
static void fill_hdr(struct sv_qp *qp, const struct sv_pkt *p)
{
	struct sv_xrc_hdr *h = (struct sv_xrc_hdr *)qp->xrc.buf;

	h->magic = SV_XRC_MAGIC;
	h->version = SV_XRC_VERSION;
	h->flags = ((p->flags & SV_PKT_IMM) ? SV_XRC_IMM : 0) |
		   ((p->flags & SV_PKT_SOLICITED) ? SV_XRC_SOLICITED : 0) |
		   (h->len > SV_XRC_FWD_MAX ? SV_XRC_MEMFD : 0);
	h->srqn = qp->xrc.srqn;
	h->tgt_qpn = qp->qpx.qp_base.qp_num;
	h->src_qpn = qp->attr.dest_qp_num;
	h->imm = p->imm;
	snprintf(h->domain, sizeof(h->domain), "%s", qp->xrc.xrcd->id);
}

static int fwd_errno(void)
{
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
		return -EAGAIN;
	return -ENOENT; /* ECONNREFUSED: no such SRQ in the domain */
}

/* A long message: its payload in a sealed memfd, passed with the
 * header (the datagram would not hold it). */
static int fwd_send_memfd(struct sv_qp *qp, const struct sv_pkt *p)
{
	struct sv_xrc_hdr *h = (struct sv_xrc_hdr *)qp->xrc.buf;
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = {h, sizeof(*h)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct sockaddr_un a;
	const uint8_t *src = qp->xrc.buf + sizeof(*h);
	int fd, err = fwd_socket(qp);

	if (err)
		return err;
	fill_hdr(qp, p);
	fd = memfd_create("softverbs-xrc", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -EAGAIN; /* out of fds or memory: try again later */
	for (uint32_t off = 0; off < h->len;) {
		ssize_t w = pwrite(fd, src + off, h->len - off, off);

		if (w <= 0) {
			close(fd);
			return -EAGAIN;
		}
		off += (uint32_t)w;
	}
	if (fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) {
		close(fd);
		return -EAGAIN;
	}
	m.msg_name = &a;
	m.msg_namelen = sv_xsrq_addr(&a, qp->xrc.xrcd->id, qp->xrc.srqn);
	u.c.cmsg_level = SOL_SOCKET;
	u.c.cmsg_type = SCM_RIGHTS;
	u.c.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&u.c), &fd, sizeof(fd));
	err = sendmsg(qp->xrc.sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0
		      ? fwd_errno()
		      : 0;
	close(fd);
	return err;
}

int sv_xrc_fwd_send(struct sv_qp *qp, const struct sv_pkt *p)
{
	struct sv_xrc_hdr *h = (struct sv_xrc_hdr *)qp->xrc.buf;
	struct sockaddr_un a;
	socklen_t alen;
	int err;

	if (qp->resp.off != h->len)
		return -EINVAL;
	if (h->len > SV_XRC_FWD_MAX)
		return fwd_send_memfd(qp, p);
	err = fwd_socket(qp);
	if (err)
		return err;
	fill_hdr(qp, p);
	alen = sv_xsrq_addr(&a, qp->xrc.xrcd->id, qp->xrc.srqn);
	if (sendto(qp->xrc.sock, qp->xrc.buf, sizeof(*h) + h->len,
		   MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a,
		   alen) < 0)
		return fwd_errno();
	return 0;
}
