// SPDX-License-Identifier: MIT
/*
 * UD between hosts with SOFTVERBS_SECRET_FILE (auth.h): a datagram to
 * another host carries a MAC instead of the CRC (wire.h struct
 * sv_ud_mac: a random id of the sending QP and its seq; sv_ud_seal).  The
 * listener (door.c) marks what it passes on as from the network
 * (SV_UD_NET) and checks no MAC (the process may have no secret): the QP
 * does, in its own receive path (sv_ud_auth_check), where all its
 * datagrams pass whichever listener the kernel picked, and keeps each
 * sender's window of seqs (a replay is dropped).  A receiver with a
 * secret drops datagrams from the network without a MAC that checks; one
 * without drops those with a MAC; each says so once and counts them
 * (ud_auth_drops, ud_replay_drops).  Between QPs of one host (Unix
 * sockets, SCM_CREDENTIALS) no MAC travels.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "auth.h"
#include "crc32c.h"
#include "lane.h"
#include "shm.h"
#include "sv.h"
#include "tcp.h"
#include "wire.h"
#include "ud_priv.h"

/* The truncated MAC (wire.h struct sv_ud_mac) of the datagram h, its
 * payload and t's sender and seq, into out.  The header as the sender
 * wrote it: the listener that passes it on writes sgid (the IP source),
 * rsvd and SV_UD_NET, so those are left out, as ESP leaves out the IP
 * header: the source address a receiver sees is the IP header's. */
static void mac_of(const struct sv_ud_hdr *h, const void *payload,
		   const struct sv_ud_mac *t, uint8_t out[sizeof(t->mac)])
{
	struct sv_ud_hdr c = *h;
	uint8_t full[SV_AUTH_MAC_LEN];
	struct iovec iov[3] = {{&c, sizeof(c)},
			       {(void *)payload, h->len},
			       {(void *)t, SV_UD_MAC_COVERS}};

	c.rsvd = 0;
	c.flags &= (uint16_t)~SV_UD_NET;
	memset(c.sgid, 0, sizeof(c.sgid));
	/* zeros on failure: they match no MAC a peer sent */
	sv_auth_mac_use(SV_AUTH_UD, iov, 3, full);
	memcpy(out, full, sizeof(t->mac));
}

/* Appends the MAC trailer to the datagram d of n bytes (room for it
 * follows): the QP's next seq under its sender id.  The new length.
 * Runs under qp->lock (the send engine), so seqs leave in order. */
size_t sv_ud_seal(struct sv_qp *qp, void *d, size_t n)
{
	struct sv_ud_hdr *h = d;
	struct sv_ud_mac t;

	while (!qp->ud.tx_id)
		sv_auth_random(&qp->ud.tx_id, sizeof(qp->ud.tx_id));
	t.sender = qp->ud.tx_id;
	t.seq = ++qp->ud.tx_seq;
	h->flags |= SV_UD_MAC; /* set before the MAC: it is covered */
	h->rsvd = 0;	       /* no CRC: the MAC covers every bit */
	mac_of(h, h + 1, &t, t.mac);
	memcpy((uint8_t *)d + n, &t, sizeof(t));
	return n + sizeof(t);
}

/*
 * With a secret, the senders from other hosts a QP has heard, each with
 * its window of seqs (RFC 4303 3.4.3's, 64 wide): a seq seen, or 64 or
 * more below the highest seen, is a replay.  Only a datagram whose MAC
 * checks makes an entry, so a stranger holds nothing here; the table is
 * made at the first one and never grows: SV_UD_SENDERS entries (4 KB)
 * whatever arrives.  A new sender takes the entry used least recently.
 * What this leaves open, accepted: an evicted sender's recorded
 * datagrams (after SV_UD_SENDERS other senders with the secret) are
 * taken once more if replayed, and so are a destroyed QP's by a new QP
 * that draws the same random QPN and has the same Q_Key.
 */
#define SV_UD_SENDERS 128
#define SV_UD_WINDOW  64

struct sv_ud_replay {
	uint64_t id[SV_UD_SENDERS];   /* sender id, 0: free (scanned) */
	uint64_t top[SV_UD_SENDERS];  /* highest seq taken */
	uint64_t seen[SV_UD_SENDERS]; /* bit i: seq top - i taken */
	uint64_t used[SV_UD_SENDERS]; /* tick of its last datagram */
	uint64_t tick;		      /* datagrams checked */
	uint32_t last;		      /* the entry last used: tried first */
};

/* The entry of sender id in r, a new one (the least recently used
 * evicted) if it has none; *fresh tells which. */
static uint32_t replay_entry(struct sv_ud_replay *r, uint64_t id, bool *fresh)
{
	uint32_t old = 0;

	*fresh = false;
	if (r->id[r->last] == id)
		return r->last;
	for (uint32_t i = 0; i < SV_UD_SENDERS; i++) {
		if (r->id[i] == id)
			return i;
		if (r->used[i] < r->used[old])
			old = i; /* a free entry's used is 0: taken first */
	}
	*fresh = true;
	if (r->id[old])
		sv_dbg("udp: sender %016llx's window evicted\n",
		       (unsigned long long)r->id[old]);
	r->id[old] = id;
	return old;
}

/* True if (id, seq) is new to qp, and then marks it seen.  The MAC has
 * checked.  Under qp->lock. */
static bool replay_check(struct sv_qp *qp, uint64_t id, uint64_t seq)
{
	struct sv_ud_replay *r = qp->ud.replay;
	uint32_t i;
	bool fresh;

	if (!seq || !id)
		return false; /* never sent */
	if (!r) {
		r = qp->ud.replay = calloc(1, sizeof(*r));
		if (!r)
			return false; /* no memory: never taken twice */
	}
	i = replay_entry(r, id, &fresh);
	r->last = i;
	r->used[i] = ++r->tick;
	if (fresh) {
		r->top[i] = seq;
		r->seen[i] = 1;
	} else if (seq > r->top[i]) {
		uint64_t d = seq - r->top[i];

		r->seen[i] = d >= SV_UD_WINDOW ? 1 : (r->seen[i] << d) | 1;
		r->top[i] = seq;
	} else {
		uint64_t d = r->top[i] - seq;

		if (d >= SV_UD_WINDOW || (r->seen[i] >> d) & 1)
			return false;
		r->seen[i] |= 1ull << d;
	}
	return true;
}

/* A datagram from another host dropped for want of proof of the
 * secret: counted, and said once per process (the peer cannot hear
 * it: UD has no answer). */
static void auth_drop(struct sv_qp *qp, const struct sv_ud_hdr *h,
		      const char *why)
{
	static atomic_bool said;
	char from[INET6_ADDRSTRLEN] = "another host";

	sv_stat_add(qp, ud_auth_drops, 1);
	sv_ud_drop(qp);
	if (atomic_exchange(&said, true))
		return;
	if (h->flags & SV_UD_GRH) { /* the listener wrote the IP source */
		if (!memcmp(h->sgid, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12))
			inet_ntop(AF_INET, h->sgid + 12, from, sizeof(from));
		else
			inet_ntop(AF_INET6, h->sgid, from, sizeof(from));
	}
	fprintf(stderr,
		"softverbs: UD datagram from %s to QP %06x dropped: the peer "
		"does not prove the shared secret (%s); such datagrams are "
		"counted in ud_auth_drops (softverbs-stat)\n",
		from, qp->qpx.qp_base.qp_num, why);
}

/*
 * A datagram the socket gave (*n bytes) that is marked as from the
 * network or carries a MAC: true if it may go on (its MAC checked and
 * taken off: *n and the flag no longer count it), else dropped and
 * counted.  With a secret every datagram from another host must carry
 * a MAC that checks, under a sender and seq not seen before; without
 * one, none may carry a MAC (it proves a secret we cannot check).
 */
bool sv_ud_auth_check(struct sv_qp *qp, struct sv_ud_hdr *h, size_t *n)
{
	bool mac = h->flags & SV_UD_MAC;
	struct sv_ud_mac t;
	uint8_t want[sizeof(t.mac)];

	if (!(h->flags & SV_UD_NET) || !sv_ud_hdr_ok(h, *n)) {
		sv_ud_drop(qp); /* a MAC only comes from the network */
		return false;
	}
	if (!sv_auth_on()) {
		if (!mac && !sv_auth_failed())
			return true; /* no secret: as ever */
		auth_drop(qp, h,
			  mac ? "it sent a MAC and this process has no "
				"SOFTVERBS_SECRET_FILE"
			      : "SOFTVERBS_SECRET_FILE cannot be read here");
		return false;
	}
	if (!mac) {
		auth_drop(qp, h,
			  "it sent no MAC: no SOFTVERBS_SECRET_FILE there?");
		return false;
	}
	memcpy(&t, (uint8_t *)h + *n - sizeof(t), sizeof(t));
	mac_of(h, h + 1, &t, want);
	if (!sv_auth_equal(want, t.mac, sizeof(want))) {
		auth_drop(qp, h,
			  "its MAC does not check: another secret, or the "
			  "datagram was changed on the way");
		return false;
	}
	if (!replay_check(qp, t.sender, t.seq)) {
		sv_stat_add(qp, ud_replay_drops, 1);
		sv_ud_drop(qp);
		return false;
	}
	h->flags &= (uint16_t)~SV_UD_MAC;
	*n -= sizeof(t);
	return true;
}
