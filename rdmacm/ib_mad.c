// SPDX-License-Identifier: MIT
/*
 * The IB CM's MADs (ib_mad.h): one table of rows, each a field of one
 * attribute at its IBA place (byte offset in the CM message, first bit
 * counted from the byte's most significant one, width in bits) and the
 * struct cm_mad member it is; encode and decode walk the rows.  The
 * places are the IBA vol 1 ch. 12 tables 106-120 (the kernel's
 * ibta_vol1_c12.h says the same).  Then decode checks each attribute's
 * ranges: every byte came from a stranger.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "ib_mad.h"

enum row_kind {
	ROW_BITS,  /* width bits of an unsigned member, from bit `shift' */
	ROW_BYTES, /* width bytes copied as they are (GIDs, data) */
};

struct row {
	uint16_t attr;
	uint8_t kind;  /* enum row_kind */
	uint8_t bit;   /* first bit in the byte, 0 = the MSB */
	uint16_t byte; /* in the CM message (after the MAD header) */
	uint16_t width;
	uint8_t shift; /* ROW_BITS: the member's bits [shift, +width) */
	bool part;     /* one of several rows of a member (a split vendor
			* ID): fits() checks its width */
	uint8_t msize; /* sizeof the member */
	uint16_t moff; /* offsetof the member */
};

#define MSZ(m) sizeof(((struct cm_mad *)0)->m)
#define B(a, byte, bit, w, m)                                \
	{                                                    \
		a, ROW_BITS, bit, byte, w, 0, false, MSZ(m), \
			offsetof(struct cm_mad, m)           \
	}
#define BS(a, byte, bit, w, sh, m)                           \
	{                                                    \
		a, ROW_BITS, bit, byte, w, sh, true, MSZ(m), \
			offsetof(struct cm_mad, m)           \
	}
#define Y(a, byte, n, m)                                    \
	{                                                   \
		a, ROW_BYTES, 0, byte, n, 0, false, MSZ(m), \
			offsetof(struct cm_mad, m)          \
	}

/* A REQ's path p at byte o (primary 52, alternate 96). */
#define PATH(o, p)                                           \
	B(CM_MAD_REQ, o, 0, 16, p.local_lid),                \
		B(CM_MAD_REQ, o + 2, 0, 16, p.remote_lid),   \
		Y(CM_MAD_REQ, o + 4, 16, p.local_gid),       \
		Y(CM_MAD_REQ, o + 20, 16, p.remote_gid),     \
		B(CM_MAD_REQ, o + 36, 0, 20, p.flow_label),  \
		B(CM_MAD_REQ, o + 39, 2, 6, p.rate),         \
		B(CM_MAD_REQ, o + 40, 0, 8, p.tclass),       \
		B(CM_MAD_REQ, o + 41, 0, 8, p.hop_limit),    \
		B(CM_MAD_REQ, o + 42, 0, 4, p.sl),           \
		B(CM_MAD_REQ, o + 42, 4, 1, p.subnet_local), \
		B(CM_MAD_REQ, o + 43, 0, 5, p.ack_timeout)

static const struct row rows[] = {
	/* REQ (table 106) */
	B(CM_MAD_REQ, 0, 0, 32, local_id),
	B(CM_MAD_REQ, 5, 0, 24, vendor_id),
	B(CM_MAD_REQ, 8, 0, 64, service_id),
	B(CM_MAD_REQ, 16, 0, 64, ca_guid),
	B(CM_MAD_REQ, 28, 0, 32, qkey),
	B(CM_MAD_REQ, 32, 0, 24, qpn),
	B(CM_MAD_REQ, 35, 0, 8, resp_res),
	B(CM_MAD_REQ, 36, 0, 24, eecn),
	B(CM_MAD_REQ, 39, 0, 8, init_depth),
	B(CM_MAD_REQ, 40, 0, 24, remote_eecn),
	B(CM_MAD_REQ, 43, 0, 5, remote_cm_timeout),
	B(CM_MAD_REQ, 43, 5, 2, transport),
	B(CM_MAD_REQ, 43, 7, 1, flow_ctrl),
	B(CM_MAD_REQ, 44, 0, 24, psn),
	B(CM_MAD_REQ, 47, 0, 5, local_cm_timeout),
	B(CM_MAD_REQ, 47, 5, 3, retry),
	B(CM_MAD_REQ, 48, 0, 16, pkey),
	B(CM_MAD_REQ, 50, 0, 4, mtu),
	B(CM_MAD_REQ, 50, 4, 1, rdc),
	B(CM_MAD_REQ, 50, 5, 3, rnr_retry),
	B(CM_MAD_REQ, 51, 0, 4, max_cm_retries),
	B(CM_MAD_REQ, 51, 4, 1, srq),
	B(CM_MAD_REQ, 51, 5, 3, ext_transport),
	PATH(52, primary),
	PATH(96, alternate),
	B(CM_MAD_REQ, 139, 5, 1, sap),
	Y(CM_MAD_REQ, 140, 92, pdata),
	/* MRA (table 107) */
	B(CM_MAD_MRA, 0, 0, 32, local_id),
	B(CM_MAD_MRA, 4, 0, 32, remote_id),
	B(CM_MAD_MRA, 8, 0, 2, msg_kind),
	B(CM_MAD_MRA, 9, 0, 5, service_timeout),
	Y(CM_MAD_MRA, 10, 222, pdata),
	/* REJ (table 108) */
	B(CM_MAD_REJ, 0, 0, 32, local_id),
	B(CM_MAD_REJ, 4, 0, 32, remote_id),
	B(CM_MAD_REJ, 8, 0, 2, msg_kind),
	B(CM_MAD_REJ, 9, 0, 7, info_len),
	B(CM_MAD_REJ, 10, 0, 16, reason),
	Y(CM_MAD_REJ, 12, 72, info),
	Y(CM_MAD_REJ, 84, 148, pdata),
	/* REP (table 110): the vendor ID in three bytes */
	B(CM_MAD_REP, 0, 0, 32, local_id),
	B(CM_MAD_REP, 4, 0, 32, remote_id),
	B(CM_MAD_REP, 8, 0, 32, qkey),
	B(CM_MAD_REP, 12, 0, 24, qpn),
	BS(CM_MAD_REP, 15, 0, 8, 16, vendor_id),
	B(CM_MAD_REP, 16, 0, 24, eecn),
	BS(CM_MAD_REP, 19, 0, 8, 8, vendor_id),
	B(CM_MAD_REP, 20, 0, 24, psn),
	BS(CM_MAD_REP, 23, 0, 8, 0, vendor_id),
	B(CM_MAD_REP, 24, 0, 8, resp_res),
	B(CM_MAD_REP, 25, 0, 8, init_depth),
	B(CM_MAD_REP, 26, 0, 5, target_ack_delay),
	B(CM_MAD_REP, 26, 5, 2, failover),
	B(CM_MAD_REP, 26, 7, 1, flow_ctrl),
	B(CM_MAD_REP, 27, 0, 3, rnr_retry),
	B(CM_MAD_REP, 27, 3, 1, srq),
	B(CM_MAD_REP, 28, 0, 64, ca_guid),
	Y(CM_MAD_REP, 36, 196, pdata),
	/* RTU (table 111) */
	B(CM_MAD_RTU, 0, 0, 32, local_id),
	B(CM_MAD_RTU, 4, 0, 32, remote_id),
	Y(CM_MAD_RTU, 8, 224, pdata),
	/* DREQ (table 112) */
	B(CM_MAD_DREQ, 0, 0, 32, local_id),
	B(CM_MAD_DREQ, 4, 0, 32, remote_id),
	B(CM_MAD_DREQ, 8, 0, 24, qpn),
	Y(CM_MAD_DREQ, 12, 220, pdata),
	/* DREP (table 113) */
	B(CM_MAD_DREP, 0, 0, 32, local_id),
	B(CM_MAD_DREP, 4, 0, 32, remote_id),
	Y(CM_MAD_DREP, 8, 224, pdata),
	/* SIDR REQ (table 119) */
	B(CM_MAD_SIDR_REQ, 0, 0, 32, local_id),
	B(CM_MAD_SIDR_REQ, 4, 0, 16, pkey),
	B(CM_MAD_SIDR_REQ, 8, 0, 64, service_id),
	Y(CM_MAD_SIDR_REQ, 16, 216, pdata),
	/* SIDR REP (table 120): the vendor ID in two parts */
	B(CM_MAD_SIDR_REP, 0, 0, 32, local_id),
	B(CM_MAD_SIDR_REP, 4, 0, 8, sidr_status),
	B(CM_MAD_SIDR_REP, 5, 0, 8, info_len),
	BS(CM_MAD_SIDR_REP, 6, 0, 16, 8, vendor_id),
	B(CM_MAD_SIDR_REP, 8, 0, 24, qpn),
	BS(CM_MAD_SIDR_REP, 11, 0, 8, 0, vendor_id),
	B(CM_MAD_SIDR_REP, 12, 0, 64, service_id),
	B(CM_MAD_SIDR_REP, 20, 0, 32, qkey),
	Y(CM_MAD_SIDR_REP, 24, 72, info),
	Y(CM_MAD_SIDR_REP, 96, 136, pdata),
};

unsigned int cm_mad_pdata_size(uint16_t attr)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (rows[i].attr == attr && rows[i].kind == ROW_BYTES &&
		    rows[i].moff == offsetof(struct cm_mad, pdata))
			return rows[i].width;
	return 0;
}

static const char *const verdict_names[CM_MAD_NVERDICTS] = {
	[CM_MAD_OK] = "cm_mad_ok",
	[CM_MAD_DROP_LEN] = "cm_mad_drop_len",
	[CM_MAD_DROP_VERSION] = "cm_mad_drop_version",
	[CM_MAD_DROP_CLASS] = "cm_mad_drop_class",
	[CM_MAD_DROP_METHOD] = "cm_mad_drop_method",
	[CM_MAD_DROP_ATTR] = "cm_mad_drop_attr",
	[CM_MAD_DROP_UNSUPP] = "cm_mad_drop_unsupported",
	[CM_MAD_DROP_FIELD] = "cm_mad_drop_field",
};

const char *cm_mad_verdict_name(enum cm_mad_verdict v)
{
	return (unsigned int)v < CM_MAD_NVERDICTS ? verdict_names[v] : "?";
}

static uint64_t member_get(const struct cm_mad *m, const struct row *r)
{
	const uint8_t *p = (const uint8_t *)m + r->moff;
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (r->msize) {
	case 1:
		memcpy(&u8, p, 1);
		return u8;
	case 2:
		memcpy(&u16, p, 2);
		return u16;
	case 4:
		memcpy(&u32, p, 4);
		return u32;
	default:
		memcpy(&u64, p, 8);
		return u64;
	}
}

static void member_or(struct cm_mad *m, const struct row *r, uint64_t v)
{
	uint64_t cur = member_get(m, r) | v;
	uint8_t *p = (uint8_t *)m + r->moff;
	uint8_t u8 = (uint8_t)cur;
	uint16_t u16 = (uint16_t)cur;
	uint32_t u32 = (uint32_t)cur;

	switch (r->msize) {
	case 1:
		memcpy(p, &u8, 1);
		break;
	case 2:
		memcpy(p, &u16, 2);
		break;
	case 4:
		memcpy(p, &u32, 4);
		break;
	default:
		memcpy(p, &cur, 8);
		break;
	}
}

static uint64_t mask_of(unsigned int width)
{
	return width >= 64 ? ~0ULL : (1ULL << width) - 1;
}

/* The bytes [byte, byte + n) of the message as one big-endian number,
 * n = the bytes the field touches (at most 8: no field spans more). */
static unsigned int span(const struct row *r)
{
	return (r->bit + r->width + 7u) / 8u;
}

static uint64_t bits_get(const uint8_t *msg, const struct row *r)
{
	unsigned int n = span(r);
	uint64_t v = 0;

	for (unsigned int i = 0; i < n; i++)
		v = v << 8 | msg[r->byte + i];
	return v >> (n * 8 - r->bit - r->width) & mask_of(r->width);
}

static void bits_put(uint8_t *msg, const struct row *r, uint64_t field)
{
	unsigned int n = span(r);
	unsigned int lsb = n * 8 - r->bit - r->width;
	uint64_t v = 0;

	for (unsigned int i = 0; i < n; i++)
		v = v << 8 | msg[r->byte + i];
	v &= ~(mask_of(r->width) << lsb);
	v |= (field & mask_of(r->width)) << lsb;
	for (unsigned int i = n; i-- > 0; v >>= 8)
		msg[r->byte + i] = (uint8_t)v;
}

static void put_be(uint8_t *p, uint64_t v, unsigned int n)
{
	for (unsigned int i = n; i-- > 0; v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static bool spoken(uint16_t attr)
{
	return attr >= CM_MAD_REQ && attr <= CM_MAD_SIDR_REP;
}

/* The bits of a member the rows of its attribute do not carry: a value
 * the wire cannot hold (a QPN of 25 bits). */
static bool fits(const struct cm_mad *m)
{
	static const struct {
		uint16_t moff;
		uint8_t width;
	} narrow[] = {
		{offsetof(struct cm_mad, vendor_id), 24},
		{offsetof(struct cm_mad, qpn), 24},
		{offsetof(struct cm_mad, eecn), 24},
		{offsetof(struct cm_mad, remote_eecn), 24},
		{offsetof(struct cm_mad, psn), 24},
	};
	uint32_t v;

	for (size_t i = 0; i < sizeof(narrow) / sizeof(narrow[0]); i++) {
		memcpy(&v, (const uint8_t *)m + narrow[i].moff, 4);
		if (v >> narrow[i].width)
			return false;
	}
	return true;
}

int cm_mad_encode(const struct cm_mad *m, uint8_t out[CM_MAD_SIZE])
{
	uint8_t *msg = out + CM_MAD_HDR_SIZE;

	if (!spoken(m->attr) || !fits(m) || m->info_len > CM_MAD_INFO_MAX)
		return -EINVAL;
	memset(out, 0, CM_MAD_SIZE);
	out[0] = CM_MAD_BASE_VERSION;
	out[1] = CM_MAD_CLASS;
	out[2] = CM_MAD_CLASS_VERSION;
	out[3] = m->method;
	put_be(out + 4, m->status, 2);
	put_be(out + 8, m->tid, 8);
	put_be(out + 16, m->attr, 2);
	put_be(out + 20, m->attr_mod, 4);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];

		if (r->attr != m->attr)
			continue;
		if (r->kind == ROW_BYTES) {
			memcpy(msg + r->byte, (const uint8_t *)m + r->moff,
			       r->width);
			continue;
		}
		uint64_t v = member_get(m, r) >> r->shift;

		/* a narrow member whose value is wider than its field is the
		 * caller's error (a REJ's 7-bit length of 200) */
		if (!r->part && r->width < 8 * r->msize &&
		    (v & ~mask_of(r->width)))
			return -EINVAL;
		bits_put(msg, r, v);
	}
	return 0;
}

/* Each attribute's ranges: what the kernel's CM never sends. */
static bool fields_ok(const struct cm_mad *m)
{
	switch (m->attr) {
	case CM_MAD_REQ:
		return m->local_id && m->qpn > 1 &&
		       (m->transport == CM_MAD_TS_RC ||
			m->transport == CM_MAD_TS_UC ||
			m->transport == CM_MAD_TS_XRC) &&
		       m->mtu >= 1 && m->mtu <= 5;
	case CM_MAD_REP:
		return m->local_id && m->remote_id && m->qpn > 1;
	case CM_MAD_REJ:
		/* either ID may be 0: rxe's REJ of a REQ that timed out
		 * names no remote ID (tests/cm/ib_mad_rxe.h) */
		return (m->local_id || m->remote_id) && m->msg_kind <= 2 &&
		       m->info_len <= CM_MAD_INFO_MAX;
	case CM_MAD_MRA:
		return m->local_id && m->remote_id && m->msg_kind <= 2;
	case CM_MAD_RTU:
	case CM_MAD_DREQ:
	case CM_MAD_DREP:
		return m->local_id && m->remote_id;
	case CM_MAD_SIDR_REQ:
		return m->local_id != 0;
	case CM_MAD_SIDR_REP:
		return m->info_len <= CM_MAD_INFO_MAX;
	default:
		return false;
	}
}

enum cm_mad_verdict cm_mad_decode(const uint8_t *b, size_t n, struct cm_mad *m)
{
	const uint8_t *msg = b + CM_MAD_HDR_SIZE;

	memset(m, 0, sizeof(*m));
	if (n != CM_MAD_SIZE)
		return CM_MAD_DROP_LEN;
	if (b[1] != CM_MAD_CLASS)
		return CM_MAD_DROP_CLASS;
	if (b[0] != CM_MAD_BASE_VERSION || b[2] != CM_MAD_CLASS_VERSION)
		return CM_MAD_DROP_VERSION;
	m->method = b[3];
	m->status = (uint16_t)get_be(b + 4, 2);
	m->tid = get_be(b + 8, 8);
	m->attr = (uint16_t)get_be(b + 16, 2);
	m->attr_mod = (uint32_t)get_be(b + 20, 4);
	if (m->method != CM_MAD_METHOD_SEND)
		return CM_MAD_DROP_METHOD;
	if (m->attr == CM_MAD_CLASS_PORT_INFO || m->attr == CM_MAD_LAP ||
	    m->attr == CM_MAD_APR)
		return CM_MAD_DROP_UNSUPP;
	if (!spoken(m->attr))
		return CM_MAD_DROP_ATTR;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];

		if (r->attr != m->attr)
			continue;
		if (r->kind == ROW_BYTES)
			memcpy((uint8_t *)m + r->moff, msg + r->byte, r->width);
		else
			member_or(m, r, bits_get(msg, r) << r->shift);
	}
	return fields_ok(m) ? CM_MAD_OK : CM_MAD_DROP_FIELD;
}

int cm_mad_service_split(uint64_t sid, uint16_t *ps, uint16_t *port)
{
	uint16_t s = (uint16_t)(sid >> 16);

	if (sid >> 32 ||
	    (s != CM_MAD_PS_TCP && s != CM_MAD_PS_UDP && s != CM_MAD_PS_IB))
		return -EINVAL;
	*ps = s;
	*port = (uint16_t)sid;
	return 0;
}

/* An address's 16 bytes as the cma_hdr holds it, and its port. */
static int ip_of(const struct sockaddr *sa, uint8_t ip[16], uint16_t *port)
{
	memset(ip, 0, 16);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		memcpy(ip + 12, &in->sin_addr, 4);
		*port = in->sin_port;
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
			(const struct sockaddr_in6 *)sa;

		memcpy(ip, &in6->sin6_addr, 16);
		*port = in6->sin6_port;
		return 6;
	}
	return -EINVAL;
}

int cm_mad_cma_put(uint8_t pdata[CM_MAD_CMA_HDR_SIZE],
		   const struct sockaddr *src, const struct sockaddr *dst)
{
	uint16_t sport = 0, dport = 0;
	int sv = ip_of(src, pdata + 4, &sport);
	int dv = ip_of(dst, pdata + 20, &dport);

	if (sv < 0 || sv != dv)
		return -EINVAL;
	pdata[0] = CM_MAD_CMA_VERSION;
	pdata[1] = (uint8_t)(sv << 4);
	memcpy(pdata + 2, &sport, 2);
	return 0;
}

static void addr_from(const uint8_t ip[16], int ver, uint16_t port,
		      struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (ver == 4) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = port;
		memcpy(&in->sin_addr, ip + 12, 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = port;
		memcpy(&in6->sin6_addr, ip, 16);
	}
}

int cm_mad_cma_get(const uint8_t pdata[CM_MAD_CMA_HDR_SIZE], uint16_t dst_port,
		   struct sockaddr_storage *src, struct sockaddr_storage *dst)
{
	int ver = pdata[1] >> 4;
	uint16_t sport;

	if (pdata[0] != CM_MAD_CMA_VERSION || (ver != 4 && ver != 6))
		return -EPROTO;
	memcpy(&sport, pdata + 2, 2);
	addr_from(pdata + 4, ver, sport, src);
	addr_from(pdata + 20, ver, dst_port, dst);
	return 0;
}
