// SPDX-License-Identifier: MIT
/*
 * XRC (IBA 9.8.5, 11.8): domains, the XRC SRQs' numbers and sockets, and
 * the XRC_RECV QP's side of delivery.  A domain is a name: the device and
 * inode of the file its openers passed ("f<dev>-<ino>"), so processes
 * that open the same file share it, or a private one for fd -1.  That an
 * inode's domain exists is an OFD read lock on one byte far past its end,
 * held by each opener's own open of the file, so any process can ask.
 *
 * An XRC_RECV QP is an RC responder without queues of its own (its side
 * of delivery is engine/xrc.c): each
 * message names an XRC SRQ (XRCETH).  An SRQ of the QP's own context is
 * bound for the message and the responder works as on an RC QP with an
 * SRQ (sends, RDMA, atomics; the SRQ's PD checks keys).  A send for an
 * SRQ of another context or process of the domain is assembled and
 * forwarded, one datagram, to that SRQ's socket, whose name holds the
 * domain and the SRQ number: a wrong number, or an SRQ of another domain,
 * finds no socket and the requester gets NAK-invalid request.  The owner
 * takes it into its next WQE when it has one (post_srq_recv and the
 * progress thread drain the socket).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core.h"
#include "engine.h"
#include "guard.h"
#include "transport.h"
#include "verbs.h"
#include "wire.h"

/* The byte whose OFD lock says "this inode has an XRC domain". */
#define SV_XRCD_LOCK_OFF (1ll << 62)

/* XRC_RECV QPs of this process, for ibv_open_qp. */
static pthread_mutex_t xrc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv_list xrc_qps = {&xrc_qps, &xrc_qps};

static struct flock domain_lock(short type)
{
	struct flock l = {.l_type = type,
			  .l_whence = SEEK_SET,
			  .l_start = SV_XRCD_LOCK_OFF,
			  .l_len = 1};
	return l;
}

/* Does any other open of the file hold its domain? */
static bool domain_exists(int fd)
{
	struct flock l = domain_lock(F_WRLCK);

	if (fcntl(fd, F_OFD_GETLK, &l))
		return false;
	return l.l_type != F_UNLCK;
}

/* The domain of the file fd: its name, and our lock that keeps it. */
static int open_file_domain(struct sv_xrcd *x, int fd, int oflags)
{
	struct flock l = domain_lock(F_RDLCK);
	char path[40];
	struct stat st;
	bool exists;

	if (fstat(fd, &st))
		return -EBADF;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* our own open file description: the lock lives as long as we do,
	 * whatever the program does with its fd */
	x->lock_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (x->lock_fd < 0)
		return -EACCES;
	exists = domain_exists(x->lock_fd);
	/* the kernel's answers (ib_uverbs_open_xrcd) */
	if (!exists && !(oflags & O_CREAT))
		goto err_again;
	if (exists && (oflags & O_CREAT) && (oflags & O_EXCL))
		goto err_inval;
	if (fcntl(x->lock_fd, F_OFD_SETLK, &l))
		sv_dbg("xrcd: no lock on the domain's file: %s\n",
		       strerror(errno));
	snprintf(x->id, sizeof(x->id), "f%llx-%llx",
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	return 0;

err_again:
	close(x->lock_fd);
	return -EAGAIN;
err_inval:
	close(x->lock_fd);
	return -EINVAL;
}

/* ibv_open_xrcd(3): comp_mask must name fd and oflags (EINVAL), no bits
 * we do not know (EOPNOTSUPP), as rdma-core's ibv_cmd_open_xrcd. */
struct ibv_xrcd *sv_open_xrcd(struct ibv_context *c,
			      struct ibv_xrcd_init_attr *a)
{
	static _Atomic uint32_t private_ids;
	struct sv_xrcd *x;
	int err;

	if (!a || a->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
		errno = a ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (!(a->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
	    !(a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ||
	    (a->oflags & ~(O_CREAT | O_EXCL))) {
		errno = EINVAL;
		return NULL;
	}
	/* fd -1: a new domain, which the man page asks to say with O_CREAT */
	if (a->fd == -1 && !(a->oflags & O_CREAT)) {
		errno = EINVAL;
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	x->ibv.context = c;
	x->lock_fd = -1;
	if (a->fd == -1) {
		snprintf(x->id, sizeof(x->id), "p%d-%u", (int)getpid(),
			 atomic_fetch_add(&private_ids, 1));
		return &x->ibv;
	}
	err = a->fd < 0 ? -EBADF : open_file_domain(x, a->fd, a->oflags);
	if (err) {
		free(x);
		errno = -err;
		return NULL;
	}
	return &x->ibv;
}

/* EBUSY while an SRQ or QP is in it (the kernel's usecnt). */
int sv_close_xrcd(struct ibv_xrcd *ibx)
{
	struct sv_xrcd *x = to_sxrcd(ibx);

	/* acquire: the users' last accesses happen before the free */
	if (atomic_load_explicit(&x->users, memory_order_acquire))
		return EBUSY;
	if (x->lock_fd >= 0)
		close(x->lock_fd); /* our part of "it exists" goes */
	free(x);
	return 0;
}

int sv_xsrq_bind(struct sv_srq *srq)
{
	int one = 1, fd, err;

	srq->fwd_buf = malloc(sizeof(struct sv_xrc_hdr) + SV_XRC_FWD_MAX);
	if (!srq->fwd_buf)
		return -ENOMEM;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		goto err_free;
	}
	/* the kernel then attaches every sender's credentials */
	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one))) {
		err = -errno;
		goto err_close;
	}
	for (int tries = 0; tries < 1000; tries++) {
		struct sockaddr_un a;
		uint32_t n;

		if (getrandom(&n, sizeof(n), 0) != sizeof(n))
			n = (uint32_t)sv_now_ns() * 2654435761u;
		n &= SV_PSN_MASK;
		if (!n)
			continue;
		if (!bind(fd, (struct sockaddr *)&a,
			  sv_xsrq_addr(&a, srq->xrcd->id, n))) {
			srq->sock = fd;
			srq->srqn = n;
			return 0;
		}
		if (errno != EADDRINUSE) {
			err = -errno;
			goto err_close;
		}
	}
	err = -ENOSPC;
err_close:
	close(fd);
err_free:
	free(srq->fwd_buf);
	srq->fwd_buf = NULL;
	return err;
}

void sv_xsrq_unbind(struct sv_srq *srq)
{
	if (srq->sock >= 0)
		close(srq->sock);
	srq->sock = -1;
	free(srq->fwd_buf);
	srq->fwd_buf = NULL;
}

/* Scatters len bytes into the WQE's SGEs (the SRQ's PD); false on a bad
 * key or bound, or memory that went. */
static bool scatter(struct sv_srq *srq, const struct sv_rwqe *r,
		    const struct ibv_sge *sg, const uint8_t *src, uint32_t len)
{
	struct sv_pd *pd = to_spd(srq->ibv.pd);

	for (uint32_t i = 0; i < r->num_sge && len; i++) {
		uint32_t n = sg[i].length < len ? sg[i].length : len;
		struct sv_mr *mr;

		if (!n)
			continue;
		mr = sv_mr_lookup(srq->ctx, sg[i].lkey, pd);
		if (!mr || !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
		    sg[i].addr < mr->iova ||
		    sg[i].addr - mr->iova > mr->length ||
		    n > mr->length - (sg[i].addr - mr->iova))
			return false;
		if (sv_copy_guarded(mr->addr + (sg[i].addr - mr->iova), src, n))
			return false;
		src += n;
		len -= n;
	}
	return true;
}

/* The SRQ's oldest WQE takes the forwarded send h; completed on the SRQ's
 * CQ.  A WQE too small completes with LOC_LEN_ERR (the sender has had its
 * ACK: the forwarding QP took the message).  Caller holds srq->lock. */
static void deliver(struct sv_srq *srq, const struct sv_xrc_hdr *h,
		    const uint8_t *data, bool *fire)
{
	uint32_t slot = srq->comp & (srq->size - 1);
	const struct sv_rwqe *r = &srq->q[slot];
	struct ibv_wc wc = {
		.wr_id = r->wr_id,
		.status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV,
		.byte_len = h->len,
		.qp_num = h->tgt_qpn,
		.src_qp = h->src_qpn,
		.slid = sv_local_lid(),
	};

	if (h->flags & SV_XRC_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = h->imm;
	}
	if (r->length < h->len)
		wc.status = IBV_WC_LOC_LEN_ERR;
	else if (!scatter(srq, r, &srq->sge[(size_t)slot * srq->max_sge], data,
			  h->len))
		wc.status = IBV_WC_LOC_PROT_ERR;
	srq->comp++;
	/* IBA 11.5.2.3: once below the limit, one event, then disarmed */
	if (srq->limit && srq->post - srq->comp < srq->limit) {
		srq->limit = 0;
		*fire = true;
	}
	sv_cq_push(srq->cq, &wc, h->flags & SV_XRC_SOLICITED);
}

/* The first fd a datagram brought (SCM_RIGHTS), or -1; any other is
 * closed at once. */
static int take_fd(struct msghdr *m)
{
	int fd = -1;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			if (fd < 0)
				fd = f;
			else
				close(f);
		}
	}
	return fd;
}

/* A long payload's memfd, mapped: exactly len bytes and sealed against
 * shrinking (so reading it cannot fault); NULL otherwise. */
static const uint8_t *map_payload(int fd, uint32_t len)
{
	struct stat st;
	void *p;

	if (fstat(fd, &st) || st.st_size != (off_t)len ||
	    !(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK))
		return NULL;
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

void sv_xsrq_recv_run(struct sv_srq *srq)
{
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(struct ucred)) +
			 CMSG_SPACE(4 * sizeof(int))];
	} u;
	bool fire = false;

	sv_lock(&srq->lock);
	/* what waits in the socket while we have no WQE stays there: the
	 * forwarder then finds the queue full and retries */
	while (srq->comp != srq->post) {
		struct sv_xrc_hdr *h = (struct sv_xrc_hdr *)srq->fwd_buf;
		struct iovec iov = {srq->fwd_buf, sizeof(*h) + SV_XRC_FWD_MAX};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = u.buf,
				   .msg_controllen = sizeof(u.buf)};
		ssize_t n =
			recvmsg(srq->sock, &m,
				MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);

		const uint8_t *data = srq->fwd_buf + sizeof(*h);
		int fd;

		if (n < 0)
			break; /* EAGAIN: all taken */
		fd = take_fd(&m);
		if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
		    !sv_link_sender_ok(&m) || !sv_xrc_hdr_ok(h, (size_t)n) ||
		    h->srqn != srq->srqn || strcmp(h->domain, srq->xrcd->id) ||
		    !(h->flags & SV_XRC_MEMFD) != (fd < 0) ||
		    (fd >= 0 && !(data = map_payload(fd, h->len)))) {
			sv_dbg("xsrq %06x: forwarded send dropped\n",
			       srq->srqn);
			if (fd >= 0)
				close(fd);
			continue;
		}
		deliver(srq, h, data, &fire);
		if (fd >= 0) {
			munmap((void *)data, h->len);
			close(fd);
		}
	}
	sv_unlock(&srq->lock);
	if (fire) {
		struct ibv_async_event e = {
			.event_type = IBV_EVENT_SRQ_LIMIT_REACHED};

		e.element.srq = &srq->ibv;
		sv_async_event(srq->ctx, &e);
	}
}

void sv_xrc_qp_add(struct sv_qp *qp)
{
	qp->xrc.opens = 1;
	pthread_mutex_lock(&xrc_lock);
	sv_list_add_tail(&xrc_qps, &qp->xrc.node);
	pthread_mutex_unlock(&xrc_lock);
}

void sv_xrc_qp_del(struct sv_qp *qp)
{
	pthread_mutex_lock(&xrc_lock);
	sv_list_del(&qp->xrc.node);
	pthread_mutex_unlock(&xrc_lock);
}

/* Whether one of our fds is socket inode ino. */
static bool socket_is_ours(unsigned long ino)
{
	char want[48], path[300], link[64];
	bool ours = false;
	struct dirent *d;
	DIR *dir;

	snprintf(want, sizeof(want), "socket:[%lu]", ino);
	dir = opendir("/proc/self/fd");
	if (!dir)
		return false;
	while (!ours && (d = readdir(dir))) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		ours = !strcmp(link, want);
	}
	closedir(dir);
	return ours;
}

/* Whether another process of this network namespace holds QP number
 * qpn (its socket's abstract name is in /proc/net/unix, not ours). */
static bool qpn_held_elsewhere(uint32_t qpn)
{
	char want[32], line[256];
	unsigned long ino = 0;
	bool found = false;
	FILE *f;

	snprintf(want, sizeof(want), " @softverbs/qp/%06x\n", qpn);
	f = fopen("/proc/net/unix", "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		size_t n = strlen(line), w = strlen(want);

		/* Num RefCount Protocol Flags Type St Inode Path */
		found = n >= w && !strcmp(line + n - w, want) &&
			sscanf(line, "%*s %*s %*s %*s %*s %*s %lu", &ino) == 1;
	}
	fclose(f);
	return found && !socket_is_ours(ino);
}

/*
 * ibv_open_qp(3): an XRC_RECV QP of the domain, by number.  Ours live in
 * the process that created them: we find those of this process (any
 * context) and return the same QP, with one more handle to destroy.  A
 * number no QP has is EINVAL (the kernel's unknown QPN); one another
 * process holds is EOPNOTSUPP, said on stderr: we cannot open it.
 */
struct ibv_qp *sv_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *a)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			      IBV_QP_OPEN_ATTR_TYPE;
	struct ibv_qp *found = NULL;
	struct sv_list *n;

	(void)c;
	if (!a || (a->comp_mask & need) != need ||
	    a->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED || !a->xrcd ||
	    a->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&xrc_lock);
	sv_list_for_each(n, &xrc_qps)
	{
		struct sv_qp *qp = container_of(n, struct sv_qp, xrc.node);

		if (qp->qpx.qp_base.qp_num != a->qp_num ||
		    strcmp(qp->xrc.xrcd->id, to_sxrcd(a->xrcd)->id))
			continue;
		sv_lock(&qp->lock);
		qp->xrc.opens++;
		sv_unlock(&qp->lock);
		found = &qp->qpx.qp_base;
		break;
	}
	pthread_mutex_unlock(&xrc_lock);
	if (found)
		return found;
	if (qpn_held_elsewhere(a->qp_num)) {
		fprintf(stderr,
			"softverbs: ibv_open_qp: QP %06x belongs to another "
			"process; softverbs opens only XRC_RECV QPs created "
			"in this process (open the QP where it was created)\n",
			a->qp_num);
		errno = EOPNOTSUPP;
	} else {
		errno = EINVAL;
	}
	return NULL;
}
