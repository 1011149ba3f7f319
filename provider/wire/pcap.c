// SPDX-License-Identifier: MIT
/*
 * SOFTVERBS_PCAP=FILE: every packet this process sends and receives, as a
 * pcap file (LINKTYPE_ETHERNET, nanosecond timestamps) in RoCEv2 framing,
 * so that Wireshark and tshark decode it as InfiniBand with no plug-in:
 * Ethernet (MACs 02:00:<the IPv4 address, or the IPv6 one's last four
 * bytes>), IPv4 from an IPv4-mapped GID (IPv6 otherwise; 127.0.0.1 with
 * no GID), UDP to 4791 from a port hashed from the QPN pair (checksum 0,
 * none, over IPv4; computed over IPv6, which has no UDP without), BTH (the
 * IBA's opcode for the QP type, dest QP, PSN, SE and A bits, P_Key
 * 0xffff), the extension headers the opcode has, the payload and the
 * ICRC (CRC-32 over the masked headers and the payload, IBA annex A17),
 * all drawn by the RoCEv2 codec (roce.h) the RoCE wire speaks.  Every length
 * field (IP, UDP, the pad count) and the record's orig_len are the whole
 * packet's; SOFTVERBS_PCAP_SNAP cuts the record as tcpdump -s does (incl_len <
 * orig_len, bytes of the frame, default 262144: whole packets), so a cut packet
 * reads as cut.
 *
 * The payload is shown wherever the bytes are at hand when the packet is
 * drawn: in the record (the ring's way), in the sender's gather list (a
 * send placed in the peer's receive buffer, the last packet of a write
 * with immediate done in the peer's memory: sv_pcap_req), in the receive
 * buffer the sender placed into (sv_pcap_train's sg, resp.c), in the
 * peer's memory (sv_pcap_direct).  Only the target of a write with
 * immediate done in its memory cannot know where the data went, nor the
 * receiver of a placed send's duplicate (its receive is done with): its
 * capture shows that packet's headers, cut (incl_len < orig_len).
 *
 * The engine's records are not IBA packets, so this file draws them:
 * a train (wire.h) becomes its per-MTU packets with consecutive PSNs; an
 * ack word becomes an ACKNOWLEDGE when it is written (the responder's
 * process) and when the completer reads a new one (the requester's);
 * a one-sided operation done in the peer's memory (req.c try_direct)
 * becomes its request and its response in the initiator's capture, under
 * PSNs the engine never used: the initiator shows its QP's PSNs shifted
 * by those (qp->pcap.psn_off), and the target shows nothing of it.
 *
 * Hooks sit behind `if (sv_pcap_on)`, set once before any QP exists: off,
 * the engine pays a predictable branch.  Records are built on the stack
 * and appended to one process-wide buffer under a mutex; the buffer is
 * written when it holds more than SV_PCAP_FLUSH bytes, when its oldest
 * record is older than SV_PCAP_AGE_NS, when the progress thread wakes,
 * at context close and at exit.  Records are written whole, so the file
 * is a valid capture whenever the process dies; a killed process loses
 * what was still buffered (at most SV_PCAP_AGE_NS of traffic, or what
 * came after its progress thread last woke).
 *
 * A capture never kills or hangs the program (issue 24): FILE may be a
 * FIFO (`wireshark -k -i FIFO`), opened non-blocking.  With no reader yet
 * (ENXIO) the open is tried again for up to SV_PCAP_WAIT_NS, once per
 * process, then the device works on with one line and no capture.
 * Writes run with SIGPIPE blocked in the writing thread, a SIGPIPE they
 * raise consumed (one pending before is left alone), so a reader that
 * goes away is EPIPE: one line, the capture stops, the program goes on.
 * A full pipe (a slow reader) blocks the flushing thread, which may be
 * the engine's, in poll: the capture is lossless as long as the reader
 * takes something every SV_PCAP_STALL_NS; a reader that takes nothing for
 * that long stops the capture with one line.  So a capture stalls the
 * program at most SV_PCAP_WAIT_NS at open and SV_PCAP_STALL_NS once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "guard.h"
#include "pcap.h"
#include "pcap_ib.h"
#include "roce.h"

#define SV_PCAP_BUF	 (256u * 1024)
#define SV_PCAP_FLUSH	 (192u * 1024)
#define SV_PCAP_AGE_NS	 (5 * 1000 * 1000ull)
#define SV_PCAP_HDR_MAX	 192 /* Ethernet .. last extension, rounded up */
#define SV_PCAP_WAIT_NS	 (1000 * 1000 * 1000ull) /* for a FIFO's reader */
#define SV_PCAP_STALL_NS (1000 * 1000 * 1000ull) /* a reader taking nothing */

bool sv_pcap_on;

static struct {
	pthread_mutex_t lock;
	int fd;
	const char *name;  /* SOFTVERBS_PCAP, for messages */
	uint32_t snap;	   /* frame bytes kept of a packet (incl_len) */
	uint8_t *buf;	   /* SV_PCAP_BUF */
	size_t len;	   /* bytes buffered */
	uint64_t first_ns; /* when the oldest buffered record came */
} pc = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = (uint8_t)v;
}

static uint64_t now_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * write(2) with SIGPIPE blocked in this thread: a reader gone is EPIPE,
 * not death by the signal's default action (exit 141).  A SIGPIPE this
 * write raised is taken off the thread; one pending before is left.
 */
static ssize_t write_nosig(int fd, const uint8_t *p, size_t n)
{
	static const struct timespec zero = {0, 0};
	sigset_t pipe_set, old, pending;
	bool was_pending;
	ssize_t w;
	int err;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE) == 1;
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	w = write(fd, p, n);
	err = errno;
	if (w < 0 && err == EPIPE && !was_pending)
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 &&
		       errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return w;
}

/* The capture stops here (caller holds pc.lock, or is pcap_init). */
static void stop(const char *why)
{
	fprintf(stderr,
		"softverbs: SOFTVERBS_PCAP=%s: %s; the capture stops here\n",
		pc.name, why);
	close(pc.fd);
	pc.fd = -1;
}

/* Whole, or the capture stops: records are never cut (head comment). */
static void write_all(const uint8_t *p, size_t n)
{
	uint64_t stall_end = 0;

	while (n) {
		ssize_t w = write_nosig(pc.fd, p, n);
		uint64_t now;

		if (w > 0) {
			p += w;
			n -= (size_t)w;
			stall_end = 0;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EPIPE) {
			stop("the reader went away (EPIPE)");
			return;
		}
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			/* a full pipe: wait for the reader, a bounded time */
			struct pollfd pf = {.fd = pc.fd, .events = POLLOUT};

			now = now_mono_ns();
			if (!stall_end)
				stall_end = now + SV_PCAP_STALL_NS;
			if (now < stall_end) {
				poll(&pf, 1,
				     (int)((stall_end - now + 999999) /
					   1000000));
				continue;
			}
			stop("the reader took nothing for a second");
			return;
		}
		stop(w < 0 ? strerror(errno) : "write made no progress");
		return;
	}
}

/* Caller holds pc.lock. */
static void flush_locked(void)
{
	if (pc.len && pc.fd >= 0)
		write_all(pc.buf, pc.len);
	__atomic_store_n(&pc.len, 0, __ATOMIC_RELAXED); /* see sv_pcap_flush */
}

void sv_pcap_flush(void)
{
	/* racy peek: a record appended meanwhile is written by its own
	 * append's age check or the next flush */
	if (!__atomic_load_n(&pc.len, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&pc.lock);
	flush_locked();
	pthread_mutex_unlock(&pc.lock);
}

static void at_exit_flush(void)
{
	sv_pcap_flush();
}

/* The file name: %p is our pid, %% a %. */
static int expand(const char *f, char *out, size_t cap)
{
	size_t n = 0;

	for (; *f; f++) {
		int w;

		if (f[0] == '%' && f[1] == 'p') {
			w = snprintf(out + n, cap - n, "%d", (int)getpid());
			f++;
		} else if (f[0] == '%' && f[1] == '%') {
			w = snprintf(out + n, cap - n, "%%");
			f++;
		} else {
			w = snprintf(out + n, cap - n, "%c", *f);
		}
		if (w < 0 || (size_t)w >= cap - n)
			return -ENAMETOOLONG;
		n += (size_t)w;
	}
	return 0;
}

/*
 * pc.fd, or -errno.  Non-blocking: a FIFO's open then fails with ENXIO
 * while it has no reader instead of blocking for ever; tried again for
 * SV_PCAP_WAIT_NS (there is no event for a reader's open to wait on).
 */
static int open_capture(const char *path)
{
	const struct timespec tick = {0, 10 * 1000 * 1000};
	uint64_t end = now_mono_ns() + SV_PCAP_WAIT_NS;

	for (;;) {
		int err;

		pc.fd = open(path,
			     O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
				     O_NONBLOCK,
			     0600); /* payloads in clear: ours alone */
		if (pc.fd >= 0)
			return 0;
		err = errno;
		if (err != ENXIO || now_mono_ns() >= end)
			return -err;
		nanosleep(&tick, NULL);
	}
}

static pthread_once_t pcap_once = PTHREAD_ONCE_INIT;

static void pcap_init(void)
{
	const char *f = sv_env_str(SV_ENV_PCAP);
	uint8_t gh[24] = {0};
	char path[4096];
	int err;

	if (!f || !*f)
		return;
	/* as tcpdump -s: bytes of each frame kept, 0 for the default */
	pc.snap = (uint32_t)sv_env_uint(SV_ENV_PCAP_SNAP);
	if (!pc.snap)
		pc.snap = SV_PCAP_SNAP;
	pc.name = f;
	err = expand(f, path, sizeof(path));
	if (!err)
		err = open_capture(path);
	if (err == -ENXIO) {
		fprintf(stderr,
			"softverbs: SOFTVERBS_PCAP=%s: no reader opened the "
			"FIFO %s within a second; capturing nothing\n",
			f, path);
		return;
	}
	if (err) {
		/* the device works on; the user learns why there is no file */
		fprintf(stderr,
			"softverbs: SOFTVERBS_PCAP=%s: cannot open %s: %s; "
			"capturing nothing\n",
			f, err == -ENAMETOOLONG ? "it" : path, strerror(-err));
		return;
	}
	pc.buf = malloc(SV_PCAP_BUF);
	if (!pc.buf) {
		close(pc.fd);
		pc.fd = -1;
		fprintf(stderr, "softverbs: SOFTVERBS_PCAP: out of memory; "
				"capturing nothing\n");
		return;
	}
	/* pcap file header, our byte order: nanosecond magic, v2.4 */
	{
		uint32_t magic = 0xa1b23c4d, snaplen = pc.snap,
			 link = 1; /* LINKTYPE_ETHERNET */
		uint16_t maj = 2, min = 4;

		memcpy(gh, &magic, 4);
		memcpy(gh + 4, &maj, 2);
		memcpy(gh + 6, &min, 2);
		memcpy(gh + 16, &snaplen, 4);
		memcpy(gh + 20, &link, 4);
	}
	write_all(gh, sizeof(gh));
	if (pc.fd < 0)
		return;
	atexit(at_exit_flush);
	sv_pcap_on = true;
}

void sv_pcap_open(void)
{
	pthread_once(&pcap_once, pcap_init);
}

/* The first n bytes of a packet's payload into dst; nonzero if memory
 * went away under the copy or the SGEs end first. */
static int payload_copy(uint8_t *dst, const struct ib_pkt *k, uint32_t n)
{
	uint64_t skip = k->sg_off;

	if (k->data)
		return sv_copy_guarded(dst, k->data, n);
	for (uint32_t i = 0; i < k->sg->n && n; i++) {
		const struct ibv_sge *s = &k->sg->sge[i];
		uint32_t c;

		if (skip >= s->length) {
			skip -= s->length;
			continue;
		}
		c = s->length - (uint32_t)skip;
		if (c > n)
			c = n;
		if (sv_copy_guarded(
			    dst, (const uint8_t *)(uintptr_t)s->addr + skip, c))
			return -1;
		skip = 0;
		dst += c;
		n -= c;
	}
	return n ? -1 : 0;
}

/* The packet k as the codec (roce.h) takes it: the headers drawn are
 * its opcode's. */
static void to_roce(const struct ib_pkt *k, struct sv_roce_pkt *p)
{
	*p = (struct sv_roce_pkt){
		.opcode = k->opcode,
		.se = k->se,
		.ack_req = k->ack_req,
		.pkey = 0xffff,
		.dqpn = k->dqpn,
		.psn = k->psn,
		.srqn = k->xrc_srqn,
		.qkey = k->qkey,
		.src_qpn = k->src_qpn,
		.syndrome = k->syndrome,
		.msn = k->msn,
		.imm_be = k->imm_be,
		.inv_rkey = k->inv_rkey,
		.len = k->len,
	};
	if (k->reth)
		p->reth = *k->reth;
	if (k->atometh)
		p->atomic = *k->atometh;
	if (k->atomack)
		p->orig = k->atomack->orig;
}

/* Draws one packet into a record and appends it. */
void sv_pcap_emit(const struct ib_pkt *k)
{
	uint8_t f[SV_PCAP_HDR_MAX + 8], *ib;
	struct sv_roce_ip ip = {.sport = k->a->sport};
	struct sv_roce_pkt p;
	uint32_t pad = (4 - (k->len & 3)) & 3, iblen, ibhdr, hlen;
	uint32_t orig, incl, crc = 0;
	uint8_t padb[3] = {0}, *at;
	uint64_t t = now_real_ns();
	uint32_t rec[4];
	size_t need;
	bool drawn, v4;

	memcpy(ip.src, k->tx ? k->a->src : k->a->dst, 16);
	memcpy(ip.dst, k->tx ? k->a->dst : k->a->src, 16);
	v4 = sv_roce_ip_is_v4(&ip);
	to_roce(k, &p);
	memset(f, 0, sizeof(f));
	/* Ethernet */
	f[0] = 0x02;
	memcpy(f + 2, ip.dst + 12, 4);
	f[6] = 0x02;
	memcpy(f + 8, ip.src + 12, 4);
	put16(f + 12, v4 ? 0x0800 : 0x86dd);
	ib = f + 14 + (v4 ? SV_ROCE_IP4_UDP : SV_ROCE_IP6_UDP);
	ibhdr = sv_roce_hdr_put(ib, &p);
	if (!ibhdr)
		return; /* not an opcode: pcap_train draws none such */
	iblen = ibhdr + k->len + pad + SV_ROCE_ICRC;
	sv_roce_ip_udp_put(f + 14, &ip, iblen);
	hlen = (uint32_t)(ib - f) + ibhdr;
	orig = hlen + k->len + pad + SV_ROCE_ICRC;
	incl = orig < pc.snap ? orig : pc.snap;
	/* the payload at hand: all of the packet is drawn (the cut is
	 * only in what the record keeps); else its headers, cut */
	drawn = k->data || k->sg || !k->len;
	if (!drawn && incl > hlen)
		incl = hlen;
	if (drawn) {
		/* the payload's part once it is copied, below */
		crc = sv_roce_icrc_start(&ip, ib, ibhdr, iblen);
	}
	rec[0] = (uint32_t)(t / 1000000000ull);
	rec[1] = (uint32_t)(t % 1000000000ull);
	rec[2] = incl;
	rec[3] = orig;
	/* room for the whole packet: what the record does not keep is
	 * drawn past its end (for the ICRC and checksum) and overwritten */
	need = sizeof(rec) + (drawn ? orig : hlen);
	if (need > SV_PCAP_BUF)
		return; /* no packet is this long: an MTU is 4096 */
	pthread_mutex_lock(&pc.lock);
	if (pc.fd < 0)
		goto out;
	if (pc.len + need > SV_PCAP_BUF)
		flush_locked();
	if (!pc.len)
		pc.first_ns = t;
	memcpy(pc.buf + pc.len, rec, sizeof(rec));
	at = pc.buf + pc.len + sizeof(rec);
	memcpy(at, f, hlen);
	if (drawn) {
		/* the payload may be a peer's memory or the application's:
		 * copied guarded, the ICRC computed over our copy */
		if (k->len && payload_copy(at + hlen, k, k->len))
			memset(at + hlen, 0, k->len); /* the memory went */
		crc = sv_roce_icrc_add(crc, at + hlen, k->len);
		crc = sv_roce_icrc_end(sv_roce_icrc_add(crc, padb, pad));
		memcpy(at + hlen + k->len, padb, pad);
		sv_roce_icrc_put(at + hlen + k->len + pad, crc);
	}
	if (!v4) /* IPv6 has no UDP packet without a checksum (RFC 8200) */
		put16(at + 14 + 40 + 6,
		      drawn ? sv_roce_udp6_csum(at + 14, iblen) : 0xffff);
	__atomic_store_n(&pc.len, pc.len + sizeof(rec) + incl,
			 __ATOMIC_RELAXED);
	if (pc.len > SV_PCAP_FLUSH || t - pc.first_ns > SV_PCAP_AGE_NS)
		flush_locked();
out:
	pthread_mutex_unlock(&pc.lock);
}
