// SPDX-License-Identifier: MIT
/*
 * librdmacm reads the SOFTVERBS_* table too (its own copy of
 * provider/env.c, quiet): a bad value is said once, by libibverbs, not
 * twice.  A REFUSE one (SOFTVERBS_TRANSPORT=bogus) fails
 * rdma_create_event_channel with ENODEV, the CM's usual "no device"; a
 * DEFAULT one (SOFTVERBS_CM_TIMEOUT_MS=0) leaves the CM working.
 */
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sv_test.h"

/* The child's exit status with name=value; its stderr's lines in *n and
 * the first in line. */
static int cm_child(const char *name, const char *value, char line[1024],
		    int *n)
{
	char path[] = "/tmp/sv-cmenv-XXXXXX", buf[1024];
	int fd = mkstemp(path), st;
	pid_t pid;
	FILE *f;

	ASSERT_TRUE(fd >= 0);
	unlink(path);
	fflush(NULL);
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		struct rdma_event_channel *ch;
		struct rdma_cm_id *id;

		dup2(fd, 2);
		setenv(name, value, 1);
		errno = 0;
		ch = rdma_create_event_channel();
		if (!ch)
			_exit(errno == ENODEV ? 10 : 11);
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			_exit(12);
		rdma_destroy_id(id);
		rdma_destroy_event_channel(ch);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	f = fdopen(fd, "r");
	ASSERT_NOT_NULL(f);
	rewind(f);
	*n = 0;
	line[0] = '\0';
	while (fgets(buf, sizeof(buf), f)) {
		printf("child said: %s", buf);
		if (!(*n)++)
			snprintf(line, 1024, "%s", buf);
	}
	fclose(f);
	ASSERT_TRUE(WIFEXITED(st));
	return WEXITSTATUS(st);
}

SV_TEST(cm_env_bad_transport_said_once)
{
	char line[1024];
	int n;

	ASSERT_EQ(10, cm_child("SOFTVERBS_TRANSPORT", "bogus", line, &n));
	ASSERT_EQ(1, n);
	ASSERT_NOT_NULL(strstr(line, "SOFTVERBS_TRANSPORT=bogus "));
	ASSERT_NOT_NULL(strstr(line, "refusing to open softverbs0"));
}

SV_TEST(cm_env_bad_timeout_said_once)
{
	char line[1024];
	int n;

	ASSERT_EQ(0, cm_child("SOFTVERBS_CM_TIMEOUT_MS", "0", line, &n));
	ASSERT_EQ(1, n);
	ASSERT_NOT_NULL(strstr(line, "SOFTVERBS_CM_TIMEOUT_MS=0 is not in "
				     "1..3600000 ms; using default 64000 ms"));
}
