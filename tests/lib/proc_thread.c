// SPDX-License-Identifier: MIT
#include "proc_thread.h"

#include <dirent.h>
#include <stdio.h>
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

int sv_thread_status(const char *comm, const char *key, char *out, size_t n)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int ret = -1;

	if (!d)
		return -1;
	while (ret && (e = readdir(d))) {
		char path[300], name[64];
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(name, sizeof(name), f))
			name[0] = 0;
		fclose(f);
		name[strcspn(name, "\n")] = 0;
		if (!strcmp(name, comm))
			ret = status_line(e->d_name, key, out, n);
	}
	closedir(d);
	return ret;
}
