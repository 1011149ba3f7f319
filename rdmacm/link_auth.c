// SPDX-License-Identifier: MIT
/*
 * The shared secret on the CM's TCP streams (issue 24, item 5).  With
 * SOFTVERBS_SECRET_FILE, no CM record is read from, or sent to, a TCP
 * peer (another host, or this one with SOFTVERBS_TRANSPORT=tcp) until
 * each side has proved that it knows the secret.  The Unix link needs
 * none: SO_PEERCRED proves the peer is our own user on this host.
 *
 * Both sides send a HELLO with 32 fresh random bytes (the active side
 * once its connect is done, the passive side as it accepts); each, on
 * the other's HELLO, sends a PROOF: HMAC-SHA-256 under the CM's own key
 * (sv_auth_key(SV_AUTH_CM), provider/lib/auth.c) of a label, the sender's
 * role and both nonces, active's first; each checks the other's PROOF
 * with the other's role (sv_auth_equal).  Fresh nonces on both sides and
 * the roles in the MAC: nothing recorded can be replayed or reflected.
 * The records are CM-record sized (300 bytes) with their own magic, so a
 * peer without a secret reads one as a malformed record and drops the
 * link at once (never a hang), and says so if it knows the magic.  The
 * active side sends its REQ only after the passive side's PROOF checked
 * out; a refusal ends its connect UNREACHABLE with status -EACCES.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "auth.h" /* provider/lib/auth.h: the secret, HMAC, getrandom */
#include "peer.h" /* provider/lib/peer.h: the peer's address in words */
#include "cm.h"

#define CM_AUTH_MAGIC	0x53564341u /* "SVCA" */
#define CM_AUTH_VERSION 1
#define CM_AUTH_LABEL	"softverbs-cm-proof"

enum cm_auth_type {
	CM_AUTH_T_HELLO = 1,
	CM_AUTH_T_PROOF,
};

/* One record of the handshake, framed as a CM record. */
struct cm_auth_rec {
	uint32_t magic;	  /* CM_AUTH_MAGIC */
	uint16_t version; /* CM_AUTH_VERSION */
	uint8_t type;	  /* enum cm_auth_type */
	uint8_t role;	  /* the sender's: 'a' active, 'p' passive */
	uint8_t nonce[CM_AUTH_NONCE]; /* HELLO: the sender's, fresh */
	uint8_t mac[SV_AUTH_MAC_LEN]; /* PROOF */
	uint8_t pad[sizeof(struct cm_msg) - 8 - CM_AUTH_NONCE -
		    SV_AUTH_MAC_LEN];
};
static_assert(sizeof(struct cm_auth_rec) == sizeof(struct cm_msg),
	      "a CM record's size");

bool cm_auth_needed(void)
{
	return sv_auth_on() || sv_auth_failed();
}

/* Lock held: one line per process on stderr (the rest in the debug log). */
static void say(struct cm_id *c, const char *why)
{
	static bool said;
	char host[INET6_ADDRSTRLEN];
	const char *who = sv_peer_name(c->sock, host, sizeof(host));

	cm_log("id %p: CM peer %s: %s\n", (void *)c, who, why);
	if (said)
		return;
	said = true;
	fprintf(stderr, "softverbs rdmacm: CM peer %s %s: refused\n", who, why);
}

static bool passive(const struct cm_id *c)
{
	return c->state == CM_REQ_WAIT;
}

/* The PROOF that role `role` sends: the MAC of the label, the role and
 * both nonces (the active side's first).  0 or -errno. */
static int proof(const struct cm_id *c, uint8_t role, uint8_t *mac)
{
	const uint8_t *key = sv_auth_key(SV_AUTH_CM);
	struct iovec iov[] = {
		{(void *)CM_AUTH_LABEL, sizeof(CM_AUTH_LABEL) - 1},
		{&role, 1},
		{(void *)c->nonce[0], CM_AUTH_NONCE},
		{(void *)c->nonce[1], CM_AUTH_NONCE},
	};

	if (!key)
		return -EACCES;
	return sv_auth_mac(key, iov, 4, mac);
}

static int send_rec(struct cm_id *c, struct cm_auth_rec *r, uint8_t type)
{
	r->magic = CM_AUTH_MAGIC;
	r->version = CM_AUTH_VERSION;
	r->type = type;
	r->role = passive(c) ? 'p' : 'a';
	return cm_link_send(c, (const struct cm_msg *)r);
}

int cm_auth_start(struct cm_id *c)
{
	struct cm_auth_rec r = {0};
	uint8_t *mine = c->nonce[passive(c) ? 1 : 0];

	if (!sv_auth_key(SV_AUTH_CM)) { /* the secret cannot be read */
		say(c, "cannot be checked (SOFTVERBS_SECRET_FILE unreadable)");
		return -EACCES;
	}
	sv_auth_random(mine, CM_AUTH_NONCE);
	memcpy(r.nonce, mine, CM_AUTH_NONCE);
	c->auth = CM_AUTH_HELLO;
	return send_rec(c, &r, CM_AUTH_T_HELLO);
}

int cm_auth_recv(struct cm_id *c, const struct cm_msg *m)
{
	struct cm_auth_rec r, out = {0};
	uint8_t want[SV_AUTH_MAC_LEN];
	uint8_t peer_role = passive(c) ? 'a' : 'p';
	int err;

	memcpy(&r, m, sizeof(r));
	if (r.magic == CM_MAGIC) {
		say(c, "sent a CM record without the shared secret's "
		       "handshake (it has no SOFTVERBS_SECRET_FILE?)");
		return -EACCES;
	}
	if (r.magic != CM_AUTH_MAGIC || r.version != CM_AUTH_VERSION ||
	    r.role != peer_role) {
		say(c, "broke the shared secret's handshake");
		return -EACCES;
	}
	if (c->auth == CM_AUTH_HELLO) {
		if (r.type != CM_AUTH_T_HELLO) {
			say(c, "broke the shared secret's handshake");
			return -EACCES;
		}
		memcpy(c->nonce[passive(c) ? 0 : 1], r.nonce, CM_AUTH_NONCE);
		err = proof(c, passive(c) ? 'p' : 'a', out.mac);
		if (!err)
			err = send_rec(c, &out, CM_AUTH_T_PROOF);
		if (err)
			return err;
		c->auth = CM_AUTH_PROOF;
		return 0;
	}
	if (r.type != CM_AUTH_T_PROOF || proof(c, peer_role, want) ||
	    !sv_auth_equal(want, r.mac, sizeof(want))) {
		say(c, "did not prove the shared secret (a wrong "
		       "SOFTVERBS_SECRET_FILE)");
		return -EACCES;
	}
	c->auth = CM_AUTH_OFF;
	return 0;
}

bool cm_auth_asked(struct cm_id *c, const struct cm_msg *m)
{
	if (m->magic != CM_AUTH_MAGIC)
		return false;
	say(c, "requires a shared secret, and this process has no "
	       "SOFTVERBS_SECRET_FILE");
	return true;
}

void cm_auth_closed(struct cm_id *c)
{
	say(c, "closed the connection during the shared secret's "
	       "handshake (it has no SOFTVERBS_SECRET_FILE, or another)");
}
