// SPDX-License-Identifier: MIT
/*
 * UD multicast groups as the transport sees them: the host's membership
 * registry, and which QPs a datagram for a group goes to.  No daemon: a
 * group is a directory, a member one empty file in it named after its
 * QPN and pid, under a per-user directory in /dev/shm
 * ($SOFTVERBS_MCAST_DIR overrides it); a sender lists the directory and
 * sends one datagram to each member's socket (ud/send.c).  The registry is
 * only a hint: a receiver takes a multicast datagram only for a group its
 * QP is attached to (qp->ud.mcast, sv_mcast_attached), so a dead member's
 * stale entry, or one planted by a hostile process, costs a lost datagram
 * and never a wrong delivery.
 *
 * Between hosts: a group whose MGID is an IPv4-mapped multicast address
 * (::ffff:224.0.0.0/4, what rdma_cm joins give for an IPv4 group, as
 * RoCEv2) is also that IPv4 group: the context's UDP listener (ud/door.c)
 * joins it while one of its QPs is attached (counted per context by
 * verbs/mcast.c), a send to it also goes out as one UDP datagram to
 * (group, 4791), and the listener passes what arrives to the context's
 * QPs attached (grp->qpn, sv_mcast_ctx_members).  Other MGIDs stay this
 * host's.  The verbs (attach, detach) are verbs/mcast.c.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mcast.h"
#include "sv.h"

/* The user's registry directory: "" on error.  0700 and ours, checked
 * by the caller on the fd it opens. */
static void base_path(char *p, size_t n)
{
	const char *d = sv_env_str(SV_ENV_MCAST_DIR);

	if (d && *d)
		snprintf(p, n, "%s", d);
	else
		snprintf(p, n, "/dev/shm/softverbs-%u-mcast",
			 (unsigned int)geteuid());
}

/* The network namespace: QPNs (abstract socket names) are per namespace,
 * so groups are too. */
static unsigned long long netns_id(void)
{
	static unsigned long long id;
	struct stat st;

	if (!id)
		id = stat("/proc/self/ns/net", &st) ? 1 : (st.st_ino | 1ull);
	return id;
}

/* The group's directory name inside the base. */
static void group_name(char *p, size_t n, const union ibv_gid *gid)
{
	int k = snprintf(p, n, "%llx-", netns_id());

	for (int i = 0; i < 16 && (size_t)k + 2 < n; i++)
		k += snprintf(p + k, n - (size_t)k, "%02x", gid->raw[i]);
}

/* True if fd is a directory of ours that nobody else may write. */
static bool dir_ours(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISDIR(st.st_mode) &&
	       st.st_uid == geteuid() && !(st.st_mode & 022);
}

/* Opens (creating when told) the group's directory: an fd, or -errno. */
static int group_open(const union ibv_gid *gid, bool create)
{
	char base[PATH_MAX], name[64];
	int bfd, gfd;

	base_path(base, sizeof(base));
	if (create && mkdir(base, 0700) && errno != EEXIST)
		return -errno;
	bfd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (bfd < 0)
		return -errno;
	if (!dir_ours(bfd)) {
		if (create)
			sv_log("multicast registry %s is not a directory "
			       "of this user's, mode 0700; remove it or set "
			       "SOFTVERBS_MCAST_DIR\n",
			       base);
		close(bfd);
		return -EACCES;
	}
	group_name(name, sizeof(name), gid);
	if (create && mkdirat(bfd, name, 0700) && errno != EEXIST) {
		gfd = -errno;
		close(bfd);
		return gfd;
	}
	gfd = openat(bfd, name,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (gfd < 0)
		gfd = -errno;
	else if (!dir_ours(gfd)) {
		close(gfd);
		gfd = -EACCES;
	}
	close(bfd);
	return gfd;
}

/* A member entry's name "qqqqqq.pid" parsed strictly: false for anything
 * else (".", "..", hostile names). */
static bool entry_parse(const char *s, uint32_t *qpn, pid_t *pid)
{
	char *end;
	unsigned long q, p;

	if (strlen(s) < 8 || s[6] != '.' || s[7] < '0' || s[7] > '9')
		return false;
	for (int i = 0; i < 6; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	q = strtoul(s, NULL, 16);
	p = strtoul(s + 7, &end, 10);
	if (*end || p == 0 || p > 0x7fffffff || q < 2 || q >= SV_MCAST_QPN)
		return false;
	*qpn = (uint32_t)q;
	*pid = (pid_t)p;
	return true;
}

/* True if nobody holds QPN qpn's socket and process pid is gone: the
 * entry is a dead member's. */
static bool entry_dead(uint32_t qpn, pid_t pid)
{
	struct sockaddr_un a;
	socklen_t alen = sv_link_qp_addr(&a, qpn);
	int fd, rc;

	if (kill(pid, 0) == 0 || errno != ESRCH)
		return false;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	rc = connect(fd, (struct sockaddr *)&a, alen);
	close(fd);
	return rc && errno == ECONNREFUSED;
}

/* Counts the group's entries, removing dead members' when gc. */
static uint32_t group_count(int gfd, bool gc)
{
	int dfd = dup(gfd);
	uint32_t n = 0;
	struct dirent *e;
	DIR *d;

	if (dfd < 0)
		return 0;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	rewinddir(d); /* the dup shares gfd's offset: an earlier count's */
	while ((e = readdir(d))) {
		uint32_t q;
		pid_t p;

		if (!entry_parse(e->d_name, &q, &p))
			continue;
		if (gc && entry_dead(q, p)) {
			unlinkat(gfd, e->d_name, 0);
			continue;
		}
		n++;
	}
	closedir(d);
	return n;
}

/* Adds QPN qpn to the group's directory: 0, -ENOMEM past
 * SV_MAX_MCAST_QP_ATTACH members on the host, or -errno. */
int sv_mcast_registry_add(const union ibv_gid *gid, uint32_t qpn)
{
	char name[32];
	int gfd, fd, err = 0;

	snprintf(name, sizeof(name), "%06x.%d", qpn, (int)getpid());
	for (;;) {
		struct stat st;

		gfd = group_open(gid, true);
		if (gfd < 0)
			return gfd;
		/* count and add as one step against other attachers */
		flock(gfd, LOCK_EX);
		if (!fstat(gfd, &st) && st.st_nlink > 0)
			break;
		close(gfd); /* the last member's detach removed it: again */
	}
	if (group_count(gfd, false) >= SV_MAX_MCAST_QP_ATTACH &&
	    group_count(gfd, true) >= SV_MAX_MCAST_QP_ATTACH) {
		err = -ENOMEM; /* rxe: a full group is ENOMEM */
		goto out;
	}
	fd = openat(gfd, name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		    0600);
	if (fd < 0)
		err = -errno;
	else
		close(fd);
out:
	close(gfd); /* drops the lock */
	return err;
}

/* Removes QPN qpn from the group, and the group's directory with its
 * last member. */
void sv_mcast_registry_del(const union ibv_gid *gid, uint32_t qpn)
{
	char name[32], base[PATH_MAX], gname[64];
	int gfd = group_open(gid, false);

	if (gfd < 0)
		return;
	snprintf(name, sizeof(name), "%06x.%d", qpn, (int)getpid());
	flock(gfd, LOCK_EX);
	unlinkat(gfd, name, 0);
	base_path(base, sizeof(base));
	group_name(gname, sizeof(gname), gid);
	if (group_count(gfd, false) == 0) {
		int bfd = open(base,
			       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (bfd >= 0) {
			/* fails (ENOTEMPTY) if a stranger's file is there */
			unlinkat(bfd, gname, AT_REMOVEDIR);
			close(bfd);
		}
	}
	close(gfd);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int sv_mcast_members(const union ibv_gid *gid, uint32_t *qpn, int max)
{
	int gfd = group_open(gid, false), n = 0, k = 0;
	struct dirent *e;
	DIR *d;

	if (gfd < 0)
		return 0; /* no such group: nobody listens */
	d = fdopendir(gfd);
	if (!d) {
		close(gfd);
		return 0;
	}
	while ((e = readdir(d)) && n < max) {
		pid_t p;

		if (entry_parse(e->d_name, &qpn[n], &p))
			n++;
	}
	closedir(d);
	/* sorted, each QPN once (a dead member's entry may repeat a live
	 * QPN): a send resumes after the last QPN it reached */
	qsort(qpn, (size_t)n, sizeof(*qpn), cmp_u32);
	for (int i = 0; i < n; i++)
		if (!k || qpn[k - 1] != qpn[i])
			qpn[k++] = qpn[i];
	return k;
}

bool sv_mcast_ipv4(const uint8_t gid[16], uint32_t *grp)
{
	if (memcmp(gid, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) ||
	    (gid[12] & 0xf0) != 0xe0)
		return false;
	memcpy(grp, &gid[12], 4);
	return true;
}

bool sv_mcast_attached(const struct sv_qp *qp, const uint8_t gid[16])
{
	for (const struct sv_mcast *m = qp->ud.mcast; m; m = m->next)
		if (!memcmp(m->gid.raw, gid, 16))
			return true;
	return false;
}

int sv_mcast_ctx_members(struct sv_context *ctx, const uint8_t gid[16],
			 uint32_t *qpn, int max)
{
	struct sv_mcast_grp *g;
	int n = 0;

	/* attach may hold the lock across the registry's flock: the
	 * listener (progress thread) never waits for it */
	if (pthread_mutex_trylock(&ctx->mcast_lock))
		return -EAGAIN;
	for (g = ctx->mcast_grps; g; g = g->next)
		if (!memcmp(g->gid.raw, gid, 16))
			break;
	for (uint32_t i = 0; g && i < g->nqpn && n < max; i++)
		qpn[n++] = g->qpn[i];
	pthread_mutex_unlock(&ctx->mcast_lock);
	return n;
}
