// SPDX-License-Identifier: MIT
/*
 * The fuzz targets' main() when libFuzzer is not there (gcc builds, the
 * plain and ASan ctest runs): replays every corpus file given (files or
 * directories), then, for -seconds=N, feeds mutations of them (bit flips,
 * interesting bytes, inserts, deletes, splices) from a seeded PRNG, so a
 * gcc build still explores a little around the corpus.  A crash or a
 * sanitizer report is the test's failure; the seed is printed so a run
 * can be repeated (-seed=N), and the input that crashed is written to
 * crash-<pid> in the working directory (the build tree's fuzz/ under
 * ctest), or to -artifact=FILE, so it can be replayed alone and added to
 * the corpus.  With clang, SV_FUZZ=ON links libFuzzer's own main instead
 * (make fuzz).
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#define FZ_MAX_INPUT 65536

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

struct input {
	uint8_t *p;
	size_t n;
};

static struct input *corpus;
static size_t ncorpus, corpus_cap;

static void add_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	size_t n;

	if (!f) {
		perror(path);
		exit(2);
	}
	buf = malloc(FZ_MAX_INPUT);
	n = fread(buf, 1, FZ_MAX_INPUT, f);
	fclose(f);
	if (ncorpus == corpus_cap) {
		corpus_cap = corpus_cap ? 2 * corpus_cap : 64;
		corpus = realloc(corpus, corpus_cap * sizeof(*corpus));
	}
	corpus[ncorpus++] = (struct input){buf, n};
}

static void add_path(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;

	if (stat(path, &st)) {
		perror(path);
		exit(2);
	}
	if (!S_ISDIR(st.st_mode)) {
		add_file(path);
		return;
	}
	d = opendir(path);
	while (d && (e = readdir(d))) {
		char p[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		add_file(p);
	}
	if (d)
		closedir(d);
}

static uint64_t rng;

/* The input being run, for the crash handler: a copy taken before the
 * target runs (targets may write to their input). */
static uint8_t *cur;
static size_t cur_n;
static char artifact[4096];

static void put(const char *s)
{
	(void)!write(2, s, strlen(s));
}

static const int fatal[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};

__attribute__((weak)) void __sanitizer_set_death_callback(void (*cb)(void));

static void save_input(void)
{
	int fd;

	if (!cur)
		return;
	fd = open(artifact, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		(void)!write(fd, cur, cur_n);
		close(fd);
		put("the crashing input is in ");
		put(artifact);
		put("\n");
	}
}

/* Async-signal-safe: open/write/close, then the default action. */
static void on_crash(int sig)
{
	save_input();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void run_one(const uint8_t *in, uint8_t *buf, size_t n)
{
	memcpy(cur, in, n);
	cur_n = n;
	if (buf != in)
		memcpy(buf, in, n);
	LLVMFuzzerTestOneInput(buf, n);
}

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return n ? (uint32_t)(rng % n) : 0;
}

static size_t mutate(uint8_t *b, size_t n)
{
	static const uint8_t interesting[] = {0, 1, 0x7f, 0x80, 0xff, 0x40};
	int k = 1 + (int)rnd(8);

	while (k--) {
		size_t at = n ? rnd((uint32_t)n) : 0;

		switch (rnd(6)) {
		case 0:
			if (n)
				b[at] ^= (uint8_t)(1u << rnd(8));
			break;
		case 1:
			if (n)
				b[at] = interesting[rnd(sizeof(interesting))];
			break;
		case 2:
			if (n)
				b[at] = (uint8_t)rnd(256);
			break;
		case 3: /* insert a byte */
			if (n < FZ_MAX_INPUT) {
				memmove(b + at + 1, b + at, n - at);
				b[at] = (uint8_t)rnd(256);
				n++;
			}
			break;
		case 4: /* delete a run */
			if (n) {
				size_t len = 1 + rnd((uint32_t)(n - at));

				memmove(b + at, b + at + len, n - at - len);
				n -= len;
			}
			break;
		case 5: { /* splice another input in */
			const struct input *o = &corpus[rnd((uint32_t)ncorpus)];
			size_t from = o->n ? rnd((uint32_t)o->n) : 0;
			size_t len = o->n - from;

			if (len > FZ_MAX_INPUT - at)
				len = FZ_MAX_INPUT - at;
			memcpy(b + at, o->p + from, len);
			if (at + len > n)
				n = at + len;
			break;
		}
		}
	}
	return n;
}

/* Mutations of the corpus for `seconds`; how many ran. */
static uint64_t mutate_for(double seconds, uint64_t seed, uint8_t *buf)
{
	uint64_t runs = 0;
	struct timespec t0, t;

	rng = seed | 1;
	printf("mutating for %.1f s, -seed=%llu\n", seconds,
	       (unsigned long long)seed);
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		const struct input *in = &corpus[rnd((uint32_t)ncorpus)];
		size_t n;

		memcpy(buf, in->p, in->n);
		n = mutate(buf, in->n);
		run_one(buf, buf, n);
		runs++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) +
			 (double)(t.tv_nsec - t0.tv_nsec) / 1e9 <
		 seconds);
	printf("%llu mutated inputs, no crash\n", (unsigned long long)runs);
	return runs;
}

int main(int argc, char **argv)
{
	double seconds = 0;
	uint64_t seed = (uint64_t)time(NULL);
	uint8_t *buf = malloc(FZ_MAX_INPUT);

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "-seconds=", 9))
			seconds = atof(argv[i] + 9);
		else if (!strncmp(argv[i], "-seed=", 6))
			seed = strtoull(argv[i] + 6, NULL, 0);
		else if (!strncmp(argv[i], "-artifact=", 10))
			snprintf(artifact, sizeof(artifact), "%s",
				 argv[i] + 10);
		else
			add_path(argv[i]);
	}
	if (!artifact[0])
		snprintf(artifact, sizeof(artifact), "crash-%d", (int)getpid());
	cur = malloc(FZ_MAX_INPUT);
	for (size_t s = 0; s < sizeof(fatal) / sizeof(fatal[0]); s++)
		signal(fatal[s], on_crash);
	if (__sanitizer_set_death_callback) /* ASan/UBSan exit, not abort */
		__sanitizer_set_death_callback(save_input);
	for (size_t i = 0; i < ncorpus; i++)
		run_one(corpus[i].p, buf, corpus[i].n);
	printf("replayed %zu corpus inputs\n", ncorpus);
	if (seconds > 0 && ncorpus)
		mutate_for(seconds, seed, buf);
	free(buf);
	free(cur);
	cur = NULL;
	for (size_t i = 0; i < ncorpus; i++)
		free(corpus[i].p);
	free(corpus);
	return 0;
}
