// SPDX-License-Identifier: MIT
/*
 * The RoCEv2 parser (roce.c) as a peer on the network can feed it: any
 * bytes as a UDP payload, in a buffer of exactly their size, with or
 * without the addressing that checks the ICRC, and (to get past that
 * check) with the ICRC made right for them.  Checked besides the
 * sanitizers: a packet taken accounts for every byte (headers, payload,
 * pad, ICRC), built again from its fields it has the same length and
 * parses to the same fields; and the segmenter's packets, for any
 * message length, MTU and index, lie inside the message and pass the
 * parser's position check.  Then the UD listener's take of the same
 * bytes as a RoCEv2 datagram from 10.0.0.1 (transport/ud/roce_ud.c), in a
 * buffer of exactly the listener's size: one it passes on is a header
 * the QP's socket accepts (sv_ud_hdr_ok), of a UD opcode, for a QPN it
 * may pass to, with the parser's payload intact after it.
 *
 * Input: cfg (bit 0 IPv6, bit 1 check the ICRC, bit 2 seal it first,
 * bits 3-5 the QP type asked about, bits 6-7 the MTU), IP ID, UDP source
 * port, a message length and a packet index for the segmenter, then the
 * packet.
 */
#include <stdlib.h>

#include "fuzz.h"
#include "roce.h"
#include "ud/ud_priv.h"

static const enum ibv_qp_type qpts[8] = {
	IBV_QPT_RC,	  IBV_QPT_UC,	      IBV_QPT_UD,     IBV_QPT_XRC_SEND,
	IBV_QPT_XRC_RECV, IBV_QPT_RAW_PACKET, IBV_QPT_DRIVER, IBV_QPT_RC};

static void same_fields(const struct sv_roce_pkt *a,
			const struct sv_roce_pkt *b)
{
	FZ_CHECK(a->opcode == b->opcode && a->mask == b->mask);
	FZ_CHECK(a->se == b->se && a->mig == b->mig &&
		 a->ack_req == b->ack_req && a->pad == b->pad &&
		 a->fb == b->fb && a->pkey == b->pkey);
	FZ_CHECK(a->dqpn == b->dqpn && a->psn == b->psn);
	FZ_CHECK(a->srqn == b->srqn && a->qkey == b->qkey &&
		 a->src_qpn == b->src_qpn);
	FZ_CHECK(a->reth.va == b->reth.va && a->reth.rkey == b->reth.rkey &&
		 a->reth.dma_len == b->reth.dma_len);
	FZ_CHECK(a->atomic.va == b->atomic.va &&
		 a->atomic.rkey == b->atomic.rkey &&
		 a->atomic.swap_add == b->atomic.swap_add &&
		 a->atomic.compare == b->atomic.compare);
	FZ_CHECK(a->syndrome == b->syndrome && a->msn == b->msn &&
		 a->orig == b->orig && a->imm_be == b->imm_be &&
		 a->inv_rkey == b->inv_rkey);
	FZ_CHECK(a->len == b->len && !memcmp(a->payload, b->payload, a->len));
}

static void check_taken(const uint8_t *b, size_t n, const struct sv_roce_ip *ip,
			const struct sv_roce_pkt *p, uint32_t mtu,
			enum ibv_qp_type t)
{
	static uint8_t again[0x10000];
	struct sv_roce_pkt q;
	int m;

	FZ_CHECK(p->mask && p->mask == sv_roce_op_mask(p->opcode));
	FZ_CHECK(p->payload >= b && p->pad < 4 && p->dqpn < (1u << 24) &&
		 p->psn < (1u << 24));
	FZ_CHECK(sv_roce_hdr_len(p->mask) + p->len + p->pad + 4 == n);
	FZ_CHECK(p->payload + p->len + p->pad + 4 == b + n);
	FZ_CHECK(p->len <= SV_ROCE_MAX_PMTU);
	/* the fields make the packet again: the pad count from the
	 * length (a sender's odd pad count stays odd only if we keep it) */
	if (((4 - (p->len & 3)) & 3) == p->pad) {
		m = sv_roce_build(again, sizeof(again), p, ip);
		FZ_CHECK(m == (int)n);
		FZ_CHECK(sv_roce_parse(again, (size_t)m, ip, &q) == SV_ROCE_OK);
		same_fields(p, &q);
	}
	(void)sv_roce_check_qpt(p, t);
	(void)sv_roce_check_seg(p, mtu);
}

static void check_segments(uint8_t tp, uint32_t len, uint32_t mtu, uint32_t i,
			   uint8_t kind)
{
	struct sv_roce_seg s;
	struct sv_roce_pkt p;

	if (sv_roce_segment(tp, (enum sv_roce_msg)kind, len, mtu, i, &s))
		return;
	FZ_CHECK(i < sv_roce_npkts(len, mtu));
	FZ_CHECK(s.len <= mtu && (uint64_t)s.off + s.len <= len);
	FZ_CHECK(s.len || !len);
	p.mask = sv_roce_op_mask(s.opcode);
	p.len = s.len;
	FZ_CHECK(p.mask & SV_RH_PAYLOAD);
	FZ_CHECK(sv_roce_check_seg(&p, mtu) == SV_ROCE_OK);
}

/* The listener's buffer (door.c: header, MTU, MAC trailer) */
#define UD_CAP (sizeof(struct sv_ud_hdr) + SV_UD_MTU + sizeof(struct sv_ud_mac))

/* seal: with the ICRC right for that addressing (IP ID 0), so the
 * listener verifies it with ID 0 */
static void check_ud_take(const uint8_t *b, size_t n, bool seal)
{
	struct sockaddr_in src = {.sin_family = AF_INET,
				  .sin_port = htons(0xc123),
				  .sin_addr.s_addr = htonl(0x0a000001)};
	struct sv_roce_idmemo memo = {0};
	struct sv_roce_ip ip = {.sport = 0xc123, .dport = SV_ROCE_PORT};
	struct sv_qp_stats st = {0};
	struct sv_roce_pkt p;
	struct sv_ud_hdr h;
	uint8_t *d, *orig;
	size_t m = n;

	if (n > UD_CAP)
		return; /* the listener never reads past its buffer */
	d = malloc(UD_CAP);
	orig = malloc(n ? n : 1);
	memcpy(orig, b, n);
	ip.src[10] = ip.src[11] = ip.dst[10] = ip.dst[11] = 0xff;
	ip.src[12] = ip.dst[12] = 10;
	ip.src[15] = 1;
	ip.dst[15] = 2;
	if (seal && n >= 16) {
		uint32_t c;

		c = sv_roce_icrc_start(&ip, orig, 12, (uint32_t)n);
		c = sv_roce_icrc_add(c, orig + 12, n - 16);
		sv_roce_icrc_put(orig + n - 4, sv_roce_icrc_end(c));
	}
	memcpy(d, orig, n);
	if (sv_ud_roce_take(&memo, &st, d, &m, UD_CAP, &src, htonl(0x0a000002),
			    0, 64)) {
		memcpy(&h, d, sizeof(h));
		FZ_CHECK(sv_ud_hdr_ok(&h, m));
		FZ_CHECK((h.flags & SV_UD_ROCE) && (h.flags & SV_UD_NET));
		FZ_CHECK(h.dst_qpn >= 2 && h.dst_qpn < SV_MCAST_QPN);
		FZ_CHECK(sv_roce_parse(orig, n, NULL, &p) == SV_ROCE_OK);
		FZ_CHECK(SV_IB_TRANSPORT(p.opcode) == SV_IB_UD);
		FZ_CHECK(h.len == p.len &&
			 !memcmp(d + sizeof(h), p.payload, p.len));
		/* taken: its ICRC verified, with ID 0 if sealed so, else
		 * with the ID solved from it (wire/roce.h) */
		ip.id_span = SV_ROCE_ID_ANY;
		FZ_CHECK(sv_roce_parse(orig, n, &ip, &p) == SV_ROCE_OK);
		FZ_CHECK(st.roce_icrc_id == (p.ip_id != 0));
		FZ_CHECK(!seal || p.ip_id == 0);
		if (getenv("FZ_TRACE"))
			fprintf(stderr, "  taken by the UD listener%s\n",
				seal ? " (ICRC verified)" : "");
	}
	free(orig);
	free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = {data, size};
	uint8_t cfg = fz_u8(&f);
	struct sv_roce_ip ip = {0};
	uint32_t mtu = 256u << ((cfg >> 6) & 3);
	uint32_t len, idx;
	enum sv_roce_verdict v;
	struct sv_roce_pkt p;
	uint8_t *b;
	size_t n;

	ip.ip_id = fz_u16(&f);
	ip.sport = fz_u16(&f);
	len = fz_u32(&f);
	idx = fz_u32(&f);
	if (cfg & 1) {
		ip.src[0] = ip.dst[0] = 0xfd;
		ip.src[15] = 1;
		ip.dst[15] = 2;
	} else {
		ip.src[10] = ip.src[11] = ip.dst[10] = ip.dst[11] = 0xff;
		ip.src[12] = ip.dst[12] = 10;
		ip.src[15] = 1;
		ip.dst[15] = 2;
	}
	check_segments((uint8_t)(idx >> 24), len, mtu, idx & 0xffff,
		       (uint8_t)((idx >> 16) % 7));
	/* exactly the packet's bytes: a read past them is ASan's */
	n = f.n;
	b = malloc(n ? n : 1);
	memcpy(b, f.p, n);
	if ((cfg & 4) && n >= 16 && n <= 0xffff - 8) {
		uint32_t c = sv_roce_icrc_start(&ip, b, 12, (uint32_t)n);

		c = sv_roce_icrc_add(c, b + 12, n - 16);
		sv_roce_icrc_put(b + n - 4, sv_roce_icrc_end(c));
	}
	v = sv_roce_parse(b, n, (cfg & 2) ? &ip : NULL, &p);
	if (getenv("FZ_TRACE"))
		fprintf(stderr, "%zu bytes: %s\n", n, sv_roce_verdict_names[v]);
	if (v == SV_ROCE_OK)
		check_taken(b, n, &ip, &p, mtu, qpts[(cfg >> 3) & 7]);
	check_ud_take(b, n, false);
	check_ud_take(b, n, true);
	free(b);
	return 0;
}
