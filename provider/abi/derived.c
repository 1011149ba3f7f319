// SPDX-License-Identifier: MIT
/*
 * Verbs built only on other verbs: building an address handle from a
 * received work completion (UD replies) and finding a P_Key's index.  The
 * logic is rdma-core 44's; it reaches the device only through the exported
 * ibv_query_gid, ibv_query_gid_type, ibv_query_pkey and ibv_create_ah.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <linux/ip.h>
#include <netinet/in.h>

#include <infiniband/verbs.h>

#include "export.h"
#include "private_verbs.h"

/* Stop walking a table that never ends: GID and P_Key indexes are 16-bit. */
#define TABLE_WALK_MAX 65536

#define IB_NEXT_HDR 0x1b /* IBA: GRH next header for an IB transport */

/* An error return of a query verb as -1 with errno set. */
static int as_minus1(int ret)
{
	if (ret > 0)
		errno = ret;
	return -1;
}

/* Index of the GID equal to `gid` with sysfs type `type`, or -1 + errno. */
static int find_gid_index(struct ibv_context *context, uint8_t port_num,
			  const union ibv_gid *gid,
			  enum ibv_gid_type_sysfs type)
{
	enum ibv_gid_type_sysfs sgid_type;
	union ibv_gid sgid;
	int i, ret;

	for (i = 0; i < TABLE_WALK_MAX; i++) {
		ret = ibv_query_gid(context, port_num, i, &sgid);
		if (!ret)
			ret = ibv_query_gid_type(context, port_num, i,
						 &sgid_type);
		if (ret)
			return as_minus1(ret);
		if (!memcmp(&sgid, gid, sizeof(*gid)) && sgid_type == type)
			return i;
	}
	errno = ENOENT;
	return -1;
}

static void map_ipv4_to_ipv6(__be32 ipv4, union ibv_gid *gid)
{
	memset(gid->raw, 0, 10);
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	memcpy(&gid->raw[12], &ipv4, 4);
}

static uint16_t ipv4_header_csum(const struct iphdr *h)
{
	uint16_t words[sizeof(*h) / 2];
	uint32_t sum = 0;
	size_t i;

	memcpy(words, h, sizeof(words));
	for (i = 0; i < sizeof(words) / 2; i++)
		sum += words[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum += sum >> 16;
	return (uint16_t)~sum;
}

/*
 * 4 or 6: which header the 40-byte GRH buffer holds.  RoCE v2 over IPv4
 * puts the 20-byte IP header in the last 20 bytes; trust it when it has
 * no options and its checksum is right (rdma-core's rule).
 */
static int grh_ip_version(const struct ibv_grh *grh)
{
	int v6 = (be32toh(grh->version_tclass_flow) >> 28) & 0xf;
	struct iphdr ip4;
	uint16_t check;

	memcpy(&ip4, (const char *)grh + 20, sizeof(ip4));
	if (v6 != 6) {
		if (ip4.version == 4)
			return 4;
		errno = EPROTONOSUPPORT;
		return -1;
	}
	if (ip4.ihl != 5)
		return 6;
	check = ip4.check;
	ip4.check = 0;
	return ipv4_header_csum(&ip4) == check ? 4 : 6;
}

static int ah_attr_from_ipv4(struct ibv_context *context,
			     struct ibv_ah_attr *ah_attr,
			     const struct ibv_grh *grh, uint8_t port_num)
{
	union ibv_gid our_gid;
	struct iphdr ip4;
	int idx;

	memcpy(&ip4, (const char *)grh + 20, sizeof(ip4));
	/* No point searching multicast GIDs in the GID table. */
	if (IN_CLASSD(be32toh(ip4.daddr))) {
		errno = EINVAL;
		return -1;
	}
	map_ipv4_to_ipv6(ip4.daddr, &our_gid);
	idx = find_gid_index(context, port_num, &our_gid,
			     IBV_GID_TYPE_SYSFS_ROCE_V2);
	/* softverbs0's GIDs say IB/RoCE v1, yet with
	 * SOFTVERBS_TRANSPORT=roce its UD QPs receive RoCEv2 over IPv4
	 * (udaddy's server answers from the wc): the GID of that address */
	if (idx < 0) /* the walk ends at the table's end, errno EINVAL */
		idx = find_gid_index(context, port_num, &our_gid,
				     IBV_GID_TYPE_SYSFS_IB_ROCE_V1);
	if (idx < 0)
		return idx;

	map_ipv4_to_ipv6(ip4.saddr, &ah_attr->grh.dgid);
	ah_attr->grh.sgid_index = (uint8_t)idx;
	ah_attr->grh.hop_limit = ip4.ttl;
	ah_attr->grh.traffic_class = ip4.tos;
	return 0;
}

static int ah_attr_from_ipv6(struct ibv_context *context,
			     struct ibv_ah_attr *ah_attr,
			     const struct ibv_grh *grh, uint8_t port_num)
{
	enum ibv_gid_type_sysfs type;
	int idx;

	if (grh->dgid.raw[0] == 0xff) {
		errno = EINVAL;
		return -1;
	}
	if (grh->next_hdr == IPPROTO_UDP) {
		type = IBV_GID_TYPE_SYSFS_ROCE_V2;
	} else if (grh->next_hdr == IB_NEXT_HDR) {
		type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	} else {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	idx = find_gid_index(context, port_num, &grh->dgid, type);
	if (idx < 0)
		return idx;

	ah_attr->grh.dgid = grh->sgid;
	ah_attr->grh.sgid_index = (uint8_t)idx;
	ah_attr->grh.hop_limit = grh->hop_limit;
	ah_attr->grh.traffic_class =
		(be32toh(grh->version_tclass_flow) >> 20) & 0xff;
	return 0;
}

/*
 * Fills ah_attr to answer the sender of `wc`.  `grh` (the first 40 bytes
 * of the receive buffer) is read only when wc carries IBV_WC_GRH.
 * Returns 0, or -1 with errno set.  Unlike rdma-core we take flow_label
 * from the GRH only when there is one: grh may be NULL without it.
 */
SV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
				  struct ibv_wc *wc, struct ibv_grh *grh,
				  struct ibv_ah_attr *ah_attr)
{
	int version;

	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;

	ah_attr->is_global = 1;
	ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
	version = grh_ip_version(grh);
	if (version == 4)
		return ah_attr_from_ipv4(context, ah_attr, grh, port_num);
	if (version == 6)
		return ah_attr_from_ipv6(context, ah_attr, grh, port_num);
	return -1;
}

SV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd,
					       struct ibv_wc *wc,
					       struct ibv_grh *grh,
					       uint8_t port_num)
{
	struct ibv_ah_attr ah_attr;

	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &ah_attr))
		return NULL;
	return ibv_create_ah(pd, &ah_attr);
}

/* The index of `pkey` in the port's P_Key table, or -1 with errno set. */
SV_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
				 __be16 pkey)
{
	__be16 pkey_i;
	int i, ret;

	for (i = 0; i < TABLE_WALK_MAX; i++) {
		ret = ibv_query_pkey(context, port_num, i, &pkey_i);
		if (ret)
			return as_minus1(ret);
		if (pkey == pkey_i)
			return i;
	}
	errno = ENOENT;
	return -1;
}
