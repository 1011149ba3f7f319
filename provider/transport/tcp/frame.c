// SPDX-License-Identifier: MIT
/*
 * The TCP transport's records on the wire (tcp.h has the formats): the
 * CRC-32C every frame, hello, answer and proof carries, and the MACs
 * that prove a link's cookie or the secret (tcp.h, "Trust").  Pure
 * functions of their bytes: conn.c and door.c seal and check with them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "auth.h"
#include "crc32c.h"
#include "objects.h"
#include "peer.h"
#include "tcp_priv.h"

/* The CRC of a frame: its header with crc 0, then its body. */
uint32_t sv_tcp_frame_crc(const struct sv_tcp_frame *f, const void *body,
			  uint32_t body_len)
{
	struct sv_tcp_frame h = *f;

	h.crc = 0;
	return sv_crc32c(sv_crc32c(0, &h, sizeof(h)), body, body_len);
}

void sv_tcp_hello_seal(struct sv_tcp_hello *h)
{
	h->crc = 0;
	h->crc = sv_crc32c(0, h, sizeof(*h));
}

bool sv_tcp_hello_ok(const struct sv_tcp_hello *h)
{
	struct sv_tcp_hello c = *h;

	c.crc = 0;
	return h->magic == SV_TCP_MAGIC && h->version == SV_TCP_VERSION &&
	       h->crc == sv_crc32c(0, &c, sizeof(c));
}

void sv_tcp_ack_seal(struct sv_tcp_hello_ack *a)
{
	a->crc = 0;
	a->crc = sv_crc32c(0, a, sizeof(*a));
}

bool sv_tcp_ack_ok(const struct sv_tcp_hello_ack *a)
{
	struct sv_tcp_hello_ack c = *a;

	c.crc = 0;
	return a->magic == SV_TCP_MAGIC && a->version == SV_TCP_VERSION &&
	       a->crc == sv_crc32c(0, &c, sizeof(c));
}

/* The address of a socket's peer, or of dst, for a message. */

/* A peer that does not prove the shared secret (or proves one where we
 * have none), said once per process, on either side. */
void sv_tcp_say_secret(uint32_t qpn, const char *peer, const char *what)
{
	static atomic_bool said;

	if (!atomic_exchange(&said, true))
		fprintf(stderr,
			"softverbs: qp %06x: the peer at %s %s "
			"(SOFTVERBS_SECRET_FILE): refused\n",
			qpn, peer, what);
}
static void say_secret_fd(uint32_t qpn, int fd, const char *what)
{
	char buf[INET6_ADDRSTRLEN];

	sv_tcp_say_secret(qpn, sv_peer_name(fd, buf, sizeof(buf)), what);
}

/* The key a link's proofs are made with: from the secret's link key if
 * there is a secret, mixed with the link's cookie if it proves one;
 * without a secret, from the cookie alone.  false if there is none (or
 * the MAC failed: nothing can be proven). */
bool sv_tcp_link_key(const uint8_t *cookie, uint8_t *key)
{
	static const char label[] = "softverbs-v1 tcp link cookie";
	const uint8_t *base = sv_auth_key(SV_AUTH_TCP_LINK);
	struct iovec v;

	if (base && !cookie) {
		memcpy(key, base, SV_AUTH_KEY_LEN);
		return true;
	}
	if (!cookie)
		return false;
	if (base) {
		v = (struct iovec){(void *)cookie, 32};
		return !sv_auth_mac(base, &v, 1, key);
	}
	v = (struct iovec){(void *)label, sizeof(label)};
	return !sv_auth_mac(cookie, &v, 1, key);
}

/* MAC_K(who, n1, n2, caller's QPN, callee's QPN, extra): a side's proof
 * of the key over both nonces, bound to the link and to which side made
 * it (a proof is never the other side's).  false if it failed. */
bool sv_tcp_proof_mac(const uint8_t *key, const char *who, const uint8_t *n1,
		      const uint8_t *n2, uint32_t caller, uint32_t callee,
		      const void *extra, size_t extra_len, uint8_t *out)
{
	uint32_t q[2] = {caller, callee};
	struct iovec v[5] = {{(void *)who, strlen(who) + 1},
			     {(void *)n1, 16},
			     {(void *)n2, 16},
			     {q, sizeof(q)},
			     {(void *)extra, extra_len}};

	return !sv_auth_mac(key, v, extra_len ? 5 : 4, out);
}

/* With a secret, a hello's mac: over the hello before it, under the
 * secret's link key (the door's check: a hello from whoever does not
 * have the secret is not even passed on). */
bool sv_tcp_hello_mac(const struct sv_tcp_hello *h, uint8_t *out)
{
	const uint8_t *base = sv_auth_key(SV_AUTH_TCP_LINK);
	struct iovec v[2] = {{"hello", 6},
			     {(void *)h, offsetof(struct sv_tcp_hello, mac)}};

	return base && !sv_auth_mac(base, v, 2, out);
}

/* The hello proves our secret, or neither side has one; else it is said
 * (once) and refused.  sv_auth_failed: nothing is trusted. */
bool sv_tcp_hello_secret_ok(const struct sv_tcp_hello *h, int fd)
{
	bool has = h->flags & SV_TCP_HELLO_SECRET;
	uint8_t mac[SV_AUTH_MAC_LEN];

	if (sv_auth_failed())
		return false;
	if (!sv_auth_on() && !has)
		return true;
	if (!sv_auth_on()) {
		say_secret_fd(h->dst_qpn, fd,
			      "proves a shared secret, and this process has "
			      "no shared secret");
		return false;
	}
	if (has && sv_tcp_hello_mac(h, mac) &&
	    sv_auth_equal(mac, h->mac, sizeof(mac)))
		return true;
	say_secret_fd(h->dst_qpn, fd, "does not prove the shared secret");
	return false;
}

void sv_tcp_proof_seal(struct sv_tcp_proof *p)
{
	p->crc = 0;
	p->crc = sv_crc32c(0, p, sizeof(*p));
}

bool sv_tcp_proof_ok(const struct sv_tcp_proof *p)
{
	struct sv_tcp_proof c = *p;

	c.crc = 0;
	return p->magic == SV_TCP_MAGIC &&
	       p->crc == sv_crc32c(0, &c, sizeof(c));
}

/* A receive ring size the peer says it has: a power of two, 4 KiB (its
 * response ring: SV_RSP_RING_MIN) to 1 GiB. */
bool sv_tcp_size_ok(uint64_t v, uint64_t min)
{
	return v >= min && v <= (1ull << 30) && !(v & (v - 1));
}
