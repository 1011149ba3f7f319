/* SPDX-License-Identifier: MIT */
/*
 * The shared secret (SOFTVERBS_SECRET_FILE) and the few primitives the
 * transports prove it with: HMAC-SHA-256 from OpenSSL's libcrypto (no
 * crypto of our own), getrandom(2), and a constant-time compare.
 * libibverbs and librdmacm each link a copy (as env.c).
 *
 * The file is checked by its env row (env.c: regular,
 * ours, no group or other permission bits, 16 to 4096 bytes) before
 * anything opens; its bytes never serve as a key themselves: each use
 * gets its own key, HMAC(file bytes, "softverbs-v1 " label), so a MAC
 * made for one protocol proves nothing in another.
 */
#ifndef SV_AUTH_H
#define SV_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SV_AUTH_KEY_LEN 32 /* a derived key */
#define SV_AUTH_MAC_LEN 32 /* HMAC-SHA-256, untruncated */
#define SV_SECRET_MIN	16 /* bytes a secret file holds, at least */
#define SV_SECRET_MAX	4096

/* What a derived key is for (each has its own). */
enum sv_auth_use {
	SV_AUTH_TCP_LINK, /* provider/transport/tcp/: a QP's TCP link set-up */
	SV_AUTH_UD,	  /* provider/transport/ud/: datagrams between hosts */
	SV_AUTH_CM,	  /* rdmacm/link.c: CM (and rsocket) streams */
	SV_AUTH_USES
};

/*
 * True if a secret is configured and loaded: every link, connection and
 * datagram between hosts must then prove it.  The file is read at the
 * first call; one that cannot be read then (changed since the env row
 * checked it) leaves sv_auth_failed() true, and nothing may be trusted:
 * the callers refuse every peer.
 */
bool sv_auth_on(void);
bool sv_auth_failed(void);

/* The key for use, or NULL without a secret. */
const uint8_t *sv_auth_key(enum sv_auth_use use);

/*
 * HMAC-SHA-256 under key (SV_AUTH_KEY_LEN bytes) of the n pieces of iov,
 * into out (SV_AUTH_MAC_LEN bytes).  0, or -ENOMEM/-EIO (out is then
 * zeroed and matches nothing a peer sent: sv_auth_equal of a real MAC
 * and zeros fails).
 */
int sv_auth_mac(const uint8_t *key, const struct iovec *iov, int n,
		uint8_t *out);

/*
 * sv_auth_mac under sv_auth_key(use), for a MAC per datagram: each
 * thread keeps HMAC's keyed state for the key and starts from it (a
 * fresh EVP_MAC context per MAC costs 1.6 us, this 0.25 us for 100
 * bytes).  0, or -EPERM without a secret, -ENOMEM/-EIO (out zeroed, as
 * sv_auth_mac).
 */
int sv_auth_mac_use(enum sv_auth_use use, const struct iovec *iov, int n,
		    uint8_t *out);

/* a == b over len bytes, in time that does not depend on where they
 * differ (CRYPTO_memcmp). */
bool sv_auth_equal(const void *a, const void *b, size_t len);

/* len random bytes from getrandom(2) (blocking only before the kernel's
 * pool is first seeded, at boot). */
void sv_auth_random(void *p, size_t len);

#endif
