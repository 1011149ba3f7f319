// SPDX-License-Identifier: MIT
/*
 * librdmacm reads the SOFTVERBS_* table too (its own copy of
 * provider/lib/env.c, quiet): a bad value is said once, by libibverbs, not
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

/* The CM's "no device" path: 10 for ENODEV. */
static int cm_opens(void)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;

	errno = 0;
	ch = rdma_create_event_channel();
	if (!ch)
		return errno == ENODEV ? 10 : 11;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return 12;
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

SV_TEST(cm_env_bad_transport_said_once)
{
	char line[2][SV_CHILD_LINE];
	int n;

	ASSERT_EQ(10, sv_child_env("SOFTVERBS_TRANSPORT", "bogus", cm_opens,
				   line, 2, &n));
	ASSERT_EQ(1, n);
	ASSERT_NOT_NULL(strstr(line[0], "SOFTVERBS_TRANSPORT=bogus "));
	ASSERT_NOT_NULL(strstr(line[0], "refusing to open softverbs0"));
}

SV_TEST(cm_env_bad_timeout_said_once)
{
	char line[2][SV_CHILD_LINE];
	int n;

	ASSERT_EQ(0, sv_child_env("SOFTVERBS_CM_TIMEOUT_MS", "0", cm_opens,
				  line, 2, &n));
	ASSERT_EQ(1, n);
	ASSERT_NOT_NULL(strstr(line[0],
			       "SOFTVERBS_CM_TIMEOUT_MS=0 is not in "
			       "1..3600000 ms; using default 64000 ms"));
}
