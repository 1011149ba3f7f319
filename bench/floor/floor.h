/* SPDX-License-Identifier: MIT */
/*
 * What every floor program shares: options, pinning, the forked peer, the
 * clock and the calibrate-then-measure loop.  A floor program measures what
 * this machine allows for one way of moving bytes between two processes,
 * one on each CPU, both busy polling, and prints one machine-readable line
 * per size ("size=8 rtt_us=0.31 iters=...", "size=65536 bw_GBps=13.7 ...").
 * Lines starting with '#' are comments for people.
 */
#ifndef FLOOR_H
#define FLOOR_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FLOOR_MAX_SIZES 64
/* Spacing of shared flags: no false sharing, not even with the
 * adjacent-line prefetcher pulling in the neighbouring line. */
#define FLOOR_LINE 128

enum floor_mode {
	FLOOR_RTT = 1, /* ping-pong round trips */
	FLOOR_BW = 2,  /* one-way streaming, acknowledged once per batch */
	FLOOR_BOTH = 3,
};

struct floor_opts {
	const char *prog; /* for messages */
	size_t sizes[FLOOR_MAX_SIZES];
	int nsizes;
	size_t max_size; /* largest of sizes[] */
	enum floor_mode mode;
	double target_s;	 /* wall time of one measurement */
	int cpu[2];		 /* [0]: parent (driver), [1]: forked peer */
	unsigned int deadline_s; /* whole program; SIGALRM ends a hang */
};

/*
 * Parses -s LIST (e.g. 8,4K,1M), -m rtt|bw|both, -t SECONDS, -c CPU,CPU,
 * -T DEADLINE.  def_sizes applies when -s is absent.  Exits 2 on a bad
 * option, naming it.  Arms the deadline.
 */
void floor_parse(int argc, char **argv, const char *def_sizes,
		 struct floor_opts *o);

/* Prints what is measured and how, as '#' comment lines. */
void floor_banner(const struct floor_opts *o, const char *what);

/* Prints the message, the errno string and exits 1. */
__attribute__((noreturn)) void floor_die(const char *what);

/* A MAP_SHARED|MAP_ANONYMOUS mapping of len bytes, zeroed. */
void *floor_shared(size_t len);

/*
 * Faults in every page of a shared mapping in the calling process, without
 * changing a byte even if the other process writes concurrently: each
 * side calls it after the fork so no measurement pays for page faults.
 */
void floor_prefault(void *p, size_t len);

/* A private, page-aligned buffer of len bytes, every page touched. */
void *floor_alloc(size_t len);

/*
 * Forks the peer.  Returns 0 in the child, which is pinned to cpu[1] and
 * dies with its parent; returns the child's pid in the parent, which is
 * pinned to cpu[0].
 */
pid_t floor_fork(const struct floor_opts *o);

/* Reaps the child: 0 if it exited with status 0, 1 otherwise (said why). */
int floor_reap(const struct floor_opts *o, pid_t pid);

uint64_t floor_now_ns(void);

static inline void floor_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Runs n iterations of one measurement; returns the seconds they took. */
typedef double (*floor_run_fn)(void *ctx, size_t size, uint64_t n);

/*
 * Warms up and sizes a batch by doubling n until a batch takes a twentieth
 * of the target, then runs batches until target_s is spent.  Returns
 * seconds per iteration; *iters is how many iterations were timed.
 */
double floor_measure(const struct floor_opts *o, floor_run_fn run, void *ctx,
		     size_t size, uint64_t *iters);

/*
 * Prints one result line: "size=N rtt_us=X iters=N" for FLOOR_RTT, or
 * "size=N bw_GBps=X mmsg_s=X iters=N" for FLOOR_BW (GB = 1e9 bytes).
 */
void floor_report(enum floor_mode m, size_t size, double per_iter_s,
		  uint64_t iters);

/* Runs fn at every size when o->mode includes m, one line each. */
void floor_run_sizes(const struct floor_opts *o, enum floor_mode m,
		     floor_run_fn fn, void *ctx);

/*
 * A command channel from the parent to its peer in shared memory: the
 * parent writes cmd and size, then a new number in ping, and spins until
 * the peer echoes it in pong.  Each flag has a line of its own.
 */
enum floor_cmd {
	FLOOR_CMD_ECHO = 1, /* answer with size bytes, then the flag */
	FLOOR_CMD_ACK = 2,  /* end of a batch: answer with the flag alone */
};

struct floor_chan {
	alignas(FLOOR_LINE) _Atomic uint64_t ping; /* parent writes: seq */
	uint64_t cmd;  /* enum floor_cmd, written before ping */
	uint64_t size; /* bytes the peer answers with, before ping */
	alignas(FLOOR_LINE) _Atomic uint64_t pong; /* peer writes: seq */
};

/* Parent: one command, waited for.  *seq is the caller's counter. */
void floor_chan_call(struct floor_chan *ch, uint64_t *seq, enum floor_cmd cmd,
		     size_t size);

/* Peer: answers commands, calling echo(ctx, size) for FLOOR_CMD_ECHO,
 * until the parent calls floor_chan_stop. */
void floor_chan_serve(struct floor_chan *ch, void (*echo)(void *, size_t),
		      void *ctx);
void floor_chan_stop(struct floor_chan *ch);

#endif
