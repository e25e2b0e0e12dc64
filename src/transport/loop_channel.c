/* SPDX-License-Identifier: MIT */
/*
 * The loopback channel: a ring in ordinary memory with the client side
 * played by ql_loop_channel_push/pop, so the daemon and RPC layers can be
 * tested (bad requests, flow control, wrap-around) without a NIC. One
 * thread may play the client while another serves.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "transport/rx_ring.h"

struct lch {
	struct ql__channel_head head;
	uint8_t *ring;
	struct ql_rx_ring rx;
	uint8_t *txmem;
	struct ql_pool *pool;
	/* Responses, copied out of the transmit buffers into a single-producer
	 * single-consumer ring, so that the "client" (push/pop) and the server
	 * (the burst calls) may run in different threads. */
	uint8_t *resp;
	uint32_t nresp;
	_Atomic uint64_t resp_head; /* written by pop */
	_Atomic uint64_t resp_tail; /* written by send_burst */
	uint64_t pushed;	    /* client side only */
	uint64_t popped;	    /* client side only */
};

#define RESP_ENTRY(c, i) ((c)->resp + ((i) % (c)->nresp) * (4 + (size_t)(c)->rx.slot_size))

static const struct ql__channel_ops lch_ops;

static int lch_receive_burst(struct ql_channel *ch, struct ql_buffer **bufs, int max)
{
	return ql_rx_ring_burst(&((struct lch *)ch)->rx, bufs, max);
}

static int lch_send_burst(struct ql_channel *ch, struct ql_buffer **bufs, int n)
{
	struct lch *c = (struct lch *)ch;
	uint64_t tail = atomic_load_explicit(&c->resp_tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&c->resp_head, memory_order_acquire);
	int i;

	for (i = 0; i < n && tail - head < c->nresp; i++, tail++) {
		uint8_t *e = RESP_ENTRY(c, tail);
		uint32_t len = bufs[i]->len <= c->rx.slot_size ? bufs[i]->len : c->rx.slot_size;

		memcpy(e, &len, 4);
		memcpy(e + 4, ql_buffer_data(bufs[i]), len);
		ql_pool_put(c->pool, bufs[i]);
	}
	atomic_store_explicit(&c->resp_tail, tail, memory_order_release);
	return i;
}

static struct ql_buffer *lch_acquire(struct ql_channel *ch)
{
	return ql_pool_get(((struct lch *)ch)->pool);
}

static void lch_release(struct ql_channel *ch, struct ql_buffer *b)
{
	struct lch *c = (struct lch *)ch;

	if (b >= c->rx.bufs && b < c->rx.bufs + c->rx.num_slots)
		return;
	ql_pool_put(c->pool, b);
}

static int lch_register(struct ql_channel *ch, void *addr, size_t len, uint32_t *lkey)
{
	(void)ch;
	(void)addr;
	(void)len;
	*lkey = 0;
	return 0;
}

static int lch_poll_errors(struct ql_channel *ch)
{
	(void)ch;
	return 0;
}

static void lch_destroy(struct ql_channel *ch)
{
	struct lch *c = (struct lch *)ch;

	ql_rx_ring_fini(&c->rx);
	ql_pool_destroy(c->pool);
	free(c->resp);
	free(c->ring);
	free(c->txmem);
	free(c);
}

int ql_loop_channel_create(uint32_t num_slots, uint32_t slot_size, struct ql_channel **out)
{
	struct lch *c;
	int ret = ql_ring_check_geometry(num_slots, slot_size);

	if (ret)
		return ret;
	if (!out)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->head.ops = &lch_ops;
	c->nresp = num_slots;
	c->ring = aligned_alloc(64, ql_ring_bytes(num_slots, slot_size));
	/* aligned_alloc wants a multiple of the alignment */
	c->txmem =
		aligned_alloc(64, (ql_pool_region_size(num_slots, slot_size) + 63) & ~(size_t)63);
	c->resp = malloc((size_t)num_slots * (4 + (size_t)slot_size));
	if (!c->ring || !c->txmem || !c->resp) {
		ret = -ENOMEM;
		goto err;
	}
	memset(c->ring, 0, ql_ring_bytes(num_slots, slot_size));
	ret = ql_rx_ring_init(&c->rx, c->ring, num_slots, slot_size);
	if (ret)
		goto err;
	ret = ql_pool_create(c->txmem, ql_pool_region_size(num_slots, slot_size), num_slots,
			     slot_size, 0, &c->pool);
	if (ret)
		goto err;
	*out = (struct ql_channel *)c;
	return 0;
err:
	lch_destroy((struct ql_channel *)c);
	return ret;
}

static struct lch *to_lch(struct ql_channel *ch)
{
	if (!ch || ((const struct ql__channel_head *)(const void *)ch)->ops != &lch_ops)
		return NULL;
	return (struct lch *)ch;
}

int ql_loop_channel_push(struct ql_channel *ch, const void *msg, uint32_t len, uint32_t msg_bytes)
{
	struct lch *c = to_lch(ch);
	uint8_t *slot;
	uint64_t seq;

	if (!c || (msg_bytes && !msg))
		return -EINVAL;
	if (msg_bytes > c->rx.slot_size - QL_RING_SLOT_HDR)
		return -EMSGSIZE;
	if (c->pushed - c->popped >= c->rx.num_slots)
		return -EAGAIN;
	slot = c->ring + ql_ring_slot_offset(c->rx.num_slots, c->rx.slot_size, c->pushed);
	memcpy(slot + 8, &len, 4);
	memset(slot + 12, 0, 4);
	memcpy(slot + QL_RING_SLOT_HDR, msg, msg_bytes);
	seq = c->pushed + 1;
	atomic_store_explicit((_Atomic uint64_t *)(void *)slot, seq, memory_order_release);
	c->pushed++;
	return 0;
}

int ql_loop_channel_pop(struct ql_channel *ch, void *buf, uint32_t cap)
{
	struct lch *c = to_lch(ch);
	uint64_t head;
	uint32_t len;
	uint8_t *e;

	if (!c || (cap && !buf))
		return -EINVAL;
	head = atomic_load_explicit(&c->resp_head, memory_order_relaxed);
	if (head == atomic_load_explicit(&c->resp_tail, memory_order_acquire))
		return -EAGAIN;
	e = RESP_ENTRY(c, head);
	memcpy(&len, e, 4);
	if (len > cap)
		return -EMSGSIZE;
	memcpy(buf, e + 4, len);
	atomic_store_explicit(&c->resp_head, head + 1, memory_order_release);
	c->popped++;
	return (int)len;
}

static const struct ql__channel_ops lch_ops = {
	.receive_burst = lch_receive_burst,
	.send_burst = lch_send_burst,
	.acquire_buffer = lch_acquire,
	.release_buffer = lch_release,
	.register_memory = lch_register,
	.poll_errors = lch_poll_errors,
	.destroy = lch_destroy,
};
