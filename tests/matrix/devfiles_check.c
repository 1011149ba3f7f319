// SPDX-License-Identifier: MIT
/*
 * The matrix's devfiles row: run under softverbs-run, reads every device's
 * kernel files the way programs do (fopen, open, stat, access, opendir,
 * realpath, readlink) and checks each against what the verbs answer, so
 * the files can never say something ibv_query_port does not.  Prints
 * "devfiles: N checks passed" and exits 0, else names the first mismatch
 * and exits 1.
 */
#include <dirent.h>
#include <errno.h>
#include <endian.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SYS "/sys/class/infiniband/"

static int checks;

__attribute__((noreturn, format(printf, 1, 2))) static void
fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "devfiles_check: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* The file's first line, without its newline (fopen's path). */
static void read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");

	if (!f)
		fail("fopen %s: %m", path);
	if (!fgets(buf, (int)size, f))
		fail("%s is empty", path);
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

static void expect(const char *path, const char *want)
{
	char got[256];

	read_line(path, got, sizeof(got));
	if (strcmp(got, want))
		fail("%s says \"%s\", the verbs \"%s\"", path, got, want);
	checks++;
}

__attribute__((format(printf, 2, 3))) static void expectf(const char *path,
							  const char *fmt, ...)
{
	char want[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	expect(path, want);
}

/* gid_attrs/types/N and gid_attrs/ndevs/N, as ibv_query_gid_ex says:
 * a file for each entry it answers, and none for an empty one. */
static void check_gid_attrs(struct ibv_context *ctx, const char *dir,
			    uint8_t port, int len)
{
	char path[PATH_MAX + 64], ifname[IF_NAMESIZE];

	for (int i = 0; i < len; i++) {
		struct ibv_gid_entry e;
		int err = ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0);

		snprintf(path, sizeof(path), "%s/gid_attrs/types/%d", dir, i);
		if (err == ENODATA) {
			if (!access(path, F_OK))
				fail("%s exists for an empty GID", path);
			checks++;
			continue;
		}
		if (err)
			fail("ibv_query_gid_ex %d: %s", i, strerror(err));
		expect(path, e.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2"
								: "IB/RoCE v1");
		snprintf(path, sizeof(path), "%s/gid_attrs/ndevs/%d", dir, i);
		if (!e.ndev_ifindex) {
			if (!access(path, F_OK))
				fail("%s exists for a GID of no netdev", path);
			checks++;
		} else if (!if_indextoname(e.ndev_ifindex, ifname)) {
			fail("netdev %u of GID %d: %m", e.ndev_ifindex, i);
		} else {
			expect(path, ifname);
		}
	}
}

static void check_port(struct ibv_context *ctx, const char *dev, uint8_t port)
{
	struct ibv_port_attr pa;
	char dir[PATH_MAX], path[PATH_MAX + 32];
	union ibv_gid gid;
	__be16 pkey;

	if (ibv_query_port(ctx, port, &pa))
		fail("ibv_query_port: %m");
	snprintf(dir, sizeof(dir), SYS "%s/ports/%u", dev, port);
	snprintf(path, sizeof(path), "%s/lid", dir);
	expectf(path, "0x%x", pa.lid);
	snprintf(path, sizeof(path), "%s/sm_lid", dir);
	expectf(path, "0x%x", pa.sm_lid);
	snprintf(path, sizeof(path), "%s/lid_mask_count", dir);
	expectf(path, "%u", pa.lmc);
	snprintf(path, sizeof(path), "%s/cap_mask", dir);
	expectf(path, "0x%08x", pa.port_cap_flags);
	snprintf(path, sizeof(path), "%s/link_layer", dir);
	expect(path, pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet"
							      : "InfiniBand");
	snprintf(path, sizeof(path), "%s/state", dir);
	if (pa.state != IBV_PORT_ACTIVE)
		fail("port %u is not active", port);
	expect(path, "4: ACTIVE");
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		char want[64];
		const uint8_t *r = gid.raw;

		if (ibv_query_gid(ctx, port, i, &gid))
			fail("ibv_query_gid %d: %m", i);
		snprintf(want, sizeof(want),
			 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
			 "%02x%02x:%02x%02x:%02x%02x",
			 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8],
			 r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
		snprintf(path, sizeof(path), "%s/gids/%d", dir, i);
		expect(path, want);
	}
	check_gid_attrs(ctx, dir, port, pa.gid_tbl_len);
	for (int i = 0; i < pa.pkey_tbl_len; i++) {
		if (ibv_query_pkey(ctx, port, i, &pkey))
			fail("ibv_query_pkey %d: %m", i);
		snprintf(path, sizeof(path), "%s/pkeys/%d", dir, i);
		expectf(path, "0x%04x", be16toh(pkey));
	}
}

/* What UCX does before it opens a device, and what a scanner does. */
static void check_nodes(struct ibv_device *dev)
{
	char path[PATH_MAX], buf[PATH_MAX];
	struct stat st;
	bool listed = false;
	struct dirent *e;
	DIR *d;
	int fd;

	snprintf(path, sizeof(path), "/dev/infiniband/%s", dev->dev_name);
	if (stat(path, &st) || !S_ISCHR(st.st_mode))
		fail("%s is not a character device", path);
	if (access(path, R_OK | W_OK))
		fail("access %s: %m", path);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fail("open %s: %m", path);
	close(fd);
	checks += 3;

	d = opendir(SYS);
	if (!d)
		fail("opendir " SYS ": %m");
	while ((e = readdir(d)))
		listed |= !strcmp(e->d_name, ibv_get_device_name(dev));
	closedir(d);
	if (!listed)
		fail(SYS " does not list %s", ibv_get_device_name(dev));
	checks++;

	/* the /sys name, never where the files really are */
	if (!realpath(dev->ibdev_path, buf) || strcmp(buf, dev->ibdev_path))
		fail("realpath %s: %s", dev->ibdev_path, buf);
	snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev",
		 dev->dev_name);
	expect(path, ibv_get_device_name(dev));
	checks++;
}

/*
 * Another driver's device, before anything else: libfabric's psm
 * providers stat class/infiniband/qib0 and hfi1_0 in every program that
 * loads libfabric.  ENOENT, and no tree made for it (it cost more than
 * the rest of softverbs' start, bench/results/libfabric).
 */
static void check_foreign(void)
{
	static const char *const paths[] = {
		SYS "qib0", SYS "hfi1_0/ports/1/state",
		"/sys/class/infiniband_verbs/uverbs99",
		"/dev/infiniband/umad0"};
	const char *tmp = getenv("TMPDIR");
	char prefix[64];
	struct dirent *e;
	struct stat st;
	DIR *d;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		if (!stat(paths[i], &st) || errno != ENOENT)
			fail("stat %s: not ENOENT (%m)", paths[i]);
		checks++;
	}
	if (!tmp || !*tmp)
		tmp = "/tmp";
	snprintf(prefix, sizeof(prefix), "softverbs-devfiles.%d.",
		 (int)getpid());
	d = opendir(tmp);
	if (!d)
		fail("opendir %s: %m", tmp);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix)))
			fail("a stat of another device made the tree %s/%s",
			     tmp, e->d_name);
	closedir(d);
	checks++;
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	char path[PATH_MAX];
	const char *name;
	uint64_t g;

	check_foreign();
	if (!list || !list[0])
		fail("no device");
	/* every device: softverbs0 and softverbs_roce0 */
	for (int i = 0; list[i]; i++) {
		name = ibv_get_device_name(list[i]);
		ctx = ibv_open_device(list[i]);
		if (!ctx || ibv_query_device(ctx, &da))
			fail("%s: %m", name);
		check_nodes(list[i]);
		snprintf(path, sizeof(path), SYS "%s/fw_ver", name);
		expect(path, da.fw_ver);
		g = be64toh(da.node_guid);
		snprintf(path, sizeof(path), SYS "%s/node_guid", name);
		expectf(path, "%04x:%04x:%04x:%04x", (unsigned int)(g >> 48),
			(unsigned int)(g >> 32) & 0xffff,
			(unsigned int)(g >> 16) & 0xffff,
			(unsigned int)g & 0xffff);
		snprintf(path, sizeof(path), SYS "%s/node_type", name);
		expect(path, "1: CA");
		for (uint8_t p = 1; p <= da.phys_port_cnt; p++)
			check_port(ctx, name, p);
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	printf("devfiles: %d checks passed\n", checks);
	return 0;
}
