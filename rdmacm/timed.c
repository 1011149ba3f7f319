// SPDX-License-Identifier: MIT
/* The ids with a deadline armed (timed.h): an intrusive doubly linked
 * list, O(1) to arm and disarm. */
#include "timed.h"

#include <stddef.h>

void cm_timed_arm(struct cm_timed *t, struct cm_timed_node *n)
{
	if (n->on)
		return;
	n->on = true;
	n->prev = NULL;
	n->next = t->head;
	if (t->head)
		t->head->prev = n;
	t->head = n;
	t->n++;
	t->adds++;
}

void cm_timed_disarm(struct cm_timed *t, struct cm_timed_node *n)
{
	if (!n->on)
		return;
	if (n->prev)
		n->prev->next = n->next;
	else
		t->head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	n->next = n->prev = NULL;
	n->on = false;
	t->n--;
}
