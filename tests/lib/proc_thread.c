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

/* The number task tid shows: on its status line "key:", or (key NULL)
 * the first of /proc/self/task/<tid>/schedstat, its CPU time in ns; -1
 * if it has none. */
static long long task_number(const char *tid, const char *key)
{
	char path[300], v[64];
	long long x = -1;
	FILE *f;

	if (key)
		return status_line(tid, key, v, sizeof(v))
			       ? -1
			       : strtoll(v, NULL, 10);
	snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &x) != 1)
		x = -1;
	fclose(f);
	return x;
}

/* task_number summed over the threads named comm; -1 if none has one. */
static long long threads_sum(const char *comm, const char *key)
{
	DIR *d = opendir("/proc/self/task");
	long long sum = -1, x;
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && named(e->d_name, comm) &&
		    (x = task_number(e->d_name, key)) >= 0)
			sum = (sum < 0 ? 0 : sum) + x;
	closedir(d);
	return sum;
}

long long sv_threads_sum(const char *comm, const char *key)
{
	return threads_sum(comm, key);
}

long long sv_threads_cpu_ns(const char *comm)
{
	return threads_sum(comm, NULL);
}
