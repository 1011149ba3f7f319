/* SPDX-License-Identifier: MIT */
/*
 * When the host's interface addresses last changed, without reading
 * them: a generation number that grows when they may have (issue 27,
 * item 3).  getifaddrs costs ~43 us here (a netlink socket and two
 * dumps) and one rdma_cm connection's set-up asked for the GID table
 * about 11 times, each a getifaddrs; callers keep what they derive from
 * the addresses (addr.c's GID table) with the generation it was read at,
 * and read again only when it moved.  A service: it calls nothing of
 * the provider and includes no layer header.
 */
#ifndef SV_IFWATCH_H
#define SV_IFWATCH_H

#include <stdint.h>

/*
 * The generation of the interfaces and their addresses: equal to an
 * earlier answer only if no address or link of this network namespace
 * changed in between.  Never 0.  If the kernel's notices cannot be had
 * (no netlink socket, its queue overflowed), every call is a new
 * generation: callers then read each time, as without this.
 */
uint64_t sv_ifaddr_gen(void);

/* Test hook: how many times the generation moved (each a re-read by its
 * callers). */
uint64_t sv_ifaddr_gen_moves(void);

#endif
