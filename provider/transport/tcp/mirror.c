// SPDX-License-Identifier: MIT
/*
 * The TCP transport's ring mirroring: what our engine publishes in the tx
 * and rsp_tx rings goes out as frames, record by record at its ring
 * position, and what the peer sends lands at the same position of our rx
 * or rsp_rx ring, as a shared-memory sender would write it.  Everything
 * that arrives is checked before it touches a ring: frame types, lengths,
 * positions (exactly the next one expected, inside the window our
 * consumer index gives), consumer indexes (never back, never past what we
 * sent), ring sizes.  A peer that breaks the protocol takes the link down,
 * as a malformed ring record does; a peer that does not read or does not
 * write can hold nothing of ours but its own link: sockets are
 * non-blocking, and records wait in our ring for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "auth.h"
#include "crc32c.h"
#include "peer.h"
#include "progress.h"
#include "tcp_priv.h"

/* Writes a record (or a pad) the peer sent at position pos of our ring
 * r, as a sender on shared memory would (ring.h): the line after it
 * poisoned first if free, the seq word last. */
static int mirror(struct sv_ring *r, uint64_t recv, uint64_t pos,
		  const uint8_t *rec, uint32_t len, bool pad, uint32_t crc,
		  uint32_t want)
{
	uint64_t off = pos & (r->size - 1), end = pos + len;
	struct sv_pkt *dst = (struct sv_pkt *)(r->data + off);
	const uint32_t seq_at = offsetof(struct sv_pkt, seq);

	if (pos != recv || len < SV_REC_ALIGN || len % SV_REC_ALIGN ||
	    off + len > r->size || end - r->tail > r->size ||
	    (!pad && len > SV_MAX_REC) || (pad && off + len != r->size))
		return -EPROTO;
	if (end - r->tail < r->size)
		sv_ring_poison(r, end);
	if (pad) {
		memset(dst, 0, seq_at);
		dst->opcode = SV_OP_PAD;
	} else {
		/* checked as copied, in one pass: what fails its CRC is
		 * written where no reader looks until the release */
		crc = sv_crc32c_copy(crc, dst, rec, seq_at);
		crc = sv_crc32c(crc, rec + seq_at, sizeof(*dst) - seq_at);
		crc = sv_crc32c_copy(crc, (uint8_t *)dst + sizeof(*dst),
				     rec + sizeof(*dst), len - sizeof(*dst));
		if (crc != want)
			return -EBADMSG;
	}
	dst->rec_len = len;
	sv_ring_release(dst, pos);
	return 0;
}

/* A consumer index from the peer: it never goes back, nor past what we
 * sent. */
static int take_tail(struct sv_ring *r, uint64_t v, uint64_t sent)
{
	uint64_t old =
		atomic_load_explicit(&r->hdr->tail, memory_order_relaxed);

	if (v < old || v > sent)
		return -EPROTO;
	atomic_store_explicit(&r->hdr->tail, v, memory_order_release);
	return 0;
}

static int take_state(struct sv_link *l, const struct sv_tcp_state *s)
{
	struct sv_tcp *t = l->tcp;

	if (s->rnr > SV_RNR_ABORT ||
	    take_tail(&l->tx, s->rx_tail, t->tx_sent) ||
	    take_tail(&l->rsp_tx, s->rsp_tail, t->rsp_sent))
		return -EPROTO;
	/* the completer judges the word itself (comp.c) */
	atomic_store_explicit(&l->tx.hdr->ack, s->ack, memory_order_release);
	/* its handshake word, unless we gave up on that packet already */
	if (atomic_load(&l->tx.hdr->rnr) != SV_RNR_ABORT ||
	    s->rnr != SV_RNR_WAIT)
		atomic_store(&l->tx.hdr->rnr, s->rnr);
	return 0;
}

/* One frame from the peer; -EPROTO if it is not one. */
static int take_frame(struct sv_link *l, const struct sv_tcp_frame *f,
		      const uint8_t *body)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_state s;
	uint32_t expect = SV_RNR_WAIT;
	bool pad = f->type == SV_TF_PAD;
	struct sv_ring *r;
	uint64_t *recv;
	int err;

	switch (f->type) {
	case SV_TF_REC:
	case SV_TF_PAD:
		if (f->ring > SV_TR_RSP)
			return -EPROTO;
		r = f->ring == SV_TR_REQ ? &l->rx : &l->rsp_rx;
		recv = f->ring == SV_TR_REQ ? &t->rx_recv : &t->rsp_recv;
		err = mirror(r, *recv, f->pos, body, f->len, pad,
			     sv_tcp_frame_crc(f, NULL, 0), f->crc);
		if (err)
			return err;
		*recv += f->len;
		return 0;
	case SV_TF_STATE:
		if (!l->tx_ready)
			return -EPROTO;
		memcpy(&s, body, sizeof(s));
		return take_state(l, &s);
	case SV_TF_RNR_ABORT:
		atomic_compare_exchange_strong(&l->rx.hdr->rnr, &expect,
					       SV_RNR_ABORT);
		return 0;
	case SV_TF_BYE:
		t->closed = true;
		return 0;
	}
	return -EPROTO;
}

/* The connection ended (n 0: the peer's FIN) or broke (n < 0). */
static void hang_up(struct sv_tcp *t, ssize_t n)
{
	sv_dbg("qp %06x: tcp: the connection %s\n", t->my_qpn,
	       n ? strerror(errno) : "closed");
	if (!n)
		sv_tcp_peer_eof(t);
	sv_tcp_close_conn(t, sv_now_ns());
}

/*
 * The peer's FIN (a read of 0): its process ended, or its QP without a
 * goodbye, having read every byte its host took — a socket closed with
 * bytes unread sends a reset instead, and our links break a connection
 * for any other reason with a reset (sv_tcp_close_conn).  So each of our
 * request records within the bytes its host acknowledged (SIOCOUTQ:
 * ours not acknowledged yet) was read, and taken by its responder in the
 * same run, whose NAKs and RNR waits are never held (state_may_wait).
 * Its plain ACK may have been: held back in its memory, it went with
 * the process.  Noted here; taken only if the peer proves gone
 * (sv_tcp_eof_ack), as an HCA that received the packets would have
 * acknowledged them.  A peer killed between its read and its responder's
 * run acknowledges so what its responder never took: it is dead either
 * way.
 */
void sv_tcp_peer_eof(struct sv_tcp *t)
{
	int unacked = 0;
	uint64_t took;

	t->eof_valid = false;
	if (ioctl(t->fd, SIOCOUTQ, &unacked) || unacked < 0 ||
	    (uint64_t)unacked > t->out_sent)
		return;
	took = t->out_sent - (uint64_t)unacked;
	for (uint32_t k = 0; k < TOOK_RECS && k < t->took_n; k++) {
		uint32_t i = (t->took_n - 1 - k) % TOOK_RECS;

		if (t->took[i].end <= took) {
			t->eof_psn = t->took[i].psn;
			t->eof_valid = true;
			return;
		}
	}
}

/* The peer is gone: the ACK its FIN implied (sv_tcp_peer_eof), if its
 * last word was a plain ACK before it, for the completer's last run. */
void sv_tcp_eof_ack(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;
	uint64_t ack =
		atomic_load_explicit(&l->tx.hdr->ack, memory_order_relaxed);
	bool none = ack == SV_ACK_NONE;

	if (!t->eof_valid)
		return;
	t->eof_valid = false;
	if ((!none && (SV_ACK_SYN(ack) != SV_ACK ||
		       sv_psn_diff(t->eof_psn, SV_ACK_PSN(ack)) <= 0)) ||
	    atomic_load(&l->tx.hdr->rnr) != SV_RNR_NONE)
		return;
	sv_dbg("qp %06x: tcp: the peer's host took up to PSN %06x before it "
	       "went\n",
	       t->my_qpn, t->eof_psn);
	atomic_store_explicit(
		&l->tx.hdr->ack,
		sv_ack_word(t->eof_psn, SV_ACK, 0, none ? 0 : SV_ACK_SEQ(ack)),
		memory_order_release);
}

/* Body bytes a frame header announces, or -1 if it is not a frame. */
static int64_t body_len(const struct sv_tcp_frame *f)
{
	switch (f->type) {
	case SV_TF_REC:
		return f->len <= SV_MAX_REC ? (int64_t)f->len : -1;
	case SV_TF_STATE:
		return f->len == sizeof(struct sv_tcp_state) ? (int64_t)f->len
							     : -1;
	case SV_TF_PAD:
	case SV_TF_RNR_ABORT:
	case SV_TF_BYE:
		return f->len == 0 || f->type == SV_TF_PAD ? 0 : -1;
	}
	return -1;
}

/*
 * Whether an app's poll may skip its read: one of the SV_TCP_DRAINED_POLLS
 * polls after one that read the socket empty, within SV_TCP_DRAINED_NS of
 * that poll's end (sv_tcp_run_end) and before our next records went
 * (sv_tcp_flush ends the window: the peer may answer them).  Programs that poll
 * a CQ till it is empty before they act made those polls, and each recv found
 * nothing: a system call, 1-2 µs here, on each side of every message of a
 * ping-pong, before the reply went.  libfabric's rxm under Open MPI's ofi MTL
 * makes two: each fi_cq_read polls the verbs CQ first, and it reposts the
 * receive buffer and polls again before the MPI reply is posted (fi_pingpong
 * rdm 8 B across hosts: 17.5 µs a message with one poll skipped, 15.5 with
 * four, medians of six alternated runs).  What the peer sends unasked in the
 * window waits those few polls more; a reply cannot come that soon (ours
 * has not gone).  Only the app's polls (lazy) skip and note.
 */
static bool read_may_wait(struct sv_tcp *t)
{
	uint64_t d = t->drained_ns;

	if (!t->lazy || !d)
		return false;
	if (sv_now_ns() - d >= SV_TCP_DRAINED_NS) {
		t->drained_ns = 0; /* the window closed */
		return false;
	}
	if (++t->skipped >= SV_TCP_DRAINED_POLLS)
		t->drained_ns = 0; /* this poll is its last */
	return !atomic_load_explicit(&t->pfd->hup, memory_order_relaxed);
}

/* Whether a read of n bytes into room took all there was: it did not
 * fill the buffer (no second recv to find EAGAIN) ... unless the edge
 * that brought it said the peer hung up: then its EOF is here too, and
 * no new edge comes.  An app's poll notes when (read_may_wait). */
static bool took_all(struct sv_tcp *t, size_t n, uint32_t room)
{
	if (n >= room ||
	    atomic_load_explicit(&t->pfd->hup, memory_order_relaxed))
		return false;
	if (t->lazy) {
		/* the time comes as the poll ends (sv_tcp_run_end); a run
		 * that ends before (its QP failed) leaves 1: too long ago */
		t->drained_ns = 1;
		t->skipped = 0;
	}
	return true;
}

/* Reads and applies everything the peer sent so far: a read that does
 * not fill the buffer took all there was (what comes after is a new
 * event for the thread, or the app's next poll reads it), so no second
 * read to find EAGAIN — but for the peer's hang-up (t->pfd->hup): its
 * FIN came with the bytes before it, under one edge, so we read on to
 * the EOF (without that the QP never learned its peer had died:
 * test_conf.tcp.attack_peer_acks_then_dies).  No poll(2) before the read
 * either: it spares the socket's lock on an empty poll, but costs a system call
 * on every arrival (8 B ib_send_lat across namespaces: 3.70-3.81 µs typical one
 * way with it, 3.52-3.63 without).  The app's poll right after one that
 * read it empty may not read at all (read_may_wait). */
void sv_tcp_read_in(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;

	if (read_may_wait(t))
		return;
	while (t->conn == CONN_READY && !t->closed) {
		uint32_t off, room;
		ssize_t n;

		/* a partial frame moves to the front only when a whole one
		 * might not fit behind it: not after every read (64 KiB
		 * records: up to one more copy of each) */
		if (t->ioff == t->ilen) {
			t->ioff = t->ilen = 0;
		} else if (IBUF_LEN - t->ilen < FRAME_MAX) {
			memmove(t->ibuf, t->ibuf + t->ioff, t->ilen - t->ioff);
			t->ilen -= t->ioff;
			t->ioff = 0;
		}
		room = IBUF_LEN - t->ilen;
		n = recv(t->fd, t->ibuf + t->ilen, room, MSG_DONTWAIT);
		count_call(t, tcp_reads);
		if (n > 0)
			sv_tsan_received();
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			/* an EOF would have been read: a hang-up said of
			 * an earlier connection on this pfd */
			atomic_store_explicit(&t->pfd->hup, false,
					      memory_order_relaxed);
			return;
		}
		if (n <= 0) { /* hang-up: a call again, or it is gone */
			hang_up(t, n);
			return;
		}
		t->ilen += (uint32_t)n;
		sv_readers_took(&t->rd, (uint64_t)n, sv_progress_ctx());
		for (off = t->ioff;;) {
			struct sv_tcp_frame f;
			const uint8_t *body;
			bool rec;
			int64_t b;
			int err;

			if (t->ilen - off < sizeof(f))
				break;
			memcpy(&f, t->ibuf + off, sizeof(f));
			b = body_len(&f);
			if (b < 0) { /* damaged (or junk): as a bad CRC */
				sv_dbg("qp %06x: tcp: no frame header\n",
				       t->my_qpn);
				sv_tcp_close_conn(t, sv_now_ns());
				return;
			}
			if (t->ilen - off < sizeof(f) + b)
				break;
			/* a record's CRC is checked as it is copied into
			 * the ring (mirror), the rest here; whatever fails
			 * it is damage, not a broken protocol */
			body = t->ibuf + off + sizeof(f);
			rec = f.type == SV_TF_REC;
			err = rec || f.crc == sv_tcp_frame_crc(&f, body,
							       (uint32_t)b)
				      ? take_frame(l, &f, body)
				      : -EBADMSG;
			if (err && err != -EBADMSG && rec &&
			    f.crc != sv_tcp_frame_crc(&f, body, (uint32_t)b))
				err = -EBADMSG;
			if (err == -EBADMSG) {
				/* damaged on the way: as a lost packet, the
				 * sender resends from where we got (its next
				 * connection's hello answer) */
				sv_dbg("qp %06x: tcp: frame fails its CRC\n",
				       t->my_qpn);
				sv_tcp_close_conn(t, sv_now_ns());
				return;
			}
			if (err) {
				sv_dbg("qp %06x: tcp: bad frame type %u len %u "
				       "pos %llu\n",
				       t->my_qpn, f.type, f.len,
				       (unsigned long long)f.pos);
				t->proto_err = true;
				return;
			}
			/* the link works: from now on only a proven call
			 * replaces its connection */
			t->got_frame = t->conn_heard = true;
			t->heard_ns = sv_now_ns();
			off += sizeof(f) + (uint32_t)b;
		}
		t->ioff = off;
		if (took_all(t, (size_t)n, room))
			return;
	}
}

/* Bytes from p on go next: they extend the last piece if it ends
 * there. */
static void put_piece(struct sv_tcp *t, const void *p, uint32_t len)
{
	struct iovec *v = t->on ? &t->iov[t->on - 1] : NULL;

	if (v && (const uint8_t *)v->iov_base + v->iov_len == p)
		v->iov_len += len;
	else
		t->iov[t->on++] = (struct iovec){(void *)p, len};
}

/* Room for one more frame: in_obuf bytes of obuf and two pieces. */
static bool frame_room(const struct sv_tcp *t, uint32_t in_obuf)
{
	return t->on + 2 <= OIOV && OBUF_LEN - t->olen >= in_obuf;
}

/* A frame: its header and a small body in obuf (copy), or a record's
 * body where it is, in our ring, where it stays till the peer consumed
 * it (its consumer index, never past what we put here: take_tail). */
void sv_tcp_put_frame(struct sv_tcp *t, uint16_t type, uint16_t ring,
		      uint32_t len, uint64_t pos, const void *body,
		      uint32_t body_len, bool copy)
{
	struct sv_tcp_frame f = {
		.type = type, .ring = ring, .len = len, .pos = pos};
	uint8_t *h = t->obuf + t->olen;
	uint32_t n = sizeof(f);

	f.crc = sv_tcp_frame_crc(&f, body, body_len);
	memcpy(h, &f, sizeof(f));
	if (copy && body_len) {
		memcpy(h + sizeof(f), body, body_len);
		n += body_len;
	}
	t->olen += n;
	t->out_put += n;
	put_piece(t, h, n);
	if (!copy && body_len) {
		put_piece(t, body, body_len);
		t->obytes += body_len;
		t->out_put += body_len;
	}
}

/* A request record just put: where it ends in the stream, and its last
 * packet's PSN (sv_tcp_peer_eof). */
static void note_took(struct sv_tcp *t, const struct sv_pkt *p)
{
	uint32_t i = t->took_n++ % TOOK_RECS;

	t->took[i].end = t->out_put;
	t->took[i].psn = sv_psn_add(p->psn, p->npsn - 1);
}

/* Appends the records published at *sent onwards while they fit. */
static void put_records(struct sv_tcp *t, struct sv_ring *r, uint16_t ring,
			uint64_t *sent)
{
	for (;;) {
		uint64_t off = *sent & (r->size - 1);
		struct sv_pkt *p = (struct sv_pkt *)(r->data + off);
		uint32_t len;

		/* acquire: as a receiver would (our own thread wrote it) */
		if (atomic_load_explicit((_Atomic uint32_t *)&p->seq,
					 memory_order_acquire) !=
		    sv_rec_seq(*sent))
			return;
		len = p->rec_len;
		if (!frame_room(t, sizeof(struct sv_tcp_frame)))
			return;
		if (p->opcode == SV_OP_PAD) {
			sv_tcp_put_frame(t, SV_TF_PAD, ring, len, *sent, NULL,
					 0, true);
		} else {
			if (t->obytes && t->obytes + len > OUT_MAX)
				return;
			sv_tcp_put_frame(t, SV_TF_REC, ring, len, *sent, p, len,
					 false);
			count_call(t, tcp_records);
			if (ring == SV_TR_REQ)
				note_took(t, p);
		}
		*sent += len;
	}
}

/* Our state now: the ACK word, consumer indexes, RNR. */
static struct sv_tcp_state state_now(const struct sv_link *l)
{
	return (struct sv_tcp_state){
		.rx_tail = atomic_load(&l->rx.hdr->tail),
		.ack = atomic_load(&l->rx.hdr->ack),
		.rsp_tail = atomic_load(&l->rsp_rx.hdr->tail),
		.rnr = atomic_load(&l->rx.hdr->rnr),
	};
}

/* Our state when it changed. */
static void put_state(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;
	struct sv_tcp_state s = state_now(l);

	if (t->sent_valid && !memcmp(&s, &t->sent, sizeof(s)))
		return;
	if (!frame_room(t, sizeof(struct sv_tcp_frame) + sizeof(s)))
		return;
	sv_tcp_put_frame(t, SV_TF_STATE, 0, sizeof(s), 0, &s, sizeof(s), true);
	t->prev = t->sent;
	t->sent = s;
	t->sent_valid = true;
}

/*
 * Whether a state of ours, alone in the pieces, may wait for the next
 * frame to ride with: while the app's poll runs the engine (lazy), a
 * state that only moves on (a plain ACK or none, room in our rings) waits
 * for the reply a ping-pong posts at once.  Each state alone costs a TCP
 * segment, and across hosts that was half of a small message's way (IBA
 * 9.7.5.1.1: a responder may coalesce ACKs).  Where it waits:
 * - in our memory (hold_state) while our waiting states go out with our
 *   records (t->replies: a ping-pong): no system call until the reply's,
 *   a quarter of the round trip.  One state at a time: the app's polls
 *   send it when it moves on again or after SV_TCP_ACK_DELAY_NS, and if
 *   they stop, the progress thread's next look does (sv_tcp_owed;
 *   drive.c has it look within a check period).  If the process ends
 *   before it goes, the peer learns what our host took from our FIN
 *   (sv_tcp_peer_eof): its send completes as on hardware
 *   (attack_peer_acks_then_dies).
 * - else in the kernel, sent with MSG_MORE: a stream's receiver, which
 *   never replies.  The kernel sends it with its answer to the next
 *   segment that comes in, and TCP_NODELAY pushes it after the delay
 *   (push_held).  Held in our memory instead, each second state of a
 *   stream went alone: `ib_send_bw` across hosts 8-10 % slower.
 * A NAK or an RNR change never waits, nor room the peer may wait for.
 */
static bool state_may_wait(const struct sv_link *l)
{
	const struct sv_tcp *t = l->tcp;

	return t->lazy && t->prev_valid && t->sent.rnr == t->prev.rnr &&
	       (SV_ACK_SYN(t->sent.ack) == SV_ACK ||
		t->sent.ack == SV_ACK_NONE /* UC */) &&
	       t->on == 1 &&
	       t->olen == sizeof(struct sv_tcp_frame) +
				  sizeof(struct sv_tcp_state) &&
	       t->rx_recv - t->sent.rx_tail < l->rx.size / 4 &&
	       t->rsp_recv - t->sent.rsp_tail < l->rsp_rx.size / 4 &&
	       (!t->owed_ns || t->in_kernel ||
		(!memcmp(&t->sent, &t->held, sizeof(t->held)) &&
		 sv_now_ns() - t->owed_ns < SV_TCP_ACK_DELAY_NS));
}

/* The state alone in the pieces waits (state_may_wait): taken back, as
 * if never put; the next flush puts the state of then. */
static void hold_state(struct sv_tcp *t)
{
	t->out_put -= t->olen;
	t->held = t->sent;
	t->sent = t->prev;
	t->sent_valid = t->prev_valid;
	sv_tcp_out_reset(t);
	if (!t->owed_ns)
		t->owed_ns = sv_now_ns();
	t->in_kernel = false;
}

/* Sends what the kernel holds of ours (TCP_NODELAY pushes it). */
static void push_held(struct sv_tcp *t)
{
	int one = 1;

	t->owed_ns = 0;
	t->replies = false; /* no reply took it along */
	if (t->conn == CONN_READY)
		setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* n bytes of the pieces went. */
static void out_advance(struct sv_tcp *t, size_t n)
{
	while (n) {
		struct iovec *v = &t->iov[t->oi];

		if (n >= v->iov_len) {
			n -= v->iov_len;
			t->oi++;
		} else {
			v->iov_base = (uint8_t *)v->iov_base + n;
			v->iov_len -= n;
			n = 0;
		}
	}
}

void sv_tcp_flush(struct sv_link *l)
{
	struct sv_tcp *t = l->tcp;

	if (!t || t->conn != CONN_READY || !l->tx_ready || t->defer)
		return;
	for (;;) {
		if (t->oi < t->on) {
			struct msghdr m = {.msg_iov = t->iov + t->oi,
					   .msg_iovlen = t->on - t->oi};
			ssize_t n;

			sv_tsan_sent();
			n = sendmsg(t->fd, &m,
				    MSG_DONTWAIT | MSG_NOSIGNAL |
					    (t->omore ? MSG_MORE : 0));

			count_call(t, tcp_sends);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				/* what the peer said before it went (a NAK,
				 * goodbye) waits unread: ours first */
				sv_tcp_read_in(l);
				if (t->conn == CONN_READY)
					sv_tcp_close_conn(t, sv_now_ns());
				return;
			}
			if (n > 0) {
				if (t->obytes) /* the peer may answer */
					t->drained_ns = 0;
				out_advance(t, (size_t)n);
				t->out_sent += (uint64_t)n;
			}
			if (t->oi < t->on) {
				/* the thread comes back with room (or the
				 * app's next poll does) */
				if (!t->want_out)
					sv_progress_want_out(t->ctx, t->pfd,
							     true);
				t->want_out = true;
				return;
			}
			if (t->omore) {
				if (!t->owed_ns)
					t->owed_ns = sv_now_ns();
				t->in_kernel = true;
			} else if (t->owed_ns) {
				/* our state went with these: a reply took it
				 * along, or it went alone */
				t->replies = t->obytes > 0;
				t->owed_ns = 0;
			}
		}
		if (t->want_out) {
			sv_progress_want_out(t->ctx, t->pfd, false);
			t->want_out = false;
		}
		sv_tcp_out_reset(t);
		t->prev_valid = t->sent_valid;
		put_state(l);
		if (t->abort_pending) {
			sv_tcp_put_frame(t, SV_TF_RNR_ABORT, 0, 0, 0, NULL, 0,
					 true);
			t->abort_pending = false;
		}
		put_records(t, &l->tx, SV_TR_REQ, &t->tx_sent);
		put_records(t, &l->rsp_tx, SV_TR_RSP, &t->rsp_sent);
		if (!t->on)
			break;
		/* held by us while replies take our states along, else by
		 * the kernel (a stream's receiver: see state_may_wait) */
		t->omore = state_may_wait(l);
		if (t->omore && t->replies) {
			hold_state(t);
			break;
		}
	}
	t->omore = false;
	if (t->owed_ns && t->in_kernel &&
	    (!t->lazy || sv_now_ns() - t->owed_ns >= SV_TCP_ACK_DELAY_NS))
		push_held(t);
}

bool sv_tcp_rnr_abort(struct sv_link *l)
{
	uint32_t expect = SV_RNR_WAIT;
	bool defer;

	if (!atomic_compare_exchange_strong(&l->tx.hdr->rnr, &expect,
					    SV_RNR_ABORT))
		return false;
	/* out now, before the completion says it failed: a receive the
	 * responder gets after that must not take the message */
	l->tcp->abort_pending = true;
	defer = l->tcp->defer;
	l->tcp->defer = false;
	sv_tcp_flush(l);
	l->tcp->defer = defer;
	return true;
}

bool sv_tcp_all_sent(const struct sv_link *l)
{
	const struct sv_tcp *t = l->tcp;
	struct sv_tcp_state s;

	if (t->oi != t->on || t->want_out || t->owed_ns || t->abort_pending ||
	    t->tx_sent != l->tx.head || t->rsp_sent != l->rsp_tx.head ||
	    !t->sent_valid)
		return false;
	s = state_now(l);
	return !memcmp(&s, &t->sent, sizeof(s));
}
