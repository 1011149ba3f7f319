// SPDX-License-Identifier: MIT
/*
 * The RoCEv2 codec's bytes for checkers that are not the codec
 * (roce_wire.py: zlib's CRC-32, tshark), and the codec's verdicts on
 * bytes it did not write:
 *   roce_gen write FILE   every opcode over IPv4 and IPv6, several
 *			   payload lengths, IPv4 IDs and DF, as a pcap
 *			   (Ethernet) file; one line per packet on stdout:
 *			   "opcode dqpn psn len" as built
 *   roce_gen parse FILE   each frame of a pcap file parsed with the
 *			   addressing its own IP and UDP headers give; one
 *			   line per frame: "verdict opcode dqpn psn len"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roce.h"

static uint8_t frame[14 + 48 + 8192];

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void record(FILE *f, const uint8_t *fr, uint32_t n)
{
	static uint32_t t;
	uint32_t rec[4] = {++t, 0, n, n};

	fwrite(rec, sizeof(rec), 1, f);
	fwrite(fr, n, 1, f);
}

/* One packet framed: Ethernet, IP, UDP, the codec's UDP payload. */
static void emit(FILE *f, const struct sv_roce_pkt *p,
		 const struct sv_roce_ip *ip)
{
	bool v4 = sv_roce_ip_is_v4(ip);
	uint32_t iph = v4 ? SV_ROCE_IP4_UDP : SV_ROCE_IP6_UDP;
	uint8_t *ib = frame + 14 + iph;
	int n = sv_roce_build(ib, sizeof(frame) - 14 - iph, p, ip);

	if (n < 0) {
		fprintf(stderr, "roce_gen: build %#x: %d\n", p->opcode, n);
		exit(1);
	}
	memset(frame, 0, 14);
	frame[0] = frame[6] = 0x02;
	frame[5] = 2;
	frame[11] = 1;
	put16(frame + 12, v4 ? 0x0800 : 0x86dd);
	sv_roce_ip_udp_put(frame + 14, ip, (uint32_t)n);
	if (!v4)
		put16(frame + 14 + 40 + 6,
		      sv_roce_udp6_csum(frame + 14, (uint32_t)n));
	record(f, frame, 14 + iph + (uint32_t)n);
	printf("%u %u %u %u\n", p->opcode, p->dqpn, p->psn, p->len);
}

static int do_write(const char *path)
{
	static const uint32_t lens[] = {0, 1, 2, 3, 4, 1024};
	static uint8_t payload[1024];
	uint32_t gh[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
	FILE *f = fopen(path, "wb");
	uint32_t seq = 0;

	if (!f) {
		perror(path);
		return 1;
	}
	fwrite(gh, sizeof(gh), 1, f);
	for (uint32_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 13 + 5);
	for (int op = 0; op < 256; op++) {
		uint32_t m = sv_roce_op_mask((uint8_t)op);

		if (!m)
			continue;
		for (int v6 = 0; v6 < 2; v6++) {
			for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]);
			     l++) {
				struct sv_roce_ip ip = {.sport = 49152 + seq};
				struct sv_roce_pkt p = {
					.opcode = (uint8_t)op,
					.se = seq & 1,
					.ack_req = (seq >> 1) & 1,
					.pkey = 0xffff,
					.dqpn = 0x10000 + seq,
					.psn = (0xfffff0 + seq) & 0xffffff,
					.srqn = 0x42,
					.qkey = 0x11111111,
					.src_qpn = 0x99,
					.reth = {0x7f0000001000ull + seq,
						 0x1234, lens[l]},
					.atomic = {.va = 0x7f0000002000ull,
						   .rkey = 0x5678,
						   .swap_add = 5,
						   .compare = 9},
					.syndrome = 0x1f,
					.msn = seq,
					.orig = 0x0102030405060708ull,
					.imm_be = 0xaabbccdd,
					.inv_rkey = 0xfeed,
				};

				if (!(m & SV_RH_PAYLOAD) && l)
					break;
				p.payload = payload;
				p.len = (m & SV_RH_PAYLOAD) ? lens[l] : 0;
				if (v6) {
					memcpy(ip.src,
					       "\xfd\0\0\0\0\0\0\0\0\0\0\0\0\0"
					       "\0\1",
					       16);
					memcpy(ip.dst,
					       "\xfd\0\0\0\0\0\0\0\0\0\0\0\0\0"
					       "\0\2",
					       16);
				} else {
					memcpy(ip.src,
					       "\0\0\0\0\0\0\0\0\0\0\xff\xff"
					       "\x0a\x4d\0\1",
					       16);
					memcpy(ip.dst,
					       "\0\0\0\0\0\0\0\0\0\0\xff\xff"
					       "\x0a\x4d\0\2",
					       16);
					/* IDs as rxe's, DF clear now and then
					 */
					ip.ip_id = (uint16_t)(seq * 40503u);
					ip.no_df = seq % 5 == 0;
				}
				ip.ttl = 0; /* 64: tshark warns of low ones */
				emit(f, &p, &ip);
				seq++;
			}
		}
	}
	return fclose(f) ? 1 : 0;
}

/* The addressing of a frame's IP and UDP headers; its UDP payload. */
static int frame_ip(const uint8_t *fr, uint32_t n, struct sv_roce_ip *ip,
		    const uint8_t **pl, uint32_t *pn)
{
	const uint8_t *h = fr + 14, *u;
	uint16_t ulen;

	memset(ip, 0, sizeof(*ip));
	if (n < 14 + 28)
		return -1;
	if (fr[12] == 0x08 && fr[13] == 0x00) {
		memcpy(ip->src + 10, "\xff\xff", 2);
		memcpy(ip->dst + 10, "\xff\xff", 2);
		memcpy(ip->src + 12, h + 12, 4);
		memcpy(ip->dst + 12, h + 16, 4);
		ip->ip_id = (uint16_t)(h[4] << 8 | h[5]);
		ip->no_df = !(h[6] & 0x40);
		ip->ttl = h[8];
		u = h + 20;
	} else {
		if (n < 14 + 48)
			return -1;
		memcpy(ip->src, h + 8, 16);
		memcpy(ip->dst, h + 24, 16);
		ip->ttl = h[7];
		u = h + 40;
	}
	ip->sport = (uint16_t)(u[0] << 8 | u[1]);
	ip->dport = (uint16_t)(u[2] << 8 | u[3]);
	ulen = (uint16_t)(u[4] << 8 | u[5]);
	if (ulen < 8 || u + ulen > fr + n)
		return -1;
	*pl = u + 8;
	*pn = ulen - 8u;
	return 0;
}

static int do_parse(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint32_t gh[6], rec[4];

	if (!f || fread(gh, sizeof(gh), 1, f) != 1) {
		perror(path);
		return 1;
	}
	while (fread(rec, sizeof(rec), 1, f) == 1) {
		struct sv_roce_ip ip;
		struct sv_roce_pkt p = {0};
		const uint8_t *pl;
		uint32_t pn;
		uint8_t *b;
		enum sv_roce_verdict v;

		if (rec[2] > sizeof(frame) || fread(frame, rec[2], 1, f) != 1) {
			fprintf(stderr, "roce_gen: %s: bad record\n", path);
			return 1;
		}
		if (frame_ip(frame, rec[2], &ip, &pl, &pn)) {
			printf("frame -1 0 0 0\n");
			continue;
		}
		/* exactly the UDP payload: past it is ASan's */
		b = malloc(pn ? pn : 1);
		memcpy(b, pl, pn);
		v = sv_roce_parse(b, pn, &ip, &p);
		printf("%s %d %u %u %u\n", sv_roce_verdict_names[v],
		       v ? -1 : p.opcode, p.dqpn, p.psn, p.len);
		free(b);
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "write"))
		return do_write(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "parse"))
		return do_parse(argv[2]);
	fprintf(stderr, "usage: roce_gen write|parse FILE\n");
	return 2;
}
