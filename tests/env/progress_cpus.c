// SPDX-License-Identifier: MIT
/*
 * For progress_cpus.sh: binds this process to CPU argv[1] ("-": leaves it
 * as it is), opens softverbs0, and prints the Cpus_allowed_list of the
 * context's progress thread (named "softverbs-prog" once its CPUs are
 * set), waited for up to 10 s.  Exit 0 with the list, 1 on any failure.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "proc_thread.h"

/* The progress thread's Cpus_allowed_list into out; 0, or -1 if no thread
 * is named so yet. */
static int progress_cpus(char *out, size_t n)
{
	return sv_thread_status("softverbs-prog", "Cpus_allowed_list", out, n);
}

int main(int argc, char **argv)
{
	struct timespec t0, t;
	struct ibv_device **list;
	struct ibv_context *ctx;
	char cpus[256];
	int num;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CPU|-\n", argv[0]);
		return 1;
	}
	if (strcmp(argv[1], "-")) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(atoi(argv[1]), &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			perror("sched_setaffinity");
			return 1;
		}
	}
	list = ibv_get_device_list(&num);
	if (!list || !num) {
		fprintf(stderr, "no device\n");
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	if (!ctx) {
		perror("ibv_open_device");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (progress_cpus(cpus, sizeof(cpus))) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10) {
			fprintf(stderr, "no progress thread after 10 s\n");
			return 1;
		}
		sched_yield();
	}
	printf("%s\n", cpus);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
