// SPDX-License-Identifier: MIT
#include "proc_thread.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The status line "key:" of task tid, into out; 0 or -1. */
static int status_line(const char *tid, const char *key, char *out, size_t n)
{
	char path[300], line[512];
	size_t k = strlen(key);
	int ret = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (ret && fgets(line, sizeof(line), f)) {
		char *v = line + k + 1;

		if (strncmp(line, key, k) || line[k] != ':')
			continue;
		v += strspn(v, " \t");
		v[strcspn(v, "\n")] = 0;
		snprintf(out, n, "%s", v);
		ret = 0;
	}
	fclose(f);
	return ret;
}

/* Whether task tid is named comm. */
static bool named(const char *tid, const char *comm)
{
	char path[300], name[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/comm", tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(name, sizeof(name), f))
		name[0] = 0;
	fclose(f);
	name[strcspn(name, "\n")] = 0;
	return !strcmp(name, comm);
}

int sv_thread_status(const char *comm, const char *key, char *out, size_t n)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int ret = -1;

	if (!d)
		return -1;
	while (ret && (e = readdir(d)))
		if (e->d_name[0] != '.' && named(e->d_name, comm))
			ret = status_line(e->d_name, key, out, n);
	closedir(d);
	return ret;
}

long long sv_threads_sum(const char *comm, const char *key)
{
	DIR *d = opendir("/proc/self/task");
	long long sum = -1;
	struct dirent *e;
	char v[64];

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && named(e->d_name, comm) &&
		    !status_line(e->d_name, key, v, sizeof(v)))
			sum = (sum < 0 ? 0 : sum) + strtoll(v, NULL, 10);
	closedir(d);
	return sum;
}

long long sv_threads_cpu_ns(const char *comm)
{
	DIR *d = opendir("/proc/self/task");
	long long sum = -1;
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300];
		long long ns;
		FILE *f;

		if (e->d_name[0] == '.' || !named(e->d_name, comm))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%lld", &ns) == 1)
			sum = (sum < 0 ? 0 : sum) + ns;
		fclose(f);
	}
	closedir(d);
	return sum;
}
