/* SPDX-License-Identifier: MIT */
/*
 * The verbs objects (verbs/, layer 1): what they offer each other and
 * the context's ops tables, beyond the entry points the ABI layer calls
 * (entry.h, included here).  Nothing below verbs/ includes this header.
 */
#ifndef SV_VERBS_H
#define SV_VERBS_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "entry.h"
#include "objects.h"

/* What each kind of object may count to (device.c; SV_MAX_*). */
extern const uint32_t sv_obj_max[SV_OBJ_NUM];

/* Counts one more object of kind k in the context: 0, or -EINVAL when
 * the device's max_* of that kind are already live (rxe's pool limit). */
static inline int sv_obj_get(struct sv_context *ctx, enum sv_obj k)
{
	if (atomic_fetch_add_explicit(&ctx->nobj[k], 1, memory_order_relaxed) >=
	    sv_obj_max[k]) {
		atomic_fetch_sub_explicit(&ctx->nobj[k], 1,
					  memory_order_relaxed);
		return -EINVAL;
	}
	return 0;
}

static inline void sv_obj_put(struct sv_context *ctx, enum sv_obj k)
{
	atomic_fetch_sub_explicit(&ctx->nobj[k], 1, memory_order_relaxed);
}

/* Removes every completion of QP qpn not polled yet (ibv_destroy_qp). */
void sv_cq_clean(struct sv_cq *cq, uint32_t qpn);
int sv_cq_attach_qp(struct sv_qp *qp);
void sv_cq_detach_qp(struct sv_qp *qp);
/* The readiness sets of the CQs the app did not destroy (the context's
 * close, after its QPs'). */
void sv_cq_close_ready_sets(struct sv_context *ctx);

/* Async events (channel.c; core.h's sv_async_event queues them).  Drops
 * the queued events of a CQ or QP being destroyed. */
void sv_async_forget(struct sv_context *ctx, void *obj);
int sv_evq_init(struct sv_evq *q);
void sv_evq_destroy(struct sv_evq *q);

/* Device (device.c).  An address vector this host can reach (port 1 or
 * unset; our LID, or a GID of our table): 0, or EINVAL said once on
 * stderr, as who. */
/* An address vector's check (EINVAL, said on stderr); tcp_ok: another
 * host's IP address GID (sv_gid_sockaddr) is fine (a connected QP's, over TCP).
 */
int sv_av_check(const struct ibv_ah_attr *a, const char *who, bool tcp_ok);
int sv_port_mtu_bytes(enum ibv_mtu mtu);

/* The RoCEv2 device softverbs_roce0 (device_roce.c): one Ethernet port
 * bound to a net interface, its GIDs the interface's, RoCE v2. */
#define SV_ROCE_DEV_NAME "softverbs_roce0"
/* A netdev for it (chosen once per process): false, and it is not
 * listed, if the host has no interface but loopbacks with IPv4. */
bool sv_roce_netdev_pick(void);
/* The context is the RoCE device's (device.c). */
bool sv_ctx_is_roce(const struct ibv_context *c);
uint64_t sv_roce_node_guid(void);
int sv_roce_query_port(uint8_t port, struct ibv_port_attr *attr,
		       size_t attr_len);
int sv_roce_query_gid(uint8_t port, int index, union ibv_gid *gid);
int sv_roce_query_gid_type(uint8_t port, unsigned int index,
			   enum ibv_gid_type_sysfs *type);
int sv_roce_query_gid_ex(uint32_t port, uint32_t index,
			 struct ibv_gid_entry *entry, uint32_t flags,
			 size_t entry_size);
ssize_t sv_roce_query_gid_table(struct ibv_gid_entry *entries, size_t max,
				uint32_t flags, size_t entry_size);
/* An address vector on the Ethernet port (GRH required): 0 or EINVAL,
 * said once on stderr. */
int sv_roce_av_check(const struct ibv_ah_attr *a);
/* The QP types the device takes: 0 or EOPNOTSUPP. */
int sv_roce_qp_type_check(enum ibv_qp_type t);

/* Import (import.c, import_wire.c; wire/import.h).  After
 * ibv_open_device, the context is found by its cmd_fd's inode and
 * answers other processes on cmd_peer (the progress thread). */
struct sv_imp_req;
struct sv_imp_rep;
void sv_import_serve(struct sv_context *ctx);
/* ibv_open_device for ibv_import_device of another process's cmd_fd:
 * the context holds that fd (context.c). */
struct ibv_context *sv_open_imported(struct ibv_device *dev, int cmd_fd);
void sv_import_serve_start(struct sv_context *ctx);
/* Drops a handle of the real context: true if it was the last. */
bool sv_import_put(struct sv_context *ctx);
/* Frees an in-process import's own handle and its cmd_fd. */
void sv_import_close(struct sv_context *h);
/* The owner's answer; an MR's or DM's importer's socket reply_fd is kept
 * (a copy: sv_import_revoke writes to it and closes it); a DM's answer
 * sets *dm_fd to a copy of its memfd, for the caller to pass and close. */
uint32_t sv_import_answer(struct sv_context *ctx, const struct sv_imp_req *q,
			  struct sv_imp_rep *r, int reply_fd, int *dm_fd);
/* keep: NULL, or where the reply socket goes (else closed); page, mem:
 * NULL, or where the first and second fd an answer carries go (-1:
 * none). */
int sv_imp_ask(int fd, uint16_t op, uint32_t handle, struct sv_imp_rep *r,
	       int *keep, int *page, int *mem);
/* Under mr_lock: revokes other processes' imports of the MR of key
 * (all of them, DMs' too: key 0, at ibv_close_device). */
void sv_import_revoke(struct sv_context *ctx, uint32_t key);
/* Under mr_lock: revokes other processes' imports of DM handle. */
void sv_import_revoke_dm(struct sv_context *ctx, uint32_t handle);
/* Under mr_lock: keeps a copy of an importer's socket fd for the MR of
 * key (dm: for the DM of handle key), with its word in r: 0 or the errno
 * the import fails with. */
uint32_t sv_import_hold(struct sv_context *ctx, uint32_t key, bool dm, int fd,
			struct sv_imp_rep *r);
/* An importing context: maps its owner's revocation page (fd, checked):
 * 0 or an errno. */
int sv_import_page_map(struct sv_context *ctx, int fd);
/* At teardown: the revocation pages, ours and the owner's we map. */
void sv_import_pages_close(struct sv_context *ctx);
int sv_import_mr_dereg(struct sv_mr *m);
/* What keeps an import of another process's MR alive (import.c): the
 * socket the owner holds the other end of, and its word in the owner's
 * revocation page with the value it has while the MR lives. */
struct sv_imp_life {
	int fd;
	const _Atomic uint64_t *word;
	uint64_t gen;
	uint32_t handle; /* an MR import's: the owner's MR's; else 0 */
};
/* ibv_import_mr of another process's MR on shared memory (mr.c); closes
 * life->fd on failure. */
struct ibv_mr *sv_mr_import_remote(struct ibv_pd *ibpd, void *addr,
				   size_t length, uint64_t iova,
				   unsigned int access, uint32_t key,
				   const struct sv_imp_life *life);
/* An MR on another process's DM (dm.c): revoked with it, by life (its
 * fd: a copy the MR owns, closed on failure). */
struct ibv_mr *sv_mr_publish_watched(struct ibv_pd *ibpd, void *addr,
				     size_t length, unsigned int access,
				     struct sv_dm *dm,
				     const struct sv_imp_life *life);
/* Closes an import's socket once no lookup can use it (mr.c). */
void sv_mr_imp_close(struct sv_mr *mr);
/* ibv_unimport_pd: drops handle h of its PD (context.c). */
void sv_pd_handle_drop(struct sv_pd *h);

/* QP (qp.c). */
void sv_qp_free_all(struct sv_context *ctx);
/* ibv_close_device: every QP still open is torn down (BYE to peers). */
void sv_qp_close_all(struct sv_context *ctx);

/* Memory windows (mw.c): the ops ibv_alloc_mw, ibv_dealloc_mw and
 * ibv_bind_mw (verbs.h's inlines) call; ibv_close_device frees them. */
struct ibv_mw *sv_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int sv_dealloc_mw(struct ibv_mw *mw);
int sv_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
void sv_mw_free_all(struct sv_context *ctx);
/* ibv_destroy_qp: the type 2 windows bound to QP qpn are invalid (a
 * later QP with its number must not reach them). */
void sv_mw_qp_gone(struct sv_context *ctx, uint32_t qpn);

/* MRs (mr.c): the MR over [addr, addr+length) named by iova, on device
 * memory if dm, its arguments checked by the caller; NULL and errno. */
struct ibv_mr *sv_mr_publish(struct ibv_pd *pd, void *addr, size_t length,
			     uint64_t iova, unsigned int access,
			     struct sv_dm *dm);

/* Device memory (dm.c): the ops ibv_alloc_dm, ibv_free_dm and
 * ibv_reg_dm_mr (verbs.h's inlines) call; an MR on a DM going
 * (ibv_dereg_mr); ibv_close_device frees the DMs left. */
struct ibv_dm *sv_alloc_dm(struct ibv_context *c,
			   struct ibv_alloc_dm_attr *attr);
int sv_free_dm(struct ibv_dm *dm);
struct ibv_mr *sv_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm,
			    uint64_t dm_offset, size_t length,
			    unsigned int access);
void sv_dm_mr_gone(struct sv_dm *dm);
void sv_dm_free_all(struct sv_context *ctx);
/* ibv_import_dm / ibv_unimport_dm in this process (import.c calls). */
struct ibv_dm *sv_dm_import(struct ibv_context *c, uint32_t handle);
void sv_dm_unimport(struct ibv_dm *dm);
/* The owner's SV_IMP_DM (dm.c): the DM of handle on a memfd of its own,
 * importer fd's socket kept; 0 and *length, *memfd (a copy), r's word,
 * or an errno. */
uint32_t sv_dm_share(struct sv_context *ctx, uint32_t handle, int fd,
		     struct sv_imp_rep *r, int *memfd);
/* The importer's: another process's DM of handle, of length bytes, on
 * memfd (checked here; closed), revoked by life (its fd closed on
 * failure). */
struct ibv_dm *sv_dm_import_remote(struct ibv_context *c, uint32_t handle,
				   uint64_t length, int memfd,
				   const struct sv_imp_life *life);

/* Multicast (verbs/mcast.c). */
/* ibv_destroy_qp, ibv_close_device: the QP leaves every group (uverbs
 * detaches a destroyed QP).  Caller holds no QP lock. */
void sv_mcast_detach_all(struct sv_qp *qp);

/* XRC (xrc.c). */
struct ibv_xrcd *sv_open_xrcd(struct ibv_context *c,
			      struct ibv_xrcd_init_attr *attr);
int sv_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_qp *sv_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *attr);
/* An XRC SRQ's number and socket; 0 or -errno. */
int sv_xsrq_bind(struct sv_srq *srq);
void sv_xsrq_unbind(struct sv_srq *srq);
/* Takes the forwarded sends waiting on the SRQ's socket while it has
 * WQEs.  Caller holds no SRQ lock. */
void sv_xsrq_recv_run(struct sv_srq *srq);
/* XRC_RECV QPs: joining and leaving the process's list (ibv_open_qp). */
void sv_xrc_qp_add(struct sv_qp *qp);
void sv_xrc_qp_del(struct sv_qp *qp);

/* Thread and parent domains (domain.c).  A parent domain is a PD whose
 * inner is the PD it contains (to_spd resolves it); objects made on it
 * hold it (sv_pd_hold), and their queue buffers come from its
 * allocator (sv_dom_alloc). */
struct sv_td {
	struct ibv_td ibv;
	_Atomic uint32_t users; /* parent domains holding it: EBUSY */
};

struct sv_pdom {
	struct sv_pd pd;  /* pd.inner: the PD; pd.users: objects on it */
	struct sv_td *td; /* or NULL */
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
	void *pd_context;
};

static inline struct sv_td *to_std(struct ibv_td *td)
{
	return container_of(td, struct sv_td, ibv);
}

/* pd's parent domain, or NULL if pd is a plain PD. */
static inline struct sv_pdom *sv_pdom_of(struct ibv_pd *pd)
{
	struct sv_pd *p = container_of(pd, struct sv_pd, ibv);

	return p->inner ? container_of(p, struct sv_pdom, pd) : NULL;
}

/* The resource_type the allocator is told: the upper 32 bits a driver id
 * (RDMA_DRIVER_UNKNOWN, 0: softverbs has none), the lower mlx5dv's codes
 * for the same objects. */
#define SV_RES_QP  1ull
#define SV_RES_SRQ 4ull
#define SV_RES_CQ  5ull

struct ibv_td *sv_alloc_td(struct ibv_context *c, struct ibv_td_init_attr *a);
int sv_dealloc_td(struct ibv_td *td);
struct ibv_pd *sv_alloc_parent_domain(struct ibv_context *c,
				      struct ibv_parent_domain_init_attr *a);
int sv_dealloc_parent_domain(struct sv_pdom *dom);
/* An object made on pd holds its PD and, if pd is a parent domain, that
 * too (its ibv_dealloc_pd is EBUSY until sv_pd_drop). */
void sv_pd_hold(struct ibv_pd *pd);
void sv_pd_drop(struct ibv_pd *pd);
void *sv_dom_alloc(struct ibv_pd *pd, size_t n, size_t size, uint64_t type,
		   bool *custom);
void sv_dom_free(struct ibv_pd *pd, void *p, uint64_t type, bool custom);
/* ib_access_writable(): access that lets anyone write the memory. */
#define SV_ACCESS_WRITES                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)

/* On-demand paging (odp.c).  Implicit ODP: one MR over all memory. */
static inline bool sv_odp_implicit(const void *addr, size_t length)
{
	return !addr && length == SIZE_MAX;
}
/* What registration of an ODP MR refuses: 0 or -EINVAL. */
int sv_odp_check_reg(const void *addr, size_t length, uint64_t iova);
/* An implicit MR's span for the engine (odp.c): [page 1, 2^63). */
void sv_odp_implicit_span(struct sv_mr *mr);
void sv_odp_fill_caps(struct ibv_odp_caps *c);
uint32_t sv_odp_xrc_caps(void);
int sv_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		 uint32_t flags, struct ibv_sge *sg, uint32_t num_sge);

/* Data path entry points, installed in context ops. */
int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad);
int sv_post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *op,
		    struct ibv_ops_wr **bad);
int sv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
struct ibv_srq *sv_create_srq_ex(struct ibv_context *c,
				 struct ibv_srq_init_attr_ex *attr);
int sv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *c,
				  struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *sv_create_qp_ex(struct ibv_context *c,
			       struct ibv_qp_init_attr_ex *attr);
int sv_query_device_ex(struct ibv_context *c,
		       const struct ibv_query_device_ex_input *in,
		       struct ibv_device_attr_ex *attr, size_t attr_size);
int sv_query_rt_values(struct ibv_context *c, struct ibv_values_ex *values);

#endif
