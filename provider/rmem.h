/* SPDX-License-Identifier: MIT */
/* placeholder: replaced by the rmem branch */
#ifndef SV_RMEM_H
#define SV_RMEM_H
#include <stdint.h>
struct sv_context;
struct sv_rpeer;
int sv_rmem_fds(struct sv_context *ctx, int *arena_fd, int *table_fd);
struct sv_rpeer *sv_rpeer_get(struct sv_context *ctx, int arena_fd,
			      int table_fd);
void sv_rpeer_put(struct sv_context *ctx, struct sv_rpeer *p);
void *sv_rpeer_resolve(struct sv_rpeer *p, uint32_t rkey, uint32_t pd_id,
		       uint64_t va, uint64_t len, unsigned int access);
#endif
