/* SPDX-License-Identifier: MIT */
/*
 * rpc_table: handlers, the function table keyed by FNV-1a function id, and
 * ql_rpc_dispatch(): one message in, one response out, safe against any
 * input, with no allocation, lock, system call or logging, so that the CPU
 * dispatcher (and later the GPU one) can call it in its polling loop.
 */
#ifndef QLINK_RPC_TABLE_H
#define QLINK_RPC_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "qlink/rpc_stream.h"
#include "qlink/rpc_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- function table -------------------------------------------------------- */

/*
 * There are two kinds of handler.
 *
 * A stream handler reads its arguments from in (exactly arg_len bytes) and
 * writes its results to out; it returns 0, or a positive status of its own
 * choosing (sent back with no results). A negative return is an internal
 * error. Typed (with a schema, see rpc_fn.h) or raw (without).
 */
typedef int32_t (*ql_rpc_handler_fn)(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx);

/*
 * A frame handler is CUDA-Q Realtime's HOST_CALL form: it gets the whole
 * request frame and writes the whole response frame. req[0..req_len) is the
 * 24-byte request header followed by its arg_len argument bytes (req_len =
 * 24 + arg_len; magic, arg_len and function id already checked); resp has
 * resp_cap bytes (at least 24). The handler writes the response header
 * itself (magic QL_RPC_MAGIC_RESPONSE, status, result_len, and request_id
 * and ptp_timestamp copied from the request; ql_rpc_response_encode does
 * it) followed by result_len result bytes, and returns:
 *  0   the frame in resp is the response;
 *  > 0 a status of its own, sent back with no results (the dispatcher
 *      writes the header and ignores resp, as for a stream handler);
 *  < 0 an internal error.
 * The dispatcher zeroes the response header before the call and checks the
 * frame afterwards: magic, request_id and ptp_timestamp echoed, result_len
 * <= resp_cap - 24, nothing written past resp_cap (the daemon's canary).
 * A frame that fails a check is replaced by a QL_RPC_E_INTERNAL response.
 * The status the handler writes is its own, negative values included (as
 * CUDA-QX's decoder handlers write -1..-5); a non-zero status goes back with
 * result_len 0 (the dispatcher rewrites it), so "results only with status
 * 0" holds for every kind of handler.
 */
typedef int32_t (*ql_rpc_frame_fn)(const uint8_t *req, size_t req_len, uint8_t *resp,
				   size_t resp_cap, void *ctx);

/* Exactly one of fn and frame is set; frame functions have no schema. */
struct ql_rpc_function {
	const char *name; /* for people and for duplicate detection */
	uint32_t id;	  /* function_id on the wire, normally ql_rpc_fnv1a(name) */
	ql_rpc_handler_fn fn;
	void *ctx;			    /* passed to fn or frame */
	const struct ql_rpc_schema *schema; /* NULL = raw: any arg_len, any results */
	ql_rpc_frame_fn frame;		    /* a frame handler instead of fn */
};

/*
 * The table is public so that lookup inlines into the dispatch loop, as
 * liburing exposes struct io_uring; treat every field as read-only.
 */
struct ql_rpc_table_entry {
	struct ql_rpc_function f; /* name and schema point at the table's own copies */
	struct ql_rpc_schema schema;
	uint32_t args_size, results_size; /* of the schema, when f.schema != NULL */
};

struct ql_rpc_table_slot {
	uint32_t id;
	int32_t index; /* into entries, or -1 for an empty slot */
};

struct ql_rpc_table {
	struct ql_rpc_table_slot *slots; /* open addressing, linear probing */
	uint32_t mask;			 /* nslots - 1; nslots >= 2 * capacity */
	uint32_t capacity;
	uint32_t count;
	struct ql_rpc_table_entry *entries; /* by index, 0..count-1 */
};

/* A table for up to capacity functions (1..65536). 0 or -EINVAL/-ENOMEM. */
int ql_rpc_table_create(uint32_t capacity, struct ql_rpc_table **out);
void ql_rpc_table_destroy(struct ql_rpc_table *t);

/*
 * Register f (copied, name and schema included; ctx is not owned). Returns
 * its index, which stays the same for the life of the table and numbers the
 * functions 0, 1, 2, ... in registration order, so per-function counters can
 * live in a plain array. -EINVAL for a NULL name, for neither or both of fn
 * and frame, for a frame function with a schema, or a schema that fails
 * ql_rpc_schema_check, -EEXIST if the id or the name is already there,
 * -ENOSPC if the table is full, -ENOMEM.
 */
int ql_rpc_table_add(struct ql_rpc_table *t, const struct ql_rpc_function *f);

static inline uint32_t ql_rpc_table_count(const struct ql_rpc_table *t)
{
	return t->count;
}

/* Index of the function with this id, or -1. O(1): the slot array is at most
 * half full, so a probe sequence always ends at an empty slot. */
static inline int ql_rpc_table_find(const struct ql_rpc_table *t, uint32_t id)
{
	uint32_t i = (id ^ (id >> 16)) & t->mask;

	for (;;) {
		const struct ql_rpc_table_slot *s = &t->slots[i];

		if (s->index < 0)
			return -1;
		if (s->id == id)
			return s->index;
		i = (i + 1) & t->mask;
	}
}

/* The function at index, or NULL if out of range. */
static inline const struct ql_rpc_function *ql_rpc_table_get(const struct ql_rpc_table *t,
							     int index)
{
	if (index < 0 || (uint32_t)index >= t->count)
		return NULL;
	return &t->entries[index].f;
}

static inline const struct ql_rpc_function *ql_rpc_table_lookup(const struct ql_rpc_table *t,
								uint32_t id)
{
	return ql_rpc_table_get(t, ql_rpc_table_find(t, id));
}

/* ---- dispatch ------------------------------------------------------------- */

struct ql_rpc_dispatch_info {
	int32_t status;		   /* as written in the response */
	enum ql_rpc_err_kind kind; /* QL_RPC_ERR_NONE on success */
	int32_t index;		   /* function index, -1 if none was found */
	uint32_t function_id;	   /* 0 when the header could not be read */
	uint32_t request_id;	   /* ditto */
	uint32_t arg_len;	   /* ditto */
	uint32_t result_len;	   /* as written in the response */
};

/*
 * Handle one request message msg[0..msg_len) and write the response into
 * resp[0..resp_cap). msg_len is what the message may occupy (the received
 * length, or the slot's capacity). Returns the status written.
 *
 * Guarantees, for any bytes in msg: exactly one response is written (magic
 * 'CUQS', status, result_len, then request_id and ptp_timestamp echoed, or
 * zeros when the message is shorter than a header) and *resp_len set to
 * 24 + result_len; result_len is 0 unless status is 0; nothing outside
 * msg[0..msg_len) is read and nothing outside resp[0..resp_cap) written; a
 * handler sees exactly arg_len bytes of input (for a typed function exactly
 * its schema's argument size; a frame handler the header before them) and
 * at most resp_cap - 24 bytes of output (a frame handler resp_cap bytes,
 * header included). No handler runs for a message that fails a header
 * check (short, magic, arg_len, unknown function; for a typed function its
 * argument size and room for its results).
 * No allocation, lock, system call or logging. msg and resp must not
 * overlap. resp_cap must be at least 24; if it is not (or resp is NULL)
 * nothing is written, *resp_len is 0 and QL_RPC_E_INTERNAL is returned.
 * info (may be NULL) says what happened, for counters.
 */
int32_t ql_rpc_dispatch(const struct ql_rpc_table *t, const uint8_t *msg, size_t msg_len,
			uint8_t *resp, size_t resp_cap, size_t *resp_len,
			struct ql_rpc_dispatch_info *info);

#ifdef __cplusplus
}
#endif
#endif
