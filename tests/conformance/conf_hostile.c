// SPDX-License-Identifier: MIT
/*
 * A hostile shared-memory peer.  The test speaks the provider's shm
 * protocol itself (shm.c: abstract socket "\0softverbs/qp/%06x", a
 * 24-byte SOCK_SEQPACKET hello with SCM_RIGHTS [sealed request ring memfd,
 * response ring memfd]; ring.h) and
 * (a) sends malformed hellos to a victim QP, which must stay usable;
 * (b) after a proper handshake writes garbage records into the victim's
 * receive ring, which must give errors: no crash, no hang, and no byte
 * written outside the posted receive buffer (guards inside the MR).
 */
#include <stddef.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "pair.h"
#include "peer.h"

/* Waits until the victim hangs up on fd: it rejected what we sent. */
static void expect_hangup(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;

	ASSERT_EQ(1, poll(&p, 1, SV_WC_TIMEOUT_MS));
	ASSERT_EQ(0, read(fd, &c, 1));
	close(fd);
}

SV_TEST(hostile_bad_hellos)
{
	struct sv_pair p;
	struct sv_end a, b;
	struct ibv_wc wc;
	uint32_t victim;
	struct sv_hello h;
	int pfd[2], fd, ring;

	ASSERT_OK(pipe(pfd));
	sv_end_open(&a, NULL);
	sv_end_open(&b, NULL);
	b.o.psn = 0x5678;
	victim = a.qp->qp_num;
	h = sv_peer_hello(b.qp->qp_num, victim);

	/* truncated hello */
	fd = sv_peer_connect(victim);
	sv_send_fds(fd, &h, 10, NULL, 0);
	shutdown(fd, SHUT_WR);
	expect_hangup(fd);
	/* wrong magic, with proper fds */
	ring = sv_peer_ring(b.qp->qp_num, SV_RING_MAGIC, true, false);
	fd = sv_peer_connect(victim);
	h.magic = 0xbadc0de;
	sv_send_fds(fd, &h, sizeof(h), (int[]){ring, ring}, 2);
	expect_hangup(fd);
	h.magic = SV_HELLO_MAGIC;
	/* no fds */
	fd = sv_peer_connect(victim);
	sv_send_fds(fd, &h, sizeof(h), NULL, 0);
	expect_hangup(fd);
	/* one fd */
	fd = sv_peer_connect(victim);
	sv_send_fds(fd, &h, sizeof(h), &ring, 1);
	expect_hangup(fd);
	/* a pipe instead of the response ring */
	fd = sv_peer_connect(victim);
	sv_send_fds(fd, &h, sizeof(h), (int[]){ring, pfd[1]}, 2);
	expect_hangup(fd);
	/* three fds: neither a hello without shared memory nor one with */
	fd = sv_peer_connect(victim);
	sv_send_fds(fd, &h, sizeof(h), (int[]){ring, ring, ring}, 3);
	expect_hangup(fd);
	close(ring);
	/* an unsealed memfd: we could shrink it under the victim */
	ring = sv_peer_ring(b.qp->qp_num, SV_RING_MAGIC, false, false);
	fd = sv_peer_connect(victim);
	sv_send_fds(fd, &h, sizeof(h), (int[]){ring, ring}, 2);
	expect_hangup(fd);
	close(ring);
	/* a sealed ring with a bad header */
	ring = sv_peer_ring(b.qp->qp_num, 0x12345678, true, false);
	fd = sv_peer_connect(victim);
	sv_send_fds(fd, &h, sizeof(h), (int[]){ring, ring}, 2);
	expect_hangup(fd);
	close(ring);
	/* a hello addressed to another QPN */
	ring = sv_peer_ring(b.qp->qp_num, SV_RING_MAGIC, true, false);
	fd = sv_peer_connect(victim);
	h.dst_qpn = victim ^ 1;
	sv_send_fds(fd, &h, sizeof(h), (int[]){ring, ring}, 2);
	expect_hangup(fd);
	close(ring);

	/* the victim still connects to its real peer and works both ways */
	sv_end_connect(&a, b.qp->qp_num, b.o.psn);
	sv_end_connect(&b, a.qp->qp_num, a.o.psn);
	p.a = a;
	p.b = b;
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 64));
	ASSERT_OK(sv_end_recv(&p.a, 2, 0, 64));
	sv_fill(p.a.buf + 1024, 64, 1);
	sv_fill(p.b.buf + 1024, 64, 2);
	ASSERT_OK(sv_end_send(&p.a, 3, 1024, 64, 0));
	ASSERT_OK(sv_end_send(&p.b, 4, 1024, 64, 0));
	WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(-1, sv_check(p.b.buf, 64, 1));
	WAIT_WC(p.a.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(-1, sv_check(p.a.buf, 64, 2));
	WAIT_WC(p.a.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	WAIT_WC(p.b.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	close(pfd[0]);
	close(pfd[1]);
	sv_pair_close(&p);
}

/* A peer that connects and never sends its hello must not keep the
 * victim from taking the real peer's hello. */
SV_TEST(hostile_stalled_hello)
{
	struct sv_pair p;
	int stall;

	sv_end_open(&p.a, NULL);
	sv_end_open(&p.b, NULL);
	p.b.o.psn = 0x5678;
	stall = sv_peer_connect(p.a.qp->qp_num);
	sv_end_connect(&p.a, p.b.qp->qp_num, p.b.o.psn);
	sv_end_connect(&p.b, p.a.qp->qp_num, p.a.o.psn);
	/* a sends: it needs b's hello (its transmit ring) */
	sv_pair_ping(&p);
	close(stall);
	sv_pair_close(&p);
}

/* The victim's receive buffer sits between guards inside its MR. */
#define GUARD 512
#define RBUF  256
#define RPSN  0x100

struct hostile {
	struct sv_end v;  /* the victim */
	struct sv_fake f; /* our fake QP, with the victim's rings */
	int my_ring;
	int my_rsp; /* our response ring, never written by us */
};

/* Victim in RTS toward our fake QP, a receive posted, handshake done. */
static void hostile_setup(struct hostile *H)
{
	memset(H, 0, sizeof(*H));
	sv_fake_bind(&H->f);
	sv_end_open(&H->v, NULL);
	memset(H->v.buf, 0xa5, 2 * GUARD + RBUF);
	ASSERT_OK(sv_end_to_init(&H->v));
	ASSERT_OK(sv_end_recv(&H->v, 77, GUARD, RBUF));
	ASSERT_OK(sv_end_to_rtr(&H->v, H->f.qpn, RPSN));
	ASSERT_OK(sv_end_to_rts(&H->v));
	sv_fake_accept(&H->f, H->v.qp->qp_num);

	/* our hello: a proper ring so the victim's link comes up */
	H->my_ring = sv_peer_ring(H->f.qpn, SV_RING_MAGIC, true, false);
	H->my_rsp = sv_peer_ring(H->f.qpn, SV_RING_MAGIC, true, false);
	sv_fake_hello(&H->f, H->v.qp->qp_num, (int[]){H->my_ring, H->my_rsp}, 2,
		      0);
}

/* One record into the victim's request ring (sv_fake_put). */
static void put_rec(struct hostile *H, const struct sv_pkt *pkt,
		    const void *payload, uint32_t plen, uint64_t advance)
{
	sv_fake_put(&H->f, &H->f.rx, pkt, payload, plen, advance);
}

static uint32_t rec_len(uint32_t plen)
{
	return sv_peer_rec_len(plen);
}

static struct sv_pkt good_pkt(uint32_t len)
{
	return (struct sv_pkt){.opcode = SV_OP_SEND,
			       .seg = SV_SEG_ONLY,
			       .psn = RPSN,
			       .npsn = 1,
			       .len = len,
			       .msg_len = len,
			       .rec_len = rec_len(len)};
}

static void check_guards(struct hostile *H)
{
	for (int i = 0; i < GUARD; i++) {
		ASSERT_EQ(0xa5, H->v.buf[i]);
		ASSERT_EQ(0xa5, H->v.buf[GUARD + RBUF + i]);
	}
}

/* The victim fails the receive and goes to ERR; guards intact. */
static void expect_error(struct hostile *H)
{
	struct ibv_wc wc;

	WAIT_WC(H->v.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(77, wc.wr_id);
	ASSERT_NE(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&H->v));
	check_guards(H);
	/* and it stays usable as an object: new WRs flush */
	ASSERT_OK(sv_end_recv(&H->v, 78, GUARD, RBUF));
	WAIT_WC(H->v.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status);
}

static void hostile_close(struct hostile *H)
{
	close(H->my_ring);
	close(H->my_rsp);
	sv_fake_close(&H->f);
	sv_end_close(&H->v);
}

static const uint8_t junk[4096] = {[0 ... 4095] = 0xcc};

SV_TEST(hostile_rec_len_not_aligned)
{
	struct hostile H;
	struct sv_pkt p;

	hostile_setup(&H);
	p = good_pkt(16);
	p.rec_len = 72; /* not a multiple of 64 */
	put_rec(&H, &p, junk, 16, 128);
	expect_error(&H);
	hostile_close(&H);
}

SV_TEST(hostile_rec_len_beyond_head)
{
	struct hostile H;
	struct sv_pkt p;

	hostile_setup(&H);
	p = good_pkt(16);
	p.rec_len = 1 << 20; /* more than was published, more than the ring */
	put_rec(&H, &p, junk, 16, 64);
	expect_error(&H);
	hostile_close(&H);
}

SV_TEST(hostile_len_beyond_record)
{
	struct hostile H;
	struct sv_pkt p;

	hostile_setup(&H);
	p = good_pkt(16);
	p.len = 200; /* the record holds 32 bytes of payload */
	p.msg_len = 200;
	put_rec(&H, &p, junk, 16, p.rec_len);
	expect_error(&H);
	hostile_close(&H);
}

/* The victim trusts only each record's own seq: a record published for
 * another lap of the ring is never taken, and the next good one is. */
SV_TEST(hostile_record_of_another_lap)
{
	struct hostile H;
	struct sv_pkt p = good_pkt(16);
	struct ibv_wc wc;
	uint64_t at;

	hostile_setup(&H);
	at = H.f.rx.head;
	H.f.rx.head += H.f.rx.size; /* publish it with next lap's seq */
	put_rec(&H, &p, junk, 16, 0);
	H.f.rx.head = at;
	NO_WC(H.v.rcq, 200);
	check_guards(&H);
	put_rec(&H, &p, junk, 16, p.rec_len);
	WAIT_WC(H.v.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(16, wc.byte_len);
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&H.v));
	check_guards(&H);
	hostile_close(&H);
}

SV_TEST(hostile_unknown_opcode)
{
	struct hostile H;
	struct sv_pkt p;

	hostile_setup(&H);
	p = good_pkt(16);
	p.opcode = 0x42;
	put_rec(&H, &p, junk, 16, p.rec_len);
	expect_error(&H);
	hostile_close(&H);
}

SV_TEST(hostile_message_longer_than_receive)
{
	struct hostile H;
	struct sv_pkt p;

	hostile_setup(&H);
	p = good_pkt(RBUF + GUARD); /* fits the record, not the receive */
	put_rec(&H, &p, junk, RBUF + GUARD, p.rec_len);
	expect_error(&H);
	hostile_close(&H);
}

SV_TEST(hostile_train_longer_than_message)
{
	struct hostile H;
	struct sv_pkt p;

	hostile_setup(&H);
	p = good_pkt(RBUF + GUARD);
	p.msg_len = 64; /* the header says 64, the train carries 768 */
	p.seg = SV_SEG_FIRST;
	put_rec(&H, &p, junk, RBUF + GUARD, p.rec_len);
	expect_error(&H);
	hostile_close(&H);
}

SV_TEST(hostile_middle_without_first)
{
	struct hostile H;
	struct sv_pkt p;

	hostile_setup(&H);
	p = good_pkt(64);
	p.seg = SV_SEG_LAST;
	put_rec(&H, &p, junk, 64, p.rec_len);
	expect_error(&H);
	hostile_close(&H);
}

SV_TEST(hostile_wrong_psn)
{
	struct hostile H;
	struct sv_pkt p;
	struct ibv_wc wc;
	uint64_t ack, end;

	hostile_setup(&H);
	p = good_pkt(64);
	p.psn = RPSN + 5; /* ahead of what the victim expects */
	put_rec(&H, &p, junk, 64, p.rec_len);
	/* IBA 9.7.5.2.3: the responder NAKs a PSN sequence error with the
	 * PSN it expects, and places nothing */
	end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	do {
		ASSERT_TRUE(sv_now_ms() < end);
		ASSERT_EQ(0, ibv_poll_cq(H.v.rcq, 1, &wc));
		ack = atomic_load(&H.f.rx.hdr->ack);
	} while (SV_ACK_SYN(ack) != SV_NAK_SEQ);
	ASSERT_EQ(RPSN, SV_ACK_PSN(ack));
	check_guards(&H);
	/* the right PSN is then accepted */
	p = good_pkt(64);
	put_rec(&H, &p, junk, 64, p.rec_len);
	WAIT_WC(H.v.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(64, wc.byte_len);
	ASSERT_EQ(0xcc, H.v.buf[GUARD]);
	ASSERT_EQ(0xa5, H.v.buf[GUARD + 64]);
	check_guards(&H);
	hostile_close(&H);
}

/*
 * Records seen by the victim in one run: all but the first are written
 * first, each published by its seq, so the first one's seq makes them
 * all visible at once (sv_fake_put publishes one at a time).
 */
static void put_run(struct hostile *H, const struct sv_pkt *const *p,
		    unsigned int n, uint32_t plen)
{
	struct sv_peer_tx *t = &H->f.rx;
	uint64_t at = t->head + p[0]->rec_len;

	for (unsigned int i = 1; i < n; i++) {
		uint8_t *pb = t->data + (at & (t->size - 1));

		memcpy(pb, p[i], offsetof(struct sv_pkt, seq));
		memcpy(pb + sizeof(*p[i]), junk, plen);
		atomic_store_explicit(
			(_Atomic uint32_t *)&((struct sv_pkt *)pb)->seq,
			sv_rec_seq(at), memory_order_release);
		at += p[i]->rec_len;
	}
	put_rec(H, p[0], junk, plen, at - t->head); /* the first, rung */
}

static void put_two(struct hostile *H, const struct sv_pkt *a,
		    const struct sv_pkt *b, uint32_t plen)
{
	const struct sv_pkt *p[] = {a, b};

	put_run(H, p, 2, plen);
}

/* The message at RPSN received (the receive posted, 77) once its gap was
 * filled; the ack word then a NAK-seq at RPSN + 1, for what was
 * discarded after it: that word. */
static uint64_t naked_after_the_gap(struct hostile *H)
{
	struct ibv_wc wc;
	uint64_t ack;

	WAIT_WC(H->v.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(77, wc.wr_id);
	ack = atomic_load(&H->f.rx.hdr->ack);
	ASSERT_EQ(SV_NAK_SEQ, SV_ACK_SYN(ack));
	ASSERT_EQ(RPSN + 1, SV_ACK_PSN(ack));
	return ack;
}

/*
 * A packet overtaken by the one after it (reordered on the wire), both
 * in one run: the later one is out of sequence (NAK-seq for the one we
 * expect, and discarded), the late one fills the gap and is taken.  The
 * requester must then hear a NAK-seq at the PSN after it, for the one
 * discarded; before (resp.c refill_nak) the NAK, not sent yet, became
 * the late packet's ACK and the requester waited for its ACK timer.
 */
SV_TEST(hostile_gap_filled_in_one_run_naks_what_was_discarded)
{
	struct sv_pkt late = good_pkt(64), early = good_pkt(64);
	struct hostile H;

	hostile_setup(&H);
	early.psn = RPSN + 1;
	put_two(&H, &early, &late, 64);
	naked_after_the_gap(&H);
	check_guards(&H);
	hostile_close(&H);
}

/*
 * A requester's second round overtaken by its own second packet: the
 * victim sees PSN +2 (a gap: NAK-seq for the one we expect), then +1, at
 * or before the last one discarded (the look of a new round whose first
 * packet was lost), then the one we expect.  +1 was only a late packet
 * of the reordered round: the victim must not NAK it again, which sent
 * the round a second time (SOFTVERBS_FAULTS reorder_out over RoCE: two
 * or three rounds, and an ACK timeout under load).  NAKs: the gap's, and
 * refill_nak's for +1 once the gap is filled; 3 before (check_psn).
 */
SV_TEST(hostile_late_packet_of_a_round_is_not_naked_again)
{
	struct sv_pkt p0 = good_pkt(64), p1 = good_pkt(64), p2 = good_pkt(64);
	const struct sv_pkt *run[] = {&p2, &p1, &p0};
	struct hostile H;

	hostile_setup(&H);
	p2.psn = RPSN + 2;
	p1.psn = RPSN + 1;
	put_run(&H, run, 3, 64);
	ASSERT_EQ(2, SV_ACK_SEQ(naked_after_the_gap(&H)));
	check_guards(&H);
	hostile_close(&H);
}

/* --- an SRQ's lent receives (srq.c lend) --------------------------------- */

static struct ibv_qp *srq_qp(struct sv_end *e, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = e->scq,
		.recv_cq = e->rcq,
		.srq = srq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {.max_send_wr = 16, .max_send_sge = 1},
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);

	ASSERT_NOT_NULL(qp);
	return qp;
}

static void srq_post(struct sv_end *e, struct ibv_srq *srq, uint64_t wr_id)
{
	struct ibv_sge sg = {.addr = (uintptr_t)(e->buf + 256 * wr_id),
			     .length = 256,
			     .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad = NULL;

	ASSERT_OK(ibv_post_srq_recv(srq, &wr, &bad));
}

/*
 * The victim's QP is on an SRQ that lends it receives for single copy,
 * shown to us in the descriptors after the ring we write (ring.h), where
 * we claim one by a CAS of its seq.  We mark every descriptor claimed, so
 * the victim can never take those receives back: that strands at most
 * the share lent to our QP, never another QP's, and when our QP fails
 * they complete flushed, to the application, none lost; the victim's
 * other QP on the SRQ receives all along.
 */
SV_TEST(hostile_srq_peer_claims_every_lent_receive)
{
	sv_test_needs_shm("single copy into an SRQ's receives");
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	struct ibv_async_event ev;
	struct sv_pkt p = good_pkt(16);
	struct ibv_qp *b2, *vqp;
	struct ibv_srq *srq;
	struct hostile H;
	struct sv_end a;
	uint32_t seen = 0;
	struct ibv_wc wc;

	memset(&H, 0, sizeof(H));
	sv_fake_bind(&H.f);
	sv_end_open(&H.v, NULL);
	sv_end_open(&a, NULL);
	srq = ibv_create_srq(H.v.pd, &sa);
	ASSERT_NOT_NULL(srq);
	ASSERT_OK(ibv_destroy_qp(H.v.qp));
	vqp = H.v.qp = srq_qp(&H.v, srq);
	ASSERT_OK(sv_end_to_init(&H.v));
	ASSERT_OK(sv_end_to_rtr(&H.v, H.f.qpn, RPSN));
	ASSERT_OK(sv_end_to_rts(&H.v));
	sv_fake_accept(&H.f, vqp->qp_num);
	ASSERT_TRUE(H.f.rx.ndesc > 0);
	H.my_ring = sv_peer_ring(H.f.qpn, SV_RING_MAGIC, true, false);
	H.my_rsp = sv_peer_ring(H.f.qpn, SV_RING_MAGIC, true, false);
	sv_fake_hello(&H.f, vqp->qp_num, (int[]){H.my_ring, H.my_rsp}, 2, 0);
	/* the victim's second QP on the SRQ, with an honest peer */
	b2 = srq_qp(&H.v, srq);
	H.v.qp = b2;
	a.o.psn = 0x300;
	H.v.o.psn = 0x400;
	sv_end_connect(&a, b2->qp_num, 0x400);
	sv_end_connect(&H.v, a.qp->qp_num, 0x300);
	H.v.qp = vqp;
	for (uint64_t i = 0; i < 8; i++)
		srq_post(&H.v, srq, i);

	/* our QP takes receive 0 and is lent its share of the other 7 */
	put_rec(&H, &p, junk, 16, p.rec_len);
	WAIT_WC(H.v.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(0, wc.wr_id);
	ASSERT_EQ(vqp->qp_num, wc.qp_num);
	for (uint32_t i = 1; i <= 3; i++) /* shown to us: 7 / 2 QPs */
		ASSERT_EQ(i + 1, atomic_load(&H.f.rx.desc[i].seq));
	ASSERT_EQ(0, atomic_load(&H.f.rx.desc[4].seq));
	for (uint32_t i = 0; i < H.f.rx.ndesc; i++)
		atomic_store(&H.f.rx.desc[i].seq, 0); /* "claimed" */

	/* the honest QP gets the 4 receives not lent to us */
	for (int i = 0; i < 4; i++) {
		ASSERT_OK(sv_end_send(&a, 200, 0, 64, 0));
		WAIT_WC(H.v.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(b2->qp_num, wc.qp_num);
		ASSERT_TRUE(wc.wr_id >= 4 && wc.wr_id < 8);
		ASSERT_EQ(0, seen & (1u << wc.wr_id));
		seen |= 1u << wc.wr_id;
		EXPECT_WC(a.scq, IBV_WC_SUCCESS, 200);
	}
	/* the next waits in RNR: the 3 lent to us stay ours */
	ASSERT_OK(sv_end_send(&a, 201, 0, 64, 0));
	NO_WC(H.v.rcq, 50);

	/* our QP fails: what it held comes back flushed, in order */
	ASSERT_OK(ibv_modify_qp(vqp, &err, IBV_QP_STATE));
	for (uint64_t i = 1; i <= 3; i++) {
		WAIT_WC(H.v.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status);
		ASSERT_EQ(i, wc.wr_id);
		ASSERT_EQ(vqp->qp_num, wc.qp_num);
	}
	ASSERT_TRUE(ibv_get_async_event(H.v.ctx, &ev) == 0);
	ASSERT_EQ(IBV_EVENT_QP_LAST_WQE_REACHED, ev.event_type);
	ibv_ack_async_event(&ev);
	/* and the SRQ goes on: a new receive takes the waiting message */
	srq_post(&H.v, srq, 9);
	WAIT_WC(H.v.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(9, wc.wr_id);
	ASSERT_EQ(b2->qp_num, wc.qp_num);
	EXPECT_WC(a.scq, IBV_WC_SUCCESS, 201);

	ASSERT_OK(ibv_destroy_qp(b2));
	sv_end_close(&a);
	ASSERT_OK(ibv_destroy_qp(vqp));
	H.v.qp = NULL;
	ASSERT_OK(ibv_destroy_srq(srq));
	hostile_close(&H);
}
