// SPDX-License-Identifier: MIT
/*
 * The device softverbs_roce0: RoCEv2 presented as the kernel's rxe
 * presents itself (issue 26 item 1, issue 28 item 7).  One port with an
 * Ethernet link layer, bound to one net interface of the host (its
 * netdev): the port's state is the interface's (up and running: ACTIVE),
 * its active MTU the largest IB MTU that fits the interface's MTU with
 * RoCEv2's headers (1024 for 1500), its speed the interface's (ethtool,
 * mapped as the kernel's ib_get_eth_speed).  The GID table is the
 * interface's, as the kernel's RoCE GID cache fills it for rxe: index 0
 * the default GID (fe80::, the EUI-64 of the MAC), then the interface's
 * IPv4 addresses (::ffff:a.b.c.d), then its IPv6 ones that are not
 * link-local; every entry RoCE v2, its netdev the interface.  QPs of the
 * device speak RoCEv2 to every peer (qp.c), RC only; an address vector
 * needs a GRH (EINVAL without, as rxe).  docs/roce.md says why one device
 * and which interface.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"
#include "verbs.h"

/* The netdev, chosen once per process (as an rxe device is bound to
 * one): "" until one is found. */
static pthread_mutex_t pick_lock = PTHREAD_MUTEX_INITIALIZER;
static char netdev[IF_NAMESIZE];

struct nd_state {
	unsigned int ifindex; /* 0: the interface is gone */
	bool up;	      /* IFF_UP and IFF_RUNNING */
	int mtu;
	uint8_t mac[6];
};

static void nd_query(struct nd_state *s)
{
	struct ifreq r;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	memset(s, 0, sizeof(*s));
	if (fd < 0)
		return;
	memset(&r, 0, sizeof(r));
	pthread_mutex_lock(&pick_lock);
	memcpy(r.ifr_name, netdev, sizeof(r.ifr_name));
	pthread_mutex_unlock(&pick_lock);
	if (r.ifr_name[0] && !ioctl(fd, SIOCGIFINDEX, &r)) {
		s->ifindex = (unsigned int)r.ifr_ifindex;
		if (!ioctl(fd, SIOCGIFFLAGS, &r))
			s->up = (r.ifr_flags & (IFF_UP | IFF_RUNNING)) ==
				(IFF_UP | IFF_RUNNING);
		if (!ioctl(fd, SIOCGIFMTU, &r))
			s->mtu = r.ifr_mtu;
		if (!ioctl(fd, SIOCGIFHWADDR, &r))
			memcpy(s->mac, r.ifr_hwaddr.sa_data, 6);
	}
	close(fd);
}

/*
 * The first interface, by index, that is not a loopback and holds an
 * IPv4 address (the address the peer is told, -g); else none, and the
 * device is not listed.  Chosen at the first ibv_get_device_list that
 * finds one, kept for the process.
 */
bool sv_roce_netdev_pick(void)
{
	struct ifaddrs *ifa;
	unsigned int best = 0;
	char name[IF_NAMESIZE] = "";
	bool have;

	pthread_mutex_lock(&pick_lock);
	have = netdev[0] != '\0';
	pthread_mutex_unlock(&pick_lock);
	if (have)
		return true;
	if (getifaddrs(&ifa))
		return false;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		unsigned int idx;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) ||
		    strlen(i->ifa_name) >= sizeof(name))
			continue;
		idx = if_nametoindex(i->ifa_name);
		if (idx && (!best || idx < best)) {
			best = idx;
			snprintf(name, sizeof(name), "%s", i->ifa_name);
		}
	}
	freeifaddrs(ifa);
	pthread_mutex_lock(&pick_lock);
	if (!netdev[0] && name[0])
		memcpy(netdev, name, sizeof(netdev));
	have = netdev[0] != '\0';
	pthread_mutex_unlock(&pick_lock);
	return have;
}

/* EUI-64 of a MAC (addrconf_ifid_eui48): the default GID's interface
 * id and the node GUID, as rxe's. */
static void eui64(const uint8_t mac[6], uint8_t out[8])
{
	memcpy(out, mac, 3);
	out[3] = 0xff;
	out[4] = 0xfe;
	memcpy(out + 5, mac + 3, 3);
	out[0] ^= 2;
}

uint64_t sv_roce_node_guid(void)
{
	struct nd_state s;
	uint8_t g[8];
	uint64_t v;

	nd_query(&s);
	eui64(s.mac, g);
	memcpy(&v, g, 8);
	return be64toh(v);
}

/* The GID table (index 0 always: the default GID); its length. */
static int roce_gids(union ibv_gid *gids, unsigned int *ifindex)
{
	struct ifaddrs *ifa;
	struct nd_state s;
	char name[IF_NAMESIZE];
	int n = 1;

	nd_query(&s);
	*ifindex = s.ifindex;
	memset(gids, 0, sizeof(*gids) * SV_GID_TBL_LEN);
	gids[0].raw[0] = 0xfe;
	gids[0].raw[1] = 0x80;
	eui64(s.mac, &gids[0].raw[8]);
	if (!s.ifindex || !if_indextoname(s.ifindex, name) || getifaddrs(&ifa))
		return n;
	for (int fam = AF_INET; fam; fam = fam == AF_INET ? AF_INET6 : 0) {
		for (struct ifaddrs *i = ifa; i && n < SV_GID_TBL_LEN;
		     i = i->ifa_next) {
			const struct sockaddr_in6 *s6;

			if (!i->ifa_addr || i->ifa_addr->sa_family != fam ||
			    strcmp(i->ifa_name, name))
				continue;
			if (fam == AF_INET) {
				gids[n].raw[10] = gids[n].raw[11] = 0xff;
				memcpy(&gids[n++].raw[12],
				       &((struct sockaddr_in *)i->ifa_addr)
						->sin_addr,
				       4);
				continue;
			}
			s6 = (const struct sockaddr_in6 *)i->ifa_addr;
			if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr) ||
			    IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
				continue;
			memcpy(gids[n++].raw, &s6->sin6_addr, 16);
		}
	}
	freeifaddrs(ifa);
	return n;
}

/* ethtool's speed in Mb/s (0: unknown), as ib_get_eth_speed maps it. */
static void eth_speed(uint8_t *width, uint8_t *speed)
{
	struct ethtool_cmd cmd = {.cmd = ETHTOOL_GSET};
	struct ifreq r;
	uint32_t mbs = 0;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	memset(&r, 0, sizeof(r));
	pthread_mutex_lock(&pick_lock);
	memcpy(r.ifr_name, netdev, sizeof(r.ifr_name));
	pthread_mutex_unlock(&pick_lock);
	r.ifr_data = (char *)&cmd;
	if (fd >= 0 && !ioctl(fd, SIOCETHTOOL, &r))
		/* ethtool_cmd_speed's, without its int shift (UB) */
		mbs = (uint32_t)cmd.speed_hi << 16 | cmd.speed;
	if (fd >= 0)
		close(fd);
	if (!mbs || mbs == (uint32_t)SPEED_UNKNOWN || mbs <= 1000)
		*width = 1, *speed = 1; /* 1X SDR */
	else if (mbs <= 10000)
		*width = 1, *speed = 8; /* 1X FDR10 */
	else if (mbs <= 20000)
		*width = 2, *speed = 2; /* 4X DDR */
	else if (mbs <= 25000)
		*width = 1, *speed = 32; /* 1X EDR */
	else if (mbs <= 40000)
		*width = 2, *speed = 8; /* 4X FDR10 */
	else
		*width = 2, *speed = 32; /* 4X EDR */
}

/* The largest IB MTU whose RoCEv2 packet fits the interface's MTU
 * (iboe_get_mtu: GRH 40, UDP 8, BTH 12, XRC 4, AtomicETH 28, ICRC 4). */
static enum ibv_mtu roce_mtu(int if_mtu)
{
	int room = if_mtu - (40 + 8 + 12 + 4 + 28 + 4);

	for (enum ibv_mtu m = IBV_MTU_4096; m > IBV_MTU_256; m--)
		if (room >= 128 << m)
			return m;
	return IBV_MTU_256;
}

int sv_roce_query_port(uint8_t port, struct ibv_port_attr *attr,
		       size_t attr_len)
{
	struct ibv_port_attr a;
	struct nd_state s;

	if (port != 1)
		return EINVAL;
	nd_query(&s);
	memset(&a, 0, sizeof(a));
	a.state = s.up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	a.phys_state = s.up ? 5 : 3; /* LinkUp, Disabled */
	a.max_mtu = IBV_MTU_4096;
	a.active_mtu = roce_mtu(s.mtu);
	a.gid_tbl_len = SV_GID_TBL_LEN;
	a.max_msg_sz = SV_MAX_MSG;
	a.pkey_tbl_len = 1;
	a.max_vl_num = 1;
	a.subnet_timeout = 0;
	eth_speed(&a.active_width, &a.active_speed);
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
	memcpy(attr, &a, attr_len < sizeof(a) ? attr_len : sizeof(a));
	return 0;
}

int sv_roce_query_gid(uint8_t port, int index, union ibv_gid *gid)
{
	union ibv_gid gids[SV_GID_TBL_LEN];
	unsigned int ifindex;

	if (port != 1 || index < 0 || index >= SV_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	roce_gids(gids, &ifindex); /* unused entries are zero */
	*gid = gids[index];
	return 0;
}

int sv_roce_query_gid_type(uint8_t port, unsigned int index,
			   enum ibv_gid_type_sysfs *type)
{
	union ibv_gid gids[SV_GID_TBL_LEN];
	unsigned int ifindex;

	if (port != 1 || index >= SV_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	/* an empty entry: rdma-core's answer for one (ENODATA below) */
	*type = (int)index < roce_gids(gids, &ifindex)
			? IBV_GID_TYPE_SYSFS_ROCE_V2
			: IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

static void put_entry(struct ibv_gid_entry *e, const union ibv_gid *g,
		      uint32_t index, unsigned int ifindex)
{
	memset(e, 0, sizeof(*e));
	e->gid = *g;
	e->gid_index = index;
	e->port_num = 1;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = ifindex;
}

int sv_roce_query_gid_ex(uint32_t port, uint32_t index,
			 struct ibv_gid_entry *entry, uint32_t flags,
			 size_t entry_size)
{
	union ibv_gid gids[SV_GID_TBL_LEN];
	unsigned int ifindex;

	if (flags || entry_size < sizeof(*entry))
		return EINVAL;
	if (port != 1 || index >= SV_GID_TBL_LEN)
		return EINVAL;
	if ((int)index >= roce_gids(gids, &ifindex))
		return ENODATA;
	put_entry(entry, &gids[index], index, ifindex);
	return 0;
}

ssize_t sv_roce_query_gid_table(struct ibv_gid_entry *entries, size_t max,
				uint32_t flags, size_t entry_size)
{
	union ibv_gid gids[SV_GID_TBL_LEN];
	unsigned int ifindex;
	int n;

	if (flags || entry_size < sizeof(*entries))
		return -EINVAL;
	n = roce_gids(gids, &ifindex);
	if ((size_t)n > max)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		put_entry((void *)((char *)entries + i * entry_size), &gids[i],
			  (uint32_t)i, ifindex);
	return n;
}

/* Once per process: a refusal's reason (a retrying program must not fill
 * stderr). */
static void say_once(const char *msg)
{
	static atomic_bool said;

	if (!atomic_exchange(&said, true) || sv_debug)
		fprintf(stderr, "softverbs: %s: %s\n", SV_ROCE_DEV_NAME, msg);
}

/*
 * An address vector on the Ethernet port: a GRH (rdma_check_ah_attr's
 * EINVAL without one), port 1, a source GID that is in the table, a
 * destination that is an IP address (IPv4-mapped or a global IPv6).
 */
int sv_roce_av_check(const struct ibv_ah_attr *a)
{
	union ibv_gid gids[SV_GID_TBL_LEN];
	unsigned int ifindex;
	struct in6_addr d;

	if (a->port_num && a->port_num != 1)
		return EINVAL;
	if (!a->is_global) {
		say_once("an address vector on an Ethernet port needs a GRH "
			 "(is_global, -g): a LID names nothing here");
		return EINVAL;
	}
	if (a->grh.sgid_index >= roce_gids(gids, &ifindex)) {
		say_once("the source GID index names no GID of the port "
			 "(ibv_devinfo -v lists them)");
		return EINVAL;
	}
	memcpy(&d, a->grh.dgid.raw, 16);
	if (IN6_IS_ADDR_V4MAPPED(&d) ||
	    (!IN6_IS_ADDR_LINKLOCAL(&d) && !IN6_IS_ADDR_MULTICAST(&d) &&
	     !IN6_IS_ADDR_UNSPECIFIED(&d) && !IN6_IS_ADDR_LOOPBACK(&d)))
		return 0;
	say_once("the destination GID is not an IP address the RoCE link can "
		 "reach (an IPv4-mapped GID or a global IPv6 address)");
	return EINVAL;
}

/* RC, UC, UD and XRC speak RoCEv2 (transport/roce/, transport/ud/). */
int sv_roce_qp_type_check(enum ibv_qp_type t)
{
	if (t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_UD ||
	    t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV)
		return 0;
	say_once("only RC, UC, UD and XRC queue pairs speak RoCEv2");
	return EOPNOTSUPP;
}
