// SPDX-License-Identifier: MIT
/*
 * devfiles: libsoftverbs-devfiles.so, LD_PRELOAD'ed by softverbs-run
 * beside our libibverbs.so.1.  Programs that look past libibverbs at the
 * kernel's files of an RDMA device (UCX stat()s /dev/infiniband/uverbs0
 * and reads sysfs before it uses a device) find softverbs0's here: the
 * libc calls that take a path are interposed, and a path under
 * /sys/class/infiniband, /sys/class/infiniband_verbs or /dev/infiniband
 * is served from a private tree this process writes, on the first such
 * call, into $TMPDIR (from what ibv_query_device, ibv_query_port,
 * ibv_query_gid, ibv_query_pkey and ibv_read_ibdev_sysfs_file answer: no
 * value of its own), and removes at exit.  docs/running.md, "Device
 * files", says what is answered and what is not.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* rdma-core's infiniband/driver.h (IBVERBS_PRIVATE_34), which Debian does
 * not ship: our libibverbs answers the sysfs files only it knows. */
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, struct ibv_device *dev,
			      const char *fnfmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The kernel's directories we answer for, whole. */
static const char *const prefixes[] = {
	"/sys/class/infiniband_verbs",
	"/sys/class/infiniband",
	"/dev/infiniband",
};

static pthread_mutex_t tree_lock = PTHREAD_MUTEX_INITIALIZER;
static char root[PATH_MAX / 2]; /* the tree, "" until made */
static pid_t root_owner;	/* the process that removes it */
static int root_fd = -1;	/* its shared flock says it is in use */
static int tree_state;		/* 0 none, 1 made, -1 failed (all ENOENT) */

/* ---- the tree ---- */

__attribute__((format(printf, 3, 4))) static int
put(const char *dir, const char *name, const char *fmt, ...)
{
	char path[PATH_MAX], buf[256];
	va_list ap;
	int fd, n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, n) != n || write(fd, "\n", 1) != 1) {
		close(fd);
		return -EIO;
	}
	return close(fd) ? -errno : 0;
}

__attribute__((format(printf, 3, 4))) static int mkdirf(char *path, size_t size,
							const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, size, fmt, ap);
	va_end(ap);
	return mkdir(path, 0755) && errno != EEXIST ? -errno : 0;
}

/* The kernel's names (drivers/infiniband/core/sysfs.c). */
static const char *state_name(enum ibv_port_state s)
{
	static const char *const n[] = {"NOP",	 "DOWN",   "INIT",
					"ARMED", "ACTIVE", "ACTIVE_DEFER"};

	return (unsigned int)s < 6 ? n[s] : "UNKNOWN";
}

static const char *phys_name(uint8_t s)
{
	static const char *const n[] = {"<unknown>",
					"Sleep",
					"Polling",
					"Disabled",
					"PortConfigurationTraining",
					"LinkUp",
					"LinkErrorRecovery",
					"Phy Test"};

	return s < 8 ? n[s] : "<unknown>";
}

/* "100 Gb/sec (4X EDR)", as the kernel's rate file. */
static void rate_str(const struct ibv_port_attr *pa, char *buf, size_t size)
{
	static const struct {
		uint8_t speed;
		int tenths;
		const char *name;
	} speeds[] = {{1, 25, ""},	  {2, 50, " DDR"},    {4, 100, " QDR"},
		      {8, 100, " FDR10"}, {16, 140, " FDR"},  {32, 250, " EDR"},
		      {64, 500, " HDR"},  {128, 1000, " NDR"}};
	int width = pa->active_width == 2   ? 4
		    : pa->active_width == 4 ? 8
		    : pa->active_width == 8 ? 12
					    : 1;
	int tenths = 25;
	const char *name = "";

	for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
		if (speeds[i].speed == pa->active_speed) {
			tenths = speeds[i].tenths;
			name = speeds[i].name;
		}
	tenths *= width;
	snprintf(buf, size, "%d%s Gb/sec (%dX%s)", tenths / 10,
		 tenths % 10 ? ".5" : "", width, name);
}

/*
 * gid_attrs/types/<i> and gid_attrs/ndevs/<i>, as the kernel's: the type
 * of each GID in the table ("IB/RoCE v1", "RoCE v2"), and the net
 * interface a RoCE GID belongs to.  An empty entry (the kernel's read
 * fails with EINVAL) and a GID with no interface have no file.
 */
static int put_gid_attrs(struct ibv_context *ctx, const char *dir, uint8_t port,
			 int len)
{
	char types[PATH_MAX], ndevs[PATH_MAX];
	int err;

	err = mkdirf(types, sizeof(types), "%s/gid_attrs", dir);
	err = err ?: mkdirf(types, sizeof(types), "%s/gid_attrs/types", dir);
	err = err ?: mkdirf(ndevs, sizeof(ndevs), "%s/gid_attrs/ndevs", dir);
	for (int i = 0; !err && i < len; i++) {
		struct ibv_gid_entry e;
		char name[16], ifname[IF_NAMESIZE];

		if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0))
			continue;
		snprintf(name, sizeof(name), "%d", i);
		err = put(types, name, "%s",
			  e.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2"
							     : "IB/RoCE v1");
		if (!err && e.ndev_ifindex &&
		    if_indextoname(e.ndev_ifindex, ifname))
			err = put(ndevs, name, "%s", ifname);
	}
	return err;
}

static int put_port(struct ibv_context *ctx, const char *ports, uint8_t port)
{
	struct ibv_port_attr pa;
	char dir[PATH_MAX], sub[PATH_MAX], rate[64];
	union ibv_gid gid;
	int err;

	if (ibv_query_port(ctx, port, &pa))
		return -errno;
	err = mkdirf(dir, sizeof(dir), "%s/%u", ports, port);
	err = err
		      ?: put(dir, "state", "%d: %s", pa.state,
			     state_name(pa.state));
	err = err
		      ?: put(dir, "phys_state", "%u: %s", pa.phys_state,
			     phys_name(pa.phys_state));
	err = err ?: put(dir, "lid", "0x%x", pa.lid);
	err = err ?: put(dir, "lid_mask_count", "%u", pa.lmc);
	err = err ?: put(dir, "sm_lid", "0x%x", pa.sm_lid);
	err = err ?: put(dir, "sm_sl", "%u", pa.sm_sl);
	err = err ?: put(dir, "cap_mask", "0x%08x", pa.port_cap_flags);
	rate_str(&pa, rate, sizeof(rate));
	err = err ?: put(dir, "rate", "%s", rate);
	err = err
		      ?: put(dir, "link_layer", "%s",
			     pa.link_layer == IBV_LINK_LAYER_ETHERNET
				     ? "Ethernet"
				     : "InfiniBand");
	err = err ?: mkdirf(sub, sizeof(sub), "%s/gids", dir);
	for (int i = 0; !err && i < pa.gid_tbl_len; i++) {
		char name[16];
		const uint8_t *r = gid.raw;

		if (ibv_query_gid(ctx, port, i, &gid))
			memset(&gid, 0, sizeof(gid));
		snprintf(name, sizeof(name), "%d", i);
		err = put(sub, name,
			  "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
			  "%02x%02x:%02x%02x:%02x%02x",
			  r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8],
			  r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
	}
	err = err ?: put_gid_attrs(ctx, dir, port, pa.gid_tbl_len);
	err = err ?: mkdirf(sub, sizeof(sub), "%s/pkeys", dir);
	for (int i = 0; !err && i < pa.pkey_tbl_len; i++) {
		char name[16];
		__be16 pkey;

		if (ibv_query_pkey(ctx, port, i, &pkey))
			pkey = 0;
		snprintf(name, sizeof(name), "%d", i);
		err = put(sub, name, "0x%04x", be16toh(pkey));
	}
	return err;
}

/* class/infiniband/<dev>: what libibverbs and the kernel would show. */
static int put_device(struct ibv_device *dev)
{
	static const char *const provider_files[] = {"board_id", "node_desc",
						     "hw_rev", "hca_type"};
	char dir[PATH_MAX], sub[PATH_MAX], val[128];
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	uint64_t g;
	int err;

	ctx = ibv_open_device(dev);
	if (!ctx)
		return -errno;
	err = ibv_query_device(ctx, &da) ? -errno : 0;
	err = err
		      ?: mkdirf(dir, sizeof(dir), "%s/sys/class/infiniband/%s",
				root, ibv_get_device_name(dev));
	err = err
		      ?: put(dir, "node_type", "%d: %s", dev->node_type,
			     dev->node_type == IBV_NODE_CA ? "CA" : "RNIC");
	g = be64toh(da.node_guid);
	err = err
		      ?: put(dir, "node_guid", "%04x:%04x:%04x:%04x",
			     (unsigned int)(g >> 48),
			     (unsigned int)(g >> 32) & 0xffff,
			     (unsigned int)(g >> 16) & 0xffff,
			     (unsigned int)g & 0xffff);
	g = be64toh(da.sys_image_guid);
	err = err
		      ?: put(dir, "sys_image_guid", "%04x:%04x:%04x:%04x",
			     (unsigned int)(g >> 48),
			     (unsigned int)(g >> 32) & 0xffff,
			     (unsigned int)(g >> 16) & 0xffff,
			     (unsigned int)g & 0xffff);
	err = err ?: put(dir, "fw_ver", "%s", da.fw_ver);
	for (size_t i = 0;
	     !err && i < sizeof(provider_files) / sizeof(provider_files[0]);
	     i++)
		if (ibv_read_ibdev_sysfs_file(val, sizeof(val), dev, "%s",
					      provider_files[i]) >= 0)
			err = put(dir, provider_files[i], "%s", val);
	err = err ?: mkdirf(sub, sizeof(sub), "%s/ports", dir);
	for (uint8_t p = 1; !err && p <= da.phys_port_cnt; p++)
		err = put_port(ctx, sub, p);
	ibv_close_device(ctx);
	if (err)
		return err;

	/* class/infiniband_verbs/<uverbsN> and the character device */
	err = mkdirf(dir, sizeof(dir), "%s/sys/class/infiniband_verbs/%s", root,
		     dev->dev_name);
	err = err ?: put(dir, "ibdev", "%s", ibv_get_device_name(dev));
	err = err ?: put(dir, "abi_version", "1");
	snprintf(dir, sizeof(dir), "%s/dev/infiniband/%s", root, dev->dev_name);
	/* no mknod without root: the node is a link to /dev/null, a
	 * character device everyone may open read-write */
	return err ?: (symlink("/dev/null", dir) ? -errno : 0);
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void remove_tree(void)
{
	if (root[0] && root_owner == getpid())
		nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * A tree left by a process that died without its atexit (a signal): its
 * owner holds a shared flock on it for its life (O_CLOEXEC: a program it
 * execs does not), so one we can lock exclusively is nobody's.  A pid
 * would not do: /tmp may be shared with another pid namespace.
 */
static void sweep_stale(const char *tmp)
{
	DIR *d = opendir(tmp);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[PATH_MAX];
		int fd;

		if (strncmp(e->d_name, "softverbs-devfiles.", 19))
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmp, e->d_name);
		fd = open(path,
			  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!flock(fd, LOCK_EX | LOCK_NB))
			nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		close(fd);
	}
	if (d)
		closedir(d);
}

static int report(int err, const char *where)
{
	if (err)
		fprintf(stderr,
			"softverbs-devfiles: cannot write the device files "
			"under %s: %s; /sys/class/infiniband and "
			"/dev/infiniband stay empty for this program\n",
			where, strerror(-err));
	return err;
}

static int make_tree(void)
{
	const char *tmp = getenv("TMPDIR");
	struct ibv_device **list;
	char dir[PATH_MAX];
	int n, err;

	if (!tmp || !*tmp || strlen(tmp) > sizeof(root) - 64)
		tmp = "/tmp";
	sweep_stale(tmp);
	/* made and locked under a name sweep_stale passes by, then renamed:
	 * a sweeper never sees it unlocked */
	snprintf(dir, sizeof(dir), "%s/softverbs-devfiles-new.%d.XXXXXX", tmp,
		 (int)getpid());
	if (!mkdtemp(dir))
		return report(-errno, dir);
	root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* held until exit: the tree is alive (sweep_stale) */
	if (root_fd < 0 || flock(root_fd, LOCK_SH)) {
		err = -errno;
		rmdir(dir);
		return report(err, dir);
	}
	snprintf(root, sizeof(root), "%s/softverbs-devfiles.%s", tmp,
		 dir + strlen(tmp) + strlen("/softverbs-devfiles-new."));
	if (rename(dir, root)) {
		err = -errno;
		rmdir(dir);
		root[0] = '\0';
		return report(err, dir);
	}
	root_owner = getpid();
	atexit(remove_tree);
	err = mkdirf(dir, sizeof(dir), "%s/sys", root);
	err = err ?: mkdirf(dir, sizeof(dir), "%s/sys/class", root);
	err = err ?: mkdirf(dir, sizeof(dir), "%s/sys/class/infiniband", root);
	err = err
		      ?: mkdirf(dir, sizeof(dir),
				"%s/sys/class/infiniband_verbs", root);
	/* rdma-core's uverbs ABI version (IB_USER_VERBS_ABI_VERSION) */
	err = err ?: put(dir, "abi_version", "6");
	err = err ?: mkdirf(dir, sizeof(dir), "%s/dev", root);
	err = err ?: mkdirf(dir, sizeof(dir), "%s/dev/infiniband", root);
	list = err ? NULL : ibv_get_device_list(&n);
	for (int i = 0; list && !err && i < n; i++)
		err = put_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return report(err, root);
}

/* A fork child makes its own tree: the parent removes its own at exit. */
static void atfork_child(void)
{
	pthread_mutex_init(&tree_lock, NULL);
	if (root_fd >= 0)
		close(root_fd); /* the parent's lock stays the parent's */
	root_fd = -1;
	if (tree_state == 1)
		tree_state = 0;
}

__attribute__((constructor)) static void devfiles_init(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

/* ---- path translation ---- */

/* The length of the prefix `path` starts with, else 0. */
static size_t ours(const char *path)
{
	if (!path || path[0] != '/' || (path[1] != 's' && path[1] != 'd'))
		return 0;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t n = strlen(prefixes[i]);

		if (!strncmp(path, prefixes[i], n) &&
		    (path[n] == '\0' || path[n] == '/'))
			return n;
	}
	return 0;
}

/* Our devices' names, read once (under tree_lock): as class/infiniband
 * names them (ibdev) and as class/infiniband_verbs and /dev/infiniband do
 * (uverbsN). */
#define MAX_NAMES 32
static char ibdev_names[MAX_NAMES][64], dev_names[MAX_NAMES][64];
static int n_names = -1;

static void read_names(void)
{
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	n_names = 0;
	for (int i = 0; list && i < n && n_names < MAX_NAMES; i++, n_names++) {
		snprintf(ibdev_names[n_names], sizeof(ibdev_names[0]), "%s",
			 ibv_get_device_name(list[i]));
		snprintf(dev_names[n_names], sizeof(dev_names[0]), "%s",
			 list[i]->dev_name);
	}
	if (list)
		ibv_free_device_list(list);
}

/*
 * Whether `path` (ours, its prefix `n` long) names, right under the
 * prefix, an entry the tree will not have: another driver's device, as
 * libfabric's psm providers stat /sys/class/infiniband/qib0 and hfi1_0
 * in every program that loads libfabric.  That is ENOENT, and making the
 * tree for it (some 250 files on the disk, and their removal at exit)
 * cost more than the rest of softverbs' start (bench/results/libfabric).
 */
static bool foreign(const char *path, size_t n)
{
	const char *c = path + n;
	size_t len;
	bool ibdev = n == strlen("/sys/class/infiniband");

	if (*c != '/')
		return false;
	len = strcspn(++c, "/");
	if (!len || (c[0] == '.' && (len == 1 || (len == 2 && c[1] == '.'))))
		return false;
	if (n == strlen("/sys/class/infiniband_verbs") &&
	    len == strlen("abi_version") && !strncmp(c, "abi_version", len))
		return false;
	if (n_names < 0)
		read_names();
	for (int i = 0; i < n_names; i++) {
		const char *name = ibdev ? ibdev_names[i] : dev_names[i];

		if (strlen(name) == len && !strncmp(name, c, len))
			return false;
	}
	return true;
}

/*
 * `path` itself, or, for a path of ours, its place in the tree (made on
 * first use) written into buf; NULL with errno if that cannot be.
 */
static const char *xlate(const char *path, char *buf, size_t size)
{
	size_t n = ours(path);
	int state;

	if (!n)
		return path;
	pthread_mutex_lock(&tree_lock);
	if (!tree_state && foreign(path, n)) {
		pthread_mutex_unlock(&tree_lock);
		errno = ENOENT;
		return NULL;
	}
	if (!tree_state)
		tree_state = make_tree() ? -1 : 1;
	state = tree_state;
	pthread_mutex_unlock(&tree_lock);
	if (state < 0 ||
	    (size_t)snprintf(buf, size, "%s%s", root, path) >= size) {
		errno = state < 0 ? ENOENT : ENAMETOOLONG;
		return NULL;
	}
	return buf;
}

/* The next definition of `name` (libc's), looked up once; `fail` if
 * there is none. */
#define REAL(name, fail)                                             \
	static __typeof__(name) *real_;                              \
	if (!real_)                                                  \
		real_ = (__typeof__(name) *)dlsym(RTLD_NEXT, #name); \
	if (!real_) {                                                \
		errno = ENOSYS;                                      \
		return fail;                                         \
	}

#define XLATE_OR(path, fail)                                \
	char xbuf_[PATH_MAX];                               \
	const char *p_ = xlate(path, xbuf_, sizeof(xbuf_)); \
	if (!p_)                                            \
		return fail;

/* ---- the interposed calls ---- */

static mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE
		       ? va_arg(ap, mode_t)
		       : 0;
}

#define DEF_OPEN(name)                                    \
	EXPORT int name(const char *path, int flags, ...) \
	{                                                 \
		va_list ap;                               \
		mode_t mode;                              \
		REAL(name, -1);                           \
		va_start(ap, flags);                      \
		mode = open_mode(flags, ap);              \
		va_end(ap);                               \
		XLATE_OR(path, -1);                       \
		return real_(p_, flags, mode);            \
	}
DEF_OPEN(open)
DEF_OPEN(open64)

#define DEF_OPENAT(name)                                             \
	EXPORT int name(int dirfd, const char *path, int flags, ...) \
	{                                                            \
		va_list ap;                                          \
		mode_t mode;                                         \
		REAL(name, -1);                                      \
		va_start(ap, flags);                                 \
		mode = open_mode(flags, ap);                         \
		va_end(ap);                                          \
		XLATE_OR(path, -1);                                  \
		return real_(dirfd, p_, flags, mode);                \
	}
DEF_OPENAT(openat)
DEF_OPENAT(openat64)

/* _FORTIFY_SOURCE's entry points */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
EXPORT int __open_2(const char *path, int flags)
{
	REAL(__open_2, -1);
	XLATE_OR(path, -1);
	return real_(p_, flags);
}

EXPORT int __open64_2(const char *path, int flags)
{
	REAL(__open64_2, -1);
	XLATE_OR(path, -1);
	return real_(p_, flags);
}

#define DEF_FOPEN(name)                                       \
	EXPORT FILE *name(const char *path, const char *mode) \
	{                                                     \
		REAL(name, NULL);                             \
		XLATE_OR(path, NULL);                         \
		return real_(p_, mode);                       \
	}
DEF_FOPEN(fopen)
DEF_FOPEN(fopen64)

#define DEF_STAT(name, st_type)                        \
	EXPORT int name(const char *path, st_type *st) \
	{                                              \
		REAL(name, -1);                        \
		XLATE_OR(path, -1);                    \
		return real_(p_, st);                  \
	}
DEF_STAT(stat, struct stat)
DEF_STAT(stat64, struct stat64)
DEF_STAT(lstat, struct stat)
DEF_STAT(lstat64, struct stat64)

#define DEF_FSTATAT(name, st_type)                                           \
	EXPORT int name(int dirfd, const char *path, st_type *st, int flags) \
	{                                                                    \
		REAL(name, -1);                                              \
		XLATE_OR(path, -1);                                          \
		return real_(dirfd, p_, st, flags);                          \
	}
DEF_FSTATAT(fstatat, struct stat)
DEF_FSTATAT(fstatat64, struct stat64)

EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask,
		 struct statx *st)
{
	REAL(statx, -1);
	XLATE_OR(path, -1);
	return real_(dirfd, p_, flags, mask, st);
}

/* Binaries built against glibc < 2.33 call these instead of stat. */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
#define DEF_XSTAT(name, st_type)                                \
	EXPORT int name(int ver, const char *path, st_type *st) \
	{                                                       \
		REAL(name, -1);                                 \
		XLATE_OR(path, -1);                             \
		return real_(ver, p_, st);                      \
	}
DEF_XSTAT(__xstat, struct stat)
DEF_XSTAT(__xstat64, struct stat64)
DEF_XSTAT(__lxstat, struct stat)
DEF_XSTAT(__lxstat64, struct stat64)

EXPORT int access(const char *path, int mode)
{
	REAL(access, -1);
	XLATE_OR(path, -1);
	return real_(p_, mode);
}

EXPORT int euidaccess(const char *path, int mode)
{
	REAL(euidaccess, -1);
	XLATE_OR(path, -1);
	return real_(p_, mode);
}

EXPORT int eaccess(const char *path, int mode)
{
	REAL(eaccess, -1);
	XLATE_OR(path, -1);
	return real_(p_, mode);
}

EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
	REAL(faccessat, -1);
	XLATE_OR(path, -1);
	return real_(dirfd, p_, mode, flags);
}

EXPORT DIR *opendir(const char *path)
{
	REAL(opendir, NULL);
	XLATE_OR(path, NULL);
	return real_(p_);
}

EXPORT int scandir(const char *path, struct dirent ***list,
		   int (*filter)(const struct dirent *),
		   int (*cmp)(const struct dirent **, const struct dirent **))
{
	REAL(scandir, -1);
	XLATE_OR(path, -1);
	return real_(p_, list, filter, cmp);
}

EXPORT ssize_t readlink(const char *path, char *buf, size_t size)
{
	REAL(readlink, -1);
	XLATE_OR(path, -1);
	return real_(p_, buf, size);
}

EXPORT ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t size)
{
	REAL(readlinkat, -1);
	XLATE_OR(path, -1);
	return real_(dirfd, p_, buf, size);
}

/*
 * The tree's own name never shows: a path of ours resolves to itself
 * (the tree has no links but the device node's, which resolves to
 * /dev/null, what it is).
 */
EXPORT char *realpath(const char *path, char *resolved)
{
	char *r;
	size_t n;
	REAL(realpath, NULL);
	XLATE_OR(path, NULL);
	r = real_(p_, resolved);
	n = strlen(root);
	if (r && p_ != path && !strncmp(r, root, n) && (r[n] == '/' || !r[n]))
		memmove(r, r + n, strlen(r + n) + 1);
	return r;
}

EXPORT char *canonicalize_file_name(const char *path)
{
	return realpath(path, NULL);
}

/* ls -l asks for ACLs and security labels of what it lists */
#define DEF_GETXATTR(name)                                                   \
	EXPORT ssize_t name(const char *path, const char *attr, void *value, \
			    size_t size)                                     \
	{                                                                    \
		REAL(name, -1);                                              \
		XLATE_OR(path, -1);                                          \
		return real_(p_, attr, value, size);                         \
	}
DEF_GETXATTR(getxattr)
DEF_GETXATTR(lgetxattr)

#define DEF_LISTXATTR(name)                                            \
	EXPORT ssize_t name(const char *path, char *list, size_t size) \
	{                                                              \
		REAL(name, -1);                                        \
		XLATE_OR(path, -1);                                    \
		return real_(p_, list, size);                          \
	}
DEF_LISTXATTR(listxattr)
DEF_LISTXATTR(llistxattr)
