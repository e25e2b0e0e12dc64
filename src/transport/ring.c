/* SPDX-License-Identifier: MIT */
/*
 * The qlink request ring: geometry and header (the client is
 * ring_client.c). See include/qlink/ring.h and docs/wire-protocol.md.
 */
#include <errno.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/ring.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the ring stores little-endian words with plain stores");

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int ql_ring_check_geometry(uint32_t num_slots, uint32_t slot_size)
{
	if (!num_slots || num_slots > QL_RING_MAX_SLOTS || (num_slots & (num_slots - 1)))
		return ql_error_set(-EINVAL, "ring: num_slots %u is not a power of two in 1..%u",
				    num_slots, QL_RING_MAX_SLOTS);
	if (slot_size < QL_RING_MIN_SLOT || slot_size > QL_RING_MAX_SLOT || (slot_size % 64))
		return ql_error_set(-EINVAL, "ring: slot_size %u is not a multiple of 64 in %u..%u",
				    slot_size, QL_RING_MIN_SLOT, QL_RING_MAX_SLOT);
	return 0;
}

void ql_ring_format(void *ring, uint32_t num_slots, uint32_t slot_size)
{
	uint8_t *h = ring;

	memset(h, 0, QL_RING_HDR_SIZE);
	put_le32(h + QL_RING_OFF_MAGIC, QL_RING_MAGIC);
	put_le16(h + QL_RING_OFF_VERSION, QL_RING_VERSION);
	put_le16(h + QL_RING_OFF_HDR_SIZE, QL_RING_HDR_SIZE);
	put_le32(h + QL_RING_OFF_NUM_SLOTS, num_slots);
	put_le32(h + QL_RING_OFF_SLOT_SIZE, slot_size);
}
