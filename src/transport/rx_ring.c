/* SPDX-License-Identifier: MIT */
/* Setup of the server's ring view (see rx_ring.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport/rx_ring.h"

int ql_rx_ring_init(struct ql_rx_ring *r, uint8_t *ring, uint32_t num_slots, uint32_t slot_size)
{
	int ret = ql_ring_check_geometry(num_slots, slot_size);

	if (ret)
		return ret;
	r->ring = ring;
	r->num_slots = num_slots;
	r->slot_size = slot_size;
	r->next = 0;
	r->uc = false;
	r->bufs = calloc(num_slots, sizeof(*r->bufs));
	if (!r->bufs)
		return -ENOMEM;
	for (uint32_t i = 0; i < num_slots; i++) {
		struct ql_buffer *b = &r->bufs[i];

		b->base = ring + ql_ring_slot_offset(num_slots, slot_size, i);
		b->capacity = slot_size;
		b->offset = QL_RING_SLOT_HDR;
		b->index = i;
	}
	ql_ring_format(ring, num_slots, slot_size);
	return 0;
}

void ql_rx_ring_fini(struct ql_rx_ring *r)
{
	free(r->bufs);
	r->bufs = NULL;
}

void ql_rx_ring_reset(struct ql_rx_ring *r)
{
	memset(r->ring + QL_RING_HDR_SIZE, 0, (size_t)r->num_slots * r->slot_size);
	r->next = 0;
}
