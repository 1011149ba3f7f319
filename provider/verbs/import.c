// SPDX-License-Identifier: MIT
/*
 * Shared objects (issue 28 item 6): ibv_import_device, ibv_import_pd,
 * ibv_import_mr and their unimports, as the kernel's shared ufile gives
 * them: contexts made from one cmd_fd share its objects.
 *
 * In this process the registry finds the context a cmd_fd belongs to by
 * the socket's inode (fstat of a dup names the same one).  The import
 * is a handle of that context: a struct sv_context whose real is the
 * original, so that every verb on it, and on the objects made through
 * it, works on the original's (to_sctx): the same MR table, PDs, QPs,
 * async events (the kernel shares its ufile's async file too).  The
 * original lives until its last handle is closed.  ibv_import_pd gives
 * a PD handle whose real is the original PD (to_spd): every PD check
 * compares equal; ibv_import_mr a copy of the MR's handle, keys and
 * range: the keys find the original in the table.
 *
 * From another process (the fd came with SCM_RIGHTS) the owner answers
 * on the socket (import_wire.c): ibv_import_device makes a context of
 * this process that holds the fd (and is registered under it, so that
 * importing it again here shares it), ibv_import_pd a PD of that
 * context standing for the original (checked to be live there): MRs
 * registered and QPs created on it talk to any peer.  ibv_import_mr
 * names memory of the other process: imported when it is shared memory
 * this process maps at the same address too (import_mr_remote), else
 * EOPNOTSUPP, said on stderr.  ibv_import_dm: in this process a handle
 * of the same DM (dm.c); another process's: the owner moves the DM onto
 * a memfd of its own and passes it (dm.c), which this process maps.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import.h"
#include "rmem.h"
#include "verbs.h"

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv_list reg = {&reg, &reg}; /* real contexts (imp_node) */

static void reg_add(struct sv_context *ctx)
{
	struct stat st;

	if (fstat(ctx->vctx.context.cmd_fd, &st))
		return;
	ctx->cmd_dev = st.st_dev;
	ctx->cmd_ino = st.st_ino;
	ctx->cmd_pid = getpid();
	pthread_mutex_lock(&reg_lock);
	sv_list_add_tail(&reg, &ctx->imp_node);
	pthread_mutex_unlock(&reg_lock);
}

/* After ibv_open_device: findable here and, unless it is another
 * process's context imported, answering other processes. */
void sv_import_serve(struct sv_context *ctx)
{
	reg_add(ctx);
	if (ctx->cmd_peer >= 0)
		sv_import_serve_start(ctx);
}

/* Drops one handle of ctx: true when it was the last (ctx is then out of
 * the registry, so no import takes it any more). */
bool sv_import_put(struct sv_context *ctx)
{
	bool last;

	pthread_mutex_lock(&reg_lock);
	last = !--ctx->refs;
	if (last)
		sv_list_del(&ctx->imp_node);
	pthread_mutex_unlock(&reg_lock);
	return last;
}

/* An in-process import's own handle: its cmd_fd (it was given it). */
void sv_import_close(struct sv_context *h)
{
	close(h->vctx.context.cmd_fd);
	pthread_mutex_destroy(&h->vctx.context.mutex);
	free(h);
}

/* The real context whose cmd_fd st names, with a reference; or NULL. */
static struct sv_context *reg_get(const struct stat *st)
{
	struct sv_context *found = NULL;
	struct sv_list *n;

	pthread_mutex_lock(&reg_lock);
	sv_list_for_each(n, &reg)
	{
		struct sv_context *c =
			container_of(n, struct sv_context, imp_node);

		/* a forked child's copy of the registry names its parent's
		 * contexts, whose threads are not here: the child asks */
		if (c->cmd_ino == (uint64_t)st->st_ino &&
		    c->cmd_dev == (uint64_t)st->st_dev &&
		    c->cmd_pid == getpid()) {
			found = c;
			found->refs++;
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	return found;
}

/* h, allocated, becomes a handle of real for the program, owning fd. */
static struct ibv_context *alias_init(struct sv_context *h,
				      struct sv_context *real, int fd)
{
	/* the ops tables, device, async fd: the original's */
	h->vctx = real->vctx;
	h->vctx.context.cmd_fd = fd;
	pthread_mutex_init(&h->vctx.context.mutex, NULL);
	h->real = real;
	h->cmd_peer = h->cmd_pfd.fd = -1;
	sv_list_init(&h->imp_node);
	return &h->vctx.context;
}

__attribute__((format(printf, 2, 3))) static void fail(int err, const char *fmt,
						       ...)
{
	va_list ap;

	fprintf(stderr, "softverbs: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	errno = err;
}

/* Another process's context: one of ours holding fd (registered under
 * it, so that importing it again here shares it). */
static struct ibv_context *remote_new(int fd)
{
	struct ibv_device **list = sv_get_device_list(NULL);
	struct ibv_context *c =
		list && list[0] ? sv_open_imported(list[0], fd) : NULL;

	sv_free_device_list(list);
	return c;
}

struct ibv_context *sv_import_device(int fd)
{
	struct sv_context *real, *h;
	struct sv_imp_rep r;
	int type = 0, dom = 0, err;
	socklen_t l = sizeof(type);
	struct stat st;

	/* rdma-core: EINVAL for an fd that is not a device's */
	if (fd < 0 || fstat(fd, &st) || !S_ISSOCK(st.st_mode)) {
		fail(EINVAL, "ibv_import_device: fd %d is not a cmd_fd\n", fd);
		return NULL;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		errno = ENOMEM;
		return NULL;
	}
	real = reg_get(&st);
	if (real)
		return alias_init(h, real, fd);
	free(h);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) ||
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &(socklen_t){4}) ||
	    type != SOCK_SEQPACKET || dom != AF_UNIX) {
		fail(EINVAL, "ibv_import_device: fd %d is not a cmd_fd\n", fd);
		return NULL;
	}
	err = sv_imp_ask(fd, SV_IMP_HELLO, 0, &r, NULL, NULL, NULL);
	if (err == -EIO) {
		fail(EIO, "ibv_import_device: the context of fd %d is closed\n",
		     fd);
		return NULL;
	}
	if (err || r.status) {
		fail(err == -ETIMEDOUT ? ETIMEDOUT : EINVAL,
		     "ibv_import_device: no softverbs context answers on "
		     "fd %d\n",
		     fd);
		return NULL;
	}
	return remote_new(fd);
}

/* The live MR in slot handle of ctx, under its mr_lock: loaded as
 * sv_mr_lookup does (the pd last, acquire: a registration on another
 * thread publishes its fields by it). */
static struct sv_mr *mr_at(struct sv_context *ctx, uint32_t handle)
{
	struct sv_mr *mr;

	if (handle >= SV_MAX_MR)
		return NULL;
	mr = atomic_load_explicit((_Atomic(struct sv_mr *) *)&ctx->mrs[handle],
				  memory_order_acquire);
	if (!mr || !atomic_load_explicit((_Atomic(struct sv_pd *) *)&mr->pd,
					 memory_order_acquire))
		return NULL;
	return mr;
}

/*
 * Revocation.  An importer of one of our MRs holds one end of the socket
 * it asked on; we keep a copy of the other in a free entry i of imp_held
 * (under mr_lock), and the answer carries our revocation page, a memfd
 * of SV_IMP_PAGE bytes sealed so that nobody maps it writable again or
 * resizes it (F_SEAL_FUTURE_WRITE, SHRINK, GROW, SEAL: our own mapping
 * is the only writable one), with the entry's word i and its value.
 * When the MR is deregistered or re-registered (or we close) word i
 * moves on (release, under mr_lock, before the dereg returns): the
 * importer's next lookup loads it (core/mr.c) and fails.  Then we write
 * one byte to the socket and close it, never waiting (MSG_DONTWAIT); at
 * our exit the kernel closes it, which the importer's progress thread
 * sees (verbs/mr.c).  Words only grow, so an entry reused by the next
 * import never gives an old import its value back.  At most
 * SV_IMP_HELD are kept: when full, those whose importer closed its end
 * (or wrote to it, which no softverbs importer does) are dropped first,
 * then the import is refused (ENOSPC), so an importer can cost us at
 * most SV_IMP_HELD fds and one page per context, and never keeps an MR
 * or its memory alive, nor write any word.
 */
_Static_assert(SV_IMP_HELD * sizeof(uint64_t) <= SV_IMP_PAGE, "words");

static void held_drop(struct sv_context *ctx, uint32_t i)
{
	atomic_fetch_add_explicit(&ctx->imp_page[i], 1, memory_order_release);
	(void)!send(ctx->imp_held[i].fd, "R", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	close(ctx->imp_held[i].fd);
	ctx->imp_held[i].key = 0;
	ctx->imp_held[i].fd = -1;
	ctx->imp_held[i].dm = false;
	ctx->imp_nheld--;
}

void sv_import_revoke(struct sv_context *ctx, uint32_t key)
{
	for (uint32_t i = 0; ctx->imp_nheld && i < SV_IMP_HELD; i++)
		if (ctx->imp_held[i].key &&
		    (!key ||
		     (ctx->imp_held[i].key == key && !ctx->imp_held[i].dm)))
			held_drop(ctx, i);
}

void sv_import_revoke_dm(struct sv_context *ctx, uint32_t handle)
{
	for (uint32_t i = 0; ctx->imp_nheld && i < SV_IMP_HELD; i++)
		if (ctx->imp_held[i].key == handle && ctx->imp_held[i].dm)
			held_drop(ctx, i);
}

/* At the context's teardown, after sv_import_revoke(ctx, 0): our page
 * goes (importers' mappings keep the memfd), and our mapping of an
 * owner's. */
void sv_import_pages_close(struct sv_context *ctx)
{
	if (ctx->imp_page) {
		munmap(ctx->imp_page, SV_IMP_PAGE);
		close(ctx->imp_page_fd);
		ctx->imp_page = NULL;
	}
	if (ctx->imp_rpage) {
		munmap((void *)ctx->imp_rpage, SV_IMP_PAGE);
		ctx->imp_rpage = NULL;
	}
}

/* Under mr_lock: the revocation page, made at the first import: 0 or an
 * errno. */
static uint32_t page_make(struct sv_context *ctx)
{
	int fd;
	void *p;

	if (ctx->imp_page)
		return 0;
	fd = memfd_create("softverbs-revoke", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return (uint32_t)errno;
	if (ftruncate(fd, SV_IMP_PAGE))
		goto err;
	p = mmap(NULL, SV_IMP_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto err;
	/* ours stays the only writable mapping */
	if (fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE |
			  F_SEAL_SEAL)) {
		munmap(p, SV_IMP_PAGE);
		goto err;
	}
	ctx->imp_page = p;
	ctx->imp_page_fd = fd;
	return 0;
err:
	fprintf(stderr, "softverbs: import: no revocation page: %s\n",
		strerror(errno));
	close(fd);
	return ENOMEM;
}

/* Under mr_lock: the importers that hung up (their end closed). */
static void held_prune(struct sv_context *ctx)
{
	for (uint32_t i = 0; i < SV_IMP_HELD; i++) {
		char c;
		ssize_t n;

		if (!ctx->imp_held[i].key)
			continue;
		n = recv(ctx->imp_held[i].fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
		if (!(n < 0 && (errno == EAGAIN || errno == EINTR)))
			held_drop(ctx, i);
	}
}

uint32_t sv_import_hold(struct sv_context *ctx, uint32_t key, bool dm, int fd,
			struct sv_imp_rep *r)
{
	uint32_t st, i = 0;
	int c;

	if (ctx->imp_nheld == SV_IMP_HELD)
		held_prune(ctx);
	if (ctx->imp_nheld == SV_IMP_HELD) {
		sv_dbg("import: %s %u: %d imports held already\n",
		       dm ? "DM" : "MR", key, SV_IMP_HELD);
		return ENOSPC;
	}
	st = page_make(ctx);
	if (st)
		return st;
	while (ctx->imp_held[i].key)
		i++;
	c = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (c < 0)
		return (uint32_t)errno;
	ctx->imp_held[i] = (struct sv_imp_held){key, c, dm};
	ctx->imp_nheld++;
	r->word = i;
	r->gen = atomic_load_explicit(&ctx->imp_page[i], memory_order_relaxed);
	return 0;
}

/* A copy of the importer's socket fd, kept for MR handle while it is
 * still the MR of key, and its word in r: 0, or the errno the import
 * fails with. */
static uint32_t held_add(struct sv_context *ctx, uint32_t handle, uint32_t key,
			 int fd, struct sv_imp_rep *r)
{
	uint32_t st;
	struct sv_mr *mr;

	pthread_mutex_lock(&ctx->mr_lock);
	mr = mr_at(ctx, handle);
	if (!mr || mr->ibv.lkey != key)
		st = EINVAL; /* deregistered meanwhile */
	else
		st = sv_import_hold(ctx, key, false, fd, r);
	pthread_mutex_unlock(&ctx->mr_lock);
	return st;
}

/* What the owner answers another process (import_wire.c, its progress
 * thread): 0, or the errno the import fails with.  reply_fd: the asker's
 * socket, a copy of which an importable MR's answer keeps. */
uint32_t sv_import_answer(struct sv_context *ctx, const struct sv_imp_req *q,
			  struct sv_imp_rep *r, int reply_fd, int *dm_fd)
{
	uint32_t st = EINVAL;
	struct sv_list *n;
	struct sv_mr *mr;

	if (q->op == SV_IMP_HELLO)
		return q->handle ? EINVAL : 0;
	if (q->op == SV_IMP_DM)
		return sv_dm_share(ctx, q->handle, reply_fd, r, dm_fd);
	if (q->op == SV_IMP_PD) {
		pthread_mutex_lock(&ctx->pd_lock);
		sv_list_for_each(n, &ctx->pds)
		{
			struct sv_pd *pd = container_of(n, struct sv_pd, node);

			if (pd->ibv.handle == q->handle && !pd->dead)
				st = 0;
		}
		pthread_mutex_unlock(&ctx->pd_lock);
		return st;
	}
	pthread_mutex_lock(&ctx->mr_lock);
	mr = mr_at(ctx, q->handle);
	if (mr) {
		r->lkey = mr->ibv.lkey;
		r->rkey = mr->ibv.rkey;
		r->access = (uint32_t)mr->access;
		r->addr = (uintptr_t)mr->addr;
		r->length = mr->length;
		r->iova = mr->iova;
		r->pd_handle = mr->pd->ibv.handle;
		/* not importable: device memory, implicit ODP */
		r->shared = !mr->dm &&
			    !sv_odp_implicit(mr->ibv.addr, mr->ibv.length);
		st = 0;
	}
	pthread_mutex_unlock(&ctx->mr_lock);
	if (!st && r->shared) {
		struct sv_mapobj o;

		/* what backs it now (maps read outside the lock) */
		r->shared = sv_rmem_shared_object(
			(uintptr_t)r->addr, (uintptr_t)(r->addr + r->length),
			&o);
		if (r->shared) {
			r->dev_major = o.dev_major;
			r->dev_minor = o.dev_minor;
			r->ino = o.ino;
			r->offset = o.offset;
			/* the import's lifeline, or no import */
			st = held_add(ctx, q->handle, r->lkey, reply_fd, r);
		}
	}
	return st;
}

/* The live PD of ctx whose handle is handle, with one more handle
 * counted; or NULL. */
static struct sv_pd *pd_get(struct sv_context *ctx, uint32_t handle)
{
	struct sv_pd *found = NULL;
	struct sv_list *n;

	pthread_mutex_lock(&ctx->pd_lock);
	sv_list_for_each(n, &ctx->pds)
	{
		struct sv_pd *pd = container_of(n, struct sv_pd, node);

		if (pd->ibv.handle == handle && !pd->dead) {
			found = pd;
			pd->refs++;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->pd_lock);
	return found;
}

/* Another process's PD: a PD of this context standing for it, once the
 * owner says it is live. */
static struct ibv_pd *import_pd_remote(struct ibv_context *c, uint32_t handle)
{
	struct sv_context *ctx = to_sctx(c);
	struct sv_imp_rep r;
	struct ibv_pd *ibpd;
	struct sv_pd *pd;
	int err;

	err = sv_imp_ask(c->cmd_fd, SV_IMP_PD, handle, &r, NULL, NULL, NULL);
	if (err || r.status) {
		errno = err ? -err : (int)r.status;
		return NULL;
	}
	ibpd = sv_alloc_pd(c);
	if (!ibpd)
		return NULL;
	pd = to_spd(ibpd);
	pthread_mutex_lock(&ctx->pd_lock);
	pd->dead = true; /* its handle is the other process's: not found */
	pthread_mutex_unlock(&ctx->pd_lock);
	pd->remote = true;
	ibpd->handle = handle;
	return ibpd;
}

struct ibv_pd *sv_import_pd(struct ibv_context *c, uint32_t handle)
{
	struct sv_context *ctx;
	struct sv_pd *pd, *h;

	if (!c) {
		errno = EINVAL;
		return NULL;
	}
	ctx = to_sctx(c);
	if (ctx->remote && !(handle & SV_HANDLE_HERE))
		return import_pd_remote(c, handle);
	h = calloc(1, sizeof(*h));
	if (!h) {
		errno = ENOMEM;
		return NULL;
	}
	pd = pd_get(ctx, handle);
	if (!pd) {
		free(h);
		errno = EINVAL;
		return NULL;
	}
	h->ibv.context = c;
	h->ibv.handle = handle;
	h->id = pd->id;
	h->real = pd;
	sv_list_init(&h->node);
	return &h->ibv;
}

/* Frees this handle, not the PD (a PD of another process's stands for
 * it here: it goes, unless something still uses it). */
void sv_unimport_pd(struct ibv_pd *ibpd)
{
	struct sv_pd *h;

	if (!ibpd)
		return;
	h = container_of(ibpd, struct sv_pd, ibv);
	if (h->real == h && !h->remote) {
		fprintf(stderr,
			"softverbs: ibv_unimport_pd: PD %u was not "
			"imported (ibv_dealloc_pd frees it)\n",
			ibpd->handle);
		return;
	}
	if (h->remote &&
	    atomic_load_explicit(&h->users, memory_order_acquire)) {
		fprintf(stderr,
			"softverbs: ibv_unimport_pd: PD %u still has "
			"objects: kept\n",
			ibpd->handle);
		return;
	}
	sv_pd_handle_drop(h);
}

/* Whether the owner's answer about an MR is one we could have made: keys
 * of an MR (not a window), a range that does not wrap, known access. */
static bool mr_rep_sane(const struct sv_imp_rep *r)
{
	return r->lkey && r->lkey == r->rkey && !(r->lkey & SV_KEY_MW) &&
	       r->length && r->addr + r->length > r->addr &&
	       r->iova + r->length > r->iova &&
	       !(r->access &
		 ~(uint32_t)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
			     IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND |
			     IBV_ACCESS_HUGETLB |
			     IBV_ACCESS_RELAXED_ORDERING)) &&
	       r->shared <= 1 && r->word < SV_IMP_PAGE / sizeof(uint64_t) &&
	       !r->zero;
}

/*
 * The owner's revocation page, passed as fd with its answer: mapped
 * read-only once per context (every answer must pass the same memfd).
 * It must be one we can load from without a fault, whatever the owner
 * does later: a regular file of SV_IMP_PAGE bytes sealed against
 * shrinking.  0, or the errno the import fails with.
 */
int sv_import_page_map(struct sv_context *ctx, int fd)
{
	struct stat st;
	int seals, err = 0;
	void *p;

	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_size != SV_IMP_PAGE)
		return EPROTO;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return EPROTO;
	pthread_mutex_lock(&ctx->mr_lock);
	if (ctx->imp_rpage) {
		if (ctx->imp_rpage_dev != (uint64_t)st.st_dev ||
		    ctx->imp_rpage_ino != (uint64_t)st.st_ino)
			err = EPROTO; /* one owner, one page */
	} else {
		p = mmap(NULL, SV_IMP_PAGE, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			err = errno;
		} else {
			ctx->imp_rpage = p;
			ctx->imp_rpage_dev = (uint64_t)st.st_dev;
			ctx->imp_rpage_ino = (uint64_t)st.st_ino;
		}
	}
	pthread_mutex_unlock(&ctx->mr_lock);
	return err;
}

/*
 * Another process's MR: its bytes are that process's memory.  Reachable
 * here only when the owner says they are shared memory of one object
 * and this process maps the same object, at the same offset, at the
 * same address (a MAP_SHARED mapping inherited across fork, or a memfd
 * or file both map there): the import is then this process's
 * registration of that memory under the MR's keys and iova, on pd, which
 * must stand for the MR's PD.  Anything else is EOPNOTSUPP.  Whatever
 * the owner says, what this process gets is memory it maps itself.
 */
/* Whether the owner's answer r about MR handle names memory this
 * process maps so, on pd, the import of the MR's PD; else errno. */
static bool import_mr_checked(struct ibv_pd *ibpd, uint32_t handle,
			      const struct sv_imp_rep *r)
{
	struct sv_pd *pd = container_of(ibpd, struct sv_pd, ibv);
	struct sv_mapobj o;

	if (!mr_rep_sane(r)) {
		fail(EINVAL,
		     "ibv_import_mr: process %u answered nonsense "
		     "for MR %u\n",
		     r->pid, handle);
		return false;
	}
	/* the PD must be the import of the MR's (as in one process) */
	if (!pd->remote || pd->real != pd || r->pd_handle != ibpd->handle) {
		fail(EINVAL,
		     "ibv_import_mr: MR %u is on PD %u of process %u, not "
		     "on the import of it\n",
		     handle, r->pd_handle, r->pid);
		return false;
	}
	if (!r->shared ||
	    !sv_rmem_shared_object((uintptr_t)r->addr,
				   (uintptr_t)(r->addr + r->length), &o) ||
	    o.dev_major != r->dev_major || o.dev_minor != r->dev_minor ||
	    o.ino != r->ino || o.offset != r->offset) {
		fail(EOPNOTSUPP,
		     "ibv_import_mr: MR %u is memory of process %u that "
		     "this process does not map (only shared memory both "
		     "map at the same address can be imported)\n",
		     handle, r->pid);
		return false;
	}
	return true;
}

static struct ibv_mr *import_mr_remote(struct ibv_pd *ibpd, uint32_t handle)
{
	struct sv_context *ctx = to_sctx(ibpd->context);
	struct sv_imp_life life = {.fd = -1};
	struct sv_imp_rep r;
	int err, page = -1;

	err = sv_imp_ask(ibpd->context->cmd_fd, SV_IMP_MR, handle, &r, &life.fd,
			 &page, NULL);
	if (err || r.status) {
		if (life.fd >= 0)
			close(life.fd);
		if (page >= 0)
			close(page);
		errno = err ? -err : (int)r.status;
		return NULL;
	}
	if (!import_mr_checked(ibpd, handle, &r)) {
		close(life.fd);
		if (page >= 0)
			close(page);
		return NULL;
	}
	err = sv_import_page_map(ctx, page);
	if (page >= 0)
		close(page);
	if (err) {
		close(life.fd);
		fail(err,
		     "ibv_import_mr: process %u answered for MR %u with no "
		     "revocation page we can map (%s)\n",
		     r.pid, handle, strerror(err));
		return NULL;
	}
	/* the owner moves our word when the MR goes, and keeps the other
	 * end of life.fd (closed when it dies): either revokes the import
	 * (core/mr.c, mr.c); ours goes with the import (mr.c, which closes
	 * it on failure) */
	life.word = &ctx->imp_rpage[r.word];
	life.gen = r.gen;
	life.handle = handle;
	return sv_mr_import_remote(ibpd, (void *)(uintptr_t)r.addr,
				   (size_t)r.length, r.iova, r.access, r.lkey,
				   &life);
}

struct ibv_mr *sv_import_mr(struct ibv_pd *ibpd, uint32_t handle)
{
	struct sv_context *ctx;
	struct sv_mr *mr, *m;

	if (!ibpd) {
		errno = EINVAL;
		return NULL;
	}
	ctx = to_sctx(ibpd->context);
	if (ctx->remote && !(handle & SV_HANDLE_HERE))
		return import_mr_remote(ibpd, handle);
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&ctx->mr_lock);
	mr = mr_at(ctx, handle & ~SV_HANDLE_HERE);
	/* its handle (with the bit or without, as ctx gives them), of this
	 * PD (the kernel's handle is of the ufile; an MR of another PD than
	 * the one named is a mistake) */
	if (mr && mr->ibv.handle == handle && mr->pd == to_spd(ibpd)) {
		m->ibv = mr->ibv;
		m->iova = mr->iova;
		m->addr = mr->addr;
		m->length = mr->length;
		m->access = mr->access;
		m->index = mr->index;
	} else {
		mr = NULL;
	}
	pthread_mutex_unlock(&ctx->mr_lock);
	if (!mr) {
		free(m);
		errno = EINVAL;
		return NULL;
	}
	m->ibv.context = ibpd->context;
	m->ibv.pd = ibpd;
	m->imported = true;
	return &m->ibv;
}

void sv_unimport_mr(struct ibv_mr *ibmr)
{
	struct sv_mr *m;

	if (!ibmr)
		return;
	m = container_of(ibmr, struct sv_mr, ibv);
	if (m->imp_remote) { /* this process's registration: it goes */
		if (sv_dereg_mr(ibmr))
			fprintf(stderr,
				"softverbs: ibv_unimport_mr: MR %u: "
				"deregistration failed\n",
				ibmr->handle);
		return;
	}
	if (!m->imported) {
		fprintf(stderr,
			"softverbs: ibv_unimport_mr: MR %u was not "
			"imported (ibv_dereg_mr frees it)\n",
			ibmr->handle);
		return;
	}
	free(m);
}

/* ibv_dereg_mr of an imported MR (mr.c): the MR it names goes, as the
 * kernel's destroy through any handle; then this copy. */
int sv_import_mr_dereg(struct sv_mr *m)
{
	struct sv_context *ctx = to_sctx(m->ibv.context);
	struct sv_mr *mr;
	int err = EINVAL;

	pthread_mutex_lock(&ctx->mr_lock);
	mr = mr_at(ctx, m->index);
	/* still the same MR (its key), not one reusing the slot */
	if (mr && mr->ibv.lkey != m->ibv.lkey)
		mr = NULL;
	pthread_mutex_unlock(&ctx->mr_lock);
	if (mr)
		err = sv_dereg_mr(&mr->ibv);
	if (!err)
		free(m);
	return err;
}

/* Whether the owner's answer about a DM is one we could have made: a
 * length a DM can have, a word of the page, every other field 0. */
static bool dm_rep_sane(const struct sv_imp_rep *r)
{
	return r->length && r->length <= SV_MAX_DM_SIZE && !r->lkey &&
	       !r->rkey && !r->access && !r->addr && !r->iova &&
	       !r->pd_handle && !r->shared && !r->dev_major && !r->dev_minor &&
	       !r->ino && !r->offset &&
	       r->word < SV_IMP_PAGE / sizeof(uint64_t) && !r->zero;
}

/* Another process's DM: its own memfd, which the owner passes with its
 * revocation page (wire/import.h), mapped here (dm.c checks it).  What a
 * lying owner can give us is a memfd of the DM's size, sealed: never
 * more than that, and never a mapping that can fault. */
static struct ibv_dm *import_dm_remote(struct ibv_context *c, uint32_t handle)
{
	struct sv_context *ctx = to_sctx(c);
	struct sv_imp_life life = {.fd = -1};
	struct sv_imp_rep r;
	int err, page = -1, mem = -1;

	err = sv_imp_ask(c->cmd_fd, SV_IMP_DM, handle, &r, &life.fd, &page,
			 &mem);
	if (!err && !r.status && (!dm_rep_sane(&r) || mem < 0)) {
		fail(EPROTO,
		     "ibv_import_dm: process %u answered nonsense for DM "
		     "%u\n",
		     r.pid, handle);
		err = -EPROTO;
	}
	if (!err && !r.status) {
		int e = sv_import_page_map(ctx, page);

		if (e)
			fail(e,
			     "ibv_import_dm: process %u answered for DM %u "
			     "with no revocation page we can map (%s)\n",
			     r.pid, handle, strerror(e));
		err = -e;
	}
	if (page >= 0)
		close(page);
	if (err || r.status) {
		if (life.fd >= 0)
			close(life.fd);
		if (mem >= 0)
			close(mem);
		errno = err ? -err : (int)r.status;
		if (errno == EBUSY)
			fprintf(stderr,
				"softverbs: ibv_import_dm: DM %u has MRs in "
				"its process: deregister them before the "
				"first import from another process\n",
				handle);
		return NULL;
	}
	life.word = &ctx->imp_rpage[r.word];
	life.gen = r.gen;
	return sv_dm_import_remote(c, handle, r.length, mem, &life);
}

/* A DM of this process (in-process import, or one this importing
 * context allocated itself: its handle has SV_HANDLE_HERE), else the
 * owner's, mapped here. */
struct ibv_dm *sv_import_dm(struct ibv_context *c, uint32_t handle)
{
	if (!c) {
		errno = EINVAL;
		return NULL;
	}
	if (to_sctx(c)->remote && !(handle & SV_HANDLE_HERE))
		return import_dm_remote(c, handle);
	return sv_dm_import(c, handle);
}

void sv_unimport_dm(struct ibv_dm *dm)
{
	sv_dm_unimport(dm);
}
