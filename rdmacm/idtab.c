// SPDX-License-Identifier: MIT
/* idtab.h: the ids by serial. */
#include "idtab.h"

#include <errno.h>
#include <stdlib.h>

#define IDTAB_FIRST 64u

static unsigned int slot(const struct cm_idtab *t, uint64_t key)
{
	/* Fibonacci hashing: serials are consecutive */
	return (unsigned int)((key * 0x9e3779b97f4a7c15ull) >> 32) &
	       (t->nb - 1);
}

static void grow(struct cm_idtab *t)
{
	unsigned int nb = t->nb * 2, old = t->nb;
	struct cm_idtab_node **b = calloc(nb, sizeof(*b));

	if (!b)
		return; /* longer chains */
	t->nb = nb;
	for (unsigned int i = 0; i < old; i++) {
		struct cm_idtab_node *n = t->b[i], *next;

		for (; n; n = next) {
			unsigned int s = slot(t, n->key);

			next = n->next;
			n->next = b[s];
			b[s] = n;
		}
	}
	free(t->b);
	t->b = b;
}

int cm_idtab_insert(struct cm_idtab *t, struct cm_idtab_node *n)
{
	unsigned int s;

	if (!t->b) {
		t->b = calloc(IDTAB_FIRST, sizeof(*t->b));
		if (!t->b)
			return -ENOMEM;
		t->nb = IDTAB_FIRST;
	}
	if (t->n >= t->nb)
		grow(t);
	s = slot(t, n->key);
	n->next = t->b[s];
	t->b[s] = n;
	t->n++;
	return 0;
}

void cm_idtab_remove(struct cm_idtab *t, struct cm_idtab_node *n)
{
	struct cm_idtab_node **p;

	if (!t->b)
		return;
	for (p = &t->b[slot(t, n->key)]; *p; p = &(*p)->next) {
		if (*p == n) {
			*p = n->next;
			n->next = NULL;
			t->n--;
			return;
		}
	}
}

struct cm_idtab_node *cm_idtab_find(struct cm_idtab *t, uint64_t key)
{
	if (!t->b)
		return NULL;
	for (struct cm_idtab_node *n = t->b[slot(t, key)]; n; n = n->next) {
		t->probes++;
		if (n->key == key)
			return n;
	}
	return NULL;
}

struct cm_idtab_node *cm_idtab_next(struct cm_idtab *t, struct cm_idtab_node *n)
{
	uint64_t key = n->key;

	for (n = n->next; n; n = n->next) {
		t->probes++;
		if (n->key == key)
			return n;
	}
	return NULL;
}
