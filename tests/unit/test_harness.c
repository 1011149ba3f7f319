// SPDX-License-Identifier: MIT
/*
 * The test harness itself (tests/lib/sv_test.c): a test that fails with a
 * helper process still running shows the helper's last output on its own
 * stderr (the helper often says why), and leaves none of the helpers'
 * output files behind in /tmp (17 pairs of them were found there, left
 * by failed runs).
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sv_test.h"

#define MARK "harness-talker-was-here"

/* Says something on both streams, then waits to be killed.  stdout
 * (a file: fully buffered) is in its file before stderr says anything:
 * the failer fails once stderr has spoken, and the harness then shows
 * both (with stdout flushed after, CI's ASan pass once showed stderr
 * alone). */
SV_HELPER(harness_talker)
{
	(void)argc;
	(void)argv;
	printf("%s on stdout\n", MARK);
	fflush(stdout);
	fprintf(stderr, "%s on stderr\n", MARK);
	fflush(NULL);
	pause(); /* until killed (SIGKILL) */
	return 0;
}

/* Starts the talker, waits until it has spoken, then fails. */
SV_HELPER(harness_failer)
{
	struct sv_proc t;
	uint64_t deadline = sv_now_ms() + 20000;
	char path[64];

	(void)argc;
	(void)argv;
	sv_proc_start_helper(&t, "harness_talker", NULL, NULL);
	snprintf(path, sizeof(path), "%s", t.err_path);
	for (unsigned int us = 50;; sv_backoff(&us)) {
		char buf[128] = "";
		int fd = open(path, O_RDONLY);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

		if (fd >= 0)
			close(fd);
		if (n > 0 && strstr(buf, MARK))
			break;
		if (sv_now_ms() > deadline)
			return 3; /* not the failure the test waits for */
	}
	printf("talker %d\n", (int)t.pid);
	fflush(stdout);
	sv_test_fail(__FILE__, __LINE__, "failing on purpose");
	return 0;
}

/* Whether process pid is gone, or dead and not yet reaped: a SIGKILL
 * is carried out when the process next runs, after kill() returned
 * (on a loaded machine, a while after). */
static bool dead(pid_t pid)
{
	char path[64], st[256];
	const char *c;
	ssize_t n;
	int fd;

	if (kill(pid, 0) != 0)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (n <= 0)
		return true;
	st[n] = '\0';
	c = strrchr(st, ')'); /* "pid (comm) S ...": comm may hold ')' */
	return c && (c[2] == 'Z' || c[2] == 'X');
}

SV_TEST(failure_shows_helper_output_and_cleans_up)
{
	struct sv_proc f;
	char path[96];
	int talker = 0;
	const char *p;
	pid_t failer;

	sv_proc_start_helper(&f, "harness_failer", NULL, NULL);
	failer = f.pid;
	sv_proc_wait(&f, 30000);
	ASSERT_TRUE(f.exited);
	ASSERT_EQ(1, f.code);
	ASSERT_TRUE(strstr(f.err, "failing on purpose") != NULL);
	ASSERT_TRUE(strstr(f.err, MARK " on stdout") != NULL);
	ASSERT_TRUE(strstr(f.err, MARK " on stderr") != NULL);
	p = strstr(f.out, "talker ");
	ASSERT_TRUE(p != NULL);
	talker = atoi(p + 7);
	ASSERT_TRUE(talker > 0);
	/* killed with the failure */
	for (uint64_t end = sv_now_ms() + 10000; !dead(talker);) {
		ASSERT_TRUE(sv_now_ms() < end);
		sched_yield(); /* its CPU to the dying process */
	}
	/* the failer's files for its talker: /tmp/svt.FAILER.0.* */
	snprintf(path, sizeof(path), "/tmp/svt.%d.0.out", (int)failer);
	ASSERT_TRUE(access(path, F_OK) != 0);
	snprintf(path, sizeof(path), "/tmp/svt.%d.0.err", (int)failer);
	ASSERT_TRUE(access(path, F_OK) != 0);
	sv_proc_free(&f);
}
