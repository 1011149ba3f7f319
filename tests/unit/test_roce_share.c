// SPDX-License-Identifier: MIT
/*
 * RoCEv2 links of one process on one four-tuple (transport/roce/
 * share.c): the second takes a duplicate of the first's socket, and each
 * datagram reaches the link its BTH names exactly once, whichever of
 * them read it, with both reading at once from their own threads as a
 * QP's app and the progress thread do; and a four-tuple another process
 * has is refused.  share.c alone, on real UDP sockets on 127.0.0.1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progress.h"
#include "roce_priv.h"
#include "sv_test.h"

#define N     20000u /* datagrams sent, half to each link */
#define SLOT  256u
#define QPN_A 0x000a11u
#define QPN_B 0x000b22u

struct end {
	struct sv_roce r;
	struct sv_qp_stats st;
	struct sv_pfd pfd; /* r.pfd: rung when another fills its mail */
	_Atomic uint32_t rung;
	uint8_t *seen;		/* by sequence number: times taken */
	_Atomic uint32_t taken; /* datagrams that came to us */
	_Atomic uint32_t wrong; /* ... for another QPN */
	_Atomic bool stop;
};

/* The loop's, here: counts the rings of each end's pfd. */
void sv_pfd_ring(struct sv_context *ctx, struct sv_pfd *p)
{
	(void)ctx;
	atomic_fetch_add(&container_of(p, struct end, pfd)->rung, 1);
}

static void end_init(struct end *e, uint32_t qpn)
{
	memset(e, 0, sizeof(*e));
	e->r.pfd = &e->pfd;
	e->r.my_qpn = qpn;
	e->r.islot = SLOT;
	e->r.rx_fd = -1;
	e->r.stats = &e->st;
	e->r.ibuf = malloc((size_t)SV_ROCE_BATCH * SLOT);
	e->seen = calloc(N, 1);
	ASSERT_TRUE(e->r.ibuf && e->seen);
}

static void end_fini(struct end *e)
{
	sv_roce_share_close(&e->r);
	close(e->r.rx_fd);
	free(e->r.ibuf);
	free(e->seen);
}

/* One link's reader: takes what its reads give, as in.c's take_read. */
static void *reader(void *arg)
{
	struct end *e = arg;

	while (!atomic_load(&e->stop)) {
		sv_roce_share_read(&e->r);
		for (uint32_t i = 0; i < e->r.icount; i++) {
			const uint8_t *d = e->r.ibuf + (size_t)i * SLOT;
			uint32_t q, seq;

			if (e->r.ilen[i] == SV_ROCE_GONE)
				continue;
			q = (uint32_t)d[5] << 16 | (uint32_t)d[6] << 8 | d[7];
			memcpy(&seq, d + 12, 4);
			if (q != e->r.my_qpn || seq >= N) {
				atomic_fetch_add(&e->wrong, 1);
				continue;
			}
			e->seen[seq]++;
			atomic_fetch_add(&e->taken, 1);
		}
		e->r.icount = 0;
	}
	return NULL;
}

static uint16_t port_of(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	ASSERT_OK(getsockname(fd, (struct sockaddr *)&a, &len));
	return ntohs(a.sin_port);
}

/* A four-tuple on 127.0.0.1: me, a free port standing for our 4791,
 * and peer, the port of the returned socket the datagrams come from. */
static int tuple(union sv_sockaddr *me, union sv_sockaddr *peer)
{
	int tx, probe;

	me->in = (struct sockaddr_in){.sin_family = AF_INET};
	me->in.sin_addr.s_addr = htonl(0x7f000001);
	peer->in = me->in;
	tx = sv_roce_udp_socket(peer);
	ASSERT_TRUE(tx >= 0);
	peer->in.sin_port = htons(port_of(tx));
	probe = sv_roce_udp_socket(me);
	ASSERT_TRUE(probe >= 0);
	me->in.sin_port = htons(port_of(probe));
	close(probe);
	return tx;
}

/* One datagram from tx: a BTH naming QPN q, then sequence number seq. */
static void send_one(int tx, uint32_t q, uint32_t seq)
{
	uint8_t d[64] = {[5] = (uint8_t)(q >> 16),
			 [6] = (uint8_t)(q >> 8),
			 [7] = (uint8_t)q};

	memcpy(d + 12, &seq, 4);
	ASSERT_EQ(sizeof(d), send(tx, d, sizeof(d), 0));
}

SV_TEST(roce_share_each_datagram_reaches_its_link_once)
{
	union sv_sockaddr me, peer;
	struct end a, b;
	pthread_t ta, tb;
	uint64_t end;
	int tx;

	tx = tuple(&me, &peer);

	end_init(&a, QPN_A);
	end_init(&b, QPN_B);
	ASSERT_OK(
		sv_roce_share_open(&a.r, &me, &peer, ntohs(peer.in.sin_port)));
	ASSERT_TRUE(!atomic_load(&a.r.shared)); /* alone: no lock */
	ASSERT_OK(
		sv_roce_share_open(&b.r, &me, &peer, ntohs(peer.in.sin_port)));
	ASSERT_TRUE(atomic_load(&a.r.shared) && atomic_load(&b.r.shared));
	ASSERT_TRUE(a.r.rx_fd != b.r.rx_fd);
	ASSERT_OK(connect(tx, &me.sa, sizeof(me.in)));

	ASSERT_OK(pthread_create(&ta, NULL, reader, &a));
	ASSERT_OK(pthread_create(&tb, NULL, reader, &b));
	end = sv_now_ms() + 30000;
	for (uint32_t seq = 0; seq < N; seq++) {
		uint32_t q = seq & 1 ? QPN_B : QPN_A;

		/* at most 64 in flight, 32 for each: a mailbox (64) never
		 * overflows, however late its reader runs */
		while (seq - atomic_load(&a.taken) - atomic_load(&b.taken) -
			       atomic_load(&a.wrong) - atomic_load(&b.wrong) >=
		       64) {
			ASSERT_TRUE(sv_now_ms() < end);
			sched_yield();
		}
		send_one(tx, q, seq);
	}
	while (atomic_load(&a.taken) + atomic_load(&b.taken) +
		       a.st.roce_drop_full + b.st.roce_drop_full <
	       N) {
		ASSERT_TRUE(sv_now_ms() < end);
		sched_yield();
	}
	atomic_store(&a.stop, true);
	atomic_store(&b.stop, true);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);

	ASSERT_EQ(0, atomic_load(&a.wrong));
	ASSERT_EQ(0, atomic_load(&b.wrong));
	ASSERT_EQ(0, a.st.roce_drop_full + b.st.roce_drop_full);
	for (uint32_t seq = 0; seq < N; seq++)
		ASSERT_EQ(1, (seq & 1 ? b.seen : a.seen)[seq]);
	ASSERT_EQ(N, atomic_load(&a.taken) + atomic_load(&b.taken));

	/* each passes the other's on: one reader at a time (two readers at
	 * once need not both read: one may take all on a loaded machine),
	 * and rings the other, whose socket's edge may never come (epoll
	 * says only what is still there to read) */
	for (int k = 0; k < 2; k++) {
		struct end *rd = k ? &b : &a, *other = k ? &a : &b;
		uint64_t passed = rd->st.roce_passed;
		uint32_t mine = 0, rung = atomic_load(&other->rung);

		send_one(tx, QPN_A, k);
		send_one(tx, QPN_B, k);
		while (rd->st.roce_passed == passed || !mine) {
			ASSERT_TRUE(sv_now_ms() < end);
			sv_roce_share_read(&rd->r);
			for (uint32_t i = 0; i < rd->r.icount; i++)
				mine += rd->r.ilen[i] != SV_ROCE_GONE;
			rd->r.icount = 0;
		}
		ASSERT_EQ(1, mine);
		ASSERT_EQ(passed + 1, rd->st.roce_passed);
		ASSERT_EQ(rung + 1, atomic_load(&other->rung));
		/* the other's reached its mailbox, and it takes it there */
		sv_roce_share_read(&other->r);
		ASSERT_EQ(1, other->r.icount);
		ASSERT_EQ(other->r.my_qpn,
			  (uint32_t)other->r.iptr[0][5] << 16 |
				  (uint32_t)other->r.iptr[0][6] << 8 |
				  other->r.iptr[0][7]);
		other->r.icount = 0;
	}

	/* b gone: its QPN's datagrams stay with a (nobody's: the parser
	 * drops them), a's still come */
	end_fini(&b);
	for (uint32_t i = 0; i < 2; i++) {
		uint32_t q = i ? QPN_B : QPN_A, seq = i;

		send_one(tx, q, seq);
	}
	a.stop = false;
	memset(a.seen, 0, N);
	atomic_store(&a.taken, 0);
	ASSERT_OK(pthread_create(&ta, NULL, reader, &a));
	while (atomic_load(&a.taken) + atomic_load(&a.wrong) < 2) {
		ASSERT_TRUE(sv_now_ms() < end);
		sched_yield();
	}
	atomic_store(&a.stop, true);
	pthread_join(ta, NULL);
	ASSERT_EQ(1, atomic_load(&a.taken));
	ASSERT_EQ(1, atomic_load(&a.wrong));
	end_fini(&a);
	close(tx);
}

SV_TEST(roce_share_other_tuples_stay_apart)
{
	union sv_sockaddr me, peer;
	struct end a, b;
	int tx;

	tx = tuple(&me, &peer);
	end_init(&a, QPN_A);
	end_init(&b, QPN_B);
	ASSERT_OK(
		sv_roce_share_open(&a.r, &me, &peer, ntohs(peer.in.sin_port)));
	/* the same port, another peer address: its own socket */
	peer.in.sin_addr.s_addr = htonl(0x7f000002);
	ASSERT_OK(
		sv_roce_share_open(&b.r, &me, &peer, ntohs(peer.in.sin_port)));
	ASSERT_TRUE(!atomic_load(&a.r.shared) && !atomic_load(&b.r.shared));
	end_fini(&a);
	end_fini(&b);
	close(tx);
}

/* A link of another process has the four-tuple: ours fails with
 * EADDRINUSE (it would be up and never answered), and is made once that
 * process is gone. */
SV_TEST(roce_share_other_process_tuple_refused)
{
	union sv_sockaddr me, peer;
	int up[2], down[2], tx, st;
	struct end a;
	pid_t child;
	char c;

	tx = tuple(&me, &peer);
	ASSERT_OK(pipe(up));
	ASSERT_OK(pipe(down));
	child = fork();
	ASSERT_TRUE(child >= 0);
	if (child == 0) {
		struct end b;

		end_init(&b, QPN_B);
		c = sv_roce_share_open(&b.r, &me, &peer,
				       ntohs(peer.in.sin_port))
			    ? 'n'
			    : 'y';
		if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1)
			_exit(2);
		_exit(0); /* its links go with it */
	}
	ASSERT_EQ(1, read(up[0], &c, 1));
	ASSERT_EQ('y', c);
	end_init(&a, QPN_A);
	ASSERT_EQ(-EADDRINUSE, sv_roce_share_open(&a.r, &me, &peer,
						  ntohs(peer.in.sin_port)));
	ASSERT_EQ(-1, a.r.rx_fd);
	ASSERT_EQ(1, write(down[1], "x", 1));
	ASSERT_EQ(child, waitpid(child, &st, 0));
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ASSERT_OK(
		sv_roce_share_open(&a.r, &me, &peer, ntohs(peer.in.sin_port)));
	end_fini(&a);
	close(tx);
	for (int i = 0; i < 2; i++) {
		close(up[i]);
		close(down[i]);
	}
}
