// SPDX-License-Identifier: MIT
/*
 * sv_soak_worker: one side of a soak pair (scripts/soak starts them).  The
 * listener of pair NAME binds an abstract Unix socket, the connector
 * connects to it; over that connection they run sessions, each a fresh
 * set of QPs (RC, RC on an SRQ, UC or UD; 1..4 QPs; PSNs near the wrap
 * sometimes) that do rounds of operations both ways: sends with and
 * without immediate, RDMA writes (with immediate), reads, fetch-and-add
 * and compare-and-swap, 0 B to 1 MiB, inline and multi-SGE, every byte
 * checked.  Both sides derive a round's operations from the session's
 * seed (ops.c), so the receiver knows what must arrive: on RC exactly
 * once and in order (lost, duplicated and corrupt counted apart), on UC
 * and UD loss is tolerated (counted) but not duplicates or corruption.
 * When the peer dies (killed by the driver) the outstanding work must
 * complete with error statuses, which are counted; then the worker pairs
 * with the peer's replacement.  Counters go to --status FILE as one JSON
 * object, rewritten every half second; notable events go to stderr.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "soak.h"

#define SOAK_INLINE 256 /* max_inline_data asked of every QP */
#define SOAK_QKEY   0x11111111u
#define RX_WAIT_S   10.0 /* RC: receives after the peer's DONE */
#define RX_GRACE_S  1.0	 /* UC/UD: then the rest is lost */
#define DRAIN_S	    20.0 /* outstanding work after the peer died */
#define PEER_S	    60.0 /* a live peer's answer */

/* ---- counters, status file, log -------------------------------------- */

#define MAXCNT 160
static struct {
	char name[56];
	uint64_t v;
	bool gauge;
} cnt[MAXCNT];
static int ncnt;
static uint64_t progress;
static char phase[160];
static const char *status_path;
static int worker_slot = -1;
static volatile sig_atomic_t g_stop;
static double last_status, started;
/* SOAK_SELFTEST=hang|crash|corrupt: slot 1 misbehaves 3 s after its start,
 * so that the driver's checks are seen to fail (ctest soak.selftest_*);
 * =leak: slot 0 (long-lived) leaks an fd and 4 MiB each session. */
static const char *selftest;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static uint64_t *counter(const char *name, bool gauge)
{
	for (int i = 0; i < ncnt; i++)
		if (!strcmp(cnt[i].name, name))
			return &cnt[i].v;
	if (ncnt == MAXCNT)
		return &cnt[MAXCNT - 1].v; /* "overflow" below */
	snprintf(cnt[ncnt].name, sizeof(cnt[ncnt].name), "%s", name);
	cnt[ncnt].gauge = gauge;
	return &cnt[ncnt++].v;
}

static void add(const char *name, uint64_t v)
{
	*counter(name, false) += v;
}

__attribute__((format(printf, 2, 3))) static void addf(uint64_t v,
						       const char *fmt, ...)
{
	char name[56];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	add(name, v);
}

static void gauge(const char *name, uint64_t v)
{
	*counter(name, true) = v;
}

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	va_list ap;
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	fprintf(stderr, "%ld.%03ld soak[%d/%d]: ", (long)t.tv_sec,
		t.tv_nsec / 1000000, worker_slot, (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

__attribute__((format(printf, 1, 2))) static void set_phase(const char *fmt,
							    ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(phase, sizeof(phase), fmt, ap);
	va_end(ap);
	for (char *p = phase; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 32)
			*p = ' ';
}

static void write_status(void)
{
	char tmp[4200];
	FILE *f;

	if (!status_path)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", status_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f,
		"{\"pid\": %d, \"slot\": %d, \"time\": %.3f, "
		"\"progress\": %llu, \"phase\": \"%s\", \"counters\": {",
		(int)getpid(), worker_slot, now_s(),
		(unsigned long long)progress, phase);
	for (int i = 0; i < ncnt; i++)
		fprintf(f, "%s\"%s%s\": %llu", i ? ", " : "",
			cnt[i].gauge ? "g." : "", cnt[i].name,
			(unsigned long long)cnt[i].v);
	fprintf(f, "}}\n");
	if (fclose(f) == 0)
		rename(tmp, status_path);
	last_status = now_s();
}

static void misbehave(void)
{
	if (!selftest || worker_slot != 1 || now_s() - started < 3)
		return;
	if (!strcmp(selftest, "crash"))
		abort();
	if (!strcmp(selftest, "hang")) {
		snprintf(phase, sizeof(phase), "selftest: frozen");
		write_status();
		for (;;)
			pause();
	}
}

static void check_stop(void)
{
	misbehave();
	if (g_stop) {
		write_status();
		_exit(0);
	}
	if (now_s() - last_status > 0.5)
		write_status();
}

static long self_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

static long self_rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Time that passes while we run: a SIGSTOP does not use up a deadline. */
struct deadline {
	double left, last;
};

static void dl_start(struct deadline *d, double s)
{
	d->left = s;
	d->last = now_s();
}

static bool dl_over(struct deadline *d)
{
	double t = now_s(), dt = t - d->last;

	d->last = t;
	if (dt < 0.5) /* longer: we were stopped or not scheduled */
		d->left -= dt;
	return d->left < 0;
}

static const char *const wc_names[] = {
	"SUCCESS",
	"LOC_LEN_ERR",
	"LOC_QP_OP_ERR",
	"LOC_EEC_OP_ERR",
	"LOC_PROT_ERR",
	"WR_FLUSH_ERR",
	"MW_BIND_ERR",
	"BAD_RESP_ERR",
	"LOC_ACCESS_ERR",
	"REM_INV_REQ_ERR",
	"REM_ACCESS_ERR",
	"REM_OP_ERR",
	"RETRY_EXC_ERR",
	"RNR_RETRY_EXC_ERR",
	"LOC_RDD_VIOL_ERR",
	"REM_INV_RD_REQ_ERR",
	"REM_ABORT_ERR",
	"INV_EECN_ERR",
	"INV_EEC_STATE_ERR",
	"FATAL_ERR",
	"RESP_TIMEOUT_ERR",
	"GENERAL_ERR",
	"TM_ERR",
	"TM_RNDV_INCOMPLETE",
};

static const char *wc_name(unsigned s)
{
	return s < sizeof(wc_names) / sizeof(wc_names[0]) ? wc_names[s]
							  : "UNKNOWN";
}

/* ---- verbs resources of one context ---------------------------------- */

struct res {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *mem;
	size_t memlen;
	uint16_t lid;
	uint32_t ud_mtu;
	/* areas of mem, all in the one MR */
	uint8_t *recv, *send, *win, *exp, *rd;
	uint64_t *ctr;
};

#define SLOT_STRIDE (SOAK_SLOT + SOAK_SLOT_PAD)
#define NSLOTS	    (SOAK_MAXQP * SOAK_DEPTH)
#define CQ_DEPTH    (SOAK_MAXQP * (SOAK_SQ_DEPTH + SOAK_DEPTH) + 64)

static int res_open(struct res *r)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;
	size_t off = 0;

	if (!l || !l[0]) {
		say("no RDMA device: run under softverbs-run");
		exit(1);
	}
	r->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!r->ctx)
		return -errno;
	if (ibv_query_port(r->ctx, 1, &pa))
		return -EIO;
	r->lid = pa.lid;
	r->ud_mtu = 128u << pa.active_mtu;
	r->pd = ibv_alloc_pd(r->ctx);
	r->ch = ibv_create_comp_channel(r->ctx);
	if (!r->pd || !r->ch)
		return -errno;
	r->cq = ibv_create_cq(r->ctx, CQ_DEPTH, NULL, r->ch, 0);
	if (!r->cq)
		return -errno;
	r->memlen = (size_t)NSLOTS * SLOT_STRIDE + SOAK_SENDAREA +
		    SOAK_WINAREA + SOAK_EXPAREA + SOAK_READAREA + 4096;
	r->mem = aligned_alloc(4096, r->memlen);
	if (!r->mem)
		return -ENOMEM;
	r->recv = r->mem;
	off = (size_t)NSLOTS * SLOT_STRIDE;
	r->send = r->mem + off;
	off += SOAK_SENDAREA;
	r->win = r->mem + off;
	off += SOAK_WINAREA;
	r->exp = r->mem + off;
	off += SOAK_EXPAREA;
	r->rd = r->mem + off;
	off += SOAK_READAREA;
	r->ctr = (uint64_t *)(r->mem + off);
	r->mr = ibv_reg_mr(r->pd, r->mem, r->memlen,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	if (!r->mr)
		return -errno;
	return 0;
}

static void res_close(struct res *r)
{
	if (r->mr && ibv_dereg_mr(r->mr))
		add("error.dereg_mr", 1);
	if (r->cq && ibv_destroy_cq(r->cq))
		add("error.destroy_cq", 1);
	if (r->ch && ibv_destroy_comp_channel(r->ch))
		add("error.destroy_comp_channel", 1);
	if (r->pd && ibv_dealloc_pd(r->pd))
		add("error.dealloc_pd", 1);
	if (r->ctx && ibv_close_device(r->ctx))
		add("error.close_device", 1);
	free(r->mem);
	memset(r, 0, sizeof(*r));
}

/* ---- a session -------------------------------------------------------- */

struct sess {
	struct res *r;
	struct soak_session p;
	int role; /* 0 listener, 1 connector: our direction */
	uint32_t no;
	int oob;
	uint8_t ibuf[sizeof(struct soak_msg)];
	size_t ilen;
	struct ibv_qp *qp[SOAK_MAXQP];
	struct ibv_srq *srq;
	struct ibv_ah *ah;
	struct soak_msg peer; /* its hello */
	bool have_hello, peer_eof, peer_abort, peer_bye, failed;
	int64_t peer_ready, peer_done;
	char why[96];
	struct soak_dirstate ds[2];
	struct soak_opdesc my[SOAK_MAXOPS], theirs[SOAK_MAXOPS];
	int nmy, ntheirs, outstanding;
	bool done_op[SOAK_MAXOPS];
	uint32_t round;
	uint32_t rx_base[SOAK_MAXQP], rx_count[SOAK_MAXQP], rx_next[SOAK_MAXQP];
	struct soak_opdesc *rx_op[SOAK_MAXQP][SOAK_DEPTH];
	uint64_t tally[32]; /* error statuses seen in this session */
	int reported;	    /* content errors logged in this session */
};

static bool lossy(const struct sess *s)
{
	return s->p.kind == KIND_UC || s->p.kind == KIND_UD;
}

__attribute__((format(printf, 2, 3))) static void fail(struct sess *s,
						       const char *fmt, ...)
{
	va_list ap;

	if (s->failed)
		return;
	s->failed = true;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
}

/* A content error: counted, the first few of a session said. */
__attribute__((format(printf, 4, 5))) static void
bad(struct sess *s, const char *what, uint64_t n, const char *fmt, ...)
{
	va_list ap;
	char msg[200];

	add(what, n);
	if (s->reported++ >= 8)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	say("%s (%llu): session %u (%s) round %u: %s", what,
	    (unsigned long long)n, s->no, soak_kind_names[s->p.kind], s->round,
	    msg);
}

/* Never blocks on the peer for long: a stopped peer's socket buffer
 * holds far more than the few messages of a round. */
static int oob_send_msg(struct sess *s, struct soak_msg m)
{
	struct deadline d;
	size_t done = 0;

	m.magic = SOAK_MAGIC;
	m.version = SOAK_VERSION;
	dl_start(&d, PEER_S);
	while (done < sizeof(m)) {
		ssize_t n = send(s->oob, (char *)&m + done, sizeof(m) - done,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			s->peer_eof = true;
			return -1;
		}
		if (dl_over(&d)) {
			fail(s, "oob send blocked");
			return -1;
		}
		poll(&(struct pollfd){.fd = s->oob, .events = POLLOUT}, 1, 100);
	}
	return 0;
}

static int oob_send(struct sess *s, enum soak_msg_type type, uint32_t round)
{
	return oob_send_msg(
		s, (struct soak_msg){.type = (uint16_t)type, .round = round});
}

/* Every field of a peer's message checked before use. */
static void oob_take(struct sess *s, const struct soak_msg *m)
{
	progress++;
	if (m->magic != SOAK_MAGIC || m->version != SOAK_VERSION) {
		fail(s, "oob: bad magic/version");
		return;
	}
	switch (m->type) {
	case MSG_HELLO:
		if (s->have_hello || m->kind >= KIND_NR || !m->nqp ||
		    m->nqp > SOAK_MAXQP || m->nrounds > 1000 ||
		    m->max_inline != SOAK_INLINE || m->mtu < 256 ||
		    m->mtu > 4096 || m->lid > 0xffff) {
			fail(s, "oob: bad hello");
			return;
		}
		for (uint32_t i = 0; i < m->nqp; i++)
			if (m->qpn[i] > 0xffffff) {
				fail(s, "oob: bad QPN");
				return;
			}
		s->peer = *m;
		s->have_hello = true;
		break;
	case MSG_READY:
		if ((int64_t)m->round != s->peer_ready + 1)
			fail(s, "oob: READY %u after %lld", m->round,
			     (long long)s->peer_ready);
		s->peer_ready = m->round;
		break;
	case MSG_DONE:
		if ((int64_t)m->round != s->peer_done + 1)
			fail(s, "oob: DONE %u after %lld", m->round,
			     (long long)s->peer_done);
		s->peer_done = m->round;
		break;
	case MSG_BYE:
		s->peer_bye = true;
		break;
	case MSG_ABORT:
		s->peer_abort = true;
		break;
	default:
		fail(s, "oob: type %u", m->type);
	}
}

static void oob_read(struct sess *s)
{
	for (;;) {
		ssize_t n = recv(s->oob, s->ibuf + s->ilen,
				 sizeof(s->ibuf) - s->ilen, MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			s->peer_eof = true;
			return;
		}
		if (n < 0)
			return;
		s->ilen += (size_t)n;
		if (s->ilen == sizeof(s->ibuf)) {
			struct soak_msg m;

			memcpy(&m, s->ibuf, sizeof(m));
			s->ilen = 0;
			oob_take(s, &m);
			if (s->peer_bye)
				return; /* the rest is the next session's */
		}
	}
}

/* Logical offset o of a message in a two-SGE receive slot. */
static uint8_t *slot_at(struct sess *s, uint32_t slot, uint32_t o)
{
	uint8_t *b = s->r->recv + (size_t)slot * SLOT_STRIDE;

	if (s->p.kind == KIND_UD)
		return b + 40 + o;
	return o < SOAK_SPLIT ? b + o : b + o + SOAK_SPLIT_GAP;
}

static int post_recv_slot(struct sess *s, uint32_t slot, int qpi)
{
	uint8_t *b = s->r->recv + (size_t)slot * SLOT_STRIDE;
	struct ibv_sge sg[2] = {
		{(uintptr_t)b, SOAK_SPLIT, s->r->mr->lkey},
		{(uintptr_t)(b + SOAK_SPLIT + SOAK_SPLIT_GAP),
		 SOAK_SLOT - SOAK_SPLIT, s->r->mr->lkey},
	};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = sg, .num_sge = 2},
			   *bad_wr;

	if (s->p.kind == KIND_UD) {
		sg[0].length = 40 + s->p.mtu;
		wr.num_sge = 1;
	}
	if (s->srq)
		return ibv_post_srq_recv(s->srq, &wr, &bad_wr);
	return ibv_post_recv(s->qp[qpi], &wr, &bad_wr);
}

static int qp_index(struct sess *s, uint32_t qpn)
{
	for (uint32_t i = 0; i < s->p.nqp; i++)
		if (s->qp[i] && s->qp[i]->qp_num == qpn)
			return (int)i;
	return -1;
}

static void take_recv(struct sess *s, const struct ibv_wc *wc)
{
	uint32_t slot = (uint32_t)wc->wr_id, seq, hdr = 0, base;
	int qpi = qp_index(s, wc->qp_num);
	const struct soak_opdesc *o;
	uint32_t len;
	uint64_t seq64;
	long at;

	if (qpi < 0 || slot >= NSLOTS ||
	    (!s->srq && slot / SOAK_DEPTH != (uint32_t)qpi)) {
		bad(s, "corrupt.recv_wrong_qp", 1, "slot %u on QPN %u", slot,
		    wc->qp_num);
		return;
	}
	if (s->p.kind == KIND_UD) {
		if (wc->src_qp != s->peer.qpn[qpi] || wc->byte_len < 40) {
			bad(s, "corrupt.ud_source", 1, "src_qp %u len %u",
			    wc->src_qp, wc->byte_len);
			goto repost;
		}
		hdr = 40;
	}
	len = wc->byte_len - hdr;
	if (wc->wc_flags & IBV_WC_WITH_IMM) {
		seq = ntohl(wc->imm_data);
	} else if (len >= 8 && wc->opcode == IBV_WC_RECV) {
		memcpy(&seq64, slot_at(s, slot, 0), 8);
		if (seq64 > UINT32_MAX) {
			bad(s, "corrupt.send_header", 1, "seq %llx",
			    (unsigned long long)seq64);
			goto repost;
		}
		seq = (uint32_t)seq64;
	} else {
		bad(s, "corrupt.unnamed_recv", 1, "opcode %d len %u",
		    wc->opcode, len);
		goto repost;
	}
	base = s->rx_base[qpi];
	if ((int32_t)(seq - s->rx_next[qpi]) < 0) {
		bad(s, "dup", 1, "QP %d seq %u, expected %u", qpi, seq,
		    s->rx_next[qpi]);
		goto repost;
	}
	if (seq - base >= s->rx_count[qpi]) {
		bad(s, "corrupt.unknown_seq", 1, "QP %d seq %u not in [%u,%u)",
		    qpi, seq, base, base + s->rx_count[qpi]);
		goto repost;
	}
	if (seq != s->rx_next[qpi])
		bad(s, lossy(s) ? "lost_tolerated" : "lost",
		    seq - s->rx_next[qpi], "QP %d got seq %u, expected %u", qpi,
		    seq, s->rx_next[qpi]);
	s->rx_next[qpi] = seq + 1;
	o = s->rx_op[qpi][seq - base];
	if (o->op == OP_WRITE_IMM) {
		if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM)
			bad(s, "corrupt.opcode", 1, "write_imm as %d",
			    wc->opcode);
		else if (len != o->len)
			bad(s, "corrupt.length", 1,
			    "write_imm seq %u: byte_len %u of %u", seq, len,
			    o->len);
		add("recv.write_imm", 1);
		goto repost; /* its data is checked at the round's end */
	}
	if (wc->opcode != IBV_WC_RECV || len != o->len ||
	    !(wc->wc_flags & IBV_WC_WITH_IMM) != (o->op == OP_SEND)) {
		bad(s, "corrupt.length", 1,
		    "%s seq %u: opcode %d len %u flags %x, sent %u",
		    soak_op_names[o->op], seq, wc->opcode, len, wc->wc_flags,
		    o->len);
		goto repost;
	}
	hdr = o->op == OP_SEND ? 8 : 0;
	at = soak_check(slot_at(s, slot, hdr), o->key, hdr,
			len < SOAK_SPLIT ? len - hdr : SOAK_SPLIT - hdr);
	if (at < 0 && len > SOAK_SPLIT)
		at = soak_check(slot_at(s, slot, SOAK_SPLIT), o->key,
				SOAK_SPLIT, len - SOAK_SPLIT);
	if (at >= 0)
		bad(s, "corrupt.payload", 1, "%s seq %u len %u: byte %ld",
		    soak_op_names[o->op], seq, len, at);
	add("msgs", 1);
	add("bytes", len);
	addf(1, "recv.%s.%s", soak_kind_names[s->p.kind], soak_op_names[o->op]);
repost:
	if (post_recv_slot(s, slot, qpi))
		fail(s, "post_recv: %s", strerror(errno));
}

static void take_send(struct sess *s, const struct ibv_wc *wc)
{
	static const enum ibv_wc_opcode want[OP_NR] = {
		IBV_WC_SEND,	   IBV_WC_SEND,	     IBV_WC_RDMA_WRITE,
		IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD,
		IBV_WC_COMP_SWAP};
	uint32_t i = (uint32_t)(wc->wr_id & 0xffff);
	struct soak_opdesc *o;
	uint64_t got;
	long at = -1;

	if (i >= (uint32_t)s->nmy || s->done_op[i]) {
		bad(s, "dup.completion", 1, "wr_id %llx",
		    (unsigned long long)wc->wr_id);
		return;
	}
	s->done_op[i] = true;
	s->outstanding--;
	o = &s->my[i];
	if (wc->opcode != want[o->op]) {
		bad(s, "corrupt.opcode", 1, "%s completed as %d",
		    soak_op_names[o->op], wc->opcode);
		return;
	}
	if (o->op == OP_READ) {
		uint32_t lo = 0;

		for (int k = 0; k < o->nsge && at < 0; k++) {
			at = soak_check(s->r->rd + o->loff[k], o->key,
					o->roff + lo, o->llen[k]);
			if (at >= 0)
				at += lo;
			lo += o->llen[k];
		}
		if (at >= 0)
			bad(s, "corrupt.read", 1, "read of %u at %u: byte %ld",
			    o->len, o->roff, at);
	} else if (o->op == OP_FADD || o->op == OP_CAS) {
		memcpy(&got, s->r->rd + o->loff[0], 8);
		if (got != o->old)
			bad(s, "corrupt.atomic", 1,
			    "%s returned %llx, counter was %llx",
			    soak_op_names[o->op], (unsigned long long)got,
			    (unsigned long long)o->old);
	}
	addf(1, "op.%s", soak_op_names[o->op]);
	add("bytes_out", o->len);
}

static void take_wc(struct sess *s, const struct ibv_wc *wc)
{
	progress++;
	if (wc->status != IBV_WC_SUCCESS) {
		s->tally[wc->status < 31 ? wc->status : 31]++;
		if (wc->wr_id >> 63) {
			uint32_t i = (uint32_t)(wc->wr_id & 0xffff);

			if (i < (uint32_t)s->nmy && !s->done_op[i]) {
				s->done_op[i] = true;
				s->outstanding--;
			}
		}
		fail(s, "completion %s (%s)", wc_name(wc->status),
		     wc->wr_id >> 63 ? "send queue" : "receive queue");
		return;
	}
	if (wc->wr_id >> 63)
		take_send(s, wc);
	else
		take_recv(s, wc);
}

/* One step: completions, then the peer's messages; with wait, sleep on
 * the CQ's channel and the socket for up to wait_ms when idle. */
static void pump(struct sess *s, int wait_ms)
{
	struct ibv_wc wc[32];
	int n;

	check_stop();
	n = s->r->cq ? ibv_poll_cq(s->r->cq, 32, wc) : 0;
	for (int i = 0; i < n; i++)
		take_wc(s, &wc[i]);
	if (n < 0)
		fail(s, "ibv_poll_cq: %d", n);
	if (!s->peer_eof)
		oob_read(s);
	if (n || !wait_ms)
		return;
	if (s->r->cq) {
		if (ibv_req_notify_cq(s->r->cq, 0)) {
			fail(s, "ibv_req_notify_cq");
			return;
		}
		n = ibv_poll_cq(s->r->cq, 32, wc);
		for (int i = 0; i < n; i++)
			take_wc(s, &wc[i]);
		if (n)
			return;
	}
	struct pollfd p[2] = {
		{.fd = s->peer_eof ? -1 : s->oob, .events = POLLIN},
		{.fd = s->r->ch ? s->r->ch->fd : -1, .events = POLLIN},
	};
	if (poll(p, 2, wait_ms) > 0 && (p[1].revents & POLLIN)) {
		struct ibv_cq *cq;
		void *cctx;

		if (!ibv_get_cq_event(s->r->ch, &cq, &cctx))
			ibv_ack_cq_events(cq, 1);
	}
}

static uint32_t psn_of(const struct sess *s, int dir, int q)
{
	uint64_t k = soak_key(s->p.seed, 7, (uint32_t)dir, (uint32_t)q, 0);

	/* a quarter of the sessions start just below the 24-bit wrap */
	if (s->p.seed & 3)
		return (uint32_t)(k & 0xffffff);
	return 0xffffff - (uint32_t)(k % 64);
}

static int create_qps(struct sess *s)
{
	enum ibv_qp_type t = s->p.kind == KIND_UC   ? IBV_QPT_UC
			     : s->p.kind == KIND_UD ? IBV_QPT_UD
						    : IBV_QPT_RC;

	if (s->p.kind == KIND_SRQ) {
		struct ibv_srq_init_attr sa = {
			.attr = {.max_wr = NSLOTS, .max_sge = 2}};

		s->srq = ibv_create_srq(s->r->pd, &sa);
		if (!s->srq)
			return -errno;
	}
	for (uint32_t i = 0; i < s->p.nqp; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = s->r->cq,
			.recv_cq = s->r->cq,
			.srq = s->srq,
			.cap = {.max_send_wr = SOAK_SQ_DEPTH,
				.max_recv_wr = s->srq ? 0 : SOAK_DEPTH,
				.max_send_sge = 3,
				.max_recv_sge = 2,
				.max_inline_data = SOAK_INLINE},
			.qp_type = t,
		};
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
					.port_num = 1,
					.qkey = SOAK_QKEY};
		int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

		s->qp[i] = ibv_create_qp(s->r->pd, &ia);
		if (!s->qp[i])
			return -errno;
		if (t == IBV_QPT_UD) {
			mask |= IBV_QP_QKEY;
		} else {
			mask |= IBV_QP_ACCESS_FLAGS;
			a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
			if (t == IBV_QPT_RC)
				a.qp_access_flags |= IBV_ACCESS_REMOTE_READ |
						     IBV_ACCESS_REMOTE_ATOMIC;
		}
		if (ibv_modify_qp(s->qp[i], &a, mask))
			return -EIO;
	}
	return 0;
}

static int connect_qps(struct sess *s)
{
	int me = s->role, them = !s->role;

	if (s->p.kind == KIND_UD) {
		struct ibv_ah_attr aa = {.dlid = (uint16_t)s->peer.lid,
					 .port_num = 1};

		s->ah = ibv_create_ah(s->r->pd, &aa);
		if (!s->ah)
			return -errno;
	}
	for (uint32_t i = 0; i < s->p.nqp; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR,
			.path_mtu = (s->p.seed >> 8) & 1 ? IBV_MTU_4096
							 : IBV_MTU_1024,
			.dest_qp_num = s->peer.qpn[i],
			.rq_psn = psn_of(s, them, (int)i),
			.max_dest_rd_atomic = 8,
			.min_rnr_timer = 1,
			.ah_attr = {.dlid = (uint16_t)s->peer.lid,
				    .port_num = 1},
		};
		int rtr = IBV_QP_STATE, rts = IBV_QP_STATE | IBV_QP_SQ_PSN;

		if (s->p.kind != KIND_UD)
			rtr |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			       IBV_QP_RQ_PSN;
		if (s->p.kind == KIND_RC || s->p.kind == KIND_SRQ) {
			rtr |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			rts |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		}
		if (ibv_modify_qp(s->qp[i], &a, rtr))
			return -EIO;
		a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
					 .timeout = 14,
					 .retry_cnt = 7,
					 .rnr_retry = 7,
					 .sq_psn = psn_of(s, me, (int)i),
					 .max_rd_atomic = 8};
		if (ibv_modify_qp(s->qp[i], &a, rts))
			return -EIO;
	}
	for (uint32_t i = 0; i < s->p.nqp * SOAK_DEPTH; i++)
		if (post_recv_slot(s, i, (int)(i / SOAK_DEPTH)))
			return -EIO;
	return 0;
}

static void destroy_qps(struct sess *s)
{
	for (uint32_t i = 0; i < SOAK_MAXQP; i++)
		if (s->qp[i] && ibv_destroy_qp(s->qp[i]))
			addf(1, "error.destroy_qp_%s", strerror(errno));
	if (s->ah && ibv_destroy_ah(s->ah))
		add("error.destroy_ah", 1);
	if (s->srq && ibv_destroy_srq(s->srq))
		add("error.destroy_srq", 1);
	memset(s->qp, 0, sizeof(s->qp));
	s->ah = NULL;
	s->srq = NULL;
	/* what the destroyed QPs left on the CQ is theirs, not ours */
	for (struct ibv_wc wc[32]; ibv_poll_cq(s->r->cq, 32, wc) > 0;)
		;
}

static int post_op(struct sess *s, int i)
{
	struct soak_opdesc *o = &s->my[i];
	struct ibv_sge sg[3];
	struct ibv_send_wr wr = {.wr_id = 1ull << 63 | (uint64_t)i,
				 .sg_list = sg,
				 .num_sge = o->nsge,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad_wr;
	bool remote_src = o->op == OP_READ || o->op >= OP_FADD;
	uint8_t *area = remote_src ? s->r->rd : s->r->send;
	uint32_t lo = 0;
	uint64_t win = s->peer.base + (uint64_t)(s->r->win - s->r->mem);
	uint64_t exp = s->peer.base + (uint64_t)(s->r->exp - s->r->mem);
	uint64_t ctr = s->peer.base +
		       (uint64_t)((uint8_t *)&s->r->ctr[o->qpi] - s->r->mem);

	for (int k = 0; k < o->nsge; k++) {
		uint8_t *p = area + o->loff[k];

		sg[k] = (struct ibv_sge){(uintptr_t)p, o->llen[k],
					 s->r->mr->lkey};
		if (remote_src)
			memset(p, 0x5a, o->llen[k]);
		else
			soak_fill(p, o->key, lo, o->llen[k]);
		lo += o->llen[k];
	}
	if (selftest && !strcmp(selftest, "corrupt") && worker_slot == 1 &&
	    o->op == OP_SEND_IMM && o->len && now_s() - started > 3)
		area[o->loff[o->nsge - 1] + o->llen[o->nsge - 1] - 1] ^= 1;
	if (o->op == OP_SEND) {
		uint64_t seq = o->seq;

		memcpy(area + o->loff[0], &seq, 8); /* piece 0 has >= 8 */
	}
	if (o->inl)
		wr.send_flags |= IBV_SEND_INLINE;
	switch (o->op) {
	case OP_SEND:
		wr.opcode = IBV_WR_SEND;
		break;
	case OP_SEND_IMM:
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl(o->seq);
		break;
	case OP_WRITE:
	case OP_WRITE_IMM:
		wr.opcode = o->op == OP_WRITE ? IBV_WR_RDMA_WRITE
					      : IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl(o->seq);
		wr.wr.rdma.remote_addr = win + o->roff;
		wr.wr.rdma.rkey = s->peer.rkey;
		break;
	case OP_READ:
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = exp + o->roff;
		wr.wr.rdma.rkey = s->peer.rkey;
		break;
	case OP_FADD:
	case OP_CAS:
		wr.opcode = o->op == OP_FADD ? IBV_WR_ATOMIC_FETCH_AND_ADD
					     : IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.remote_addr = ctr;
		wr.wr.atomic.rkey = s->peer.rkey;
		wr.wr.atomic.compare_add = o->op == OP_FADD ? o->add : o->cmp;
		wr.wr.atomic.swap = o->cmp + o->add;
		break;
	}
	if (s->p.kind == KIND_UD) {
		wr.wr.ud.ah = s->ah;
		wr.wr.ud.remote_qpn = s->peer.qpn[o->qpi];
		wr.wr.ud.remote_qkey = SOAK_QKEY;
	}
	return ibv_post_send(s->qp[o->qpi], &wr, &bad_wr);
}

static bool rx_complete(const struct sess *s)
{
	for (uint32_t q = 0; q < s->p.nqp; q++)
		if (s->rx_next[q] != s->rx_base[q] + s->rx_count[q])
			return false;
	return true;
}

/* The peer's writes of this round, in our write area; our counter. */
static void check_round(struct sess *s)
{
	for (int i = 0; i < s->ntheirs; i++) {
		const struct soak_opdesc *o = &s->theirs[i];
		const uint8_t *p = s->r->win + o->roff;
		long at;
		uint32_t k = 0;

		if (o->op != OP_WRITE && o->op != OP_WRITE_IMM)
			continue;
		at = soak_check(p, o->key, 0, o->len);
		if (at < 0) {
			addf(1, "recv.%s.%s", soak_kind_names[s->p.kind],
			     soak_op_names[o->op]);
			add("msgs", 1);
			add("bytes", o->len);
			continue;
		}
		while (k < o->len && p[k] == SOAK_POISON)
			k++;
		if (k == o->len && lossy(s) && o->op == OP_WRITE)
			bad(s, "lost_tolerated", 1, "write of %u at %u", o->len,
			    o->roff);
		else
			bad(s, "corrupt.write", 1,
			    "%s of %u at %u (QP %u): byte %ld",
			    soak_op_names[o->op], o->len, o->roff, o->qpi, at);
	}
	for (uint32_t q = 0; q < s->p.nqp; q++)
		if ((s->p.kind == KIND_RC || s->p.kind == KIND_SRQ) &&
		    s->r->ctr[q] != s->ds[!s->role].ctr[q])
			bad(s, "corrupt.counter", 1,
			    "counter of QP %u %llx, expected %llx", q,
			    (unsigned long long)s->r->ctr[q],
			    (unsigned long long)s->ds[!s->role].ctr[q]);
}

/* Waits while cond holds; -1 if the session failed or the peer went. */
#define WAIT_WHILE(s, cond)                                                    \
	({                                                                     \
		int rc_ = 0;                                                   \
		while (cond) {                                                 \
			pump(s, 10);                                           \
			if ((s)->failed || (s)->peer_eof || (s)->peer_abort) { \
				rc_ = -1;                                      \
				break;                                         \
			}                                                      \
		}                                                              \
		rc_;                                                           \
	})

static int run_round(struct sess *s, uint32_t r)
{
	int me = s->role, them = !s->role;
	uint32_t before[SOAK_MAXQP];
	struct deadline d;

	s->round = r;
	memcpy(before, s->ds[them].seq, sizeof(before));
	s->nmy = soak_gen_ops(&s->p, me, r, &s->ds[me], s->my);
	s->ntheirs = soak_gen_ops(&s->p, them, r, &s->ds[them], s->theirs);
	memset(s->rx_count, 0, sizeof(s->rx_count));
	for (int i = 0; i < s->ntheirs; i++) {
		struct soak_opdesc *o = &s->theirs[i];

		if (soak_op_recv(o->op))
			s->rx_op[o->qpi][s->rx_count[o->qpi]++] = o;
		if (o->op == OP_WRITE || o->op == OP_WRITE_IMM)
			memset(s->r->win + o->roff, SOAK_POISON, o->len);
	}
	memcpy(s->rx_base, before, sizeof(before));
	memcpy(s->rx_next, before, sizeof(before));
	soak_fill(s->r->exp, soak_key(s->p.seed, KEY_EXP, (uint32_t)me, r, 0),
		  0, SOAK_EXPAREA);
	if (r == 0)
		memset(s->r->ctr, 0, SOAK_MAXQP * sizeof(*s->r->ctr));
	set_phase("session %u (%s, %u QPs) round %u/%u: waiting for the "
		  "peer's READY",
		  s->no, soak_kind_names[s->p.kind], s->p.nqp, r, s->p.nrounds);
	if (oob_send(s, MSG_READY, r) ||
	    WAIT_WHILE(s, s->peer_ready < (int64_t)r))
		return -1;
	memset(s->done_op, 0, sizeof(s->done_op));
	s->outstanding = 0;
	for (int i = 0; i < s->nmy; i++) {
		if (post_op(s, i)) {
			fail(s, "post_send %s: %s", soak_op_names[s->my[i].op],
			     strerror(errno));
			return -1;
		}
		s->outstanding++;
	}
	set_phase("session %u (%s, %u QPs) round %u: %d of %d operations "
		  "outstanding",
		  s->no, soak_kind_names[s->p.kind], s->p.nqp, r,
		  s->outstanding, s->nmy);
	if (WAIT_WHILE(s, s->outstanding > 0) || oob_send(s, MSG_DONE, r))
		return -1;
	set_phase("session %u (%s, %u QPs) round %u: waiting for the peer's "
		  "DONE and its messages",
		  s->no, soak_kind_names[s->p.kind], s->p.nqp, r);
	if (WAIT_WHILE(s, s->peer_done < (int64_t)r))
		return -1;
	dl_start(&d, lossy(s) ? RX_GRACE_S : RX_WAIT_S);
	if (WAIT_WHILE(s, !rx_complete(s) && !dl_over(&d)))
		return -1;
	for (uint32_t q = 0; q < s->p.nqp; q++) {
		uint32_t miss = s->rx_base[q] + s->rx_count[q] - s->rx_next[q];

		if (miss)
			bad(s, lossy(s) ? "lost_tolerated" : "lost", miss,
			    "QP %u: the last %u of %u receives never came", q,
			    miss, s->rx_count[q]);
	}
	check_round(s);
	add("rounds", 1);
	return 0;
}

/* The listener picks the session; both sides make and connect QPs. */
static int setup(struct sess *s, uint64_t *rng)
{
	struct soak_msg *h = &s->peer;
	struct soak_msg mine = {0};
	int err;

	if (s->role == 0) {
		const char *only = getenv("SOAK_KINDS");

		do {
			*rng = soak_mix(*rng);
			s->p.kind = (enum soak_kind)(*rng % 10 < 4   ? KIND_RC
						     : *rng % 10 < 6 ? KIND_SRQ
						     : *rng % 10 < 8 ? KIND_UC
								     : KIND_UD);
		} while (only && !strstr(only, soak_kind_names[s->p.kind]));
		s->p.nqp = 1 + (uint32_t)(*rng >> 8) % SOAK_MAXQP;
		s->p.nrounds = 1 + (uint32_t)(*rng >> 16) % 30;
		s->p.seed = soak_mix(*rng ^ 0x5eed);
		s->p.mtu = s->r->ud_mtu;
	}
	set_phase("session %u: setting up", s->no);
	if (s->role == 1) {
		if (WAIT_WHILE(s, !s->have_hello))
			return -1;
		s->p.kind = (enum soak_kind)h->kind;
		s->p.nqp = h->nqp;
		s->p.nrounds = h->nrounds;
		s->p.seed = h->seed;
		s->p.mtu = h->mtu;
	}
	s->p.max_inline = SOAK_INLINE;
	err = create_qps(s);
	if (err) {
		fail(s, "create %s QPs: %s", soak_kind_names[s->p.kind],
		     strerror(-err));
		return -1;
	}
	mine = (struct soak_msg){.round = s->no,
				 .kind = s->p.kind,
				 .nqp = s->p.nqp,
				 .nrounds = s->p.nrounds,
				 .lid = s->r->lid,
				 .rkey = s->r->mr->rkey,
				 .pid = (uint32_t)getpid(),
				 .mtu = s->p.mtu,
				 .seed = s->p.seed,
				 .base = (uintptr_t)s->r->mem,
				 .max_inline = SOAK_INLINE};
	for (uint32_t i = 0; i < s->p.nqp; i++)
		mine.qpn[i] = s->qp[i]->qp_num;
	if (s->role == 1) {
		err = connect_qps(s);
		if (err) {
			fail(s, "connect %s QPs: %s",
			     soak_kind_names[s->p.kind], strerror(-err));
			return -1;
		}
	}
	mine.type = MSG_HELLO;
	if (oob_send_msg(s, mine))
		return -1;
	if (s->role == 0) {
		if (WAIT_WHILE(s, !s->have_hello))
			return -1;
		if (h->kind != s->p.kind || h->nqp != s->p.nqp ||
		    h->seed != s->p.seed || h->nrounds != s->p.nrounds) {
			fail(s, "peer's hello disagrees");
			return -1;
		}
		err = connect_qps(s);
		if (err) {
			fail(s, "connect %s QPs: %s",
			     soak_kind_names[s->p.kind], strerror(-err));
			return -1;
		}
	}
	return 0;
}

/* A session that ended early: why, what completed how, and whose fault. */
static void session_abort(struct sess *s)
{
	struct deadline d;
	bool said = false;

	if (!s->peer_eof) /* also the answer to the peer's ABORT */
		oob_send(s, MSG_ABORT, 0);
	set_phase("session %u: aborted (%s): waiting for the peer's answer",
		  s->no, s->failed ? s->why : "peer");
	dl_start(&d, PEER_S);
	while (!s->peer_eof && !s->peer_abort && !dl_over(&d))
		pump(s, 10);
	if (s->peer_eof && !s->peer_abort) {
		/* the peer is gone: our work must complete, in error */
		dl_start(&d, DRAIN_S);
		while (s->outstanding > 0) {
			set_phase("session %u: peer gone, %d operations "
				  "outstanding%s",
				  s->no, s->outstanding,
				  said ? " past the drain deadline: HANG" : "");
			pump(s, 10);
			if (!said && dl_over(&d)) {
				said = true;
				add("hang.drain", 1);
				say("HANG: %d operations still outstanding "
				    "%.0f s after the peer of session %u "
				    "died",
				    s->outstanding, DRAIN_S, s->no);
			}
		}
		add("peers_lost", 1);
		for (int i = 0; i < 32; i++)
			if (s->tally[i])
				addf(s->tally[i], "peer_death.%s", wc_name(i));
		say("peer of session %u gone in round %u (%s); statuses seen:"
		    " %llu RETRY_EXC_ERR %llu WR_FLUSH_ERR",
		    s->no, s->round, s->failed ? s->why : "connection closed",
		    (unsigned long long)s->tally[IBV_WC_RETRY_EXC_ERR],
		    (unsigned long long)s->tally[IBV_WC_WR_FLUSH_ERR]);
	} else {
		if (s->failed) {
			addf(1, "error.%s", s->why);
			say("ERROR: session %u (%s) round %u with a live peer: "
			    "%s",
			    s->no, soak_kind_names[s->p.kind], s->round,
			    s->why);
		} else {
			add("peer_aborted", 1);
		}
		for (int i = 0; i < 32; i++)
			if (s->tally[i])
				addf(s->tally[i], "unexpected.%s", wc_name(i));
	}
	destroy_qps(s);
}

/* Sessions over one connection until one fails; then the caller pairs
 * again. */
static void serve(struct res *r, int oob, int role, uint64_t *rng,
		  uint32_t *sessno)
{
	static struct sess s;

	for (;;) {
		uint64_t chance;

		*rng = soak_mix(*rng);
		chance = *rng;
		if (!r->ctx || chance % 8 == 0) {
			if (r->ctx)
				res_close(r);
			if (res_open(r)) {
				say("cannot open the device: %s",
				    strerror(errno));
				exit(1);
			}
			add("contexts", 1);
			/* a fresh context holds what every one holds: what
			 * grows here from one to the next is a leak */
			gauge("fresh_fds", (uint64_t)self_fds());
			gauge("fresh_rss_kib", (uint64_t)self_rss_kib());
		}
		if (selftest && !strcmp(selftest, "leak") && worker_slot == 0) {
			char *m = malloc(4 << 20);

			if (dup(2) < 0 || !m)
				say("selftest leak: %s", strerror(errno));
			else
				memset(m, 1, 4 << 20); /* and never freed */
		}
		/* quiet figures: between sessions nothing else is held */
		gauge("idle_fds", (uint64_t)self_fds());
		gauge("idle_rss_kib", (uint64_t)self_rss_kib());
		s = (struct sess){.r = r,
				  .role = role,
				  .no = (*sessno)++,
				  .oob = oob,
				  .peer_ready = -1,
				  .peer_done = -1};
		if (setup(&s, rng)) {
			session_abort(&s);
			return;
		}
		addf(1, "sessions.%s", soak_kind_names[s.p.kind]);
		for (uint32_t i = 0; i < s.p.nrounds; i++)
			if (run_round(&s, i)) {
				session_abort(&s);
				return;
			}
		set_phase("session %u: waiting for the peer's BYE", s.no);
		if (oob_send(&s, MSG_BYE, 0) || WAIT_WHILE(&s, !s.peer_bye)) {
			session_abort(&s);
			return;
		}
		destroy_qps(&s);
		add("sessions_ok", 1);
		gauge("last_session_ok", (uint64_t)time(NULL));
	}
}

/* ---- pairing ---------------------------------------------------------- */

static socklen_t pair_addr(struct sockaddr_un *a, const char *name)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "sv-soak-%s", name);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   strlen(a->sun_path + 1));
}

static bool same_user(int fd)
{
	struct ucred c;
	socklen_t l = sizeof(c);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &l) &&
	       c.uid == getuid();
}

static int pair_accept(int lfd)
{
	for (;;) {
		int fd;

		set_phase("waiting for a peer to connect");
		check_stop();
		poll(&(struct pollfd){.fd = lfd, .events = POLLIN}, 1, 200);
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (same_user(fd))
			return fd;
		add("error.peer_cred", 1);
		close(fd);
	}
}

static int pair_connect(const char *name)
{
	struct sockaddr_un a;
	socklen_t al = pair_addr(&a, name);
	long backoff_ms = 1;

	for (;;) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		set_phase("connecting to the pair's listener");
		check_stop();
		if (fd < 0) {
			say("socket: %s", strerror(errno));
			exit(1);
		}
		if (!connect(fd, (struct sockaddr *)&a, al)) {
			if (same_user(fd))
				return fd;
			add("error.peer_cred", 1);
		}
		close(fd);
		/* the listener is being restarted: back off, 1 to 50 ms */
		nanosleep(&(struct timespec){0, backoff_ms * 1000000}, NULL);
		backoff_ms = backoff_ms * 2 > 50 ? 50 : backoff_ms * 2;
	}
}

static void on_term(int sig)
{
	(void)sig;
	g_stop = 1;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"name", required_argument, NULL, 'n'},
		{"role", required_argument, NULL, 'r'},
		{"status", required_argument, NULL, 'o'},
		{"seed", required_argument, NULL, 's'},
		{"slot", required_argument, NULL, 'i'},
		{NULL, 0, NULL, 0}};
	const char *name = NULL;
	int role = -1, c, lfd = -1;
	uint64_t rng = 1;
	uint32_t sessno = 0;
	static struct res r;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			name = optarg;
			break;
		case 'r':
			role = !strcmp(optarg, "listen")    ? 0
			       : !strcmp(optarg, "connect") ? 1
							    : -1;
			break;
		case 'o':
			status_path = optarg;
			break;
		case 's':
			rng = strtoull(optarg, NULL, 0);
			break;
		case 'i':
			worker_slot = atoi(optarg);
			break;
		default:
			return 2;
		}
	}
	if (!name || role < 0) {
		fprintf(stderr,
			"usage: %s --name PAIR --role listen|connect "
			"[--status FILE] [--seed N] [--slot N]\n",
			argv[0]);
		return 2;
	}
	rng = soak_mix(rng ^ (uint64_t)getpid() << 32);
	started = now_s();
	selftest = getenv("SOAK_SELFTEST");
	/* no SA_RESTART: a blocking call returns EINTR on SIGTERM */
	sigaction(SIGTERM, &(struct sigaction){.sa_handler = on_term}, NULL);
	sigaction(SIGINT, &(struct sigaction){.sa_handler = on_term}, NULL);
	signal(SIGPIPE, SIG_IGN);
	set_phase("starting");
	write_status();
	if (role == 0) {
		struct sockaddr_un a;
		socklen_t al = pair_addr(&a, name);

		/* non-blocking: a connection that is gone between poll and
		 * accept must not hold us past a SIGTERM */
		lfd = socket(AF_UNIX,
			     SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, al) ||
		    listen(lfd, 8)) {
			say("listen on sv-soak-%s: %s", name, strerror(errno));
			return 1;
		}
	}
	for (;;) {
		int oob = role == 0 ? pair_accept(lfd) : pair_connect(name);

		add("pairings", 1);
		serve(&r, oob, role, &rng, &sessno);
		close(oob);
	}
}
