/* SPDX-License-Identifier: MIT */
/*
 * ring: the qlink request ring, byte for byte, and its client.
 *
 * The server (RTH) exposes a ring in registered memory; a client (a QCS,
 * the VPPU) writes each request into the next slot with RDMA WRITE and the
 * server, polling the slot's sequence word, sees it with no CPU work on its
 * side until then. Responses come back as RDMA SEND into receive buffers the
 * client posted. docs/wire-protocol.md is the normative description; this
 * header gives the constants and a reference client.
 *
 *   ring:  | header (64 B) | slot 0 | slot 1 | ... | slot num_slots-1 |
 *   slot:  | seq u64 | len u32 | stamp u32 | message (len bytes) | ...
 *
 * Request n (n = 0, 1, 2, ...) goes to slot n % num_slots with seq n + 1
 * (stamp: its low 32 bits). The client writes | len | stamp | message |
 * first, then the 8-byte seq, as two RDMA WRITEs on one QP: the seq is
 * visible only after the message. A slot may be rewritten only after the
 * response to the request that used it has arrived (one response per
 * request, always). len is at most slot_size - 16; a larger one is
 * answered BAD_LENGTH.
 *
 * Over UC (unreliable connected) a WRITE or a response can be lost: the
 * client resends a request unanswered after a deadline, same slot, same
 * seq, same bytes (so the same request_id), and the server answers a
 * resend of a request it already ran from a cache of its last responses.
 */
#ifndef QLINK_RING_H
#define QLINK_RING_H

#include <stddef.h>
#include <stdint.h>

#include "qlink/verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QL_RING_MAGIC 0x474e5251u /* "QRNG": bytes 51 52 4e 47 */
#define QL_RING_VERSION 1
#define QL_RING_HDR_SIZE 64u
#define QL_RING_SLOT_HDR 16u /* seq u64, len u32, stamp u32 */
#define QL_RING_MAX_SLOTS 65536u
#define QL_RING_MIN_SLOT 64u
#define QL_RING_MAX_SLOT 65536u

/* Ring header offsets (all little-endian). */
#define QL_RING_OFF_MAGIC 0	 /* u32 QL_RING_MAGIC */
#define QL_RING_OFF_VERSION 4	 /* u16 QL_RING_VERSION */
#define QL_RING_OFF_HDR_SIZE 6	 /* u16 64 */
#define QL_RING_OFF_NUM_SLOTS 8	 /* u32 */
#define QL_RING_OFF_SLOT_SIZE 12 /* u32 */

/* 0 if (num_slots, slot_size) is a valid geometry, else -EINVAL. */
int ql_ring_check_geometry(uint32_t num_slots, uint32_t slot_size);

static inline size_t ql_ring_bytes(uint32_t num_slots, uint32_t slot_size)
{
	return QL_RING_HDR_SIZE + (size_t)num_slots * slot_size;
}

static inline uint64_t ql_ring_slot_offset(uint32_t num_slots, uint32_t slot_size, uint64_t n)
{
	return QL_RING_HDR_SIZE + (n & (num_slots - 1)) * (uint64_t)slot_size;
}

/* Write the 64-byte ring header into `ring`. */
void ql_ring_format(void *ring, uint32_t num_slots, uint32_t slot_size);

/* ---- the client (what QCS firmware implements) ------------------------- */

/* A ql_client of the ring transport (qlink/client.h: ql_client_from_ring). */

struct ql_ring_client;

struct ql_ring_client_config {
	uint32_t window; /* requests in flight at most (0: the ring's num_slots) */
	/* IBV_QPT_RC (0 means RC) or IBV_QPT_UC (must match the server's). */
	enum ibv_qp_type qp_type;
	/* UC: resend a request unanswered this long (0: 2 ms; the wait
	 * doubles after each resend, up to 64 times this), at most
	 * max_resends times (0: 8), then give it up (counted lost). */
	uint64_t resend_ns;
	uint32_t max_resends;
};

/* A response as received: points into the client's receive buffer, valid
 * until ql_ring_client_release. Responses come in request order. On UC a
 * request given up after max_resends comes as msg NULL, len 0 in its
 * place (release it like any other). */
struct ql_ring_response {
	const uint8_t *msg; /* RPCResponse | results; NULL: lost (UC) */
	uint32_t len;
	uint32_t slot; /* internal: the receive buffer to re-post */
};

/* What the client did about losses (UC; all 0 on RC). */
struct ql_ring_client_stats {
	uint64_t resent;	/* requests written again after their deadline */
	uint64_t lost;		/* requests given up after max_resends */
	uint64_t dup_responses; /* responses to a request already answered
				   (a resend raced the original): dropped */
};

/* Create a client on `dev` for the server ring described by `server`
 * (vaddr, rkey, length, num_slots, slot_size). */
int ql_ring_client_create(struct ql_device *dev, const struct ql_conn_params *server,
			  const struct ql_ring_client_config *cfg, struct ql_ring_client **cl);
void ql_ring_client_destroy(struct ql_ring_client *cl);
int ql_ring_client_local_params(struct ql_ring_client *cl, struct ql_conn_params *p);
int ql_ring_client_connect(struct ql_ring_client *cl, const struct ql_conn_params *server,
			   const struct ql_qp_connect_opts *opts);

/* Send one message (RPCHeader | args, `len` bytes) as the next request.
 * -EAGAIN when the window is full (poll for responses), -EMSGSIZE when it
 * does not fit a slot, -EIO when the QP failed. No allocation or syscall. */
int ql_ring_client_send(struct ql_ring_client *cl, const void *msg, uint32_t len);
/* Up to `max` responses, in arrival order; 0 when none. */
int ql_ring_client_poll(struct ql_ring_client *cl, struct ql_ring_response *out, int max);
/* Re-post the receive buffer of a response. */
int ql_ring_client_release(struct ql_ring_client *cl, const struct ql_ring_response *r);
/* Requests sent whose responses have not arrived. */
uint32_t ql_ring_client_in_flight(const struct ql_ring_client *cl);
/* The largest message a slot holds. */
uint32_t ql_ring_client_max_msg(const struct ql_ring_client *cl);
int ql_ring_client_stats(const struct ql_ring_client *cl, struct ql_ring_client_stats *st);

#ifdef __cplusplus
}
#endif
#endif
