// SPDX-License-Identifier: MIT
/*
 * A "softverbs-stat" table (stat.h's layout): what a device context's
 * counters (stat.c) and librdmacm's IB CM counters (rdmacm/ib_stat.c)
 * are both published in, made one way.  No context here: librdmacm links
 * this file as it links env.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stat.h"

struct sv_stat_hdr *sv_stat_table_new(uint32_t nctr, uint32_t ctx_id, int *fdp)
{
	int fd = memfd_create(SV_STAT_MEMFD, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct sv_stat_hdr *h;
	int err;

	if (fd < 0)
		return NULL;
	/* sealed: a reader maps it without fearing a shrink (SIGBUS) */
	if (ftruncate(fd, (off_t)SV_STAT_SIZE) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		goto err_close;
	h = mmap(NULL, SV_STAT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		goto err_close;
	h->version = SV_STAT_VERSION;
	h->hdr_size = sizeof(*h);
	h->slot_size = sizeof(struct sv_stat_slot);
	h->nslots = SV_STAT_SLOTS;
	h->nctr = nctr;
	h->pid = (uint32_t)getpid();
	h->ctx_id = ctx_id;
	*fdp = fd;
	return h;

err_close:
	err = errno;
	close(fd);
	errno = err;
	return NULL;
}
