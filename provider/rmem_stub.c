// SPDX-License-Identifier: MIT
/* placeholder until the rmem branch lands */
#include <errno.h>
#include <stddef.h>
#include "rmem.h"
int sv_rmem_fds(struct sv_context *ctx, int *a, int *t)
{
	(void)ctx;
	*a = *t = -1;
	return -EOPNOTSUPP;
}
struct sv_rpeer *sv_rpeer_get(struct sv_context *ctx, int a, int t)
{
	(void)ctx, (void)a, (void)t;
	errno = EOPNOTSUPP;
	return NULL;
}
void sv_rpeer_put(struct sv_context *ctx, struct sv_rpeer *p)
{
	(void)ctx, (void)p;
}
void *sv_rpeer_resolve(struct sv_rpeer *p, uint32_t rkey, uint32_t pd_id,
		       uint64_t va, uint64_t len, unsigned int access)
{
	(void)p, (void)rkey, (void)pd_id, (void)va, (void)len, (void)access;
	return NULL;
}
