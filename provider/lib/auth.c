// SPDX-License-Identifier: MIT
/*
 * The shared secret and its primitives (auth.h).  A service like env.c
 * and util.c: it calls nothing of the provider but the env table.
 */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "env.h"

static const char *const labels[SV_AUTH_USES] = {
	[SV_AUTH_TCP_LINK] = "softverbs-v1 tcp link",
	[SV_AUTH_UD] = "softverbs-v1 ud datagram",
	[SV_AUTH_CM] = "softverbs-v1 cm stream",
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool on, failed;
static uint8_t keys[SV_AUTH_USES][SV_AUTH_KEY_LEN];
/* HMAC-SHA-256, fetched once: a fetch per MAC would cost more than the
 * MAC of a small datagram */
static EVP_MAC *hmac;
static pthread_once_t hmac_once_ = PTHREAD_ONCE_INIT;

static void fetch_hmac(void)
{
	hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

/* Reads a secret file that the env row let through: the checks again,
 * on the open file (it may have changed since). */
static int read_secret(const char *path, uint8_t *buf, size_t *len)
{
	struct stat st;
	ssize_t n;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) || st.st_size < SV_SECRET_MIN ||
	    st.st_size > SV_SECRET_MAX) {
		err = -EPERM;
		goto out;
	}
	n = read(fd, buf, SV_SECRET_MAX);
	if (n < SV_SECRET_MIN) {
		err = n < 0 ? -errno : -EIO;
		goto out;
	}
	*len = (size_t)n;
out:
	close(fd);
	return err;
}

/* HMAC's parameters: SHA-256 (an array of two, the end marker). */
static void hmac_params(OSSL_PARAM *p)
{
	p[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
						(char *)"SHA256", 0);
	p[1] = OSSL_PARAM_construct_end();
}

/* The MAC of the n pieces of iov with c, keyed (EVP_MAC_init done).  0,
 * or -EIO with out zeroed. */
static int mac_run(EVP_MAC_CTX *c, const struct iovec *iov, int n, uint8_t *out)
{
	size_t outl = 0;
	int ok = 1;

	for (int i = 0; ok && i < n; i++)
		ok = EVP_MAC_update(c, iov[i].iov_base, iov[i].iov_len);
	ok = ok && EVP_MAC_final(c, out, &outl, SV_AUTH_MAC_LEN) &&
	     outl == SV_AUTH_MAC_LEN;
	if (!ok)
		memset(out, 0, SV_AUTH_MAC_LEN);
	return ok ? 0 : -EIO;
}

static int hmac_once(const uint8_t *key, size_t klen, const struct iovec *iov,
		     int n, uint8_t *out)
{
	OSSL_PARAM params[2];
	EVP_MAC_CTX *c;
	int err = -EIO;

	hmac_params(params);
	c = EVP_MAC_CTX_new(hmac);
	if (!c)
		return -ENOMEM;
	if (EVP_MAC_init(c, key, klen, params))
		err = mac_run(c, iov, n, out);
	EVP_MAC_CTX_free(c);
	return err;
}

static void load(void)
{
	static uint8_t secret[SV_SECRET_MAX];
	const char *path = sv_env_str(SV_ENV_SECRET_FILE);
	bool bad = false;
	size_t len = 0;
	int err;

	if (!path) {
		/* set but refused by its row: the device does not open,
		 * and nothing here may be trusted either */
		failed = sv_env_raw(SV_ENV_SECRET_FILE, &bad) && bad;
		return;
	}
	failed = true;
	pthread_once(&hmac_once_, fetch_hmac);
	if (!hmac) {
		fprintf(stderr, "softverbs: SOFTVERBS_SECRET_FILE: OpenSSL "
				"has no HMAC: refusing every peer\n");
		return;
	}
	err = read_secret(path, secret, &len);
	if (err) {
		fprintf(stderr,
			"softverbs: SOFTVERBS_SECRET_FILE=%s cannot be read "
			"now (%s): refusing every peer\n",
			path, strerror(-err));
		return;
	}
	for (int u = 0; u < SV_AUTH_USES; u++) {
		struct iovec iov = {(void *)labels[u], strlen(labels[u])};

		if (hmac_once(secret, len, &iov, 1, keys[u]))
			goto out;
	}
	on = true;
	failed = false;
out:
	OPENSSL_cleanse(secret, sizeof(secret));
}

bool sv_auth_on(void)
{
	pthread_once(&once, load);
	return on;
}

bool sv_auth_failed(void)
{
	pthread_once(&once, load);
	return failed;
}

const uint8_t *sv_auth_key(enum sv_auth_use use)
{
	pthread_once(&once, load);
	return on && use < SV_AUTH_USES ? keys[use] : NULL;
}

int sv_auth_mac(const uint8_t *key, const struct iovec *iov, int n,
		uint8_t *out)
{
	int err;

	/* with or without a secret: a link cookie's MAC (tcp/) */
	pthread_once(&hmac_once_, fetch_hmac);
	err = hmac ? hmac_once(key, SV_AUTH_KEY_LEN, iov, n, out) : -EIO;
	if (err)
		memset(out, 0, SV_AUTH_MAC_LEN);
	return err;
}

/* Each thread's keyed HMAC state per use (sv_auth_mac_use), freed when
 * the thread ends. */
struct keyed {
	EVP_MAC_CTX *c[SV_AUTH_USES];
};
static pthread_key_t keyed_key;
static pthread_once_t keyed_once = PTHREAD_ONCE_INIT;
static bool keyed_ok;

static void keyed_free(void *p)
{
	struct keyed *k = p;

	for (int u = 0; u < SV_AUTH_USES; u++)
		EVP_MAC_CTX_free(k->c[u]);
	free(k);
}

static void keyed_init(void)
{
	keyed_ok = !pthread_key_create(&keyed_key, keyed_free);
}

/* This thread's context for use, keyed (made at its first MAC), or
 * NULL. */
static EVP_MAC_CTX *keyed_ctx(enum sv_auth_use use)
{
	OSSL_PARAM params[2];
	struct keyed *k;

	pthread_once(&keyed_once, keyed_init);
	if (!keyed_ok)
		return NULL;
	k = pthread_getspecific(keyed_key);
	if (!k) {
		k = calloc(1, sizeof(*k));
		if (!k || pthread_setspecific(keyed_key, k)) {
			free(k);
			return NULL;
		}
	}
	if (!k->c[use]) {
		EVP_MAC_CTX *c = EVP_MAC_CTX_new(hmac);

		hmac_params(params);
		if (c && !EVP_MAC_init(c, keys[use], SV_AUTH_KEY_LEN, params)) {
			EVP_MAC_CTX_free(c);
			c = NULL;
		}
		k->c[use] = c;
	}
	return k->c[use];
}

int sv_auth_mac_use(enum sv_auth_use use, const struct iovec *iov, int n,
		    uint8_t *out)
{
	EVP_MAC_CTX *c;

	if (!sv_auth_key(use)) {
		memset(out, 0, SV_AUTH_MAC_LEN);
		return -EPERM;
	}
	c = keyed_ctx(use);
	if (!c)
		return sv_auth_mac(keys[use], iov, n, out);
	/* a NULL key: HMAC starts again from the key set at first */
	if (!EVP_MAC_init(c, NULL, 0, NULL)) {
		memset(out, 0, SV_AUTH_MAC_LEN);
		return -EIO;
	}
	return mac_run(c, iov, n, out);
}

bool sv_auth_equal(const void *a, const void *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}

void sv_auth_random(void *p, size_t len)
{
	uint8_t *b = p;

	while (len) {
		ssize_t n = getrandom(b, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* never: getrandom fails only for bad arguments */
			abort();
		}
		b += n;
		len -= (size_t)n;
	}
}
