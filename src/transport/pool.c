/* SPDX-License-Identifier: MIT */
/*
 * Buffer pools: a fixed set of equal buffers carved from one region, handed
 * out and taken back in O(1) from a stack. Made once; get/put never
 * allocate.
 */
#include <errno.h>
#include <stdlib.h>

#include "qlink/channel.h"

struct ql_pool {
	struct ql_buffer *bufs;
	struct ql_buffer **free;
	uint32_t nfree;
	uint32_t count;
	uint32_t headroom;
};

int ql_pool_create(void *region, size_t region_len, uint32_t count, uint32_t buf_size,
		   uint32_t headroom, struct ql_pool **out)
{
	struct ql_pool *p;

	if (!region || !count || !buf_size || headroom > buf_size ||
	    buf_size > UINT32_MAX - QL_POOL_SLACK ||
	    ql_pool_region_size(count, buf_size) > region_len)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->bufs = calloc(count, sizeof(*p->bufs));
	p->free = calloc(count, sizeof(*p->free));
	if (!p->bufs || !p->free) {
		free(p->bufs);
		free(p->free);
		free(p);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < count; i++) {
		struct ql_buffer *b = &p->bufs[i];

		b->base = (uint8_t *)region + (size_t)i * (buf_size + QL_POOL_SLACK);
		b->capacity = buf_size;
		b->index = i;
		ql_buffer_reset(b, headroom);
		p->free[count - 1 - i] = b; /* so that buffer 0 comes out first */
	}
	p->nfree = count;
	p->count = count;
	p->headroom = headroom;
	*out = p;
	return 0;
}

void ql_pool_destroy(struct ql_pool *p)
{
	if (!p)
		return;
	free(p->bufs);
	free(p->free);
	free(p);
}

struct ql_buffer *ql_pool_get(struct ql_pool *p)
{
	struct ql_buffer *b;

	if (!p->nfree)
		return NULL;
	b = p->free[--p->nfree];
	ql_buffer_reset(b, p->headroom);
	return b;
}

void ql_pool_put(struct ql_pool *p, struct ql_buffer *b)
{
	if (p->nfree < p->count)
		p->free[p->nfree++] = b;
}

uint32_t ql_pool_available(const struct ql_pool *p)
{
	return p->nfree;
}
