/* SPDX-License-Identifier: MIT */
/*
 * A thread of this process seen in /proc (tests): the provider's threads
 * by their names ("softverbs-prog", "softverbs-cm").
 */
#ifndef SV_PROC_THREAD_H
#define SV_PROC_THREAD_H

#include <stddef.h>

/* The value of the line "key:" of /proc/self/task/<tid>/status of this
 * process's thread named comm, without its leading blanks and newline,
 * into out (n bytes); 0, or -1 if no thread is named so (or it has no
 * such line). */
int sv_thread_status(const char *comm, const char *key, char *out, size_t n);

/* The sum of the number on the line "key:" (voluntary_ctxt_switches,
 * say) over this process's threads named comm (a process may hold a
 * progress thread per context); -1 if no thread is named so. */
long long sv_threads_sum(const char *comm, const char *key);

/* The CPU time (ns, /proc/.../schedstat) of this process's threads
 * named comm, summed; -1 if no thread is named so. */
long long sv_threads_cpu_ns(const char *comm);

#endif
