// SPDX-License-Identifier: MIT
/*
 * softverbs-stat --env (what `softverbs-run --env` runs): provider/lib/env.c's
 * table of SOFTVERBS_* variables with the values this environment gives
 * them, as `ucx_info -c` and `fi_info -e` print theirs; --markdown makes
 * docs/configuration.md from the table alone (no environment), --roff
 * the ENVIRONMENT entries of man/softverbs.7, --names lists the names for
 * scripts.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "env_show.h"

static const char *const type_names[] = {
	[SV_ENV_T_BOOL] = "bool", [SV_ENV_T_UINT] = "uint",
	[SV_ENV_T_PORT] = "port", [SV_ENV_T_ENUM] = "enum",
	[SV_ENV_T_PATH] = "path", [SV_ENV_T_SPEC] = "spec",
};

static const char *policy_text(const struct sv_env_row *r)
{
	if (r->type == SV_ENV_T_PATH)
		return "never bad";
	return r->policy == SV_ENV_REFUSE ? "refuse: no softverbs0"
					  : "warn, use the default";
}

/* The value in effect of a row whose string is unset (or refused). */
static void value_default(enum sv_env_id id, char *buf, size_t n)
{
	const struct sv_env_row *r = &sv_env_rows[id];

	if (id == SV_ENV_TCP_CONNECT_PORT)
		snprintf(buf, n, "%" PRIu64, sv_env_uint(SV_ENV_TCP_PORT));
	else if (r->type == SV_ENV_T_PATH || r->type == SV_ENV_T_SPEC)
		buf[0] = '\0';
	else
		sv_env_default(r, buf, n);
}

static void show_text(void)
{
	printf("# softverbs: the SOFTVERBS_* variables and the values this "
	       "environment gives them\n"
	       "# (an empty variable is an unset one; docs/configuration.md "
	       "says more)\n");
	for (int i = 0; i < SV_ENV_COUNT; i++) {
		const struct sv_env_row *r = &sv_env_rows[i];
		char range[256], def[64], val[64], why[512];
		bool bad;
		const char *raw = sv_env_raw(i, &bad);
		uint64_t v;

		sv_env_range(r, range, sizeof(range));
		sv_env_default(r, def, sizeof(def));
		printf("\n# %s\n# %s: %s; default: %s; bad value: %s; read by "
		       "%s\n",
		       r->help, type_names[r->type], range, def, policy_text(r),
		       r->reader);
		if (!raw) {
			value_default(i, val, sizeof(val));
			printf("%s=%s\t# %s\n", r->name, val,
			       val[0] ? "default" : "unset");
			continue;
		}
		if (!bad) {
			printf("%s=%s\t# set\n", r->name, raw);
			continue;
		}
		sv_env_parse(r, raw, &v, why, sizeof(why));
		if (r->policy == SV_ENV_REFUSE) {
			printf("%s=%s\t# set, and bad: %s; softverbs0 will "
			       "not open\n",
			       r->name, raw, why);
			continue;
		}
		value_default(i, val, sizeof(val));
		printf("%s=%s\t# set to '%s', which %s: the default\n", r->name,
		       val, raw, why);
	}
}

static void show_markdown(void)
{
	printf("<!-- Made by `softverbs-run --env --markdown` from the table "
	       "in "
	       "provider/lib/env.c;\n"
	       "     do not edit: ctest env.docs_current fails when they "
	       "differ. -->\n"
	       "# Configuration: the SOFTVERBS_* variables\n"
	       "\n"
	       "softverbs needs no configuration. These variables change "
	       "what it does; each is\n"
	       "declared once, in the table in `provider/lib/env.c`, and read "
	       "once per process (the\n"
	       "first `ibv_get_device_list`). `softverbs-run --env` prints "
	       "them with the values\n"
	       "in effect. An empty variable is the same as an unset one.\n"
	       "\n"
	       "A value that does not parse or is out of range gets one line "
	       "on stderr naming\n"
	       "the variable, the value and the valid range. Then, as the "
	       "*Bad value* column\n"
	       "says, either softverbs0 is refused (`ibv_get_device_list` "
	       "returns an empty list\n"
	       "with errno `EINVAL`, and the program's usual \"no device\" "
	       "path runs) or the\n"
	       "default is used:\n"
	       "\n"
	       "    $ SOFTVERBS_TCP_PORT=99999 softverbs-run ibv_rc_pingpong\n"
	       "    softverbs: SOFTVERBS_TCP_PORT=99999 is not a port in "
	       "1..65535; refusing to open softverbs0\n"
	       "    No IB devices found\n"
	       "\n"
	       "| Variable | Type | Default | Valid values | Bad value | Read "
	       "by | Meaning |\n"
	       "|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < SV_ENV_COUNT; i++) {
		const struct sv_env_row *r = &sv_env_rows[i];
		char range[256], def[64];

		sv_env_range(r, range, sizeof(range));
		sv_env_default(r, def, sizeof(def));
		printf("| `%s` | %s | %s | %s | %s | %s | %s |\n", r->name,
		       type_names[r->type], def, range, policy_text(r),
		       r->reader, r->help);
	}
}

/* s as roff text: a minus sign, a backslash, no request at a line's start */
static void put_roff(const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", stdout);
	for (; *s; s++) {
		if (*s == '-')
			fputs("\\-", stdout);
		else if (*s == '\\')
			fputs("\\e", stdout);
		else
			putchar(*s);
	}
}

static void show_roff(void)
{
	printf(".\\\" Made by `softverbs-run --env --roff` from the table in "
	       "provider/lib/env.c;\n"
	       ".\\\" ctest env.man_current fails when this block differs.\n");
	for (int i = 0; i < SV_ENV_COUNT; i++) {
		const struct sv_env_row *r = &sv_env_rows[i];
		char range[256], def[64];

		sv_env_range(r, range, sizeof(range));
		sv_env_default(r, def, sizeof(def));
		printf(".TP\n.B ");
		put_roff(r->name);
		printf("\n");
		put_roff(type_names[r->type]);
		printf("; default ");
		put_roff(def);
		printf("; valid: ");
		put_roff(range);
		printf("; a bad value: ");
		put_roff(policy_text(r));
		printf("; read by ");
		put_roff(r->reader);
		printf(".\n");
		put_roff(r->help);
		printf(".\n");
	}
}

int sv_env_show(enum sv_env_show how)
{
	sv_env_quiet = true; /* the table says what is bad */
	switch (how) {
	case SV_ENV_SHOW_TEXT:
		show_text();
		break;
	case SV_ENV_SHOW_MARKDOWN:
		show_markdown();
		break;
	case SV_ENV_SHOW_ROFF:
		show_roff();
		break;
	case SV_ENV_SHOW_NAMES:
		for (int i = 0; i < SV_ENV_COUNT; i++)
			printf("%s\n", sv_env_rows[i].name);
		break;
	}
	return fflush(stdout) ? 1 : 0;
}
