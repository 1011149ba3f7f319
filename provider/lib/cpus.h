/* SPDX-License-Identifier: MIT */
/*
 * SOFTVERBS_PROGRESS_CPUS (docs/configuration.md): the CPUs a context's
 * progress thread may run on.  "inherit" (the default): the mask the
 * thread is born with, the program's.  "all": any CPU the process's
 * cgroup allows, whatever the program was bound to, as a NIC's engine is
 * not on the application's core.  Else a CPU list as taskset -c takes
 * it ("3", "0-3,8"): spare cores, as a NIC's interrupts are steered.  Not
 * the default: on the 2-vCPU development VM, with a busy-polling server
 * bound to one CPU, "all" was not faster (the thread's wake-ups then
 * cross CPUs).  The parser is pure and inline so that every copy of
 * env.c (libibverbs, librdmacm, softverbs-stat) has it.
 */
#ifndef SV_CPUS_H
#define SV_CPUS_H

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum sv_cpus_kind {
	SV_CPUS_ALL,
	SV_CPUS_INHERIT,
	SV_CPUS_LIST,
};

/* One number of a CPU list at *s, below CPU_SETSIZE; advances *s. */
static inline bool sv_cpus_num(const char **s, unsigned long *v)
{
	char *end;

	if (**s < '0' || **s > '9')
		return false;
	errno = 0;
	*v = strtoul(*s, &end, 10);
	if (errno || *v >= CPU_SETSIZE)
		return false;
	*s = end;
	return true;
}

/* v: "all", "inherit" or a CPU list; 0 and the kind (and set, for a
 * list), else -EINVAL with why filled. */
static inline int sv_cpus_parse(const char *v, enum sv_cpus_kind *kind,
				cpu_set_t *set, char *why, size_t n)
{
	const char *s = v;

	if (!strcmp(v, "all") || !strcmp(v, "inherit")) {
		*kind = v[0] == 'a' ? SV_CPUS_ALL : SV_CPUS_INHERIT;
		return 0;
	}
	*kind = SV_CPUS_LIST;
	CPU_ZERO(set);
	for (;;) {
		unsigned long lo, hi;

		if (!sv_cpus_num(&s, &lo))
			break;
		hi = lo;
		if (*s == '-') {
			s++;
			if (!sv_cpus_num(&s, &hi) || hi < lo)
				break;
		}
		for (unsigned long c = lo; c <= hi; c++)
			CPU_SET(c, set);
		if (!*s)
			return 0;
		if (*s++ != ',')
			break;
	}
	snprintf(why, n, "not all, inherit or a CPU list below %d at '%.16s'",
		 CPU_SETSIZE, s);
	return -EINVAL;
}

#endif
