// SPDX-License-Identifier: MIT
/*
 * The IB CM's MADs passed between a host's processes, the wire part
 * (provider/wire/cm_pass.c) alone: which name a QP1 datagram goes to
 * (its service for a REQ or SIDR REQ, else the comm ID it names as the
 * receiver's), what is not passed at all (not QP1, not a CM MAD, a
 * length other than 256, an attribute the CM does not speak, comm ID 0,
 * a service outside rdma_cm's), every truncation refused in bounds, and
 * the send: the header as the owner reads it, a listener's name at the
 * address first then at any, and -ECONNREFUSED when nobody holds it.
 * The owner's side (credentials, the header against the MAD) is
 * roce.netns's rdma_cm_pass_hostile.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cm_pass.h"
#include "roce.h"
#include "sv_test.h"

#define PKT_MAX SV_CM_PASS_PKT_MAX

/* A RoCEv2 UD SEND to dqpn carrying a 256-byte MAD of class cls and
 * attribute attr: MAD bytes 24-27 local, 28-31 remote, 32-39 sid. */
static int mad_pkt(uint8_t *out, uint32_t dqpn, uint8_t cls, uint16_t attr,
		   uint32_t local, uint32_t remote, uint64_t sid)
{
	uint8_t mad[256] = {1, cls, 2, 3};
	struct sv_roce_pkt p = {.opcode = SV_IB_UD | SV_IB_SEND_ONLY,
				.pkey = 0xffff,
				.dqpn = dqpn,
				.qkey = 0x80010000u,
				.src_qpn = 1,
				.payload = mad,
				.len = sizeof(mad)};
	struct sv_roce_ip ip = {.sport = 0xd872};
	uint32_t v;
	uint64_t s = htobe64(sid);

	mad[16] = (uint8_t)(attr >> 8);
	mad[17] = (uint8_t)attr;
	v = htobe32(local);
	memcpy(mad + 24, &v, 4);
	v = htobe32(remote);
	memcpy(mad + 28, &v, 4);
	memcpy(mad + 32, &s, 8);
	return sv_roce_build(out, PKT_MAX, &p, &ip);
}

SV_TEST(a_req_goes_by_its_service)
{
	uint8_t b[PKT_MAX];
	int n = mad_pkt(b, 1, 7, 0x0010, 5, 0, 0x01060000ull | 7471);
	struct sv_cm_pass_key k;

	ASSERT_GE(n, 0);
	k = sv_cm_pass_key_of(b, (size_t)n);
	ASSERT_EQ(k.by, SV_CM_PASS_BY_SERVICE);
	ASSERT_EQ(k.ps, 0x0106);
	ASSERT_EQ(k.port, 7471);
	n = mad_pkt(b, 1, 7, 0x0017, 5, 0, 0x01110000ull | 9);
	k = sv_cm_pass_key_of(b, (size_t)n);
	ASSERT_EQ(k.by, SV_CM_PASS_BY_SERVICE);
	ASSERT_EQ(k.ps, 0x0111);
	ASSERT_EQ(k.port, 9);
}

SV_TEST(the_rest_go_by_the_comm_id_they_name_as_ours)
{
	static const uint16_t by_remote[] = {0x0011, 0x0012, 0x0013,
					     0x0014, 0x0015, 0x0016};
	uint8_t b[PKT_MAX];
	struct sv_cm_pass_key k;
	int n;

	for (size_t i = 0; i < sizeof(by_remote) / sizeof(by_remote[0]); i++) {
		n = mad_pkt(b, 1, 7, by_remote[i], 0x11112222, 0xabcd0001, 0);
		k = sv_cm_pass_key_of(b, (size_t)n);
		ASSERT_EQ(k.by, SV_CM_PASS_BY_ID);
		ASSERT_EQ(k.id, 0xabcd0001);
	}
	/* a SIDR REP: the request ID (its first field) is the asker's */
	n = mad_pkt(b, 1, 7, 0x0018, 0xbeef0003, 0x1234, 0);
	k = sv_cm_pass_key_of(b, (size_t)n);
	ASSERT_EQ(k.by, SV_CM_PASS_BY_ID);
	ASSERT_EQ(k.id, 0xbeef0003);
}

SV_TEST(what_names_no_owner_is_not_passed)
{
	uint8_t b[PKT_MAX];
	int n;

	n = mad_pkt(b, 2, 7, 0x0010, 5, 0, 0x01060000); /* not QP1 */
	ASSERT_EQ(sv_cm_pass_key_of(b, (size_t)n).by, SV_CM_PASS_NONE);
	n = mad_pkt(b, 1, 1, 0x0010, 5, 0, 0x01060000); /* class SMP */
	ASSERT_EQ(sv_cm_pass_key_of(b, (size_t)n).by, SV_CM_PASS_NONE);
	n = mad_pkt(b, 1, 7, 0x0019, 5, 6, 0); /* LAP */
	ASSERT_EQ(sv_cm_pass_key_of(b, (size_t)n).by, SV_CM_PASS_NONE);
	n = mad_pkt(b, 1, 7, 0x0013, 5, 0, 0); /* a REP naming comm ID 0 */
	ASSERT_EQ(sv_cm_pass_key_of(b, (size_t)n).by, SV_CM_PASS_NONE);
	n = mad_pkt(b, 1, 7, 0x0010, 5, 0, 1ull << 40 | 0x01060000);
	ASSERT_EQ(sv_cm_pass_key_of(b, (size_t)n).by, SV_CM_PASS_NONE);
	n = mad_pkt(b, 1, 7, 0x0010, 5, 0, 0x01060000);
	ASSERT_EQ(sv_cm_pass_key_of(b, PKT_MAX + 1).by, SV_CM_PASS_NONE);
}

SV_TEST(every_truncation_is_refused_in_bounds)
{
	uint8_t b[PKT_MAX];
	int n = mad_pkt(b, 1, 7, 0x0010, 5, 0, 0x01060000);

	for (int len = 0; len < n; len++) {
		/* exactly len bytes of heap: ASan sees any read past them */
		uint8_t *t = malloc((size_t)len + 1);

		ASSERT_NOT_NULL(t);
		memcpy(t, b, (size_t)len);
		ASSERT_EQ(sv_cm_pass_key_of(t, (size_t)len).by,
			  SV_CM_PASS_NONE);
		free(t);
	}
}

/* A datagram socket bound to a's name. */
static int bound_to(const struct sockaddr_un *a, socklen_t alen)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ASSERT_GE(fd, 0);
	ASSERT_OK(bind(fd, (const struct sockaddr *)a, alen));
	return fd;
}

SV_TEST(the_owner_gets_the_header_then_the_datagram)
{
	uint16_t port = (uint16_t)(getpid() ^ 0x5a5a), prefix = port ^ 0x77;
	uint32_t at = htonl(0x0a4d0001), peer = htonl(0x0a4d0002);
	uint8_t b[PKT_MAX], got[PKT_MAX + 64];
	struct sv_cm_pass_hdr h;
	struct sv_cm_pass_key k;
	struct sockaddr_un a;
	int out = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), any, one, idf;
	int n = mad_pkt(b, 1, 7, 0x0010, 5, 0, 0x01060000ull | port);
	ssize_t r;

	ASSERT_GE(out, 0);
	k = sv_cm_pass_key_of(b, (size_t)n);
	/* nobody holds it */
	ASSERT_EQ(sv_cm_pass_send(out, &k, b, (size_t)n, peer, at),
		  -ECONNREFUSED);
	/* a listener at any address takes it */
	any = bound_to(&a, sv_cm_pass_service_addr(&a, 0x0106, port, 0));
	ASSERT_OK(sv_cm_pass_send(out, &k, b, (size_t)n, peer, at));
	r = recv(any, got, sizeof(got), MSG_DONTWAIT);
	ASSERT_EQ(r, (ssize_t)sizeof(h) + n);
	memcpy(&h, got, sizeof(h));
	ASSERT_EQ(h.magic, SV_CM_PASS_MAGIC);
	ASSERT_EQ(h.version, SV_CM_PASS_VERSION);
	ASSERT_EQ(h.by, SV_CM_PASS_BY_SERVICE);
	ASSERT_EQ(h.len, n);
	ASSERT_EQ(h.from, peer);
	ASSERT_EQ(h.to, at);
	ASSERT_OK(memcmp(got + sizeof(h), b, (size_t)n));
	/* one bound to the address it came to goes first */
	one = bound_to(&a, sv_cm_pass_service_addr(&a, 0x0106, port, at));
	ASSERT_OK(sv_cm_pass_send(out, &k, b, (size_t)n, peer, at));
	ASSERT_EQ(recv(one, got, sizeof(got), MSG_DONTWAIT),
		  (ssize_t)sizeof(h) + n);
	ASSERT_EQ(recv(any, got, sizeof(got), MSG_DONTWAIT), -1);
	/* by comm ID: to its prefix's name */
	n = mad_pkt(b, 1, 7, 0x0013, 9, (uint32_t)prefix << 16 | 1, 0);
	k = sv_cm_pass_key_of(b, (size_t)n);
	ASSERT_EQ(sv_cm_pass_send(out, &k, b, (size_t)n, peer, at),
		  -ECONNREFUSED);
	idf = bound_to(&a, sv_cm_pass_id_addr(&a, prefix));
	ASSERT_OK(sv_cm_pass_send(out, &k, b, (size_t)n, peer, at));
	ASSERT_EQ(recv(idf, got, sizeof(got), MSG_DONTWAIT),
		  (ssize_t)sizeof(h) + n);
	memcpy(&h, got, sizeof(h));
	ASSERT_EQ(h.by, SV_CM_PASS_BY_ID);
	/* never with no address of ours, nor longer than a MAD's */
	ASSERT_EQ(sv_cm_pass_send(out, &k, b, (size_t)n, peer, 0), -EINVAL);
	ASSERT_EQ(sv_cm_pass_send(out, &k, b, PKT_MAX + 1, peer, at), -EINVAL);
	close(idf);
	close(one);
	close(any);
	close(out);
}
