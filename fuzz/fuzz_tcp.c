// SPDX-License-Identifier: MIT
/*
 * The TCP transport's frames (tcp/) as a hostile host sends them: a
 * victim link is given a peer connection (the hello taken as from the
 * door), and the input is a program of commands: frames built so most
 * pass the header and CRC checks (records at the position the victim
 * expects, pads, state words, RNR aborts, goodbyes; each field can still
 * be anything), raw bytes, the victim's transport runs, and its engine's
 * side (what a responder and completer do with the rings: peek, read the
 * payload, consume).  Checked besides the sanitizers: what the victim
 * took into its rings is records a ring accepts or refuses cleanly, and
 * no fd is leaked.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crc32c.h"
#include "env.h"
#include "tcp.h"

#define MAX_CMDS  64
#define RING_SIZE 16384u
#define VQPN	  0x00abcd
#define PQPN	  0x00dcba

struct run {
	struct fz *f;
	struct sv_link l;
	int peer;	 /* our end of the victim's receiving connection */
	uint64_t pos[2]; /* where the victim expects the next record */
	bool broken[2];	 /* a ring the engine found not a ring */
};

static void put(struct run *r, const void *b, size_t n)
{
	/* never blocking: what does not fit is a frame the peer lost */
	if (send(r->peer, b, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return;
}

static void frame(struct run *r, uint16_t type, uint16_t ring, uint32_t len,
		  uint64_t pos, const uint8_t *body, uint32_t body_len)
{
	struct sv_tcp_frame f = {
		.type = type, .ring = ring, .len = len, .pos = pos};
	uint8_t buf[sizeof(f) + 2048];

	if (body_len > 2048)
		body_len = 2048;
	f.crc = sv_crc32c(sv_crc32c(0, &f, sizeof(f)), body, body_len);
	if (!fz_pick(r->f, 8))
		f.crc = fz_u32(r->f); /* damaged */
	memcpy(buf, &f, sizeof(f));
	if (body_len)
		memcpy(buf + sizeof(f), body, body_len);
	put(r, buf, sizeof(f) + body_len);
}

/* A record frame: a packet header whose fields are the input's, a body
 * of the input's bytes, at the position expected (mostly). */
static void record(struct run *r)
{
	struct fz *f = r->f;
	uint16_t ring = (uint16_t)fz_pick(f, 2);
	uint32_t len = 64u * (1 + fz_pick(f, 24));
	uint8_t body[2048] = {0};
	struct sv_pkt p;
	uint64_t pos = r->pos[ring];

	if (!fz_pick(f, 8))
		len = fz_u32(f) % 4096; /* any length */
	if (!fz_pick(f, 8))
		pos = fz_pick(f, 2) ? fz_u64(f) : pos + 64; /* elsewhere */
	fz_take(f, &p, sizeof(p));
	p.rec_len = len;
	if (fz_pick(f, 4))
		p.len = len - (uint32_t)sizeof(p); /* what fits */
	memcpy(body, &p, sizeof(p));
	fz_take(f, body + sizeof(p), fz_pick(f, 64));
	frame(r, SV_TF_REC, ring, len, pos, body, len < 2048 ? len : 2048);
	if (pos == r->pos[ring])
		r->pos[ring] += len; /* if taken: else the link is down */
}

static void pad(struct run *r)
{
	uint16_t ring = (uint16_t)fz_pick(r->f, 2);
	uint64_t size = ring ? r->l.rsp_rx.size : r->l.rx.size;
	uint64_t off = r->pos[ring] & (size - 1);
	uint32_t len = (uint32_t)(size - off);

	if (fz_pick(r->f, 4) == 0)
		len = fz_u32(r->f);
	frame(r, SV_TF_PAD, ring, len, r->pos[ring], NULL, 0);
	r->pos[ring] += len;
}

static void state(struct run *r)
{
	struct sv_tcp_state s;

	fz_take(r->f, &s, sizeof(s));
	if (fz_pick(r->f, 2)) /* mostly plausible */
		s.rx_tail = s.rsp_tail = 0;
	frame(r, SV_TF_STATE, 0, sizeof(s), 0, (const uint8_t *)&s, sizeof(s));
}

/* The engine's side: what a responder and a completer would read. */
static void consume(struct run *r)
{
	struct sv_ring *rings[2] = {&r->l.rx, &r->l.rsp_rx};

	for (int i = 0; i < 2; i++) {
		for (int k = 0; k < 64 && !r->broken[i]; k++) {
			const uint8_t *payload;
			volatile uint8_t sum = 0;
			struct sv_pkt p;
			int got = sv_ring_peek(rings[i], &p, &payload);

			if (got < 0)
				r->broken[i] = true; /* the QP would go to
						      * ERROR here */
			if (got <= 0)
				break;
			for (uint32_t b = 0; b < p.len; b++)
				sum += payload[b]; /* inside the ring */
			sv_ring_consume(rings[i]);
			(void)sum;
		}
	}
}

/* A loopback TCP connection: sp[0] the victim's end (as a door passes
 * it), sp[1] ours.  TCP, not a socket pair: the victim takes a caller
 * only at its destination's address and of its own user (tcp/). */
static int tcp_listener(void)
{
	static int lfd = -1;
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	if (lfd < 0) {
		lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd >= 0 && (bind(lfd, (struct sockaddr *)&a, sizeof(a)) ||
				 listen(lfd, 8))) {
			close(lfd);
			lfd = -1;
		}
	}
	return lfd;
}

static int tcp_pair(int sp[2])
{
	int lfd = tcp_listener();
	struct sockaddr_in a;
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	socklen_t len = sizeof(a);

	if (lfd < 0 || getsockname(lfd, (struct sockaddr *)&a, &len))
		return -1;
	sp[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sp[1] < 0)
		return -1;
	/* closed with a reset: no TIME_WAIT per input */
	setsockopt(sp[1], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (connect(sp[1], (struct sockaddr *)&a, sizeof(a))) {
		close(sp[1]);
		return -1;
	}
	sp[0] = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (sp[0] < 0) {
		close(sp[1]);
		return -1;
	}
	fcntl(sp[1], F_SETFL, O_NONBLOCK);
	return 0;
}

static void run_one(struct run *r, struct fz_env *e)
{
	/* the progress thread may still hold an event naming them after
	 * their fds are gone: they outlive the input, as a QP's do (QPs are
	 * type-stable) */
	static struct sv_pfd in = {
		.io.cb = sv_qp_on_doorbell, .fd = -1, .edge = true};
	static struct sv_pfd pend = {
		.io.cb = sv_qp_on_doorbell, .fd = -1, .edge = true};
	union sv_sockaddr dst = {
		.in = {.sin_family = AF_INET,
		       .sin_port = htons(1), /* nobody: refused */
		       .sin_addr.s_addr = htonl(INADDR_LOOPBACK)}};
	struct sv_tcp_hello h = {
		.magic = SV_TCP_MAGIC,
		.version = SV_TCP_VERSION,
		.src_qpn = PQPN,
		.dst_qpn = VQPN,
		.rx_size = 4096ull << fz_pick(r->f, 4),
		.rsp_size = 16384ull << fz_pick(r->f, 2),
	};
	struct sv_tcp_hello_ack a;
	int sp[2];

	sv_link_init(&r->l);
	if (sv_link_prepare(&r->l, &sv_tcp_link_ops,
			    &(struct sv_link_conf){.ctx = to_sctx(e->ctx),
						   .my_qpn = VQPN,
						   .peer_qpn = PQPN,
						   .ring_size = RING_SIZE,
						   .dst = &dst,
						   .pfd_conn = &in,
						   .pfd_acc = &pend}))
		return;
	if (tcp_pair(sp))
		goto out;
	h.crc = sv_crc32c(0, &h, sizeof(h));
	if (sv_tcp_take(&r->l, sp[0], &h, VQPN, PQPN) != 1) {
		close(sp[1]);
		goto out;
	}
	r->peer = sp[1];
	FZ_CHECK(recv(r->peer, &a, sizeof(a), MSG_DONTWAIT) == sizeof(a) &&
		 a.status == SV_TCP_OK && a.rx_recv == 0);
	for (int i = 0; i < MAX_CMDS && !fz_empty(r->f); i++) {
		uint8_t raw[256];
		uint32_t n;

		switch (fz_pick(r->f, 8)) {
		case 0:
		case 1:
			record(r);
			break;
		case 2:
			pad(r);
			break;
		case 3:
			state(r);
			break;
		case 4:
			frame(r,
			      (uint16_t)(fz_pick(r->f, 2) ? SV_TF_RNR_ABORT
							  : SV_TF_BYE),
			      0, 0, 0, NULL, 0);
			break;
		case 5:
			n = fz_pick(r->f, 255) + 1u;
			fz_take(r->f, raw, n);
			put(r, raw, n);
			break;
		default:
			sv_tcp_run(&r->l, PQPN, 1000000000ull, UINT64_MAX, 0);
			consume(r);
			break;
		}
	}
	sv_tcp_run(&r->l, PQPN, 1000000000ull, UINT64_MAX, 0);
	consume(r);
	close(r->peer);
out:
	sv_link_close(&r->l, VQPN, false);
}

/* The context's door (a TCP link's prepare opens it) on a port of its
 * own, before the context reads its settings: on the shared well-known
 * port it would take other programs' callers, and their fds. */
static void private_door_port(void)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6};
	socklen_t len = sizeof(a);
	static bool done;
	char port[16];
	int fd;

	if (done)
		return;
	done = true;
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (!bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &len)) {
		snprintf(port, sizeof(port), "%u", ntohs(a.sin6_port));
		setenv("SOFTVERBS_TCP_PORT", port, 1);
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = {data, size};
	struct fz_env *e = (private_door_port(), fz_env());
	struct run r = {.f = &f};
	bool opened;
	int fds;

	tcp_listener(); /* once, before the fds are counted */
	/* the context's door, which a TCP link's prepare opens once */
	if (!sv_tcp_door_open(to_sctx(e->ctx), &opened))
		return 0;
	fds = fz_count_fds();

	run_one(&r, e);
	FZ_CHECK(fz_count_fds() == fds);
	return 0;
}
