// SPDX-License-Identifier: MIT
/*
 * Floor (1): one cache-line flag round trip between two processes.  The
 * parent stores a sequence number in its line, the peer spins on it and
 * stores the same number in its own line; nothing moves but the two cache
 * lines (floor_chan with FLOOR_CMD_ACK: cmd and size never change, so they
 * are never stored).  No transport can beat this: it is the cost of the
 * coherence protocol between the two CPUs.  Only size 8 is meaningful.
 */
#include "floor.h"

#include <unistd.h>

struct ctx {
	struct floor_chan *ch;
	uint64_t seq; /* last number sent; parent only */
};

static void no_echo(void *arg, size_t size)
{
}

static double rtt(void *arg, size_t size, uint64_t n)
{
	struct ctx *c = arg;
	uint64_t t0 = floor_now_ns();

	for (uint64_t i = 0; i < n; i++)
		floor_chan_call(c->ch, &c->seq, FLOOR_CMD_ACK, 0);
	return (double)(floor_now_ns() - t0) * 1e-9;
}

int main(int argc, char **argv)
{
	struct floor_opts o;
	struct ctx c = {0};
	pid_t pid;

	floor_parse(argc, argv, "8", &o);
	floor_banner(&o, "one cache-line flag round trip (size is always 8)");
	c.ch = floor_shared(sizeof(*c.ch));
	c.ch->cmd = FLOOR_CMD_ACK; /* so calls never store it */
	pid = floor_fork(&o);
	if (pid == 0) {
		floor_chan_serve(c.ch, no_echo, NULL);
		_exit(0);
	}
	o.nsizes = 1; /* the flag has one size */
	o.sizes[0] = 8;
	floor_run_sizes(&o, FLOOR_RTT, rtt, &c);
	floor_chan_stop(c.ch);
	return floor_reap(&o, pid);
}
