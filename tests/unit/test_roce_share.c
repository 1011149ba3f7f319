// SPDX-License-Identifier: MIT
/*
 * RoCEv2 links of one process on one four-tuple (transport/roce/
 * share.c): the second takes a duplicate of the first's socket, and each
 * datagram reaches the link its BTH names exactly once, whichever of
 * them read it, with both reading at once from their own threads as a
 * QP's app and the progress thread do.  A link of another process on a
 * four-tuple one has is relayed its datagrams through the claim, and
 * takes the four-tuple over when that process goes; bad hellos on a
 * claim are closed.  share.c alone, on real UDP sockets on 127.0.0.1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
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
	free(e->r.gbuf);
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

/* What the owner of a four-tuple does with a datagram it reads, as
 * in.c's take: its own counted, another QPN's relayed. */
static uint32_t owner_read(struct end *e)
{
	uint32_t mine = 0;

	sv_roce_recv(&e->r);
	for (uint32_t i = 0; i < e->r.icount; i++) {
		const uint8_t *d = e->r.iptr[i];
		uint32_t q = (uint32_t)d[5] << 16 | (uint32_t)d[6] << 8 | d[7];

		if (q == e->r.my_qpn)
			mine++;
		else if (!sv_roce_share_relay(&e->r, d, e->r.ilen[i], q))
			atomic_fetch_add(&e->wrong, 1);
	}
	e->r.icount = 0;
	sv_roce_share_flush(&e->r); /* the batch's end */
	return mine;
}

/* The datagrams a relayed link reads: their sequence numbers in seen. */
static uint32_t relayed_read(struct end *e)
{
	uint32_t got = 0;

	sv_roce_recv(&e->r);
	for (uint32_t i = 0; i < e->r.icount; i++) {
		const uint8_t *d = e->r.iptr[i];
		uint32_t q = (uint32_t)d[5] << 16 | (uint32_t)d[6] << 8 | d[7];
		uint32_t seq;

		memcpy(&seq, d + 12, 4);
		if (q != e->r.my_qpn || seq >= N || e->r.ilen[i] != 64) {
			atomic_fetch_add(&e->wrong, 1);
			continue;
		}
		e->seen[seq]++;
		got++;
	}
	e->r.icount = 0;
	return got;
}

/* The owner of a four-tuple in a child process, QPN_B: reads, relays,
 * and counts its own, as up and down say (a byte c from down: read
 * until c more of its own came, answered 'y' on up; EOF: exit). */
static pid_t owner_child(const union sv_sockaddr *me,
			 const union sv_sockaddr *peer, int up[2], int down[2])
{
	uint64_t end = sv_now_ms() + 30000;
	pid_t child;
	char c;

	ASSERT_OK(pipe(up));
	ASSERT_OK(pipe(down));
	child = fork();
	ASSERT_TRUE(child >= 0);
	if (child == 0) {
		struct end b;
		uint32_t mine = 0;

		close(up[0]);
		close(down[1]);
		end_init(&b, QPN_B);
		c = sv_roce_share_open(&b.r, me, peer, ntohs(peer->in.sin_port))
			    ? 'n'
			    : 'y';
		if (write(up[1], &c, 1) != 1)
			_exit(2);
		while (read(down[0], &c, 1) == 1) {
			uint32_t want = mine + (uint32_t)c;

			while (mine < want && sv_now_ms() < end)
				mine += owner_read(&b);
			c = mine == want && !atomic_load(&b.wrong) ? 'y' : 'n';
			if (write(up[1], &c, 1) != 1)
				_exit(2);
		}
		_exit(0); /* its claim, its relays and its socket go with it */
	}
	close(up[1]);
	close(down[0]);
	ASSERT_EQ(1, read(up[0], &c, 1));
	ASSERT_EQ('y', c);
	return child;
}

/* The owner child takes n more of its own: 'y'. */
static void owner_takes(int up[2], int down[2], char n)
{
	char c = n;

	ASSERT_EQ(1, write(down[1], &c, 1));
	ASSERT_EQ(1, read(up[0], &c, 1));
	ASSERT_EQ('y', c);
}

/* A link of another process has the four-tuple: ours connects to its
 * claim and is relayed what is ours, each once; when that process
 * goes, ours reads EOF and takes the four-tuple over, its socket's
 * number kept. */
SV_TEST(roce_share_other_process_relays)
{
	enum { ROUNDS = 200, EACH = 8 }; /* 8 to each QPN a round */
	union sv_sockaddr me, peer;
	int up[2], down[2], tx, st, fd;
	uint64_t end = sv_now_ms() + 30000;
	uint32_t total = 0;
	struct end a;
	pid_t child;

	tx = tuple(&me, &peer);
	child = owner_child(&me, &peer, up, down);
	end_init(&a, QPN_A);
	ASSERT_OK(
		sv_roce_share_open(&a.r, &me, &peer, ntohs(peer.in.sin_port)));
	ASSERT_TRUE(a.r.relayed);
	ASSERT_EQ(-1, a.r.claim_fd);
	fd = a.r.rx_fd;
	ASSERT_OK(connect(tx, &me.sa, sizeof(me.in)));
	for (uint32_t round = 0; round < ROUNDS; round++) {
		uint32_t got = 0;

		for (uint32_t k = 0; k < 2 * EACH; k++)
			send_one(tx, k & 1 ? QPN_B : QPN_A,
				 round * 2 * EACH + k);
		owner_takes(up, down, EACH); /* and relays ours */
		while (got < EACH) {
			ASSERT_TRUE(sv_now_ms() < end);
			got += relayed_read(&a);
		}
		total += got;
	}
	ASSERT_EQ(ROUNDS * EACH, total);
	ASSERT_EQ(0, atomic_load(&a.wrong));
	for (uint32_t seq = 0; seq < ROUNDS * 2 * EACH; seq++)
		ASSERT_EQ(seq & 1 ? 0 : 1, a.seen[seq]);
	ASSERT_TRUE(!a.r.orphan);

	/* the owner goes: EOF on our relay, and the four-tuple is ours */
	close(down[1]);
	ASSERT_EQ(child, waitpid(child, &st, 0));
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	while (!a.r.orphan) {
		ASSERT_TRUE(sv_now_ms() < end);
		relayed_read(&a);
	}
	ASSERT_OK(sv_roce_share_rejoin(&a.r));
	ASSERT_TRUE(!a.r.relayed && !a.r.orphan);
	ASSERT_TRUE(a.r.claim_fd >= 0);
	ASSERT_EQ(fd, a.r.rx_fd); /* in the epoll as before */
	memset(a.seen, 0, N);
	send_one(tx, QPN_A, 7);
	while (!a.seen[7]) {
		ASSERT_TRUE(sv_now_ms() < end);
		relayed_read(&a);
	}
	ASSERT_EQ(0, atomic_load(&a.wrong));
	end_fini(&a);
	close(tx);
	close(up[0]);
}

/* The 18 bytes of an IPv4 address and port, IPv4-mapped, in hex. */
static int hex_of(const union sv_sockaddr *a, char *out)
{
	uint8_t b[18] = {[10] = 0xff, [11] = 0xff};
	int k = 0;

	memcpy(b + 12, &a->in.sin_addr, 4);
	memcpy(b + 16, &a->in.sin_port, 2);
	for (int i = 0; i < 18; i++)
		k += sprintf(out + k, "%02x", b[i]);
	return k;
}

/* The claim of (me, peer) as /proc/net/unix shows it to anyone of the
 * network namespace ("@softverbs-roce " and the two addresses and
 * ports), in u: its length. */
static socklen_t claim_seen(const union sv_sockaddr *me,
			    const union sv_sockaddr *peer,
			    struct sockaddr_un *u)
{
	FILE *f = fopen("/proc/net/unix", "r");
	char want[128] = "@softverbs-roce ", line[512], *at;
	socklen_t len = 0;
	int n = (int)strlen(want);

	n += hex_of(me, want + n);
	hex_of(peer, want + n);
	ASSERT_TRUE(f != NULL);
	while (!len && fgets(line, sizeof(line), f)) {
		at = strstr(line, want);
		if (!at)
			continue;
		at[strcspn(at, "\n")] = 0;
		memset(u, 0, sizeof(*u));
		u->sun_family = AF_UNIX;
		memcpy(u->sun_path + 1, at + 1, strlen(at + 1));
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
				  strlen(at));
	}
	fclose(f);
	ASSERT_TRUE(len > 0);
	return len;
}

/* What says anything but one hello with a QPN nobody said on the claim
 * is closed; a QPN said first stays its sayer's (a second link saying
 * it reads EOF), and the first still gets its datagrams. */
SV_TEST(roce_share_relay_refuses_bad_hellos)
{
	union sv_sockaddr me, peer;
	struct sockaddr_un u;
	socklen_t ulen;
	struct end a, dup;
	uint64_t end = sv_now_ms() + 30000;
	uint32_t junk[3] = {0x73767272u, QPN_A, 0};
	int tx, up[2], down[2], bad[3], st;
	pid_t child;
	char buf[8];

	tx = tuple(&me, &peer);
	child = owner_child(&me, &peer, up, down);
	ulen = claim_seen(&me, &peer, &u);
	/* strangers of our user, first in line: a short hello, a long one,
	 * a wrong magic */
	for (int i = 0; i < 3; i++) {
		bad[i] = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		ASSERT_OK(connect(bad[i], (struct sockaddr *)&u, ulen));
	}
	ASSERT_EQ(4, send(bad[0], junk, 4, 0));
	ASSERT_EQ(12, send(bad[1], junk, 12, 0));
	junk[0] = 1;
	ASSERT_EQ(8, send(bad[2], junk, 8, 0));
	/* two links of ours say QPN_A */
	end_init(&a, QPN_A);
	ASSERT_OK(
		sv_roce_share_open(&a.r, &me, &peer, ntohs(peer.in.sin_port)));
	end_init(&dup, QPN_A);
	ASSERT_OK(sv_roce_share_open(&dup.r, &me, &peer,
				     ntohs(peer.in.sin_port)));
	ASSERT_TRUE(a.r.relayed && dup.r.relayed);

	/* QPN_A's first, then the owner's: once the owner has its own,
	 * it has relayed ours */
	ASSERT_OK(connect(tx, &me.sa, sizeof(me.in)));
	send_one(tx, QPN_A, 3);
	send_one(tx, QPN_B, 4);
	owner_takes(up, down, 1);
	while (!a.seen[3]) {
		ASSERT_TRUE(sv_now_ms() < end);
		relayed_read(&a);
	}
	ASSERT_EQ(0, atomic_load(&a.wrong));
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(0, recv(bad[i], buf, sizeof(buf), MSG_DONTWAIT));
		close(bad[i]);
	}
	while (!dup.r.orphan) {
		ASSERT_TRUE(sv_now_ms() < end);
		relayed_read(&dup);
	}
	ASSERT_EQ(0, dup.seen[3]);
	ASSERT_EQ(0, atomic_load(&dup.wrong));
	end_fini(&dup);
	end_fini(&a);
	close(down[1]);
	ASSERT_EQ(child, waitpid(child, &st, 0));
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(up[0]);
	close(tx);
}

/* One relay message of datagrams of the lengths lens (0: a length of 0
 * said; a length past the message's end: its last, cut short), each
 * datagram's first byte its place. */
static void relay_message(int fd, const uint16_t *lens, int count, bool cut)
{
	uint8_t msg[4096];
	uint32_t off = 0;

	for (int i = 0; i < count; i++) {
		memcpy(msg + off, &lens[i], 2);
		off += 2;
		memset(msg + off, i, lens[i]);
		off += lens[i];
	}
	if (cut)
		off -= 1;
	ASSERT_EQ((ssize_t)off, send(fd, msg, off, 0));
}

/* A relayed link takes the datagrams of its connection's messages as
 * segments, each whole; a message that says a length of 0, or one past
 * its end, ends there (what came before in it stays); a length past our
 * slot is read as too long; a message of no bytes is EOF. */
SV_TEST(roce_share_relayed_messages_checked)
{
	static const uint16_t three[] = {64, 100, 1}, zero[] = {64, 0, 64};
	static const uint16_t big[] = {SLOT + 1};
	struct end e;
	int sp[2];

	end_init(&e, QPN_A);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sp));
	e.r.rx_fd = sp[0];
	e.r.relayed = true;

	relay_message(sp[1], three, 3, false);
	ASSERT_EQ(3, sv_roce_recv(&e.r));
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(three[i], e.r.ilen[i]);
		ASSERT_EQ(i, e.r.iptr[i][0]);
		ASSERT_EQ(i, e.r.iptr[i][three[i] - 1]);
	}
	relay_message(sp[1], zero, 3, false);
	ASSERT_EQ(1, sv_roce_recv(&e.r));
	ASSERT_EQ(64, e.r.ilen[0]);
	relay_message(sp[1], three, 3, true); /* the last one byte short */
	ASSERT_EQ(2, sv_roce_recv(&e.r));
	relay_message(sp[1], big, 1, false);
	ASSERT_EQ(1, sv_roce_recv(&e.r));
	ASSERT_EQ(SLOT + 1, e.r.ilen[0]); /* the parser's: too long */
	ASSERT_EQ(0, sv_roce_recv(&e.r)); /* nothing waits */
	ASSERT_TRUE(!e.r.orphan);
	close(sp[1]);
	ASSERT_EQ(0, sv_roce_recv(&e.r));
	ASSERT_TRUE(e.r.orphan);
	e.r.listed = false;
	end_fini(&e);
}
