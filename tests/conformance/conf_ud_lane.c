// SPDX-License-Identifier: MIT
/*
 * UD lanes (provider/transport/lane.c): UD datagrams between processes of one
 * host through shared memory.  The lane is used (counters on both sides); 8
 * sender processes into one QP, every message exactly once; a hostile
 * lane (garbage records, broken seqs, junk offers) costs only its own
 * datagrams; a receiver asleep in ibv_get_cq_event is woken; a destroyed
 * receiver's QPN, bound again, gets the datagrams on its socket with a
 * new lane, never into the old one; a sender killed mid-stream is reaped.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lane.h"
#include "objects.h"
#include "pair.h"
#include "shm.h"
#include "ud_end.h"
#include "wire.h"

#define LEN  (1 << 22)
#define QKEY 0x22222222u
#define GRH  40

static void ud_open(struct ud_end *u, uint32_t depth, bool channel)
{
	struct ud_end_opts o = ud_end_opts(depth, LEN, QKEY);

	o.channel = channel;
	o.ah = true;
	ud_end_open(u, &o);
}

static void post_recv(struct ud_end *u, uint64_t id, size_t off, uint32_t len)
{
	ASSERT_OK(ud_end_recv(u, u->qp, id, off, len));
}

static void post_send(struct ud_end *u, uint64_t id, size_t off, uint32_t len,
		      uint32_t qpn)
{
	ASSERT_OK(ud_end_send(u, u->qp, id, IBV_WR_SEND, off, len, u->ah, qpn,
			      QKEY));
}

/* One send of a 4-byte counter, waited for. */
static void send_one(struct ud_end *s, uint32_t v, uint32_t qpn)
{
	struct ibv_wc wc;

	memcpy(s->buf, &v, 4);
	post_send(s, v, 0, 4, qpn);
	WAIT_WC(s->cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
}

static uint64_t load64(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

static uint64_t drops(struct ibv_qp *qp)
{
	return __atomic_load_n(&to_sqp(qp)->ud.drops, __ATOMIC_RELAXED);
}

static uint32_t nlanes(struct ibv_qp *qp)
{
	return atomic_load_explicit(&to_sqp(qp)->ud.lanes_accepted,
				    memory_order_relaxed);
}

/* The datagrams reach QP r through a lane: the first goes on the socket
 * with the offer, the rest into the lane, with no receiver set-up. */
SV_TEST(ud_lane_used)
{
	struct ud_end s, r;
	struct ibv_wc wc;

	sv_test_needs_shm("UD lanes (shared memory)");
	ud_open(&r, 64, false);
	ud_open(&s, 64, false);
	for (uint32_t i = 0; i < 200; i++) {
		post_recv(&r, i, 0, 128);
		send_one(&s, i, r.qp->qp_num);
		WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(i, wc.wr_id);
		ASSERT_EQ(s.qp->qp_num, wc.src_qp);
		ASSERT_EQ(GRH + 4, wc.byte_len);
		ASSERT_EQ(0, memcmp(r.buf + GRH, &i, 4));
	}
	/* all but those sent before the lane was accepted */
	ASSERT_TRUE(load64(&to_sqp(r.qp)->ud.lane_rx) >= 150);
	ASSERT_EQ(load64(&to_sqp(r.qp)->ud.lane_rx),
		  load64(&to_sqp(s.qp)->ud.lane_tx));
	ASSERT_EQ(1, nlanes(r.qp));
	ASSERT_EQ(0, drops(r.qp));
	ud_end_close(&s);
	ud_end_close(&r);
}

#define FAN_SENDERS 8
#define FAN_MSGS    256

/* A sender process: FAN_MSGS datagrams {index, seq} to QPN argv[0], at
 * most 16 in flight.  After the first (which offers its lane) it waits
 * for a byte on fd argv[2] (the receiver has taken it, and so the lane);
 * exit 0 only if all the others went through the lane. */
SV_HELPER(ud_lane_sender)
{
	struct ud_end s;
	struct ibv_wc wc;
	uint32_t qpn = (uint32_t)strtoul(argv[0], NULL, 16);
	int idx = atoi(argv[1]), out = 0;
	int go = argc > 2 ? atoi(argv[2]) : -1;
	bool lost0 = false;

	ud_open(&s, 32, false);
	for (int m = 0; m < FAN_MSGS; m++) {
		if (out == 16 || m == 1) {
			WAIT_WC(s.cq, &wc, SV_WC_TIMEOUT_MS);
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
			out--;
		}
		/* no go if the first was lost (no room in time): counted */
		if (m == 1)
			lost0 = load64(&to_sqp(s.qp)->ud.lost) > 0;
		if (m == 1 && go >= 0 && !lost0) {
			char b;

			ASSERT_EQ(1, read(go, &b, 1));
		}
		s.buf[m * 8] = (uint8_t)idx;
		s.buf[m * 8 + 1] = (uint8_t)m;
		s.buf[m * 8 + 2] = (uint8_t)(m >> 8);
		post_send(&s, (uint64_t)m, (size_t)m * 8, 8, qpn);
		out++;
	}
	while (out--) {
		WAIT_WC(s.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	}
	/* what found no room in time is lost, as on a wire: counted */
	printf("lost %llu lane %llu\n",
	       (unsigned long long)load64(&to_sqp(s.qp)->ud.lost),
	       (unsigned long long)load64(&to_sqp(s.qp)->ud.lane_tx));
	if (go >= 0 &&
	    load64(&to_sqp(s.qp)->ud.lane_tx) + load64(&to_sqp(s.qp)->ud.lost) <
		    FAN_MSGS - 1)
		return 3;
	ud_end_close(&s);
	return 0;
}

/* 8 processes, each through its own lane, into one QP: every message
 * exactly once, or lost for want of room and counted by its sender. */
SV_TEST(ud_lane_fan_in_8_processes)
{
	struct ud_end r;
	struct sv_proc p[FAN_SENDERS];
	static uint8_t seen[FAN_SENDERS][FAN_MSGS];
	uint32_t total = FAN_SENDERS * FAN_MSGS, got = 0, lost = 0;
	char qpn[16], idx[FAN_SENDERS][8], go[FAN_SENDERS][16];
	int pfd[FAN_SENDERS][2], done = 0;
	uint64_t end = sv_now_ms() + 30000;
	struct ibv_wc wc;

	sv_test_needs_shm("UD lanes (shared memory)");
	ud_open(&r, total, false);
	for (uint32_t k = 0; k < total; k++)
		post_recv(&r, k, (size_t)k * 64, 64);
	snprintf(qpn, sizeof(qpn), "%x", r.qp->qp_num);
	for (int i = 0; i < FAN_SENDERS; i++) {
		ASSERT_OK(pipe(pfd[i])); /* inherited: the sender's go */
		snprintf(go[i], sizeof(go[i]), "%d", pfd[i][0]);
		snprintf(idx[i], sizeof(idx[i]), "%d", i);
		sv_proc_start_helper(&p[i], "ud_lane_sender",
				     (char *const[]){qpn, idx[i], go[i], NULL},
				     NULL);
	}
	while (done < FAN_SENDERS || got + lost < total) {
		const uint8_t *b;
		int m;

		if (sv_now_ms() > end)
			sv_test_fail(__FILE__, __LINE__,
				     "%u received, %u lost of %u; %d senders "
				     "done",
				     got, lost, total, done);
		for (int i = 0; i < FAN_SENDERS; i++) {
			unsigned long long l, t;

			if (!p[i].pid || !sv_proc_poll(&p[i]))
				continue;
			ASSERT_EQ(0, p[i].status);
			ASSERT_EQ(2, sscanf(p[i].out, "lost %llu lane %llu", &l,
					    &t));
			lost += (uint32_t)l;
			done++;
		}
		if (ibv_poll_cq(r.cq, 1, &wc) != 1)
			continue;
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		b = r.buf + wc.wr_id * 64 + GRH;
		m = b[1] | b[2] << 8;
		ASSERT_TRUE(b[0] < FAN_SENDERS && m < FAN_MSGS);
		ASSERT_EQ(0, seen[b[0]][m]);
		seen[b[0]][m] = 1;
		got++;
		if (!m) /* its lane came with it: the sender may go on */
			ASSERT_EQ(1, write(pfd[b[0]][1], "g", 1));
	}
	NO_WC(r.cq, 50);
	ASSERT_EQ(total, got + lost);
	ASSERT_EQ(0, drops(r.qp));
	/* all but each sender's first (and the lost) through the lanes */
	ASSERT_EQ(got - FAN_SENDERS, load64(&to_sqp(r.qp)->ud.lane_rx));
	if (lost)
		printf("%u of %u lost for want of room\n", lost, total);
	for (int i = 0; i < FAN_SENDERS; i++) {
		sv_proc_free(&p[i]);
		close(pfd[i][0]);
		close(pfd[i][1]);
	}
	ud_end_close(&r);
}

/* A hostile producer's lane, made by hand. */
struct hlane {
	int fd;
	struct sv_lane_hdr *h;
};

static void hlane_make(struct hlane *l, uint32_t qpn, off_t size, int seals)
{
	l->fd = memfd_create("hostile-lane", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ASSERT_GE(l->fd, 0);
	ASSERT_OK(ftruncate(l->fd, size));
	l->h = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED,
		    l->fd, 0);
	ASSERT_TRUE(l->h != MAP_FAILED);
	l->h->magic = SV_LANE_MAGIC;
	l->h->version = SV_LANE_VERSION;
	l->h->slots = SV_LANE_SLOTS;
	l->h->slot_size = SV_LANE_SLOT;
	l->h->dst_qpn = qpn;
	if (seals)
		ASSERT_OK(fcntl(l->fd, F_ADD_SEALS, seals));
}

static struct sv_ud_hdr dgram(uint32_t dst, uint32_t src, uint32_t len)
{
	return (struct sv_ud_hdr){.magic = SV_UD_MAGIC,
				  .version = SV_UD_VERSION,
				  .src_qpn = src,
				  .dst_qpn = dst,
				  .qkey = QKEY,
				  .len = len};
}

/* A datagram d (+ len bytes of 0x77) from our raw socket, with fd. */
static void raw_send(int sock, uint32_t qpn, struct sv_ud_hdr d, int fd)
{
	struct {
		struct sv_ud_hdr h;
		uint8_t data[256];
	} m;
	struct sockaddr_un a;
	struct iovec iov = {&m, sizeof(m.h) + d.len};
	struct msghdr msg = {.msg_name = &a,
			     .msg_namelen = sv_link_qp_addr(&a, qpn),
			     .msg_iov = &iov,
			     .msg_iovlen = 1};
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;

	m.h = d;
	memset(m.data, 0x77, sizeof(m.data));
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		u.c.cmsg_level = SOL_SOCKET;
		u.c.cmsg_type = SCM_RIGHTS;
		u.c.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&u.c), &fd, sizeof(int));
	}
	ASSERT_EQ((ssize_t)iov.iov_len, sendmsg(sock, &msg, 0));
}

/* An empty datagram: a lane's doorbell. */
static void raw_bell(int sock, uint32_t qpn)
{
	struct sockaddr_un a;

	ASSERT_EQ(0, sendto(sock, NULL, 0, 0, (struct sockaddr *)&a,
			    sv_link_qp_addr(&a, qpn)));
}

/* Record n of a hostile lane: header h (seq in rsvd), payload 0x66. */
static void hlane_put(struct hlane *l, uint64_t n, struct sv_ud_hdr h,
		      uint32_t seq)
{
	uint8_t *slot = (uint8_t *)l->h + SV_LANE_DATA_OFF +
			(n % SV_LANE_SLOTS) * SV_LANE_SLOT;
	uint32_t len = h.len <= SV_UD_MTU ? h.len : SV_UD_MTU;

	memset(slot + sizeof(h), 0x66, len);
	h.rsvd = 0;
	memcpy(slot, &h, sizeof(h));
	atomic_store((_Atomic uint32_t *)(slot + 28), seq);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	ASSERT_NOT_NULL(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void wait_drops(struct ibv_qp *qp, struct ibv_cq *cq, uint64_t want)
{
	uint64_t end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	struct ibv_wc wc;

	while (drops(qp) < want) {
		ASSERT_EQ(0, ibv_poll_cq(cq, 1, &wc));
		if (sv_now_ms() > end)
			sv_test_fail(__FILE__, __LINE__, "drops %llu < %llu",
				     (unsigned long long)drops(qp),
				     (unsigned long long)want);
	}
}

/* A producer that writes anything into its lane: garbage records are
 * dropped and counted, a broken seq stalls only its own lane, junk
 * offers are refused without an fd leaked, and another sender's
 * datagrams still arrive through their own lane. */
SV_TEST(ud_lane_hostile_contents)
{
	struct ud_end s, r;
	struct hlane l, junk[4];
	struct ibv_wc wc;
	uint32_t qpn;
	uint64_t d0;
	int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), pfd[2];
	int fds0, k;

	sv_test_needs_shm("UD lanes (shared memory)");
	ASSERT_GE(sock, 0);
	ud_open(&r, 64, false);
	ud_open(&s, 64, false);
	qpn = r.qp->qp_num;
	for (k = 0; k < 32; k++)
		post_recv(&r, (uint64_t)k, (size_t)k * 8192, 8192);

	/* the offer: a datagram with the lane, taken as a datagram too */
	hlane_make(&l, qpn, SV_LANE_BYTES,
		   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	raw_send(sock, qpn, dgram(qpn, 0x123, 8), l.fd);
	WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(0x123, wc.src_qp);
	ASSERT_EQ(SV_LANE_ACCEPTED, atomic_load(&l.h->state));
	d0 = drops(r.qp);

	/* 7 bad records, then a good one */
	for (k = 0; k < 8; k++) {
		struct sv_ud_hdr h = dgram(qpn, 0x456, 16);

		switch (k) {
		case 0:
			h.magic ^= 1;
			break;
		case 1:
			h.len = 0xffffffffu;
			break;
		case 2:
			h.dst_qpn ^= 1;
			break;
		case 3:
			h.dst_qpn = SV_MCAST_QPN;
			h.flags = SV_UD_GRH;
			break;
		case 4:
			h.qkey ^= 1;
			break;
		case 5:
			h.flags = 0x80;
			break;
		case 6:
			h.version++;
			break;
		}
		hlane_put(&l, (uint64_t)k, h, sv_lane_seq((uint64_t)k));
	}
	raw_bell(sock, qpn);
	WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(0x456, wc.src_qp);
	ASSERT_EQ(GRH + 16, wc.byte_len);
	ASSERT_EQ(0x66, r.buf[wc.wr_id * 8192 + GRH + 15]);
	wait_drops(r.qp, r.cq, d0 + 7);
	ASSERT_EQ(8, atomic_load(&l.h->tail));

	/* garbage over every slot and the shared header's words */
	for (size_t i = SV_LANE_DATA_OFF; i < SV_LANE_BYTES; i++)
		((uint8_t *)l.h)[i] = (uint8_t)(i * 131 + 7);
	atomic_store(&l.h->tail, ~0ull);
	atomic_store(&l.h->state, 0xdeadbeef);
	atomic_store(&l.h->rx_sleep, 0x5a5a);
	/* a record two ahead (record 8 missing): its lane waits at 8 */
	hlane_put(&l, 10, dgram(qpn, 0x789, 4), sv_lane_seq(10));
	/* a stale lap's seq at 8: not taken either */
	hlane_put(&l, 8, dgram(qpn, 0x789, 4), sv_lane_seq(8 - SV_LANE_SLOTS));
	NO_WC(r.cq, 50);

	/* another sender's datagrams go on, through their own lane */
	for (uint32_t i = 0; i < 8; i++) {
		send_one(&s, i, qpn);
		WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(s.qp->qp_num, wc.src_qp);
		post_recv(&r, wc.wr_id, wc.wr_id * 8192, 8192);
	}
	ASSERT_TRUE(load64(&to_sqp(s.qp)->ud.lane_tx) > 0);
	ASSERT_EQ(2, nlanes(r.qp));

	/* junk offers: an unsealed memfd, one of the wrong size, one for
	 * another QP, a pipe; none is taken, no fd stays with us */
	hlane_make(&junk[0], qpn, SV_LANE_BYTES, 0);
	hlane_make(&junk[1], qpn, SV_LANE_BYTES + 4096,
		   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	hlane_make(&junk[2], qpn ^ 1, SV_LANE_BYTES,
		   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	ASSERT_OK(pipe2(pfd, O_CLOEXEC));
	fds0 = count_fds();
	for (k = 0; k < 4; k++)
		raw_send(sock, qpn, dgram(qpn, 0x321, 8),
			 k < 3 ? junk[k].fd : pfd[0]);
	for (k = 0; k < 4; k++) {
		WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(0x321, wc.src_qp);
	}
	ASSERT_EQ(fds0, count_fds());
	for (k = 0; k < 3; k++)
		ASSERT_EQ(SV_LANE_OFFERED, atomic_load(&junk[k].h->state));
	ASSERT_EQ(2, nlanes(r.qp));

	/* the hostile lane again, repaired: record 8 is taken */
	hlane_put(&l, 8, dgram(qpn, 0x789, 4), sv_lane_seq(8));
	raw_bell(sock, qpn);
	WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(0x789, wc.src_qp);
	close(pfd[0]);
	close(pfd[1]);
	close(sock);
	ud_end_close(&s);
	ud_end_close(&r);
	/* the receiver said its lane is closed */
	ASSERT_EQ(SV_LANE_CLOSED, atomic_load(&l.h->state));
}

/* A receiver asleep in ibv_get_cq_event is woken by a datagram that
 * goes into its lane (the sender rings its socket). */
SV_TEST(ud_lane_wakes_sleeping_receiver)
{
	struct ud_end s, r;
	struct ibv_wc wc;
	struct ibv_cq *ecq;
	void *ectx;
	struct pollfd pf;
	uint64_t end;

	sv_test_needs_shm("UD lanes (shared memory)");
	ud_open(&r, 64, true);
	ud_open(&s, 64, false);
	for (uint32_t i = 0; i < 4; i++)
		post_recv(&r, i, i * 128, 128);
	/* the lane, in use */
	for (uint32_t i = 0; i < 2; i++) {
		send_one(&s, i, r.qp->qp_num);
		WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	}
	ASSERT_EQ(1, nlanes(r.qp));
	ASSERT_OK(ibv_req_notify_cq(r.cq, 0));
	/* the progress thread takes the QP over and says so in the lane */
	end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	while (!atomic_load(&to_sqp(r.qp)->ud.lanes[0].hdr->rx_sleep)) {
		unsigned int us = 100;

		ASSERT_TRUE(sv_now_ms() < end);
		sv_backoff(&us);
	}
	send_one(&s, 2, r.qp->qp_num);
	pf = (struct pollfd){.fd = r.ch->fd, .events = POLLIN};
	ASSERT_EQ(1, poll(&pf, 1, SV_WC_TIMEOUT_MS));
	ASSERT_OK(ibv_get_cq_event(r.ch, &ecq, &ectx));
	ASSERT_TRUE(ecq == r.cq);
	ibv_ack_cq_events(r.cq, 1);
	ASSERT_EQ(1, ibv_poll_cq(r.cq, 1, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(0, memcmp(r.buf + wc.wr_id * 128 + GRH, &(uint32_t){2}, 4));
	ASSERT_TRUE(load64(&to_sqp(r.qp)->ud.lane_rx) >= 2);
	ud_end_close(&s);
	ud_end_close(&r);
}

/* Receives one datagram on a raw socket within the deadline; its fd (a
 * lane offered) in *fd, or -1. */
static ssize_t raw_recv(int sock, void *buf, size_t len, int *fd)
{
	struct pollfd pf = {.fd = sock, .events = POLLIN};
	struct iovec iov = {buf, len};
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(struct ucred)) +
			 CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n;

	ASSERT_EQ(1, poll(&pf, 1, SV_WC_TIMEOUT_MS));
	n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	*fd = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_type == SCM_RIGHTS)
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	return n;
}

/* The receiver QP destroyed and its QPN bound again (here by a raw
 * socket, as a new QP would be): the sender's next datagrams go to the
 * new owner's socket, the first with a new lane, none into the old lane;
 * a lane the new owner accepts starts at record 0. */
SV_TEST(ud_lane_receiver_destroyed_qpn_reused)
{
	struct ud_end s, r;
	struct ibv_wc wc;
	struct sockaddr_un a;
	struct {
		struct sv_ud_hdr h;
		uint8_t data[64];
	} d;
	uint32_t qpn;
	int sock, one = 1, fd, offers = 0;
	struct sv_lane_hdr *nl = NULL;
	struct stat st;
	ino_t ino = 0;

	sv_test_needs_shm("UD lanes (shared memory)");
	ud_open(&r, 64, false);
	ud_open(&s, 64, false);
	qpn = r.qp->qp_num;
	for (uint32_t i = 0; i < 8; i++) {
		post_recv(&r, i, 0, 128);
		send_one(&s, i, qpn);
		WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
	}
	ASSERT_TRUE(load64(&to_sqp(r.qp)->ud.lane_rx) > 0);
	ASSERT_OK(ibv_destroy_qp(r.qp));
	r.qp = NULL;

	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ASSERT_GE(sock, 0);
	ASSERT_OK(setsockopt(sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)));
	ASSERT_OK(bind(sock, (struct sockaddr *)&a, sv_link_qp_addr(&a, qpn)));
	for (uint32_t i = 100; i < 105; i++) {
		send_one(&s, i, qpn);
		ASSERT_EQ((ssize_t)sizeof(d.h) + 4,
			  raw_recv(sock, &d, sizeof(d), &fd));
		ASSERT_EQ(qpn, d.h.dst_qpn);
		ASSERT_EQ(0, memcmp(d.data, &i, 4));
		if (fd < 0)
			continue;
		offers++;
		ASSERT_OK(fstat(fd, &st));
		if (ino) /* offered again: the same lane */
			ASSERT_EQ(ino, st.st_ino);
		ino = st.st_ino;
		if (!nl) {
			nl = mmap(NULL, SV_LANE_BYTES, PROT_READ | PROT_WRITE,
				  MAP_SHARED, fd, 0);
			ASSERT_TRUE(nl != MAP_FAILED);
			ASSERT_EQ(SV_LANE_OFFERED, atomic_load(&nl->state));
			ASSERT_EQ(qpn, nl->dst_qpn);
		}
		close(fd);
	}
	ASSERT_TRUE(offers >= 1);
	/* the new owner takes the lane: the next datagram is its record 0 */
	atomic_store(&nl->state, SV_LANE_ACCEPTED);
	send_one(&s, 200, qpn);
	{
		const uint8_t *slot = (const uint8_t *)nl + SV_LANE_DATA_OFF;
		struct sv_ud_hdr h;

		memcpy(&h, slot, sizeof(h));
		ASSERT_EQ(sv_lane_seq(0), h.rsvd);
		ASSERT_EQ(4, h.len);
		ASSERT_EQ(0, memcmp(slot + sizeof(h), &(uint32_t){200}, 4));
	}
	munmap(nl, SV_LANE_BYTES);
	close(sock);
	ud_end_close(&s);
	ud_end_close(&r);
}

/* A sender that streams numbered datagrams to QPN argv[0] until killed. */
SV_HELPER(ud_lane_stream)
{
	struct ud_end s;
	struct ibv_wc wc;
	uint32_t qpn = (uint32_t)strtoul(argv[0], NULL, 16);
	int out = 0;

	(void)argc;
	ud_open(&s, 32, false);
	for (uint32_t m = 0;; m++) {
		if (out == 16) {
			WAIT_WC(s.cq, &wc, SV_WC_TIMEOUT_MS);
			out--;
		}
		memcpy(s.buf + (m % 32) * 8, &m, 4);
		post_send(&s, m, (m % 32) * 8, 4, qpn);
		out++;
	}
	return 0;
}

/* A sender killed mid-stream: what it published arrives once, the
 * receiver goes on, and its lane is reaped (when the next lane comes). */
SV_TEST(ud_lane_sender_killed_mid_stream)
{
	struct ud_end r;
	struct sv_proc p;
	char qpn[16], idx[] = "3";
	uint8_t *seen = calloc(1, 1 << 24);
	struct ibv_wc wc;
	uint32_t got = 0, dead_qp = 0;
	int n;

	sv_test_needs_shm("UD lanes (shared memory)");
	ASSERT_NOT_NULL(seen);
	ud_open(&r, 512, false);
	for (uint32_t k = 0; k < 512; k++)
		post_recv(&r, k, (size_t)k * 64, 64);
	snprintf(qpn, sizeof(qpn), "%x", r.qp->qp_num);
	sv_proc_start_helper(&p, "ud_lane_stream", (char *const[]){qpn, NULL},
			     NULL);
	while (load64(&to_sqp(r.qp)->ud.lane_rx) < 300) {
		uint32_t v;

		WAIT_WC(r.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		memcpy(&v, r.buf + wc.wr_id * 64 + GRH, 4);
		ASSERT_TRUE(v < (1u << 24));
		ASSERT_EQ(0, seen[v]);
		seen[v] = 1;
		got++;
		dead_qp = wc.src_qp;
		post_recv(&r, wc.wr_id, wc.wr_id * 64, 64);
	}
	sv_proc_kill(&p); /* SIGKILL, reaped: its pid is gone */
	sv_proc_free(&p);
	while ((n = ibv_poll_cq(r.cq, 1, &wc)) == 1 || !got) {
		uint32_t v;

		if (!n)
			continue;
		memcpy(&v, r.buf + wc.wr_id * 64 + GRH, 4);
		ASSERT_EQ(0, seen[v]);
		seen[v] = 1;
		post_recv(&r, wc.wr_id, wc.wr_id * 64, 64);
	}
	ASSERT_EQ(1, nlanes(r.qp));
	/* a new sender's lane: the dead one's is reaped to make room */
	sv_proc_start_helper(&p, "ud_lane_sender",
			     (char *const[]){qpn, idx, NULL}, NULL);
	for (int k = 0; k < FAN_MSGS; k++) {
		WAIT_WC(r.cq, &wc, 20000);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_NE(dead_qp, wc.src_qp); /* all its own were taken */
		post_recv(&r, wc.wr_id, wc.wr_id * 64, 64);
	}
	sv_proc_wait(&p, 20000);
	ASSERT_EQ(0, p.status);
	sv_proc_free(&p);
	ASSERT_EQ(1, nlanes(r.qp));
	free(seen);
	ud_end_close(&r);
}
