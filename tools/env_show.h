/* SPDX-License-Identifier: MIT */
/* softverbs-stat --env: provider/lib/env.c's table printed (env_show.c). */
#ifndef SV_ENV_SHOW_H
#define SV_ENV_SHOW_H

enum sv_env_show {
	SV_ENV_SHOW_TEXT,     /* the values in effect, with each row */
	SV_ENV_SHOW_MARKDOWN, /* docs/configuration.md: the table alone */
	SV_ENV_SHOW_NAMES,    /* the names, one a line */
	SV_ENV_SHOW_ROFF,     /* man/softverbs.7's ENVIRONMENT entries */
};

/* Prints the table on stdout; the exit status. */
int sv_env_show(enum sv_env_show how);

#endif
