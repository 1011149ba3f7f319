// SPDX-License-Identifier: MIT
/*
 * Our own mappings, one at a time (maps.h): PROCMAP_QUERY where the
 * kernel has it, else /proc/self/maps' text.  No malloc.
 */
#include "maps.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* include/uapi/linux/fs.h of Linux 6.11 (Debian 12's headers are older) */
struct sv_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};

#define SV_PROCMAP_QUERY	_IOWR('f', 17, struct sv_procmap_query)
#define SV_PMQ_READABLE		0x01
#define SV_PMQ_WRITABLE		0x02
#define SV_PMQ_EXECUTABLE	0x04
#define SV_PMQ_SHARED		0x08
#define SV_PMQ_COVERING_OR_NEXT 0x10

/* -1 unknown, 0 the kernel has no PROCMAP_QUERY, 1 it has */
static atomic_int have_query = -1;

static int open_maps(void)
{
	int fd;

	do
		fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

/* ---- PROCMAP_QUERY ---- */

static int query_walk(int fd, uintptr_t lo, uintptr_t hi, sv_vma_fn fn,
		      void *arg)
{
	char name[PATH_MAX + 1];
	uintptr_t at = lo;

	while (at < hi) {
		struct sv_procmap_query q = {
			.size = sizeof(q),
			.query_flags = SV_PMQ_COVERING_OR_NEXT,
			.query_addr = at,
			.vma_name_addr = (uintptr_t)name,
			.vma_name_size = sizeof(name),
		};
		struct sv_vma v;
		int ret;

		if (ioctl(fd, SV_PROCMAP_QUERY, &q) < 0) {
			if (errno == EINTR)
				continue;
			return errno == ENOENT ? 0 : -errno; /* none after */
		}
		if (q.vma_start >= hi || q.vma_end <= at)
			return 0;
		v.lo = (uintptr_t)q.vma_start;
		v.hi = (uintptr_t)q.vma_end;
		v.off = q.vma_offset;
		v.dev_major = q.dev_major;
		v.dev_minor = q.dev_minor;
		v.ino = (unsigned long)q.inode;
		v.perm[0] = q.vma_flags & SV_PMQ_READABLE ? 'r' : '-';
		v.perm[1] = q.vma_flags & SV_PMQ_WRITABLE ? 'w' : '-';
		v.perm[2] = q.vma_flags & SV_PMQ_EXECUTABLE ? 'x' : '-';
		v.perm[3] = q.vma_flags & SV_PMQ_SHARED ? 's' : 'p';
		v.perm[4] = '\0';
		name[q.vma_name_size ? sizeof(name) - 1 : 0] = '\0';
		v.name = name;
		ret = fn(&v, arg);
		if (ret)
			return ret < 0 ? ret : 0;
		at = v.hi;
	}
	return 0;
}

int sv_maps_walk_query(uintptr_t lo, uintptr_t hi, sv_vma_fn fn, void *arg)
{
	int fd = open_maps(), ret;
	struct sv_procmap_query probe = {.size = sizeof(probe)};

	if (fd < 0)
		return fd;
	if (atomic_load_explicit(&have_query, memory_order_relaxed) < 0) {
		/* an address no mapping is at or after: ENOENT if the
		 * kernel knows the ioctl, ENOTTY (or EINVAL) if not */
		probe.query_addr = UINTPTR_MAX & ~(uintptr_t)4095;
		probe.query_flags = SV_PMQ_COVERING_OR_NEXT;
		ret = ioctl(fd, SV_PROCMAP_QUERY, &probe) < 0 ? errno : 0;
		atomic_store_explicit(&have_query, ret == ENOENT || !ret,
				      memory_order_relaxed);
	}
	if (!atomic_load_explicit(&have_query, memory_order_relaxed))
		ret = -EOPNOTSUPP;
	else
		ret = query_walk(fd, lo, hi, fn, arg);
	close(fd);
	return ret;
}

/* ---- the text ---- */

/* One line; 1 once past hi (stop), else fn's answer for overlapping. */
static int text_line(char *line, uintptr_t lo, uintptr_t hi, sv_vma_fn fn,
		     void *arg)
{
	struct sv_vma v;
	unsigned long a, z;
	int pos = -1;

	if (sscanf(line, "%lx-%lx %4s %" SCNx64 " %x:%x %lu %n", &a, &z, v.perm,
		   &v.off, &v.dev_major, &v.dev_minor, &v.ino, &pos) < 7)
		return -EIO;
	v.lo = a;
	v.hi = z;
	v.name = pos >= 0 ? line + pos : "";
	if (v.lo >= hi)
		return 1;
	if (v.hi <= lo)
		return 0;
	return fn(&v, arg);
}

int sv_maps_walk_text(uintptr_t lo, uintptr_t hi, sv_vma_fn fn, void *arg)
{
	char buf[8192];
	size_t have = 0;
	bool skip = false; /* inside an overlong line */
	int ret = 0;
	int fd = open_maps();

	if (fd < 0)
		return fd;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		char *line = buf, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : 0;
			break;
		}
		have += (size_t)n;
		while ((nl = memchr(line, '\n', (size_t)(buf + have - line)))) {
			*nl = '\0';
			if (!skip)
				ret = text_line(line, lo, hi, fn, arg);
			skip = false;
			line = nl + 1;
			if (ret)
				goto out;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) {
			skip = true;
			have = 0;
		}
	}
out:
	close(fd);
	return ret < 0 ? ret : 0;
}

int sv_maps_walk(uintptr_t lo, uintptr_t hi, sv_vma_fn fn, void *arg)
{
	int ret;

	if (atomic_load_explicit(&have_query, memory_order_relaxed)) {
		ret = sv_maps_walk_query(lo, hi, fn, arg);
		if (ret != -EOPNOTSUPP)
			return ret;
	}
	return sv_maps_walk_text(lo, hi, fn, arg);
}
