// SPDX-License-Identifier: MIT
/* Numbers passed between test processes through files (exchange.h). */
#include "exchange.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double sv_x_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

void sv_x_put(const char *who, const char *dir, const char *name, unsigned v)
{
	char p[512], t[520];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	snprintf(t, sizeof(t), "%s.tmp", p);
	f = fopen(t, "w");
	if (!f || fprintf(f, "%u\n", v) < 0 || fclose(f) || rename(t, p)) {
		fprintf(stderr, "%s: %s: %s\n", who, p, strerror(errno));
		exit(1);
	}
}

long sv_x_get(const char *dir, const char *name, double secs)
{
	char p[512];
	double end = sv_x_now() + secs;
	unsigned v;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	for (;;) {
		FILE *f = fopen(p, "r");

		if (f && fscanf(f, "%u", &v) == 1) {
			fclose(f);
			return v;
		}
		if (f)
			fclose(f);
		if (sv_x_now() > end)
			return -1;
		usleep(10000); /* another process's file: no event */
	}
}
