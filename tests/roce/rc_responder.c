// SPDX-License-Identifier: MIT
/*
 * A probe, not a transport (issue 26): the RC server side of one
 * ibv_rc_pingpong run against the kernel's rxe, with nothing but the
 * RoCEv2 codec (provider/wire/roce.c) and an ordinary UDP socket, to
 * prove that the codec's bytes are what rxe takes and that it reads
 * rxe's.  The out-of-band exchange is rc_pingpong's (TCP, text
 * "LID:QPN:PSN:GID"); then every SEND in is PSN-checked (a duplicate is
 * dropped and acknowledged again, a gap NAKed), acknowledged when asked,
 * and each whole message is answered with one of the same size, split
 * at the path MTU by the segmenter.  It never retransmits (rxe does).
 *
 * The socket is unconnected with IP_PMTUDISC_DO, so Linux sends DF and
 * IP ID 0, and the ICRC built for that header is right.  rxe's IP IDs
 * are random and the socket hides them: received ICRCs go unchecked
 * (roce.h).
 *
 *   rc_responder [-b ADDR] [-p OOB_PORT] [-m MTU] [-n ITERS]
 * Exits 0 after ITERS messages answered, 1 on an error or 10 s idle.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "roce.h"

#define OOB_LEN	     52 /* "0000:000000:000000:" + 32 hex + NUL */
#define MY_QPN	     0x0abcde
#define MY_PSN	     0x123456
#define AETH_ACK     0x1f /* ACK, credits unlimited (IBA 9.7.5.2.1) */
#define AETH_NAK_SEQ 0x60

struct peer {
	int udp;
	struct sockaddr_in to; /* the peer's 4791 */
	struct sv_roce_ip ip;  /* ours to theirs, as our socket sends */
	uint32_t dqpn, mtu;
	uint32_t sq_psn; /* our next request PSN */
	uint32_t epsn;	 /* the next PSN we expect */
	uint32_t msn;	 /* messages received whole */
	uint32_t cur;	 /* bytes of the message coming in */
	unsigned long rx, tx, dups, naks, refused[SV_ROCE_VERDICTS];
};

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void send_pkt(struct peer *pr, const struct sv_roce_pkt *p)
{
	uint8_t buf[SV_ROCE_HDR_MAX + SV_ROCE_MAX_PMTU + 8];
	int n = sv_roce_build(buf, sizeof(buf), p, &pr->ip);

	if (n < 0) {
		fprintf(stderr, "rc_responder: build: %s\n", strerror(-n));
		exit(1);
	}
	if (sendto(pr->udp, buf, (size_t)n, 0, (struct sockaddr *)&pr->to,
		   sizeof(pr->to)) != n)
		die("sendto");
	pr->tx++;
}

static void ack(struct peer *pr, uint32_t psn, uint8_t syndrome)
{
	struct sv_roce_pkt a = {.opcode = SV_IB_RC | SV_IB_ACK,
				.pkey = 0xffff,
				.dqpn = pr->dqpn,
				.psn = psn,
				.syndrome = syndrome,
				.msn = pr->msn};

	send_pkt(pr, &a);
}

/* A message of len bytes back, one packet per MTU. */
static void answer(struct peer *pr, uint32_t len)
{
	static uint8_t zeros[SV_ROCE_MAX_PMTU];
	uint32_t n = sv_roce_npkts(len, pr->mtu);

	for (uint32_t i = 0; i < n; i++) {
		struct sv_roce_seg s;
		struct sv_roce_pkt p = {.pkey = 0xffff, .dqpn = pr->dqpn};

		if (sv_roce_segment(SV_IB_RC, SV_ROCE_MSG_SEND, len, pr->mtu, i,
				    &s))
			exit(1);
		p.opcode = s.opcode;
		p.payload = zeros;
		p.len = s.len;
		p.psn = pr->sq_psn;
		p.ack_req = i == n - 1;
		pr->sq_psn = sv_psn_add(pr->sq_psn, 1);
		send_pkt(pr, &p);
	}
}

/* One received packet; 1 when it completed a message. */
static int take(struct peer *pr, const uint8_t *b, size_t n)
{
	struct sv_roce_pkt p;
	enum sv_roce_verdict v = sv_roce_parse(b, n, NULL, &p);
	int32_t d;
	bool last;

	if (!v)
		v = sv_roce_check_qpt(&p, IBV_QPT_RC);
	if (!v && (p.mask & SV_RH_REQ))
		v = sv_roce_check_seg(&p, pr->mtu);
	if (v) {
		pr->refused[v]++;
		return 0;
	}
	pr->rx++;
	if (p.dqpn != MY_QPN || !(p.mask & SV_RH_REQ))
		return 0; /* ACKs of our answers: nothing to do */
	if ((p.opcode & 0x1f) > SV_IB_SEND_ONLY) {
		fprintf(stderr, "rc_responder: opcode %#x unexpected\n",
			p.opcode);
		return 0;
	}
	last = p.mask & SV_RH_LAST;
	d = sv_psn_diff(p.psn, pr->epsn);
	if (d < 0) { /* IBA 9.7.5.1.2: a duplicate, acknowledged again */
		pr->dups++;
		if (p.ack_req || last)
			ack(pr, p.psn, AETH_ACK);
		return 0;
	}
	if (d > 0) { /* a gap: NAK with the PSN we expect */
		pr->naks++;
		ack(pr, pr->epsn, AETH_NAK_SEQ);
		return 0;
	}
	pr->epsn = sv_psn_add(pr->epsn, 1);
	pr->cur += p.len;
	if (last)
		pr->msn = (pr->msn + 1) & 0xffffff;
	if (p.ack_req || last)
		ack(pr, p.psn, AETH_ACK);
	if (!last)
		return 0;
	answer(pr, pr->cur);
	pr->cur = 0;
	return 1;
}

/* rc_pingpong's exchange, server side: theirs in, ours out, "done". */
static void oob(const char *bind_ip, int port, struct peer *pr,
		const struct in_addr *mine)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	char msg[OOB_LEN + 1] = {0}, gid[33];
	unsigned lid, qpn, psn;
	uint8_t g[16] = {[10] = 0xff, [11] = 0xff};
	int ls, cs, one = 1;
	size_t got = 0;

	inet_pton(AF_INET, bind_ip, &a.sin_addr);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(ls, 1))
		die("oob listen");
	printf("rc_responder: listening on %s:%d\n", bind_ip, port);
	fflush(stdout);
	cs = accept(ls, NULL, NULL);
	if (cs < 0)
		die("accept");
	while (got < OOB_LEN) {
		ssize_t r = read(cs, msg + got, OOB_LEN - got);

		if (r <= 0)
			die("oob read");
		got += (size_t)r;
	}
	if (sscanf(msg, "%x:%x:%x:%32s", &lid, &qpn, &psn, gid) != 4) {
		fprintf(stderr, "rc_responder: bad address '%s'\n", msg);
		exit(1);
	}
	for (int i = 0; i < 16; i++)
		sscanf(gid + 2 * i, "%2hhx", &pr->ip.dst[i]);
	pr->dqpn = qpn;
	pr->epsn = psn & 0xffffff;
	memcpy(g + 12, mine, 4);
	snprintf(msg, sizeof(msg), "%04x:%06x:%06x:", 0, MY_QPN, MY_PSN);
	for (int i = 0; i < 16; i++)
		snprintf(msg + 19 + 2 * i, 3, "%02x", g[i]);
	if (write(cs, msg, OOB_LEN) != OOB_LEN)
		die("oob write");
	if (read(cs, msg, 5) < 0) /* "done" */
		die("oob read");
	close(cs);
	close(ls);
	printf("rc_responder: peer QPN %#x PSN %#x\n", qpn, psn);
	fflush(stdout); /* a killed probe still says how far it got */
}

int main(int argc, char **argv)
{
	const char *bind_ip = "10.99.0.1";
	int port = 18515, iters = 100, one = 1, pmtu = IP_PMTUDISC_DO, opt;
	struct peer pr = {.mtu = 1024, .sq_psn = MY_PSN};
	struct sockaddr_in me = {.sin_family = AF_INET,
				 .sin_port = htons(SV_ROCE_PORT)};
	struct timeval tv = {10, 0};
	static uint8_t buf[65536];
	int done = 0;

	while ((opt = getopt(argc, argv, "b:p:m:n:")) != -1) {
		if (opt == 'b')
			bind_ip = optarg;
		else if (opt == 'p')
			port = atoi(optarg);
		else if (opt == 'm')
			pr.mtu = (uint32_t)atoi(optarg);
		else if (opt == 'n')
			iters = atoi(optarg);
		else
			return 2;
	}
	inet_pton(AF_INET, bind_ip, &me.sin_addr);
	pr.udp = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(pr.udp, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	setsockopt(pr.udp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(pr.udp, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (pr.udp < 0 || bind(pr.udp, (struct sockaddr *)&me, sizeof(me)))
		die("udp 4791");
	pr.ip.src[10] = pr.ip.src[11] = 0xff;
	memcpy(pr.ip.src + 12, &me.sin_addr, 4);
	pr.ip.sport = pr.ip.dport = SV_ROCE_PORT;
	oob(bind_ip, port, &pr, &me.sin_addr);
	pr.to.sin_family = AF_INET;
	pr.to.sin_port = htons(SV_ROCE_PORT);
	memcpy(&pr.to.sin_addr, pr.ip.dst + 12, 4);
	while (done < iters) {
		ssize_t n = recv(pr.udp, buf, sizeof(buf), 0);

		if (n < 0) {
			fprintf(stderr, "rc_responder: idle after %d of %d\n",
				done, iters);
			return 1;
		}
		done += take(&pr, buf, (size_t)n);
	}
	/* the last answers' ACKs, and duplicates to acknowledge */
	tv.tv_sec = 1;
	setsockopt(pr.udp, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (ssize_t n; (n = recv(pr.udp, buf, sizeof(buf), 0)) >= 0;)
		take(&pr, buf, (size_t)n);
	printf("rc_responder: %d messages answered; rx %lu packets, %lu "
	       "duplicates, %lu NAKs sent, tx %lu; refused:",
	       done, pr.rx, pr.dups, pr.naks, pr.tx);
	for (int v = 1; v < SV_ROCE_VERDICTS; v++)
		if (pr.refused[v])
			printf(" %s %lu", sv_roce_verdict_names[v],
			       pr.refused[v]);
	printf("\n");
	return 0;
}
