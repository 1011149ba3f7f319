// SPDX-License-Identifier: MIT
/*
 * The exports of build/lib/librdmacm.so.1 against rdma-core 44's
 * librdmacm (rdmacm/abi/real_rdmacm_exports.txt, from nm): every
 * reference line present at its node, nothing else exported, the
 * RDMACM_1.0..1.3 nodes, the soname Debian binaries ask for, and only
 * libibverbs.so.1 (the public verbs) underneath.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "abi_lib.h"
#include "sv_test.h"

#define REAL_EXPORTS "rdmacm/abi/real_rdmacm_exports.txt"

static const char *cm_lib_path(void)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/lib/librdmacm.so.1", sv_build_dir());
	return path;
}

static void run(struct sv_proc *p, const char *tool, const char *opt1,
		const char *opt2)
{
	char *argv[] = {(char *)tool, (char *)opt1, (char *)opt2,
			(char *)cm_lib_path(), NULL};

	sv_proc_start(p, argv, NULL);
	sv_proc_wait(p, 20000);
	if (!p->exited || p->code)
		sv_test_fail(__FILE__, __LINE__, "%s %s failed:\n%s", tool,
			     cm_lib_path(), p->err ? p->err : "");
}

static void exports(struct abi_lines *syms, struct abi_lines *nodes)
{
	struct abi_lines raw;
	struct sv_proc p;
	char name[256], type;

	run(&p, "nm", "-D", "--defined-only");
	abi_lines_from_text(&raw, p.out);
	abi_lines_from_text(syms, "");
	abi_lines_from_text(nodes, "");
	for (size_t i = 0; i < raw.n; i++) {
		if (sscanf(raw.v[i], "%*s %c %255s", &type, name) != 2)
			continue;
		abi_lines_add(type == 'A' ? nodes : syms, name);
	}
	abi_lines_free(&raw);
	sv_proc_free(&p);
}

SV_TEST(rdmacm_every_real_export_and_nothing_else)
{
	struct abi_lines ours, nodes, real;
	size_t missing = 0, extra = 0;

	exports(&ours, &nodes);
	abi_lines_from_source(&real, REAL_EXPORTS);
	ASSERT_EQ(68, real.n);
	for (size_t i = 0; i < real.n; i++) {
		if (abi_lines_has(&ours, real.v[i]))
			continue;
		fprintf(stderr, "missing export: %s\n", real.v[i]);
		missing++;
	}
	for (size_t i = 0; i < ours.n; i++) {
		if (abi_lines_has(&real, ours.v[i]))
			continue;
		fprintf(stderr, "unexpected export: %s\n", ours.v[i]);
		extra++;
	}
	ASSERT_EQ(0, missing);
	ASSERT_EQ(0, extra);
	ASSERT_EQ(4, nodes.n);
	ASSERT_TRUE(abi_lines_has(&nodes, "RDMACM_1.0"));
	ASSERT_TRUE(abi_lines_has(&nodes, "RDMACM_1.3"));
	abi_lines_free(&real);
	abi_lines_free(&nodes);
	abi_lines_free(&ours);
}

SV_TEST(rdmacm_soname_and_needs_only_libibverbs)
{
	/* libcrypto: HMAC for SOFTVERBS_SECRET_FILE (provider/lib/auth.c) */
	static const char *const ok[] = {"[libibverbs.so.1]", "[libc.so.6]",
					 "[libcrypto.so.3]",  "[libasan.so",
					 "[libubsan.so",      "[libpthread.so"};
	struct sv_proc p;
	size_t bad = 0;
	char *s, *eol;

	run(&p, "readelf", "-d", "-W");
	ASSERT_NOT_NULL(strstr(p.out, "Library soname: [librdmacm.so.1]"));
	ASSERT_NOT_NULL(strstr(p.out, "Shared library: [libibverbs.so.1]"));
	for (s = p.out; (s = strstr(s, "(NEEDED)")); s = eol) {
		bool known = false;

		eol = strchr(s, '\n');
		if (eol)
			*eol++ = '\0';
		for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
			known |= strstr(s, ok[i]) != NULL;
		if (!known) {
			fprintf(stderr, "unexpected dependency: %s\n", s);
			bad++;
		}
		if (!eol)
			break;
	}
	ASSERT_EQ(0, bad);
	sv_proc_free(&p);
}
