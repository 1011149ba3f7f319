// SPDX-License-Identifier: MIT
/*
 * The device softverbs0: the device list, contexts, and what they report —
 * device and port attributes, the LID and the GID table (made by
 * transport/addr.c: this host's addresses).  The list's second device,
 * softverbs_roce0, answers from device_roce.c (its context's queries go
 * there: sv_ctx_is_roce).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "transport.h"
#include "verbs.h"

/*
 * The IB vendor id is an IEEE OUI.  0x02xxxx has the U/L bit of its first
 * octet set with Y=Z=0: the "administratively assigned" quadrant of the
 * local space, which the IEEE never assigns (vendors get MA-L OUIs with
 * that bit clear, CIDs are xA-xx-xx), so no vendor owns it and nothing
 * takes a vendor-specific path; "SV" in the other two octets.  The node
 * GUID is in the same local space.
 */
#define SV_VENDOR_ID	  0x025356
#define SV_VENDOR_PART_ID 0x5356
#define SV_HW_VER	  1
#define SV_HW_REV	  "1" /* sysfs: the same */
#define SV_FW_VER	  "1.0.0"

/*
 * The device outlives ibv_free_device_list().  The NULL after it is where
 * rdma-core keeps its verbs_device ops: a stray mlx5dv_is_supported()
 * reads NULL there and says no.
 */
static struct {
	struct ibv_device dev;
	void *null_ops;
} sv_dev = {
	.dev =
		{
			.node_type = IBV_NODE_CA,
			.transport_type = IBV_TRANSPORT_IB,
			.name = SV_DEV_NAME,
			.dev_name = "uverbs0",
			.dev_path = "/sys/class/infiniband_verbs/uverbs0",
			.ibdev_path = "/sys/class/infiniband/" SV_DEV_NAME,
		},
};

/* The RoCEv2 device (device_roce.c), listed when it has a netdev. */
static struct {
	struct ibv_device dev;
	void *null_ops;
} sv_roce_dev = {
	.dev =
		{
			.node_type = IBV_NODE_CA,
			.transport_type = IBV_TRANSPORT_IB,
			.name = SV_ROCE_DEV_NAME,
			.dev_name = "uverbs1",
			.dev_path = "/sys/class/infiniband_verbs/uverbs1",
			.ibdev_path = "/sys/class/infiniband/" SV_ROCE_DEV_NAME,
		},
};

bool sv_ctx_is_roce(const struct ibv_context *c)
{
	return c && c->device && !strcmp(c->device->name, SV_ROCE_DEV_NAME);
}

/* Once-per-process explanation of a refused address: the EINVAL alone
 * says nothing, but a program retrying must not fill stderr. */
__attribute__((format(printf, 1, 2))) static void
say_bad_address(const char *fmt, ...)
{
	static atomic_bool said;
	va_list ap;

	if (atomic_exchange(&said, true) && !sv_debug)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* A LID not this host's: another host's on SOFTVERBS_SUBNET (reached
 * as its address's GID would be), else refused. */
static int lid_check(uint16_t lid, const char *who, bool tcp_ok)
{
	char buf[INET_ADDRSTRLEN];
	struct in_addr in;

	if (!sv_lid_ipv4(lid, &in)) {
		if (sv_subnet_lid_last())
			say_bad_address("softverbs: %s: LID 0x%04x names no "
					"host of SOFTVERBS_SUBNET=%s (its "
					"LIDs: 0x0001..0x%04x)\n",
					who, lid, sv_env_str(SV_ENV_SUBNET),
					sv_subnet_lid_last());
		else
			say_bad_address("softverbs: %s: LID 0x%04x is not "
					"this host's (0x%04x); use a GID (-g) "
					"or set SOFTVERBS_SUBNET to reach "
					"another host\n",
					who, lid, sv_local_lid());
		return EINVAL;
	}
	if (tcp_ok && sv_transport_mode() != SV_TRANSPORT_SHM)
		return 0; /* another host: over TCP (tcp/) */
	if (sv_ipv4_is_local(in))
		return 0; /* another of our addresses there: this host */
	inet_ntop(AF_INET, &in, buf, sizeof(buf));
	say_bad_address("softverbs: %s: LID 0x%04x is host %s's%s\n", who, lid,
			buf,
			!tcp_ok ? "; datagrams reach this host's QPs only"
				: ", and SOFTVERBS_TRANSPORT=shm");
	return EINVAL;
}

int sv_av_check(const struct ibv_ah_attr *a, const char *who, bool tcp_ok)
{
	char buf[INET6_ADDRSTRLEN];
	union sv_sockaddr sa;

	if (a->port_num && a->port_num != 1)
		return EINVAL;
	if (a->is_global) {
		if (a->grh.sgid_index >= SV_GID_TBL_LEN)
			return EINVAL;
		if (sv_gid_is_local(&a->grh.dgid))
			return 0;
		if (tcp_ok && sv_gid_sockaddr(&a->grh.dgid, 0, &sa) &&
		    sv_transport_mode() != SV_TRANSPORT_SHM)
			return 0; /* another host: over TCP (tcp/) */
		inet_ntop(AF_INET6, a->grh.dgid.raw, buf, sizeof(buf));
		say_bad_address(
			"softverbs: %s: GID %s is not on this host%s\n", who,
			buf,
			!tcp_ok ? "; datagrams reach this host's QPs only"
			: sv_transport_mode() == SV_TRANSPORT_SHM
				? " and SOFTVERBS_TRANSPORT=shm"
				: "; only an IP address's GID (::ffff:a.b.c.d "
				  "or a global IPv6 address) names another "
				  "host");
		return EINVAL;
	}
	if (a->dlid == sv_local_lid())
		return 0;
	return lid_check(a->dlid, who, tcp_ok);
}

int sv_port_mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128 << mtu : 0;
}

struct ibv_device **sv_get_device_list(int *num)
{
	struct ibv_device **list = calloc(3, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	sv_debug_init();
	/* a bad SOFTVERBS_* value of a REFUSE row (env.c said which): no
	 * device, and the program's own "no device" path runs */
	if (sv_env_refused()) {
		if (num)
			*num = 0;
		errno = EINVAL;
		return list;
	}
	list[0] = &sv_dev.dev;
	if (sv_roce_netdev_pick())
		list[1] = &sv_roce_dev.dev;
	if (num)
		*num = list[1] ? 2 : 1;
	return list;
}

void sv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *sv_get_device_name(struct ibv_device *dev)
{
	return dev->name;
}

__be64 sv_get_device_guid(struct ibv_device *dev)
{
	return htobe64(dev == &sv_roce_dev.dev ? sv_roce_node_guid()
					       : sv_node_guid());
}

int sv_get_device_index(struct ibv_device *dev)
{
	return dev == &sv_dev.dev ? 0 : dev == &sv_roce_dev.dev ? 1 : -1;
}

/*
 * The sysfs root, as rdma-core gives it: $SYSFS_PATH without trailing
 * slashes, else "/sys".  librdmacm reads its ABI version below it at
 * start-up; there is none here, which it takes as a machine without the
 * RDMA CM and fails its rdma_cm calls cleanly.
 */
static char sysfs_path[256];

static void sysfs_path_init(void)
{
	const char *e = getenv("SYSFS_PATH");
	size_t n;

	if (!e || !*e || strlen(e) >= sizeof(sysfs_path))
		e = "/sys";
	n = strlen(e);
	while (n > 1 && e[n - 1] == '/')
		n--;
	memcpy(sysfs_path, e, n);
	sysfs_path[n] = '\0';
}

const char *sv_get_sysfs_path(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, sysfs_path_init);
	return sysfs_path;
}

/* ibv_devinfo reads a few sysfs files of the device; we have no sysfs
 * entry, so answer those here and pass every other path to the kernel. */
int sv_read_sysfs_file(const char *dir, const char *file, char *buf,
		       size_t size)
{
	static const struct {
		const char *file, *value;
	} ours[] = {
		{"board_id", "SOFTVERBS"},
		{"node_desc", "softverbs userspace RDMA device"},
		{"hw_rev", SV_HW_REV},
		{"hca_type", "softverbs"},
	};
	char path[512];
	ssize_t n;
	int fd;

	if (!dir || !file || (!buf && size)) {
		errno = EINVAL; /* rdma-core would read "(null)/...": none */
		return -1;
	}
	if (!strcmp(dir, sv_dev.dev.ibdev_path) ||
	    !strcmp(dir, sv_roce_dev.dev.ibdev_path)) {
		for (unsigned int i = 0; i < ARRAY_SIZE(ours); i++) {
			if (!strcmp(file, ours[i].file)) {
				snprintf(buf, size, "%s", ours[i].value);
				return (int)strlen(buf);
			}
		}
		errno = ENOENT;
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size);
	close(fd);
	if (n < 0)
		return -1;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	else if ((size_t)n < size)
		buf[n] = '\0';
	return (int)n;
}

const uint32_t sv_obj_max[SV_OBJ_NUM] = {
	[SV_OBJ_PD] = SV_MAX_PD, [SV_OBJ_CQ] = SV_MAX_CQ,
	[SV_OBJ_QP] = SV_MAX_QP, [SV_OBJ_SRQ] = SV_MAX_SRQ,
	[SV_OBJ_AH] = SV_MAX_AH,
};

/*
 * Only what is true: RNR NAKs are generated (resp.c), the system image
 * GUID is reported, modify_qp takes IBV_QP_CUR_STATE (qp_state.c), the
 * port's state changes would raise events (it never changes: always
 * ACTIVE), ibv_modify_srq resizes (srq.c, issue 10), and XRC domains,
 * SRQs and QPs work (xrc.c), memory windows of type 1 and type 2B (mw.c:
 * a type 2 window is bound to a QP and checked against its number and
 * its PD, as rxe's, which says 2B too; 2A checks the number alone).  No
 * port shutdown, P_Key/Q_Key
 * violation counters, automatic path migration, or notification after N
 * completions (no verb asks it).
 */
#define SV_DEVICE_CAP_FLAGS                                               \
	(IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID |          \
	 IBV_DEVICE_CURR_QP_STATE_MOD | IBV_DEVICE_PORT_ACTIVE_EVENT |    \
	 IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_XRC | IBV_DEVICE_MEM_WINDOW | \
	 IBV_DEVICE_MEM_WINDOW_TYPE_2B)

static void fill_device_attr(struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", SV_FW_VER);
	a->node_guid = htobe64(sv_node_guid());
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = SV_MAX_MR_SIZE;
	a->page_size_cap = 0xfffff000; /* 4 KiB .. 2 GiB: any page */
	a->vendor_id = SV_VENDOR_ID;
	a->vendor_part_id = SV_VENDOR_PART_ID;
	a->hw_ver = SV_HW_VER;
	a->max_qp = SV_MAX_QP;
	a->max_qp_wr = SV_MAX_QP_WR;
	a->device_cap_flags = SV_DEVICE_CAP_FLAGS;
	a->max_sge = SV_MAX_SGE;
	a->max_sge_rd = SV_MAX_SGE; /* a read scatters into its send SGEs */
	a->max_cq = SV_MAX_CQ;
	a->max_cqe = SV_MAX_CQE;
	a->max_mr = SV_MAX_MR - 1;
	a->max_pd = SV_MAX_PD;
	/* reads/atomics in flight per QP (req.c limits them to the QP's
	 * max_rd_atomic, qp_attr.c that to SV_MAX_RD_ATOM); a responder
	 * answers each at once and keeps SV_MAX_RD_ATOM atomics' answers */
	a->max_qp_rd_atom = SV_MAX_RD_ATOM;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = SV_MAX_RD_ATOM * a->max_qp;
	a->max_qp_init_rd_atom = SV_MAX_RD_ATOM;
	/* CPU atomic instructions on the target's memory, whoever executes
	 * them (req.c, resp.c): atomic with the CPU's accesses too */
	a->atomic_cap = IBV_ATOMIC_GLOB;
	/* multicast among this host's processes (mcast.c enforces them:
	 * ENOMEM past them, as rxe) */
	a->max_mcast_grp = SV_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = SV_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = SV_MAX_TOTAL_MCAST_QP_ATTACH;
	a->max_mw = SV_MAX_MW - 1; /* mw.c: EINVAL past it */
	/* no EE contexts, RDDs, raw QPs or FMRs: zero, as their verbs
	 * fail */
	a->max_pkeys = 1;
	a->max_ah = SV_MAX_AH; /* ah.c: ENOMEM past it */
	/* srq.c enforces them (EINVAL past them, ENOMEM past max_srq) */
	a->max_srq = SV_MAX_SRQ;
	a->max_srq_wr = SV_MAX_SRQ_WR;
	a->max_srq_sge = SV_MAX_SRQ_SGE;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

/* ibv_query_device: 0 or a positive errno. */
int sv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	if (!ctx || !attr)
		return EINVAL;
	fill_device_attr(attr);
	if (sv_ctx_is_roce(ctx)) {
		/* rxe's: the netdev's MAC's EUI-64; no UD multicast */
		attr->node_guid = attr->sys_image_guid =
			htobe64(sv_roce_node_guid());
		attr->max_mcast_grp = attr->max_mcast_qp_attach = 0;
		attr->max_total_mcast_qp_attach = 0;
	}
	return 0;
}

/*
 * The extended attributes: orig_attr is ibv_query_device's, the flags
 * the same bits, ODP's caps (odp.c), and every extended capability we
 * do not have zero (no TSO, RSS, WQs, packet pacing, raw packets, tag
 * matching, CQ moderation, PCI atomics).  Device memory: max_dm_size
 * (dm.c).  attr_size is the caller's structure (older binaries have a
 * shorter one): we fill that much.
 */
int sv_query_device_ex(struct ibv_context *c,
		       const struct ibv_query_device_ex_input *in,
		       struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex a;

	if (in && in->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	memset(&a, 0, sizeof(a));
	if (sv_query_device(c, &a.orig_attr))
		return EINVAL;
	/* completion timestamps are CLOCK_MONOTONIC ns, all 64 bits: a
	 * 1 GHz "HCA clock" (cq.c) */
	a.completion_timestamp_mask = ~0ull;
	a.hca_core_clock = 1000000; /* kHz */
	a.device_cap_flags_ex = a.orig_attr.device_cap_flags;
	sv_odp_fill_caps(&a.odp_caps); /* no device_cap_flags bit says ODP */
	a.xrc_odp_caps = sv_odp_xrc_caps();
	if (sv_ctx_is_roce(c)) /* RC and XRC */
		a.odp_caps.per_transport_caps.uc_odp_caps =
			a.odp_caps.per_transport_caps.ud_odp_caps = 0;
	a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
	a.max_dm_size = SV_MAX_DM_SIZE;
	memcpy(attr, &a, attr_size < sizeof(a) ? attr_size : sizeof(a));
	return 0;
}

/*
 * ibv_query_rt_values_ex: the "HCA clock" of the completion timestamps
 * (CLOCK_MONOTONIC ns), as mlx5 gives its counter: tv_sec 0, the raw
 * 64-bit value in tv_nsec.  comp_mask in: what is asked; out: what was
 * filled (bits we do not know are left out, not refused).
 */
int sv_query_rt_values(struct ibv_context *c, struct ibv_values_ex *values)
{
	uint32_t asked = values->comp_mask;

	values->comp_mask = 0;
	if (asked & IBV_VALUES_MASK_RAW_CLOCK) {
		values->raw_clock.tv_sec = 0;
		values->raw_clock.tv_nsec = (long)sv_now_ns();
		values->comp_mask |= IBV_VALUES_MASK_RAW_CLOCK;
	}
	return 0;
}

static void fill_port_attr(struct ibv_port_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_4096;
	a->gid_tbl_len = SV_GID_TBL_LEN;
	a->port_cap_flags = IBV_PORT_SM;
	a->max_msg_sz = SV_MAX_MSG;
	a->bad_pkey_cntr = 0;
	a->qkey_viol_cntr = 0;
	a->pkey_tbl_len = 1;
	a->lid = sv_local_lid();
	a->sm_lid = a->lid;
	a->lmc = 0;
	a->max_vl_num = 1;
	a->sm_sl = 0;
	a->subnet_timeout = 18;
	a->init_type_reply = 0;
	a->active_width = 2;  /* 4X */
	a->active_speed = 32; /* EDR */
	a->phys_state = 5;    /* LinkUp */
	a->link_layer = IBV_LINK_LAYER_INFINIBAND;
}

int sv_query_port(struct ibv_context *c, uint8_t port,
		  struct ibv_port_attr *attr, size_t attr_len)
{
	struct ibv_port_attr a;

	if (sv_ctx_is_roce(c))
		return sv_roce_query_port(port, attr, attr_len);
	if (port != 1)
		return EINVAL;
	fill_port_attr(&a);
	memcpy(attr, &a, attr_len < sizeof(a) ? attr_len : sizeof(a));
	return 0;
}

int sv_query_gid(struct ibv_context *c, uint8_t port, int index,
		 union ibv_gid *gid)
{
	union ibv_gid gids[SV_GID_TBL_LEN];

	if (sv_ctx_is_roce(c))
		return sv_roce_query_gid(port, index, gid);
	if (port != 1 || index < 0 || index >= SV_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	sv_gid_table(gids); /* unused entries are zero, as on hardware */
	*gid = gids[index];
	return 0;
}

int sv_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
	if (port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xffff);
	return 0;
}

int sv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index,
		      enum ibv_gid_type_sysfs *type)
{
	if (sv_ctx_is_roce(c))
		return sv_roce_query_gid_type(port, index, type);
	if (port != 1 || index >= SV_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

int sv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index,
		    struct ibv_gid_entry *entry, uint32_t flags,
		    size_t entry_size)
{
	union ibv_gid gids[SV_GID_TBL_LEN];
	int n;

	if (sv_ctx_is_roce(c))
		return sv_roce_query_gid_ex(port, index, entry, flags,
					    entry_size);
	if (flags || entry_size < sizeof(*entry))
		return EINVAL;
	if (port != 1 || index >= SV_GID_TBL_LEN)
		return EINVAL;
	n = sv_gid_table(gids);
	if ((int)index >= n)
		return ENODATA;
	memset(entry, 0, sizeof(*entry));
	entry->gid = gids[index];
	entry->gid_index = index;
	entry->port_num = 1;
	entry->gid_type = IBV_GID_TYPE_IB;
	return 0;
}

ssize_t sv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *entries,
			   size_t max, uint32_t flags, size_t entry_size)
{
	union ibv_gid gids[SV_GID_TBL_LEN];
	int n;

	if (sv_ctx_is_roce(c))
		return sv_roce_query_gid_table(entries, max, flags, entry_size);
	if (flags || entry_size < sizeof(*entries))
		return -EINVAL;
	n = sv_gid_table(gids);
	if ((size_t)n > max)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		struct ibv_gid_entry *e =
			(void *)((char *)entries + i * entry_size);

		memset(e, 0, entry_size);
		e->gid = gids[i];
		e->gid_index = i;
		e->port_num = 1;
		e->gid_type = IBV_GID_TYPE_IB;
	}
	return n;
}

/* Fork: as rdma-core on a kernel with copy-on-fork of pinned pages (5.13+),
 * nothing is needed and nothing is done: registered memory is not
 * MADV_DONTFORK'd (we pin nothing; the engine copies through the
 * registering process's own mappings), so a child may read it as usual. */
int sv_fork_init(void)
{
	return 0;
}

enum ibv_fork_status sv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

int sv_dontfork_range(void *base, size_t size)
{
	return 0;
}

int sv_dofork_range(void *base, size_t size)
{
	return 0;
}
