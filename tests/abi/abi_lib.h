/* SPDX-License-Identifier: MIT */
/* Helpers of the ABI tests: where the library and the reference lists are. */
#ifndef SV_ABI_LIB_H
#define SV_ABI_LIB_H

#include <stddef.h>

/* $SV_BUILD_DIR/lib/libibverbs.so.1 (static buffer). */
const char *abi_lib_path(void);

/* A list of non-empty lines; free with abi_lines_free(). */
struct abi_lines {
	char **v;
	size_t n;
};

/* Lines of $SV_SOURCE_DIR/<rel>; fails the test if it cannot be read. */
void abi_lines_from_source(struct abi_lines *l, const char *rel);
/* Lines of a text buffer (copied). */
void abi_lines_from_text(struct abi_lines *l, const char *text);
/* Appends a copy of `s`. */
void abi_lines_add(struct abi_lines *l, const char *s);
/* True if `s` is one of the lines. */
int abi_lines_has(const struct abi_lines *l, const char *s);
void abi_lines_free(struct abi_lines *l);

#endif
