/* SPDX-License-Identifier: MIT */
/*
 * The test harness.  Every SV_TEST is its own process: ctest runs
 * `binary test_name`, and the harness arms a deadline (SV_TEST_DEADLINE
 * seconds, default 60) that kills the test and everything it spawned.
 * Helpers spawn server/client processes, find free ports and wait for
 * conditions with deadlines; nothing sleeps for a fixed time.
 */
#ifndef SV_TEST_H
#define SV_TEST_H

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef void (*sv_test_fn)(void);
void sv_test_register(const char *name, sv_test_fn fn);

#define SV_TEST(name)                                                     \
	static void sv_test_##name(void);                                 \
	__attribute__((constructor)) static void sv_test_reg_##name(void) \
	{                                                                 \
		sv_test_register(#name, sv_test_##name);                  \
	}                                                                 \
	static void sv_test_##name(void)

/* The suite runs over a wire between hosts, not shared memory:
 * SOFTVERBS_TRANSPORT=tcp or roce (ctest's `.tcp.` and `.roce.` tests,
 * labels tcp and roce). */
bool sv_test_wire(void);
/* ... over the RoCEv2 wire (SOFTVERBS_TRANSPORT=roce): lossy, no
 * connection under the QP, as between a host and a RoCE NIC. */
bool sv_test_roce(void);
/* A test of the shared-memory transport itself (its rings and sockets,
 * single-copy sends, one-sided operations done by the initiator): over
 * a wire it skips (exit 77, ctest's SKIP_RETURN_CODE), saying why. */
void sv_test_needs_shm(const char *why);
/* A test of what a connection under the QP gives (shared memory or
 * TCP: a peer's death seen at once, processes that share a queue):
 * over RoCE it skips, saying why. */
void sv_test_not_roce(const char *why);
/* A test of the RoCE wire alone: elsewhere it skips, saying why. */
void sv_test_needs_roce(const char *why);
/* ... the why of a test of a peer's death that a connection tells */
#define SV_ROCE_NO_DEATH_NOTICE                                            \
	"a dead peer is seen at once only through a connection under "     \
	"the QP; over RoCE, as with a NIC, only a send's retries find it " \
	"(IBV_WC_RETRY_EXC_ERR, no IBV_EVENT_QP_FATAL)"

/* Fails the running test: prints where and why, kills helpers, exits 1. */
__attribute__((noreturn, format(printf, 3, 4))) void
sv_test_fail(const char *file, int line, const char *fmt, ...);

#define ASSERT_TRUE(c)                                              \
	do {                                                        \
		if (!(c))                                           \
			sv_test_fail(__FILE__, __LINE__, "%s", #c); \
	} while (0)
#define ASSERT_FALSE(c) ASSERT_TRUE(!(c))
#define ASSERT_EQ(a, b)                                                    \
	do {                                                               \
		long long a_ = (long long)(a), b_ = (long long)(b);        \
		if (a_ != b_)                                              \
			sv_test_fail(__FILE__, __LINE__,                   \
				     "%s == %s: %lld != %lld", #a, #b, a_, \
				     b_);                                  \
	} while (0)
#define ASSERT_NE(a, b)                                                  \
	do {                                                             \
		long long a_ = (long long)(a), b_ = (long long)(b);      \
		if (a_ == b_)                                            \
			sv_test_fail(__FILE__, __LINE__,                 \
				     "%s != %s: both %lld", #a, #b, a_); \
	} while (0)
#define ASSERT_GE(a, b)                                                        \
	do {                                                                   \
		long long a_ = (long long)(a), b_ = (long long)(b);            \
		if (!(a_ >= b_))                                               \
			sv_test_fail(__FILE__, __LINE__,                       \
				     "%s >= %s: %lld < %lld", #a, #b, a_, b_); \
	} while (0)
#define ASSERT_LE(a, b) ASSERT_GE(b, a)
#define ASSERT_OK(x)	ASSERT_EQ(0, (x))
#define ASSERT_NOT_NULL(p)                                                   \
	do {                                                                 \
		if ((p) == NULL)                                             \
			sv_test_fail(__FILE__, __LINE__,                     \
				     "%s is NULL (errno %d: %s)", #p, errno, \
				     strerror(errno));                       \
	} while (0)
#define ASSERT_NULL(p) ASSERT_TRUE((p) == NULL)
#define ASSERT_STR_EQ(a, b)                                                   \
	do {                                                                  \
		const char *a_ = (a), *b_ = (b);                              \
		if (!a_ || !b_ || strcmp(a_, b_))                             \
			sv_test_fail(__FILE__, __LINE__,                      \
				     "%s == %s: \"%s\" != \"%s\"", #a, #b,    \
				     a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
	} while (0)
/* Asserts that haystack contains needle. */
#define ASSERT_CONTAINS(hay, needle)                                 \
	do {                                                         \
		const char *h_ = (hay), *n_ = (needle);              \
		if (!h_ || !strstr(h_, n_))                          \
			sv_test_fail(__FILE__, __LINE__,             \
				     "\"%s\" not found in:\n%s", n_, \
				     h_ ? h_ : "(null)");            \
	} while (0)

/* Monotonic clock in milliseconds. */
uint64_t sv_now_ms(void);
/* The crash tracer to preload into real programs (lib/crashtrace.c), or
 * NULL (sanitizer builds). */
const char *sv_crashtrace_lib(void);

/* A TCP port that was free a moment ago (bound to port 0 and released). */
int sv_free_port(void);

/* True once something listens on TCP port `port` (any address family). */
bool sv_port_listening(int port);
/* True once a UDP socket is bound to `port` (any address family). */
bool sv_udp_port_bound(int port);

/* One wait between checks of a condition: from 50 µs (start *us there),
 * doubling to 5 ms. */
void sv_backoff(unsigned int *us);

/* Waits, with a deadline, until `port` has a listener; fails the test if
 * `pid` exits first or the deadline passes. */
void sv_wait_listening(int port, pid_t pid, int timeout_ms);

/*
 * Runs fn() in a forked child with the environment variable name=value
 * (the library reads its variables once per process: one child a case)
 * and the child's stderr in a file.  Returns the child's exit code (a
 * death by a signal fails the test); the first max lines it wrote go to
 * lines[], each also echoed as "child said: ...", their count (at most
 * max) to *nlines.
 */
#define SV_CHILD_LINE 1024
int sv_child_env(const char *name, const char *value, int (*fn)(void),
		 char lines[][SV_CHILD_LINE], int max, int *nlines);

/*
 * Skips the test (exit 77) in a sanitized build when it needs a child
 * forked, without exec, from a process whose other threads run, and that
 * child allocates or starts threads.  glibc's malloc takes its locks
 * around fork; the allocators of gcc 12's and clang 14's sanitizers do
 * not (libasan.so.8 has no fork interceptor), so a child forked while
 * another thread held one of their mutexes waits on it for ever (seen:
 * the child's first thread, in AsanThread::Init's calloc, 3 runs in 40).
 * TSan refuses threads in such a child outright.  The plain build runs
 * the test.
 */
void sv_skip_forked_child_under_sanitizer(void);

/*
 * Skips the test (exit 77) under ThreadSanitizer, printing why: for a
 * test whose threads are ordered by something TSan cannot see, such as
 * the page protection and fault of rmem.c's guard window (a writer
 * faults and waits while the provider moves the pages it writes).
 */
void sv_skip_under_tsan(const char *why);

/*
 * A spawned helper process.  Its stdout and stderr go to files that
 * sv_proc_wait() reads back into out/err.  Helpers are killed when the
 * test fails or exits.
 */
struct sv_proc {
	pid_t pid;
	int status;  /* wait status once reaped */
	bool exited; /* reaped with a normal exit */
	int code;    /* exit code when exited */
	char *out;   /* captured stdout, NUL-terminated, after wait */
	char *err;   /* captured stderr */
	char out_path[64];
	char err_path[64];
};

/* Starts argv[0] (searched in PATH) with extra "NAME=value" env entries
 * (NULL-terminated, may be NULL). */
void sv_proc_start(struct sv_proc *p, char *const argv[], char *const env[]);
/* Waits up to timeout_ms; on timeout kills it and fails the test. */
void sv_proc_wait(struct sv_proc *p, int timeout_ms);
/* Reaps it if it has exited (fills status, out, err); never blocks. */
bool sv_proc_poll(struct sv_proc *p);
/* Kills (SIGKILL) and reaps without failing. */
void sv_proc_kill(struct sv_proc *p);
/*
 * From now on each helper leads its own process group, and every kill
 * (sv_proc_kill, a failed test, the deadline) kills the whole group: for
 * helpers that spawn their own children (mpirun, scripts).
 */
void sv_proc_own_group(void);
void sv_proc_free(struct sv_proc *p);

/*
 * A helper process's body, in the test binary itself: SV_HELPER(name)
 * { ... return exit_code; } runs as `binary --helper name args...`
 * (not a ctest test: the scan finds SV_TEST only).  argv[0] is the
 * first of args.  sv_proc_start_helper() starts one as an sv_proc, so it
 * is killed with the test; fds the test opened without O_CLOEXEC (pipes)
 * are inherited, pass their numbers in args.
 */
typedef int (*sv_helper_fn)(int argc, char **argv);
void sv_helper_register(const char *name, sv_helper_fn fn);

#define SV_HELPER(name)                                                     \
	static int sv_helper_##name(int argc, char **argv);                 \
	__attribute__((constructor)) static void sv_helper_reg_##name(void) \
	{                                                                   \
		sv_helper_register(#name, sv_helper_##name);                \
	}                                                                   \
	static int sv_helper_##name(int argc, char **argv)

/* Starts helper `name` of this binary with NULL-terminated args (may be
 * NULL) and extra env entries (may be NULL). */
void sv_proc_start_helper(struct sv_proc *p, const char *name,
			  char *const args[], char *const env[]);

/* Name of the running test. */
const char *sv_test_name(void);

/* Directory of the build tree (from the SV_BUILD_DIR environment). */
const char *sv_build_dir(void);

#endif
