/* SPDX-License-Identifier: MIT */
/*
 * Hololink register protocol, the wire format both ends share: the client
 * (hololink.c) and the emulated board (hololink_server.c). Words are
 * big-endian; a packet is the QL_HL_HEADER-byte header (opcode, flags,
 * sequence, status/reserved) and then (address, value) pairs of words.
 * Internal: not installed.
 */
#ifndef QL_CONTROL_HOLOLINK_WIRE_H
#define QL_CONTROL_HOLOLINK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "qlink/hololink.h"

static inline void hl_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t hl_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Pair i of a packet (the caller checked the packet holds it). */
static inline void hl_put_pair(uint8_t *pkt, size_t i, uint32_t addr, uint32_t value)
{
	hl_put32(pkt + QL_HL_HEADER + 8 * i, addr);
	hl_put32(pkt + QL_HL_HEADER + 8 * i + 4, value);
}

static inline uint32_t hl_pair_addr(const uint8_t *pkt, size_t i)
{
	return hl_get32(pkt + QL_HL_HEADER + 8 * i);
}

static inline uint32_t hl_pair_value(const uint8_t *pkt, size_t i)
{
	return hl_get32(pkt + QL_HL_HEADER + 8 * i + 4);
}

/* The pairs a block request of len bytes carries: 1 to QL_HL_BLOCK_MAX, or
 * 0 when its length is not a header and that many whole pairs. */
static inline size_t hl_block_pairs(size_t len)
{
	if (len <= QL_HL_HEADER || (len - QL_HL_HEADER) % 8 ||
	    (len - QL_HL_HEADER) / 8 > QL_HL_BLOCK_MAX)
		return 0;
	return (len - QL_HL_HEADER) / 8;
}

#endif
