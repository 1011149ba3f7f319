// SPDX-License-Identifier: MIT
/*
 * libsv_crashtrace.so: preloaded by the test harnesses (sv_prog_env) into
 * the real programs they run on softverbs, so a program that dies of a
 * signal in a CI run leaves its stack in the test's output: each frame as
 * object(+offset), which `addr2line -e OBJECT OFFSET` on a build of the
 * same commit resolves.  A program's own handler, installed later,
 * replaces ours; not loaded with ASan (its report is better).
 */
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

static void put(const char *s)
{
	(void)!write(2, s, strlen(s));
}

static void on_fatal(int sig)
{
	void *frames[64];
	char num[12];
	int n = sizeof(num) - 1, v = sig;

	num[n] = '\0';
	do
		num[--n] = (char)('0' + v % 10);
	while ((v /= 10) && n > 0);
	put("\nsv_crashtrace: signal ");
	put(num + n);
	put(" (");
	put(strsignal(sig));
	put("), stack:\n");
	backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
	/* SA_RESETHAND: the default action now, with the core it makes */
	raise(sig);
}

__attribute__((constructor)) static void crashtrace_init(void)
{
	struct sigaction sa = {.sa_handler = on_fatal,
			       .sa_flags = SA_RESETHAND | SA_NODEFER};
	void *warm[1];

	backtrace(warm, 1); /* loads libgcc's unwinder now, not in a crash */
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) {
		struct sigaction old;

		/* a handler already there (a sanitizer's) stays */
		if (!sigaction(fatal[i], NULL, &old) &&
		    old.sa_handler == SIG_DFL)
			sigaction(fatal[i], &sa, NULL);
	}
}
