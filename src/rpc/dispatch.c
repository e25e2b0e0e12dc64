/* SPDX-License-Identifier: MIT */
/*
 * The dispatch step: one request message in, one response out.
 *
 * Every check happens before the handler runs, in the order of the response
 * status values, so a malformed message costs a few compares and never
 * reaches user code; a typed handler therefore always gets exactly its
 * schema's argument bytes and room for exactly its results. What the handler
 * does with its streams is checked afterwards; a frame handler's response
 * header likewise (magic, echoes, result_len within its capacity). Nothing here allocates,
 * locks, logs or enters the kernel: this runs in the dispatcher's busy loop.
 */
#include <string.h>

#include "qlink/rpc.h"
#include "rpc/dispatch_int.h"

/* Not a value a handler writes by chance (nor zeros, nor a small integer). */
static const uint64_t canary_value = 0x5ca1ab1ec0ffee17ull;

/* The one implementation, inlined twice: guarded (cur_name and overrun
 * given) for the daemon, plain for ql_rpc_dispatch. */
static inline __attribute__((always_inline)) int32_t
dispatch(const struct ql_rpc_table *t, const uint8_t *msg, size_t msg_len, uint8_t *resp,
	 size_t resp_cap, size_t *resp_len, struct ql_rpc_dispatch_info *info,
	 const char **cur_name, bool *overrun)
{
	struct ql_rpc_header h = { 0 };
	const struct ql_rpc_table_entry *e;
	enum ql_rpc_err_kind kind = QL_RPC_ERR_NONE;
	struct ql_rpc_response r;
	struct ql_rpc_in in;
	struct ql_rpc_out out;
	int32_t status = 0, ret;
	uint32_t result_len = 0;
	size_t cap;
	int index = -1;

	if (__builtin_expect(!resp || resp_cap < QL_RPC_RESPONSE_SIZE, 0)) {
		if (resp_len)
			*resp_len = 0;
		if (info)
			*info = (struct ql_rpc_dispatch_info){ .status = QL_RPC_E_INTERNAL,
							       .kind = QL_RPC_ERR_INTERNAL,
							       .index = -1 };
		return QL_RPC_E_INTERNAL;
	}

	if (!msg || msg_len < QL_RPC_HEADER_SIZE) {
		status = QL_RPC_E_SHORT;
		kind = QL_RPC_ERR_SHORT;
		goto respond;
	}
	/* From here on request_id and ptp_timestamp are echoed, even for a bad
	 * magic: the sender may still recognise its message by them. */
	ql_rpc_header_decode(msg, &h);
	if (h.magic != QL_RPC_MAGIC_REQUEST) {
		status = QL_RPC_E_BAD_MAGIC;
		kind = QL_RPC_ERR_BAD_MAGIC;
		goto respond;
	}
	if (h.arg_len > msg_len - QL_RPC_HEADER_SIZE) {
		status = QL_RPC_E_BAD_LENGTH;
		kind = QL_RPC_ERR_BAD_LENGTH;
		goto respond;
	}
	index = t ? ql_rpc_table_find(t, h.function_id) : -1;
	if (index < 0) {
		status = QL_RPC_E_UNKNOWN_FUNCTION;
		kind = QL_RPC_ERR_UNKNOWN_FUNCTION;
		goto respond;
	}
	e = &t->entries[index];
	if (e->f.frame)
		goto frame;
	cap = resp_cap - QL_RPC_RESPONSE_SIZE;
	if (e->f.schema) {
		if (h.arg_len != e->args_size) {
			status = QL_RPC_E_ARGS_MISMATCH;
			kind = QL_RPC_ERR_ARGS_MISMATCH;
			goto respond;
		}
		if (e->results_size > cap) {
			status = QL_RPC_E_RESULT_OVERFLOW;
			kind = QL_RPC_ERR_RESULT_OVERFLOW;
			goto respond;
		}
		/* a typed handler cannot write past its declared results */
		cap = e->results_size;
	} else if (cap > UINT32_MAX) {
		cap = UINT32_MAX; /* result_len is 32 bits */
	}

	ql_rpc_in_init(&in, msg + QL_RPC_HEADER_SIZE, h.arg_len);
	ql_rpc_out_init(&out, resp + QL_RPC_RESPONSE_SIZE, cap);
	if (cur_name) {
		memcpy(resp + QL_RPC_RESPONSE_SIZE + cap, &canary_value, sizeof(canary_value));
		__atomic_store_n(cur_name, e->f.name, __ATOMIC_RELAXED);
	}
	ret = e->f.fn(&in, &out, e->f.ctx);
	if (cur_name &&
	    memcmp(resp + QL_RPC_RESPONSE_SIZE + cap, &canary_value, sizeof(canary_value))) {
		/* it wrote past its capacity: whatever it returned, its
		 * results are not to be trusted */
		*overrun = true;
		status = QL_RPC_E_INTERNAL;
		kind = QL_RPC_ERR_INTERNAL;
		goto respond;
	}

	/* Stream errors first: they are facts about the message, whatever the
	 * handler made of them. A cursor outside its buffer means the handler
	 * wrote to the stream structs directly. */
	if (in.err) {
		status = QL_RPC_E_ARGS_MISMATCH;
		kind = QL_RPC_ERR_ARGS_MISMATCH;
	} else if (out.err) {
		status = QL_RPC_E_RESULT_OVERFLOW;
		kind = QL_RPC_ERR_RESULT_OVERFLOW;
	} else if (ret < 0 || out.p < out.start || out.p > out.end) {
		status = QL_RPC_E_INTERNAL;
		kind = QL_RPC_ERR_INTERNAL;
	} else if (ret > 0) {
		status = ret;
		kind = QL_RPC_ERR_HANDLER;
	} else if (e->f.schema && ql_rpc_out_len(&out) != e->results_size) {
		/* a typed handler that wrote fewer results than it declared */
		status = QL_RPC_E_INTERNAL;
		kind = QL_RPC_ERR_INTERNAL;
	} else {
		result_len = (uint32_t)ql_rpc_out_len(&out);
	}

	goto respond;

frame:
	/* The handler writes the whole frame; its capacity (header included)
	 * is what result_len can say plus the header. */
	cap = resp_cap - QL_RPC_RESPONSE_SIZE > UINT32_MAX ?
		      QL_RPC_RESPONSE_SIZE + (size_t)UINT32_MAX :
		      resp_cap;
	/* A handler that writes no header must not send a stale one. */
	memset(resp, 0, QL_RPC_RESPONSE_SIZE);
	if (cur_name) {
		memcpy(resp + cap, &canary_value, sizeof(canary_value));
		__atomic_store_n(cur_name, e->f.name, __ATOMIC_RELAXED);
	}
	ret = e->f.frame(msg, QL_RPC_HEADER_SIZE + (size_t)h.arg_len, resp, cap, e->f.ctx);
	if (cur_name && memcmp(resp + cap, &canary_value, sizeof(canary_value))) {
		*overrun = true;
		status = QL_RPC_E_INTERNAL;
		kind = QL_RPC_ERR_INTERNAL;
		goto respond;
	}
	if (ret > 0) {
		status = ret;
		kind = QL_RPC_ERR_HANDLER;
		goto respond;
	}
	ql_rpc_response_decode(resp, &r);
	if (ret < 0 || r.magic != QL_RPC_MAGIC_RESPONSE || r.request_id != h.request_id ||
	    r.ptp_timestamp != h.ptp_timestamp || r.result_len > cap - QL_RPC_RESPONSE_SIZE) {
		status = QL_RPC_E_INTERNAL;
		kind = QL_RPC_ERR_INTERNAL;
		goto respond;
	}
	/* Its own status, whatever the sign. The header is re-encoded below:
	 * the same bytes, except result_len 0 with a non-zero status. */
	status = r.status;
	if (status)
		kind = QL_RPC_ERR_HANDLER;
	else
		result_len = r.result_len;

respond:
	r.magic = QL_RPC_MAGIC_RESPONSE;
	r.status = status;
	r.result_len = result_len;
	r.request_id = h.request_id;
	r.ptp_timestamp = h.ptp_timestamp;
	ql_rpc_response_encode(resp, &r);
	if (resp_len)
		*resp_len = QL_RPC_RESPONSE_SIZE + (size_t)result_len;
	if (info) {
		info->status = status;
		info->kind = kind;
		info->index = index;
		info->function_id = h.function_id;
		info->request_id = h.request_id;
		info->arg_len = h.arg_len;
		info->result_len = result_len;
	}
	return status;
}

int32_t ql_rpc_dispatch(const struct ql_rpc_table *t, const uint8_t *msg, size_t msg_len,
			uint8_t *resp, size_t resp_cap, size_t *resp_len,
			struct ql_rpc_dispatch_info *info)
{
	return dispatch(t, msg, msg_len, resp, resp_cap, resp_len, info, NULL, NULL);
}

int32_t ql__rpc_dispatch_guarded(const struct ql_rpc_table *t, const uint8_t *msg, size_t msg_len,
				 uint8_t *resp, size_t resp_cap, size_t *resp_len,
				 struct ql_rpc_dispatch_info *info, const char **cur_name,
				 bool *overrun)
{
	*overrun = false;
	return dispatch(t, msg, msg_len, resp, resp_cap, resp_len, info, cur_name, overrun);
}
