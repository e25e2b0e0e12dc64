/*
 * The loopback channel: a ring in ordinary memory with the client side
 * played by ql_loop_channel_push/pop, so the daemon and RPC layers can be
 * tested (bad requests, flow control, wrap-around) without a NIC.
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
	struct ql_buffer **resp; /* responses sent, oldest first */
	uint32_t ntx;
	uint64_t resp_head;
	uint64_t resp_tail;
	uint64_t pushed; /* requests the "client" wrote */
	uint64_t popped; /* responses it took */
};

static const struct ql__channel_ops lch_ops;

static int lch_receive_burst(struct ql_channel *ch, struct ql_buffer **bufs, int max)
{
	return ql_rx_ring_burst(&((struct lch *)ch)->rx, bufs, max);
}

static int lch_send_burst(struct ql_channel *ch, struct ql_buffer **bufs, int n)
{
	struct lch *c = (struct lch *)ch;
	int i;

	for (i = 0; i < n && c->resp_tail - c->resp_head < c->ntx; i++)
		c->resp[c->resp_tail++ % c->ntx] = bufs[i];
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
	c->ntx = num_slots;
	c->ring = aligned_alloc(64, ql_ring_bytes(num_slots, slot_size));
	c->txmem = aligned_alloc(64, (size_t)num_slots * slot_size);
	c->resp = calloc(num_slots, sizeof(*c->resp));
	if (!c->ring || !c->txmem || !c->resp) {
		ret = -ENOMEM;
		goto err;
	}
	memset(c->ring, 0, ql_ring_bytes(num_slots, slot_size));
	ret = ql_rx_ring_init(&c->rx, c->ring, num_slots, slot_size);
	if (ret)
		goto err;
	ret = ql_pool_create(c->txmem, (size_t)num_slots * slot_size, num_slots, slot_size, 0,
			     &c->pool);
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
	struct ql_buffer *b;
	uint32_t len;

	if (!c || (cap && !buf))
		return -EINVAL;
	if (c->resp_head == c->resp_tail)
		return -EAGAIN;
	b = c->resp[c->resp_head % c->ntx];
	if (b->len > cap)
		return -EMSGSIZE;
	len = b->len;
	memcpy(buf, ql_buffer_data(b), len);
	c->resp_head++;
	c->popped++;
	ql_pool_put(c->pool, b);
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
