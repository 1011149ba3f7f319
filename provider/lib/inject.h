/* SPDX-License-Identifier: MIT */
/*
 * SOFTVERBS_FAULTS (issue 14): a fabric that misbehaves on purpose.  The
 * spec is parsed once, at the first ibv_open_device; each decision is a
 * pure function of (seed, kind, the QP's creation index in the process,
 * the PSN, the attempt), so a seed gives the same faults run after run
 * whatever the timing.  Off by default: the engine tests sv_inject.on, one
 * predictable branch, and calls nothing here while it is false.
 */
#ifndef SV_INJECT_H
#define SV_INJECT_H

#include <stdbool.h>
#include <stdint.h>

enum sv_inject_kind {
	SV_FAULT_DROP = 1,    /* a request train lost at the responder */
	SV_FAULT_RSP = 2,     /* a response lost at the requester */
	SV_FAULT_RNR = 3,     /* RNR NAK with a receive posted */
	SV_FAULT_ACCESS = 4,  /* remote access error on a one-sided request */
	SV_FAULT_UD = 5,      /* a UD datagram lost */
	SV_FAULT_REORDER = 6, /* a RoCE datagram taken after the next */
	SV_FAULT_REORDER_OUT = 7, /* a RoCE datagram sent after the next */
};

struct sv_inject {
	bool on;     /* any key given */
	double drop; /* probabilities, [0, 1] */
	double rnr;
	double access;
	double reorder;	    /* RoCE links: a datagram that came is taken after
			     * the next one (transport/roce/in.c) */
	double reorder_out; /* ... a datagram of a flush is sent after the
			     * next one of it (transport/roce/out.c) */
	uint64_t delay_us;  /* a WQE's requests (UD: datagrams) leave that
			     * long after its post (post.c due_ns); ACKs and
			     * responses are taken that long after they came
			     * (comp.c); 0: no delay */
	uint64_t kill_at;   /* 0: never; else SIGKILL after that packet */
	uint64_t seed;
};

/* delay_us's bound: 10 s (a longer one is refused as a bad value). */
#define SV_FAULT_DELAY_MAX_US 10000000ull

/* The process's spec, valid once sv_inject_init returned 0. */
extern struct sv_inject sv_inject;

/* Is fault k (drop, rnr, access) on?  One predictable branch when off. */
#define SV_FAULT_ON(k) (__builtin_expect(sv_inject.on, 0) && sv_inject.k > 0)

/* Parses spec into *f (zeroed first); 0, or -EINVAL with *bad the key (or
 * the piece) that is wrong, NUL-terminated in buf (of buflen bytes). */
int sv_inject_parse(const char *spec, struct sv_inject *f, char *bad,
		    unsigned int badlen);

/* Parses SOFTVERBS_FAULTS (env.h's row) once; 0, or -EINVAL (env.c said
 * it on stderr, naming the key, and softverbs0 is not listed). */
int sv_inject_init(void);

/* The decision: true with probability p, a pure function of its inputs. */
bool sv_inject_hit(double p, uint64_t seed, enum sv_inject_kind kind,
		   uint32_t qp_idx, uint32_t psn, uint32_t attempt);

/* The next QP's creation index in this process. */
uint32_t sv_inject_qp_index(void);

/* A packet was sent: with kill_at, the N-th one kills the process. */
void sv_inject_sent(void);

#endif
