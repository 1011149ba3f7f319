// SPDX-License-Identifier: MIT
/*
 * rdmacm/timed.c alone (issue 27 item 3): the set of ids with a deadline
 * armed, which the CM thread walks at each wake-up instead of every live
 * id.  Arming twice is one member, disarming what is not in changes
 * nothing, and a walk of the set sees exactly the armed ones however
 * many others live (counts, not times).
 */
#include <stdbool.h>

#include "sv_test.h"
#include "timed.h"

#define N 5000u

static struct cm_timed_node nodes[N];

static unsigned int walk(struct cm_timed *t, bool *seen)
{
	unsigned int steps = 0;

	for (struct cm_timed_node *n = t->head; n; n = n->next) {
		ASSERT_TRUE(n->on);
		ASSERT_FALSE(seen[n - nodes]); /* each once */
		seen[n - nodes] = true;
		steps++;
	}
	return steps;
}

static void reset(void)
{
	for (unsigned int i = 0; i < N; i++)
		nodes[i] = (struct cm_timed_node){0};
}

SV_TEST(timed_walk_sees_only_the_armed)
{
	static bool seen[N];
	struct cm_timed t = {0};

	reset();
	/* 5,000 ids live, 7 of them armed: a walk is 7 steps (was 5,000) */
	for (unsigned int i = 0; i < N; i += N / 7 + 1)
		cm_timed_arm(&t, &nodes[i]);
	ASSERT_EQ(7, t.n);
	ASSERT_EQ(7, walk(&t, seen));
	for (unsigned int i = 0; i < N; i++)
		ASSERT_EQ(i % (N / 7 + 1) == 0, seen[i]);
}

SV_TEST(timed_arm_is_idempotent_disarm_of_absent_is_nothing)
{
	static bool seen[N];
	struct cm_timed t = {0};

	reset();
	cm_timed_arm(&t, &nodes[1]);
	cm_timed_arm(&t, &nodes[1]);
	cm_timed_arm(&t, &nodes[2]);
	ASSERT_EQ(2, t.n);
	ASSERT_EQ(2, t.adds); /* the second arm of 1 added nothing */
	cm_timed_disarm(&t, &nodes[3]);
	ASSERT_EQ(2, t.n);
	cm_timed_disarm(&t, &nodes[1]);
	cm_timed_disarm(&t, &nodes[1]);
	ASSERT_EQ(1, t.n);
	ASSERT_FALSE(nodes[1].on);
	ASSERT_EQ(1, walk(&t, seen));
	ASSERT_TRUE(seen[2]);
	cm_timed_disarm(&t, &nodes[2]);
	ASSERT_EQ(0, t.n);
	ASSERT_NULL(t.head);
}

/* As the walk does: each node looked at may be disarmed (head, middle,
 * tail) while the walk goes on from the next it took first. */
SV_TEST(timed_disarm_during_walk_keeps_the_rest)
{
	static bool seen[N];
	struct cm_timed t = {0};
	struct cm_timed_node *n, *next;
	unsigned int steps = 0;

	reset();
	for (unsigned int i = 0; i < N; i++)
		cm_timed_arm(&t, &nodes[i]);
	for (n = t.head; n; n = next) {
		next = n->next;
		steps++;
		if ((n - nodes) % 3 != 1)
			cm_timed_disarm(&t, n);
	}
	ASSERT_EQ(N, steps);
	ASSERT_EQ(N / 3 + (N % 3 > 1), t.n);
	ASSERT_EQ(t.n, walk(&t, seen));
	for (unsigned int i = 0; i < N; i++)
		ASSERT_EQ(i % 3 == 1, seen[i]);
	/* and re-armed after a disarm, it is back once */
	cm_timed_arm(&t, &nodes[0]);
	cm_timed_arm(&t, &nodes[0]);
	ASSERT_TRUE(t.head == &nodes[0]);
	ASSERT_EQ(N / 3 + (N % 3 > 1) + 1, t.n);
}
