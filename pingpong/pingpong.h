/* SPDX-License-Identifier: MIT */
/*
 * The verbs steps of rc_pingpong, one function per step as Kerr's paper
 * walks them: device, context, completion channel, PD, MR, CQ, QP, the
 * INIT/RTR/RTS transitions, posting work requests, and teardown.
 */
#ifndef PP_PINGPONG_H
#define PP_PINGPONG_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "oob.h"
#include "options.h"

/* Work request ids double as the bits of pp_context.pending. */
enum {
	PINGPONG_RECV_WRID = 1,
	PINGPONG_SEND_WRID = 2,
};

struct pp_context {
	struct ibv_context *context;
	struct ibv_comp_channel *channel; /* -e only */
	struct ibv_pd *pd;
	struct ibv_dm *dm; /* -j only */
	struct ibv_mr *mr;
	struct ibv_cq *cq;	 /* the CQ; with -t a view of cq_ex */
	struct ibv_cq_ex *cq_ex; /* -t only */
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;	 /* -N only */
	char *buf;		 /* page aligned host buffer */
	unsigned int buf_size;	 /* bytes allocated and registered */
	unsigned int size;	 /* bytes per message right now */
	unsigned int send_flags; /* SIGNALED, plus INLINE if it fits */
	uint32_t max_inline;	 /* from ibv_query_qp */
	unsigned int rx_depth;
	int pending;		    /* PINGPONG_*_WRID bits outstanding */
	unsigned int num_cq_events; /* events to ack before CQ destroy */
	uint64_t completion_timestamp_mask;
	struct ibv_port_attr portinfo;
	const struct pp_options *opt;
	unsigned int page_size;
};

/* The device named name, or the first one; prints why not. */
struct ibv_device *pp_find_device(struct ibv_device **list, const char *name);

/*
 * Creates everything up to a QP in INIT, unwinding on failure.  The
 * error is printed at the step that failed.  0 or -1.
 */
int pp_init_ctx(struct pp_context *ctx, struct ibv_device *dev,
		const struct pp_options *opt);

/* Teardown in reverse order, acking CQ events first.  0 or -1. */
int pp_close_ctx(struct pp_context *ctx);

/* Our half of the exchange: LID, QPN, a random PSN and GID (-g). */
int pp_local_dest(struct pp_context *ctx, struct pp_dest *d);

/* INIT -> RTR -> RTS towards the peer. */
int pp_connect_qp(struct pp_context *ctx, const struct pp_dest *rem,
		  uint32_t my_psn);

/* Posts up to n receives of buf_size bytes; returns how many. */
int pp_post_recv(struct pp_context *ctx, int n);

/* Posts one signalled send of ctx->size bytes; 0 or an errno. */
int pp_post_send(struct pp_context *ctx);

/* Sets the message size and whether it goes inline. */
void pp_set_size(struct pp_context *ctx, unsigned int size);

/* -c: the client's pattern, copied to device memory with -j. */
int pp_fill_buf(struct pp_context *ctx);

/* -c on the server: counts (and reports) pages of the last message that
 * do not hold the client's pattern; -1 on error. */
int pp_check_buf(struct pp_context *ctx, FILE *out);

#endif
