/*
 * The server's view of a ring: finding the requests that arrived. Shared by
 * the verbs and loopback channels (internal).
 */
#ifndef QL_TRANSPORT_RX_RING_H
#define QL_TRANSPORT_RX_RING_H

#include <stdatomic.h>
#include <stdint.h>

#include "qlink/channel.h"
#include "qlink/ring.h"

struct ql_rx_ring {
	uint8_t *ring;
	uint32_t num_slots;
	uint32_t slot_size;
	uint64_t next;		/* the request expected next (seq next + 1) */
	struct ql_buffer *bufs; /* one per slot, wrapping its message */
};

/* Collect up to max consecutive requests that arrived. */
static inline int ql_rx_ring_burst(struct ql_rx_ring *r, struct ql_buffer **out, int max)
{
	const uint32_t cap = r->slot_size - QL_RING_SLOT_HDR;
	int n = 0;

	while (n < max) {
		uint64_t k = r->next + (uint64_t)n;
		uint8_t *slot = r->ring + ql_ring_slot_offset(r->num_slots, r->slot_size, k);
		struct ql_buffer *b;
		uint32_t len;

		if (atomic_load_explicit((_Atomic uint64_t *)(void *)slot, memory_order_acquire) !=
		    k + 1)
			break;
		b = &r->bufs[k & (r->num_slots - 1)];
		__builtin_memcpy(&len, slot + 8, 4);
		/* a length beyond the slot is the client's error: hand over what
		 * the slot holds; the RPC layer answers BAD_LENGTH */
		b->len = len <= cap ? len : cap;
		b->tag = k;
		out[n++] = b;
	}
	r->next += (uint64_t)n;
	return n;
}

int ql_rx_ring_init(struct ql_rx_ring *r, uint8_t *ring, uint32_t num_slots, uint32_t slot_size);
void ql_rx_ring_fini(struct ql_rx_ring *r);
void ql_rx_ring_reset(struct ql_rx_ring *r);

#endif
