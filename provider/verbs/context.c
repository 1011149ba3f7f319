// SPDX-License-Identifier: MIT
/*
 * Contexts: ibv_open_device/ibv_close_device, the ops tables the inline
 * verbs dispatch through, and the protection domain (a tag with an id,
 * and a count of the objects created on it).  A context owns its progress
 * thread and async event queue.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.h"
#include "env.h"
#include "inject.h"
#include "pcap.h"
#include "progress.h"
#include "rmem.h"
#include "stat.h"
#include "transport.h"
#include "verbs.h"

#define SV_MR_TABLE_BYTES (SV_MAX_MR * sizeof(struct sv_mr *))

static void set_ops(struct sv_context *ctx)
{
	struct ibv_context_ops *ops = &ctx->vctx.context.ops;

	/* the hot path: the inline verbs call these with no check */
	ops->poll_cq = sv_poll_cq;
	ops->req_notify_cq = sv_req_notify_cq;
	ops->post_send = sv_post_send;
	ops->post_recv = sv_post_recv;
	ops->post_srq_recv = sv_post_srq_recv;
	ops->bind_mw = sv_bind_mw;
	ops->dealloc_mw = sv_dealloc_mw;
	ops->alloc_mw = sv_alloc_mw;

	/* extended verbs: present ones are found through vctx->sz */
	ctx->vctx.query_port = sv_query_port;
	ctx->vctx.query_device_ex = sv_query_device_ex;
	ctx->vctx.query_rt_values = sv_query_rt_values;
	ctx->vctx.create_cq_ex = sv_create_cq_ex;
	ctx->vctx.create_qp_ex = sv_create_qp_ex;
	ctx->vctx.create_srq_ex = sv_create_srq_ex;
	ctx->vctx.post_srq_ops = sv_post_srq_ops;
	ctx->vctx.get_srq_num = sv_get_srq_num;
	ctx->vctx.open_xrcd = sv_open_xrcd;
	ctx->vctx.close_xrcd = sv_close_xrcd;
	ctx->vctx.open_qp = sv_open_qp;
	ctx->vctx.alloc_td = sv_alloc_td;
	ctx->vctx.dealloc_td = sv_dealloc_td;
	ctx->vctx.alloc_parent_domain = sv_alloc_parent_domain;
	ctx->vctx.advise_mr = sv_advise_mr;
	ctx->vctx.alloc_dm = sv_alloc_dm;
	ctx->vctx.free_dm = sv_free_dm;
	ctx->vctx.reg_dm_mr = sv_reg_dm_mr;
}

/*
 * context->cmd_fd: a real fd the context owns, as a kernel device's
 * uverbs fd is (programs dup it, pass it with SCM_RIGHTS for
 * ibv_import_device, check it with fcntl).  One end of a Unix
 * socketpair, close-on-exec and non-blocking, the other end kept and
 * read by the progress thread: the channel another process's import
 * talks to us on (verbs/import_wire.c); in this process the registry
 * finds us by its inode (verbs/import.c).  Both are closed when the
 * context is torn down (its last handle closed).
 */
static int cmd_fd_open(struct sv_context *ctx, int fd)
{
	int sv[2];

	if (fd >= 0) { /* imported from another process: its fd */
		ctx->vctx.context.cmd_fd = fd;
		ctx->remote = true;
		return 0;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
		       0, sv))
		return -errno;
	ctx->vctx.context.cmd_fd = sv[0];
	ctx->cmd_peer = sv[1];
	return 0;
}

static void cmd_fd_close(struct sv_context *ctx)
{
	if (ctx->vctx.context.cmd_fd >= 0)
		close(ctx->vctx.context.cmd_fd);
	if (ctx->cmd_peer >= 0)
		close(ctx->cmd_peer);
	ctx->vctx.context.cmd_fd = ctx->cmd_peer = -1;
}

/* cmd_fd: -1, a socket pair of its own; else the fd it was given by
 * ibv_import_device (another process's context's, verbs/import.c). */
static struct ibv_context *open_ctx(struct ibv_device *dev, int cmd_fd)
{
	struct sv_context *ctx;
	int err;

	if (!dev || (strcmp(dev->name, SV_DEV_NAME) &&
		     strcmp(dev->name, SV_ROCE_DEV_NAME))) {
		errno = ENODEV;
		return NULL;
	}
	/* a bad SOFTVERBS_* value (said on stderr): not listed, not opened */
	if (sv_env_refused() || sv_inject_init()) {
		errno = EINVAL;
		return NULL;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	ctx->vctx.sz = sizeof(ctx->vctx);
	ctx->vctx.context.device = dev;
	ctx->vctx.context.abi_compat = (void *)UINTPTR_MAX;
	ctx->vctx.context.cmd_fd = ctx->cmd_peer = ctx->cmd_pfd.fd = -1;
	ctx->vctx.context.num_comp_vectors = 1;
	ctx->real = ctx;
	ctx->refs = 1;
	sv_list_init(&ctx->imp_node);
	pthread_mutex_init(&ctx->pd_lock, NULL);
	sv_list_init(&ctx->pds);
	pthread_mutex_init(&ctx->vctx.context.mutex, NULL);
	pthread_rwlock_init(&ctx->qp_lock, NULL);
	pthread_mutex_init(&ctx->mr_lock, NULL);
	pthread_mutex_init(&ctx->mw_lock, NULL);
	pthread_mutex_init(&ctx->mcast_lock, NULL);
	pthread_mutex_init(&ctx->door_lock, NULL);
	pthread_mutex_init(&ctx->lane_lock, NULL);
	ctx->ud_tx_fd = ctx->ud_fwd_fd = ctx->udoor.fd = ctx->ud_tx6_fd = -1;
	sv_list_init(&ctx->qps);
	sv_list_init(&ctx->ready_cqs);
	sv_list_init(&ctx->park_cqs);
	pthread_mutex_init(&ctx->park_lock, NULL);
	pthread_mutex_init(&ctx->xsrq_lock, NULL);
	sv_list_init(&ctx->xsrqs);
	set_ops(ctx);
	/* the MR table never moves: lookups need no lock (mr.c).  1 MiB of
	 * address space, from mmap: untouched pages cost no memory (calloc
	 * of reused heap would zero them all) */
	ctx->mrs = mmap(NULL, SV_MR_TABLE_BYTES, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ctx->mrs == MAP_FAILED) {
		err = -ENOMEM;
		goto err_free_ctx;
	}

	err = sv_rmem_init(ctx);
	if (err)
		goto err_free;
	err = cmd_fd_open(ctx, cmd_fd);
	if (err)
		goto err_rmem;
	err = sv_evq_init(&ctx->async);
	if (err)
		goto err_cmd_fd;
	ctx->vctx.context.async_fd = ctx->async.fd;
	sv_pcap_open(); /* SOFTVERBS_PCAP, once per process */
	/* the counters' table: without it the device works, unseen */
	err = sv_stat_open(ctx);
	if (err)
		sv_dbg("softverbs-stat table: %s\n", strerror(-err));
	err = sv_progress_start(ctx, sv_drive_doors_next_ns);
	if (err)
		goto err_stat;
	sv_import_serve(ctx); /* other processes' requests on cmd_peer */
	return &ctx->vctx.context;

err_stat:
	sv_stat_close(ctx);
	sv_evq_destroy(&ctx->async);
err_cmd_fd:
	if (ctx->remote) /* still the caller's */
		ctx->vctx.context.cmd_fd = -1;
	cmd_fd_close(ctx);
err_rmem:
	sv_rmem_fini(ctx);
err_free:
	munmap(ctx->mrs, SV_MR_TABLE_BYTES);
err_free_ctx:
	free(ctx);
	errno = -err;
	return NULL;
}

struct ibv_context *sv_open_device(struct ibv_device *dev)
{
	return open_ctx(dev, -1);
}

struct ibv_context *sv_open_imported(struct ibv_device *dev, int cmd_fd)
{
	return open_ctx(dev, cmd_fd);
}

/* The last handle of ctx closed: everything goes. */
static void ctx_teardown(struct sv_context *ctx)
{
	sv_qp_close_all(ctx);	     /* QPs the app did not destroy */
	sv_cq_close_ready_sets(ctx); /* ... CQs: their fds */
	sv_progress_stop(ctx);	     /* and cmd_pfd with its loop */
	sv_stat_close(ctx);
	if (sv_pcap_on)
		sv_pcap_flush();
	sv_transport_ctx_close(ctx);
	sv_ud_door_close(ctx);
	sv_lanes_tx_close(ctx);
	sv_qp_free_all(ctx);
	sv_evq_destroy(&ctx->async);
	cmd_fd_close(ctx);
	sv_rmem_fini(ctx);   /* MRs left registered: their memory is private */
	sv_mw_free_all(ctx); /* windows, as MRs below */
	sv_dm_free_all(ctx); /* device memory left allocated */
	/* MRs left registered, in their slots; the rest on the free list */
	sv_import_revoke(ctx, 0); /* other processes' imports of ours */
	for (uint32_t i = 0; ctx->nmrs && i < SV_MAX_MR; i++)
		if (ctx->mrs[i]) {
			sv_mr_imp_close(ctx->mrs[i]);
			free(ctx->mrs[i]);
		}
	while (ctx->mr_free) {
		struct sv_mr *mr = ctx->mr_free;

		ctx->mr_free = mr->next_free;
		free(mr);
	}
	while (ctx->mr_limbo) {
		struct sv_mr *mr = ctx->mr_limbo;

		ctx->mr_limbo = mr->next_free;
		sv_mr_imp_close(mr);
		free(mr);
	}
	sv_import_pages_close(ctx); /* no MR loads from them any more */
	munmap(ctx->mrs, SV_MR_TABLE_BYTES);
	pthread_rwlock_destroy(&ctx->qp_lock);
	pthread_mutex_destroy(&ctx->mr_lock);
	pthread_mutex_destroy(&ctx->park_lock);
	pthread_mutex_destroy(&ctx->mcast_lock);
	pthread_mutex_destroy(&ctx->door_lock);
	pthread_mutex_destroy(&ctx->lane_lock);
	pthread_mutex_destroy(&ctx->xsrq_lock);
	/* PDs whose handles were not all dropped (the original's handle of
	 * a PD deallocated through an import, PDs left allocated) */
	while (!sv_list_empty(&ctx->pds)) {
		struct sv_list *n = ctx->pds.next;

		sv_list_del(n);
		free(container_of(n, struct sv_pd, node));
	}
	pthread_mutex_destroy(&ctx->pd_lock);
	pthread_mutex_destroy(&ctx->vctx.context.mutex);
	free(ctx);
}

/* c is the context or an in-process import of it (its own handle, its
 * own cmd_fd): the context goes with its last handle. */
int sv_close_device(struct ibv_context *c)
{
	struct sv_context *h = container_of(c, struct sv_context, vctx.context);
	struct sv_context *ctx = h->real;

	if (h != ctx)
		sv_import_close(h);
	if (sv_import_put(ctx))
		ctx_teardown(ctx);
	return 0;
}

/* A PD's id names it in the key table (rmem.h): non-zero, unique in the
 * context until 2^31 PDs have been made (its handle: the id, with
 * SV_HANDLE_HERE on an imported context).  On ctx->pds until freed
 * (an import finds it there by handle while it is not dead,
 * verbs/import.c). */
struct ibv_pd *sv_alloc_pd(struct ibv_context *c)
{
	struct sv_context *ctx = to_sctx(c);
	struct sv_pd *pd;
	int err;

	err = sv_obj_get(ctx, SV_OBJ_PD);
	if (err) {
		errno = -err;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		sv_obj_put(ctx, SV_OBJ_PD);
		errno = ENOMEM;
		return NULL;
	}
	pd->ibv.context = c;
	do
		pd->id = (atomic_fetch_add_explicit(&ctx->pd_ids, 1,
						    memory_order_relaxed) +
			  1) &
			 ~SV_HANDLE_HERE;
	while (!pd->id);
	pd->ibv.handle = sv_handle_of(ctx, pd->id);
	pd->real = pd;
	pd->refs = 1;
	pthread_mutex_lock(&ctx->pd_lock);
	sv_list_add_tail(&ctx->pds, &pd->node);
	pthread_mutex_unlock(&ctx->pd_lock);
	return &pd->ibv;
}

/* Drops handle h of its real PD, under the context's pd_lock: the real
 * PD goes with its last handle. */
static void pd_handle_put(struct sv_context *ctx, struct sv_pd *h)
{
	struct sv_pd *pd = h->real;

	if (h != pd)
		free(h);
	if (--pd->refs)
		return;
	sv_list_del(&pd->node);
	sv_obj_put(ctx, SV_OBJ_PD);
	free(pd);
}

/* The PD, through any of its handles (an import's too, as the kernel's
 * destroy through an imported handle): EBUSY while objects use it;
 * then no import finds it (dead), and each other handle frees only
 * itself. */
int sv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct sv_pd *h = container_of(ibpd, struct sv_pd, ibv);
	struct sv_context *ctx = to_sctx(ibpd->context);
	struct sv_pd *pd = h->real;

	if (h->inner) /* a parent domain (domain.c) */
		return sv_dealloc_parent_domain(sv_pdom_of(ibpd));
	pthread_mutex_lock(&ctx->pd_lock);
	/* acquire: the users' last accesses happen before the free */
	if (atomic_load_explicit(&pd->users, memory_order_acquire)) {
		pthread_mutex_unlock(&ctx->pd_lock);
		return EBUSY;
	}
	pd->dead = true;
	pd_handle_put(ctx, h);
	pthread_mutex_unlock(&ctx->pd_lock);
	return 0;
}

/* ibv_unimport_pd (verbs/import.c): this handle only. */
void sv_pd_handle_drop(struct sv_pd *h)
{
	struct sv_context *ctx = to_sctx(h->ibv.context);

	pthread_mutex_lock(&ctx->pd_lock);
	pd_handle_put(ctx, h);
	pthread_mutex_unlock(&ctx->pd_lock);
}
