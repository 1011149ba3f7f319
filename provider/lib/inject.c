// SPDX-License-Identifier: MIT
/*
 * SOFTVERBS_FAULTS: the spec's parser and the fault decision (inject.h).
 * A service like util.c: it calls nothing of the engine.  Where each
 * fault is applied: resp.c (drop, rnr, access at the responder), comp.c
 * (responses lost at the requester), ud/ (datagrams), req.c/resp.c/ud/send.c
 * count packets for kill_at; delay_us in post.c (each WQE's due time),
 * req.c and ud/send.c (nothing sent before it) and comp.c (ACKs and responses
 * taken delay_us after they came).
 *
 * The decision hashes (seed, kind, QP index, PSN, attempt) with
 * splitmix64's finaliser; no shared random stream is consumed, so the
 * order in which threads and QPs ask changes nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "inject.h"

struct sv_inject sv_inject;

static int init_err;
static char init_bad[64];
static _Atomic uint32_t qp_index;
static _Atomic uint64_t sent;

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

bool sv_inject_hit(double p, uint64_t seed, enum sv_inject_kind kind,
		   uint32_t qp_idx, uint32_t psn, uint32_t attempt)
{
	uint64_t h;

	if (p <= 0)
		return false;
	if (p >= 1)
		return true;
	h = mix(seed ^ mix((uint64_t)kind << 32 | qp_idx));
	h = mix(h ^ ((uint64_t)psn << 32 | attempt));
	/* the top 53 bits as a double in [0, 1) */
	return (double)(h >> 11) * 0x1.0p-53 < p;
}

static bool parse_u64(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long n;

	if (*v < '0' || *v > '9')
		return false;
	errno = 0;
	n = strtoull(v, &end, 0);
	if (errno || *end)
		return false;
	*out = n;
	return true;
}

static bool parse_p(const char *v, double *out)
{
	char *end;
	double d;

	if (!*v || (*v != '.' && (*v < '0' || *v > '9')))
		return false;
	errno = 0;
	d = strtod(v, &end);
	if (errno || *end || !(d >= 0 && d <= 1))
		return false;
	*out = d;
	return true;
}

static void set_bad(char *bad, unsigned int badlen, const char *s, size_t n)
{
	if (!badlen)
		return;
	if (n >= badlen)
		n = badlen - 1;
	memcpy(bad, s, n);
	bad[n] = 0;
}

int sv_inject_parse(const char *spec, struct sv_inject *f, char *bad,
		    unsigned int badlen)
{
	const char *s = spec;

	memset(f, 0, sizeof(*f));
	if (!spec || !*spec)
		return 0;
	for (;;) {
		const char *end = strchr(s, ','), *eq;
		size_t n = end ? (size_t)(end - s) : strlen(s);
		char key[16], val[64];
		size_t kl;
		bool ok;

		eq = memchr(s, '=', n);
		if (!eq || eq == s || (kl = (size_t)(eq - s)) >= sizeof(key) ||
		    n - kl - 1 >= sizeof(val)) {
			set_bad(bad, badlen, s, eq ? (size_t)(eq - s) : n);
			return -EINVAL;
		}
		memcpy(key, s, kl);
		key[kl] = 0;
		memcpy(val, eq + 1, n - kl - 1);
		val[n - kl - 1] = 0;
		if (!strcmp(key, "drop"))
			ok = parse_p(val, &f->drop);
		else if (!strcmp(key, "rnr"))
			ok = parse_p(val, &f->rnr);
		else if (!strcmp(key, "access"))
			ok = parse_p(val, &f->access);
		else if (!strcmp(key, "reorder"))
			ok = parse_p(val, &f->reorder);
		else if (!strcmp(key, "reorder_out"))
			ok = parse_p(val, &f->reorder_out);
		else if (!strcmp(key, "delay_us"))
			ok = parse_u64(val, &f->delay_us) &&
			     f->delay_us <= SV_FAULT_DELAY_MAX_US;
		else if (!strcmp(key, "kill_at"))
			ok = parse_u64(val, &f->kill_at);
		else if (!strcmp(key, "seed"))
			ok = parse_u64(val, &f->seed);
		else
			ok = false;
		if (!ok) {
			set_bad(bad, badlen, key, kl);
			return -EINVAL;
		}
		if (!end)
			break;
		s = end + 1;
	}
	f->on = true;
	return 0;
}

static void init_once(void)
{
	/* env.c checked it with the same parser and said what is wrong */
	const char *spec = sv_env_raw(SV_ENV_FAULTS, NULL);
	struct sv_inject f;

	init_err = sv_inject_parse(spec, &f, init_bad, sizeof(init_bad));
	if (!init_err)
		sv_inject = f;
}

int sv_inject_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, init_once);
	return init_err;
}

uint32_t sv_inject_qp_index(void)
{
	return atomic_fetch_add_explicit(&qp_index, 1, memory_order_relaxed);
}

void sv_inject_sent(void)
{
	uint64_t n = atomic_fetch_add_explicit(&sent, 1, memory_order_relaxed);

	if (sv_inject.kill_at && n + 1 == sv_inject.kill_at)
		kill(getpid(), SIGKILL); /* a crash: no cleanup, no exit */
}
