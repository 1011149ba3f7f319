// SPDX-License-Identifier: MIT
/*
 * The test harness's runner and helpers: test registry, one test per
 * process with a deadline, helper processes with captured output, free
 * ports and listening checks.  See sv_test.h.
 */
#include "sv_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS 512
#define MAX_PROCS 32

static struct {
	const char *name;
	sv_test_fn fn;
} tests[MAX_TESTS];
static int ntests;

#define MAX_HELPERS 32

static struct {
	const char *name;
	sv_helper_fn fn;
} helpers[MAX_HELPERS];
static int nhelpers;

static pid_t procs[MAX_PROCS];
/* each helper's stdout and stderr files (sv_proc_start), until reaped */
static char proc_files[MAX_PROCS][2][64];
static int nprocs;
static bool own_group; /* helpers lead process groups, killed as groups */
static const char *current_test;

/* Kills the helper, or its process group when helpers lead one. */
static void kill_proc(pid_t pid, int sig)
{
	if (own_group)
		kill(-pid, sig);
	kill(pid, sig);
}

void sv_test_register(const char *name, sv_test_fn fn)
{
	if (ntests == MAX_TESTS) {
		fprintf(stderr, "harness: more than %d tests\n", MAX_TESTS);
		abort();
	}
	tests[ntests].name = name;
	tests[ntests].fn = fn;
	ntests++;
}

void sv_helper_register(const char *name, sv_helper_fn fn)
{
	if (nhelpers == MAX_HELPERS) {
		fprintf(stderr, "harness: more than %d helpers\n", MAX_HELPERS);
		abort();
	}
	helpers[nhelpers].name = name;
	helpers[nhelpers].fn = fn;
	nhelpers++;
}

/* Writes the last 2 KiB of a helper's output file to stderr. */
static void show_tail(pid_t pid, const char *path)
{
	const char *what = strstr(path, ".err") ? "stderr" : "stdout";
	int fd = open(path, O_RDONLY);
	off_t end, from;
	char buf[2048];
	ssize_t n;

	if (fd < 0)
		return;
	end = lseek(fd, 0, SEEK_END);
	from = end > (off_t)sizeof(buf) ? end - (off_t)sizeof(buf) : 0;
	if (end > 0 && lseek(fd, from, SEEK_SET) == from) {
		n = read(fd, buf, sizeof(buf));
		if (n > 0)
			fprintf(stderr,
				"--- helper %d %s (last %zd bytes):\n%.*s\n",
				(int)pid, what, n, (int)n, buf);
	}
	close(fd);
}

/* Kills the helpers not reaped yet and removes their output files, after
 * showing their tails when the test failed (the helper's own words about
 * why are often the cause). */
static void kill_helpers(bool failed)
{
	for (int i = 0; i < nprocs; i++) {
		if (procs[i] <= 0)
			continue;
		kill_proc(procs[i], SIGKILL);
		waitpid(procs[i], NULL, 0);
		for (int f = 0; f < 2; f++) {
			if (failed)
				show_tail(procs[i], proc_files[i][f]);
			unlink(proc_files[i][f]);
		}
		procs[i] = 0;
	}
}

void sv_test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL %s at %s:%d: ", current_test ? current_test : "?",
		file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	kill_helpers(true);
	exit(1);
}

static void on_deadline(int sig)
{
	static const char msg[] = "FAIL: test deadline exceeded\n";
	ssize_t r = write(2, msg, sizeof(msg) - 1);

	(void)r;
	(void)sig;
	for (int i = 0; i < nprocs; i++) {
		if (procs[i] <= 0)
			continue;
		kill_proc(procs[i], SIGKILL);
		unlink(proc_files[i][0]); /* async-signal-safe */
		unlink(proc_files[i][1]);
	}
	_exit(1);
}

uint64_t sv_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sv_free_port(void)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	int port;

	if (fd < 0)
		sv_test_fail(__FILE__, __LINE__, "socket: %s", strerror(errno));
	a.sin6_addr = in6addr_any;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		sv_test_fail(__FILE__, __LINE__, "bind: %s", strerror(errno));
	port = ntohs(a.sin6_port);
	close(fd);
	return port;
}

/* Scans a /proc/net/{tcp,udp}{,6} table for a socket on local `port` in
 * state `state` (TCP LISTEN is 0A), or in any state when state is 0. */
static bool port_in(const char *path, int port, unsigned int state)
{
	char line[512];
	FILE *f = fopen(path, "r");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned int lport, st;

		if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*s %x", &lport,
			   &st) == 2)
			found = (int)lport == port && (!state || st == state);
	}
	fclose(f);
	return found;
}

bool sv_port_listening(int port)
{
	return port_in("/proc/net/tcp", port, 0x0A) ||
	       port_in("/proc/net/tcp6", port, 0x0A);
}

bool sv_udp_port_bound(int port)
{
	return port_in("/proc/net/udp", port, 0) ||
	       port_in("/proc/net/udp6", port, 0);
}

void sv_backoff(unsigned int *us)
{
	struct timespec ts = {0, (long)*us * 1000};

	nanosleep(&ts, NULL);
	if (*us < 5000)
		*us *= 2;
}

void sv_wait_listening(int port, pid_t pid, int timeout_ms)
{
	uint64_t end = sv_now_ms() + timeout_ms;
	unsigned int us = 50;

	while (!sv_port_listening(port)) {
		int st;

		if (pid > 0 && waitpid(pid, &st, WNOHANG) == pid)
			sv_test_fail(
				__FILE__, __LINE__,
				"server pid %d exited (status 0x%x) before "
				"listening on port %d",
				pid, st, port);
		if (sv_now_ms() > end)
			sv_test_fail(__FILE__, __LINE__,
				     "nothing listens on port %d after %d ms",
				     port, timeout_ms);
		sv_backoff(&us);
	}
}

#define SV_CHILD_DEADLINE_S 20

int sv_child_env(const char *name, const char *value, int (*fn)(void),
		 char lines[][SV_CHILD_LINE], int max, int *nlines)
{
	char path[] = "/tmp/sv-child-XXXXXX";
	int fd = mkstemp(path), st, n = 0;
	pid_t pid;
	FILE *f;

	ASSERT_TRUE(fd >= 0);
	unlink(path);
	fflush(NULL);
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		/* a child that hangs dies of SIGALRM: the test fails in
		 * SV_CHILD_DEADLINE_S, not at ctest's timeout (and not in
		 * the parent's on_deadline, which kills the parent's helpers)
		 */
		signal(SIGALRM, SIG_DFL);
		alarm(SV_CHILD_DEADLINE_S);
		dup2(fd, 2);
		setenv(name, value, 1);
		_exit(fn());
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	f = fdopen(fd, "r");
	ASSERT_NOT_NULL(f);
	rewind(f);
	while (n < max && fgets(lines[n], SV_CHILD_LINE, f))
		printf("child said: %s", lines[n++]);
	fclose(f);
	*nlines = n;
	if (WIFSIGNALED(st))
		sv_test_fail(__FILE__, __LINE__, "child killed by signal %d%s",
			     WTERMSIG(st),
			     WTERMSIG(st) == SIGALRM
				     ? " (it ran past its deadline)"
				     : "");
	ASSERT_TRUE(WIFEXITED(st));
	return WEXITSTATUS(st);
}

void sv_skip_forked_child_under_sanitizer(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	printf("SKIP %s under a sanitizer: a child forked from a threaded "
	       "process cannot allocate safely there (sv_test.h)\n",
	       current_test);
	fflush(stdout);
	exit(77);
#endif
}

void sv_skip_under_tsan(const char *why)
{
#if defined(__SANITIZE_THREAD__)
	printf("SKIP %s under TSan: %s\n", current_test, why);
	fflush(stdout);
	exit(77);
#else
	(void)why;
#endif
}

void sv_proc_start(struct sv_proc *p, char *const argv[], char *const env[])
{
	static int seq;
	pid_t pid;

	memset(p, 0, sizeof(*p));
	snprintf(p->out_path, sizeof(p->out_path), "/tmp/svt.%d.%d.out",
		 getpid(), seq);
	snprintf(p->err_path, sizeof(p->err_path), "/tmp/svt.%d.%d.err",
		 getpid(), seq++);
	if (nprocs == MAX_PROCS)
		sv_test_fail(__FILE__, __LINE__, "too many helper processes");
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		sv_test_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
	if (pid == 0) {
		int o = open(p->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(p->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(126);
		close(o);
		close(e);
		if (own_group)
			setpgid(0, 0);
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		alarm(0);
		execvp(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (own_group)
		setpgid(pid, pid); /* no race with a kill before the exec */
	p->pid = pid;
	memcpy(proc_files[nprocs][0], p->out_path, sizeof(p->out_path));
	memcpy(proc_files[nprocs][1], p->err_path, sizeof(p->err_path));
	procs[nprocs++] = pid;
}

void sv_proc_start_helper(struct sv_proc *p, const char *name,
			  char *const args[], char *const env[])
{
	char *argv[40] = {"/proc/self/exe", "--helper", (char *)name};
	int n = 3;

	for (int i = 0; args && args[i]; i++) {
		if (n == 39)
			sv_test_fail(__FILE__, __LINE__,
				     "helper %s: too many "
				     "arguments",
				     name);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	sv_proc_start(p, argv, env);
}

/* `binary --helper name args...`: the helper's exit code. */
static int run_helper(int argc, char **argv)
{
	for (int i = 0; i < nhelpers; i++) {
		if (strcmp(helpers[i].name, argv[2]))
			continue;
		const char *dl = getenv("SV_TEST_DEADLINE");

		current_test = helpers[i].name;
		signal(SIGPIPE, SIG_IGN);
		alarm(dl ? (unsigned int)atoi(dl) : 60); /* never outlive it */
		return helpers[i].fn(argc - 3, argv + 3);
	}
	fprintf(stderr, "no helper named %s\n", argv[2]);
	return 2;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int c;

	if (f) {
		while ((c = fgetc(f)) != EOF) {
			if (len + 2 > cap) {
				cap = cap ? 2 * cap : 4096;
				buf = realloc(buf, cap);
				if (!buf)
					abort();
			}
			buf[len++] = (char)c;
		}
		fclose(f);
	}
	if (!buf)
		buf = calloc(1, 1);
	else
		buf[len] = '\0';
	unlink(path);
	return buf;
}

static void forget(pid_t pid)
{
	for (int i = 0; i < nprocs; i++)
		if (procs[i] == pid)
			procs[i] = 0;
}

static void reaped(struct sv_proc *p, int st)
{
	forget(p->pid);
	p->status = st;
	p->exited = WIFEXITED(st);
	p->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	p->out = slurp(p->out_path);
	p->err = slurp(p->err_path);
	p->pid = 0;
}

void sv_proc_wait(struct sv_proc *p, int timeout_ms)
{
	uint64_t end = sv_now_ms() + timeout_ms;
	unsigned int us = 50;
	int st;

	for (;;) {
		pid_t r = waitpid(p->pid, &st, WNOHANG);

		if (r == p->pid)
			break;
		if (sv_now_ms() > end) {
			pid_t pid = p->pid;

			kill_proc(pid, SIGKILL);
			waitpid(pid, &st, 0);
			reaped(p, st);
			sv_test_fail(__FILE__, __LINE__,
				     "pid %d still running after %d ms\n"
				     "stdout:\n%s\nstderr:\n%s",
				     pid, timeout_ms, p->out, p->err);
		}
		sv_backoff(&us);
	}
	reaped(p, st);
}

bool sv_proc_poll(struct sv_proc *p)
{
	int st;

	if (p->pid <= 0)
		return true;
	if (waitpid(p->pid, &st, WNOHANG) != p->pid)
		return false;
	reaped(p, st);
	return true;
}

void sv_proc_own_group(void)
{
	own_group = true;
}

void sv_proc_kill(struct sv_proc *p)
{
	int st;

	if (p->pid <= 0)
		return;
	kill_proc(p->pid, SIGKILL);
	waitpid(p->pid, &st, 0);
	reaped(p, st);
}

void sv_proc_free(struct sv_proc *p)
{
	free(p->out);
	free(p->err);
	p->out = p->err = NULL;
}

const char *sv_test_name(void)
{
	return current_test;
}

static const char *transport(void)
{
	const char *t = getenv("SOFTVERBS_TRANSPORT");

	return t ? t : "";
}

bool sv_test_wire(void)
{
	return !strcmp(transport(), "tcp") || sv_test_roce();
}

bool sv_test_roce(void)
{
	return !strcmp(transport(), "roce");
}

static void skip(const char *over, const char *why)
{
	printf("SKIP %s over %s: %s\n", current_test, over, why);
	fflush(stdout);
	exit(77);
}

void sv_test_needs_shm(const char *why)
{
	if (sv_test_wire())
		skip(sv_test_roce() ? "RoCE" : "TCP", why);
}

void sv_test_not_roce(const char *why)
{
	if (sv_test_roce())
		skip("RoCE", why);
}

void sv_test_needs_roce(const char *why)
{
	if (!sv_test_roce())
		skip(sv_test_wire() ? "TCP" : "shared memory", why);
}

const char *sv_build_dir(void)
{
	const char *d = getenv("SV_BUILD_DIR");

	return d ? d : ".";
}

/* Over the TCP transport every softverbs process of a host listens on
 * SOFTVERBS_TCP_PORT (4791) with SO_REUSEPORT, as hosts share a wire,
 * and a UD datagram between two QPs of one test goes through whichever
 * process's UDP listener the kernel picks (provider/transport/ud/door.c).
 * Another test's may take it and end, losing it, or pass it on after a
 * later one.  So a test over TCP gets a port of its own, free for TCP and
 * UDP, as a host of its own would have, unless it names one; its helpers
 * and programs inherit it. */
static void own_tcp_port(void)
{
	for (int tries = 0; tries < 20; tries++) {
		int port = sv_free_port(); /* TCP's; is it UDP's too? */
		struct sockaddr_in6 a = {.sin6_family = AF_INET6,
					 .sin6_addr = IN6ADDR_ANY_INIT,
					 .sin6_port = htons((uint16_t)port)};
		int u = socket(AF_INET6, SOCK_DGRAM, 0);
		bool ok = u >= 0 && !bind(u, (struct sockaddr *)&a, sizeof(a));
		char v[16];

		if (u >= 0)
			close(u);
		if (ok) {
			snprintf(v, sizeof(v), "%d", port);
			setenv("SOFTVERBS_TCP_PORT", v, 1);
			return;
		}
	}
	sv_test_fail(__FILE__, __LINE__, "no port free for both TCP and UDP");
}

int main(int argc, char **argv)
{
	const char *dl = getenv("SV_TEST_DEADLINE");

	if (argc < 2) {
		for (int i = 0; i < ntests; i++)
			printf("%s\n", tests[i].name);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "--helper"))
		return run_helper(argc, argv);
	for (int i = 0; i < ntests; i++) {
		if (strcmp(tests[i].name, argv[1]))
			continue;
		current_test = tests[i].name;
		signal(SIGALRM, on_deadline);
		signal(SIGPIPE, SIG_IGN);
		alarm(dl ? (unsigned int)atoi(dl) : 60);
		if (!strcmp(transport(), "tcp") &&
		    !getenv("SOFTVERBS_TCP_PORT"))
			own_tcp_port();
		tests[i].fn();
		kill_helpers(false);
		printf("PASS %s\n", current_test);
		return 0;
	}
	fprintf(stderr, "no test named %s\n", argv[1]);
	return 2;
}

const char *sv_crashtrace_lib(void)
{
#ifdef SV_CRASHTRACE
	return access(SV_CRASHTRACE, R_OK) ? NULL : SV_CRASHTRACE;
#else
	return NULL;
#endif
}
