// SPDX-License-Identifier: MIT
/*
 * rmem's initiator side (rmem.h): a peer's arena and key table, whose fds
 * its hello passes (shm.c), checked (sealed memfds, the table's header),
 * mapped once per arena and shared by every QP that reaches it; an rkey
 * resolved to a pointer into the peer's arena by a seqlock read of its
 * entry, every field validated (the table is the peer's to write).  And
 * the single-copy policy (SOFTVERBS_SINGLE_COPY*): which MRs rmem.c
 * shares.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "rmem.h"
#include "sv.h"
#include "rmem_priv.h"

#define REMOTE_ACCESS                                       \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* A memfd that can never shrink (mapping it cannot SIGBUS); its size. */
static int check_memfd(int fd, struct stat *st)
{
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0)
		return errno == EBADF ? -EBADF : -EINVAL; /* not a memfd */
	if (!(seals & F_SEAL_SHRINK))
		return -EINVAL;
	/* after the seal: the size cannot go down from here */
	if (fstat(fd, st))
		return -errno;
	if (!S_ISREG(st->st_mode) || st->st_size <= 0 ||
	    (uint64_t)st->st_size % page_size())
		return -EINVAL;
	return 0;
}

/* The table's header, read once; -EPROTO for another layout. */
static int check_table(const uint8_t *t, size_t size, uint64_t arena_size,
		       struct sv_rkey_hdr *h)
{
	memcpy(h, t, sizeof(*h)); /* the peer may change it: one copy */
	if (h->magic != SV_RKEY_MAGIC || h->version != SV_RKEY_VERSION ||
	    h->entry_size != sizeof(struct sv_rkey_entry))
		return -EPROTO;
	if (!h->nentries || h->nentries > SV_MAX_MR ||
	    (h->nentries & (h->nentries - 1)) || h->entries_off < sizeof(*h) ||
	    h->entries_off % _Alignof(struct sv_rkey_entry) ||
	    h->entries_off > size ||
	    (size - h->entries_off) / sizeof(struct sv_rkey_entry) <
		    h->nentries ||
	    h->arena_size != arena_size)
		return -EINVAL;
	return 0;
}

static struct sv_rpeer *rpeer_map(int arena_fd, int table_fd,
				  const struct stat *as, const struct stat *ts)
{
	struct sv_rpeer *p = calloc(1, sizeof(*p));
	struct sv_rkey_hdr h;
	void *m;
	int err;

	if (!p)
		return NULL;
	p->table_size = (size_t)ts->st_size;
	m = mmap(NULL, p->table_size, PROT_READ, MAP_SHARED, table_fd, 0);
	if (m == MAP_FAILED)
		goto err_free;
	p->table = m;
	err = check_table(p->table, p->table_size, (uint64_t)as->st_size, &h);
	if (err) {
		errno = -err;
		goto err_table;
	}
	p->arena_size = (uint64_t)as->st_size;
	m = mmap(NULL, p->arena_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 arena_fd, 0);
	if (m == MAP_FAILED)
		goto err_table;
	p->arena = m;
	p->ent = (const struct sv_rkey_entry *)(p->table + h.entries_off);
	p->nentries = h.nentries;
	p->dev = as->st_dev;
	p->ino = as->st_ino;
	p->refs = 1;
	return p;

err_table:
	err = errno;
	munmap((void *)p->table, p->table_size);
	errno = err;
err_free:
	err = errno;
	free(p);
	errno = err;
	return NULL;
}

struct sv_rpeer *sv_rpeer_get(struct sv_context *ctx, int arena_fd,
			      int table_fd)
{
	struct sv_rmem *rm = ctx->rmem;
	struct stat as, ts;
	struct sv_rpeer *p;
	int err;

	err = check_memfd(arena_fd, &as);
	if (!err)
		err = check_memfd(table_fd, &ts);
	if (!err && (as.st_dev == ts.st_dev && as.st_ino == ts.st_ino))
		err = -EINVAL; /* one file for both */
	if (!err && (uint64_t)ts.st_size <
			    SV_RKEY_HDR_BYTES + sizeof(struct sv_rkey_entry))
		err = -EINVAL;
	if (err) {
		errno = -err;
		return NULL;
	}
	pthread_mutex_lock(&rm->lock);
	for (p = rm->peers; p; p = p->next) {
		if (p->dev == as.st_dev && p->ino == as.st_ino) {
			p->refs++;
			goto out;
		}
	}
	p = rpeer_map(arena_fd, table_fd, &as, &ts);
	if (p) {
		p->next = rm->peers;
		rm->peers = p;
	}
out:
	err = errno;
	pthread_mutex_unlock(&rm->lock);
	errno = err;
	return p;
}

void sv_rpeer_put(struct sv_context *ctx, struct sv_rpeer *p)
{
	struct sv_rmem *rm = ctx->rmem;

	pthread_mutex_lock(&rm->lock);
	if (!--p->refs) {
		for (struct sv_rpeer **pp = &rm->peers; *pp;
		     pp = &(*pp)->next) {
			if (*pp == p) {
				*pp = p->next;
				break;
			}
		}
		munmap(p->arena, p->arena_size);
		munmap((void *)p->table, p->table_size);
		free(p);
	}
	pthread_mutex_unlock(&rm->lock);
}

/* An entry's fields as one consistent copy. */
struct rkey_copy {
	uint32_t key, access, pd_id;
	uint64_t iova, length, arena_off;
};

/* Seqlock read; false if the owner was writing it. */
static bool entry_read(const struct sv_rkey_entry *en, struct rkey_copy *c)
{
	_Atomic uint32_t *gen = (_Atomic uint32_t *)&en->gen;
	/* acquire: the fields after the gen that vouches for them */
	uint32_t g = atomic_load_explicit(gen, memory_order_acquire);

	if (g & 1)
		return false;
	c->key = __atomic_load_n(&en->key, __ATOMIC_RELAXED);
	c->iova = __atomic_load_n(&en->iova, __ATOMIC_RELAXED);
	c->length = __atomic_load_n(&en->length, __ATOMIC_RELAXED);
	c->arena_off = __atomic_load_n(&en->arena_off, __ATOMIC_RELAXED);
	c->access = __atomic_load_n(&en->access, __ATOMIC_RELAXED);
	c->pd_id = __atomic_load_n(&en->pd_id, __ATOMIC_RELAXED);
	/* acquire: the fields are read before the gen is read again */
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(gen, memory_order_relaxed) == g;
}

void *sv_rpeer_at(struct sv_rpeer *p, uint64_t off, uint64_t len)
{
	if (off > p->arena_size || len > p->arena_size - off)
		return NULL;
	return p->arena + off;
}

/* SOFTVERBS_SINGLE_COPY=0 keeps memory without remote access private. */
static uint32_t single_copy_min = UINT32_MAX;
static uint32_t single_copy_cold = SV_SINGLE_COPY_COLD;
static unsigned int shared_access = REMOTE_ACCESS;
static pthread_once_t policy_once = PTHREAD_ONCE_INIT;

static void policy_read(void)
{
	single_copy_cold = (uint32_t)sv_env_uint(SV_ENV_SINGLE_COPY_COLD);
	if (!sv_env_bool(SV_ENV_SINGLE_COPY))
		return;
	single_copy_min = (uint32_t)sv_env_uint(SV_ENV_SINGLE_COPY_MIN);
	shared_access = REMOTE_ACCESS | IBV_ACCESS_LOCAL_WRITE;
}

uint32_t sv_single_copy_min(void)
{
	pthread_once(&policy_once, policy_read);
	return single_copy_min;
}

uint32_t sv_single_copy_cold(void)
{
	pthread_once(&policy_once, policy_read);
	return single_copy_cold;
}

unsigned int sv_rmem_shared_access(void)
{
	pthread_once(&policy_once, policy_read);
	return shared_access;
}

void *sv_rpeer_resolve(struct sv_rpeer *p, uint32_t rkey, uint32_t pd_id,
		       uint64_t va, uint64_t len, unsigned int access)
{
	struct rkey_copy c;
	uint64_t moff, off;

	if (!len || !rkey)
		return NULL;
	/* nentries is a power of two (check_table) */
	if (!entry_read(&p->ent[rkey & (p->nentries - 1)], &c))
		return NULL;
	if (c.key != rkey || c.pd_id != pd_id ||
	    c.arena_off == SV_RMEM_NOT_REBACKED ||
	    (c.access & access) != access)
		return NULL;
	/* inside the MR, with no overflow */
	if (va < c.iova)
		return NULL;
	moff = va - c.iova;
	if (moff > c.length || len > c.length - moff)
		return NULL;
	/* inside the arena */
	if (c.arena_off > p->arena_size || moff > p->arena_size - c.arena_off)
		return NULL;
	off = c.arena_off + moff;
	if (len > p->arena_size - off)
		return NULL;
	return p->arena + off;
}
