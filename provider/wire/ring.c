// SPDX-License-Identifier: MIT
/*
 * The shared-memory ring (ring.h): creation in a sealed memfd, attach with
 * validation, and the single-producer single-consumer record protocol.
 * Everything read from the shared header is checked: the peer may be
 * buggy or hostile, and must not make us read or write outside the ring.
 */
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* util.h sv_tsan_sent: TSan's stand-in for a socket or a ring.  Here,
 * with the ring, so what links the ring alone (tests/unit) links it too. */
char sv_tsan_wire;

#define SV_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static void set_ring(struct sv_ring *r, void *p, size_t len, uint64_t size,
		     uint32_t ndesc)
{
	memset(r, 0, sizeof(*r));
	r->hdr = p;
	r->data = (uint8_t *)p + SV_RING_DATA_OFF;
	r->size = size;
	r->map_len = len;
	r->ndesc = ndesc;
	r->desc = ndesc ? (struct sv_rdesc *)(r->data + size) : NULL;
}

static int map_ring(struct sv_ring *r, int fd, uint64_t size, uint32_t ndesc)
{
	size_t len = SV_RING_DATA_OFF + size + ndesc * sizeof(struct sv_rdesc);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	set_ring(r, p, len, size, ndesc);
	return 0;
}

int sv_ring_create(struct sv_ring *r, uint64_t size, uint32_t ndesc,
		   uint32_t rx_qpn, int *fd)
{
	int mfd, err;

	mfd = memfd_create("softverbs-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -errno;
	if (ftruncate(mfd, SV_RING_DATA_OFF + size +
				   ndesc * sizeof(struct sv_rdesc)) ||
	    fcntl(mfd, F_ADD_SEALS, SV_SEALS)) {
		err = -errno;
		goto err_close;
	}
	err = map_ring(r, mfd, size, ndesc);
	if (err)
		goto err_close;
	r->hdr->magic = SV_RING_MAGIC;
	r->hdr->version = SV_RING_VERSION;
	r->hdr->size = size;
	r->hdr->data_off = SV_RING_DATA_OFF;
	r->hdr->rx_qpn = rx_qpn;
	r->hdr->ndesc = ndesc;
	r->hdr->desc_off = SV_RING_DATA_OFF + size;
	atomic_store(&r->hdr->ack, SV_ACK_NONE);
	/* asleep until our progress thread sees the app polling: a ring
	 * made while it sleeps must still wake it */
	atomic_store(&r->hdr->rx_sleep, 1);
	*fd = mfd;
	return 0;

err_close:
	close(mfd);
	return err;
}

/* The largest ring a peer may hand us: 1 GiB of data and 65536 descs. */
#define SV_RING_MAX_LEN \
	(SV_RING_DATA_OFF + (1ull << 30) + 65536 * sizeof(struct sv_rdesc))

/* The fields the receiver wrote once before sharing the fd (not its
 * atomics, which it may be writing now), read once each: the checks
 * and the ring use the copy, never the peer's memory again. */
static void hdr_fields(struct sv_ring_hdr *h,
		       const volatile struct sv_ring_hdr *m)
{
	h->magic = m->magic;
	h->version = m->version;
	h->size = m->size;
	h->data_off = m->data_off;
	h->rx_qpn = m->rx_qpn;
	h->ndesc = m->ndesc;
	h->desc_off = m->desc_off;
}

int sv_ring_attach(struct sv_ring *r, int fd, uint32_t rx_qpn)
{
	struct sv_ring_hdr hdr;
	struct stat st;
	size_t len;
	void *p;
	int seals;

	/* The seals make sure the peer cannot shrink it under us (SIGBUS). */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & SV_SEALS) != SV_SEALS)
		return -EPROTO;
	if (fstat(fd, &st) || st.st_size < (off_t)(SV_RING_DATA_OFF + 4096) ||
	    (uint64_t)st.st_size > SV_RING_MAX_LEN)
		return -EPROTO;
	/* The sealed size is the whole ring: map it, then check the header
	 * through the mapping (a copy: the peer may write it meanwhile),
	 * rather than a pread of it first (a syscall per ring). */
	len = (size_t)st.st_size;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	hdr_fields(&hdr, p);
	if (hdr.magic != SV_RING_MAGIC || hdr.version != SV_RING_VERSION ||
	    hdr.data_off != SV_RING_DATA_OFF || hdr.rx_qpn != rx_qpn ||
	    hdr.size < 4096 || (hdr.size & (hdr.size - 1)) ||
	    hdr.size > (1ull << 30) || (hdr.ndesc & (hdr.ndesc - 1)) ||
	    hdr.ndesc > 65536 || hdr.desc_off != SV_RING_DATA_OFF + hdr.size ||
	    (uint64_t)st.st_size !=
		    SV_RING_DATA_OFF + hdr.size +
			    hdr.ndesc * sizeof(struct sv_rdesc)) {
		munmap(p, len);
		return -EPROTO;
	}
	set_ring(r, p, len, hdr.size, hdr.ndesc);
	atomic_store(&r->hdr->tx_sleep, 1); /* as rx_sleep above */
	return 0;
}

void sv_ring_unmap(struct sv_ring *r)
{
	if (r->hdr)
		munmap(r->hdr, r->map_len);
	r->hdr = NULL;
}

/* Sender: the receiver's consumer index, checked; false if corrupt. */
static bool load_tail(struct sv_ring *r, int *err)
{
	/* acquire: the receiver is done with what lies before tail */
	uint64_t t = atomic_load_explicit(&r->hdr->tail, memory_order_acquire);

	if (t > r->head || r->head - t > r->size) {
		*err = -EPROTO;
		return false;
	}
	r->tail_cache = t;
	return true;
}

/*
 * Sender: whether the record about to be reserved at offset off should
 * start the ring over instead (a pad to the end first): the receiver has
 * consumed everything (the ring is empty) and off is an eighth of the
 * ring, and at least SV_RING_REWIND, into the lap.  A ping-pong then
 * keeps to the ring's first pages instead of walking all of it: its
 * first lap touched a new page every 4 KiB message on both sides, at a
 * page fault each, and 14 us each on a shadow-paging VM (ibv_rc_pingpong
 * -s 4096 across hosts: 130 us a round trip for its first 250, 30
 * after).  A QP that talks little also keeps few of its ring's pages
 * resident.  The cost: until the receiver passes the pad, the room is
 * off, not the whole ring (the pad's first line must stay for it to
 * read), hence an eighth: room for any message up to that while the
 * receiver catches up.  A record longer than off is never started over
 * (rec): after the pad it could not fit until the receiver passed a pad
 * that is only published with it, and a responder waiting for room waits
 * for a doorbell that never comes (a response ring is 256 KiB, its
 * trains a quarter of that: perftest's XRC read of 64 KiB after an idle
 * spell hung here).  A producer that cannot wait for room (RoCE's
 * receive path, which drops what does not fit: UC 64 KiB messages were
 * lost with a 16 KiB start-over) sets no_rewind.  The tail is loaded at
 * most once per that many bytes sent (rewind_at): a stream that keeps
 * the ring busy pays one load of its line per that many bytes.  -EPROTO
 * in *err if the peer corrupted the consumer index.
 */
static bool rewind_now(struct sv_ring *r, uint64_t off, uint64_t rec, int *err)
{
	uint64_t from =
		r->size / 8 > SV_RING_REWIND ? r->size / 8 : SV_RING_REWIND;

	if (off < from || rec > off || r->head < r->rewind_at || r->no_rewind ||
	    r->size < 4 * SV_RING_REWIND)
		return false;
	r->rewind_at = r->head + from;
	if (r->tail_cache != r->head && !load_tail(r, err))
		return false;
	return r->tail_cache == r->head;
}

void *sv_ring_reserve(struct sv_ring *r, uint32_t len, int *err)
{
	uint64_t rec = (len + SV_REC_ALIGN - 1) & ~(uint64_t)(SV_REC_ALIGN - 1);
	uint64_t off = r->head & (r->size - 1);
	uint64_t pad = 0, end;
	int bad = 0;

	if (off + rec > r->size || rewind_now(r, off, rec, &bad))
		pad = r->size - off; /* records never wrap: pad to the end */
	if (bad) {
		*err = bad;
		return NULL;
	}
	end = r->head + pad + rec;
	if (end - r->tail_cache > r->size) {
		if (!load_tail(r, err))
			return NULL;
		if (end - r->tail_cache > r->size)
			return NULL;
	}
	/* the next record starts at end: its seq word poisoned, unless the
	 * last publish did it already or the ring is then exactly full
	 * (that line is the oldest record's header: no match either) */
	if (end != r->poisoned) {
		if (end - r->tail_cache == r->size && !load_tail(r, err))
			return NULL;
		if (end - r->tail_cache < r->size)
			sv_ring_poison(r, end);
	}
	if (pad) {
		struct sv_pkt *p = (struct sv_pkt *)(r->data + off);

		sv_ring_poison(r, r->head + pad); /* the receiver goes there */
		p->opcode = SV_OP_PAD;
		p->rec_len = (uint32_t)pad;
		sv_ring_release(p, r->head);
		r->head += pad;
		off = 0;
	}
	r->last_pos = r->head;
	r->last_rec = (uint32_t)rec;
	r->head = end;
	return r->data + off;
}

int sv_ring_peek(struct sv_ring *r, struct sv_pkt *pkt, const uint8_t **payload)
{
	for (;;) {
		uint64_t off = r->tail & (r->size - 1);
		const uint8_t *rec_p = r->data + off;
		const struct sv_pkt *p = (const struct sv_pkt *)rec_p;

		/* acquire: the record's bytes are visible once its seq is */
		if (atomic_load_explicit((_Atomic uint32_t *)&p->seq,
					 memory_order_acquire) !=
		    sv_rec_seq(r->tail))
			return 0;
		/* the peer's mapping of this line is at another address */
		sv_tsan_received();
		memcpy(pkt, rec_p, sizeof(*pkt));
		if (pkt->rec_len < SV_REC_ALIGN ||
		    pkt->rec_len % SV_REC_ALIGN || off + pkt->rec_len > r->size)
			return -EPROTO;
		if (pkt->opcode == SV_OP_PAD) {
			if (off + pkt->rec_len != r->size)
				return -EPROTO; /* pads only reach the end */
			r->tail += pkt->rec_len;
			continue;
		}
		if (pkt->rec_len > SV_MAX_REC ||
		    pkt->len > pkt->rec_len - sizeof(*pkt))
			return -EPROTO;
		r->cur_rec = pkt->rec_len;
		*payload = rec_p + sizeof(*pkt);
		return 1;
	}
}

void sv_ring_consume(struct sv_ring *r)
{
	r->tail += r->cur_rec;
	r->cur_rec = 0;
	/* release: we are done reading the record before the sender reuses */
	atomic_store_explicit(&r->hdr->tail, r->tail, memory_order_release);
}
