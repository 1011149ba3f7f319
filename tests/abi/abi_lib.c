// SPDX-License-Identifier: MIT
/* Helpers of the ABI tests: paths from the environment and line lists. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_lib.h"
#include "sv_test.h"

const char *abi_lib_path(void)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/lib/libibverbs.so.1", sv_build_dir());
	return path;
}

static void push(struct abi_lines *l, const char *s, size_t len)
{
	char **v = realloc(l->v, (l->n + 1) * sizeof(*v));

	ASSERT_NOT_NULL(v);
	l->v = v;
	l->v[l->n] = strndup(s, len);
	ASSERT_NOT_NULL(l->v[l->n]);
	l->n++;
}

void abi_lines_add(struct abi_lines *l, const char *s)
{
	push(l, s, strlen(s));
}

void abi_lines_from_text(struct abi_lines *l, const char *text)
{
	const char *p = text, *nl;

	l->v = NULL;
	l->n = 0;
	while (*p) {
		nl = strchr(p, '\n');
		if (!nl)
			nl = p + strlen(p);
		if (nl > p)
			push(l, p, (size_t)(nl - p));
		p = *nl ? nl + 1 : nl;
	}
}

void abi_lines_from_source(struct abi_lines *l, const char *rel)
{
	const char *src = getenv("SV_SOURCE_DIR");
	char path[PATH_MAX];
	char *text;
	long len;
	FILE *f;

	ASSERT_NOT_NULL(src);
	snprintf(path, sizeof(path), "%s/%s", src, rel);
	f = fopen(path, "r");
	if (!f)
		sv_test_fail(__FILE__, __LINE__, "cannot read %s", path);
	ASSERT_OK(fseek(f, 0, SEEK_END));
	len = ftell(f);
	ASSERT_GE(len, 0);
	rewind(f);
	text = calloc(1, (size_t)len + 1);
	ASSERT_NOT_NULL(text);
	ASSERT_EQ(len, (long)fread(text, 1, (size_t)len, f));
	fclose(f);
	abi_lines_from_text(l, text);
	free(text);
}

int abi_lines_has(const struct abi_lines *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return 1;
	return 0;
}

void abi_lines_free(struct abi_lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}
