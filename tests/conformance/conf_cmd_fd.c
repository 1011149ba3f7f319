// SPDX-License-Identifier: MIT
/*
 * context->cmd_fd (issue 28 item 6): a real fd each context owns, as a
 * kernel device's uverbs fd is: dup() and fcntl() work on it, it is
 * close-on-exec, each context has its own, and ibv_close_device closes
 * it with no fd left behind.  The import verbs on it: conf_import.c.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pair.h"

/* Open fds of this process (/proc/self/fd, less the directory's own). */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ASSERT_NOT_NULL(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

static struct ibv_context *open_dev(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *c;

	ASSERT_NOT_NULL(list);
	ASSERT_NOT_NULL(list[0]);
	c = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	ASSERT_NOT_NULL(c);
	return c;
}

SV_TEST(cmd_fd_is_real_and_closed)
{
	struct ibv_context *c, *c2;
	struct stat st, st2;
	int before, fd, d, flags;

	/* the first open makes what a process keeps (device list, env) */
	ASSERT_OK(ibv_close_device(open_dev()));
	before = count_fds();
	c = open_dev();
	fd = c->cmd_fd;
	ASSERT_GE(fd, 0);
	flags = fcntl(fd, F_GETFD);
	ASSERT_GE(flags, 0);
	ASSERT_TRUE(flags & FD_CLOEXEC); /* a program's exec does not leak it */
	d = dup(fd);
	ASSERT_GE(d, 0);
	ASSERT_OK(fstat(d, &st));
	ASSERT_OK(fstat(fd, &st2));
	ASSERT_EQ(st.st_ino, st2.st_ino); /* the same open file */
	ASSERT_OK(close(d));
	/* each context has its own */
	c2 = open_dev();
	ASSERT_NE(fd, c2->cmd_fd);
	ASSERT_OK(fstat(c2->cmd_fd, &st2));
	ASSERT_NE(st.st_ino, st2.st_ino);
	ASSERT_OK(ibv_close_device(c2));
	ASSERT_OK(ibv_close_device(c));
	/* closed with the context, nothing left */
	ASSERT_EQ(-1, fcntl(fd, F_GETFD));
	ASSERT_EQ(EBADF, errno);
	ASSERT_EQ(before, count_fds());
	for (int i = 0; i < 20; i++)
		ASSERT_OK(ibv_close_device(open_dev()));
	ASSERT_EQ(before, count_fds());
}
