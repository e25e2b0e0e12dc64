/* SPDX-License-Identifier: MIT */
/*
 * The server's view of a ring: finding the requests that arrived. Shared by
 * the verbs and loopback channels (internal).
 */
#ifndef QL_TRANSPORT_RX_RING_H
#define QL_TRANSPORT_RX_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "qlink/channel.h"
#include "qlink/ring.h"

struct ql_rx_ring {
	uint8_t *ring;
	uint32_t num_slots;
	uint32_t slot_size;
	uint64_t next;		/* the request expected next (seq next + 1) */
	struct ql_buffer *bufs; /* one per slot, wrapping its message */
	/* UC: a slot counts only when its stamp (offset 12) equals the
	 * low 32 bits of seq, i.e. the WRITE of its message arrived too, and
	 * the seq word is cleared once taken, so that a resend of the same
	 * request shows as seq reappearing (docs/wire-protocol.md, UC). */
	bool uc;
};

/* Make a slot whose len exceeds the slot fail the RPC layer's length check
 * (BAD_LENGTH, request_id echoed) instead of being cut to the slot: the
 * message keeps its header, its arg_len is made larger than any slot. */
static inline void ql_rx_ring_poison_len(uint8_t *slot, uint32_t cap)
{
	const uint32_t bad = 0xffffffffu;

	if (cap >= QL_RING_SLOT_HDR + 12)
		__builtin_memcpy(slot + QL_RING_SLOT_HDR + 8, &bad, 4);
}

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
		if (r->uc) {
			uint32_t stamp;

			__builtin_memcpy(&stamp, slot + 12, 4);
			/* seq without its message: the first WRITE was lost,
			 * wait for the resend */
			if (stamp != (uint32_t)(k + 1))
				break;
			atomic_store_explicit((_Atomic uint64_t *)(void *)slot, 0,
					      memory_order_relaxed);
		}
		b = &r->bufs[k & (r->num_slots - 1)];
		__builtin_memcpy(&len, slot + 8, 4);
		/* a length beyond the slot is the client's error: the RPC layer
		 * answers BAD_LENGTH (the valid range is 0..slot_size - 16) */
		if (len > cap) {
			ql_rx_ring_poison_len(slot, cap);
			len = cap;
		}
		b->len = len;
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
