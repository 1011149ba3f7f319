// SPDX-License-Identifier: MIT
/*
 * rdmacm/idtab.c alone (issue 27 item 3): the CM thread finds an epoll
 * event's id by serial in a bounded number of probes however many ids
 * live.  It walked the list of every id before: 1,000 connections at
 * once cost ~500 probes per event, which the bounds below refuse (a
 * count, not a time: robust on a loaded machine).
 */
#include <errno.h>
#include <stdlib.h>

#include "idtab.h"
#include "sv_test.h"

#define N 20000u

static struct cm_idtab_node nodes[N];

static void fill(struct cm_idtab *t, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		nodes[i].key = i + 1; /* serials: from 1, consecutive */
		ASSERT_OK(cm_idtab_insert(t, &nodes[i]));
	}
}

static void drop(struct cm_idtab *t)
{
	free(t->b);
}

SV_TEST(idtab_finds_each_id_in_constant_probes)
{
	struct cm_idtab t = {0};
	uint64_t before;

	fill(&t, N);
	ASSERT_EQ(N, t.n);
	for (unsigned int i = 0; i < N; i++) {
		before = t.probes;
		ASSERT_TRUE(cm_idtab_find(&t, i + 1) == &nodes[i]);
		ASSERT_LE(t.probes - before, 8); /* a list: up to N */
	}
	ASSERT_LE(t.probes, 2ull * N); /* a list: N * (N + 1) / 2 */
	ASSERT_NULL(cm_idtab_find(&t, N + 1));
	ASSERT_NULL(cm_idtab_find(&t, 0));
	drop(&t);
}

SV_TEST(idtab_removed_ids_are_gone_the_rest_stay)
{
	struct cm_idtab t = {0};

	fill(&t, N);
	for (unsigned int i = 0; i < N; i += 2)
		cm_idtab_remove(&t, &nodes[i]);
	ASSERT_EQ(N / 2, t.n);
	for (unsigned int i = 0; i < N; i++) {
		struct cm_idtab_node *n = cm_idtab_find(&t, i + 1);

		if (i % 2)
			ASSERT_TRUE(n == &nodes[i]);
		else
			ASSERT_NULL(n);
	}
	/* removing twice, or what was never in, changes nothing */
	cm_idtab_remove(&t, &nodes[0]);
	ASSERT_EQ(N / 2, t.n);
	drop(&t);
}

/* As the CM lives: serials only grow, a window of 1,000 ids live. */
SV_TEST(idtab_sliding_window_stays_bounded)
{
	struct cm_idtab t = {0};
	const unsigned int w = 1000;
	uint64_t before;

	for (unsigned int i = 0; i < N; i++) {
		nodes[i].key = i + 1;
		ASSERT_OK(cm_idtab_insert(&t, &nodes[i]));
		if (i >= w)
			cm_idtab_remove(&t, &nodes[i - w]);
	}
	ASSERT_EQ(w, t.n);
	before = t.probes;
	for (unsigned int i = N - w; i < N; i++)
		ASSERT_TRUE(cm_idtab_find(&t, i + 1) == &nodes[i]);
	ASSERT_LE(t.probes - before, 2ull * w);
	ASSERT_NULL(cm_idtab_find(&t, N - w));
	drop(&t);
}

SV_TEST(idtab_empty_table_finds_nothing)
{
	struct cm_idtab t = {0};

	ASSERT_NULL(cm_idtab_find(&t, 1));
	cm_idtab_remove(&t, &nodes[0]);
	ASSERT_EQ(0, t.n);
}

/* Repeated keys (ib_link.c's tables: a peer chooses its comm IDs): find
 * then next give each node of the key once, none of another key, in a
 * bounded number of probes; one removed is gone, the others stay. */
SV_TEST(idtab_next_gives_each_node_of_a_repeated_key)
{
	struct cm_idtab t = {0};
	struct cm_idtab_node *n;
	unsigned int seen, mask;

	for (unsigned int i = 0; i < 1000; i++) {
		/* 5 nodes share key 7 (0, 200, ...), the rest their own */
		nodes[i].key = i % 200 == 0 ? 7 : 1000 + i;
		ASSERT_OK(cm_idtab_insert(&t, &nodes[i]));
	}
	seen = mask = 0;
	for (n = cm_idtab_find(&t, 7); n; n = cm_idtab_next(&t, n)) {
		unsigned int i = (unsigned int)(n - nodes);

		ASSERT_EQ(7, n->key);
		ASSERT_EQ(0, i % 200);
		ASSERT_EQ(0, mask & (1u << (i / 200)));
		mask |= 1u << (i / 200);
		seen++;
	}
	ASSERT_EQ(5, seen);
	ASSERT_LE(t.probes, 5 + 16); /* one chain's length, not 1,000 */
	cm_idtab_remove(&t, &nodes[400]);
	seen = 0;
	for (n = cm_idtab_find(&t, 7); n; n = cm_idtab_next(&t, n)) {
		ASSERT_TRUE(n != &nodes[400]);
		seen++;
	}
	ASSERT_EQ(4, seen);
	ASSERT_NULL(cm_idtab_find(&t, 6));
	drop(&t);
}
