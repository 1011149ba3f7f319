// SPDX-License-Identifier: MIT
/*
 * The exports of build/lib/libibverbs.so.1 against rdma-core 44's, as
 * `nm -D --defined-only` prints them ("name@@NODE" for the default
 * version, "name@NODE" for a compat one): every reference line present
 * with the same node and marker, nothing else exported, the same version
 * nodes, and the soname Debian binaries ask for.
 */
#include <stdio.h>
#include <string.h>

#include "abi_lib.h"
#include "sv_test.h"

#define REAL_EXPORTS	 "provider/abi/real_ibverbs_exports.txt"
#define PRIVATE34_NEEDED "provider/abi/private34_needed.txt"

/* Runs a binutils tool on the library; the caller frees the result. */
static void run_on_lib(struct sv_proc *p, const char *tool, const char *opt1,
		       const char *opt2)
{
	char *argv[] = {(char *)tool, (char *)opt1, (char *)opt2,
			(char *)abi_lib_path(), NULL};

	sv_proc_start(p, argv, NULL);
	sv_proc_wait(p, 20000);
	if (!p->exited || p->code)
		sv_test_fail(__FILE__, __LINE__,
			     "%s %s failed (is it built?):\n%s", tool,
			     abi_lib_path(), p->err ? p->err : "");
}

/*
 * Splits nm's "<addr> <type> <name>" lines into defined symbols
 * (name@[@]NODE) and version nodes (type A).
 */
static void our_exports(struct abi_lines *syms, struct abi_lines *nodes)
{
	struct abi_lines raw;
	struct sv_proc p;
	char name[256], type;

	run_on_lib(&p, "nm", "-D", "--defined-only");
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

/* Reports every line of `want` missing from `have`; fails if any is. */
static void expect_all(const struct abi_lines *have,
		       const struct abi_lines *want, const char *what)
{
	size_t missing = 0;

	for (size_t i = 0; i < want->n; i++) {
		if (abi_lines_has(have, want->v[i]))
			continue;
		fprintf(stderr, "missing %s: %s\n", what, want->v[i]);
		missing++;
	}
	ASSERT_EQ(0, missing);
}

SV_TEST(every_real_export_at_its_version)
{
	struct abi_lines ours, nodes, real;

	our_exports(&ours, &nodes);
	abi_lines_from_source(&real, REAL_EXPORTS);
	ASSERT_GE(real.n, 170);
	expect_all(&ours, &real, "export");
	abi_lines_free(&real);
	abi_lines_free(&nodes);
	abi_lines_free(&ours);
}

/* ibv_devinfo imports it there; the object code defines it. */
SV_TEST(query_gid_type_is_private_34)
{
	struct abi_lines ours, nodes;

	our_exports(&ours, &nodes);
	ASSERT_TRUE(
		abi_lines_has(&ours, "ibv_query_gid_type@@IBVERBS_PRIVATE_34"));
	abi_lines_free(&nodes);
	abi_lines_free(&ours);
}

/* What libmlx5, libefa and librdmacm import (includes a data symbol). */
SV_TEST(private34_imports_resolve)
{
	struct abi_lines ours, nodes, needed, want;
	char v[300];

	our_exports(&ours, &nodes);
	abi_lines_from_source(&needed, PRIVATE34_NEEDED);
	abi_lines_from_text(&want, "");
	for (size_t i = 0; i < needed.n; i++) {
		snprintf(v, sizeof(v), "%s@@IBVERBS_PRIVATE_34", needed.v[i]);
		abi_lines_add(&want, v);
	}
	expect_all(&ours, &want, "IBVERBS_PRIVATE_34 symbol");
	abi_lines_free(&want);
	abi_lines_free(&needed);
	abi_lines_free(&nodes);
	abi_lines_free(&ours);
}

/* Nothing of ours leaks: the surface is the reference, no more. */
SV_TEST(no_unexpected_exports)
{
	struct abi_lines ours, nodes, real, needed;
	size_t extra = 0;
	char v[300];

	our_exports(&ours, &nodes);
	abi_lines_from_source(&real, REAL_EXPORTS);
	abi_lines_from_source(&needed, PRIVATE34_NEEDED);
	for (size_t i = 0; i < needed.n; i++) {
		snprintf(v, sizeof(v), "%s@@IBVERBS_PRIVATE_34", needed.v[i]);
		abi_lines_add(&real, v);
	}
	for (size_t i = 0; i < ours.n; i++) {
		if (abi_lines_has(&real, ours.v[i]))
			continue;
		fprintf(stderr, "unexpected export: %s\n", ours.v[i]);
		extra++;
	}
	ASSERT_EQ(0, extra);
	abi_lines_free(&needed);
	abi_lines_free(&real);
	abi_lines_free(&nodes);
	abi_lines_free(&ours);
}

/* rdma-core 44's nodes, exactly: no 1.2-1.4. */
SV_TEST(version_nodes_are_rdma_core_44)
{
	static const char *const want[] = {
		"IBVERBS_1.0",	      "IBVERBS_1.1",  "IBVERBS_1.5",
		"IBVERBS_1.6",	      "IBVERBS_1.7",  "IBVERBS_1.8",
		"IBVERBS_1.9",	      "IBVERBS_1.10", "IBVERBS_1.11",
		"IBVERBS_1.12",	      "IBVERBS_1.13", "IBVERBS_1.14",
		"IBVERBS_PRIVATE_34",
	};
	struct abi_lines ours, nodes;

	our_exports(&ours, &nodes);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!abi_lines_has(&nodes, want[i]))
			sv_test_fail(__FILE__, __LINE__, "no node %s", want[i]);
	ASSERT_EQ(sizeof(want) / sizeof(want[0]), nodes.n);
	abi_lines_free(&nodes);
	abi_lines_free(&ours);
}

/* True if readelf -V shows node `name` with `parent` on the next line. */
static int has_parent(const char *out, const char *name, const char *parent)
{
	char pat[128];
	const char *at, *nl;

	snprintf(pat, sizeof(pat), "Name: %s\n", name);
	at = strstr(out, pat);
	if (!at)
		return 0;
	at += strlen(pat);
	nl = strchr(at, '\n');
	snprintf(pat, sizeof(pat), "Parent 1: %s", parent);
	at = strstr(at, pat);
	return at && (!nl || at < nl);
}

/* Each node inherits the one before it, as in rdma-core (readelf -V). */
SV_TEST(version_nodes_are_chained)
{
	static const char *const chain[] = {
		"IBVERBS_1.0",	"IBVERBS_1.1",	"IBVERBS_1.5",	"IBVERBS_1.6",
		"IBVERBS_1.7",	"IBVERBS_1.8",	"IBVERBS_1.9",	"IBVERBS_1.10",
		"IBVERBS_1.11", "IBVERBS_1.12", "IBVERBS_1.13", "IBVERBS_1.14",
	};
	struct sv_proc p;

	run_on_lib(&p, "readelf", "-V", "-W");
	for (size_t i = 1; i < sizeof(chain) / sizeof(chain[0]); i++)
		if (!has_parent(p.out, chain[i], chain[i - 1]))
			sv_test_fail(__FILE__, __LINE__,
				     "%s does not inherit %s", chain[i],
				     chain[i - 1]);
	ASSERT_FALSE(has_parent(p.out, "IBVERBS_PRIVATE_34", "IBVERBS_1.14"));
	sv_proc_free(&p);
}

SV_TEST(soname_is_libibverbs_so_1)
{
	struct sv_proc p;

	run_on_lib(&p, "readelf", "-d", "-W");
	ASSERT_CONTAINS(p.out, "Library soname: [libibverbs.so.1]");
	sv_proc_free(&p);
}
