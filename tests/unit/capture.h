/* SPDX-License-Identifier: MIT */
/*
 * Test helpers of the pingpong unit tests: capture what the code under
 * test prints on stderr or stdout (it prints its errors where it decides
 * them), and a small JSON syntax checker.
 */
#ifndef PP_TEST_CAPTURE_H
#define PP_TEST_CAPTURE_H

#include <stdbool.h>
#include <stdio.h>

struct capture {
	int fd;	   /* the stream's descriptor: 1 or 2 */
	int saved; /* the original, restored at the end */
	char path[64];
};

/* Redirects fd (1 or 2) to a temporary file. */
void capture_begin(struct capture *c, int fd);
/* Restores fd and returns what was written (malloc'ed, NUL-terminated). */
char *capture_end(struct capture *c);

/* True if s is exactly one well-formed JSON value (plus whitespace). */
bool json_valid(const char *s);

#endif
