/* SPDX-License-Identifier: MIT */
/*
 * The dispatch checks (internal), written once as host+device code: the CPU
 * dispatcher (rpc/dispatch.c: ql_rpc_dispatch and the daemon's guarded
 * step) and the GPU body (gpu/gpu_body.h: nvcc's persistent kernel and its
 * host emulation) both run these, so the statuses, their order, what is
 * echoed and the response header cannot drift apart.
 *
 * A request goes through them in the order of the response status values:
 *
 *   ql_rpc__check_header   SHORT, BAD_MAGIC, BAD_LENGTH (the header decoded:
 *                          request_id and timestamp echoed from here on)
 *   (the lookup)           the one step that differs: the CPU table's hash,
 *                          the device table's short linear scan
 *   ql_rpc__check_call     UNKNOWN_FUNCTION, ARGS_MISMATCH, RESULT_OVERFLOW;
 *                          the handler's output capacity
 *   ql_rpc__canary_set/_ok the guard right past that capacity
 *   ql_rpc__check_return   what the handler did with its streams and said
 *   ql_rpc__respond        the response header
 *
 * Nothing here allocates, locks, logs or enters the kernel; everything is
 * forced inline (the dispatch loop's cost is these compares).
 */
#ifndef QL_RPC_DISPATCH_CORE_H
#define QL_RPC_DISPATCH_CORE_H

#include <stdint.h>
#include <string.h>

#include "qlink/rpc_stream.h"
#include "qlink/rpc_wire.h"

#if defined(__CUDACC__)
#define QL_RPC__CORE QL_HD static __forceinline__
#else
#define QL_RPC__CORE static inline __attribute__((always_inline))
#endif

/* Not a value a handler writes by chance (nor zeros, nor a small integer),
 * stored in host order right past the handler's capacity. */
#define QL_RPC__CANARY_VALUE 0x5ca1ab1ec0ffee17ull
#define QL_RPC__CANARY_BYTES 8u

/* The header: SHORT (no header, or msg NULL), BAD_MAGIC, BAD_LENGTH
 * (arg_len past the message). h is zero until there is a header, decoded
 * from then on, even for a bad magic: the sender may still recognise its
 * message by the echoed request_id and ptp_timestamp. Returns the status
 * (0: go on) and sets *kind. */
QL_RPC__CORE int32_t ql_rpc__check_header(const uint8_t *msg, size_t msg_len,
					  struct ql_rpc_header *h, enum ql_rpc_err_kind *kind)
{
	if (!msg || msg_len < QL_RPC_HEADER_SIZE) {
		*kind = QL_RPC_ERR_SHORT;
		return QL_RPC_E_SHORT;
	}
	ql_rpc_header_decode(msg, h);
	if (h->magic != QL_RPC_MAGIC_REQUEST) {
		*kind = QL_RPC_ERR_BAD_MAGIC;
		return QL_RPC_E_BAD_MAGIC;
	}
	if (h->arg_len > msg_len - QL_RPC_HEADER_SIZE) {
		*kind = QL_RPC_ERR_BAD_LENGTH;
		return QL_RPC_E_BAD_LENGTH;
	}
	*kind = QL_RPC_ERR_NONE;
	return 0;
}

/* The function looked up (found or not) against the request. *cap comes
 * in as the room after the response header and goes out as what the
 * handler may write: a typed function exactly its declared results (it
 * cannot write past them), a raw one at most what the 32-bit result_len
 * can say. UNKNOWN_FUNCTION, ARGS_MISMATCH (arg_len is not the schema's),
 * RESULT_OVERFLOW (the declared results do not fit). */
QL_RPC__CORE int32_t ql_rpc__check_call(int found, int typed, size_t args_size, size_t results_size,
					uint32_t arg_len, size_t *cap, enum ql_rpc_err_kind *kind)
{
	if (!found) {
		*kind = QL_RPC_ERR_UNKNOWN_FUNCTION;
		return QL_RPC_E_UNKNOWN_FUNCTION;
	}
	if (typed) {
		if (arg_len != args_size) {
			*kind = QL_RPC_ERR_ARGS_MISMATCH;
			return QL_RPC_E_ARGS_MISMATCH;
		}
		if (results_size > *cap) {
			*kind = QL_RPC_ERR_RESULT_OVERFLOW;
			return QL_RPC_E_RESULT_OVERFLOW;
		}
		*cap = results_size;
	} else if (*cap > UINT32_MAX) {
		*cap = UINT32_MAX;
	}
	*kind = QL_RPC_ERR_NONE;
	return 0;
}

QL_RPC__CORE void ql_rpc__canary_set(uint8_t *p)
{
	uint64_t v = QL_RPC__CANARY_VALUE;

	memcpy(p, &v, sizeof(v));
}

/* 0 when the handler wrote over it: whatever it returned, its results are
 * not to be trusted (INTERNAL). */
QL_RPC__CORE int ql_rpc__canary_ok(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v == QL_RPC__CANARY_VALUE;
}

/* After the handler: stream errors first (facts about the message, whatever
 * the handler made of them: ARGS_MISMATCH for a read past the arguments,
 * RESULT_OVERFLOW for a write past the capacity), then a negative return
 * or a cursor outside its buffer (the handler wrote to the stream structs:
 * INTERNAL), its own positive status (HANDLER), a typed handler that wrote
 * fewer results than declared (INTERNAL); else success and *result_len. */
QL_RPC__CORE int32_t ql_rpc__check_return(int32_t ret, const struct ql_rpc_in *in,
					  const struct ql_rpc_out *out, int typed,
					  size_t results_size, uint32_t *result_len,
					  enum ql_rpc_err_kind *kind)
{
	*result_len = 0;
	if (in->err) {
		*kind = QL_RPC_ERR_ARGS_MISMATCH;
		return QL_RPC_E_ARGS_MISMATCH;
	}
	if (out->err) {
		*kind = QL_RPC_ERR_RESULT_OVERFLOW;
		return QL_RPC_E_RESULT_OVERFLOW;
	}
	if (ret < 0 || out->p < out->start || out->p > out->end) {
		*kind = QL_RPC_ERR_INTERNAL;
		return QL_RPC_E_INTERNAL;
	}
	if (ret > 0) {
		*kind = QL_RPC_ERR_HANDLER;
		return ret;
	}
	if (typed && ql_rpc_out_len(out) != results_size) {
		*kind = QL_RPC_ERR_INTERNAL;
		return QL_RPC_E_INTERNAL;
	}
	*kind = QL_RPC_ERR_NONE;
	*result_len = (uint32_t)ql_rpc_out_len(out);
	return 0;
}

/* The response header into resp[0..24): 'CUQS', the status, result_len (0
 * unless the status is 0), and the request's id and timestamp echoed (h as
 * ql_rpc__check_header left it). */
QL_RPC__CORE void ql_rpc__respond(uint8_t *resp, int32_t status, uint32_t result_len,
				  const struct ql_rpc_header *h)
{
	struct ql_rpc_response r;

	r.magic = QL_RPC_MAGIC_RESPONSE;
	r.status = status;
	r.result_len = result_len;
	r.request_id = h->request_id;
	r.ptp_timestamp = h->ptp_timestamp;
	ql_rpc_response_encode(resp, &r);
}

#endif
