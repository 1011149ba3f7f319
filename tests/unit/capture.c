// SPDX-License-Identifier: MIT
/*
 * Output capture and a JSON syntax checker for the pingpong unit tests.
 * Capture goes through a file so nothing can block on a full pipe.
 */
#include "capture.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sv_test.h"

void capture_begin(struct capture *c, int fd)
{
	int t;

	fflush(NULL);
	snprintf(c->path, sizeof(c->path), "/tmp/svcap.%d.XXXXXX", getpid());
	t = mkstemp(c->path);
	ASSERT_TRUE(t >= 0);
	c->fd = fd;
	c->saved = dup(fd);
	ASSERT_TRUE(c->saved >= 0);
	ASSERT_TRUE(dup2(t, fd) == fd);
	close(t);
}

char *capture_end(struct capture *c)
{
	FILE *f;
	char *buf;
	long len;

	fflush(NULL);
	ASSERT_TRUE(dup2(c->saved, c->fd) == c->fd);
	close(c->saved);
	f = fopen(c->path, "r");
	ASSERT_NOT_NULL(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)len + 1);
	ASSERT_NOT_NULL(buf);
	ASSERT_EQ(len, (long)fread(buf, 1, (size_t)len, f));
	fclose(f);
	unlink(c->path);
	return buf;
}

/* A recursive-descent JSON recognizer (RFC 8259 syntax). */
static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static const char *value(const char *p, int depth);

static const char *string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	while (*p && *p != '"') {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)p[i]))
						return NULL;
				p += 4;
			} else if (!strchr("\"\\/bfnrt", *p) || !*p) {
				return NULL;
			}
		}
		p++;
	}
	return *p == '"' ? p + 1 : NULL;
}

static const char *number(const char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (isdigit((unsigned char)*p))
		while (isdigit((unsigned char)*p))
			p++;
	else
		return NULL;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return NULL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return NULL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return p;
}

static const char *members(const char *p, int depth, bool object)
{
	char close = object ? '}' : ']';

	p = ws(p + 1);
	if (*p == close)
		return p + 1;
	for (;;) {
		if (object) {
			p = string(ws(p));
			if (!p)
				return NULL;
			p = ws(p);
			if (*p++ != ':')
				return NULL;
		}
		p = value(p, depth + 1);
		if (!p)
			return NULL;
		p = ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
}

static const char *value(const char *p, int depth)
{
	if (depth > 64)
		return NULL;
	p = ws(p);
	switch (*p) {
	case '{':
		return members(p, depth, true);
	case '[':
		return members(p, depth, false);
	case '"':
		return string(p);
	case 't':
		return strncmp(p, "true", 4) ? NULL : p + 4;
	case 'f':
		return strncmp(p, "false", 5) ? NULL : p + 5;
	case 'n':
		return strncmp(p, "null", 4) ? NULL : p + 4;
	default:
		return number(p);
	}
}

bool json_valid(const char *s)
{
	const char *p = value(s, 0);

	return p && *ws(p) == '\0';
}
