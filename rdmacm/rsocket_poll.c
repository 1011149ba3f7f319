// SPDX-License-Identifier: MIT
/*
 * rsockets' rpoll and rselect (rsocket.c has the table of rsockets):
 * progress every rsocket and report what is ready; else arm their CQs and
 * sleep in poll() on their channel fds (the CM's, which is the rsocket's
 * number, and the completion channel's) and the program's real fds
 * together.  rselect is rpoll over the fds of its sets.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#include "cm.h"
#include "rs.h"

/* an rsocket's poll events now (after progress) */
static short rs_revents(struct rs *rs, short events)
{
	short r = 0;
	struct pollfd p = {.fd = rs->fd, .events = POLLIN};

	switch (rs->state) {
	case RS_LISTENING:
		if (poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
			r |= POLLIN;
		break;
	case RS_NEW:
	case RS_BOUND:
		r |= POLLOUT | POLLHUP;
		break;
	case RS_RESOLVING_ADDR:
	case RS_RESOLVING_ROUTE:
	case RS_CONNECTING:
		break;
	case RS_FAILED:
		r |= POLLERR | POLLHUP | POLLIN | POLLOUT;
		break;
	default:
		if (rs_readable(rs))
			r |= POLLIN;
		if (rs->state == RS_CONNECTED && rs_writable(rs))
			r |= POLLOUT;
		/* hung up once nothing is left to read: the peer's last
		 * bytes are POLLIN first, as a TCP socket's after its
		 * peer's close (rstream -T a takes POLLHUP for an error) */
		if ((rs->disconnected || rs->state == RS_CLOSED ||
		     (rs->fin_rcvd && rs->fin_sent)) &&
		    rs->rcvd == rs->consumed)
			r |= POLLHUP;
		break;
	}
	return r & (events | POLLERR | POLLHUP);
}

/* rpoll's wake-up: the completion events of fds' rsockets consumed; their
 * CQs are armed again on the next pass. */
static void take_cq_events(struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++) {
		struct rs *rs = fds[i].fd >= 0 ? rs_lookup(fds[i].fd) : NULL;
		struct ibv_cq *cq;
		void *ctx;

		if (!rs)
			continue;
		pthread_mutex_lock(&rs->lock);
		while (rs->cch && ibv_get_cq_event(rs->cch, &cq, &ctx) == 0) {
			ibv_ack_cq_events(cq, 1);
			rs->cq_armed = false;
		}
		pthread_mutex_unlock(&rs->lock);
	}
}

/*
 * rpoll polls for rs_spin_ns() before it sleeps: true once that is over,
 * the clock read after every RS_SPIN_LOOKS passes, not each, as rs_spin.
 */
static bool spin_over(unsigned int *passes, uint64_t *spin_end)
{
	uint64_t now;

	if (++*passes % RS_SPIN_LOOKS)
		return false;
	now = rs_now_ns();
	if (!*spin_end) {
		*spin_end = now + rs_spin_ns();
		return false;
	}
	return now >= *spin_end;
}

/*
 * Progress every rsocket, report what is ready; else arm their CQs and
 * sleep in poll() on their channel fds (CM and completions) and the
 * program's real fds together.
 */
CM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	uint64_t end = timeout > 0 ? cm_now_ms() + timeout : 0, spin_end = 0;
	unsigned int passes = 0;
	struct pollfd *k;
	nfds_t i, nk, nreal;
	int ready, ret;

	if (nfds > RS_MAX_FD)
		return cm_err(EINVAL);
	k = calloc(2 * nfds + 1, sizeof(*k));
	if (!k)
		return cm_err(ENOMEM);
	for (bool armed = false;;) {
		ready = 0;
		nk = 0;
		nreal = 0;
		for (i = 0; i < nfds; i++) {
			struct rs *rs =
				fds[i].fd >= 0 ? rs_lookup(fds[i].fd) : NULL;

			fds[i].revents = 0;
			if (!rs) {
				if (fds[i].fd >= 0) {
					k[nk++] = (struct pollfd){
						.fd = fds[i].fd,
						.events = fds[i].events};
					nreal++;
				}
				continue;
			}
			pthread_mutex_lock(&rs->lock);
			rs_progress(rs);
			fds[i].revents = rs_revents(rs, fds[i].events);
			if (!fds[i].revents && armed && rs->cq &&
			    !rs->cq_armed) {
				if (ibv_req_notify_cq(rs->cq, 0) == 0)
					rs->cq_armed = true;
				rs_progress(rs); /* what came before it */
				fds[i].revents = rs_revents(rs, fds[i].events);
			}
			k[nk++] =
				(struct pollfd){.fd = rs->fd, .events = POLLIN};
			if (rs->cch)
				k[nk++] = (struct pollfd){.fd = rs->cch->fd,
							  .events = POLLIN};
			pthread_mutex_unlock(&rs->lock);
			if (fds[i].revents)
				ready++;
		}
		/* the real fds' state too, without waiting (none: no
		 * system call, the rsockets' own fds say nothing more) */
		if (nreal && poll(k, nk, 0) > 0) {
			nfds_t j = 0;

			for (i = 0; i < nfds; i++) {
				struct rs *rs = fds[i].fd >= 0
							? rs_lookup(fds[i].fd)
							: NULL;

				if (rs) {
					j += rs->cch ? 2 : 1;
					continue;
				}
				if (fds[i].fd < 0)
					continue;
				fds[i].revents = k[j++].revents;
				if (fds[i].revents)
					ready++;
			}
		}
		if (ready || timeout == 0)
			break;
		if (!armed) {
			/* then one more pass arms the CQs */
			armed = spin_over(&passes, &spin_end);
			continue;
		}
		ret = poll(k, nk,
			   timeout < 0	       ? -1
			   : end > cm_now_ms() ? (int)(end - cm_now_ms())
					       : 0);
		if (ret < 0) {
			free(k);
			return -1;
		}
		/* consume the completion events, re-arm on the next pass */
		take_cq_events(fds, nfds);
		if (ret == 0 && timeout >= 0 && cm_now_ms() >= end) {
			/* one last look, then time out */
			timeout = 0;
		}
	}
	free(k);
	return ready;
}

CM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds,
		      fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *p;
	int i, n = 0, ret, to;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return cm_err(EINVAL);
	p = calloc(nfds ? nfds : 1, sizeof(*p));
	if (!p)
		return cm_err(ENOMEM);
	for (i = 0; i < nfds; i++) {
		short ev = 0;

		if (readfds && FD_ISSET(i, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(i, writefds))
			ev |= POLLOUT;
		if (exceptfds && FD_ISSET(i, exceptfds))
			ev |= POLLPRI;
		if (ev)
			p[n++] = (struct pollfd){.fd = i, .events = ev};
	}
	to = timeout ? (int)(timeout->tv_sec * 1000 +
			     (timeout->tv_usec + 999) / 1000)
		     : -1;
	ret = rpoll(p, n, to);
	if (ret < 0) {
		free(p);
		return -1;
	}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	ret = 0;
	for (i = 0; i < n; i++) {
		bool any = false;

		if (readfds && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    (p[i].events & POLLIN)) {
			FD_SET(p[i].fd, readfds);
			any = true;
		}
		if (writefds && (p[i].revents & (POLLOUT | POLLERR)) &&
		    (p[i].events & POLLOUT)) {
			FD_SET(p[i].fd, writefds);
			any = true;
		}
		if (exceptfds && (p[i].revents & POLLPRI)) {
			FD_SET(p[i].fd, exceptfds);
			any = true;
		}
		ret += any;
	}
	free(p);
	return ret;
}
