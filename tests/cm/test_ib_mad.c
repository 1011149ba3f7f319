// SPDX-License-Identifier: MIT
/*
 * The IB CM's MAD codec (rdmacm/ib_mad.c) alone, in milliseconds: the
 * kernel's own REQ and REJ as rxe sent them (ib_mad_rxe.h) decoded field
 * by field and encoded back to the same 256 bytes; the byte places of
 * the other attributes written out here from the IBA's tables (not read
 * from the codec's); every attribute round-tripped with random fields;
 * each malformed MAD dropped with its verdict, every short length
 * refused, random bytes never crash it; rdma_cm's service ID and its
 * cma_hdr.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ib_mad.h"
#include "ib_mad_rxe.h"
#include "sv_test.h"

static uint32_t rnd(void)
{
	return (uint32_t)random() << 16 ^ (uint32_t)random();
}

static uint64_t be(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static const uint8_t gid_v2[16] = {0, 0, 0,    0,    0,	 0,  0, 0,
				   0, 0, 0xff, 0xff, 10, 98, 7, 2};
static const uint8_t gid_v1[16] = {0, 0, 0,    0,    0,	 0,  0, 0,
				   0, 0, 0xff, 0xff, 10, 98, 7, 1};

SV_TEST(rxe_req_decodes)
{
	struct cm_mad m;

	ASSERT_EQ(CM_MAD_OK, cm_mad_decode(rxe_req, sizeof(rxe_req), &m));
	ASSERT_EQ(CM_MAD_METHOD_SEND, m.method);
	ASSERT_EQ(0x243b27904ULL, m.tid);
	ASSERT_EQ(CM_MAD_REQ, m.attr);
	ASSERT_EQ(0x0479b243u, m.local_id);
	ASSERT_EQ(cm_mad_service_id(CM_MAD_PS_TCP, 7471), m.service_id);
	ASSERT_EQ(0x505400fffe990002ULL, m.ca_guid);
	ASSERT_EQ(0u, m.qkey);
	ASSERT_EQ(0x11u, m.qpn);
	ASSERT_EQ(1, m.resp_res);
	ASSERT_EQ(1, m.init_depth);
	ASSERT_EQ(0x14, m.remote_cm_timeout);
	ASSERT_EQ(CM_MAD_TS_RC, m.transport);
	ASSERT_EQ(0, m.flow_ctrl);
	ASSERT_EQ(0x6c81bau, m.psn);
	ASSERT_EQ(0x14, m.local_cm_timeout);
	ASSERT_EQ(7, m.retry);
	ASSERT_EQ(0xffff, m.pkey);
	ASSERT_EQ(3, m.mtu); /* IBV_MTU_1024 */
	ASSERT_EQ(7, m.rnr_retry);
	ASSERT_EQ(15, m.max_cm_retries);
	ASSERT_EQ(0, m.srq);
	ASSERT_EQ(0xffff, m.primary.local_lid);
	ASSERT_EQ(0xffff, m.primary.remote_lid);
	ASSERT_OK(memcmp(gid_v2, m.primary.local_gid, 16));
	ASSERT_OK(memcmp(gid_v1, m.primary.remote_gid, 16));
	/* bytes 88-91 are 17 6c 80 00: the flow label is their top 20 bits
	 * (IBA table 106; the kernel's CM_REQ_PRIMARY_FLOW_LABEL), the rate
	 * byte 91's low 6.  tshark 4.0 shows 0x00176 and rate 0x17: its
	 * dissector misplaces both. */
	ASSERT_EQ(0x176c8u, m.primary.flow_label);
	ASSERT_EQ(0, m.primary.rate);
	ASSERT_EQ(0x40, m.primary.hop_limit);
	ASSERT_EQ(0x13, m.primary.ack_timeout);
	ASSERT_EQ(0, m.alternate.local_lid);
	ASSERT_EQ(92u, cm_mad_pdata_size(CM_MAD_REQ));

	struct sockaddr_storage src, dst;

	ASSERT_OK(cm_mad_cma_get(m.pdata, htons(7471), &src, &dst));
	struct sockaddr_in *s4 = (struct sockaddr_in *)&src;
	struct sockaddr_in *d4 = (struct sockaddr_in *)&dst;

	ASSERT_EQ(AF_INET, s4->sin_family);
	ASSERT_EQ(0x8f47, ntohs(s4->sin_port));
	ASSERT_EQ(0x0a620702u, ntohl(s4->sin_addr.s_addr));
	ASSERT_EQ(AF_INET, d4->sin_family);
	ASSERT_EQ(7471, ntohs(d4->sin_port));
	ASSERT_EQ(0x0a620701u, ntohl(d4->sin_addr.s_addr));
}

SV_TEST(rxe_rej_decodes)
{
	struct cm_mad m;

	ASSERT_EQ(CM_MAD_OK, cm_mad_decode(rxe_rej, sizeof(rxe_rej), &m));
	ASSERT_EQ(CM_MAD_REJ, m.attr);
	ASSERT_EQ(0x0579b243u, m.local_id);
	ASSERT_EQ(0u, m.remote_id);
	ASSERT_EQ(2, m.msg_kind);
	ASSERT_EQ(8, m.info_len);
	ASSERT_EQ(4, m.reason); /* IB_CM_REJ_TIMEOUT */
	ASSERT_EQ(0x505400fffe990002ULL, be(m.info, 8));
	ASSERT_EQ(148u, cm_mad_pdata_size(CM_MAD_REJ));
}

SV_TEST(rxe_rep_drep_decode)
{
	struct cm_mad m;

	ASSERT_EQ(CM_MAD_OK, cm_mad_decode(rxe_rep, sizeof(rxe_rep), &m));
	ASSERT_EQ(CM_MAD_REP, m.attr);
	ASSERT_EQ(0x0779b243u, m.local_id);
	ASSERT_EQ(0x380b846fu, m.remote_id);
	ASSERT_EQ(0u, m.qkey);
	ASSERT_EQ(0x13u, m.qpn);
	ASSERT_EQ(0x1941ffu, m.psn);
	ASSERT_EQ(1, m.resp_res);
	ASSERT_EQ(1, m.init_depth);
	ASSERT_EQ(15, m.target_ack_delay);
	ASSERT_EQ(0, m.failover);
	ASSERT_EQ(0, m.flow_ctrl);
	ASSERT_EQ(7, m.rnr_retry);
	ASSERT_EQ(0, m.srq);
	ASSERT_EQ(0x505400fffe990002ULL, m.ca_guid);
	ASSERT_EQ(CM_MAD_OK, cm_mad_decode(rxe_drep, sizeof(rxe_drep), &m));
	ASSERT_EQ(CM_MAD_DREP, m.attr);
	ASSERT_EQ(0x0779b243u, m.local_id);
	ASSERT_EQ(0x380b846fu, m.remote_id);
}

/* The kernel's bytes back, byte for byte: every field the kernel set is
 * a field the codec knows, and nothing else moves. */
SV_TEST(rxe_mads_reencode_identical)
{
	const uint8_t *mads[] = {rxe_req, rxe_rej, rxe_rep, rxe_drep};

	for (unsigned int i = 0; i < 4; i++) {
		struct cm_mad m;
		uint8_t out[CM_MAD_SIZE];

		ASSERT_EQ(CM_MAD_OK, cm_mad_decode(mads[i], CM_MAD_SIZE, &m));
		ASSERT_OK(cm_mad_encode(&m, out));
		for (unsigned int b = 0; b < CM_MAD_SIZE; b++)
			if (out[b] != mads[i][b])
				sv_test_fail(
					__FILE__, __LINE__,
					"mad %u byte %u: 0x%02x, rxe 0x%02x", i,
					b, out[b], mads[i][b]);
	}
}

/* Our REQ as the kernel's CM would build it for the same connection
 * equals the kernel's, but for what differs by nature (IDs, PSN, port). */
SV_TEST(req_built_like_rxe)
{
	struct cm_mad m = {
		.method = CM_MAD_METHOD_SEND,
		.tid = 0x243b27904ULL,
		.attr = CM_MAD_REQ,
		.local_id = 0x0479b243,
		.service_id = cm_mad_service_id(CM_MAD_PS_TCP, 7471),
		.ca_guid = 0x505400fffe990002ULL,
		.qpn = 0x11,
		.resp_res = 1,
		.init_depth = 1,
		.remote_cm_timeout = 0x14,
		.psn = 0x6c81ba,
		.local_cm_timeout = 0x14,
		.retry = 7,
		.pkey = 0xffff,
		.mtu = 3,
		.rnr_retry = 7,
		.max_cm_retries = 15,
		.primary = {.local_lid = 0xffff,
			    .remote_lid = 0xffff,
			    .flow_label = 0x176c8,
			    .hop_limit = 0x40,
			    .ack_timeout = 0x13},
	};
	struct sockaddr_in src = {.sin_family = AF_INET,
				  .sin_port = htons(0x8f47),
				  .sin_addr.s_addr = htonl(0x0a620702)};
	struct sockaddr_in dst = {.sin_family = AF_INET,
				  .sin_port = htons(7471),
				  .sin_addr.s_addr = htonl(0x0a620701)};
	uint8_t out[CM_MAD_SIZE];

	memcpy(m.primary.local_gid, gid_v2, 16);
	memcpy(m.primary.remote_gid, gid_v1, 16);
	ASSERT_OK(cm_mad_cma_put(m.pdata, (struct sockaddr *)&src,
				 (struct sockaddr *)&dst));
	ASSERT_OK(cm_mad_encode(&m, out));
	ASSERT_OK(memcmp(out, rxe_req, CM_MAD_SIZE));
}

/* The places of the other attributes' fields, from IBA tables 107-120
 * (MAD byte = 24 + the table's byte). */
SV_TEST(layouts)
{
	struct cm_mad m = {.method = CM_MAD_METHOD_SEND,
			   .attr = CM_MAD_REP,
			   .local_id = 0x11223344,
			   .remote_id = 0x55667788,
			   .qkey = 0x99aabbcc,
			   .qpn = 0x123456,
			   .vendor_id = 0xa1b2c3,
			   .eecn = 0x654321,
			   .psn = 0xabcdef,
			   .resp_res = 0x10,
			   .init_depth = 0x20,
			   .target_ack_delay = 0x1f,
			   .failover = 2,
			   .flow_ctrl = 1,
			   .rnr_retry = 5,
			   .srq = 1,
			   .ca_guid = 0x0102030405060708ULL};
	uint8_t o[CM_MAD_SIZE];

	m.pdata[0] = 0xee;
	m.pdata[195] = 0xdd;
	ASSERT_OK(cm_mad_encode(&m, o));
	ASSERT_EQ(0x0013u, be(o + 16, 2));
	ASSERT_EQ(0x11223344u, be(o + 24, 4));
	ASSERT_EQ(0x55667788u, be(o + 28, 4));
	ASSERT_EQ(0x99aabbccu, be(o + 32, 4));
	ASSERT_EQ(0x123456a1u, be(o + 36, 4)); /* QPN, vendor ID high */
	ASSERT_EQ(0x654321b2u, be(o + 40, 4)); /* EECN, vendor ID middle */
	ASSERT_EQ(0xabcdefc3u, be(o + 44, 4)); /* PSN, vendor ID low */
	ASSERT_EQ(0x10, o[48]);
	ASSERT_EQ(0x20, o[49]);
	ASSERT_EQ(0x1f << 3 | 2 << 1 | 1, o[50]);
	ASSERT_EQ(5 << 5 | 1 << 4, o[51]);
	ASSERT_EQ(0x0102030405060708ULL, be(o + 52, 8));
	ASSERT_EQ(0xee, o[60]);
	ASSERT_EQ(0xdd, o[255]);

	m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
			    .attr = CM_MAD_DREQ,
			    .local_id = 1,
			    .remote_id = 2,
			    .qpn = 0x345678};
	ASSERT_OK(cm_mad_encode(&m, o));
	ASSERT_EQ(0x0015u, be(o + 16, 2));
	ASSERT_EQ(0x34567800u, be(o + 32, 4));

	m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
			    .attr = CM_MAD_REJ,
			    .local_id = 1,
			    .remote_id = 2,
			    .msg_kind = 1,
			    .info_len = 72,
			    .reason = 28};
	m.info[71] = 0x77;
	m.pdata[147] = 0x66;
	ASSERT_OK(cm_mad_encode(&m, o));
	ASSERT_EQ(1 << 6, o[32]);
	ASSERT_EQ(72 << 1, o[33]);
	ASSERT_EQ(28u, be(o + 34, 2));
	ASSERT_EQ(0x77, o[36 + 71]);
	ASSERT_EQ(0x66, o[255]);

	m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
			    .attr = CM_MAD_SIDR_REP,
			    .local_id = 9,
			    .sidr_status = 2,
			    .info_len = 3,
			    .vendor_id = 0xabcdef,
			    .qpn = 0x010203,
			    .service_id = 0x1110017ULL,
			    .qkey = 0x12345678};
	ASSERT_OK(cm_mad_encode(&m, o));
	ASSERT_EQ(0x0018u, be(o + 16, 2));
	ASSERT_EQ(9u, be(o + 24, 4));
	ASSERT_EQ(0x0203abcdu, be(o + 28, 4));
	ASSERT_EQ(0x010203efu, be(o + 32, 4));
	ASSERT_EQ(0x1110017ULL, be(o + 36, 8));
	ASSERT_EQ(0x12345678u, be(o + 44, 4));

	m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
			    .attr = CM_MAD_SIDR_REQ,
			    .local_id = 7,
			    .pkey = 0xffff,
			    .service_id = 0x1110017ULL};
	ASSERT_OK(cm_mad_encode(&m, o));
	ASSERT_EQ(0xffff0000u, be(o + 28, 4));
	ASSERT_EQ(0x1110017ULL, be(o + 32, 8));
	ASSERT_EQ(216u, cm_mad_pdata_size(CM_MAD_SIDR_REQ));
	ASSERT_EQ(224u, cm_mad_pdata_size(CM_MAD_RTU));
	ASSERT_EQ(224u, cm_mad_pdata_size(CM_MAD_DREP));
	ASSERT_EQ(196u, cm_mad_pdata_size(CM_MAD_REP));
	ASSERT_EQ(0u, cm_mad_pdata_size(CM_MAD_LAP));
}

/* A valid message of attr with every field random within its width. */
static struct cm_mad random_mad(uint16_t attr)
{
	struct cm_mad m = {.method = CM_MAD_METHOD_SEND,
			   .tid = (uint64_t)rnd() << 32 | rnd(),
			   .attr = attr,
			   .attr_mod = rnd(),
			   .status = (uint16_t)rnd()};
	struct cm_mad_path *p[2] = {&m.primary, &m.alternate};

	m.local_id = rnd() | 1;
	m.remote_id = rnd() | 1;
	m.service_id = (uint64_t)rnd() << 32 | rnd();
	m.ca_guid = (uint64_t)rnd() << 32 | rnd();
	m.vendor_id = rnd() & 0xffffff;
	m.qkey = rnd();
	m.qpn = (rnd() & 0xffffff) | 2;
	m.eecn = rnd() & 0xffffff;
	m.remote_eecn = rnd() & 0xffffff;
	m.psn = rnd() & 0xffffff;
	m.resp_res = (uint8_t)rnd();
	m.init_depth = (uint8_t)rnd();
	m.remote_cm_timeout = rnd() & 31;
	m.local_cm_timeout = rnd() & 31;
	m.transport = (rnd() & 1) ? CM_MAD_TS_UC : CM_MAD_TS_XRC;
	m.flow_ctrl = rnd() & 1;
	m.retry = rnd() & 7;
	m.rnr_retry = rnd() & 7;
	m.max_cm_retries = rnd() & 15;
	m.srq = rnd() & 1;
	m.rdc = rnd() & 1;
	m.sap = rnd() & 1;
	m.mtu = 1 + rnd() % 5;
	m.ext_transport = rnd() & 7;
	m.target_ack_delay = rnd() & 31;
	m.failover = rnd() & 3;
	m.pkey = (uint16_t)rnd();
	for (int i = 0; i < 2; i++) {
		p[i]->local_lid = (uint16_t)rnd();
		p[i]->remote_lid = (uint16_t)rnd();
		for (int b = 0; b < 16; b++) {
			p[i]->local_gid[b] = (uint8_t)rnd();
			p[i]->remote_gid[b] = (uint8_t)rnd();
		}
		p[i]->flow_label = rnd() & 0xfffff;
		p[i]->rate = rnd() & 63;
		p[i]->tclass = (uint8_t)rnd();
		p[i]->hop_limit = (uint8_t)rnd();
		p[i]->sl = rnd() & 15;
		p[i]->subnet_local = rnd() & 1;
		p[i]->ack_timeout = rnd() & 31;
	}
	m.msg_kind = rnd() % 3;
	m.service_timeout = rnd() & 31;
	m.reason = (uint16_t)rnd();
	m.sidr_status = (uint8_t)rnd();
	m.info_len = rnd() % (CM_MAD_INFO_MAX + 1);
	for (int b = 0; b < CM_MAD_INFO_MAX; b++)
		m.info[b] = (uint8_t)rnd();
	for (int b = 0; b < CM_MAD_PDATA_MAX; b++)
		m.pdata[b] = (uint8_t)rnd();
	return m;
}

/* decode(encode(m)) == m on the fields attr carries; encode(decode(x))
 * == x for those bytes. */
SV_TEST(round_trip_every_attribute)
{
	static const uint16_t attrs[] = {
		CM_MAD_REQ,  CM_MAD_MRA,      CM_MAD_REJ,
		CM_MAD_REP,  CM_MAD_RTU,      CM_MAD_DREQ,
		CM_MAD_DREP, CM_MAD_SIDR_REQ, CM_MAD_SIDR_REP};

	srandom(26);
	for (unsigned int a = 0; a < sizeof(attrs) / sizeof(attrs[0]); a++) {
		for (int it = 0; it < 200; it++) {
			struct cm_mad m = random_mad(attrs[a]), d, d2;
			uint8_t o[CM_MAD_SIZE], o2[CM_MAD_SIZE];

			ASSERT_OK(cm_mad_encode(&m, o));
			ASSERT_EQ(CM_MAD_OK, cm_mad_decode(o, sizeof(o), &d));
			ASSERT_EQ(m.tid, d.tid);
			ASSERT_EQ(m.attr_mod, d.attr_mod);
			ASSERT_EQ(m.status, d.status);
			ASSERT_EQ(m.local_id, d.local_id);
			ASSERT_OK(memcmp(m.pdata, d.pdata,
					 cm_mad_pdata_size(attrs[a])));
			ASSERT_OK(cm_mad_encode(&d, o2));
			ASSERT_OK(memcmp(o, o2, sizeof(o)));
			ASSERT_EQ(CM_MAD_OK, cm_mad_decode(o2, sizeof(o), &d2));
			ASSERT_OK(memcmp(&d, &d2, sizeof(d)));
			if (attrs[a] == CM_MAD_REQ) {
				ASSERT_OK(memcmp(&m.primary, &d.primary,
						 sizeof(m.primary)));
				ASSERT_OK(memcmp(&m.alternate, &d.alternate,
						 sizeof(m.alternate)));
				ASSERT_EQ(m.psn, d.psn);
				ASSERT_EQ(m.qpn, d.qpn);
				ASSERT_EQ(m.service_id, d.service_id);
				ASSERT_EQ(m.mtu, d.mtu);
				ASSERT_EQ(m.rnr_retry, d.rnr_retry);
				ASSERT_EQ(m.ext_transport, d.ext_transport);
			}
			if (attrs[a] == CM_MAD_REP) {
				ASSERT_EQ(m.vendor_id, d.vendor_id);
				ASSERT_EQ(m.psn, d.psn);
				ASSERT_EQ(m.srq, d.srq);
				ASSERT_EQ(m.failover, d.failover);
			}
			if (attrs[a] == CM_MAD_SIDR_REP) {
				ASSERT_EQ(m.vendor_id, d.vendor_id);
				ASSERT_EQ(m.qkey, d.qkey);
				ASSERT_OK(memcmp(m.info, d.info, 72));
			}
		}
	}
}

/* A copy of the kernel's REQ with one byte changed, decoded from a
 * buffer of exactly 256 bytes. */
static enum cm_mad_verdict req_with(unsigned int at, uint8_t v)
{
	uint8_t b[CM_MAD_SIZE];
	struct cm_mad m;

	memcpy(b, rxe_req, sizeof(b));
	b[at] = v;
	return cm_mad_decode(b, sizeof(b), &m);
}

SV_TEST(malformed_dropped_with_reason)
{
	ASSERT_EQ(CM_MAD_DROP_VERSION, req_with(0, 2));	  /* base version */
	ASSERT_EQ(CM_MAD_DROP_CLASS, req_with(1, 0x01));  /* SM class */
	ASSERT_EQ(CM_MAD_DROP_VERSION, req_with(2, 1));	  /* class version */
	ASSERT_EQ(CM_MAD_DROP_METHOD, req_with(3, 0x83)); /* a response */
	ASSERT_EQ(CM_MAD_DROP_METHOD, req_with(3, 0x01)); /* Get */
	ASSERT_EQ(CM_MAD_DROP_ATTR, req_with(17, 0x20));
	ASSERT_EQ(CM_MAD_DROP_ATTR, req_with(16, 0x01));   /* 0x0110 */
	ASSERT_EQ(CM_MAD_DROP_UNSUPP, req_with(17, 0x19)); /* LAP */
	ASSERT_EQ(CM_MAD_DROP_UNSUPP, req_with(17, 0x1a)); /* APR */
	ASSERT_EQ(CM_MAD_DROP_UNSUPP, req_with(17, 0x01)); /* ClassPortInfo */
	ASSERT_EQ(CM_MAD_DROP_METHOD, req_with(3, 0x00));
	/* REQ fields: QPN 1 (QP1), QPN 0, RD transport, MTU 0 and 6 */
	ASSERT_EQ(CM_MAD_DROP_FIELD, req_with(24 + 34, 1));
	ASSERT_EQ(CM_MAD_DROP_FIELD, req_with(24 + 34, 0));
	ASSERT_EQ(CM_MAD_DROP_FIELD, req_with(24 + 43, 0xa4));
	ASSERT_EQ(CM_MAD_DROP_FIELD, req_with(24 + 50, 0x07));
	ASSERT_EQ(CM_MAD_DROP_FIELD, req_with(24 + 50, 0x67));
	ASSERT_EQ(CM_MAD_OK, req_with(24 + 50, 0x57)); /* 4096 */

	uint8_t b[CM_MAD_SIZE];
	struct cm_mad m;

	memcpy(b, rxe_req, sizeof(b));
	memset(b + 24, 0, 4); /* local comm ID 0 */
	ASSERT_EQ(CM_MAD_DROP_FIELD, cm_mad_decode(b, sizeof(b), &m));
	memcpy(b, rxe_rej, sizeof(b));
	b[33] = 73 << 1; /* ARI longer than its field */
	ASSERT_EQ(CM_MAD_DROP_FIELD, cm_mad_decode(b, sizeof(b), &m));
	memcpy(b, rxe_rej, sizeof(b));
	b[32] = 3 << 6; /* message rejected 3 */
	ASSERT_EQ(CM_MAD_DROP_FIELD, cm_mad_decode(b, sizeof(b), &m));
	memcpy(b, rxe_rej, sizeof(b));
	memset(b + 24, 0, 8); /* neither ID */
	ASSERT_EQ(CM_MAD_DROP_FIELD, cm_mad_decode(b, sizeof(b), &m));
	/* REP, RTU, DREQ, DREP need both IDs */
	static const uint16_t both[] = {CM_MAD_REP, CM_MAD_RTU, CM_MAD_DREQ,
					CM_MAD_DREP, CM_MAD_MRA};
	for (unsigned int i = 0; i < 5; i++) {
		struct cm_mad g = random_mad(both[i]);

		g.remote_id = 0;
		ASSERT_OK(cm_mad_encode(&g, b));
		ASSERT_EQ(CM_MAD_DROP_FIELD, cm_mad_decode(b, sizeof(b), &m));
	}
	for (int v = 0; v < CM_MAD_NVERDICTS; v++)
		ASSERT_CONTAINS(cm_mad_verdict_name(v), "cm_mad_");
}

/* Every length but 256, each from a buffer of exactly that size (ASan
 * sees a read past it), and 257. */
SV_TEST(every_short_length_refused)
{
	struct cm_mad m;

	for (size_t n = 0; n <= CM_MAD_SIZE + 1; n++) {
		uint8_t *b = malloc(n ? n : 1);

		ASSERT_NOT_NULL(b);
		memcpy(b, rxe_req, n < CM_MAD_SIZE ? n : CM_MAD_SIZE);
		if (n > CM_MAD_SIZE)
			b[CM_MAD_SIZE] = 0;
		ASSERT_EQ(n == CM_MAD_SIZE ? CM_MAD_OK : CM_MAD_DROP_LEN,
			  cm_mad_decode(b, n, &m));
		free(b);
	}
}

/* Random bytes behind a valid header: never a crash, and whatever is
 * taken encodes back to a MAD that decodes to the same message. */
SV_TEST(random_bytes)
{
	unsigned int ok = 0;

	srandom(4791);
	for (int it = 0; it < 20000; it++) {
		uint8_t b[CM_MAD_SIZE], o[CM_MAD_SIZE];
		struct cm_mad m, m2;

		for (unsigned int i = 0; i < sizeof(b); i++)
			b[i] = (uint8_t)rnd();
		if (it % 2) {
			memcpy(b, rxe_req, 4);
			b[16] = 0;
			b[17] = (uint8_t)(0x10 + rnd() % 9);
		}
		if (cm_mad_decode(b, sizeof(b), &m) != CM_MAD_OK)
			continue;
		ok++;
		ASSERT_OK(cm_mad_encode(&m, o));
		ASSERT_EQ(CM_MAD_OK, cm_mad_decode(o, sizeof(o), &m2));
		ASSERT_OK(memcmp(&m, &m2, sizeof(m)));
	}
	ASSERT_GE(ok, 1000u);
}

SV_TEST(encode_refuses_what_decode_would)
{
	uint8_t o[CM_MAD_SIZE];
	struct cm_mad m = random_mad(CM_MAD_REQ);

	m.qpn = 1u << 24;
	ASSERT_EQ(-EINVAL, cm_mad_encode(&m, o));
	m = random_mad(CM_MAD_REP);
	m.vendor_id = 1u << 24;
	ASSERT_EQ(-EINVAL, cm_mad_encode(&m, o));
	m = random_mad(CM_MAD_REJ);
	m.info_len = 73;
	ASSERT_EQ(-EINVAL, cm_mad_encode(&m, o));
	m = random_mad(CM_MAD_REQ);
	m.retry = 8;
	ASSERT_EQ(-EINVAL, cm_mad_encode(&m, o));
	m.attr = CM_MAD_LAP;
	ASSERT_EQ(-EINVAL, cm_mad_encode(&m, o));
	m.attr = 0x30;
	ASSERT_EQ(-EINVAL, cm_mad_encode(&m, o));
}

SV_TEST(service_id)
{
	uint16_t ps, port;

	ASSERT_EQ(0x0000000001060000ULL | 7471,
		  cm_mad_service_id(CM_MAD_PS_TCP, 7471));
	ASSERT_OK(cm_mad_service_split(0x0000000001111234ULL, &ps, &port));
	ASSERT_EQ(CM_MAD_PS_UDP, ps);
	ASSERT_EQ(0x1234, port);
	ASSERT_EQ(-EINVAL,
		  cm_mad_service_split(0x0000000101060001ULL, &ps, &port));
	ASSERT_EQ(-EINVAL,
		  cm_mad_service_split(0x0000000001070001ULL, &ps, &port));
}

SV_TEST(cma_hdr)
{
	uint8_t h[CM_MAD_CMA_HDR_SIZE];
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons(5000)};
	struct sockaddr_in6 d6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons(6000)};
	struct sockaddr_in s4 = {.sin_family = AF_INET};
	struct sockaddr_storage src, dst;

	s6.sin6_addr.s6_addr[0] = 0xfd;
	s6.sin6_addr.s6_addr[15] = 1;
	d6.sin6_addr.s6_addr[0] = 0xfd;
	d6.sin6_addr.s6_addr[15] = 2;
	ASSERT_OK(cm_mad_cma_put(h, (struct sockaddr *)&s6,
				 (struct sockaddr *)&d6));
	ASSERT_EQ(0, h[0]);
	ASSERT_EQ(0x60, h[1]);
	ASSERT_EQ(5000u, be(h + 2, 2));
	ASSERT_EQ(0xfd, h[4]);
	ASSERT_EQ(1, h[19]);
	ASSERT_EQ(0xfd, h[20]);
	ASSERT_EQ(2, h[35]);
	ASSERT_OK(cm_mad_cma_get(h, htons(6000), &src, &dst));
	ASSERT_OK(memcmp(&src, &s6, sizeof(s6)));
	ASSERT_OK(memcmp(&dst, &d6, sizeof(d6)));
	/* mixed families, not IP */
	ASSERT_EQ(-EINVAL, cm_mad_cma_put(h, (struct sockaddr *)&s4,
					  (struct sockaddr *)&d6));
	s4.sin_family = AF_UNIX;
	ASSERT_EQ(-EINVAL, cm_mad_cma_put(h, (struct sockaddr *)&s4,
					  (struct sockaddr *)&s4));
	/* a peer's header: version 1, IP version 5 */
	h[0] = 1;
	ASSERT_EQ(-EPROTO, cm_mad_cma_get(h, 0, &src, &dst));
	h[0] = 0;
	h[1] = 0x50;
	ASSERT_EQ(-EPROTO, cm_mad_cma_get(h, 0, &src, &dst));
}

/* SIDR as the kernel's CM lays it out (IBA tables 119 and 120, the byte
 * places written here): a SIDR REQ to rdma_cm's UDP port space with its
 * cma_hdr and private data, a SIDR REP with QPN, Q_Key, status and data,
 * each decoded field by field; a request ID 0 and an info length past
 * its 72 bytes dropped. */
SV_TEST(sidr_req_rep_decode)
{
	uint8_t b[CM_MAD_SIZE] = {1, 7, 2, 3};
	struct sockaddr_storage src, dst;
	uint16_t ps, port;
	struct cm_mad m;

	/* SIDR REQ: tid, attribute 0x0017, request ID, P_Key, service ID */
	memcpy(b + 8, "\x00\x00\x00\x01\x02\x03\x04\x05", 8);
	b[16] = 0x00, b[17] = 0x17;
	memcpy(b + 24, "\xa1\xb2\xc3\xd4", 4);
	b[28] = b[29] = 0xff;
	memcpy(b + 32, "\x00\x00\x00\x00\x01\x11\x1c\x06", 8); /* port 7174 */
	b[40] = 0;					 /* cma_hdr version */
	b[41] = 4 << 4;					 /* IPv4 */
	b[42] = 0x9c, b[43] = 0x40;			 /* source port 40000 */
	memcpy(b + 40 + 4 + 12, "\x0a\x4d\x00\x02", 4);	 /* 10.77.0.2 */
	memcpy(b + 40 + 20 + 12, "\x0a\x4d\x00\x01", 4); /* 10.77.0.1 */
	b[40 + 36] = 0x5a;				 /* the program's */
	b[255] = 0xa5;
	ASSERT_EQ(CM_MAD_OK, cm_mad_decode(b, sizeof(b), &m));
	ASSERT_EQ(CM_MAD_SIDR_REQ, m.attr);
	ASSERT_EQ(0x0102030405ULL, m.tid);
	ASSERT_EQ(0xa1b2c3d4u, m.local_id);
	ASSERT_EQ(0xffff, m.pkey);
	ASSERT_EQ(0x1111c06ULL, m.service_id);
	ASSERT_OK(cm_mad_service_split(m.service_id, &ps, &port));
	ASSERT_EQ(CM_MAD_PS_UDP, ps);
	ASSERT_EQ(7174, port);
	ASSERT_OK(cm_mad_cma_get(m.pdata, htons(port), &src, &dst));
	ASSERT_EQ(AF_INET, src.ss_family);
	ASSERT_EQ(htonl(0x0a4d0002),
		  ((struct sockaddr_in *)&src)->sin_addr.s_addr);
	ASSERT_EQ(htons(40000), ((struct sockaddr_in *)&src)->sin_port);
	ASSERT_EQ(htonl(0x0a4d0001),
		  ((struct sockaddr_in *)&dst)->sin_addr.s_addr);
	ASSERT_EQ(htons(7174), ((struct sockaddr_in *)&dst)->sin_port);
	ASSERT_EQ(0x5a, m.pdata[36]);
	ASSERT_EQ(0xa5, m.pdata[215]);
	memset(b + 24, 0, 4); /* request ID 0 */
	ASSERT_EQ(CM_MAD_DROP_FIELD, cm_mad_decode(b, sizeof(b), &m));

	/* SIDR REP: request ID, status, info length, vendor ID around the
	 * QPN, service ID, Q_Key (RDMA_UDP_QKEY), info, private data */
	memset(b + 16, 0, sizeof(b) - 16);
	b[16] = 0x00, b[17] = 0x18;
	memcpy(b + 24, "\xa1\xb2\xc3\xd4", 4);
	b[28] = 0;			       /* status OK */
	b[29] = 2;			       /* 2 bytes of info */
	b[30] = 0x12, b[31] = 0x34;	       /* vendor ID high */
	memcpy(b + 32, "\x00\x00\x2a\x56", 4); /* QPN 42, vendor */
	memcpy(b + 36, "\x00\x00\x00\x00\x01\x11\x1c\x06", 8);
	memcpy(b + 44, "\x01\x23\x45\x67", 4); /* Q_Key */
	b[48] = 0xee, b[49] = 0xdd;	       /* info */
	b[120] = 0x11, b[255] = 0x22;	       /* private data */
	ASSERT_EQ(CM_MAD_OK, cm_mad_decode(b, sizeof(b), &m));
	ASSERT_EQ(CM_MAD_SIDR_REP, m.attr);
	ASSERT_EQ(0xa1b2c3d4u, m.local_id);
	ASSERT_EQ(0, m.sidr_status);
	ASSERT_EQ(2, m.info_len);
	ASSERT_EQ(0x123456u, m.vendor_id);
	ASSERT_EQ(42u, m.qpn);
	ASSERT_EQ(0x1111c06ULL, m.service_id);
	ASSERT_EQ(0x01234567u, m.qkey);
	ASSERT_EQ(0xee, m.info[0]);
	ASSERT_EQ(0xdd, m.info[1]);
	ASSERT_EQ(0x11, m.pdata[0]);
	ASSERT_EQ(0x22, m.pdata[135]);
	b[28] = 1; /* "unsupported": a status, decoded as it is */
	ASSERT_EQ(CM_MAD_OK, cm_mad_decode(b, sizeof(b), &m));
	ASSERT_EQ(1, m.sidr_status);
	b[29] = 73; /* more info than its field */
	ASSERT_EQ(CM_MAD_DROP_FIELD, cm_mad_decode(b, sizeof(b), &m));
}
